"""Tests for bench.evaluate.pixel: hand-computed golden values, empty rules, references."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from conftest import REPO
from scipy import ndimage
from scipy.spatial.distance import cdist

from bench.evaluate import pixel as metrics
from bench.evaluate.pixel import bahd, confusion_counts, dice, directed_distance_sums, score
from labels.overlap import soft_dice_iou

# --------------------------------------------------------------------------- helpers


def _square(top: int, left: int, size: int = 4, shape=(10, 10)) -> np.ndarray:
    m = np.zeros(shape, dtype=bool)
    m[top : top + size, left : left + size] = True
    return m


def _batch(*masks: np.ndarray) -> np.ndarray:
    return np.stack(masks)


def _random_blobs(rng: np.random.Generator, n: int, shape, fill: float) -> np.ndarray:
    """(n, H, W) bool: smoothed noise thresholded so that about `fill` is foreground."""
    out = np.empty((n, *shape), dtype=bool)
    for i in range(n):
        noise = ndimage.gaussian_filter(rng.standard_normal(shape), sigma=rng.uniform(1, 3))
        out[i] = noise > np.quantile(noise, 1.0 - fill)
    return out


def _brute_force_sums(pred: np.ndarray, gt: np.ndarray, spacing) -> tuple[float, float]:
    """Directed sums from all pairwise distances between foreground pixel centres."""
    s = np.argwhere(pred) * np.asarray(spacing, dtype=float)
    g = np.argwhere(gt) * np.asarray(spacing, dtype=float)
    d = cdist(g, s)  # (|G|, |S|)
    return float(d.min(axis=1).sum()), float(d.min(axis=0).sum())


# --------------------------------------------------------------------------- golden values


def test_shifted_square_golden():
    # G: 4x4 square at rows 2..5, cols 2..5; S: the same square shifted right by 1.
    # |G| = |S| = 16, |S ∩ G| = 4 rows x 3 cols = 12  ->  DSC = 2*12/32 = 0.75.
    # G \ S is column 2 (4 pixels), each at distance 1 from column 3 of S -> GtoS = 4.
    # S \ G is column 6 (4 pixels), each at distance 1 from column 5 of G -> StoG = 4.
    # Overlapping pixels contribute 0.  bAHD = (4/16 + 4/16) / 2 = 0.25.
    gt = _batch(_square(2, 2))
    pred = _batch(_square(2, 3))
    np.testing.assert_allclose(dice(pred, gt), [0.75])
    np.testing.assert_allclose(bahd(pred, gt), [0.25])
    g2s, s2g = directed_distance_sums(pred, gt)
    np.testing.assert_allclose(g2s, [4.0])
    np.testing.assert_allclose(s2g, [4.0])
    c = confusion_counts(pred, gt)
    assert c["tp"].tolist() == [12]
    assert c["fp"].tolist() == [4]
    assert c["fn"].tolist() == [4]
    assert c["n_gt"].tolist() == [16]
    assert c["n_pred"].tolist() == [16]
    assert all(v.dtype == np.int64 for v in c.values())


def test_identical_masks():
    gt = _batch(_square(1, 1), _square(5, 3, size=2))
    np.testing.assert_allclose(dice(gt, gt), [1.0, 1.0])
    np.testing.assert_allclose(bahd(gt, gt), [0.0, 0.0])


def test_disjoint_single_pixels():
    # (1, 1) vs (4, 5): offsets (3, 4) -> distance 5 both ways; |G| = 1.
    # bAHD = (5/1 + 5/1) / 2 = 5.  With spacing (2.0, 0.5): offsets (6, 2) -> sqrt(40).
    gt = np.zeros((1, 8, 8), dtype=bool)
    pred = np.zeros((1, 8, 8), dtype=bool)
    gt[0, 1, 1] = True
    pred[0, 4, 5] = True
    np.testing.assert_allclose(dice(pred, gt), [0.0])
    np.testing.assert_allclose(bahd(pred, gt), [5.0])
    np.testing.assert_allclose(bahd(pred, gt, spacing=(2.0, 0.5)), [math.sqrt(40.0)])


def test_anisotropic_spacing_shifted_square():
    # Spacing (dy, dx) = (2.0, 0.5).  A one-column shift moves every non-overlapping
    # pixel by dx = 0.5: bAHD = (4*0.5/16 + 4*0.5/16)/2 = 0.125.  A one-row shift moves
    # them by dy = 2.0: bAHD = (4*2/16 + 4*2/16)/2 = 0.5.  DSC ignores spacing.
    spacing = (2.0, 0.5)
    gt = _batch(_square(2, 2), _square(2, 2))
    pred = _batch(_square(2, 3), _square(3, 2))
    np.testing.assert_allclose(bahd(pred, gt, spacing=spacing), [0.125, 0.5])
    np.testing.assert_allclose(dice(pred, gt), [0.75, 0.75])


def test_bahd_is_balanced_by_gt_size():
    # G: one pixel.  S: G plus 3 pixels at distance 1, 1 and 2 in the same row.
    # GtoS = 0; StoG = 1 + 1 + 2 = 4; both divided by |G| = 1 -> bAHD = (0 + 4)/2 = 2.
    # (The unbalanced AHD would divide StoG by |S| = 4 and give 0.5.)
    gt = np.zeros((1, 5, 7), dtype=bool)
    pred = np.zeros((1, 5, 7), dtype=bool)
    gt[0, 2, 3] = True
    pred[0, 2, [2, 3, 4, 5]] = True
    np.testing.assert_allclose(bahd(pred, gt), [2.0])


# --------------------------------------------------------------------------- empty rules


def test_empty_rules():
    h, w = 10, 10
    empty = np.zeros((h, w), dtype=bool)
    sq = _square(2, 2)
    pred = _batch(empty, sq, empty)
    gt = _batch(empty, empty, sq)
    # both empty | G empty, S not | S empty, G not
    np.testing.assert_allclose(dice(pred, gt), [1.0, 0.0, 0.0])

    for spacing in [(1.0, 1.0), (2.0, 0.5)]:
        diagonal = math.hypot(h * spacing[0], w * spacing[1])
        b = bahd(pred, gt, spacing=spacing)
        assert b[0] == 0.0
        assert np.isnan(b[1])
        np.testing.assert_allclose(b[2], diagonal / 2.0)

    g2s, s2g = directed_distance_sums(pred, gt)
    assert g2s[0] == 0.0 and s2g[0] == 0.0
    assert g2s[1] == 0.0 and np.isnan(s2g[1])
    assert np.isnan(g2s[2]) and s2g[2] == 0.0


def test_score_contents_and_consistency():
    rng = np.random.default_rng(3)
    pred = _random_blobs(rng, 6, (24, 20), 0.1)
    gt = _random_blobs(rng, 6, (24, 20), 0.1)
    pred[0] = False  # S empty
    gt[1] = False  # G empty
    pred[2] = gt[2] = False  # both empty
    spacing = (1.5, 0.7)
    out = score(pred, gt, spacing)
    assert set(out) == {
        "dice",
        "bahd",
        "tp",
        "fp",
        "fn",
        "n_gt",
        "n_pred",
        "gt_to_pred_sum",
        "pred_to_gt_sum",
    }
    assert all(v.shape == (6,) for v in out.values())
    np.testing.assert_array_equal(out["dice"], dice(pred, gt))
    np.testing.assert_array_equal(out["bahd"], bahd(pred, gt, spacing))
    for key, value in confusion_counts(pred, gt).items():
        np.testing.assert_array_equal(out[key], value)
    # bAHD is a re-computation from the stored sums where both sets are non-empty.
    ok = (out["n_gt"] > 0) & (out["n_pred"] > 0)
    assert ok.sum() == 3
    recomputed = (out["gt_to_pred_sum"][ok] + out["pred_to_gt_sum"][ok]) / out["n_gt"][ok] / 2
    np.testing.assert_allclose(out["bahd"][ok], recomputed)


# --------------------------------------------------------------------------- references


def test_dice_against_medpy():
    medpy_binary = pytest.importorskip("medpy.metric.binary")
    rng = np.random.default_rng(0)
    fills = rng.uniform(0.02, 0.3, size=50)
    pred = np.stack([_random_blobs(rng, 1, (32, 40), f)[0] for f in fills])
    gt = np.stack([_random_blobs(rng, 1, (32, 40), f)[0] for f in fills[::-1]])
    gt[:5] = pred[:5]  # a few exact matches
    ours = dice(pred, gt)
    expected = [medpy_binary.dc(p, g) for p, g in zip(pred, gt, strict=True)]
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("spacing", [(1.0, 1.0), (2.0, 0.5), (0.7, 1.3)])
def test_bahd_sums_against_brute_force(spacing):
    rng = np.random.default_rng(1)
    pred = _random_blobs(rng, 20, (16, 14), 0.15)
    gt = _random_blobs(rng, 20, (16, 14), 0.15)
    # Scattered single pixels too, not only smooth blobs.
    pred[:5] = rng.random((5, 16, 14)) < 0.05
    gt[:5] = rng.random((5, 16, 14)) < 0.05
    pred[:5, 0, 0] = True
    gt[:5, -1, -1] = True
    g2s, s2g = directed_distance_sums(pred, gt, spacing)
    b = bahd(pred, gt, spacing)
    for i in range(len(pred)):
        bf_g2s, bf_s2g = _brute_force_sums(pred[i], gt[i], spacing)
        np.testing.assert_allclose(g2s[i], bf_g2s, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(s2g[i], bf_s2g, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(b[i], (bf_g2s + bf_s2g) / gt[i].sum() / 2, rtol=1e-12)


@pytest.mark.parametrize("spacing", [(1.0, 1.0), (2.0, 0.5)])
def test_bbox_crop_equals_full_image(spacing):
    # Small blobs placed inside a larger empty image, so the crop really removes a lot.
    rng = np.random.default_rng(2)
    for _ in range(20):
        pred = np.zeros((60, 50), dtype=bool)
        gt = np.zeros((60, 50), dtype=bool)
        r, c = rng.integers(0, 40), rng.integers(0, 30)
        pred[r : r + 20, c : c + 20] = _random_blobs(rng, 1, (20, 20), 0.2)[0]
        r, c = rng.integers(0, 40), rng.integers(0, 30)
        gt[r : r + 20, c : c + 20] = _random_blobs(rng, 1, (20, 20), 0.2)[0]
        cropped = metrics._directed_sums_2d(pred, gt, spacing, crop=True)
        full = metrics._directed_sums_2d(pred, gt, spacing, crop=False)
        np.testing.assert_allclose(cropped, full, rtol=1e-12, atol=1e-9)


# --------------------------------------------------------------------------- soft Dice / IoU


def test_soft_dice_iou_hand_computed():
    # Four raters; rater k marks a pixel iff k < 4 * mean, so the mean is exactly
    # 0, .25, .5, .75 or 1.
    mean = np.array(
        [
            [0.0, 0.0, 0.25, 0.25],
            [0.5, 0.5, 0.75, 0.75],
            [1.0, 1.0, 1.0, 1.0],
            [0.0, 0.0, 0.0, 0.0],
        ]
    )
    raters = np.stack([k < 4 * mean for k in range(4)])  # (4, H, W)
    rater_mean = raters.mean(axis=0)[None]
    np.testing.assert_array_equal(rater_mean[0], mean)
    probs = np.array(
        [
            [0.05, 0.2, 0.4, 0.6],
            [0.8, 0.95, 0.1, 0.3],
            [0.5, 0.7, 0.9, 1.0],
            [0.0, 0.0, 0.0, 0.0],
        ]
    )[None]
    # By hand, cells as (row, col), binarised with >=:
    # t=.1: G = r0c2-3, r1, r2 (10); P = r0c1-3, r1, r2 (11); inter 10; union 11
    # t=.3: G = r1, r2 (8);          P = r0c2-3, r1c0,1,3, r2 (9); inter 7; union 10
    # t=.5: G = r1, r2 (8);          P = r0c3, r1c0-1, r2 (7); inter 6; union 9
    # t=.7: G = r1c2-3, r2 (6);      P = r1c0-1, r2c1-3 (5); inter 3; union 8
    # t=.9: G = r2 (4);              P = r1c1, r2c2-3 (3); inter 2; union 5
    inter = np.array([10, 7, 6, 3, 2])
    total = np.array([10 + 11, 8 + 9, 8 + 7, 6 + 5, 4 + 3])
    union = np.array([11, 10, 9, 8, 5])
    # Without eps: Dice = 20/21, 14/17, 12/15, 6/11, 4/7; IoU = 10/11, .7, 2/3, 3/8, .4
    expected_dice = np.mean((2 * inter + 1e-4) / (total + 1e-4))
    expected_iou = np.mean((inter + 1e-6) / (union + 1e-6))
    np.testing.assert_allclose(expected_dice, np.mean([20 / 21, 14 / 17, 12 / 15, 6 / 11, 4 / 7]), atol=1e-5)
    np.testing.assert_allclose(expected_iou, np.mean([10 / 11, 0.7, 2 / 3, 3 / 8, 0.4]), atol=1e-6)
    d, j = soft_dice_iou(probs, rater_mean)
    assert d.shape == (1,) and j.shape == (1,)
    np.testing.assert_allclose(d, [expected_dice], rtol=1e-12)
    np.testing.assert_allclose(j, [expected_iou], rtol=1e-12)

    # A single threshold reproduces one term.
    d5, j5 = soft_dice_iou(probs, rater_mean, thresholds=(0.5,))
    np.testing.assert_allclose(d5, [(12 + 1e-4) / (15 + 1e-4)], rtol=1e-12)
    np.testing.assert_allclose(j5, [(6 + 1e-6) / (9 + 1e-6)], rtol=1e-12)


def test_soft_dice_iou_empty():
    zeros = np.zeros((2, 3, 3))
    ones = np.ones((2, 3, 3))
    d, j = soft_dice_iou(zeros, zeros)  # both empty at every threshold -> 1
    np.testing.assert_allclose(d, [1.0, 1.0])
    np.testing.assert_allclose(j, [1.0, 1.0])
    d, j = soft_dice_iou(ones, zeros)  # one empty -> ~0
    np.testing.assert_allclose(d, 0.0, atol=1e-4)
    np.testing.assert_allclose(j, 0.0, atol=1e-6)


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize("fn", [dice, bahd, confusion_counts, score, directed_distance_sums, soft_dice_iou])
def test_shape_mismatch_raises(fn):
    a = np.zeros((2, 5, 5), dtype=bool)
    b = np.zeros((2, 5, 6), dtype=bool)
    with pytest.raises(ValueError, match=r"\(2, 5, 5\).*\(2, 5, 6\)"):
        fn(a, b)


@pytest.mark.parametrize("fn", [dice, bahd, score])
def test_non_3d_raises(fn):
    a = np.zeros((5, 5), dtype=bool)
    with pytest.raises(ValueError, match=r"\(5, 5\)"):
        fn(a, a)
    with pytest.raises(ValueError, match=r"\(5,\)"):
        soft_dice_iou(a[0], a[0])  # one image needs its batch axis: (1, 5) or (1, H, W)


def test_float_masks_rejected_and_01_ints_accepted():
    probs = np.full((1, 4, 4), 0.3)
    with pytest.raises(TypeError):
        dice(probs, probs > 0.5)
    ints = _batch(_square(2, 2)).astype(np.uint8)
    np.testing.assert_allclose(dice(ints, ints), [1.0])


def test_one_strict_dice_and_one_input_check_module():
    """`dice` is defined once (labels/overlap.py, listed in bench.evaluate.pixel) and is strict: a class map is not a
    mask. Every input check of labels/, bench/evaluate/ and methods/ lives in labels/checks.py; a method's Config is
    validated where the method is built (`validate_…`), not here."""
    import ast

    from bench.evaluate import pixel
    from labels import overlap

    assert pixel.dice is overlap.dice
    with pytest.raises(TypeError, match="bool mask"):
        overlap.dice(np.full((1, 2, 2), 2), np.ones((1, 2, 2), bool))  # classes 0..2: binarise where it is meant
    np.testing.assert_array_equal(overlap.dice(np.full((1, 2, 2), 2) > 0, np.ones((1, 2, 2), bool)), [1.0])
    checks = {
        f"{p.relative_to(REPO)}::{node.name}"
        for folder in ("labels", "bench/evaluate", "methods")
        for p in (REPO / folder).rglob("*.py")
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.FunctionDef) and re.match(r"_?(check|as_bool|as_unit)", node.name)
    }
    assert checks and {c.split("::")[0] for c in checks} == {"labels/checks.py"}, checks


def test_bad_spacing_raises():
    m = _batch(_square(2, 2))
    with pytest.raises(ValueError):
        bahd(m, m, spacing=(1.0,))
    with pytest.raises(ValueError):
        bahd(m, m, spacing=(1.0, 0.0))
