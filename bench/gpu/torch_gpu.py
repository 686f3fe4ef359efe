"""What the PyTorch benchmarks of bench/gpu share: PyTorch with a visible CUDA GPU, or the reason there is none."""
import sys


def torch_on_gpu(prog):
    """The torch module when PyTorch imports and sees a CUDA GPU; else None, after saying on stderr which is
    missing (the benchmark then exits 3, psearch's code for a system without what it needs)."""
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means no PyTorch to measure with
        print(f"{prog}: PyTorch is not available ({e})", file=sys.stderr)
        return None
    if not torch.cuda.is_available():
        print(f"{prog}: no CUDA GPU visible", file=sys.stderr)
        return None
    return torch


# Dense BF16 peaks of psearch's catalog (hw/gpu_catalog.c) in TFLOP/s, by the name the CUDA runtime reports.
BF16_PEAK_TFLOPS = [("H100", 989.4), ("H200", 989.4), ("GB200", 2500.0), ("B200", 2250.0), ("A100", 312.0)]


def bf16_peak_tflops(name, given=0.0):
    """`given` when set, else the catalog's dense BF16 peak for device `name` (0 when the catalog has none)."""
    return given or next((p for k, p in BF16_PEAK_TFLOPS if k in name), 0.0)
