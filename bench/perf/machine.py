"""What the machine is and can do, for `bench perf`: its name and software, matmul peaks, copy bandwidth, peak memory."""

from __future__ import annotations

import gc
import math
import os
import platform
import resource
import sys
import time

import numpy as np
import torch

from bench.train import hardware


def environment(device: torch.device) -> dict:
    default = hardware.autocast_dtype(device, "auto")
    harness_precision = "bf16" if default == torch.bfloat16 else "fp32"
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        note = (
            "auto: per cell, the faster of fp32 with TF32 and bf16 autocast, measured on its shape (bench.train.hardware.resolve_precision)"
        )
    else:
        name = hardware.cpu_name()
        note = (
            "bf16 autocast (auto: this CPU has native bf16, AMX or AVX512-BF16)"
            if default
            else "fp32 (auto: this CPU has no native bf16, autocast would emulate it); bf16 shown for reference"
        )
    env = {
        "device": device.type,
        "device_name": name,
        "cpu": hardware.cpu_name(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "cpu_fast_bf16": hardware.cpu_has_fast_bf16(),
        "harness_precision": harness_precision,
        "precision_note": note,
    }
    if device.type == "cuda":
        env["cuda_matmul_allow_tf32"] = torch.backends.cuda.matmul.allow_tf32
        env["cudnn_allow_tf32"] = torch.backends.cudnn.allow_tf32
    return env


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device: torch.device):
    """(seconds, fn()): the wall time of `fn`, the device synchronised before and after (CUDA work is asynchronous)."""
    sync(device)
    start = time.perf_counter()
    out = fn()
    sync(device)
    return time.perf_counter() - start, out


def reset_peak_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory_mib(device: torch.device) -> tuple[float, str]:
    """(MiB, what it is): CUDA max allocated since the last reset, or the process's max RSS so far."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20, "cuda_max_memory_allocated"
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return (rss / 2**20 if sys.platform == "darwin" else rss / 2**10), "process_max_rss"


def free(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def matmul_peak(device: torch.device, dtype: torch.dtype, n: int, seconds: float = 1.0) -> dict:
    """GFLOP/s of n×n @ n×n matmuls (2n³ FLOPs each), best of a few repetitions after one warm-up."""
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    torch.mm(a, b)
    sync(device)
    start = time.perf_counter()
    torch.mm(a, b)
    sync(device)
    first = max(time.perf_counter() - start, 1e-9)
    reps = int(min(50, max(2, seconds / first)))
    best = first
    for _ in range(reps):
        start = time.perf_counter()
        torch.mm(a, b)
        sync(device)
        best = min(best, time.perf_counter() - start)
    return {"n": n, "repetitions": reps + 1, "gflops": 2 * n**3 / best / 1e9}


def tf32_peak(device: torch.device, n: int) -> dict:
    """The fp32 matmul peak with TF32 allowed (CUDA only; the harness allows it for fp32 cells on CUDA)."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        return matmul_peak(device, torch.float32, n)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def bandwidth(device: torch.device, megabytes: int) -> dict:
    """GB/s of a large tensor copy (bytes read + bytes written), best of a few repetitions after one warm-up."""
    src = torch.ones(megabytes * 2**18, device=device)  # float32: 4 bytes
    dst = torch.empty_like(src)
    dst.copy_(src)
    sync(device)
    best = math.inf
    for _ in range(5):
        start = time.perf_counter()
        dst.copy_(src)
        sync(device)
        best = min(best, time.perf_counter() - start)
    return {"megabytes": megabytes, "gbs": 2 * src.numel() * 4 / best / 1e9}
