"""The device a cell runs on, the precision it trains in, and its tensors placed there (docs/decisions.md#harness).

`resolve_device` and `gpu_slots` say where cells run and how many share a card; `resolve_precision`
picks fp32 or bf16 autocast (on CUDA by measuring both on the cell's shape) and records the choice;
`to_tensors` and `make_batch` put a split and a batch on the device in the layout the step uses.
"""

from __future__ import annotations

import copy
import os
import platform
import time
from contextlib import ExitStack, contextmanager, nullcontext
from functools import cache
from pathlib import Path

import numpy as np
import torch

from bench.files import locked, read_json, write_json
from bench.store import gpu_slot_lock
from bench.train.budget import Schedule, make_optimiser
from methods.base import Method, StepContext


class DeviceError(RuntimeError):
    """The requested device or precision is not available here."""


def resolve_device(name: str) -> torch.device:
    """`auto` → CUDA when available, else CPU; `cuda` without a GPU is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise DeviceError("--device cuda: no CUDA GPU is visible to PyTorch; use --device cpu or auto")
    if name not in ("cpu", "cuda"):
        raise DeviceError(f"--device must be auto, cpu or cuda, not {name!r}")
    return torch.device(name)


#: GPU memory one cell of the shared U-Net family needs at most, with the split kept on the device (LIDC's 15,000
#: 180×180 crops at batch 8: about 1.3 GB), rounded up: how many cells `gpu_slots` lets share one card.
CELL_GPU_BYTES = 2 * 1024**3
#: More cells than this on one card only queue on its streams.
MAX_CELLS_PER_GPU = 8


def gpu_slots(cpus: int) -> int:
    """How many cells may train at once on the visible GPUs: per card, what its free memory holds (`CELL_GPU_BYTES`
    each), at most `MAX_CELLS_PER_GPU` and at most one CPU per cell (each cell's host thread feeds its card); 0 without CUDA."""
    if not torch.cuda.is_available():
        return 0
    n_gpus = torch.cuda.device_count()
    per_card = min(torch.cuda.mem_get_info(k)[0] // CELL_GPU_BYTES for k in range(n_gpus))
    return max(n_gpus, min(n_gpus * max(1, min(per_card, MAX_CELLS_PER_GPU)), max(cpus, n_gpus)))


@cache
def cpu_facts() -> dict[str, object]:
    """What /proc/cpuinfo says of this machine's CPU, read once here for every module: {"model": its model name or "",
    "flags": its feature flags}; empty where the file cannot be read (not Linux)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return {"model": "", "flags": frozenset()}
    fields = {}
    for line in lines:
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())  # the first processor's; every core of a machine reports the same
    return {"model": fields.get("model name", ""), "flags": frozenset(fields.get("flags", "").split())}


def cpu_name() -> str:
    """The CPU's model name (the platform's processor where /proc/cpuinfo has none)."""
    return str(cpu_facts()["model"]) or platform.processor() or platform.machine()


def cpu_isa() -> str:
    """The CPU's vector extensions that decide kernel choice (bf16 results depend on them), for a cell's manifest."""
    flags = cpu_facts()["flags"]
    if not flags:
        return platform.processor() or platform.machine()
    return f"{platform.machine()} " + (" ".join(f for f in ("amx_bf16", "avx512_bf16", "avx512f", "avx2") if f in flags) or "baseline")


def cpu_has_fast_bf16() -> bool:
    """True when the CPU computes bf16 matrix products natively (AMX or AVX512-BF16).

    Without them PyTorch emulates bf16 and autocast is slower than fp32: on a 2-core Xeon with
    AVX-512 but neither extension, the shared U-Net trained at 76 img/s in bf16 and 237 img/s in
    fp32 (28×28, batch 128; see `python -m bench perf`).
    """
    return any(f in cpu_facts()["flags"] for f in ("amx_bf16", "avx512_bf16"))


def autocast_dtype(device: torch.device, precision: str) -> torch.dtype | None:
    """`auto`: bf16 on CUDA GPUs and CPUs that support it natively, fp32 otherwise; or forced `fp32`/`bf16`."""
    if precision == "fp32":
        return None
    if precision == "bf16":
        return torch.bfloat16
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else None
    return torch.bfloat16 if cpu_has_fast_bf16() else None


#: The CUDA precision chosen for each (method config, batch shape) in this process: measured once, then reused.
_CUDA_CHOICES: dict[tuple, dict] = {}


def faster(timings: dict[str, float]) -> str:
    """The precision with the shortest measured step time (ms); a tie keeps the first, fp32."""
    return min(timings, key=lambda name: (timings[name], list(timings).index(name)))


def resolve_precision(
    method: Method, data: dict[str, torch.Tensor], sched: Schedule, device: torch.device, precision: str, record: Path | None = None
) -> dict:
    """The precision a cell trains and predicts in: {"precision": "fp32" | "bf16", "tf32": bool, "step_ms": {...}}.

    `fp32` and `bf16` are kept. `auto` on the CPU is bf16 where the CPU computes it natively, else
    fp32. `auto` on CUDA measures: fp32 with TF32 matrix products, and bf16 autocast, each for 10
    steps of a copy of the method on a batch of the cell's shape (bilinear upsampling's backward is
    slow in bf16 on some cards, so the faster one depends on the shape), and keeps the faster. The
    choice is made once per card, method configuration and batch shape and kept in `record` (a JSON
    file of the results folder, written under a lock), so every cell of that configuration, whatever
    ran beside it, trains in the same precision. TF32 is on exactly when fp32 is chosen on CUDA.
    Both change results, so the cell's manifest records them.
    """
    if device.type != "cuda":
        dtype = autocast_dtype(device, precision)
        return {"precision": "bf16" if dtype is not None else "fp32", "tf32": False, "step_ms": {}}
    choice = {"precision": precision, "step_ms": {}}
    if precision == "auto":
        index = torch.arange(min(sched.batch_size, len(data["images"])))
        key = repr((torch.cuda.get_device_name(device), type(method).__name__, method.cfg, tuple(data["images"][index].shape)))
        with locked(record.with_suffix(".lock")) if record is not None else nullcontext():
            known = read_json(record) if record is not None else {}
            if key not in known and key not in _CUDA_CHOICES:
                batch = make_batch(data, index, device)
                timings = {
                    name: _step_ms(method, batch, sched, device, dtype) for name, dtype in (("fp32", None), ("bf16", torch.bfloat16))
                }
                _CUDA_CHOICES[key] = {"precision": faster(timings), "step_ms": {k: round(v, 3) for k, v in timings.items()}}
            choice = known.get(key) or _CUDA_CHOICES[key]
            if record is not None and key not in known:
                write_json(record, {**known, key: choice})
    tf32 = choice["precision"] == "fp32"
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
    return {**choice, "tf32": tf32}


def _step_ms(method: Method, batch: dict[str, torch.Tensor], sched: Schedule, device: torch.device, dtype, steps: int = 10) -> float:
    """Mean time of a training step (ms) of a copy of `method`'s first stage in `dtype`, after three warm-up steps."""
    probe = copy.deepcopy(method).to(device=device, memory_format=torch.channels_last).train()
    optimiser = make_optimiser(sched, list(probe.parameters()))
    ctx = StepContext(probe.stages[0].name, 0, 0, torch.Generator(device=device).manual_seed(0))

    def step():
        with autocast(device, dtype):
            loss = probe.loss(batch, ctx)["loss"]
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()

    for _ in range(3):
        step()
    torch.cuda.synchronize(device)
    started = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize(device)
    return (time.perf_counter() - started) / steps * 1000


