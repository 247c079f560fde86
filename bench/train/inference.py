"""Read-outs of a trained method, in large batches without gradients: its probabilities (the consensus), its samples and
per-rater outputs, each image's draws seeded from its read-out identity so that a read-out never depends on the batch or on
one shared draw (DESIGN: a read-out must not depend on a draw). The training loop (bench/train/harness.py) validates with
them; cells, readings and `bench predict` score and write what they return.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager

import numpy as np
import torch
from tqdm.auto import tqdm

from bench.train.hardware import autocast, autocast_dtype
from methods.base import Method
from methods.latent import per_image


@contextmanager
def evaluating(method: Method):
    """Eval mode for a validation pass in the middle of training; each child's mode is restored afterwards."""
    modes = {name: child.training for name, child in method.named_children()}
    top = method.training
    method.eval()
    try:
        yield
    finally:
        method.training = top
        for name, child in method.named_children():
            child.train(modes[name])


# Read-out streams: the draws of a consensus, of the samples and of per-rater outputs come from different ids.
READOUTS = ("consensus", "samples", "raters")


def readout_ids(seed: int, readout: str, n: int, draw_seed: int = 0) -> torch.Tensor:
    """Each image's read-out identity (n,) int64: its index in the split, the cell's seed, the read-out stream and a draw
    seed (0 for a cell's own read-out; another value reads the same model with other draws, to measure their spread).
    A method that draws seeds each image's draws from it (methods/latent.py::per_image)."""
    stream = (seed * 64 + draw_seed) * len(READOUTS) + READOUTS.index(readout)
    return stream * 2**32 + torch.arange(n, dtype=torch.int64)


def predict_proba(
    method: Method,
    images: np.ndarray,
    *,
    device: torch.device,
    precision: str = "auto",
    batch_size: int = 256,
    seed: int = 0,
    draw_seed: int = 0,
) -> np.ndarray:
    """Probabilities of the true label, float32 (N, L, H, W), in large batches without gradients. A method whose
    consensus draws (`consensus_draws`) draws per image from `readout_ids(seed, "consensus", N, draw_seed)`."""
    method.to(device=device, memory_format=torch.channels_last).eval()
    ids = readout_ids(seed, "consensus", len(images), draw_seed)
    return probabilities(method, torch.from_numpy(images), device, autocast_dtype(device, precision), ids, batch_size)


@torch.inference_mode()
def predict_outputs(
    method: Method, images: np.ndarray, *, n_samples: int, seed: int, device: torch.device, precision: str = "auto", batch_size: int = 256
) -> dict[str, np.ndarray]:
    """Every output a method offers for images (N, C, H, W), for the set metrics, class indices (argmax):
    "rater_outputs" (N, R, H, W), one per rater slot, where the method has them; "samples" (N, M, H, W): M draws from a
    method that samples, else M draws from the mixture of its per-rater outputs (a slot drawn uniformly per draw), so
    that every method's set metrics are read at the same M. A method with one prediction has no samples here: M draws
    from it are M copies, whose set metrics equal its one prediction's. Every draw is per image, seeded from
    `readout_ids(seed, …)`, so a cell's outputs are reproducible and independent of the batch.
    """
    if n_samples < 1:
        raise ValueError(f"--samples must be at least 1, not {n_samples}")
    if type(method).predict_samples is Method.predict_samples and type(method).predict_raters is Method.predict_raters:
        return {}  # neither hook overridden: nothing to predict (most methods)
    method.to(device=device, memory_format=torch.channels_last).eval()
    dtype = autocast_dtype(device, precision)
    n = len(images)
    ids = {name: readout_ids(seed, name, n) for name in ("samples", "raters")}
    out: dict[str, list] = {"samples": [], "rater_outputs": []}
    size = max(1, batch_size // max(n_samples, method.spec.n_raters))
    bar = tqdm(total=n, desc="samples", leave=False, disable=not sys.stderr.isatty(), unit="img")
    for start in range(0, n, size):
        part = slice(start, start + size)
        x = torch.from_numpy(images[part]).to(device).contiguous(memory_format=torch.channels_last)
        with autocast(device, dtype):
            drawn = method.predict_samples(x, n_samples, ids["samples"][part])
            per_rater = method.predict_raters(x, ids["raters"][part])
        if per_rater is not None:
            per_rater = per_rater.float().argmax(2).to(torch.uint8).cpu()  # (B, R, H, W)
            out["rater_outputs"].append(per_rater)
        if drawn is not None:
            out["samples"].append(drawn.float().argmax(2).to(torch.uint8).cpu())
        elif per_rater is not None:  # M draws from the mixture of the per-rater outputs
            draw_slots = lambda rng, r=per_rater.shape[1]: rng.integers(r, size=n_samples)  # noqa: E731
            slot = per_image(ids["samples"][part], draw_slots, torch.device("cpu"))  # (B, M)
            out["samples"].append(torch.take_along_dim(per_rater, slot[:, :, None, None].long(), dim=1))
        bar.update(len(x))
    bar.close()
    return {key: torch.cat(parts).numpy() for key, parts in out.items() if parts}


@torch.inference_mode()
def probabilities(
    method: Method, images: torch.Tensor, device: torch.device, dtype, ids: torch.Tensor, batch_size: int = 256
) -> np.ndarray:
    """The consensus of images (N, C, H, W) → (N, L, H, W) float32; ids (N,) the images' read-out ids (`readout_ids`)."""
    draws = method.consensus_draws
    size = batch_size if not draws else max(1, batch_size // 4)  # a drawing consensus decodes 16 draws of each image at once
    out = []
    for chunk, chunk_ids in zip(images.split(size), ids.split(size)):
        x = chunk.to(device).contiguous(memory_format=torch.channels_last)
        with autocast(device, dtype):
            probs = method.predict_proba(x, chunk_ids) if draws else method.predict_proba(x)
        out.append(probs.float().cpu())
    return torch.cat(out).numpy()
