"""What `bench perf` times beside the training loop (bench/perf/timings.py times that and runs them all): the synthetic
images and raters and the MV-UNet every timing uses, and the scoring timings: a cell's evaluation, the metrics against
medpy's reference implementations, STAPLE against SimpleITK's where it is installed."""

from __future__ import annotations

import time

import numpy as np
import torch

import methods
from bench.evaluate import pixel as bm
from bench.perf import machine
from bench.train import hardware, harness
from labels.staple import staple

N_RATERS = 5


def random_data(n: int, channels: int, height: int, width: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random images (n, C, H, W) float32, five random binary raters (n, 5, H, W) uint8, all valid (n, 5)."""
    rng = np.random.default_rng(seed)
    images = rng.standard_normal((n, channels, height, width), dtype=np.float32)
    raters = rng.integers(0, 2, (n, N_RATERS, height, width), dtype=np.uint8)
    valid = np.ones((n, N_RATERS), dtype=bool)
    return images, raters, valid


def build_mv_unet(channels: int, device: torch.device, seed: int = 0) -> methods.Method:
    """The `mv-unet` method (the shared U-Net on the majority vote), initialised from `seed`."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        method = methods.build_method("mv-unet", methods.DataSpec(channels, 2, N_RATERS))
    return method.to(device=device, memory_format=torch.channels_last)


def time_evaluation(n: int, size: int, device: torch.device, seed: int = 0, repeats: int = 2) -> dict:
    """One evaluation of MV-UNet (untrained) on `n` validation images of size×size in the harness's precision: its loss
    pass plus a consensus pass of its own for the GT diagnostic, against the one pass that serves both
    (`Method.validation`); the faster of `repeats` each. `same_dsc`: both ways log the same diagnostic."""
    images, raters, valid = random_data(n, 1, size, size, seed)
    gt = (raters.sum(1) * 2 > raters.shape[1]).astype(np.uint8)
    method = build_mv_unet(1, device, seed)
    data = hardware.to_tensors({"images": images, "raters": raters, "rater_valid": valid, **method.prepare(raters, valid)}, device)
    dtype = hardware.autocast_dtype(device, "auto")

    def evaluation(one_pass: bool) -> float:
        _, probs = harness.validate(method, data, "train", 0, 0, seed, device, dtype, consensus=one_pass)
        return harness.diagnostic_dsc(method, data["images"], gt, device, dtype, seed, probs)

    seconds, dsc = {}, {}
    for name, one_pass in (("two_passes", False), ("one_pass", True)):
        runs = [machine.timed(lambda p=one_pass: evaluation(p), device) for _ in range(repeats)]  # (seconds, dsc) each
        seconds[name], dsc[name] = min(t for t, _ in runs), runs[-1][1]
    return {
        "images": n,
        "height": size,
        "width": size,
        "two_passes_s": seconds["two_passes"],
        "one_pass_s": seconds["one_pass"],
        "saving": 1 - seconds["one_pass"] / seconds["two_passes"],
        "same_dsc": dsc["one_pass"] == dsc["two_passes"],
    }


def ellipses(rng: np.random.Generator, n: int, size: int, radius: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """n pairs of random elliptic blobs (n, size, size) bool: a reference and a displaced, resized copy."""
    yy, xx = np.mgrid[:size, :size].astype(np.float32)
    centre = rng.uniform(0.3 * size, 0.7 * size, (n, 2)).astype(np.float32)
    radii = rng.uniform(*radius, (n, 2)).astype(np.float32)

    def blob(c, r):
        return ((yy - c[:, :1, None]) / r[:, :1, None]) ** 2 + ((xx - c[:, 1:, None]) / r[:, 1:, None]) ** 2 <= 1

    shift = rng.uniform(-radius[0], radius[0], (n, 2)).astype(np.float32)
    scale = rng.uniform(0.7, 1.3, (n, 2)).astype(np.float32)
    return blob(centre, radii), blob(centre + shift, radii * scale)


def time_metrics(n: int, size: int, seed: int = 0) -> dict:
    """DSC + bAHD on n mask pairs: bench.evaluate.pixel on the batch vs medpy dc + assd per pair."""
    from medpy.metric.binary import assd, dc

    gt, pred = ellipses(np.random.default_rng(seed), n, size, (3.0, size / 9))
    start = time.perf_counter()
    ours = bm.dice(pred, gt)
    bm.bahd(pred, gt)
    t_ours = time.perf_counter() - start
    start = time.perf_counter()
    theirs = [(dc(p, g), assd(p, g)) for p, g in zip(pred, gt)]
    t_medpy = time.perf_counter() - start
    return {
        "pairs": n,
        "height": size,
        "width": size,
        "bench_ms_per_pair": 1e3 * t_ours / n,
        "medpy_ms_per_pair": 1e3 * t_medpy / n,
        "speedup": t_medpy / t_ours,
        "bench_route": "bench.evaluate.pixel.dice + bench.evaluate.pixel.bahd on the batch",
        "medpy_route": "medpy.metric.binary.dc + assd per pair",
        "dice_max_abs_diff": float(np.abs(ours - np.array([d for d, _ in theirs])).max()),
    }


def staple_raters(n: int, size: int, seed: int = 0) -> np.ndarray:
    """(n, 5, size, size) uint8: per image, five copies of one random blob, each shifted by up to 3 px with 1 % of pixels flipped."""
    rng = np.random.default_rng(seed)
    gt, _ = ellipses(rng, n, size, (size / 12, size / 5))
    out = np.empty((n, N_RATERS, size, size), dtype=np.uint8)
    for i in range(n):
        for j in range(N_RATERS):
            shifted = np.roll(gt[i], tuple(rng.integers(-3, 4, 2)), axis=(0, 1))
            out[i, j] = shifted ^ (rng.random(shifted.shape) < 0.01)
    return out


def time_staple(n: int, size: int, seed: int = 0) -> dict:
    """labels.staple on n images × 5 raters at once vs SimpleITK's STAPLEImageFilter per image."""
    raters = staple_raters(n, size, seed)
    start = time.perf_counter()
    ours = staple(raters)
    t_ours = time.perf_counter() - start
    result = {"images": n, "raters": N_RATERS, "height": size, "width": size, "ours_ms_per_image": 1e3 * t_ours / n}
    try:
        import SimpleITK as sitk
    except ImportError:
        return {**result, "skipped": "SimpleITK is not installed: no reference timing"}
    start = time.perf_counter()
    theirs = []
    for image in raters:
        f = sitk.STAPLEImageFilter()
        f.SetForegroundValue(1.0)
        theirs.append(sitk.GetArrayFromImage(f.Execute([sitk.GetImageFromArray(np.ascontiguousarray(r)) for r in image])))
    t_sitk = time.perf_counter() - start
    agreement = bm.dice(ours >= 0.5, np.stack(theirs) >= 0.5)
    return {
        **result,
        "sitk_ms_per_image": 1e3 * t_sitk / n,
        "speedup": t_sitk / t_ours,
        "mean_dice_agreement": float(agreement.mean()),
        "min_dice_agreement": float(agreement.min()),
        "sitk_version": sitk.Version.VersionString(),
        "sitk_threads": sitk.ProcessObject.GetGlobalDefaultNumberOfThreads(),
    }


# --------------------------------------------------------------------------- the run
