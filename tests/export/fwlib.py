"""Independent readers and validators of psearch's framework exports (tests only; Python 3.11 stdlib).

Written from each framework's documented and coded rules (the file and commit of each rule are cited; the flag and key
names come from the lists in tests/data/export/, extracted from the sources by extract_*.py). Nothing here is copied
from psearch's C code: the checks and the partition / schedule formulas are re-derived from the frameworks.

validate_<fw>(text, gpus, keys) -> list of broken rules ([] = the framework accepts the launch)
read_<fw>(text, gpus, model) -> (plan dict in psearch's plan.json form, estimate options)
"""
import json
import math
import re
import shlex
import tomllib

import megatron_model


# ---------------------------------------------------------------- Megatron-LM (NVIDIA/Megatron-LM d98e8a64ddf3)

def megatron_args(text, flags):
    """{flag: value or True} from the argument lines before the first blank line (shell words)."""
    block = text.split("\n\n", 1)[0]
    for line in block.splitlines():
        if line.lstrip().startswith("#"):
            raise ValueError(f"comment inside the command: {line!r}")
    words = shlex.split(block.replace("\\\n", " "))  # a backslash-newline continues the line, as in a shell
    out, errors, i = {}, [], 0
    while i < len(words):
        w = words[i]
        if w not in flags:
            errors.append(f"unknown flag {w}")
            i += 1
            continue
        if w in out:
            errors.append(f"{w} given twice")
        if flags[w]["value"]:
            if i + 1 >= len(words):
                errors.append(f"{w} needs a value")
                break
            out[w] = words[i + 1]
            ch = flags[w]["choices"]
            if ch is not None and words[i + 1] not in [str(c) for c in ch]:
                errors.append(f"{w} {words[i + 1]}: not one of {ch}")
            i += 2
        else:
            out[w] = True
            i += 1
    return out, errors


def megatron_layout(s):
    """megatron/core/transformer/pipeline_parallel_layer_layout.py parse_str_to_list, re-derived: commas are
    cosmetic, (..)*n and x*n repeat, '|' separates stages; E embedding, t decoder, L loss, m mtp."""
    s = s.replace(",", "")
    s = re.sub(r"\(([^)]+)\)\*(\d+)", lambda m: m.group(1) * int(m.group(2)), s)
    s = re.sub(r"(.)\*(\d+)", lambda m: m.group(1) * int(m.group(2)), s)
    stages = s.split("|")
    for st in stages:
        for ch in st:
            if ch not in "ELtm":
                raise ValueError(f"layout character {ch!r}")
    return stages


