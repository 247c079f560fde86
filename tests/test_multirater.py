"""Tests for bench.evaluate.multirater against independent formulations.

The references below work on Python sets of pixel coordinates and explicit loops
or permutations, never on the module's matrix products, so a shared bug cannot
hide in both.
"""

from __future__ import annotations

import math
from itertools import permutations

import numpy as np
import pytest

from bench.evaluate import multirater as mr
from bench.evaluate.calibration import ece, reliability
from bench.evaluate.multirater import EMPTY_RULES, dice_match, dice_max, ged, iou_distance, per_rater_dice
from labels.overlap import soft_dice_iou

BOTH_EMPTY = {"one": 1.0, "zero": 0.0, "nan": math.nan}

# --------------------------------------------------------------------------- references


def _pixels(mask: np.ndarray) -> set[tuple[int, ...]]:
    return set(zip(*np.nonzero(mask)))


def _ref_iou(a: np.ndarray, b: np.ndarray, empty: str) -> float:
    sa, sb = _pixels(a), _pixels(b)
    if not sa and not sb:
        return BOTH_EMPTY[empty]
    return len(sa & sb) / len(sa | sb)


def _ref_dice(a: np.ndarray, b: np.ndarray, empty: str) -> float:
    sa, sb = _pixels(a), _pixels(b)
    if not sa and not sb:
        return BOTH_EMPTY[empty]
    return 2 * len(sa & sb) / (len(sa) + len(sb))


def _mean_defined(values: list[float]) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return sum(kept) / len(kept) if kept else math.nan


def _ref_ged(samples: np.ndarray, raters: np.ndarray, empty: str) -> float:
    """Kohl et al.'s definition as a double loop over all ordered pairs (self-pairs included)."""

    def d(a, b):
        return 1.0 - _ref_iou(a, b, empty)

    cross = [d(s, y) for s in samples for y in raters]
    within_s = [d(s, t) for s in samples for t in samples]
    within_y = [d(y, z) for y in raters for z in raters]
    return 2 * _mean_defined(cross) - _mean_defined(within_s) - _mean_defined(within_y)


def _ref_match(samples: np.ndarray, raters: np.ndarray) -> float:
    """Best one-to-one rater/sample assignment by brute force; unmatched raters score 0."""
    dsc = [[_ref_dice(y, s, "one") for s in samples] for y in raters]
    n_r, n_s = len(raters), len(samples)
    if n_s >= n_r:
        best = max(sum(dsc[r][perm[r]] for r in range(n_r)) for perm in permutations(range(n_s), n_r))
    else:
        best = max(sum(dsc[perm[m]][m] for m in range(n_s)) for perm in permutations(range(n_r), n_s))
    return best / n_r


def _random_masks(rng: np.random.Generator, shape: tuple[int, ...], fill: float = 0.45) -> np.ndarray:
    return rng.random(shape) < fill


def _stack(*masks) -> np.ndarray:
    return np.stack([np.asarray(m, dtype=bool) for m in masks])


# --------------------------------------------------------------------------- empty rules on crafted pairs

SQUARE = np.zeros((4, 4), dtype=bool)
SQUARE[:2, :2] = True
SHIFTED = np.zeros((4, 4), dtype=bool)
SHIFTED[1:3, :2] = True  # overlaps SQUARE in 2 of 6 pixels
EMPTY = np.zeros((4, 4), dtype=bool)


@pytest.mark.parametrize("empty", EMPTY_RULES)
def test_iou_distance_empty_rules(empty):
    a = _stack(EMPTY, EMPTY, SQUARE, SQUARE, SQUARE)
    b = _stack(EMPTY, SQUARE, EMPTY, SQUARE, SHIFTED)
    expected = [1.0 - BOTH_EMPTY[empty], 1.0, 1.0, 0.0, 1.0 - 2 / 6]
    np.testing.assert_allclose(iou_distance(a, b, empty=empty), expected, equal_nan=True)


