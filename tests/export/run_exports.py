#!/usr/bin/env python3
"""Every export of the cases below is launchable in its framework and runs exactly the plan that was priced.

A case makes a plan (psearch estimate with plan options, or a search; then, where the case says, an edit of its plan
file: another split of the layers, recomputation of some layers), exports it with `psearch estimate --plan ...
--export FW` and then
  - expects a refusal (exit 2, the message naming the rule) where the framework cannot run the plan, or
  - validates the export against the framework's rules (fwlib.validate_*), reads it back into a plan (fwlib.*_read:
    nothing of psearch's own code), and checks that `psearch estimate` of the read-back plan predicts exactly what the
    original plan predicts (every figure of "predicted", bit for bit).
Cases marked "search" also export straight from the search (`psearch ... --export FW`) and from `psearch --framework
FW` when psearch has that option (skipped otherwise). A case may end with the features its export must show (Expect:
a flag, a key, the split, least memory), so that a search which stops producing the shape it covers fails the test.
Every Megatron-LM export must also build the model it names: the architecture its flags build with Megatron's defaults
(megatron_model.py) is the model JSON's, Llama 3's model flags are there with their values, dropping any one of them
is caught, and the read-back plan is estimated on a model built from the flags alone, not on the preset.

usage: run_exports.py PSEARCH DATA_DIR FRAMEWORK [CASE ...]
"""
import copy
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import fwlib
import megatron_model

HERE = os.path.dirname(os.path.abspath(__file__))


def uniform_strategy(plan):
    """The first transformer layer's strategy of a plan file (layer 1 of the GPT-style models used here)."""
    for st in plan["stages"]:
        for s in st["strategies"]:
            if s["layers"][0] <= 1 < s["layers"][1]:
                return {k: v for k, v in s.items() if k != "layers"}
    raise ValueError("no layer 1")


def resplit(blocks, ckpt=None, head_ckpt="none"):
    """An edit: the same strategy on every layer, the transformer layers split `blocks` per (virtual) stage (the
    embedding with the first, the head with the last), recomputation per block from ckpt(stage, i) (default: the
    plan's), none on the embedding and the head (the frameworks recompute transformer layers only)."""
    def edit(plan):
        base = uniform_strategy(plan)
        S = len(blocks)
        cuts = [0]
        for s, b in enumerate(blocks):
            cuts.append(cuts[-1] + b + (s == 0) + (s == S - 1))
        stages = []
        for s in range(S):
            strat, i = [], 0
            for layer in range(cuts[s], cuts[s + 1]):
                edge = layer == 0 or layer == cuts[-1] - 1
                ck = (head_ckpt if edge else (ckpt(s, i) if ckpt else base["ckpt"]))
                if not edge:
                    i += 1
                strat.append(dict(base, layers=[layer, layer + 1], ckpt=ck))
            stages.append({"layers": [cuts[s], cuts[s + 1]], "strategies": fwlib.merge_runs(strat)})
        out = {k: v for k, v in plan.items() if k not in ("stages", "predicted", "top", "search", "baselines",
                                                         "tp", "dp", "zero", "ckpt", "sp", "overlap", "attention",
                                                         "dp_overlap", "cp", "cp_comm")}
        out["stages"] = stages
        out["vpp"] = S // plan["pp"]
        return out
    return edit


def no_edge_recompute(plan):
    """An edit: the embedding and the head without recomputation, as the frameworks run them."""
    n = plan["stages"][-1]["layers"][1]
    blocks = [st["layers"][1] - st["layers"][0] - (i == 0) - (i == len(plan["stages"]) - 1)
              for i, st in enumerate(plan["stages"])]
    return resplit(blocks, head_ckpt="none")(plan) if n else plan


def experts(ep, etp, then=None):
    """An edit: the expert grid ep x etp on every layer (dense layers ignore it), after the edit `then`."""
    def edit(plan):
        plan = then(plan) if then else copy.deepcopy(plan)
        for key in ("ep", "etp"):
            plan.pop(key, None)
        for st in plan["stages"]:
            for s in st["strategies"]:
                s.update(ep=ep, etp=etp)
        return plan
    return edit


def fixed_plan(blocks, gbs, mbs, pp, **strategy):
    """A plan file written by hand (a plan the search does not make yet: DeepSeek-V3 fits on H100s only with expert
    parallelism): `blocks` transformer layers per (virtual) stage, the embedding with the first, the head with the
    last, one strategy on every layer (recomputation on the transformer layers only)."""
    def make():
        S = len(blocks)
        cuts = [0]
        for s, b in enumerate(blocks):
            cuts.append(cuts[-1] + b + (s == 0) + (s == S - 1))
        stages = []
        for s in range(S):
            strat = [dict(strategy, layers=[i, i + 1],
                          ckpt="none" if i in (0, cuts[-1] - 1) else strategy.get("ckpt", "none"))
                     for i in range(cuts[s], cuts[s + 1])]
            stages.append({"layers": [cuts[s], cuts[s + 1]], "strategies": fwlib.merge_runs(strat)})
        return {"gbs": gbs, "mbs": mbs, "pp": pp, "vpp": S // pp, "schedule": "1f1b" if S == pp else "interleaved",
                "stages": stages}
    return make



class Export:
    """One export, parsed, for the checks of Expect: `doc` is {flag: value or True} (Megatron-LM), the config dict
    (DeepSpeed) or the TOML dict (torchtitan); `blocks` the transformer layers of every (virtual) stage, `pp`."""

    def __init__(self, fw, text, keys, plan, search_cmd, psearch):
        self.fw, self.text, self.plan, self.search_cmd, self.psearch = fw, text, plan, search_cmd, psearch
        if fw == "megatron":
            self.doc = fwlib.megatron_args(text, keys["flags"])[0]
            self.pp = int(self.doc.get("--pipeline-model-parallel-size", 1))
            self.blocks = fwlib.megatron_stage_layers(self.doc, [])[0]
        elif fw == "deepspeed":
            self.doc = json.loads(text)
            t = self.doc["_psearch"].get("topology")
            self.pp = t["num_pp"] if t else 1
            layers = fwlib.ds_layers(self.doc)
            cuts = fwlib.ds_parts(self.doc) if t else [0, len(layers)]
            self.blocks = [sum(c == "TransformerLayer" for c in layers[cuts[i]:cuts[i + 1]])
                           for i in range(len(cuts) - 1)]
        else:
            self.doc = fwlib.tomllib.loads(text)
            par = self.doc["parallelism"]
            self.pp = par.get("pipeline_parallel_degree", 1)
            # without pipelining there is no part list: no split to check
            parts = par.get("module_fqns_per_model_part", [])
            self.blocks = [sum(f.startswith("layers.") for f in part) for part in parts]

    def get(self, path):
        """A Megatron flag's value (True for a switch), or a dotted key of the config; None when absent."""
        if self.fw == "megatron":
            return self.doc.get(path)
        d = self.doc
        for k in path.split("."):
            if not isinstance(d, dict) or k not in d:
                return None
            d = d[k]
        return d