def megatron_stage_layers(a, errors):
    """Transformer layers per virtual stage (chunk c of rank r at c*pp + r), per Megatron's rules: arguments.py
    validate_args (exclusive options, divisibility), transformer_config.py (uneven first/last), transformer_block.py
    get_num_layers_to_build (even split, chunks of a rank equal)."""
    L = int(a.get("--num-layers", 0))
    pp = int(a.get("--pipeline-model-parallel-size", 1))
    exclusive = [k for k in ("--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
                             "--pipeline-model-parallel-layout") if k in a]
    if len(exclusive) > 1:
        errors.append(f"arguments.py: at most one of {exclusive}")
    first, last = a.get("--decoder-first-pipeline-num-layers"), a.get("--decoder-last-pipeline-num-layers")
    if "--pipeline-model-parallel-layout" in a:
        if first or last:
            errors.append("transformer_config.py: the layout cannot be set with first/last stage layers")
        stages = megatron_layout(a["--pipeline-model-parallel-layout"])
        if len(stages) % pp:
            errors.append(f"layout of {len(stages)} stages not divisible by pp {pp}")
            return None, 1
        flat = "".join(stages)
        if not flat.startswith("E") or not flat.endswith("L") or flat.count("E") != 1 or flat.count("L") != 1:
            errors.append("layout: the embedding must open it and the loss close it, once each")
        if flat.count("t") != L:
            errors.append(f"layout holds {flat.count('t')} decoder layers, --num-layers {L}")
        return [st.count("t") for st in stages], len(stages) // pp
    vpp = 1
    if "--num-virtual-stages-per-pipeline-rank" in a:
        vpp = int(a["--num-virtual-stages-per-pipeline-rank"])
    if "--num-layers-per-virtual-pipeline-stage" in a:
        if first or last:
            errors.append("arguments.py: uneven first/last stages need --num-virtual-stages-per-pipeline-rank")
        per = int(a["--num-layers-per-virtual-pipeline-stage"])
        if L % pp or (L // pp) % per:
            errors.append("layers per stage not divisible by layers per virtual stage")
            return None, 1
        vpp = L // pp // per
    if vpp > 1 and pp < 2:
        errors.append("arguments.py: interleaving needs pp > 1")
    per_rank = [0] * pp
    if first or last:
        rest, left = L, pp
        if first:
            rest -= int(first)
            left -= 1
        if last:
            rest -= int(last)
            left -= 1
        if bool(rest) != bool(left) or (left and rest % left):
            errors.append(f"transformer_config.py: {rest} middle layers do not split over {left} middle stages")
            return None, vpp
        per_rank = [rest // left if left else 0] * pp
        if first:
            per_rank[0] = int(first)
        if last:
            per_rank[-1] = int(last)
    else:
        if L % pp:
            errors.append(f"arguments.py: {L} layers not divisible by pp {pp}")
            return None, vpp
        per_rank = [L // pp] * pp
    for r in range(pp):
        if per_rank[r] % vpp:
            errors.append(f"transformer_block.py: {per_rank[r]} layers of rank {r} do not split into {vpp} chunks")
            return None, vpp
    return [per_rank[r] // vpp for c in range(vpp) for r in range(pp)], vpp


def validate_megatron(text, gpus, keys):
    flags = keys["flags"]
    try:
        a, errors = megatron_args(text, flags)
    except ValueError as e:
        return [str(e)]
    num = lambda k, d=None: int(a[k]) if k in a else d
    tp, pp = num("--tensor-model-parallel-size", 1), num("--pipeline-model-parallel-size", 1)
    cp = num("--context-parallel-size", 1)
    if gpus % (tp * pp * cp):  # arguments.py: total_model_size = tp x pp x cp
        errors.append(f"world {gpus} not divisible by tp x pp x cp {tp * pp * cp}")
        return errors
    dp = gpus // (tp * pp * cp)
    mbs, gbs = num("--micro-batch-size", 1), num("--global-batch-size")
    if gbs is None or gbs % (mbs * dp):
        errors.append(f"global batch {gbs} not a multiple of micro-batch {mbs} x dp {dp}")
        return errors
    micro = gbs // (mbs * dp)
    for k in ("--num-layers", "--hidden-size", "--num-attention-heads", "--seq-length", "--max-position-embeddings"):
        if k not in a:
            errors.append(f"{k} missing")
    if errors:
        return errors
    heads, hidden = num("--num-attention-heads"), num("--hidden-size")
    if heads % tp:
        errors.append(f"heads {heads} not divisible by tp {tp}")
    if "--kv-channels" not in a and hidden % heads:
        errors.append("hidden size not divisible by heads (give --kv-channels)")
    if num("--ffn-hidden-size", 4 * hidden) % tp:
        errors.append("MLP width not divisible by tp")
    if "--num-query-groups" in a and "--group-query-attention" not in a:
        errors.append("--num-query-groups without --group-query-attention is ignored")
    if "--group-query-attention" in a:
        g = num("--num-query-groups", 1)
        if heads % g:
            errors.append("heads not divisible by query groups")
        if g % tp and tp % g:  # transformer_config.py: a multiple or a divisor of tp
            errors.append(f"query groups {g} neither a multiple nor a divisor of tp {tp}")
    seq = num("--seq-length")
    if a.get("--position-embedding-type", "learned_absolute") == "learned_absolute" and \
            num("--max-position-embeddings") < seq:
        errors.append("max position embeddings below the sequence length")
    sp = "--sequence-parallel" in a
    if sp and tp == 1:
        errors.append("arguments.py disables --sequence-parallel with tp 1: the flag would be ignored")
    if sp and seq % tp:
        errors.append("sequence not divisible by tp with sequence parallelism")
    if "--tp-comm-overlap" in a and not sp:
        errors.append("arguments.py: --tp-comm-overlap needs --sequence-parallel")
    te = a.get("--transformer-impl", "transformer_engine") == "transformer_engine"
    if cp > 1:
        kind = a.get("--cp-comm-type", "p2p")  # arguments.py: default ["p2p"]
        if seq % (2 * cp):  # arguments.py
            errors.append("seq-length should be a multiple of 2 * context-parallel-size")
        if not te:  # dot_product_attention.py: "Context parallelism is only supported by TEDotProductAttention!"
            errors.append("context parallelism needs Transformer Engine's attention")
        if a.get("--attention-backend", "auto") in ("unfused", "local"):
            # Transformer Engine runs context parallelism in its flash and fused (cuDNN) attention only
            errors.append("context parallelism needs a flash or fused attention backend")
        if kind not in ("p2p", "a2a", "allgather", "a2a+p2p"):
            errors.append(f"--cp-comm-type {kind}: not p2p, a2a, allgather or a2a+p2p")
        if kind == "a2a+p2p" and "--hierarchical-context-parallel-sizes" not in a:
            errors.append("a2a+p2p needs --hierarchical-context-parallel-sizes")
        if kind == "a2a":
            # Transformer Engine context_parallel.py AttnFuncWithCPAndQKVOA2A: heads of Q and of K, V on a TP rank
            # divisible by cp
            groups = num("--num-query-groups", heads) if "--group-query-attention" in a else heads
            if (heads // tp) % cp or max(groups // tp, 1) % cp:
                errors.append(f"a2a: heads per TP rank ({heads // tp} query, {max(groups // tp, 1)} key/value) not "
                              f"divisible by cp {cp}")
        if sp and (seq // cp) % tp:
            errors.append("each context-parallel shard of the sequence must split over tp (sequence parallelism)")
    elif "--cp-comm-type" in a:
        errors.append("--cp-comm-type without --context-parallel-size > 1 does nothing")
    if ("--tp-comm-overlap" in a or "--fp8-format" in a) and not te:
        errors.append("--tp-comm-overlap / --fp8-format need Transformer Engine")
    layers, vpp = megatron_stage_layers(a, errors)
    if vpp > 1 and (micro < pp or micro % pp):
        # schedules.py forward_backward_pipelining_with_interleaving: groups of pp micro-batches
        errors.append(f"interleaving: {micro} micro-batches not a multiple of pp {pp}")
    g = a.get("--recompute-granularity")
    if g == "full":
        if a.get("--recompute-method") not in ("uniform", "block") or "--recompute-num-layers" not in a:
            errors.append("transformer_config.py: full recomputation needs a method and a layer count")
    elif g == "selective":
        if "--recompute-method" in a or "--recompute-num-layers" in a:
            errors.append("selective recomputation takes no method or layer count")
    elif "--recompute-method" in a or "--recompute-num-layers" in a:
        errors.append("recompute method without granularity")
    fsdp = "--use-megatron-fsdp" in a
    if "--overlap-param-gather" in a:
        if not ("--use-distributed-optimizer" in a or fsdp):
            errors.append("arguments.py: --overlap-param-gather needs the distributed optimizer or Megatron-FSDP")
        if "--overlap-grad-reduce" not in a:
            errors.append("arguments.py: --overlap-param-gather needs --overlap-grad-reduce")
    if fsdp:
        if a.get("--ckpt-format") != "fsdp_dtensor":
            errors.append("arguments.py: Megatron-FSDP needs --ckpt-format fsdp_dtensor")
        if pp > 1:
            errors.append("Megatron-FSDP with pipeline parallelism: documented, exampled and tested with pp 1 only "
                          "(v2 refuses it, mcore_fsdp_adapter.py)")
    elif "--data-parallel-sharding-strategy" in a:
        errors.append("--data-parallel-sharding-strategy without --use-megatron-fsdp does nothing")
    if "--bf16" in a and "--fp16" in a:
        errors.append("--bf16 and --fp16 together")
    if "--fp8-format" in a and not ("--bf16" in a or "--fp16" in a):
        errors.append("FP8 runs inside bf16/fp16 mixed precision")
    if num("--make-vocab-size-divisible-by", 128) < 1:
        errors.append("vocabulary divisor below 1")
    errors += megatron_moe_errors(a, num, gpus, tp, pp, sp)
    return errors


def megatron_moe_errors(a, num, gpus, tp, pp, sp):
    """Megatron-LM's rules for experts and latent attention (d98e8a64)."""
    errors = []
    experts = num("--num-experts")
    ep = num("--expert-model-parallel-size", 1)
    etp = num("--expert-tensor-parallel-size", tp)  # arguments.py: None -> tensor_model_parallel_size
    if experts is None:
        if ep > 1:  # arguments.py: "num_experts must be non None to use expert model parallelism"
            errors.append("expert parallelism without --num-experts")
        moe_only = [k for k in a if k.startswith("--moe-") or k == "--expert-tensor-parallel-size"]
        if moe_only:  # nothing reads them without experts: the launch would not be what it says
            errors.append(f"{', '.join(moe_only)} without --num-experts do nothing")
    else:
        if experts % ep:  # arguments.py: "Number of experts should be a multiple of expert model parallel_size."
            errors.append(f"{experts} experts not a multiple of ep {ep}")
        if gpus % (etp * ep * pp):  # parallel_state.py: world % (etp x ep x pp), the expert grid
            errors.append(f"world {gpus} not divisible by etp x ep x pp {etp * ep * pp}")
        if tp > 1 and not sp:  # moe/moe_layer.py MoELayer.forward raises in training
            errors.append("MoE with tensor parallelism needs --sequence-parallel (moe_layer.py)")
        if "--disable-bias-linear" not in a and etp != 1:  # transformer_config.py
            errors.append("Bias in Moe is only supported when ETP==1")
        width = num("--moe-ffn-hidden-size", num("--ffn-hidden-size", 0))
        if width and width % etp:  # transformer_engine.py TEGroupedLinear: divide(output_size, tp_size)
            errors.append(f"expert width {width} not divisible by etp {etp}")
        score = a.get("--moe-router-score-function", "softmax")
        if "--moe-router-enable-expert-bias" in a and score not in ("sigmoid", "sqrtsoftplus"):
            errors.append("transformer_config.py: expert bias only with sigmoid or sqrtsoftplus scores")
        lb = a.get("--moe-router-load-balancing-type", "aux_loss")
        if num("--moe-router-topk", 2) == 1 and score == "softmax" and "--moe-router-pre-softmax" not in a and \
                lb != "sinkhorn":  # transformer_config.py
            errors.append("Please use --moe-router-pre-softmax when topk is 1.")
        if "--moe-expert-capacity-factor" in a and lb not in ("aux_loss", "seq_aux_loss", "global_aux_loss", "none"):
            errors.append("moe_expert_capacity_factor only works with aux_loss, seq_aux_loss, global_aux_loss or none")
        groups, group_topk = num("--moe-router-num-groups", 0), num("--moe-router-group-topk", 0)
        if group_topk and not groups:  # transformer_config.py __post_init__
            errors.append("When using group limited routing, moe_router_num_groups must be specified.")
        elif group_topk and (experts % groups or group_topk > groups):
            errors.append(f"group-limited routing: {experts} experts in {groups} groups, {group_topk} chosen "
                          "(transformer_config.py: experts divisible by the groups, at most all chosen)")
        if "--moe-layer-freq" in a:
            try:
                pat = megatron_model.moe_pattern(a["--moe-layer-freq"], num("--num-layers"))
                if len(pat) != num("--num-layers"):  # gpt_layer_specs.py
                    errors.append(f"Invalid length of moe_layer_pattern: {len(pat)}, expected {num('--num-layers')}")
                elif set(pat) - {0, 1}:
                    errors.append(f"Invalid layer pattern: {pat}")
            except (ValueError, SyntaxError) as e:
                errors.append(str(e))
    mla = "--multi-latent-attention" in a
    if mla and "--group-query-attention" in a:  # arguments.py
        errors.append("Group query attention is mutually exclusive with multi latent attention.")
    mla_only = [k for k in ("--q-lora-rank", "--kv-lora-rank", "--qk-head-dim", "--qk-pos-emb-head-dim",
                            "--v-head-dim") if k in a]
    if mla_only and not mla:
        errors.append(f"{', '.join(mla_only)} without --multi-latent-attention do nothing")
    return errors


def megatron_read(text, gpus, keys):
    """The plan the arguments run, in plan.json form, and the estimate options (vocabulary padding, dtype)."""
    a, errors = megatron_args(text, keys["flags"])
    assert not errors, errors
    tp, pp = int(a.get("--tensor-model-parallel-size", 1)), int(a.get("--pipeline-model-parallel-size", 1))
    cp = int(a.get("--context-parallel-size", 1))
    dp = gpus // (tp * pp * cp)
    blocks, vpp = megatron_stage_layers(a, errors)
    assert not errors, errors
    S = pp * vpp
    cuts = [0]
    for s in range(S):
        cuts.append(cuts[-1] + blocks[s] + (s == 0) + (s == S - 1))
    zero = 0
    if "--use-distributed-optimizer" in a:
        zero = 1
    if "--use-megatron-fsdp" in a:
        zero = {"optim": 1, "optim_grads": 2, "optim_grads_params": 3, "no_shard": 0}[
            a.get("--data-parallel-sharding-strategy", "optim_grads_params")]
    g, meth = a.get("--recompute-granularity"), a.get("--recompute-method")
    n_rec = int(a.get("--recompute-num-layers", 0))
    attn = {"fused": "fused", "flash": "fused", "unfused": "unfused"}[a.get("--attention-backend", "fused")]
    base = {"tp": tp, "dp": dp, "zero": zero, "sp": "--sequence-parallel" in a,
            "overlap": "te" if "--tp-comm-overlap" in a else "none", "attention": attn,
            "dp_overlap": dp * cp == 1 or "--overlap-grad-reduce" in a, "cp": cp,
            "cp_comm": "a2a" if cp > 1 and a.get("--cp-comm-type") == "a2a" else "ring",
            "ep": int(a.get("--expert-model-parallel-size", 1)),
            "etp": int(a.get("--expert-tensor-parallel-size", tp))}
    stages = []
    for s in range(S):
        strat = []
        blk = 0
        for layer in range(cuts[s], cuts[s + 1]):
            is_block = not ((s == 0 and layer == cuts[0]) or (s == S - 1 and layer == cuts[S] - 1))
            ck = "none"
            if is_block:
                if g == "selective":
                    ck = "selective"
                elif g == "full":
                    ck = "full" if meth == "uniform" or blk < n_rec else "none"
                blk += 1
            strat.append(dict(base, layers=[layer, layer + 1], ckpt=ck))
        stages.append({"layers": [cuts[s], cuts[s + 1]], "strategies": merge_runs(strat)})
    plan = {"gbs": int(a["--global-batch-size"]), "mbs": int(a.get("--micro-batch-size", 1)), "pp": pp, "vpp": vpp,
            "schedule": "interleaved" if vpp > 1 else "1f1b", "stages": stages}
    dtype = "fp8" if "--fp8-format" in a else "bf16" if "--bf16" in a else "fp16" if "--fp16" in a else "fp32"
    opts = ["--vocab-pad", str(int(a.get("--make-vocab-size-divisible-by", 128)) * tp), "--dtype", dtype,
            "--seq", a["--seq-length"]]
    model = {"layers": int(a["--num-layers"]), "hidden": int(a["--hidden-size"]),
             "heads": int(a["--num-attention-heads"]), "ffn": int(a.get("--ffn-hidden-size", 0)),
             "kv_heads": int(a.get("--num-query-groups", a["--num-attention-heads"])), "seq": int(a["--seq-length"])}
    return plan, opts, model


def merge_runs(strats):
    """Consecutive single-layer strategies with equal settings as one range."""
    out = []
    for s in strats:
        if out and {k: v for k, v in out[-1].items() if k != "layers"} == {k: v for k, v in s.items() if k != "layers"}:
            out[-1]["layers"][1] = s["layers"][1]
        else:
            out.append(dict(s, layers=list(s["layers"])))
    return out


# ---------------------------------------------------------------- DeepSpeed (deepspeedai/DeepSpeed edaa72212672)

def ds_partition_uniform(n, parts):
    """deepspeed/runtime/utils.py partition_uniform, re-derived."""
    if n <= parts:
        return [min(p, n) for p in range(parts + 1)]
    chunk, residual = divmod(n, parts)
    return [p * chunk + min(p, residual) for p in range(parts + 1)]


def ds_partition_balanced(weights, parts):
    """deepspeed/runtime/utils.py partition_balanced, re-derived: the split minimising max - min of the part sums,
    the last candidate of equal spread kept; arrays start at +inf (min over nothing is inf)."""
    n, m = len(weights), parts
    if n <= m:
        return ds_partition_uniform(n, m)
    inf = math.inf
    dmax = [[inf] * (m + 1) for _ in range(n + 1)]
    dmin = [[inf] * (m + 1) for _ in range(n + 1)]
    dcost = [[inf] * (m + 1) for _ in range(n + 1)]
    pos = [[0] * (m + 1) for _ in range(n + 1)]
    pre = [0.0]
    for w in weights:
        pre.append(pre[-1] + w)
    dmax[0][0] = 0
    dcost[0][0] = 0
    for i in range(1, n + 1):
        for j in range(1, min(i, m) + 1):
            for k in range(i):
                part = pre[i] - pre[k]
                hi, lo = max(dmax[k][j - 1], part), min(dmin[k][j - 1], part)
                if dcost[i][j] >= hi - lo:
                    dcost[i][j], dmax[i][j], dmin[i][j], pos[i][j] = hi - lo, hi, lo, k
    cuts = [n]
    for j in range(m, 0, -1):
        cuts.append(pos[cuts[-1]][j])
    return cuts[::-1]


def ds_layers(cfg):
    """The LayerSpec classes in order: transformer layers are of class TransformerLayer."""
    out = []
    for spec in cfg["_psearch"]["layer_specs"]:
        name = "TransformerLayer" if spec["kind"] in ("decoder", "encoder", "decoder_xattn") else spec["kind"]
        out += [name] * spec["count"]
    return out


def ds_parts(cfg):
    pm = cfg["_psearch"]["PipelineModule"]
    layers = ds_layers(cfg)
    meth = pm["partition_method"]
    if meth == "uniform":
        return ds_partition_uniform(len(layers), pm["num_stages"])
    if meth.startswith("type:"):
        rx = re.compile(meth.split(":", 1)[1], re.IGNORECASE)  # module.py _find_layer_type: re.search, IGNORECASE
        return ds_partition_balanced([1 if rx.search(c) else 0 for c in layers], pm["num_stages"])
    raise ValueError(f"partition_method {meth} depends on the model code")


def validate_deepspeed(text, gpus, keys):
    errors = []
    cfg = json.loads(text)
    for k in cfg:
        if k not in keys["top"] and k != "_psearch":
            errors.append(f"unknown top-level key {k}")
    for sec in ("zero_optimization", "activation_checkpointing", "bf16", "fp16", "tensor_parallel", "pipeline"):
        for k in cfg.get(sec, {}):
            if k not in keys[sec]:
                errors.append(f"{sec}: unknown key {k} (pydantic extra='forbid')")
    if cfg.get("bf16", {}).get("enabled") and cfg.get("fp16", {}).get("enabled"):
        errors.append("config.py: bf16 and fp16 together")
    ps = cfg.get("_psearch", {})
    if "topology" in ps:
        t = ps["topology"]
        pp, tp, dp = t["num_pp"], t["num_mp"], t["num_dp"]
    else:
        pp, tp, dp = 1, ps["mpu"]["tensor_model_parallel_size"], ps["mpu"]["data_parallel_size"]
    if pp * tp * dp != gpus:
        errors.append(f"topology {pp} x {tp} x {dp} is not the {gpus} GPUs")
    tb, mb, gas = cfg["train_batch_size"], cfg["train_micro_batch_size_per_gpu"], cfg["gradient_accumulation_steps"]
    if tb != mb * gas * dp:  # config.py _batch_assertion
        errors.append(f"train_batch_size {tb} != micro {mb} x accumulation {gas} x dp {dp}")
    z = cfg.get("zero_optimization", {})
    stage = z.get("stage", 0)
    if stage not in (0, 1, 2, 3):
        errors.append(f"zero stage {stage}")
    if pp > 1 and stage >= 2:  # pipe/engine.py PipelineEngine.__init__
        errors.append("ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism")
    if pp > 1 and stage == 0 and cfg.get("bf16", {}).get("enabled"):
        # engine.py _do_optimizer_sanity_check: bf16 + pipeline at stage 0 runs BF16_Optimizer, which shards
        errors.append("bf16 with pipeline parallelism at stage 0 runs the sharding BF16_Optimizer (ZeRO-1)")
    if "stage3_prefetch_bucket_size" in z and stage != 3:
        errors.append("stage3 key without stage 3")
    if pp > 1:
        pm = ps.get("PipelineModule", {})
        for k in pm:
            if k not in keys["PipelineModule"]:
                errors.append(f"PipelineModule has no argument {k}")
        if pm.get("num_stages") != pp:
            errors.append("num_stages differs from the topology's pipe dimension")
        meth = pm.get("partition_method", "parameters")
        if not (meth in ("uniform", "parameters") or meth.startswith("type:")):
            errors.append(f"module.py _partition_layers: no partition method {meth}")
        else:
            try:
                if ds_parts(cfg) != ps.get("parts"):
                    errors.append(f"DeepSpeed splits the layers as {ds_parts(cfg)}, the config says {ps.get('parts')}")
            except ValueError as e:
                errors.append(str(e))
        if not isinstance(pm.get("activation_checkpoint_interval", 0), int) or \
                pm.get("activation_checkpoint_interval", 0) < 0:
            errors.append("activation_checkpoint_interval must be a non-negative integer")
    return errors


def deepspeed_read(text, gpus, keys):
    cfg = json.loads(text)
    ps = cfg["_psearch"]
    if "topology" in ps:
        t = ps["topology"]
        pp, tp, dp = t["num_pp"], t["num_mp"], t["num_dp"]
        cuts = ds_parts(cfg)
        pm = ps["PipelineModule"]
        full = pm.get("activation_checkpoint_interval", 0) == 1 and pm.get("checkpointable_layers") == [
            "TransformerLayer"]
    else:
        pp, tp, dp = 1, ps["mpu"]["tensor_model_parallel_size"], ps["mpu"]["data_parallel_size"]
        cuts = [0, len(ds_layers(cfg))]
        full = ps["recompute"] == "full"  # the script checkpoints every transformer layer (the notes say so)
    layers = ds_layers(cfg)
    z = cfg.get("zero_optimization", {})
    stage = z.get("stage", 0)
    overlap = z.get("overlap_comm", stage == 3)
    if stage == 3 and z.get("stage3_prefetch_bucket_size", 1) == 0:
        overlap = overlap and False
    base = {"tp": tp, "dp": dp, "zero": stage, "sp": False, "overlap": "none", "attention": ps["attention"],
            "dp_overlap": dp == 1 or bool(overlap)}
    stages = []
    for s in range(pp):
        strat = [dict(base, layers=[i, i + 1], ckpt="full" if full and layers[i] == "TransformerLayer" else "none")
                 for i in range(cuts[s], cuts[s + 1])]
        stages.append({"layers": [cuts[s], cuts[s + 1]], "strategies": merge_runs(strat)})
    plan = {"gbs": cfg["train_batch_size"], "mbs": cfg["train_micro_batch_size_per_gpu"], "pp": pp, "vpp": 1,
            "schedule": "1f1b", "stages": stages}
    dtype = "bf16" if cfg.get("bf16", {}).get("enabled") else "fp16" if cfg.get("fp16", {}).get("enabled") else "fp32"
    return plan, ["--vocab-pad", str(ps["vocab_size"]), "--dtype", dtype], None


# ---------------------------------------------------------------- torchtitan (pytorch/torchtitan v0.2.2)

def m_attn(cfg):
    """The attention of a llama3 flavor (models/llama3/__init__.py at v0.2.2: attn_type "flex" for the *_flex
    flavors, "varlen" for the *_varlen ones, sdpa otherwise)."""
    flavor = cfg.get("model", {}).get("flavor", "")
    return "flex" if flavor.endswith("_flex") or flavor.endswith("flex_attn") else \
        "varlen" if "varlen" in flavor else "sdpa"


def validate_torchtitan(text, gpus, keys):
    errors = []
    cfg = tomllib.loads(text)
    secs = keys["sections"]

    def walk(d, path):
        for k, v in d.items():
            p = f"{path}.{k}" if path else k
            if isinstance(v, dict):
                if p not in secs:
                    errors.append(f"unknown section [{p}]")
                else:
                    walk(v, p)
            elif not path:
                errors.append(f"key {k} outside a section")
            elif k not in secs[path]:
                errors.append(f"[{path}] has no key {k}")
            elif secs[path][k] is not None and v not in secs[path][k]:
                errors.append(f"[{path}] {k} = {v!r}: not one of {secs[path][k]}")
    walk(cfg, "")
    par, tr = cfg.get("parallelism", {}), cfg.get("training", {})
    rep, shard = par.get("data_parallel_replicate_degree", 1), par.get("data_parallel_shard_degree", -1)
    tp, pp, cp = par.get("tensor_parallel_degree", 1), par.get("pipeline_parallel_degree", 1), \
        par.get("context_parallel_degree", 1)
    if shard == -1:
        shard = gpus // (rep * tp * pp * cp)
    if rep * shard * tp * pp * cp != gpus:  # distributed/parallel_dims.py _validate
        errors.append(f"degrees {rep} x {shard} x {tp} x {pp} x {cp} are not the {gpus} GPUs")
    if rep > 1 and shard == 1 and gpus != rep:  # models/llama3/infra/parallelize.py
        errors.append("DDP has not supported > 1D parallelism")
    dp = rep * shard
    local, glob = tr.get("local_batch_size", 8), tr.get("global_batch_size", -1)
    if glob > 0 and glob % (local * dp):  # train.py
        errors.append("global batch size not a multiple of local batch size x dp")
    if tr.get("seq_len", 2048) % (tp * 2 * cp):  # parallel_dims.py seq_len_divisor
        errors.append("seq_len not divisible by tp x 2 x cp")
    if cp > 1 and m_attn(cfg) not in ("sdpa", "flex"):  # distributed/context_parallel.py: varlen not implemented
        errors.append("context parallelism runs on sdpa or flex attention")
    m = cfg.get("model", {})
    if m.get("name") != "llama3" or m.get("flavor") not in keys["llama3_flavors"]:
        errors.append(f"model {m.get('name')} / {m.get('flavor')} is not a llama3 flavor")
    for c in m.get("converters", []):
        if c not in keys["converters"]:  # protocols/model_converter.py: a registry lookup
            errors.append(f"no model converter {c!r}")
    if pp > 1:
        sched = par.get("pipeline_parallel_schedule", "1F1B")
        names = {n.lower(): n for n in keys["schedules"]["names"]}
        if sched.lower() not in names:
            errors.append(f"no pipeline schedule {sched}")
            return errors
        sched = names[sched.lower()]
        mb = par.get("pipeline_parallel_microbatch_size", 1)
        if local % mb:  # pipeline_parallel.py build_pipeline_schedule
            errors.append("local batch not divisible by the pipeline micro-batch")
        n_micro = local // mb
        parts = par.get("module_fqns_per_model_part")
        if parts is None:
            errors.append("no module_fqns_per_model_part")
            return errors
        if len(parts) % pp:
            errors.append("stages not divisible by pp")
        per = len(parts) // pp
        if sched in keys["schedules"]["single_stage"] and per != 1:
            errors.append(f"{sched} runs one stage per rank, not {per}")
        if sched in keys["schedules"]["v_style"] and per != 2:
            errors.append(f"{sched} needs 2 stages per rank")
        if sched not in keys["schedules"]["single_stage"] and per < 2:
            errors.append(f"{sched} needs at least 2 stages per rank")
        if sched == "Interleaved1F1B":
            rounds = max(1, n_micro // pp)  # schedules.py ScheduleInterleaved1F1B
            if n_micro % rounds:
                errors.append("micro-batches not a multiple of the rounds")
        flat = [f for part in parts for f in part]
        n_layers = sum(1 for f in flat if f.startswith("layers."))
        want = ["tok_embeddings"] + [f"layers.{i}" for i in range(n_layers)] + ["norm", "output"]
        if flat != want:
            errors.append("module_fqns_per_model_part: every module once, in model order")
    ac = cfg.get("activation_checkpoint", {})
    mode = ac.get("mode", "selective")
    if "mode" not in ac:
        errors.append("activation_checkpoint.mode defaults to selective: say none, full or selective")
    elif mode not in ("none", "full", "selective"):
        errors.append(f"activation_checkpoint.mode {mode!r}: none, full, selective (memory_budget needs compile)")
    # job_config.py ActivationCheckpoint.selective_ac_option defaults to "2" (every second layer): a plan of per-op
    # checkpointing must say "op"
    if mode == "selective" and ac.get("selective_ac_option", "2") != "op":
        errors.append("selective checkpointing without selective_ac_option = \"op\" checkpoints every n-th layer")
    if mode != "selective" and "selective_ac_option" in ac:
        errors.append("selective_ac_option without mode selective")
    return errors


def torchtitan_read(text, gpus, keys):
    cfg = tomllib.loads(text)
    par, tr, m = cfg["parallelism"], cfg["training"], cfg["model"]
    rep, shard = par["data_parallel_replicate_degree"], par["data_parallel_shard_degree"]
    tp, pp = par["tensor_parallel_degree"], par["pipeline_parallel_degree"]
    cp = par.get("context_parallel_degree", 1)
    dp = rep * shard
    # K/V passed step by step ("alltoall": psearch's ring) or gathered after the first block (the default
    # "allgather": psearch's allgather kind)
    rotate = par.get("context_parallel_rotate_method", "allgather")
    assert cp == 1 or rotate in ("alltoall", "allgather"), "CP rotate method"
    sched = {"1f1b": "1f1b", "gpipe": "gpipe", "interleaved1f1b": "interleaved"}[
        par.get("pipeline_parallel_schedule", "1F1B").lower()]
    ac_mode = cfg["activation_checkpoint"]["mode"]
    block_ckpt = {"full": "full", "selective": "op"}.get(ac_mode, "none")
    # apply_fsdp: only "always" regathers every layer for its forward and its backward, as ZeRO-3; "default" keeps
    # them gathered from forward to backward with pipelining and for the final norm and output
    # parallel_dims.py: FSDP over dp_shard x cp, on whenever cp > 1
    fsdp = shard * cp > 1
    assert not fsdp or par.get("fsdp_reshard_after_forward", "default") == "always", "FSDP without resharding"
    base = {"tp": tp, "dp": dp, "zero": 3 if fsdp else 0, "sp": tp > 1, "overlap": "none",
            "attention": "fused", "dp_overlap": True, "cp": cp,
            "cp_comm": "allgather" if cp > 1 and rotate == "allgather" else "ring"}
    if pp > 1:
        parts = par["module_fqns_per_model_part"]
        mbs = par["pipeline_parallel_microbatch_size"]
    else:
        parts = None
        mbs = tr["local_batch_size"]
    layers_of = lambda part: sum(1 for f in part if f.startswith("layers.")) + ("tok_embeddings" in part) + (
        "output" in part)
    if parts is None:
        flavor_layers = {"debugmodel": 6, "8B": 32, "70B": 80, "405B": 126}[m["flavor"]]
        counts = [flavor_layers + 2]
    else:
        counts = [layers_of(p) for p in parts]
    cuts = [0]
    for c in counts:
        cuts.append(cuts[-1] + c)
    stages = []
    for s in range(len(counts)):
        strat = []
        for i in range(cuts[s], cuts[s + 1]):
            block = not (i == 0 or i == cuts[-1] - 1)
            strat.append(dict(base, layers=[i, i + 1], ckpt=block_ckpt if block else "none"))
        stages.append({"layers": [cuts[s], cuts[s + 1]], "strategies": merge_runs(strat)})
    plan = {"gbs": tr["global_batch_size"], "mbs": mbs, "pp": pp, "vpp": len(counts) // pp, "schedule": sched,
            "stages": stages}
    dtype = "fp8" if "quantize.linear.float8" in m.get("converters", []) else \
        "fp32" if tr.get("mixed_precision_param", "bfloat16") == "float32" else "bf16"
    return plan, ["--vocab-pad", "1", "--dtype", dtype, "--seq", str(tr.get("seq_len", 2048))], None


# ---------------------------------------------------------------- pipeline orders

def megatron_order(kind, pp, n, vpp, rank):
    """(op, micro-batch, chunk) on `rank` as Megatron-LM's schedules.py runs them: get_pp_rank_microbatches' warm-up
    and, interleaved, get_schedule_table's groups of microbatch_group_size_per_vp_stage (= pp) micro-batches."""
    if kind == "1f1b":
        w = min(pp - rank - 1, n)
        order = [("F", i, 0) for i in range(w)]
        for i in range(n - w):
            order += [("F", w + i, 0), ("BW", i, 0)]
        order += [("BW", i, 0) for i in range(n - w, n)]
        return order
    total = n * vpp
    table = []
    for lo in range(0, n, pp):
        hi = n if lo + pp >= n else lo + pp
        table += [(mb, c) for c in range(vpp) for mb in range(lo, hi)]
    w = min((pp - rank - 1) * 2 + (vpp - 1) * pp, total)
    fwd = lambda k: ("F", table[k][0], table[k][1])
    bwd = lambda k: ("BW", table[k][0], vpp - 1 - table[k][1])
    order = [fwd(k) for k in range(w)]
    for k in range(total - w):
        order += [fwd(w + k), bwd(k)]
    order += [bwd(k) for k in range(total - w, total)]
    return order


def torch_order(kind, pp, n, vpp, rank):
    """(op, micro-batch, chunk) on `rank` as torch.distributed.pipelining (pytorch 00722e648b74) runs them:
    ScheduleGPipe, Schedule1F1B's _step_microbatches, ScheduleInterleaved1F1B / _get_1f1b_rank_ops,
    ScheduleZBVZeroBubble._calculate_single_rank_operations (chunk c of rank r is stage c*pp + r, or 2pp-1-r for V)."""
    if kind == "gpipe":
        return [("F", i, 0) for i in range(n)] + [("BW", i, 0) for i in range(n)]
    if kind == "1f1b":
        w = min(n, pp - rank)  # warm-up forwards, then backward-forward pairs
        order = [("F", i, 0) for i in range(w)]
        f, b = w, 0
        while True:
            order.append(("BW", b, 0))
            b += 1
            if f == n:
                break
            order.append(("F", f, 0))
            f += 1
        order += [("BW", i, 0) for i in range(b, n)]
        return order
    if kind == "interleaved":
        rounds = max(1, n // pp)
        per_round = n // rounds
        warm = min((vpp - 1) * per_round + 2 * (pp - 1 - rank), n * vpp)
        ops = vpp * n
        fidx = lambda step: (step // per_round) % vpp
        bidx = lambda step: vpp - 1 - ((step - warm) // per_round) % vpp
        fcnt, bcnt, order = [0] * vpp, [0] * vpp, []
        for op in range(ops + warm):  # warm-up: F; then F and BW; cool-down: BW
            if op < ops:
                c = fidx(op)
                order.append(("F", fcnt[c], c))
                fcnt[c] += 1
            if op >= warm:
                c = bidx(op)
                order.append(("BW", bcnt[c], c))
                bcnt[c] += 1
        return order
    if kind == "v-zb":
        n_micro = max(2 * pp - 1, n)
        ops = []
        f0 = f1 = b0 = b1 = 0
        for _ in range(2 * (pp - rank) - 1):
            ops.append(("F", f0, 0))
            f0 += 1
        for _ in range(rank):
            ops += [("F", f1, 1), ("F", f0, 0)]
            f1 += 1
            f0 += 1
        for _ in range(pp - rank):
            ops += [("F", f1, 1), ("B", b1, 1), ("W", b1, 1)]
            f1 += 1
            b1 += 1
        while f1 < f0 or f0 < n_micro:
            if f0 < n_micro:
                ops.append(("F", f0, 0))
                f0 += 1
            ops += [("B", b0, 0), ("W", b0, 0), ("F", f1, 1), ("B", b1, 1), ("W", b1, 1)]
            b0 += 1
            f1 += 1
            b1 += 1
        w0, w1 = b0, b1
        for _ in range(rank):
            ops += [("B", b0, 0), ("B", b1, 1)]
            b0 += 1
            b1 += 1
        for _ in range(pp - rank):
            ops += [("B", b0, 0), ("W", w0, 0)]
            b0 += 1
            w0 += 1
        ops += [("W", i, 1) for i in range(w1, b1)] + [("W", i, 0) for i in range(w0, b0)]
        return [o for o in ops if o[1] < n]
    raise ValueError(kind)


def deepspeed_order(pp, n, stage):
    """(op, micro-batch, chunk) of `stage` in DeepSpeed's TrainSchedule.steps (runtime/pipe/schedule.py): step t is
    a forward on stages of t's parity, a backward on the others; the micro-batch of a step from _step_to_micro_batch,
    computation only when 0 <= id < micro_batches."""
    order = []
    for t in range(2 * (n + pp - 1)):
        if t % 2 == stage % 2:
            fwd = True
            mb = t // 2 - stage // 2 if t % 2 == 0 else (t - 1) // 2 - stage // 2
        else:
            fwd = False
            mb = t // 2 - pp + (stage + 1) // 2 if t % 2 == 0 else (t - 1) // 2 - pp + 1 + stage // 2
        if 0 <= mb < n:
            order.append(("F" if fwd else "BW", mb, 0))
    return order