@pytest.mark.parametrize("empty", EMPTY_RULES)
def test_per_rater_dice_empty_rules(empty):
    pred = _stack(EMPTY, SQUARE)
    raters = np.stack([_stack(EMPTY, SQUARE), _stack(SQUARE, EMPTY)])  # (N=2, R=2, 4, 4)
    expected = [[BOTH_EMPTY[empty], 0.0], [1.0, 0.0]]
    np.testing.assert_allclose(per_rater_dice(pred, raters, empty=empty), expected, equal_nan=True)


@pytest.mark.parametrize("empty", EMPTY_RULES)
def test_set_metrics_empty_rules(empty):
    # One case: raters (empty, SQUARE); samples (empty, SHIFTED).
    raters = _stack(EMPTY, SQUARE)[None]
    samples = _stack(EMPTY, SHIFTED)[None]
    d_shift = 2 * 2 / (4 + 4)  # Dice(SQUARE, SHIFTED) = 0.5
    # Matching: empty<->empty and SQUARE<->SHIFTED beats the crossed pairing (0 + 0).
    expected_match = {"one": (1.0 + d_shift) / 2, "zero": d_shift / 2, "nan": d_shift}[empty]
    np.testing.assert_allclose(dice_match(samples, raters, empty=empty), [expected_match])
    # Dice_max per rater: empty rater's best is the empty sample (value e, or excluded).
    expected_max = {"one": (1.0 + d_shift) / 2, "zero": d_shift / 2, "nan": d_shift}[empty]
    np.testing.assert_allclose(dice_max(samples, raters, empty=empty), [expected_max])
    # GED against the loop, and GED of a set with itself is 0 (NaN under "nan" if all empty).
    np.testing.assert_allclose(ged(samples, raters, empty=empty), [_ref_ged(samples[0], raters[0], empty)])
    np.testing.assert_allclose(ged(raters, raters, empty=empty), [0.0], atol=1e-12)
    all_empty = np.zeros((1, 2, 4, 4), dtype=bool)
    np.testing.assert_allclose(ged(all_empty, all_empty, empty=empty), [0.0 if empty != "nan" else math.nan], equal_nan=True)


def test_ged_zero_rule_counts_empty_self_pairs_as_distance_one():
    # D-Persona's convention: an empty mask is at distance 1 from itself, so with
    # M = 1 and an empty sample the sample term is 1, not 0.
    samples = EMPTY[None, None]
    raters = _stack(SQUARE, SQUARE)[None]
    # cross = 1, samples term = 1 ("zero") or 0 ("one"), raters term = 0
    np.testing.assert_allclose(ged(samples, raters, empty="zero"), [2 * 1.0 - 1.0 - 0.0])
    np.testing.assert_allclose(ged(samples, raters, empty="one"), [2 * 1.0 - 0.0 - 0.0])


def test_unknown_empty_rule():
    with pytest.raises(ValueError, match="empty must be one of"):
        iou_distance(SQUARE[None], SQUARE[None], empty="ignore")


# --------------------------------------------------------------------------- GED


@pytest.mark.parametrize("n_samples", [1, 2, 3])
@pytest.mark.parametrize("empty", EMPTY_RULES)
def test_ged_matches_double_loop(n_samples, empty):
    rng = np.random.default_rng(10 + n_samples)
    raters = _random_masks(rng, (2, 4, 6, 6))
    raters[0, 2] = False  # an empty rater
    samples = _random_masks(rng, (2, n_samples, 6, 6))
    samples[1, 0] = False  # an empty sample
    expected = [_ref_ged(samples[i], raters[i], empty) for i in range(2)]
    np.testing.assert_allclose(ged(samples, raters, empty=empty), expected, rtol=1e-12, atol=1e-12)