class Expect:
    """Features an export must show: each check returns None or what is missing."""

    @staticmethod
    def has(path, want=None):
        """The flag / key is there; with `want` a value (compared as text for Megatron's flags) or a predicate
        (its docstring says what it wants)."""
        def check(ex):
            v = ex.get(path)
            if v is None:
                return f"{path} missing"
            if want is None:
                return None
            if callable(want):
                return None if want(v) else f"{path} is {v!r}, expected {want.__doc__ or 'otherwise'}"
            ok = str(v) == str(want) if ex.fw == "megatron" else v == want
            return None if ok else f"{path} is {v!r}, expected {want!r}"
        return check

    @staticmethod
    def lacks(path):
        return lambda ex: None if ex.get(path) is None else f"{path} present ({ex.get(path)!r})"

    @staticmethod
    def split(pred, what):
        """The transformer layers per (virtual) stage satisfy pred(blocks, pp)."""
        return lambda ex: None if pred(ex.blocks, ex.pp) else f"the split {ex.blocks} (pp {ex.pp}) is not {what}"

    @staticmethod
    def least_memory():
        """A --objective memory search: its plan's peak memory per GPU is the least of its top plans and at most
        that of the same search for throughput (the objective took effect)."""
        def check(ex):
            peak = lambda p: max(p["predicted"]["peak_mem_gib"])
            mine = peak(ex.plan)
            worse = [peak(t) for t in ex.plan.get("top", []) if peak(t) < mine]
            if worse:
                return f"peak {mine:.3f} GiB, but a listed plan needs {min(worse):.3f}"
            cmd = list(ex.search_cmd)
            i = cmd.index("--objective")
            del cmd[i:i + 2]
            r = run([ex.psearch, *cmd, "--format", "json"])
            if r.returncode:
                return f"the throughput search failed: {r.stderr.strip()}"
            fast = peak(json.loads(r.stdout))
            return None if mine <= fast else f"peak {mine:.3f} GiB above the throughput plan's {fast:.3f}"
        return check


def uneven_first_last(b, pp):
    return pp > 2 and len(b) == pp and len(set(b[1:-1])) == 1 and (b[0] != b[1] or b[-1] != b[-2])


def needs_layout(b, pp):
    """Not even and not only the first/last stage different: only a layout string says it."""
    return len(b) > 1 and len(set(b)) > 1 and not uneven_first_last(b, pp)


def positive(v):
    """above 1"""
    return int(v) > 1


# the model flags of a Llama 3 Megatron-LM export, by hand from the Llama 3 paper and its released config.json
# (rope_theta 500000, RMSNorm, SwiGLU, no biases, untied output layer, 8 key/value heads, no dropout)
LLAMA3_FLAGS = [Expect.has("--position-embedding-type", "rope"), Expect.has("--rotary-base", "500000"),
                Expect.has("--normalization", "RMSNorm"), Expect.has("--swiglu"), Expect.has("--disable-bias-linear"),
                Expect.has("--untie-embeddings-and-output-weights"), Expect.has("--group-query-attention"),
                Expect.has("--num-query-groups", "8"), Expect.has("--hidden-dropout", "0.0"),
                Expect.has("--attention-dropout", "0.0")]
TT_FSDP = [Expect.has("parallelism.data_parallel_shard_degree", positive),
           Expect.has("parallelism.fsdp_reshard_after_forward", "always")]
ZERO1_MEGATRON = [Expect.has("--use-distributed-optimizer"), Expect.lacks("--use-megatron-fsdp")]

