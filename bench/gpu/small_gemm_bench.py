#!/usr/bin/env python3
"""BF16 GEMMs smaller than one wave of output tiles (what Transformer Engine's TP-overlap pieces and small
micro-batches run), timed with PyTorch (cuBLAS) on this GPU: m x n x k, median of CUDA-event timings, TFLOP/s.

What it is for: the GEMM shape model (docs/costmodel.md) runs a GEMM of fewer 128 x 128 output tiles than SMs in one
wave at tiles / SMs of the machine; cuBLAS may choose smaller tiles or split k for such shapes. This measures them.
Output: one JSON document on stdout; exit 3 without a GPU or PyTorch.

    python3 bench/gpu/small_gemm_bench.py [--reps 50]
"""
import argparse
import json
import sys

from torch_gpu import torch_on_gpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=50)
    a = ap.parse_args()
    torch = torch_on_gpu("small_gemm_bench")
    if torch is None:
        return 3
    props = torch.cuda.get_device_properties(0)
    rows = []
    for m in (128, 256, 512, 1024, 2048):
        for n in (1536, 1920, 2560, 4608, 6144, 8192):
            for k in (4096, 5120, 12288):
                x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
                w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
                for _ in range(5):
                    x @ w
                torch.cuda.synchronize()
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                t = []
                for _ in range(a.reps):
                    s.record()
                    x @ w
                    e.record()
                    e.synchronize()
                    t.append(s.elapsed_time(e) / 1e3)
                t.sort()
                med = t[len(t) // 2]
                rows.append({"m": m, "n": n, "k": k, "time_s": med, "tflops": 2.0 * m * n * k / med / 1e12,
                             "tiles_128x128": -(-m // 128) * -(-n // 128)})
    json.dump({"device": torch.cuda.get_device_name(0), "sm_count": props.multi_processor_count,
               "torch": torch.__version__, "dtype": "bf16", "rows": rows}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