def test_ged_zero_rule_reproduces_d_persona_formula():
    # D-Persona (lib/metrics_set.generalized_energy_distance): IoU = |∩| / (|∪| + 1e-8)
    # over all ordered pairs, self-pairs included, foreground only.
    rng = np.random.default_rng(5)
    raters = _random_masks(rng, (1, 4, 6, 6))
    raters[0, 3] = False
    samples = _random_masks(rng, (1, 3, 6, 6))
    samples[0, 1] = False

    def mean_distance(x, y):
        x, y = x.reshape(len(x), 1, -1), y.reshape(1, len(y), -1)
        return np.mean(1 - (x & y).sum(-1) / ((x | y).sum(-1) + 1e-8))

    y, s = raters[0], samples[0]
    expected = 2 * mean_distance(y, s) - mean_distance(y, y) - mean_distance(s, s)
    np.testing.assert_allclose(ged(samples, raters, empty="zero"), [expected], atol=1e-6)


def test_ged_single_sample_has_no_sample_term():
    rng = np.random.default_rng(3)
    raters = _random_masks(rng, (2, 4, 6, 6))
    samples = _random_masks(rng, (2, 1, 6, 6))
    for i in range(2):
        cross = np.mean([1 - _ref_iou(samples[i, 0], y, "one") for y in raters[i]])
        within = np.mean([1 - _ref_iou(y, z, "one") for y in raters[i] for z in raters[i]])
        np.testing.assert_allclose(ged(samples, raters)[i], 2 * cross - within)


def test_ged_missing_rater_is_left_out():
    rng = np.random.default_rng(4)
    raters = _random_masks(rng, (2, 4, 6, 6))
    samples = _random_masks(rng, (2, 3, 6, 6))
    valid = np.array([[True, False, True, True], [True, True, True, True]])
    raters[0, 1] = rng.random((6, 6)) < 0.9  # garbage in the missing slot must not matter
    expected = [_ref_ged(samples[0], raters[0, [0, 2, 3]], "one"), _ref_ged(samples[1], raters[1], "one")]
    np.testing.assert_allclose(ged(samples, raters, rater_valid=valid), expected, rtol=1e-12)
    no_rater = np.zeros((2, 4), dtype=bool)
    assert np.isnan(ged(samples, raters, rater_valid=no_rater)).all()


# --------------------------------------------------------------------------- Dice_match / Dice_max


@pytest.mark.parametrize(("n_samples", "n_raters"), [(3, 3), (4, 4), (5, 3), (2, 4)])
def test_dice_match_matches_brute_force(n_samples, n_raters):
    rng = np.random.default_rng(100 * n_samples + n_raters)
    raters = _random_masks(rng, (3, n_raters, 6, 6))
    samples = _random_masks(rng, (3, n_samples, 6, 6))
    raters[1, 0] = False
    expected = [_ref_match(samples[i], raters[i]) for i in range(3)]
    np.testing.assert_allclose(dice_match(samples, raters), expected, rtol=1e-12)


def test_dice_match_missing_rater():
    rng = np.random.default_rng(7)
    raters = _random_masks(rng, (1, 4, 6, 6))
    samples = _random_masks(rng, (1, 4, 6, 6))
    valid = np.array([[True, True, False, True]])
    expected = _ref_match(samples[0], raters[0, [0, 1, 3]])
    np.testing.assert_allclose(dice_match(samples, raters, rater_valid=valid), [expected], rtol=1e-12)


def test_dice_match_identity_and_permutation():
    rng = np.random.default_rng(8)
    raters = _random_masks(rng, (2, 4, 6, 6))
    np.testing.assert_allclose(dice_match(raters[:, ::-1], raters), [1.0, 1.0])


