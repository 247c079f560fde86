"""The one training loop (DESIGN §5): stages → epochs → batches → loss → backward → step.

The harness owns the optimiser, device, precision, seeds, checkpoints and the training log;
methods own only their networks and losses.
"""

from __future__ import annotations

import csv
import io
import time
from contextlib import nullcontext
from functools import cache
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from bench.store import atomic
from methods.base import Method, StepContext


class DeviceError(RuntimeError):
    """The requested device or precision is not available here."""


class NonFiniteLoss(RuntimeError):
    """A loss became NaN or infinite: the cell fails with this message."""


def resolve_device(name: str) -> torch.device:
    """`auto` → CUDA when available, else CPU; `cuda` without a GPU is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise DeviceError("--device cuda: no CUDA GPU is visible to PyTorch; use --device cpu or auto")
    if name not in ("cpu", "cuda"):
        raise DeviceError(f"--device must be auto, cpu or cuda, not {name!r}")
    return torch.device(name)


@cache
def cpu_has_fast_bf16() -> bool:
    """True when the CPU computes bf16 matrix products natively (AMX or AVX512-BF16).

    Without them PyTorch emulates bf16 and autocast is slower than fp32: on a 2-core Xeon with
    AVX-512 but neither extension, the shared U-Net trained at 76 img/s in bf16 and 237 img/s in
    fp32 (28×28, batch 128; see `python -m bench perf`).
    """
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return any(f in flags.split() for f in ("amx_bf16", "avx512_bf16"))


def autocast_dtype(device: torch.device, precision: str) -> torch.dtype | None:
    """`auto`: bf16 on CUDA GPUs and CPUs that support it natively, fp32 otherwise; or forced `fp32`/`bf16`."""
    if precision == "fp32":
        return None
    if precision == "bf16":
        return torch.bfloat16
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else None
    return torch.bfloat16 if cpu_has_fast_bf16() else None


def autocast(device: torch.device, dtype: torch.dtype | None):
    return torch.autocast(device.type, dtype=dtype) if dtype is not None else nullcontext()


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


def fit(
    method: Method,
    images: np.ndarray,
    raters: np.ndarray,
    rater_valid: np.ndarray,
    *,
    epochs: dict[str, int],
    batch_size: int,
    lr: float,
    seed: int,
    device: torch.device,
    precision: str = "auto",
    checkpoint_dir: Path | None = None,
    log_path: Path | None = None,
    progress: bool = True,
    desc: str = "",
) -> list[dict]:
    """Train `method` stage by stage on images (N, C, H, W) and raters (N, R, H, W).

    Each stage gets a fresh Adam over its modules' parameters and its own generator seeded by
    (seed, stage index), so a run resumed from a stage checkpoint continues exactly as an
    uninterrupted one. Returns the log rows (one per epoch).
    """
    method.to(device=device, memory_format=torch.channels_last)
    dtype = autocast_dtype(device, precision)
    data = to_tensors({"images": images, "raters": raters, "rater_valid": rater_valid}, device)
    data.update(to_tensors(method.prepare(raters, rater_valid), device))
    n = len(images)
    rows: list[dict] = []
    stages = method.stages
    first = resume(method, stages, checkpoint_dir)
    trim_log(log_path, {s.name for s in stages[:first]})
    for k, stage in enumerate(stages):
        if k < first:
            continue
        trained = set(stage.modules) or {name for name, _ in method.named_children()}
        for name, child in method.named_children():
            child.train(name in trained)
            child.requires_grad_(name in trained)
        params = [p for p in method.parameters() if p.requires_grad]
        optimiser = torch.optim.Adam(params, lr=lr)
        order = torch.Generator().manual_seed(seed * 1000 + k)
        gen = torch.Generator(device=device).manual_seed(seed * 1000 + k)
        steps_per_epoch = max(1, -(-n // batch_size))
        bar = tqdm(
            total=epochs[stage.name] * steps_per_epoch, desc=f"{desc} {stage.name}".strip(), leave=False, disable=not progress, unit="step"
        )
        step = 0
        for epoch in range(epochs[stage.name]):
            start = time.perf_counter()
            sums: dict[str, torch.Tensor] = {}
            for index in torch.randperm(n, generator=order).split(batch_size):
                batch = make_batch(data, index, device)
                with autocast(device, dtype):
                    parts = method.loss(batch, StepContext(stage.name, epoch, step, gen))
                optimiser.zero_grad(set_to_none=True)
                parts["loss"].backward()
                optimiser.step()
                for key, value in parts.items():  # summed on the device: no per-step host sync
                    sums[key] = sums.get(key, 0) + value.detach().float()
                step += 1
                bar.update()
            row = {"stage": stage.name, "epoch": epoch, "steps": step, "seconds": round(time.perf_counter() - start, 3)}
            row.update({k: float(v) / steps_per_epoch for k, v in sums.items()})
            rows.append(row)
            append_log(log_path, row)
            if not np.isfinite(row["loss"]):
                bar.close()
                raise NonFiniteLoss(f"non-finite loss ({row['loss']}) in stage {stage.name!r}, epoch {epoch}")
        bar.close()
        save_checkpoint(method, k, stage.name, checkpoint_dir)
    method.eval()
    return rows


def checkpoint_path(checkpoint_dir: Path, k: int, name: str) -> Path:
    return checkpoint_dir / f"stage-{k}-{name}.pt"


def save_checkpoint(method: Method, k: int, name: str, checkpoint_dir: Path | None) -> None:
    if checkpoint_dir is None:
        return
    buffer = io.BytesIO()
    torch.save(method.state_dict(), buffer)  # in memory: a full disk then fails in a plain write, with the OS's message
    with atomic(checkpoint_path(checkpoint_dir, k, name)) as tmp:
        tmp.write_bytes(buffer.getbuffer())


def resume(method: Method, stages, checkpoint_dir: Path | None) -> int:
    """Load the latest finished stage's weights; returns the index of the first stage still to train."""
    if checkpoint_dir is None:
        return 0
    for k in reversed(range(len(stages))):
        path = checkpoint_path(checkpoint_dir, k, stages[k].name)
        if path.is_file():
            method.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
            return k + 1
    return 0