H100_4 = ["--model", "llama3-8b", "--cluster", "dgx-h100:4"]
CASES = {
    "megatron": [
        # name, plan source, edit, estimate options, expected refusal (regex) or None, compare the flag path
        ("llama3_tp2_pp4_sp_full", ["estimate", *H100_4, "--tp", "2", "--pp", "4", "--seq-parallel", "--gbs", "256",
                                    "--recompute", "full"], no_edge_recompute, ["--vocab-pad", "256"], None, True),
        ("first_last_uneven", ["estimate", *H100_4, "--tp", "2", "--pp", "4", "--seq-parallel", "--zero", "1",
                               "--gbs", "128"], resplit([7, 9, 9, 7]), ["--vocab-pad", "256"], None, False),
        ("layout_uneven", ["estimate", "--model", "gpt3-1.3b", "--cluster", "dgx-a100-80g:1", "--tp", "2", "--pp", "4",
                           "--gbs", "64"], resplit([5, 7, 6, 6]), ["--vocab-pad", "1024"], None, False),
        ("interleaved_even", ["estimate", "--model", "gpt3-13b", "--cluster", "dgx-a100-80g:2", "--tp", "4", "--pp",
                              "2", "--schedule", "interleaved", "--seq-parallel", "--gbs", "64", "--recompute",
                              "selective", "--attention", "unfused"], None, ["--vocab-pad", "1024"], None, True),
        ("interleaved_layout", ["estimate", "--model", "gpt3-13b", "--cluster", "dgx-a100-80g:2", "--tp", "4", "--pp",
                                "2", "--schedule", "interleaved", "--seq-parallel", "--gbs", "64"],
         resplit([9, 11, 10, 10]), ["--vocab-pad", "1024"], None, False),
        ("partial_recompute", ["estimate", "--model", "llama2-7b", "--cluster", "dgx-a100-80g:2", "--tp", "2", "--pp",
                               "4", "--seq-parallel", "--gbs", "64"],
         resplit([8, 8, 8, 8], ckpt=lambda s, i: "full" if i < 3 else "none"), ["--vocab-pad", "256"], None, False),
        ("fsdp_zero3_tp2", ["estimate", "--model", "gpt3-6.7b", "--cluster", "dgx-a100-80g:1", "--tp", "2", "--zero",
                            "3", "--seq-parallel", "--gbs", "64", "--mbs", "2"], None, ["--vocab-pad", "1024"], None,
         True),
        ("gqa_te_fp8", ["estimate", "--model", "llama3-70b", "--cluster", "dgx-h100:8", "--tp", "8", "--pp", "4",
                        "--seq-parallel", "--tp-overlap", "te", "--recompute", "selective", "--zero", "1", "--gbs",
                        "64", "--dtype", "fp8"], None, ["--vocab-pad", "1024", "--dtype", "fp8"], None, True),
        ("search_llama2_zero2", ["search", "--model", "llama2-7b", "--cluster", "dgx-a100-80g:1"], None,
         ["--vocab-pad", "1024"], None, True,
         [Expect.has("--use-megatron-fsdp"), Expect.has("--data-parallel-sharding-strategy", "optim_grads")]),
        # searches of #22's review, each with the shape it covers (at this commit: the 405B on H100 x 128 runs
        # pp 32 with 3 layers on the first and last stage, 4 on the others; the 70B on H100 x 64 splits 20 21 20 19)
        ("search_llama3_405b_first_last", ["search", "--model", "llama3-405b", "--cluster", "dgx-h100:16"], None,
         ["--vocab-pad", "1024"], None, True,
         [Expect.has("--decoder-first-pipeline-num-layers"), Expect.has("--decoder-last-pipeline-num-layers"),
          Expect.lacks("--pipeline-model-parallel-layout"), Expect.lacks("--num-virtual-stages-per-pipeline-rank"),
          Expect.split(uneven_first_last, "even but for the first and last stage"), *ZERO1_MEGATRON]),
        # (with context parallelism the 70B plans cp 4 and splits evenly: cp 1 keeps the uneven split covered)
        ("search_llama3_70b_layout", ["search", "--model", "llama3-70b", "--cluster", "dgx-h100:8", "--cp", "1"], None,
         ["--vocab-pad", "1024"], None, True,
         [Expect.has("--pipeline-model-parallel-layout"), Expect.lacks("--decoder-first-pipeline-num-layers"),
          Expect.split(needs_layout, "uneven in the middle"), *ZERO1_MEGATRON]),
        ("search_llama3_405b_interleaved", ["search", "--model", "llama3-405b", "--cluster", "dgx-h100:16", "--pp",
                                            "16", "--schedule", "interleaved"], None, ["--vocab-pad", "1024"], None,
         True, [Expect.has("--pipeline-model-parallel-layout"), Expect.has("--pipeline-model-parallel-size", "16"),
                Expect.split(lambda b, pp: len(b) >= 2 * pp and needs_layout(b, pp), "interleaved and uneven")]),
        ("search_gpt3_175b_interleaved", ["search", "--model", "gpt3-175b", "--cluster", "dgx-a100-80g:16"], None,
         ["--vocab-pad", "1024"], None, True,
         [Expect.has("--num-virtual-stages-per-pipeline-rank", positive),
          Expect.lacks("--pipeline-model-parallel-layout"), Expect.lacks("--position-embedding-type"),
          Expect.has("--max-position-embeddings", "2048"), Expect.lacks("--swiglu"), *ZERO1_MEGATRON]),
        ("search_fsdp_zero3", ["search", "--model", "llama3-8b", "--cluster", "dgx-h100:1", "--zero", "3"], None,
         ["--vocab-pad", "1024"], None, True,
         [Expect.has("--use-megatron-fsdp"), Expect.has("--data-parallel-sharding-strategy", "optim_grads_params"),
          Expect.has("--ckpt-format", "fsdp_dtensor"), Expect.has("--tensor-model-parallel-size", positive)]),
        ("search_memory_objective", ["search", "--model", "llama3-70b", "--cluster", "dgx-h100:8", "--objective",
                                     "memory"], None, ["--vocab-pad", "1024"], None, True,
         [Expect.least_memory(), Expect.has("--recompute-granularity", "full")]),
        ("memory_objective", ["search", "--model", "gpt3-2.7b", "--cluster", "dgx-a100-40g:1", "--gbs", "64",
                              "--objective", "memory", "--schedules", "1f1b"], None, ["--vocab-pad", "1024"],
         r"recomputes transformer layers only; layer 0 \(embedding\) is planned with full recomputation", True),
        ("memory_objective_as_run", ["search", "--model", "gpt3-2.7b", "--cluster", "dgx-a100-40g:1", "--gbs", "64",
                                     "--objective", "memory", "--schedules", "1f1b"], no_edge_recompute,
         ["--vocab-pad", "1024"], None, False),
        # Megatron-LM's block recomputation from the search: activation-bound, the best plan recomputes the first 2
        # of the 4 layers (test_search_framework's test_block_recompute_n: 0 and 1 do not fit, 3 is slower)
        ("search_block_recompute", ["search", "--model", "@DATA@/models/good/tiny-gpt-48k.json", "--cluster",
                                    "dgx-a100-40g:1", "--gbs", "16", "--tp", "1", "--mbs", "2", "--cp", "1"], None,
         ["--vocab-pad", "1024"], None, True,
         [Expect.has("--recompute-granularity", "full"), Expect.has("--recompute-method", "block"),
          Expect.has("--recompute-num-layers", "2")]),
        ("refuse_per_layer", ["search", "--model", "gpt3-1.3b", "--cluster", "dgx-a100-40g:1", "--gbs", "64"], None,
         ["--vocab-pad", "1024"], r"one strategy for the whole model", False),
        ("refuse_fsdp_pp", ["estimate", *H100_4, "--tp", "2", "--pp", "2", "--seq-parallel", "--zero", "3", "--gbs",
                            "64"], None, ["--vocab-pad", "256"], r"ZeRO stage 3 with pipeline parallelism", False),
        ("refuse_v_half", ["estimate", *H100_4, "--tp", "2", "--pp", "4", "--seq-parallel", "--schedule", "v-half",
                           "--gbs", "128"], None, ["--vocab-pad", "256"], r"runs no schedule 'v-half'", False),
        ("refuse_head_recompute", ["estimate", *H100_4, "--tp", "2", "--pp", "4", "--seq-parallel", "--gbs", "128",
                                   "--recompute", "full"], None, ["--vocab-pad", "256"],
         r"recomputes transformer layers only; layer 0 \(embedding\)", False),
        ("refuse_oases", ["estimate", "--model", "gpt3-1.3b", "--cluster", "dgx-a100-80g:1", "--tp", "2", "--mbs", "2",
                          "--gbs", "64", "--recompute", "full", "--tp-overlap", "oases"], None,
         ["--vocab-pad", "1024"], r"has no TP overlap 'oases'", False),
        # context parallelism (#21): the ring (p2p) with TP and SP, the all-to-all (a2a) with a pipeline, a search
        # at 128K tokens that plans it, and Megatron's sequence rule (2 x cp whatever the kind)
        ("cp_ring_tp8", ["estimate", "--model", "llama3-8b", "--seq", "131072", "--cluster", "dgx-h100:8", "--tp", "8",
                         "--cp", "8", "--seq-parallel", "--gbs", "8", "--recompute", "full"], no_edge_recompute,
         ["--seq", "131072", "--vocab-pad", "1024"], None, True,
         [Expect.has("--context-parallel-size", "8"), Expect.has("--cp-comm-type", "p2p")]),
        ("cp_a2a_pp2", ["estimate", "--model", "llama3-8b", "--seq", "32768", "--cluster", "dgx-h100:4", "--tp", "2",
                        "--cp", "4", "--cp-comm", "a2a", "--pp", "2", "--seq-parallel", "--zero", "1", "--gbs", "64"],
         None, ["--seq", "32768", "--vocab-pad", "256"], None, True,
         [Expect.has("--context-parallel-size", "4"), Expect.has("--cp-comm-type", "a2a"), *ZERO1_MEGATRON]),
        ("search_llama3_8b_cp", ["search", "--model", "llama3-8b", "--seq", "131072", "--cluster", "dgx-h100:8"], None,
         ["--seq", "131072", "--vocab-pad", "1024"], None, True, [Expect.has("--context-parallel-size", positive)]),
        ("refuse_cp_seq", ["estimate", "--model", "llama3-8b", "--seq", "8196", "--cluster", "dgx-h100:1", "--cp",
                           "4", "--cp-comm", "a2a", "--zero", "1", "--gbs", "8"], None,
         ["--seq", "8196", "--vocab-pad", "128"], r"multiple of 2 x cp 4", False),
        # mixture of experts and latent attention (#21): Mixtral with 8-way expert parallelism (all-to-all dispatch)
        # and without (the allgather dispatcher of a sequence-parallel MLP), Qwen3-30B-A3B's expert grid of etp 2 x
        # ep 8, DeepSeek-V3 (MLA, 3 dense layers then 58 MoE ones, sigmoid routing with expert bias, a shared
        # expert) on 512 H100s with ep 64 (a hand-written plan file; the others edit estimate's plans or take --ep),
        # the interleaves of --moe-layer-freq (a period, an int), a capacity factor, top-1 routing; the rules refused
        ("mixtral_ep8", ["estimate", "--model", "mixtral-8x7b", "--seq", "4096", "--cluster", "dgx-h100:8", "--tp", "2",
                         "--pp", "4", "--seq-parallel", "--zero", "1", "--gbs", "256", "--ep", "8", "--etp", "1"], None,
         ["--seq", "4096", "--vocab-pad", "256"], None, True,
         [Expect.has("--num-experts", "8"), Expect.has("--expert-model-parallel-size", "8"),
          Expect.has("--expert-tensor-parallel-size", "1"), Expect.has("--moe-token-dispatcher-type", "alltoall"),
          Expect.has("--moe-router-topk", "2"), Expect.has("--moe-ffn-hidden-size", "14336"),
          Expect.has("--moe-grouped-gemm"), Expect.lacks("--moe-layer-freq"), Expect.lacks("--multi-latent-attention"),
          *ZERO1_MEGATRON]),
        ("mixtral_tp_experts", ["estimate", "--model", "mixtral-8x7b", "--seq", "4096", "--cluster", "dgx-h100:8",
                                "--tp", "2", "--pp", "4", "--seq-parallel", "--zero", "1", "--gbs", "256",
                                "--recompute", "full"], no_edge_recompute, ["--seq", "4096", "--vocab-pad", "256"],
         None, True,
         [Expect.has("--expert-model-parallel-size", "1"), Expect.has("--expert-tensor-parallel-size", "2"),
          Expect.has("--moe-token-dispatcher-type", "allgather")]),
        ("qwen3_etp2_ep8", ["estimate", "--model", "qwen3-30b-a3b", "--cluster", "dgx-h100:4", "--tp", "2", "--pp",
                            "2", "--seq-parallel", "--zero", "1", "--gbs", "128", "--recompute", "full"],
         experts(8, 2, no_edge_recompute), ["--vocab-pad", "256"], None, False,
         [Expect.has("--expert-model-parallel-size", "8"), Expect.has("--expert-tensor-parallel-size", "2"),
          Expect.has("--num-experts", "128"), Expect.has("--moe-router-topk", "8"),
          Expect.has("--moe-token-dispatcher-type", "alltoall")]),
        ("deepseek_v3_ep64", ["plan", "--model", "deepseek-v3", "--cluster", "dgx-h100:64",
                              fixed_plan([7, 8, 8, 8, 8, 8, 8, 6], 1024, 1, 8, tp=2, dp=32, zero=1, ckpt="full",
                                         sp=True, overlap="none", attention="fused", dp_overlap=True, cp=1,
                                         cp_comm="ring", ep=64, etp=1)], None, ["--vocab-pad", "256"], None, False,
         [Expect.has("--multi-latent-attention"), Expect.has("--q-lora-rank", "1536"),
          Expect.has("--kv-lora-rank", "512"), Expect.has("--qk-head-dim", "128"),
          Expect.has("--qk-pos-emb-head-dim", "64"), Expect.has("--v-head-dim", "128"),
          Expect.has("--rope-type", "rope"), Expect.lacks("--kv-channels"), Expect.lacks("--group-query-attention"),
          Expect.has("--num-experts", "256"), Expect.has("--moe-layer-freq", "([0]*3+[1]*58)"),
          Expect.has("--ffn-hidden-size", "18432"), Expect.has("--moe-ffn-hidden-size", "2048"),
          Expect.has("--moe-shared-expert-intermediate-size", "2048"),
          Expect.has("--moe-router-score-function", "sigmoid"), Expect.has("--moe-router-enable-expert-bias"),
          Expect.has("--moe-router-num-groups", "8"), Expect.has("--moe-router-group-topk", "4"),
          Expect.has("--expert-model-parallel-size", "64"), Expect.has("--decoder-first-pipeline-num-layers", "7"),
          Expect.lacks("--moe-expert-capacity-factor")]),
        ("moe_interleave_capacity", ["estimate", "--model", "@DATA@/export/moe-alt.json", "--cluster",
                                     "dgx-a100-80g:1", "--tp", "2", "--seq-parallel", "--gbs", "64"], experts(4, 1),
         ["--vocab-pad", "256"], None, False,
         [Expect.has("--moe-layer-freq", "([0]+[1])*4"), Expect.has("--moe-expert-capacity-factor", "1.25"),
          Expect.has("--moe-router-pre-softmax"), Expect.lacks("--disable-bias-linear"),
          Expect.has("--expert-tensor-parallel-size", "1")]),
        ("moe_every2_shared", ["estimate", "--model", "@DATA@/export/moe-every2.json", "--cluster", "dgx-h100:2",
                               "--tp", "2", "--pp", "2", "--seq-parallel", "--gbs", "64"], experts(4, 2),
         ["--vocab-pad", "256"], None, False,
         [Expect.has("--moe-layer-freq", "2"), Expect.has("--moe-shared-expert-intermediate-size", "2048"),
          Expect.has("--ffn-hidden-size", "8192")]),
        # searches of the expert grid: Mixtral's best plan (ep 1 on 64 H100s), Mixtral with --ep 8 fixed, and a
        # small MoE model at 64K tokens whose best plan has ep 8 beside cp 2 (test_search_brute's tiny_moe_long)
        ("search_mixtral", ["search", "--model", "mixtral-8x7b", "--seq", "4096", "--cluster", "dgx-h100:8"], None,
         ["--seq", "4096", "--vocab-pad", "256"], None, True,
         [Expect.has("--num-experts", "8"), Expect.has("--expert-model-parallel-size", "1"),
          Expect.has("--moe-token-dispatcher-type", "allgather")]),
        ("search_mixtral_ep8", ["search", "--model", "mixtral-8x7b", "--seq", "4096", "--cluster", "dgx-h100:8",
                                "--ep", "8"], None, ["--seq", "4096", "--vocab-pad", "256"], None, True,
         [Expect.has("--expert-model-parallel-size", "8"), Expect.has("--moe-token-dispatcher-type", "alltoall")]),
        ("search_moe_ep_cp", ["search", "--model", "@DATA@/models/good/tiny-moe-search.json", "--seq", "65536",
                              "--cluster", "dgx-a100-40g:1", "--gbs", "4"], None, ["--seq", "65536", "--vocab-pad",
                                                                                  "256"], None, True,
         [Expect.has("--expert-model-parallel-size", positive), Expect.has("--context-parallel-size", positive),
          Expect.has("--moe-token-dispatcher-type", "alltoall")]),
        ("refuse_moe_tp_no_sp", ["estimate", "--model", "mixtral-8x7b", "--seq", "4096", "--cluster", "dgx-h100:8",
                                 "--tp", "2", "--pp", "4", "--zero", "1", "--gbs", "256"], None,
         ["--seq", "4096", "--vocab-pad", "256"], r"MoE layers with tensor parallelism only with sequence parallelism",
         False),
        ("refuse_moe_bias_etp", ["estimate", "--model", "@DATA@/export/moe-alt.json", "--cluster", "dgx-a100-80g:1",
                                 "--tp", "2", "--seq-parallel", "--gbs", "64"], experts(2, 2), ["--vocab-pad", "256"],
         r"MoE layers with biases only with expert tensor parallelism 1", False),
        ("refuse_dense_ep", ["estimate", *H100_4, "--tp", "2", "--pp", "4", "--seq-parallel", "--gbs", "128"],
         experts(2, 2), ["--vocab-pad", "256"], r"has no mixture-of-experts layer: the plan's expert grid", False),
    ],
    "deepspeed": [
        ("pp4_balanced_zero1", ["estimate", *H100_4, "--tp", "2", "--pp", "4", "--zero", "1", "--gbs", "256",
                                "--recompute", "full", "--dp-overlap", "off"], no_edge_recompute,
         ["--vocab-pad", "256"], None, True),
        ("pp4_uniform_parts", ["estimate", "--model", "gpt3-1.3b", "--cluster", "dgx-a100-80g:1", "--tp", "2", "--pp",
                               "4", "--zero", "1", "--gbs", "64", "--dp-overlap", "off"], resplit([6, 7, 6, 5]),
         ["--vocab-pad", "1024"], None, False),
        ("search_gpt3_13b_pp", ["search", "--model", "gpt3-13b", "--cluster", "dgx-a100-40g:2", "--gbs", "64",
                                "--pp", "4"], None, ["--vocab-pad", "1024"], None, True),
        ("pp1_zero3", ["estimate", "--model", "llama2-7b", "--cluster", "dgx-a100-80g:1", "--zero", "3", "--gbs", "64",
                       "--mbs", "2"], None, ["--vocab-pad", "256"], None, True),
        ("pp1_zero2_tp2_full", ["estimate", "--model", "gpt3-6.7b", "--cluster", "dgx-a100-80g:1", "--tp", "2",
                                "--zero", "2", "--gbs", "64", "--mbs", "4", "--recompute", "full"], no_edge_recompute,
         ["--vocab-pad", "1024"], None, False),
        ("fp16_pp2_zero0", ["estimate", "--model", "gpt3-1.3b", "--cluster", "p3-8xlarge:1", "--tp", "2", "--pp", "2",
                            "--gbs", "32", "--dp-overlap", "off", "--recompute", "full"], no_edge_recompute,
         ["--vocab-pad", "1024"], None, False),
        ("search_llama2", ["search", "--model", "llama2-7b", "--cluster", "dgx-a100-80g:1"], None,
         ["--vocab-pad", "1024"], None, True, [Expect.has("zero_optimization.stage", 2)]),
        ("search_llama3_70b_zero3", ["search", "--model", "llama3-70b", "--cluster", "dgx-h100:8"], None,
         ["--vocab-pad", "1024"], None, True,
         [Expect.has("zero_optimization.stage", 3), Expect.has("zero_optimization.stage3_prefetch_bucket_size"),
          Expect.lacks("_psearch.topology")]),
        ("search_llama2_70b_pipeline", ["search", "--model", "llama2-70b", "--cluster", "dgx-a100-80g:8"], None,
         ["--vocab-pad", "1024"], None, True,
         [Expect.has("_psearch.topology.num_pp", positive), Expect.has("_psearch.topology.num_mp", positive),
          Expect.has("zero_optimization.stage", 1), Expect.has("_psearch.PipelineModule.partition_method")]),
        ("search_llama3_70b_pp8", ["search", "--model", "llama3-70b", "--cluster", "dgx-h100:8", "--pp", "8"], None,
         ["--vocab-pad", "1024"], None, True,
         [Expect.has("_psearch.topology.num_pp", 8), Expect.has("_psearch.PipelineModule.checkpointable_layers",
                                                                ["TransformerLayer"])]),
        ("search_memory_objective", ["search", "--model", "llama3-8b", "--cluster", "dgx-h100:2", "--objective",
                                     "memory"], None, ["--vocab-pad", "1024"], None, True, [Expect.least_memory()]),
        ("refuse_zero2_pp", ["estimate", *H100_4, "--tp", "2", "--pp", "2", "--zero", "2", "--gbs", "64",
                             "--dp-overlap", "off"], None, ["--vocab-pad", "256"],
         r"does not run ZeRO stage 2 with pipeline", False),
        ("refuse_bf16_zero0_pp", ["estimate", *H100_4, "--tp", "2", "--pp", "2", "--gbs", "64", "--dp-overlap", "off"],
         None, ["--vocab-pad", "256"], r"pipeline engine shards the optimizer states", False),
        ("refuse_sp", ["estimate", *H100_4, "--tp", "2", "--seq-parallel", "--zero", "1", "--gbs", "64"], None,
         ["--vocab-pad", "256"], r"no Megatron sequence parallelism", False),
        ("refuse_zero0_overlap", ["estimate", "--model", "gpt3-1.3b", "--cluster", "dgx-a100-80g:1", "--gbs", "64",
                                  "--mbs", "2"], None, ["--vocab-pad", "1024"],
         r"cannot run ZeRO stage 0 with its data-parallel collectives overlapped", False),
        ("refuse_fp8", ["estimate", *H100_4, "--tp", "2", "--zero", "1", "--gbs", "64", "--dtype", "fp8"], None,
         ["--vocab-pad", "256", "--dtype", "fp8"], r"does not train in fp8", False),
        ("refuse_cp", ["estimate", "--model", "gpt3-1.3b", "--seq", "8192", "--cluster", "dgx-a100-80g:1", "--cp", "2",
                       "--zero", "1", "--gbs", "8", "--dp-overlap", "off"], None,
         ["--seq", "8192", "--vocab-pad", "1024"], r"runs no context parallelism: its config has no key for it",
         False),
        # mixture of experts (#21): not in DeepSpeed's config (deepspeed.moe.layer.MoE is model code)
        ("refuse_moe", ["estimate", "--model", "mixtral-8x7b", "--seq", "4096", "--cluster", "dgx-h100:8", "--tp", "2",
                        "--pp", "4", "--zero", "1", "--gbs", "256", "--dp-overlap", "off"], None,
         ["--seq", "4096", "--vocab-pad", "256"], r"config cannot describe mixture-of-experts layers", False),
    ],
    "torchtitan": [
        ("fsdp_tp2_full", ["estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:2", "--tp", "2", "--seq-parallel",
                           "--zero", "3", "--gbs", "64", "--recompute", "full"], no_edge_recompute,
         ["--vocab-pad", "1"], None, True),
        ("interleaved_uneven", ["estimate", *H100_4, "--tp", "2", "--pp", "4", "--seq-parallel", "--zero", "3",
                                "--schedule", "interleaved", "--gbs", "128"], resplit([3, 4, 5, 4, 4, 4, 4, 4]),
         ["--vocab-pad", "1"], None, False),
        ("gpipe_pp2", ["estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:2", "--tp", "4", "--pp", "2",
                       "--seq-parallel", "--zero", "3", "--schedule", "gpipe", "--gbs", "16", "--recompute", "full"],
         no_edge_recompute, ["--vocab-pad", "1"], None, True),
        ("pp2_1f1b_uneven", ["estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:2", "--tp", "4", "--pp", "2",
                             "--seq-parallel", "--zero", "3", "--gbs", "64"], resplit([15, 17]), ["--vocab-pad", "1"],
         None, False),
        ("ddp_debugmodel", ["estimate", "--model", "@DATA@/export/tt-debugmodel.json", "--cluster", "dgx-a100-80g:1",
                            "--gbs", "64", "--mbs", "2"], None, ["--vocab-pad", "1"], None, True),
        ("fp8_fsdp", ["estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:2", "--tp", "2", "--seq-parallel",
                      "--zero", "3", "--gbs", "64", "--dtype", "fp8"], None, ["--vocab-pad", "1", "--dtype", "fp8"],
         None, True),
        ("fsdp_op_sac", ["estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:1", "--zero", "3", "--dp", "8",
                         "--gbs", "16", "--mbs", "2", "--recompute", "op"], None, ["--vocab-pad", "1"], None, True),
        ("search_llama3_8b", ["search", "--model", "llama3-8b", "--cluster", "dgx-h100:2", "--gbs", "64"], None,
         ["--vocab-pad", "1"], None, True, TT_FSDP),
        ("search_debugmodel_pp", ["search", "--model", "@DATA@/export/tt-debugmodel.json", "--cluster",
                                  "dgx-a100-80g:1", "--gbs", "64", "--pp", "2"], None, ["--vocab-pad", "1"], None,
         True),
        # pp fixed at 8: since the search takes torchtitan's per-op checkpointing, FSDP without a pipeline wins here
        ("search_llama3_70b_uneven", ["search", "--model", "llama3-70b", "--cluster", "dgx-h100:8", "--pp", "8"], None,
         ["--vocab-pad", "1"], None, True,
         [Expect.has("parallelism.pipeline_parallel_schedule", "1F1B"), *TT_FSDP,
          Expect.split(lambda b, pp: len(b) == pp > 1 and needs_layout(b, pp), "uneven in the middle")]),
        ("search_llama3_405b_uneven", ["search", "--model", "llama3-405b", "--cluster", "dgx-h100:16"], None,
         ["--vocab-pad", "1"], None, True,
         [Expect.split(lambda b, pp: len(b) == pp > 1 and len(set(b)) > 1, "uneven")]),
        ("search_llama3_70b_fsdp", ["search", "--model", "llama3-70b", "--cluster", "dgx-h100:4", "--pp", "1"], None,
         ["--vocab-pad", "1"], None, True, TT_FSDP),
        ("search_llama3_70b_interleaved", ["search", "--model", "llama3-70b", "--cluster", "dgx-h100:8", "--schedule",
                                           "interleaved"], None, ["--vocab-pad", "1"], None, True,
         [Expect.has("parallelism.pipeline_parallel_schedule", "Interleaved1F1B"),
          Expect.split(lambda b, pp: len(b) >= 2 * pp, "interleaved")]),
        ("search_memory_objective", ["search", "--model", "llama3-8b", "--cluster", "dgx-h100:2", "--objective",
                                     "memory"], None, ["--vocab-pad", "1"], None, True, [Expect.least_memory()]),
        ("memory_objective_as_run", ["search", "--model", "@DATA@/export/tt-debugmodel.json", "--cluster",
                                     "dgx-a100-80g:1", "--gbs", "64", "--objective", "memory", "--schedules", "1f1b"],
         no_edge_recompute, ["--vocab-pad", "1"], None, False),
        ("refuse_v_zb", ["estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:2", "--tp", "2", "--seq-parallel",
                         "--zero", "3", "--pp", "2", "--schedule", "v-zb", "--gbs", "64"], None, ["--vocab-pad", "1"],
         r"runs no schedule 'v-zb'", False),
        ("refuse_zero1", ["estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:2", "--tp", "2", "--seq-parallel",
                          "--zero", "1", "--gbs", "64"], None, ["--vocab-pad", "1"], r"does not run ZeRO stage 1",
         False),
        ("refuse_ddp_tp", ["estimate", "--model", "@DATA@/export/tt-debugmodel.json", "--cluster", "dgx-a100-80g:1",
                           "--tp", "2", "--seq-parallel", "--gbs", "64"], None, ["--vocab-pad", "1"],
         r"only without tensor or pipeline parallelism", False),
        ("refuse_padded_vocab", ["estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:2", "--tp", "2",
                                 "--seq-parallel", "--zero", "3", "--gbs", "64"], None, ["--vocab-pad", "1024"],
         r"matches no llama3 flavor", False),
        ("refuse_tp_without_sp", ["estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:2", "--tp", "2",
                                  "--zero", "3", "--gbs", "64"], None, ["--vocab-pad", "1"],
         r"tensor parallelism with sequence parallelism only", False),
        # context parallelism (#21): the ring with TP, SP and FSDP over dp x cp, a search that plans it, and the
        # kind and sharding torchtitan does not run
        ("cp_fsdp_tp2", ["estimate", "--model", "llama3-8b", "--seq", "65536", "--cluster", "dgx-h100:2", "--tp", "2",
                         "--cp", "4", "--seq-parallel", "--zero", "3", "--gbs", "8", "--recompute", "full"],
         no_edge_recompute, ["--seq", "65536", "--vocab-pad", "1"], None, True,
         [Expect.has("parallelism.context_parallel_degree", 4),
          Expect.has("parallelism.context_parallel_rotate_method", "alltoall")]),
        # torchtitan's default rotation, all-gathered K/V (priced as PyTorch's _attention.py does it)
        ("cp_allgather", ["estimate", "--model", "llama3-8b", "--seq", "65536", "--cluster", "dgx-h100:2", "--tp", "2",
                          "--cp", "4", "--cp-comm", "allgather", "--seq-parallel", "--zero", "3", "--gbs", "8",
                          "--recompute", "full"],
         no_edge_recompute, ["--seq", "65536", "--vocab-pad", "1"], None, True,
         [Expect.has("parallelism.context_parallel_degree", 4),
          Expect.has("parallelism.context_parallel_rotate_method", "allgather")]),
        ("search_llama3_8b_cp", ["search", "--model", "llama3-8b", "--seq", "131072", "--cluster", "dgx-h100:8"], None,
         ["--seq", "131072", "--vocab-pad", "1"], None, True,
         [Expect.has("parallelism.context_parallel_degree", positive)]),
        ("refuse_cp_a2a", ["estimate", "--model", "llama3-8b", "--seq", "32768", "--cluster", "dgx-h100:2", "--tp",
                           "2", "--cp", "4", "--cp-comm", "a2a", "--seq-parallel", "--zero", "3", "--gbs", "8"], None,
         ["--seq", "32768", "--vocab-pad", "1"], r"runs no a2a context parallelism", False),
        ("refuse_cp_ddp", ["estimate", "--model", "@DATA@/export/tt-debugmodel.json", "--seq", "8192", "--cluster",
                           "dgx-a100-80g:1", "--cp", "2", "--gbs", "8"], None, ["--seq", "8192", "--vocab-pad", "1"],
         r"context parallelism \(cp 2\) with ZeRO stage 3", False),
        # mixture of experts (#21): the export writes torchtitan's llama3 model only
        ("refuse_moe", ["estimate", "--model", "mixtral-8x7b", "--seq", "4096", "--cluster", "dgx-h100:8", "--tp", "2",
                        "--pp", "4", "--seq-parallel", "--zero", "3", "--gbs", "256"], experts(8, 1),
         ["--seq", "4096", "--vocab-pad", "1"], r"writes its llama3 model only; layer 1 of mixtral-8x7b is a "
                                                r"mixture-of-experts layer", False),
    ],
}


