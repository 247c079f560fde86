"""Overlap of label masks, defined once: Dice and IoU from counts, per image, per rater, the pool's Average DSC, and
the soft Dice / IoU over thresholds.

Dice(A, B) = 2 |A ∩ B| / (|A| + |B|) and IoU(A, B) = |A ∩ B| / |A ∪ B| are 0/0 when both masks are empty; the
`empty` rule names the value such a pair gets: ``"one"`` (default: an empty prediction of an empty reference is
right), ``"zero"`` or ``"nan"`` (undefined, left out of every mean). A pair with exactly one empty mask scores 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from labels.checks import check_mask_pair, check_prob_pair

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
    """Dice similarity coefficient (DSC) per image, the one `dice`: pred, gt (N, H, W) bool masks (integer 0/1 accepted;
    a class map or a probability map raises, `labels.checks.check_mask_pair`) -> (N,) float64 in [0, 1].

    DSC(S, G) = 2 |S ∩ G| / (|S| + |G|). Both empty -> 1.0 (as MONAI with ``ignore_empty=False`` and MR-Net's code,
    whose eps makes 0/0 equal 1); exactly one empty -> 0.0 (follows from the formula). Foreground of class maps is the
    caller's choice, written where it is made (`labels > 0`).

    Reference: L. R. Dice, "Measures of the amount of ecologic association between species", Ecology 26(3):297-302, 1945.
    """
    a, b = check_mask_pair(pred, gt)
    inter = np.count_nonzero(a & b, axis=(1, 2)).astype(np.int64)
    return overlap(inter, np.count_nonzero(a, axis=(1, 2)).astype(np.int64), np.count_nonzero(b, axis=(1, 2)).astype(np.int64))


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
