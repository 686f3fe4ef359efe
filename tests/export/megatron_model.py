"""The model a Megatron-LM launch builds, read from its flags with Megatron's own defaults (tests only; stdlib).

fwlib.megatron_read reads the shape (layers, widths, heads); this reads the rest of the architecture, so that a model
flag the export drops (or gets wrong) shows as another model, not as the same one under Megatron's defaults:
positions, rotary base, normalization, activation, biases, tied output layer, dropout. The defaults are Megatron-LM's
at NVIDIA/Megatron-LM d98e8a64ddf3 (the commit of tests/data/export/megatron_flags.json):
  - megatron/training/arguments.py: --position-embedding-type learned_absolute, --rotary-base 10000 (int),
    --rotary-percent 1.0, --swiglu / --squared-relu store_true (GeLU otherwise), --untie-embeddings-and-output-weights
    store_true (tied otherwise), --ffn-hidden-size None -> 4h, or int((4h * 2/3) / 64) * 64 with --swiglu,
    --kv-channels None -> hidden / heads; --use-rotary-position-embeddings (legacy) sets rope;
  - megatron/core/transformer/transformer_config.py: normalization "LayerNorm", add_bias_linear True (the flag is
    --disable-bias-linear), hidden_dropout 0.1, attention_dropout 0.1, num_query_groups argparse default 1;
  - megatron/training/argument_utils.py core_transformer_config_from_args: num_query_groups only with
    --group-query-attention (None = one group per head otherwise).
  - mixture of experts (arguments.py _add_moe_args, transformer_config.py): --num-experts None = dense,
    --moe-layer-freq 1 (int N: experts on layers i % N == 0; else a python list expression of 0/1 per layer,
    megatron/core/models/gpt/gpt_layer_specs.py), --moe-ffn-hidden-size None -> --ffn-hidden-size, --moe-router-topk
    2, --moe-shared-expert-intermediate-size None (one MLP of the shared experts' total width),
    --moe-router-score-function softmax, --moe-expert-capacity-factor None (dropless), --moe-router-num-groups and
    --moe-router-group-topk None (no group-limited routing);
  - latent attention (arguments.py _add_mla_args): --q-lora-rank None (a plain query projection), --kv-lora-rank 32,
    --qk-head-dim 128, --qk-pos-emb-head-dim 64, --v-head-dim 128; MLATransformerConfig rope_type "yarn" unless
    --rope-type says otherwise (arguments.py: "MLA takes yarn by default").
The model's side is psearch's model JSON (docs/models.md: a group's value, else the top level's, else the default).
"""
import json
import re

# the flags whose absence would build another Llama 3 (each has a non-default value there): what a dropped-flag test
# removes one at a time
LLAMA3_MODEL_FLAGS = ["--position-embedding-type", "--rotary-base", "--normalization", "--swiglu",
                      "--disable-bias-linear", "--untie-embeddings-and-output-weights", "--group-query-attention",
                      "--num-query-groups", "--ffn-hidden-size", "--hidden-dropout", "--attention-dropout"]

# the expert and latent-attention flags of an export, each dropped in turn by the tests (run_exports.py): dropping one
# must build another model, unless the value is Megatron's default (MOE_MLA_DEFAULTS, arguments.py; ffn_default) or,
# for --moe-ffn-hidden-size, the --ffn-hidden-size Megatron falls back to
MOE_MLA_MODEL_FLAGS = ["--num-experts", "--moe-layer-freq", "--moe-ffn-hidden-size", "--moe-router-topk",
                       "--moe-shared-expert-intermediate-size", "--moe-router-score-function",
                       "--moe-router-enable-expert-bias", "--moe-expert-capacity-factor", "--moe-router-pre-softmax",
                       "--moe-router-num-groups", "--moe-router-group-topk",
                       "--multi-latent-attention", "--q-lora-rank", "--kv-lora-rank", "--qk-head-dim",
                       "--qk-pos-emb-head-dim", "--v-head-dim", "--rope-type", "--ffn-hidden-size"]
MOE_MLA_DEFAULTS = {"--moe-router-score-function": "softmax", "--moe-router-topk": "2", "--qk-head-dim": "128",
                    "--qk-pos-emb-head-dim": "64", "--v-head-dim": "128"}


def moe_pattern(freq, layers):
    """--moe-layer-freq as the list of 0 (dense) / 1 (MoE) per layer: arguments.py moe_freq_type (an int, or a string
    of only , digits [ ] ( ) + * evaluated as python) and gpt_layer_specs.py (int N: 1 where i % N == 0)."""
    freq = str(freq)
    if "[" not in freq:
        n = int(freq)
        return [1 if i % n == 0 else 0 for i in range(layers)]
    if re.search(r"[^,\d\[\]\(\)\+\*]", freq):
        raise ValueError(f"--moe-layer-freq {freq!r}: characters arguments.py _eval_pattern refuses")
    pat = eval(freq, {"__builtins__": {}}, {})  # only digits, brackets, + and * reach here, as in Megatron
    return list(pat)