def run(args, **kw):
    # a search here takes well under a second; the limit keeps a hung psearch from holding ctest for its 600 s
    return subprocess.run(args, capture_output=True, text=True, timeout=120, **kw)


def model_path(model):
    """The model JSON psearch reads for `model`: a file, or a preset of the source tree's presets/models/."""
    if model.endswith(".json"):
        return model
    return os.path.join(HERE, "..", "..", "presets", "models", f"{model}.json")


def megatron_checks(text, gpus, keys, model, llama3):
    """Why the Megatron-LM export `text` does not build `model` (None: it does). For Llama 3 also its model flags
    with their hand-written values (LLAMA3_FLAGS), and that dropping any one of them (the flag line removed from the
    launch) makes the validator or the model comparison fail: no flag is carried without being checked."""
    a, errors = fwlib.megatron_args(text, keys["flags"])
    arch = megatron_model.arch_errors(a, model)
    if errors or arch:
        return "the flags build another model: " + "; ".join(errors + arch)
    args, notes = text.split("\n\n", 1)
    arch_a = megatron_model.megatron_arch(a)
    if arch_a["moe"] or arch_a["mla"]:
        for flag in megatron_model.MOE_MLA_MODEL_FLAGS:
            lines = [ln for ln in args.splitlines() if ln.split()[0] != flag]
            if len(lines) == len(args.splitlines()):
                continue
            if megatron_model.MOE_MLA_DEFAULTS.get(flag) == a[flag] or \
                    (flag == "--moe-ffn-hidden-size" and a[flag] == a.get("--ffn-hidden-size")) or \
                    (flag == "--ffn-hidden-size" and int(a[flag]) == megatron_model.ffn_default(a)):
                continue  # Megatron's default: the same model without it
            dropped = "\n".join(lines) + "\n\n" + notes
            b, errs = fwlib.megatron_args(dropped, keys["flags"])
            if not (errs or fwlib.validate_megatron(dropped, gpus, keys) or megatron_model.arch_errors(b, model)):
                return f"the launch without {flag} passes as the same model: the check does not read {flag}"
    if not llama3:
        return None
    ex = Export("megatron", text, keys, None, None, None)
    missing = [m for m in (c(ex) for c in LLAMA3_FLAGS) if m]
    if missing:
        return "Llama 3 model flags: " + "; ".join(missing)
    for flag in megatron_model.LLAMA3_MODEL_FLAGS:
        lines = [ln for ln in args.splitlines() if ln.split()[0] != flag]
        if len(lines) != len(args.splitlines()) - 1:
            return f"{flag}: not one line of the launch"
        dropped = "\n".join(lines) + "\n\n" + notes
        b, errs = fwlib.megatron_args(dropped, keys["flags"])
        if not (errs or fwlib.validate_megatron(dropped, gpus, keys) or megatron_model.arch_errors(b, model)):
            return f"the launch without {flag} passes as the same model: the check does not read {flag}"
    return None