@pytest.mark.parametrize("per", ["rater", "sample"])
def test_dice_max_matches_loop(per):
    rng = np.random.default_rng(9)
    raters = _random_masks(rng, (2, 4, 6, 6))
    samples = _random_masks(rng, (2, 3, 6, 6))
    valid = np.array([[True, True, True, False], [True, True, True, True]])
    expected = []
    for i in range(2):
        ys = [raters[i, r] for r in range(4) if valid[i, r]]
        if per == "rater":
            best = [max(_ref_dice(y, s, "one") for s in samples[i]) for y in ys]
        else:
            best = [max(_ref_dice(y, s, "one") for y in ys) for s in samples[i]]
        expected.append(sum(best) / len(best))
    np.testing.assert_allclose(dice_max(samples, raters, rater_valid=valid, per=per), expected, rtol=1e-12)


def test_dice_max_by_hand():
    # Raters SQUARE and SHIFTED; one sample SQUARE: per rater (1 + 0.5) / 2, per sample 1.
    raters = _stack(SQUARE, SHIFTED)[None]
    samples = SQUARE[None, None]
    np.testing.assert_allclose(dice_max(samples, raters), [0.75])
    np.testing.assert_allclose(dice_max(samples, raters, per="sample"), [1.0])


# --------------------------------------------------------------------------- per-rater Dice


def test_per_rater_dice_by_hand_with_missing_rater():
    pred = np.array([[[1, 1], [0, 0]]], dtype=bool)
    raters = np.array([[[[1, 1], [0, 0]], [[1, 0], [0, 0]], [[0, 0], [0, 0]], [[1, 1], [1, 1]]]], dtype=bool)
    valid = np.array([[True, True, True, False]])
    out = per_rater_dice(pred, raters, rater_valid=valid)
    np.testing.assert_allclose(out, [[1.0, 2 * 1 / (2 + 1), 0.0, math.nan]], equal_nan=True)
    assert out.shape == (1, 4) and out.dtype == np.float64


# --------------------------------------------------------------------------- soft Dice / IoU

PROBS = np.array([[[0.2, 0.6], [0.8, 0.4]]])
RATER_MEAN = np.array([[[0.25, 0.5], [1.0, 0.0]]])


def test_soft_dice_iou_by_hand():
    # With >=, per threshold (|P ∩ G|, |P|, |G|):
    # 0.1: (3, 4, 3); 0.3: (2, 3, 2); 0.5: (2, 2, 2); 0.7: (1, 1, 1); 0.9: (0, 0, 1)
    dice_t = [6 / 7, 4 / 5, 1.0, 1.0, 0.0]
    iou_t = [3 / 4, 2 / 3, 1.0, 1.0, 0.0]
    d, i = soft_dice_iou(PROBS, RATER_MEAN, smooth=False)
    np.testing.assert_allclose(d, [np.mean(dice_t)])
    np.testing.assert_allclose(i, [np.mean(iou_t)])
    # With >, only t = 0.5 changes: the rater mean 0.5 drops out, (1, 2, 1).
    dice_t[2], iou_t[2] = 2 / 3, 1 / 2
    d, i = soft_dice_iou(PROBS, RATER_MEAN, smooth=False, strict=True)
    np.testing.assert_allclose(d, [np.mean(dice_t)])
    np.testing.assert_allclose(i, [np.mean(iou_t)])


@pytest.mark.parametrize("empty", EMPTY_RULES)
def test_soft_dice_iou_empty_rules(empty):
    probs = np.concatenate([PROBS, np.full((1, 2, 2), 0.05)])
    rater_mean = np.concatenate([RATER_MEAN, np.zeros((1, 2, 2))])
    d, i = soft_dice_iou(probs, rater_mean, smooth=False, empty=empty)
    np.testing.assert_allclose(d[1], BOTH_EMPTY[empty], equal_nan=True)
    np.testing.assert_allclose(i[1], BOTH_EMPTY[empty], equal_nan=True)
    # Case 0 has one threshold (0.9) with P empty but G not: no rule involved.
    np.testing.assert_allclose(d[0], np.mean([6 / 7, 4 / 5, 1.0, 1.0, 0.0]))