def ffn_default(a):
    """--ffn-hidden-size when not given (arguments.py): 4h, or int((4h x 2/3) / 64) x 64 with --swiglu."""
    hidden = int(a["--hidden-size"])
    return int((4 * hidden * 2 / 3) / 64) * 64 if "--swiglu" in a else 4 * hidden


def megatron_arch(a):
    """The architecture the flags `a` ({flag: value or True}, fwlib.megatron_args) build."""
    hidden, heads = int(a["--hidden-size"]), int(a["--num-attention-heads"])
    swiglu = "--swiglu" in a
    mla = "--multi-latent-attention" in a
    n_layers = int(a["--num-layers"])
    ffn = int(a["--ffn-hidden-size"]) if "--ffn-hidden-size" in a else ffn_default(a)
    experts = int(a["--num-experts"]) if "--num-experts" in a else None
    moe = None
    if experts:
        moe = {"pattern": moe_pattern(a.get("--moe-layer-freq", 1), n_layers), "n_experts": experts,
               "top_k": int(a.get("--moe-router-topk", 2)),
               "expert_ffn": int(a.get("--moe-ffn-hidden-size", ffn)),
               "shared": int(a.get("--moe-shared-expert-intermediate-size", 0)),
               "capacity_factor": float(a.get("--moe-expert-capacity-factor", 0.0)),
               "groups": [int(a.get("--moe-router-num-groups", 0)), int(a.get("--moe-router-group-topk", 0))],
               # psearch's sigmoid router carries the selection bias (--moe-router-enable-expert-bias)
               "router": a.get("--moe-router-score-function", "softmax") +
               ("+bias" if "--moe-router-enable-expert-bias" in a else "")}
    latent = None
    if mla:
        latent = {"q_lora_rank": int(a.get("--q-lora-rank", 0)), "kv_lora_rank": int(a.get("--kv-lora-rank", 32)),
                  "qk_nope_head_dim": int(a.get("--qk-head-dim", 128)),
                  "qk_rope_head_dim": int(a.get("--qk-pos-emb-head-dim", 64)),
                  "v_head_dim": int(a.get("--v-head-dim", 128))}
    pos = a.get("--position-embedding-type", "learned_absolute")
    if "--use-rotary-position-embeddings" in a:
        pos = "rope"
    drop = {float(a.get("--hidden-dropout", 0.1)) > 0, float(a.get("--attention-dropout", 0.1)) > 0}
    out = {
        "layers": n_layers, "hidden": hidden, "heads": heads,
        "kv_heads": int(a.get("--num-query-groups", 1)) if "--group-query-attention" in a else heads,
        # MLA's score width is its own (qk + rotary); kv_channels is not read there
        "head_dim": latent["qk_nope_head_dim"] + latent["qk_rope_head_dim"] if mla else
        int(a["--kv-channels"]) if "--kv-channels" in a else hidden // heads,
        "ffn_hidden": ffn, "moe": moe, "mla": latent,
        "rope_type": a.get("--rope-type", "yarn" if mla else "rope") if pos == "rope" else None,
        "seq": int(a["--seq-length"]),
        "positions": int(a["--max-position-embeddings"]) if pos == "learned_absolute" else pos,
        "rope_theta": int(a.get("--rotary-base", 10000)) if pos == "rope" else None,
        "rotary_percent": float(a.get("--rotary-percent", 1.0)) if pos == "rope" else None,
        "norm": a.get("--normalization", "LayerNorm").lower(),
        "act": "swiglu" if swiglu else "squared_relu" if "--squared-relu" in a else "gelu",
        "bias": "--disable-bias-linear" not in a,
        "tied": "--untie-embeddings-and-output-weights" not in a,
        "dropout": drop.pop() if len(drop) == 1 else "hidden and attention dropout differ",
    }
    return out


def _groups(model):
    """The model JSON's embedding, first decoder and head groups, each with the top-level fields under its own."""
    top = {k: v for k, v in model.items() if k != "layers"}
    g = {}
    for grp in model["layers"]:
        if grp["kind"] not in g:
            g[grp["kind"]] = dict(top, **grp)
    return g


