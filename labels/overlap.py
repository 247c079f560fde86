"""Overlap of label masks, defined once: Dice and IoU from counts, per image, per rater, the pool's Average DSC, and
the soft Dice / IoU over thresholds.

Dice(A, B) = 2 |A ∩ B| / (|A| + |B|) and IoU(A, B) = |A ∩ B| / |A ∪ B| are 0/0 when both masks are empty; the
`empty` rule names the value such a pair gets: ``"one"`` (default: an empty prediction of an empty reference is
right), ``"zero"`` or ``"nan"`` (undefined, left out of every mean). A pair with exactly one empty mask scores 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

EMPTY_RULES: tuple[str, ...] = ("one", "zero", "nan")
SOFT_THRESHOLDS: tuple[float, ...] = (0.1, 0.3, 0.5, 0.7, 0.9)  # MR-Net's soft Dice thresholds


def empty_value(empty: str) -> float:
    """The value of a both-empty pair under an `EMPTY_RULES` rule."""
    values = {"one": 1.0, "zero": 0.0, "nan": np.nan}
    if empty not in values:
        raise ValueError(f"empty must be one of {EMPTY_RULES}; got {empty!r}")
    return values[empty]


def overlap(inter: np.ndarray, size_a: np.ndarray, size_b: np.ndarray, kind: str = "dice", empty: float = 1.0) -> np.ndarray:
    """Dice (``kind="dice"``) or IoU (``"iou"``) from |A ∩ B|, |A| and |B| (broadcast); `empty` where |A| + |B| = 0.

    Returns float64 of the broadcast shape.
    """
    total = (size_a + size_b).astype(np.float64)
    num = 2.0 * inter if kind == "dice" else np.asarray(inter).astype(np.float64)
    den = total if kind == "dice" else total - inter
    out = np.full(np.broadcast(num, den).shape, empty, dtype=np.float64)
    np.divide(num, den, out=out, where=total > 0)
    return out


def dice(pred: np.ndarray, gt: np.ndarray) -> np.ndarray:
    """DSC per image: pred, gt (N, ...) bool (or class maps, any non-zero class counting as foreground) -> (N,) float64.

    Both empty -> 1.0 (as MONAI with ``ignore_empty=False`` and MR-Net's code, whose eps makes 0/0 equal 1).
    """
    a, b = np.asarray(pred) != 0, np.asarray(gt) != 0
    axes = tuple(range(1, a.ndim))
    inter = np.count_nonzero(a & b, axis=axes).astype(np.int64)
    return overlap(inter, np.count_nonzero(a, axis=axes).astype(np.int64), np.count_nonzero(b, axis=axes).astype(np.int64))


def rater_dice(raters: np.ndarray, gt: np.ndarray, rater_valid: np.ndarray | None = None) -> np.ndarray:
    """Each rater's mean DSC against gt over the images where it is valid: raters (N, R, H, W), gt (N, H, W),
    rater_valid (N, R) bool or None (all valid) -> (R,) float64 (NaN for a rater valid nowhere).

    Any non-zero class counts as foreground.
    """
    a, b = np.asarray(raters) != 0, (np.asarray(gt) != 0)[:, None]  # (N, R, ...) against (N, 1, ...): no copy of gt per rater
    axes = tuple(range(2, a.ndim))
    per_image = overlap(np.count_nonzero(a & b, axis=axes), np.count_nonzero(a, axis=axes), np.count_nonzero(b, axis=axes))  # (N, R)
    if rater_valid is not None:
        per_image = np.where(np.asarray(rater_valid, dtype=bool), per_image, np.nan)
    return nanmean(per_image, 0)


def average_dsc(raters: np.ndarray, gt: np.ndarray, rater_valid: np.ndarray | None = None) -> float:
    """The pool's Average DSC: the mean over raters of each rater's mean DSC against gt (`rater_dice`), over the raters
    valid somewhere."""
    return float(nanmean(rater_dice(raters, gt, rater_valid), 0))


def nanmean(x: np.ndarray, axis: int | tuple[int, ...]) -> np.ndarray:
    """Mean over `axis` ignoring NaN; NaN (without a warning) where nothing is left."""
    defined = ~np.isnan(x)
    if defined.all():
        return np.mean(x, axis=axis)
    count = defined.sum(axis=axis)
    total = np.where(defined, x, 0.0).sum(axis=axis)
    out = np.full(np.shape(total), np.nan)
    np.divide(total, count, out=out, where=count > 0)
    return out


def soft_dice_iou(
    probs: np.ndarray,
    rater_mean: np.ndarray,
    thresholds: Sequence[float] = SOFT_THRESHOLDS,
    *,
    smooth: bool = True,
    strict: bool = False,
    empty: str = "one",
) -> tuple[np.ndarray, np.ndarray]:
    """Soft Dice and soft IoU against the rater mean, per image: both sides binarised at each threshold, averaged.

    For each threshold t: P_t = probs >= t, G_t = rater_mean >= t (``>`` if `strict`, the rule of PADL and D-Persona;
    ``>=`` is MR-Net's published evaluation); soft Dice = mean_t Dice(P_t, G_t), soft IoU = mean_t IoU(P_t, G_t).

    `smooth` (default) is MR-Net's code exactly: Dice_t = (2|∩| + 1e-4) / (|P_t| + |G_t| + 1e-4) and IoU_t =
    (|∩| + 1e-6) / (|∪| + 1e-6), so a threshold where one side is empty scores about eps / |mask| and a both-empty
    one 1; use it to reproduce MR-Net's digits. ``smooth=False`` is exact, with the `empty` rule for a both-empty
    threshold (``"nan"`` leaves it out of the mean). The two agree within 1e-4 under the default rule.

    probs, rater_mean: (N, ...) float in [0, 1] of one shape -> (soft_dice, soft_iou), two (N,) float64 arrays.
    """
    p, g = check_prob_pair(probs, rater_mean, "probs", "rater_mean")  # (N, H·W) float64
    thresholds = tuple(float(t) for t in thresholds)
    if not thresholds:
        raise ValueError("thresholds must be a non-empty sequence of numbers")
    fill = empty_value(empty)
    above = np.greater if strict else np.greater_equal
    axes = tuple(range(1, p.ndim))
    dice_t, iou_t = [], []
    for t in thresholds:
        p_t, g_t = above(p, t), above(g, t)
        inter = np.count_nonzero(p_t & g_t, axis=axes)
        n_p, n_g = np.count_nonzero(p_t, axis=axes), np.count_nonzero(g_t, axis=axes)
        if smooth:
            dice_t.append((2.0 * inter + 1e-4) / (n_p + n_g + 1e-4))
            iou_t.append((inter + 1e-6) / (np.count_nonzero(p_t | g_t, axis=axes) + 1e-6))
        else:
            dice_t.append(overlap(inter, n_p, n_g, "dice", fill))
            iou_t.append(overlap(inter, n_p, n_g, "iou", fill))
    if smooth:
        return sum(dice_t) / len(thresholds), sum(iou_t) / len(thresholds)
    return nanmean(np.stack(dice_t, 1), 1), nanmean(np.stack(iou_t, 1), 1)


def as_unit_float(x: np.ndarray, name: str) -> np.ndarray:
    """``x`` as float64 with every value in [0, 1], or raise (TypeError for non-numeric dtypes)."""
    x = np.asarray(x)
    if x.dtype != np.bool_ and not (np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.floating)):
        raise TypeError(f"{name} must hold probabilities in [0, 1] (float, or a bool mask); got dtype {x.dtype}")
    x = x.astype(np.float64)
    n_bad = np.count_nonzero(~((x >= 0.0) & (x <= 1.0)))  # NaN fails both comparisons
    if n_bad:
        raise ValueError(f"{name} must lie in [0, 1] with no NaN; {n_bad} of {x.size} values do not")
    return x


def check_prob_pair(a: np.ndarray, b: np.ndarray, name_a: str, name_b: str) -> tuple[np.ndarray, np.ndarray]:
    """Two probability maps (N, ...) of one non-empty shape, each in [0, 1] (`as_unit_float`), or raise naming them.

    → both as float64 (N, P), P the pixels per image.
    """
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim < 2 or a.shape != b.shape or math.prod(a.shape[1:]) == 0:
        raise ValueError(f"{name_a} and {name_b} must both have shape (N, H, W), non-empty, and match; got {a.shape} and {b.shape}")
    a, b = as_unit_float(a, name_a), as_unit_float(b, name_b)
    return a.reshape(a.shape[0], -1), b.reshape(b.shape[0], -1)
