#!/usr/bin/env python3
"""The validators and the read-back can fail: each valid export below, broken in one way a framework refuses (or in
one way that changes the plan), must be caught.

usage: test_validators.py PSEARCH DATA_DIR
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import fwlib
from run_exports import experts, fixed_plan


def export(psearch, args, fw):
    r = subprocess.run([psearch, "estimate", *args, "--export", fw], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def main():
    psearch, data = sys.argv[1], sys.argv[2]
    keys = {fw: json.load(open(os.path.join(data, "export", f)))
            for fw, f in (("megatron", "megatron_flags.json"), ("deepspeed", "deepspeed_keys.json"),
                          ("torchtitan", "torchtitan_keys.json"))}
    fails, checks = [], 0
    h100 = ["--model", "llama3-8b", "--cluster", "dgx-h100:4", "--vocab-pad", "256"]
    mg_fsdp = export(psearch, ["--model", "gpt3-6.7b", "--cluster", "dgx-a100-80g:1", "--tp", "2", "--zero", "3",
                               "--seq-parallel", "--gbs", "64", "--mbs", "2", "--vocab-pad", "1024"], "megatron")
    mg_pp = export(psearch, [*h100, "--tp", "2", "--pp", "4", "--seq-parallel", "--gbs", "128"], "megatron")
    mg_inter = export(psearch, [*h100, "--tp", "2", "--pp", "4", "--seq-parallel", "--gbs", "128", "--schedule",
                                "interleaved", "--recompute", "selective", "--attention", "unfused"], "megatron")
    ds = export(psearch, [*h100, "--tp", "2", "--pp", "4", "--zero", "1", "--gbs", "256", "--dp-overlap", "off"],
                "deepspeed")
    tt = export(psearch, ["--model", "llama3-8b", "--cluster", "dgx-h100:4", "--tp", "2", "--pp", "4",
                          "--seq-parallel", "--zero", "3", "--schedule", "interleaved", "--gbs", "128",
                          "--vocab-pad", "1"], "torchtitan")
    # context parallelism (#21): Megatron-LM's all-to-all with TP, SP and a pipeline; torchtitan's ring with FSDP
    mg_cp_args = ["--model", "llama3-8b", "--seq", "32768", "--cluster", "dgx-h100:4", "--tp", "2", "--cp", "4",
                  "--cp-comm", "a2a", "--pp", "2", "--seq-parallel", "--zero", "1", "--gbs", "64", "--vocab-pad", "256"]
    mg_cp = export(psearch, mg_cp_args, "megatron")
    tt_cp_args = ["--model", "llama3-8b", "--seq", "65536", "--cluster", "dgx-h100:2", "--tp", "2", "--cp", "4",
                  "--seq-parallel", "--zero", "3", "--gbs", "8", "--recompute", "full", "--vocab-pad", "1"]
    tt_cp = export(psearch, tt_cp_args, "torchtitan")
    # mixture of experts and latent attention (#21): plan files (estimate's plan options set no expert grid yet):
    # Mixtral on an expert grid of ep 8 (etp 1), DeepSeek-V3 with ep 64
    tmp = tempfile.mkdtemp(prefix="psearch-export-")
    mx_args = ["--model", "mixtral-8x7b", "--seq", "4096", "--cluster", "dgx-h100:8", "--vocab-pad", "256"]
    r = subprocess.run([psearch, "estimate", *mx_args, "--tp", "2", "--pp", "4", "--seq-parallel", "--zero", "1",
                        "--gbs", "256", "--format", "json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    mx_plan = os.path.join(tmp, "mixtral-ep8.json")
    json.dump(experts(8, 1)(json.loads(r.stdout)), open(mx_plan, "w"))
    mg_moe = export(psearch, ["--plan", mx_plan, *mx_args], "megatron")
    ds_plan = os.path.join(tmp, "deepseek-v3-ep64.json")
    json.dump(fixed_plan([7, 8, 8, 8, 8, 8, 8, 6], 1024, 1, 8, tp=2, dp=32, zero=1, ckpt="full", sp=True,
                         overlap="none", attention="fused", dp_overlap=True, cp=1, cp_comm="ring", ep=64, etp=1)(),
              open(ds_plan, "w"))
    mg_dsv3 = export(psearch, ["--plan", ds_plan, "--model", "deepseek-v3", "--cluster", "dgx-h100:64",
                               "--vocab-pad", "256"], "megatron")

    def expect(fw, name, text, gpus, pattern):
        nonlocal checks
        checks += 1
        try:
            errors = {"megatron": fwlib.validate_megatron, "deepspeed": fwlib.validate_deepspeed,
                      "torchtitan": fwlib.validate_torchtitan}[fw](text, gpus, keys[fw])
        except Exception as e:  # a parse failure is a refusal too
            errors = [f"{type(e).__name__}: {e}"]
        if pattern is None:
            if errors:
                fails.append(f"{fw}/{name}: a valid export refused: {errors}")
        elif not any(re.search(pattern, e) for e in errors):
            fails.append(f"{fw}/{name}: not caught (wanted /{pattern}/, got {errors})")

    for name, text, gpus in (("fsdp", mg_fsdp, 8), ("pp", mg_pp, 32), ("interleaved", mg_inter, 32)):
        expect("megatron", name, text, gpus, None)
    sub = lambda t, a, b: t.replace(a, b, 1) if a in t else (_ for _ in ()).throw(AssertionError(a))
    expect("megatron", "comment inside", sub(mg_pp, "--sequence-parallel \\\n", "--sequence-parallel \\\n# x\n"), 32,
           "comment inside")
    expect("megatron", "misspelt flag", sub(mg_pp, "--sequence-parallel", "--sequence-paralel"), 32, "unknown flag")
    expect("megatron", "fsdp checkpoint format", sub(mg_fsdp, "--ckpt-format fsdp_dtensor \\\n", ""), 8,
           "fsdp_dtensor")
    expect("megatron", "batch", sub(mg_pp, "--global-batch-size 128", "--global-batch-size 130"), 32,
           "not a multiple")
    expect("megatron", "param gather without sharding", sub(mg_pp, "--overlap-grad-reduce \\\n",
                                                            "--overlap-grad-reduce \\\n--overlap-param-gather \\\n"),
           32, "distributed optimizer or Megatron-FSDP")
    expect("megatron", "choice", sub(mg_pp, "--attention-backend fused", "--attention-backend quick"), 32,
           "not one of")
    expect("megatron", "uneven without flags", sub(mg_pp, "--num-layers 32", "--num-layers 30"), 32,
           "not divisible by pp")
    expect("megatron", "first stage", sub(mg_pp, "--tensor-model-parallel-size 2 \\\n",
                                          "--tensor-model-parallel-size 2 \\\n--decoder-first-pipeline-num-layers 6 "
                                          "\\\n"), 32, "middle layers")
    expect("megatron", "selective with a method", sub(mg_inter, "--recompute-granularity selective \\\n",
                                                      "--recompute-granularity selective \\\n--recompute-method "
                                                      "uniform \\\n"), 32, "no method")
    expect("megatron", "layout count", sub(mg_pp, "--tensor-model-parallel-size 2 \\\n",
                                           "--tensor-model-parallel-size 2 \\\n--pipeline-model-parallel-layout "
                                           "'Et*8|t*8|t*8|t*7L' \\\n"), 32, "layout holds 31")
    expect("megatron", "interleaved batch", sub(mg_inter, "--global-batch-size 128", "--global-batch-size 24"), 32,
           "not a multiple of pp")
    expect("megatron", "tp overlap without sp", sub(mg_pp, "--sequence-parallel \\\n", "--tp-comm-overlap \\\n"), 32,
           "needs --sequence-parallel")
    expect("megatron", "fsdp with pp", sub(mg_pp, "--overlap-grad-reduce \\\n",
                                           "--use-megatron-fsdp \\\n--ckpt-format fsdp_dtensor \\\n"
                                           "--overlap-grad-reduce \\\n"), 32, "pp 1 only")
    expect("megatron", "cp valid", mg_cp, 32, None)
    expect("megatron", "cp sequence", sub(mg_cp, "--seq-length 32768", "--seq-length 32764"), 32,
           r"multiple of 2 \* context-parallel-size")
    expect("megatron", "cp world", sub(mg_cp, "--context-parallel-size 4", "--context-parallel-size 3"), 32,
           "not divisible by tp x pp x cp")
    expect("megatron", "cp a2a heads", sub(mg_cp, "--context-parallel-size 4", "--context-parallel-size 8"), 32,
           "a2a: heads per TP rank")
    expect("megatron", "cp unfused", sub(mg_cp, "--attention-backend fused", "--attention-backend unfused"), 32,
           "flash or fused attention backend")
    expect("megatron", "moe valid", mg_moe, 64, None)
    expect("megatron", "moe ep", sub(mg_moe, "--expert-model-parallel-size 8", "--expert-model-parallel-size 3"), 64,
           "not a multiple of ep 3")
    expect("megatron", "expert grid", sub(mg_moe, "--expert-tensor-parallel-size 1", "--expert-tensor-parallel-size 3"),
           64, "not divisible by etp x ep x pp 96")
    expect("megatron", "moe without sp", sub(mg_moe, "--sequence-parallel \\\n", ""), 64, "needs --sequence-parallel")
    expect("megatron", "moe bias etp", sub(sub(mg_moe, "--expert-tensor-parallel-size 1",
                                               "--expert-tensor-parallel-size 2"), "--disable-bias-linear \\\n", ""),
           64, "only supported when ETP==1")
    expect("megatron", "moe top-1 softmax", sub(mg_moe, "--moe-router-topk 2", "--moe-router-topk 1"), 64,
           "pre-softmax")
    expect("megatron", "moe flags without experts", sub(mg_moe, "--num-experts 8 \\\n", ""), 64,
           "without --num-experts")
    expect("megatron", "ep without experts", sub(mg_pp, "--pipeline-model-parallel-size 4 \\\n",
                                                 "--pipeline-model-parallel-size 4 \\\n"
                                                 "--expert-model-parallel-size 2 \\\n"), 32,
           "expert parallelism without --num-experts")
    expect("megatron", "mla valid", mg_dsv3, 512, None)
    expect("megatron", "expert bias softmax", sub(mg_dsv3, "--moe-router-score-function sigmoid",
                                                  "--moe-router-score-function softmax"), 512, "expert bias only")
    expect("megatron", "group topk without groups", sub(mg_dsv3, "--moe-router-num-groups 8 \\\n", ""), 512,
           "moe_router_num_groups must be specified")
    expect("megatron", "groups not dividing experts",
           sub(mg_dsv3, "--moe-router-num-groups 8", "--moe-router-num-groups 3"), 512, "group-limited routing")
    expect("megatron", "moe pattern length", sub(mg_dsv3, "[1]*58", "[1]*57"), 512, "Invalid length")
    expect("megatron", "moe pattern characters", sub(mg_dsv3, "'([0]*3+[1]*58)'", "'[0]*3+[1]*len(range(58))'"),
           512, "_eval_pattern refuses")
    expect("megatron", "mla with gqa", sub(mg_dsv3, "--multi-latent-attention \\\n",
                                           "--multi-latent-attention \\\n--group-query-attention \\\n"), 512,
           "mutually exclusive")
    expect("megatron", "mla flags without mla", sub(mg_dsv3, "--multi-latent-attention \\\n", ""), 512,
           "without --multi-latent-attention")

    expect("deepspeed", "valid", ds, 32, None)
    cfg = json.loads(ds)
    bad = json.loads(ds)
    bad["zero_optimization"]["stage"] = 2
    expect("deepspeed", "zero2 with pp", json.dumps(bad), 32, "incompatible with pipeline")
    bad = json.loads(ds)
    bad["zero_optimization"]["overlap"] = True
    expect("deepspeed", "zero key", json.dumps(bad), 32, "unknown key overlap")
    bad = json.loads(ds)
    bad["_psearch"]["parts"][1] += 1
    expect("deepspeed", "parts", json.dumps(bad), 32, "DeepSpeed splits the layers")
    bad = json.loads(ds)
    bad["train_batch_size"] += 4
    expect("deepspeed", "batch", json.dumps(bad), 32, "train_batch_size")
    bad = json.loads(ds)
    bad["zero_optimization"]["stage"] = 0
    expect("deepspeed", "bf16 stage 0 with pp", json.dumps(bad), 32, "BF16_Optimizer")
    bad = json.loads(ds)
    bad["_psearch"]["PipelineModule"]["partition_method"] = "type:embedding"
    expect("deepspeed", "other partition", json.dumps(bad), 32, "DeepSpeed splits the layers")
    assert cfg["_psearch"]["PipelineModule"]["partition_method"].startswith("type:")

    expect("torchtitan", "valid", tt, 32, None)
    expect("torchtitan", "ddp with tp", sub(sub(tt, "data_parallel_replicate_degree = 1",
                                                "data_parallel_replicate_degree = 4"),
                                            "data_parallel_shard_degree = 4", "data_parallel_shard_degree = 1"), 32,
           "DDP has not supported")
    expect("torchtitan", "key", sub(tt, "tensor_parallel_degree", "tensor_parallel_size"), 32, "has no key")
    expect("torchtitan", "fqn order", sub(tt, '"layers.0", "layers.1"', '"layers.1", "layers.0"'), 32,
           "every module once")
    expect("torchtitan", "seq", sub(tt, "seq_len = 8192", "seq_len = 8190"), 32, "seq_len")
    expect("torchtitan", "ac mode", sub(tt, 'mode = "none"', 'mode = "selective"'), 32, "selective")
    expect("torchtitan", "layer sac", sub(tt, 'mode = "none"', 'mode = "selective"\nselective_ac_option = "2"'), 32,
           "every n-th layer")
    expect("torchtitan", "sac option alone", sub(tt, 'mode = "none"', 'mode = "full"\nselective_ac_option = "op"'),
           32, "without mode selective")
    expect("torchtitan", "schedule", sub(tt, '"Interleaved1F1B"', '"Interleaved1F1B_v2"'), 32, "no pipeline schedule")
    expect("torchtitan", "stages per rank", sub(tt, '"Interleaved1F1B"', '"1F1B"'), 32, "one stage per rank")
    expect("torchtitan", "cp valid", tt_cp, 16, None)
    expect("torchtitan", "cp sequence", sub(tt_cp, "seq_len = 65536", "seq_len = 65532"), 16, "seq_len")
    expect("torchtitan", "cp rotate", sub(tt_cp, '"alltoall"', '"ring"'), 16, "not one of")
    expect("torchtitan", "cp degrees", sub(tt_cp, "context_parallel_degree = 4", "context_parallel_degree = 8"), 16,
           "are not the 16 GPUs")

    # the read-back is exact: a launch that runs another plan predicts otherwise

    def readback_differs(fw, text, gpus, model, cluster, want_args):
        nonlocal checks
        checks += 1
        plan, opts, _ = {"megatron": fwlib.megatron_read, "deepspeed": fwlib.deepspeed_read,
                         "torchtitan": fwlib.torchtitan_read}[fw](text, gpus, keys[fw])
        plan.update({"model": model, "cluster": cluster})
        path = os.path.join(tmp, f"{fw}-rb.json")
        json.dump(plan, open(path, "w"))
        got = subprocess.run([psearch, "estimate", "--plan", path, *opts, "--format", "json"], capture_output=True,
                             text=True)
        want = subprocess.run([psearch, "estimate", *want_args, "--format", "json"], capture_output=True, text=True)
        if got.returncode == 0 and json.loads(got.stdout)["predicted"] == json.loads(want.stdout)["predicted"]:
            fails.append(f"{fw}: a changed launch read back to the same prediction")

    mg_args = [*h100, "--tp", "2", "--pp", "4", "--seq-parallel", "--gbs", "128"]
    readback_differs("megatron", sub(mg_pp, "--global-batch-size 128", "--global-batch-size 256"), 32, "llama3-8b",
                     "dgx-h100:4", mg_args)
    readback_differs("megatron", sub(mg_pp, "--micro-batch-size 1 \\\n", "--micro-batch-size 1 \\\n"
                                     "--decoder-first-pipeline-num-layers 7 \\\n--decoder-last-pipeline-num-layers 9 "
                                     "\\\n"), 32, "llama3-8b", "dgx-h100:4", mg_args)
    readback_differs("deepspeed", json.dumps(dict(json.loads(ds), zero_optimization=dict(
        json.loads(ds)["zero_optimization"], overlap_comm=True))), 32, "llama3-8b", "dgx-h100:4",
        [*h100, "--tp", "2", "--pp", "4", "--zero", "1", "--gbs", "256", "--dp-overlap", "off"])
    readback_differs("torchtitan", sub(tt, 'mode = "none"', 'mode = "full"'), 32, "llama3-8b", "dgx-h100:4",
                     ["--model", "llama3-8b", "--cluster", "dgx-h100:4", "--tp", "2", "--pp", "4", "--seq-parallel",
                      "--zero", "3", "--schedule", "interleaved", "--gbs", "128", "--vocab-pad", "1"])
    readback_differs("megatron", sub(mg_cp, "--cp-comm-type a2a", "--cp-comm-type p2p"), 32, "llama3-8b",
                     "dgx-h100:4", mg_cp_args)
    readback_differs("torchtitan", sub(sub(tt_cp, "context_parallel_degree = 4", "context_parallel_degree = 2"),
                                       "data_parallel_shard_degree = 2", "data_parallel_shard_degree = 4"), 16,
                     "llama3-8b", "dgx-h100:2", tt_cp_args)
    readback_differs("megatron", sub(mg_moe, "--expert-model-parallel-size 8", "--expert-model-parallel-size 4"), 64,
                     "mixtral-8x7b", "dgx-h100:8", ["--plan", mx_plan, *mx_args])
    readback_differs("megatron", sub(sub(mg_moe, "--expert-model-parallel-size 8", "--expert-model-parallel-size 4"),
                                     "--expert-tensor-parallel-size 1", "--expert-tensor-parallel-size 2"), 64,
                     "mixtral-8x7b", "dgx-h100:8", ["--plan", mx_plan, *mx_args])
    for f in fails:
        print("FAIL", f)
    print(f"{checks - len(fails)} of {checks} validator and read-back checks behave")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