def trim_log(log_path: Path | None, keep_stages: set[str]) -> None:
    """Drop log rows of stages that did not finish (a killed run retrains them from their start)."""
    if log_path is None or not log_path.is_file():
        return
    with log_path.open(newline="") as f:
        reader = csv.DictReader(f)
        rows = [r for r in reader if r["stage"] in keep_stages]
    with atomic(log_path) as tmp, tmp.open("w", newline="") as f:  # replaced in one step: a kill keeps the old log
        if rows:
            writer = csv.DictWriter(f, fieldnames=reader.fieldnames)
            writer.writeheader()
            writer.writerows(rows)


def append_log(log_path: Path | None, row: dict) -> None:
    """One CSV row per epoch; the header is the first row's keys (a method logs the same keys in every stage)."""
    if log_path is None:
        return
    header = None
    if log_path.exists():
        with log_path.open(newline="") as f:
            header = next(csv.reader(f), None)  # None: a run killed before its first row left an empty file
    new = header is None
    header = header or list(row)
    with log_path.open("w" if new else "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=header, restval="", extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerow(row)


@torch.no_grad()
def predict_proba(
    method: Method, images: np.ndarray, *, device: torch.device, precision: str = "auto", batch_size: int = 256
) -> np.ndarray:
    """Probabilities of the true label, float32 (N, L, H, W), in large batches without gradients."""
    method.to(device=device, memory_format=torch.channels_last).eval()
    dtype = autocast_dtype(device, precision)
    out = []
    for chunk in torch.from_numpy(images).split(batch_size):
        x = chunk.to(device).contiguous(memory_format=torch.channels_last)
        with autocast(device, dtype):
            out.append(method.predict_proba(x).float().cpu())
    return torch.cat(out).numpy()
