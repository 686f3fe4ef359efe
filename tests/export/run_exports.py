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
FW` when psearch has that option (skipped otherwise).

usage: run_exports.py PSEARCH DATA_DIR FRAMEWORK [CASE ...]
"""
import copy
import json
import os
import re
import subprocess
import sys
import tempfile

import fwlib

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
                                                         "dp_overlap")}
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
         ["--vocab-pad", "1024"], None, True),
        ("memory_objective", ["search", "--model", "gpt3-2.7b", "--cluster", "dgx-a100-40g:1", "--gbs", "64",
                              "--objective", "memory", "--schedules", "1f1b"], None, ["--vocab-pad", "1024"],
         "@any", True),
        ("memory_objective_as_run", ["search", "--model", "gpt3-2.7b", "--cluster", "dgx-a100-40g:1", "--gbs", "64",
                                     "--objective", "memory", "--schedules", "1f1b"], no_edge_recompute,
         ["--vocab-pad", "1024"], None, False),
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
         ["--vocab-pad", "1024"], None, True),
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
        ("search_llama3_8b", ["search", "--model", "llama3-8b", "--cluster", "dgx-h100:2", "--gbs", "64"], None,
         ["--vocab-pad", "1"], None, True),
        ("search_debugmodel_pp", ["search", "--model", "@DATA@/export/tt-debugmodel.json", "--cluster",
                                  "dgx-a100-80g:1", "--gbs", "64", "--pp", "2"], None, ["--vocab-pad", "1"], None,
         True),
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
    ],
}


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, **kw)


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
    for name, source, edit, opts, refusal, flag_path in CASES[fw]:
        if only and name not in only:
            continue
        source = [a.replace("@DATA@", data) for a in source]
        model = source[source.index("--model") + 1]
        cluster = source[source.index("--cluster") + 1]
        inputs = ["--model", model, "--cluster", cluster] + opts

        def fail(why):
            fails.append(f"{fw}/{name}: {why}")
            print(f"FAIL {fw}/{name}: {why}")

        cmd = source[1:] if source[0] == "search" else source
        # a search exported as it stands: the plan of the search for that framework (what --export FW writes)
        if source[0] == "search" and edit is None and refusal is None:
            cmd = cmd + ["--framework", fw]
        pad = ["--vocab-pad", opts[opts.index("--vocab-pad") + 1]]
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
        if refusal == "@any":  # a search whose winner may be per-layer: either outcome, checked as such
            refusal = None if ex.returncode == 0 else r"cannot run this plan as planned"
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
        rb, rb_opts, shape = read(text, gpus, keys)
        rb.update({"model": model, "cluster": cluster})
        rb_path = os.path.join(tmp, f"{fw}-{name}-readback.json")
        json.dump(rb, open(rb_path, "w"))
        want = run([psearch, "estimate", "--plan", orig, *inputs, "--format", "json"])
        got = run([psearch, "estimate", "--plan", rb_path, "--model", model, "--cluster", cluster, *rb_opts,
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
            ms = json.loads(run([psearch, "model", "show", model, "--format", "json"]).stdout)
            blocks = [g for g in ms["layer_groups"] if g["kind"] == "decoder"]
            b = blocks[0]
            want_shape = {"layers": sum(g["count"] for g in blocks), "hidden": b["hidden"], "heads": b["heads"],
                          "ffn": b["ffn_hidden"], "kv_heads": b["kv_heads"], "seq": b["seq"]}
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
        print(f"ok   {fw}/{name}: valid, read back with the same prediction")
    print(f"{fw}: {passed} exports validated and read back, {refused} refusals as expected"
          + (f", {skipped} --framework checks skipped (psearch has no --framework yet)" if skipped else ""))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