def autocast(device: torch.device, dtype: torch.dtype | None, cache: bool = True):
    """Autocast to `dtype` (None: none). `cache=False` for a step a CUDA graph captures: autocast's cache of cast weights
    would hold tensors from the capture's memory pool across replays."""
    return torch.autocast(device.type, dtype=dtype, cache_enabled=cache) if dtype is not None else nullcontext()


def to_tensors(arrays: dict[str, np.ndarray], device: torch.device) -> dict[str, torch.Tensor]:
    """Per-image arrays → tensors, kept on the device for CUDA (the splits of the paper's datasets fit)."""
    out = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in arrays.items()}
    return {k: v.to(device) for k, v in out.items()} if device.type == "cuda" else out


def make_batch(data: dict[str, torch.Tensor], index: torch.Tensor, device: torch.device) -> dict[str, torch.Tensor]:
    batch = {k: v[index.to(v.device)].to(device, non_blocking=True) for k, v in data.items()}
    batch["images"] = batch["images"].contiguous(memory_format=torch.channels_last)
    batch["raters"] = batch["raters"].long()
    batch["index"] = index.to(device)
    return batch


@contextmanager
def pinned_device(requested: str, results: Path):
    """The cell's device; with several GPUs visible, the least-shared one, its cells spread evenly.

    Parallel workers (loky processes, dask workers without their own CUDA_VISIBLE_DEVICES) each take
    a slot of a GPU for the length of a cell through an flock per slot (`gpu-<k>-slot-<j>.lock`),
    filling slot 0 of every card before slot 1 of any, so the cards share the cells evenly.
    """
    device = resolve_device(requested)
    n_gpus = torch.cuda.device_count() if device.type == "cuda" else 0
    if n_gpus <= 1:
        yield device
        return
    slots = [(k, j) for j in range(MAX_CELLS_PER_GPU) for k in range(n_gpus)]
    with ExitStack() as held:
        free = next((k for k, j in slots if held.enter_context(locked(gpu_slot_lock(results, k, j), wait=False))), None)
        if free is None:  # more workers than slots: queue on one
            free = os.getpid() % n_gpus
            held.enter_context(locked(gpu_slot_lock(results, free, 0)))
        yield torch.device("cuda", free)
