#!/usr/bin/env python3
"""Fused attention kernels on this GPU: forward and backward time of PyTorch's scaled_dot_product_attention with
the FlashAttention and cuDNN backends at training shapes, as TFLOP/s and as a fraction of the dense BF16 peak.

What it is for: psearch's cost model times a fused attention layer at a fraction of the dense peak per GPU
generation (cost/layer_cost.c fused_eff; --cost-param attn_fwd_eff / attn_bwd_eff replace it). This measures those
fractions where a GPU and PyTorch are at hand; docs/costmodel.md records what it printed.

FLOPs are counted as executed: 4 * b * heads * s * keys * head_dim for the forward (two GEMMs), keys = (s + 1) / 2
with a causal mask (the tiles above the diagonal are skipped); the backward 2.5x the forward (FlashAttention-2,
Sec. 4.1). Output: one JSON document on stdout; exit 3 without a GPU or without PyTorch.

    python3 bench/gpu/attn_bench.py [--peak-tflops 989.4] [--tokens 32768] [--seqs 2048,4096,8192,16384]
"""
import argparse
import json
import sys

from torch_gpu import bf16_peak_tflops, torch_on_gpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peak-tflops", type=float, default=0.0,
                    help="dense BF16 peak of the GPU in TFLOP/s (default: from psearch's catalog by device name)")
    ap.add_argument("--tokens", type=int, default=32768, help="tokens per call (batch = tokens / seq)")
    ap.add_argument("--seqs", default="2048,4096,8192,16384")
    ap.add_argument("--heads", default="16,32")
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--reps", type=int, default=10)
    a = ap.parse_args()
    torch = torch_on_gpu("attn_bench")
    if torch is None:
        return 3
    try:
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except Exception as e:  # noqa: BLE001 - a PyTorch too old for the backend choice
        print(f"attn_bench: torch.nn.attention is not available ({e})", file=sys.stderr)
        return 3
    name = torch.cuda.get_device_name(0)
    peak = bf16_peak_tflops(name, a.peak_tflops)
    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)]
    rows = []
    for seq in [int(x) for x in a.seqs.split(",")]:
        for heads in [int(x) for x in a.heads.split(",")]:
            b = max(1, a.tokens // seq)
            for causal in (True, False):
                keys = (seq + 1) / 2 if causal else seq
                fwd_flops = 4.0 * b * heads * seq * keys * a.head_dim
                for bname, be in backends:
                    shape = (b, heads, seq, a.head_dim)
                    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                               for _ in range(3))
                    row = {"backend": bname, "batch": b, "heads": heads, "seq": seq, "head_dim": a.head_dim,
                           "causal": causal, "fwd_flops": fwd_flops}
                    try:
                        with sdpa_kernel([be]):
                            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                            grad = torch.randn_like(out)
                            out.backward(grad)
                            torch.cuda.synchronize()
                            ev = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
                            tf, tb = [], []
                            for _ in range(a.reps):
                                q.grad = k.grad = v.grad = None
                                ev[0].record()
                                out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                                ev[1].record()
                                out.backward(grad)
                                ev[2].record()
                                torch.cuda.synchronize()
                                tf.append(ev[0].elapsed_time(ev[1]) / 1e3)
                                tb.append(ev[1].elapsed_time(ev[2]) / 1e3)
                        tf.sort()
                        tb.sort()
                        f, bw = tf[len(tf) // 2], tb[len(tb) // 2]
                        row.update(fwd_s=f, bwd_s=bw, fwd_tflops=fwd_flops / f / 1e12,
                                   bwd_tflops=2.5 * fwd_flops / bw / 1e12)
                        if peak:
                            row.update(fwd_frac=row["fwd_tflops"] / peak, bwd_frac=row["bwd_tflops"] / peak)
                    except Exception as e:  # noqa: BLE001 - a backend that refuses a shape is reported, not fatal
                        row["error"] = str(e).splitlines()[0][:200]
                    rows.append(row)
                    print(f"attn_bench: {bname} s={seq} heads={heads} causal={causal}: "
                          f"{row.get('fwd_tflops', 0):.0f} / {row.get('bwd_tflops', 0):.0f} TFLOP/s fwd / bwd",
                          file=sys.stderr)
                    del q, k, v
    json.dump({"device": name, "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
               "peak_bf16_tflops": peak, "flop_convention": "executed: causal keys (s+1)/2, backward 2.5x forward",
               "rows": rows}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