def test_soft_dice_iou_close_to_mrnet_eps_version():
    rng = np.random.default_rng(11)
    probs = rng.random((4, 8, 8))
    rater_mean = rng.integers(0, 7, size=(4, 8, 8)) / 6
    rater_mean[0] = 0.0  # empty at every threshold
    ours = soft_dice_iou(probs, rater_mean, smooth=False)
    theirs = soft_dice_iou(probs, rater_mean)
    np.testing.assert_allclose(ours[0], theirs[0], atol=1e-4)
    np.testing.assert_allclose(ours[1], theirs[1], atol=1e-4)


# --------------------------------------------------------------------------- calibration


def test_ece_by_hand():
    # B = 4 bins, edges 0, .25, .5, .75, 1; p = 0.25 goes up, p = 1.0 into the last bin.
    probs = np.array([[[0.0, 0.25, 0.3], [0.5, 0.75, 1.0]]])
    target = np.array([[[0, 1, 0], [1, 1, 1]]], dtype=bool)
    # bin0 {0.0}: |0 - 0| = 0; bin1 {.25, .3}: |.5 - .275| = .225 (n=2);
    # bin2 {.5}: |1 - .5| = .5 (n=1); bin3 {.75, 1.0}: |1 - .875| = .125 (n=2)
    expected = (1 * 0.0 + 2 * 0.225 + 1 * 0.5 + 2 * 0.125) / 6
    np.testing.assert_allclose(ece(probs, target, n_bins=4), [expected])
    soft = np.array([[[0.5, 0.25, 0.25], [0.5, 0.75, 1.0]]])
    # bin0: |.5 - 0| = .5 (n=1); bin1: |.25 - .275| = .025 (n=2); bin2: 0; bin3: 0
    np.testing.assert_allclose(ece(probs, soft, n_bins=4), [(0.5 + 2 * 0.025) / 6])


def test_ece_per_case_and_reliability_pooled():
    probs = np.array([[[0.0, 1.0]], [[0.1, 0.9]]])
    target = np.array([[[0.0, 1.0]], [[1.0, 0.0]]])
    # Case 0 is perfect; case 1: bins 0 and 1 (B=2) each |1 - .1|, |0 - .9| over n = 2.
    np.testing.assert_allclose(ece(probs, target, n_bins=2), [0.0, (0.9 + 0.9) / 2])
    count, confidence, observed = reliability(probs, target, n_bins=2)
    np.testing.assert_array_equal(count, [2, 2])
    np.testing.assert_allclose(confidence, [0.05, 0.95])
    np.testing.assert_allclose(observed, [0.5, 0.5])
    count, confidence, observed = reliability(probs, target, n_bins=5)
    np.testing.assert_array_equal(count, [2, 0, 0, 0, 2])
    assert np.isnan(confidence[1:4]).all() and np.isnan(observed[1:4]).all()


# --------------------------------------------------------------------------- errors


def _raises(exc, fn, *args, **kwargs) -> str:
    with pytest.raises(exc) as info:
        fn(*args, **kwargs)
    message = str(info.value)
    assert "\n" not in message and message
    return message


def test_shape_and_dtype_errors():
    stack = np.zeros((2, 3, 4, 4), dtype=bool)
    assert "(N, M, H, W)" in _raises(ValueError, ged, stack[:, 0], stack)
    assert "agree in N and H, W" in _raises(ValueError, ged, stack, stack[:, :, :3])
    assert "agree in N and H, W" in _raises(ValueError, dice_match, stack[:1], stack)
    assert "M >= 1" in _raises(ValueError, dice_max, stack[:, :0], stack)
    assert "dtype float64" in _raises(TypeError, ged, stack.astype(float), stack)
    assert "rater_valid" in _raises(ValueError, ged, stack, stack, rater_valid=np.ones((2, 2), bool))
    assert "rater_valid" in _raises(TypeError, ged, stack, stack, rater_valid=np.full((2, 3), 0.5))
    assert "per must be" in _raises(ValueError, dice_max, stack, stack, per="both")
    assert "pred must have shape" in _raises(ValueError, per_rater_dice, stack, stack)
    assert "a and b" in _raises(ValueError, iou_distance, stack[0], stack[1, :2])
    probs = np.full((2, 4, 4), 0.5)
    assert "[0, 1]" in _raises(ValueError, ece, probs * 3, probs)
    assert "no NaN" in _raises(ValueError, soft_dice_iou, probs, np.full((2, 4, 4), np.nan))
    assert "must both have shape" in _raises(ValueError, ece, probs, probs[:, :2])
    assert "probabilities" in _raises(TypeError, reliability, probs.astype(str), probs)
    assert "n_bins" in _raises(ValueError, ece, probs, probs, n_bins=0)
    assert "thresholds" in _raises(ValueError, soft_dice_iou, probs, probs, thresholds=())