def main():
    psearch, data, fw = sys.argv[1], sys.argv[2], sys.argv[3]
    only = set(sys.argv[4:])
    keys = json.load(open(os.path.join(data, "export", {"megatron": "megatron_flags.json",
                                                        "deepspeed": "deepspeed_keys.json",
                                                        "torchtitan": "torchtitan_keys.json"}[fw])))
    validate = {"megatron": fwlib.validate_megatron, "deepspeed": fwlib.validate_deepspeed,
                "torchtitan": fwlib.validate_torchtitan}[fw]
    read = {"megatron": fwlib.megatron_read, "deepspeed": fwlib.deepspeed_read,
            "torchtitan": fwlib.torchtitan_read}[fw]
    has_framework = "--framework" in run([psearch, "--help"]).stdout
    fails, passed, refused, skipped = [], 0, 0, 0
    tmp = tempfile.mkdtemp(prefix="psearch-export-")
    times = []
    for name, source, edit, opts, refusal, flag_path, *expect in CASES[fw]:
        if only and name not in only:
            continue
        expect = expect[0] if expect else []
        t0 = time.monotonic()
        source = [a.replace("@DATA@", data) if isinstance(a, str) else a for a in source]
        model = source[source.index("--model") + 1]
        cluster = source[source.index("--cluster") + 1]
        inputs = ["--model", model, "--cluster", cluster] + opts

        def fail(why):
            fails.append(f"{fw}/{name}: {why}")
            print(f"FAIL {fw}/{name}: {why}")

        cmd = source[1:] if source[0] == "search" else source
        seq = ["--seq", opts[opts.index("--seq") + 1]] if "--seq" in opts else []
        # a search exported as it stands: the plan of the search for that framework (what --export FW writes)
        if source[0] == "search" and edit is None and refusal is None:
            cmd = cmd + ["--framework", fw]
        pad = ["--vocab-pad", opts[opts.index("--vocab-pad") + 1]]
        if source[0] == "plan":  # ["plan", "--model", M, "--cluster", C, fixed_plan(...)]
            plan = source[-1]()
        else:
            r = run([psearch, *cmd, *pad, "--format", "json"])
            if r.returncode:
                fail(f"making the plan: {' '.join(cmd)}: {r.stderr.strip()}")
                continue
            plan = json.loads(r.stdout)
        if edit:
            plan = edit(plan)
        orig = os.path.join(tmp, f"{fw}-{name}.json")
        json.dump(plan, open(orig, "w"))
        ex = run([psearch, "estimate", "--plan", orig, *inputs, "--export", fw])
        if refusal:
            if ex.returncode != 2 or not re.search(refusal, ex.stderr) or ex.stdout:
                fail(f"expected exit 2 matching /{refusal}/, got {ex.returncode}: {ex.stderr.strip()[:300]}")
            else:
                refused += 1
                print(f"ok   {fw}/{name}: refused: {ex.stderr.strip()[len('psearch: error: '):][:160]}")
            continue
        if ex.returncode:
            fail(f"export failed ({ex.returncode}): {ex.stderr.strip()}")
            continue
        text = ex.stdout
        gpus = plan.get("gpus") or json.loads(run([psearch, "estimate", "--plan", orig, *inputs, "--format",
                                                   "json"]).stdout)["gpus"]
        errors = validate(text, gpus, keys)
        if errors:
            fail("the framework would refuse it: " + "; ".join(errors))
            continue
        ex_doc = Export(fw, text, keys, plan, [*cmd, *pad], psearch)
        missing = [m for m in (c(ex_doc) for c in expect) if m]
        if missing:
            fail("the export lacks the shape this case covers: " + "; ".join(missing))
            continue
        rb_model = model
        if fw == "megatron":
            # the model flags: the model the launch builds is the model planned, and the read-back plan is estimated
            # on that model (built from the flags alone), so a dropped or wrong model flag fails here
            preset = megatron_model.load_model(model_path(model))
            if seq:  # the model as --seq makes it: every layer's sequence
                preset = dict(preset, seq=int(seq[1]),
                              layers=[{k: v for k, v in g.items() if k != "seq"} for g in preset["layers"]])
            why = megatron_checks(text, gpus, keys, preset, llama3=preset.get("family") == "llama3")
            if why:
                fail(why)
                continue
            rb_model = os.path.join(tmp, f"{fw}-{name}-model.json")
            json.dump(megatron_model.model_json(ex_doc.doc, preset["vocab"], preset["name"]), open(rb_model, "w"))
        rb, rb_opts, shape = read(text, gpus, keys)
        rb.update({"model": rb_model, "cluster": cluster})
        rb_path = os.path.join(tmp, f"{fw}-{name}-readback.json")
        json.dump(rb, open(rb_path, "w"))
        want = run([psearch, "estimate", "--plan", orig, *inputs, "--format", "json"])
        got = run([psearch, "estimate", "--plan", rb_path, "--model", rb_model, "--cluster", cluster, *rb_opts,
                   "--format", "json"])
        if want.returncode or got.returncode:
            fail(f"estimate: {want.stderr.strip()} {got.stderr.strip()}")
            continue
        wp, gp = json.loads(want.stdout)["predicted"], json.loads(got.stdout)["predicted"]
        if wp != gp:
            diff = {k: (wp[k], gp.get(k)) for k in wp if wp[k] != gp.get(k)}
            fail(f"the read-back plan predicts otherwise: {json.dumps(diff)[:600]}")
            continue
        if shape:
            ms = json.loads(run([psearch, "model", "show", model, *seq, "--format", "json"]).stdout)
            blocks = [g for g in ms["layer_groups"] if g["kind"] == "decoder"]
            b = blocks[0]
            # --ffn-hidden-size is the dense layers' MLP (the experts' width in a model of MoE layers only)
            dense = next((g for g in blocks if not g.get("n_experts")), b)
            want_shape = {"layers": sum(g["count"] for g in blocks), "hidden": b["hidden"], "heads": b["heads"],
                          "ffn": dense["ffn_hidden"], "kv_heads": b["kv_heads"], "seq": b["seq"]}
            if want_shape != shape:
                fail(f"model flags {shape} are not the model's {want_shape}")
                continue
        if flag_path and source[0] == "estimate":
            # the same plan from estimate's plan options (recomputation of the transformer layers only)
            direct = run([psearch, *source, *pad, "--export", fw])
            if direct.stdout != text:
                fail(f"estimate's plan options and the plan file export differently: {direct.stderr.strip()}")
                continue
        if source[0] == "search" and edit is None:
            direct = run([psearch, *source[1:], *pad, "--export", fw])
            if direct.returncode or direct.stdout != text:
                fail(f"the search's own --export differs ({direct.returncode}): {direct.stderr.strip()}")
                continue
            if has_framework:
                fwr = run([psearch, *source[1:], *pad, "--framework", fw, "--export", fw])
                if fwr.returncode or validate(fwr.stdout, gpus, keys) or fwr.stdout != text:
                    fail(f"psearch --framework {fw} --export {fw}: {fwr.returncode} {fwr.stderr.strip()}")
                    continue
            else:
                skipped += 1
        passed += 1
        times.append((time.monotonic() - t0, name))
        print(f"ok   {fw}/{name}: valid, read back with the same prediction ({times[-1][0]:.1f} s)")
    if times:
        print(f"slowest: {max(times)[1]} {max(times)[0]:.1f} s")
    print(f"{fw}: {passed} exports validated and read back, {refused} refusals as expected"
          + (f", {skipped} --framework checks skipped (psearch has no --framework yet)" if skipped else ""))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
