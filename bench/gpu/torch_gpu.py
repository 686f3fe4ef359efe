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
