#!/usr/bin/env python3
"""Mixture-of-experts GEMMs on this GPU: the routed experts' matrix multiplies of one MoE layer, run as one grouped
GEMM (torch._grouped_mm, what torchtitan's MoE and Megatron-core's --moe-grouped-gemm use on Hopper), as one GEMM per
expert (the loop a framework runs without a grouped kernel), and as a single dense GEMM of the same FLOPs (the rate
one large GEMM reaches), at the expert counts and widths of today's MoE models and a range of tokens per expert.

What it is for: psearch's cost model times the routed experts as a grouped GEMM of n_experts GEMMs at
tokens x top_k / n_experts rows each (cost/layer_cost.c); this measures how far below a dense GEMM of equal FLOPs
such calls run where a GPU and PyTorch are at hand. Balanced routing (every expert the same tokens); the gate/up
projection (tokens x hidden) . (hidden x ffn) and the down projection (tokens x ffn) . (ffn x hidden), forward.

Output: one JSON document on stdout, a line per shape on stderr; exit 3 without a GPU or without PyTorch.

    python3 bench/gpu/grouped_gemm_bench.py [--peak-tflops 989.4] [--tokens 64,256,1024,4096] [--reps 20]
"""
import argparse
import json
import sys

from torch_gpu import bf16_peak_tflops, torch_on_gpu

# (name, routed experts, hidden, expert FFN width): the presets' MoE layers (presets/*.json, from the models' Hugging
# Face configs)
MODELS = [("mixtral-8x7b", 8, 4096, 14336), ("qwen3-30b-a3b", 128, 2048, 768),
          ("qwen3-235b-a22b", 128, 4096, 1536), ("deepseek-v3", 256, 7168, 2048)]


def timed(torch, fn, reps):
    """Median seconds of fn() over reps calls, after one warm-up, by CUDA events."""
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) / 1e3)
    ts.sort()
    return ts[len(ts) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peak-tflops", type=float, default=0.0,
                    help="dense BF16 peak of the GPU in TFLOP/s (default: from psearch's catalog by device name)")
    ap.add_argument("--tokens", default="64,256,1024,4096", help="tokens per expert")
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    torch = torch_on_gpu("grouped_gemm_bench")
    if torch is None:
        return 3
    name = torch.cuda.get_device_name(0)
    peak = bf16_peak_tflops(name, a.peak_tflops)
    grouped = getattr(torch, "_grouped_mm", None)
    bf = torch.bfloat16
    rows = []
    for model, experts, hidden, ffn in MODELS:
        for tpe in [int(x) for x in a.tokens.split(",")]:
            for proj, k, n in (("gate_up", hidden, ffn), ("down", ffn, hidden)):
                m = experts * tpe
                flops = 2.0 * m * n * k
                row = {"model": model, "experts": experts, "tokens_per_expert": tpe, "proj": proj, "m": m, "n": n,
                       "k": k, "flops": flops}
                try:
                    x = torch.randn(m, k, device="cuda", dtype=bf)
                    w = torch.randn(experts, k, n, device="cuda", dtype=bf)
                    wd = torch.randn(k, n, device="cuda", dtype=bf)
                    offs = torch.arange(tpe, m + 1, tpe, device="cuda", dtype=torch.int32)
                    row["dense_s"] = timed(torch, lambda: torch.mm(x, wd), a.reps)
                    row["loop_s"] = timed(torch, lambda: [torch.mm(x[e * tpe:(e + 1) * tpe], w[e])
                                                          for e in range(experts)], a.reps)
                    if grouped is not None:
                        try:
                            row["grouped_s"] = timed(torch, lambda: grouped(x, w, offs=offs), a.reps)
                        except Exception as e:  # noqa: BLE001 - a kernel that refuses a shape is reported
                            row["grouped_error"] = str(e).splitlines()[0][:200]
                    for kind in ("dense", "loop", "grouped"):
                        if kind + "_s" in row:
                            row[kind + "_tflops"] = flops / row[kind + "_s"] / 1e12
                            if peak:
                                row[kind + "_frac"] = row[kind + "_tflops"] / peak
                    del x, w, wd
                except Exception as e:  # noqa: BLE001 - out of memory or an unsupported shape: reported, not fatal
                    row["error"] = str(e).splitlines()[0][:200]
                rows.append(row)
                print(f"grouped_gemm_bench: {model} {proj} {tpe} tokens/expert: dense "
                      f"{row.get('dense_tflops', 0):.0f}, grouped {row.get('grouped_tflops', 0):.0f}, loop "
                      f"{row.get('loop_tflops', 0):.0f} TFLOP/s", file=sys.stderr)
    json.dump({"device": name, "torch": torch.__version__, "grouped_mm": grouped is not None,
               "peak_bf16_tflops": peak, "rows": rows}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
