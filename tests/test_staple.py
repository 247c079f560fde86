"""Tests for labels/staple.py: agreement with SimpleITK's STAPLEImageFilter, degenerate cases,
missing raters and batch independence."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import REPO
from scipy import ndimage as ndi

from labels.staple import staple, staple_mask


def _blob(rng: np.random.Generator, size: int) -> np.ndarray:
    yy, xx = np.mgrid[:size, :size]
    cy, cx = rng.uniform(0.3, 0.7, 2) * size
    ry, rx = rng.uniform(0.1, 0.3, 2) * size
    return ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1.0


def _raters(rng: np.random.Generator, size: int, n_raters: int = 5) -> np.ndarray:
    """(R, H, W) uint8 raters derived from a blob GT by dilation, erosion, random flips, shifts."""
    gt = _blob(rng, size)
    out = np.zeros((n_raters, size, size), dtype=np.uint8)
    for j in range(n_raters):
        kind = j % 4 if j < 4 else int(rng.integers(0, 4))
        if kind == 0:
            m = ndi.binary_dilation(gt, iterations=int(rng.integers(1, 3)))
        elif kind == 1:
            m = ndi.binary_erosion(gt, iterations=int(rng.integers(1, 3)))
        elif kind == 2:
            m = gt ^ (rng.random(gt.shape) < 0.05)
        else:
            m = np.roll(gt, tuple(rng.integers(-2, 3, 2)), axis=(0, 1))
        out[j] = m
    return out


def _batch(seed: int, n: int, size: int, n_raters: int = 5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.stack([_raters(rng, size, n_raters) for _ in range(n)])


def _dice(a: np.ndarray, b: np.ndarray) -> float:
    s = a.sum() + b.sum()
    return 1.0 if s == 0 else 2.0 * np.logical_and(a, b).sum() / s


def _sitk_staple(sitk, raters: np.ndarray, max_iter: int | None = None, weight: float = 1.0):
    f = sitk.STAPLEImageFilter()
    f.SetForegroundValue(1.0)
    f.SetConfidenceWeight(weight)
    if max_iter is not None:
        f.SetMaximumIterations(max_iter)
    img = f.Execute([sitk.GetImageFromArray(np.ascontiguousarray(r)) for r in raters])
    return sitk.GetArrayFromImage(img)


# ----------------------------------------------------------------------------- SimpleITK agreement


@pytest.mark.parametrize("max_iter", [100, None])
def test_matches_simpleitk(max_iter):
    """29 images of 28×28 and one of 64×64, 5 raters each. With the same iteration cap (100) and
    with ITK's default (unbounded; ours 100000) the posteriors agree to float32 rounding: measured
    max |diff| ≈ 3e-8 (also on 1000 28×28 and 100 180×180 images), identical 0.5-masks."""
    sitk = pytest.importorskip("SimpleITK")
    images = list(_batch(0, 29, 28)) + list(_batch(1, 1, 64))
    for x in images:
        ref = _sitk_staple(sitk, x, max_iter=max_iter)
        ours = staple(x, max_iter=100 if max_iter is not None else 100_000)
        assert ours.dtype == np.float32 and ours.shape == x.shape[1:]
        assert np.abs(ours - ref).max() < 1e-6
        assert _dice(ours > 0.5, ref > 0.5) == 1.0


def test_matches_simpleitk_batched_and_confidence_weight():
    sitk = pytest.importorskip("SimpleITK")
    x = _batch(2, 10, 28)
    for weight in (1.0, 0.5):
        ours = staple(x, max_iter=100_000, confidence_weight=weight)
        ref = np.stack([_sitk_staple(sitk, r, weight=weight) for r in x])
        assert np.abs(ours - ref).max() < 1e-6


def test_valid_mask_matches_simpleitk_on_subset():
    sitk = pytest.importorskip("SimpleITK")
    x = _batch(3, 4, 28)
    valid = np.ones((4, 5), dtype=bool)
    valid[0, 1] = valid[1, 4] = valid[2, [0, 3]] = False
    ours = staple(x, valid, max_iter=100_000)
    for i in range(4):
        ref = _sitk_staple(sitk, x[i][valid[i]])
        assert np.abs(ours[i] - ref).max() < 1e-6


# ----------------------------------------------------------------------------- hand / degenerate


def test_two_agree_one_blank():
    mask = np.zeros((12, 12), dtype=np.uint8)
    mask[3:8, 2:9] = 1
    x = np.stack([mask, mask, np.zeros_like(mask)])
    w = staple(x)
    assert np.array_equal(w > 0.5, mask.astype(bool))
    assert w[mask == 1].min() > 0.99
    assert w[mask == 0].max() == 0.0


def test_all_blank_gives_zeros_without_nan():
    x = np.zeros((2, 4, 10, 10), dtype=np.uint8)
    x[1, :, 2:5, 2:5] = 1  # a normal image next to the blank one
    x[1, 0, 6, 6] = 1
    w = staple(x)
    assert np.array_equal(w[0], np.zeros((10, 10), dtype=np.float32))
    assert np.isfinite(w).all()
    # only missing/blank valid raters -> zeros too
    x2 = np.zeros((1, 3, 6, 6), dtype=np.uint8)
    x2[0, 2] = 1
    assert not staple(x2, np.array([[True, True, False]])).any()
    assert not staple(x2, np.zeros((1, 3), dtype=bool)).any()


@pytest.mark.parametrize("fill", ["partial", "full", "single"])
def test_all_agree_gives_their_mask(fill):
    mask = np.zeros((9, 11), dtype=np.uint8)
    if fill == "full":
        mask[:] = 1
    else:
        mask[2:6, 3:7] = 1
    n = 1 if fill == "single" else 4
    w = staple(np.repeat(mask[None], n, axis=0))
    assert np.array_equal(w, mask.astype(np.float32))


def test_valid_mask_equals_dropping_rater():
    x = _batch(4, 6, 20)
    valid = np.ones((6, 5), dtype=bool)
    valid[:, 2] = False
    valid[3, 0] = False
    w = staple(x, valid)
    for i in range(6):
        np.testing.assert_allclose(w[i], staple(x[i][valid[i]]), rtol=0, atol=1e-7)
    # garbage in a missing rater's slot must not matter
    x_bad = x.copy()
    x_bad[:, 2] = 1 - x_bad[:, 2]
    np.testing.assert_allclose(staple(x_bad, valid), w, rtol=0, atol=1e-7)


def test_batch_equals_per_image():
    x = _batch(5, 8, 24)
    x[2] = 0  # blank image inside the batch
    x[5] = x[5, :1]  # all raters agree
    w = staple(x)
    # equal up to summation order (BLAS may block a batch differently from a single image)
    for i in range(8):
        np.testing.assert_allclose(w[i], staple(x[i]), rtol=0, atol=1e-7)
    np.testing.assert_allclose(w[3:5], staple(x[3:5]), rtol=0, atol=1e-7)


def test_input_types_and_no_nan_fuzz():
    rng = np.random.default_rng(6)
    x = _batch(7, 3, 16)
    w = staple(x)
    np.testing.assert_array_equal(staple(x.astype(bool)), w)
    np.testing.assert_array_equal(staple(x * 255), w)
    for _ in range(30):
        r = int(rng.integers(1, 7))
        xs = (rng.random((4, r, 7, 7)) < rng.uniform(0, 0.3, (4, r, 1, 1))).astype(np.uint8)
        valid = rng.random((4, r)) < 0.8
        ws = staple(xs, valid, confidence_weight=float(rng.uniform(0.5, 3.0)))
        assert ws.shape == (4, 7, 7) and ws.dtype == np.float32
        assert np.isfinite(ws).all() and ws.min() >= 0.0 and ws.max() <= 1.0


def test_bad_shapes():
    with pytest.raises(ValueError):
        staple(np.zeros((4, 4), dtype=np.uint8))
    with pytest.raises(ValueError):
        staple(np.zeros((2, 3, 4, 4), dtype=np.uint8), np.ones((2, 2), dtype=bool))


def test_the_hard_staple_label_is_written_once():
    """STAPLE >= 0.5 is `staple_mask` alone: STAPLE-UNet's targets, the `staple` evaluation reference and the label
    statistics call it, and no other module thresholds the posterior itself."""
    rng = np.random.default_rng(8)
    x, valid = _batch(9, 4, 16), rng.random((4, 5)) < 0.8
    mask = staple_mask(x, valid)
    assert mask.dtype == np.uint8 and mask.shape == (4, 16, 16)
    np.testing.assert_array_equal(mask, staple(x, valid) >= 0.5)
    np.testing.assert_array_equal(staple_mask(x[0]), staple(x[0]) >= 0.5)
    thresholding = sorted(
        str(p.relative_to(REPO))
        for package in ("labels", "datasets", "methods", "bench")
        for p in (REPO / package).rglob("*.py")
        if re.search(r"staple\([^()]*\)\s*>=", p.read_text())
    )
    assert thresholding == ["labels/staple.py"]