def model_arch(model):
    """The same architecture from psearch's model JSON (defaults of docs/models.md)."""
    g = _groups(model)
    d, emb, head = g["decoder"], g["embedding"], g["lm_head"]
    heads = d["heads"] if "heads" in d else d["hidden"] // d["head_dim"]
    positions = emb.get("positions", 0)
    top = {k: v for k, v in model.items() if k != "layers"}
    decs = [dict(top, **grp) for grp in model["layers"] if grp["kind"] == "decoder" for _ in range(grp.get("repeat", 1))]
    pattern = [1 if x.get("n_experts", 0) > 0 else 0 for x in decs]
    dense = next((x for x in decs if not x.get("n_experts", 0)), None)
    moe = None
    if any(pattern):
        e = next(x for x in decs if x.get("n_experts", 0) > 0)
        width = e.get("expert_ffn", e.get("ffn_hidden"))
        n_shared = e.get("n_shared_experts", 0)
        moe = {"pattern": pattern, "n_experts": e["n_experts"], "top_k": e["top_k"], "expert_ffn": width,
               "shared": n_shared * e.get("shared_ffn", width) if n_shared else 0,
               "capacity_factor": float(e.get("capacity_factor", 0.0)),
               "groups": [e.get("router_groups", 0), e.get("router_group_topk", 0)],
               "router": "sigmoid+bias" if e.get("router") == "sigmoid" else "softmax"}
    mla = None
    if d.get("kv_lora_rank", 0) > 0:
        mla = {k: d.get(k, 0) for k in ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                                        "v_head_dim")}
    head_dim = d["qk_nope_head_dim"] + d["qk_rope_head_dim"] if mla else d.get("head_dim", d["hidden"] // heads)
    # a model of MoE layers only has no dense MLP: its width is the experts' (what Megatron reads when
    # --moe-ffn-hidden-size is not given)
    ffn = dense.get("ffn_hidden", 4 * d["hidden"]) if dense else moe["expert_ffn"]
    return {
        "layers": len(decs),
        "hidden": d["hidden"], "heads": heads, "kv_heads": d.get("kv_heads", heads),
        "head_dim": head_dim, "ffn_hidden": ffn, "moe": moe, "mla": mla,
        "rope_type": "rope" if not positions else None,
        "seq": d["seq"],
        # psearch: no learned positions = rotary (Megatron prices rotary as free, as psearch does)
        "positions": max(positions, d["seq"]) if positions else "rope",
        "rope_theta": int(model.get("rope_theta", 10000)) if not positions else None,
        "rotary_percent": 1.0 if not positions else None,
        "norm": d.get("norm", "layernorm"), "act": d.get("act", "gelu"), "bias": d.get("bias", True),
        "tied": head.get("tied", False), "dropout": d.get("dropout", False),
    }


def arch_errors(a, model):
    """What the flags build differently from the model (empty: the same model)."""
    got, want = megatron_arch(a), model_arch(model)
    return [f"{k}: the flags build {got[k]!r}, the model has {want[k]!r}" for k in want if got[k] != want[k]]


def model_json(a, vocab, name):
    """A psearch model JSON of exactly what the flags build (the tokenizer's vocabulary is the run's own, not a
    flag: `vocab`), for estimating the read-back plan on the model the launch builds, not on the preset."""
    arch = megatron_arch(a)
    keys = ("hidden", "heads", "seq", "norm", "act", "bias", "dropout") if arch["mla"] else \
        ("hidden", "heads", "kv_heads", "head_dim", "seq", "norm", "act", "bias", "dropout")
    layer = {k: arch[k] for k in keys}
    if arch["mla"]:
        layer.update({k: v for k, v in arch["mla"].items() if v})
    moe = arch["moe"]
    pattern = moe["pattern"] if moe else [0] * arch["layers"]
    decoders = []
    for i, p in enumerate(pattern):  # runs of dense / MoE layers, in order
        if decoders and decoders[-1][0] == p:
            decoders[-1][1] += 1
        else:
            decoders.append([p, 1])
    groups = []
    for p, n in decoders:
        grp = {"kind": "decoder", "repeat": n}
        if p:
            grp.update({"n_experts": moe["n_experts"], "top_k": moe["top_k"], "expert_ffn": moe["expert_ffn"],
                        "router": {"sigmoid+bias": "sigmoid", "softmax": "softmax"}[moe["router"]]})
            if moe["shared"]:
                grp.update({"n_shared_experts": 1, "shared_ffn": moe["shared"]})
            if moe["capacity_factor"]:
                grp["capacity_factor"] = moe["capacity_factor"]
            if moe["groups"][0]:
                grp.update({"router_groups": moe["groups"][0], "router_group_topk": moe["groups"][1]})
        else:
            grp["ffn_hidden"] = arch["ffn_hidden"]
        groups.append(grp)
    out = {"name": name, "seq": arch["seq"], "vocab": vocab, **layer,
           "layers": [{"kind": "embedding"}, *groups, {"kind": "lm_head", "tied": arch["tied"]}]}
    if isinstance(arch["positions"], int):
        out["positions"] = arch["positions"]
    if arch["rope_theta"]:
        out["rope_theta"] = arch["rope_theta"]
    return out


def load_model(path):
    with open(path) as f:
        return json.load(f)