# --------------------------------------------------------------------------- GED at equal footing


@pytest.mark.parametrize("empty", ["one", "zero"])
def test_unbiased_ged_is_zero_and_ged_is_the_floor_for_a_perfect_sampler(empty):
    """Exact expectations over every M-tuple of draws (with replacement) from three raters, one of them empty: the
    all-pairs GED averages to `ged_floor` = (D − s)/M, the distinct-pairs form to 0."""
    import itertools

    rng = np.random.default_rng(3)
    raters = rng.random((1, 3, 6, 6)) > 0.5
    raters[0, 2] = False  # an empty rater: the rule matters for its self-pairs
    for m in (2, 3):
        draws = [raters[:, list(idx)] for idx in itertools.product(range(3), repeat=m)]
        mean_ged = np.mean([mr.ged(s, raters, empty=empty)[0] for s in draws])
        mean_unbiased = np.mean([mr.ged(s, raters, empty=empty, unbiased=True)[0] for s in draws])
        assert mean_ged == pytest.approx(mr.ged_floor(raters, None, m, empty)[0], abs=1e-12)
        assert mean_unbiased == pytest.approx(0.0, abs=1e-12)
    one = raters[:, :1]  # M = 1: no distinct pair; both forms agree
    assert mr.ged(one, raters, empty=empty, unbiased=True)[0] == mr.ged(one, raters, empty=empty)[0]


def test_the_perfect_sampler_floor_by_hand():
    # Two raters: a 2-pixel mask and a 4-pixel mask containing it: d = 1 − 2/4 = ½. D over the 4 ordered pairs = ¼, s = 0.
    raters = np.zeros((1, 2, 1, 4), dtype=bool)
    raters[0, 0, 0, :2] = True
    raters[0, 1, 0, :] = True
    assert mr.ged_floor(raters, None, 16)[0] == pytest.approx(0.25 / 16)
    valid = np.array([[True, False]])  # one valid rater: a perfect sampler repeats it, floor 0
    assert mr.ged_floor(raters, valid, 16)[0] == 0.0


def test_between_dice_by_hand_with_a_missing_slot_and_one_output():
    """Three 1-D masks {0,1}, {0,1}, {0}: Dice 1, 2/3, 2/3 for the three distinct pairs, mean 7/9; the third slot
    missing leaves one pair (Dice 1); one output has no pair (NaN); two empty masks pair by the empty rule."""
    x = np.zeros((1, 3, 1, 4), bool)
    x[0, 0, 0, :2] = x[0, 1, 0, :2] = True
    x[0, 2, 0, 0] = True
    assert mr.between_dice(x)[0] == pytest.approx(7 / 9)
    assert mr.between_dice(x, np.array([[True, True, False]]))[0] == pytest.approx(1.0)
    assert np.isnan(mr.between_dice(x[:, :1])[0])
    empty = np.zeros((1, 2, 1, 4), bool)
    assert mr.between_dice(empty, empty="one")[0] == 1.0 and mr.between_dice(empty, empty="zero")[0] == 0.0
