"""Multi-rater segmentation metrics as pure NumPy/SciPy functions.

These are the field's metrics for methods that are scored against several raters
at once, or that output several segmentations (samples, or one per rater): the
generalised energy distance (GED), Hungarian-matched Dice, Dice_max, per-rater
Dice and soft Dice/IoU at thresholds (calibration, ECE: bench/evaluate/calibration.py). Each
docstring states the formula, the empty-mask rule and the citation (docs/methods.md#metrics).

Shapes and vocabulary:

- a mask batch is bool (N, H, W); a rater stack ``raters`` is bool (N, R, H, W)
  and a sample stack ``samples`` bool (N, M, H, W). More spatial axes (D, H, W)
  work the same way; integer 0/1 arrays are accepted, anything else raises
  TypeError (see :func:`labels.checks.as_bool`).
- ``rater_valid`` is bool (N, R): False marks a rater who did not annotate that
  case. A missing rater is excluded from every mean (its mask is never read).
- probabilities (``probs``, ``rater_mean``) are floats in [0, 1].
- Every function returns one value per case, shape (N,), unless stated.

Empty-pair rules (``EMPTY_RULES``, keyword ``empty``):

Dice(S, Y) = 2|S ∩ Y| / (|S| + |Y|) and IoU(S, Y) = |S ∩ Y| / |S ∪ Y| are 0/0
when both masks are empty. The rule names the value given to such a pair:

- ``"one"`` (default): both empty -> Dice = IoU = 1, distance 1 - IoU = 0. An
  empty prediction for an empty reference is a correct answer; this keeps
  d(x, x) = 0 for every mask x (so 1 - IoU is a metric) and agrees with
  :func:`labels.overlap.dice` and with most public code (below).
- ``"zero"``: both empty -> Dice = IoU = 0, distance 1 (a "no lesion" agreement
  scores as a complete miss). Reproduces D-Persona's GED.
- ``"nan"``: undefined; the pair is excluded from every mean it enters (NaN if
  nothing is left), for a sensitivity analysis.

The rule applies to every pair, including a mask paired with itself in GED (see
:func:`ged`). A pair with exactly one empty mask needs no rule: Dice = IoU = 0.

What public code does, library by library, and which rule each uses: docs/methods.md#empty-pair-rules-in-public-code.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from labels.checks import check_mask_pair, check_pred_raters, check_sets, check_stack, check_valid
from labels.overlap import EMPTY_RULES, empty_value, nanmean, overlap

__all__ = [
    "EMPTY_RULES",
    "between_dice",
    "dice_match",
    "dice_max",
    "ged",
    "ged_floor",
    "iou_distance",
    "paired_dice",
    "per_rater_dice",
]


# Marks an undefined (empty-empty, rule "nan") Dice when selecting a best match:
# above any real Dice, so an empty sample is the best match for an empty rater.
_UNDEFINED_BEST = 2.0


# --------------------------------------------------------------------------- overlaps


def _pairwise(a: np.ndarray, b: np.ndarray, kind: str, fill: float) -> np.ndarray:
    """Dice or IoU of every pair (a[n, i], b[n, j]): a (N, K, P), b (N, L, P) bool -> (N, K, L).

    |A ∩ B| for all pairs is one matrix product per case. float32 BLAS sums of 0/1
    are exact below 2**24 pixels; larger images use float64.
    """
    n, k, p = a.shape
    dtype = np.float32 if p < 2**24 else np.float64
    inter = np.empty((n, k, b.shape[1]), dtype=np.int64)
    for i in range(n):
        inter[i] = np.rint(a[i].astype(dtype) @ b[i].astype(dtype).T)
    size_a = np.count_nonzero(a, axis=2)[:, :, None]
    size_b = np.count_nonzero(b, axis=2)[:, None, :]
    return overlap(inter, size_a, size_b, kind, fill)


# --------------------------------------------------------------------------- distances


def iou_distance(a: np.ndarray, b: np.ndarray, empty: str = "one") -> np.ndarray:
    """IoU distance d = 1 - IoU of elementwise pairs (a[i], b[i]).

    Formula:
        d(A, B) = 1 - |A ∩ B| / |A ∪ B|

    Empty-mask rule (``empty``, see :data:`EMPTY_RULES`):
        both empty -> 0 (``"one"``, default), 1 (``"zero"``) or NaN (``"nan"``);
        exactly one empty -> 1.

    Args:
        a: (N, H, W) bool (any number of axes after N).
        b: same shape as ``a``, bool.
        empty: empty-pair rule.

    Returns:
        (N,) float64 in [0, 1] (or NaN).

    Reference:
        P. Jaccard, "The distribution of the flora in the alpine zone", New
        Phytologist 11(2):37-50, 1912; used as GED's distance by S. A. A. Kohl
        et al., "A probabilistic U-Net for segmentation of ambiguous images",
        NeurIPS 2018.
    """
    fill = empty_value(empty)
    a, b = check_mask_pair(a, b, "a", "b", volumes=True)
    axes = tuple(range(1, a.ndim))
    inter = np.count_nonzero(a & b, axis=axes)
    return 1.0 - overlap(inter, np.count_nonzero(a, axis=axes), np.count_nonzero(b, axis=axes), "iou", fill)


def ged(
    samples: np.ndarray,
    raters: np.ndarray,
    rater_valid: np.ndarray | None = None,
    empty: str = "one",
    unbiased: bool = False,
) -> np.ndarray:
    """Generalised energy distance (squared) between a case's samples and its raters.

    Formula, with d = 1 - IoU (:func:`iou_distance`), S, S' samples and Y, Y'
    raters of one case:
        D²_GED = 2 E[d(S, Y)] - E[d(S, S')] - E[d(Y, Y')]

    Following the published definition (S, S' and Y, Y' are independent draws
    from the empirical distributions, i.e. with replacement), each expectation
    is the mean over ALL ordered pairs, self-pairs S = S' and Y = Y' included:
    M·R, M² and R² terms. This is what the public code of Kohl et al.
    (Cityscapes), PHiSeg and D-Persona does. With M = 1 the sample term is
    d(S, S), which is 0 except for an empty S under ``"zero"`` (1) or ``"nan"``
    (undefined). Applying the rule to self-pairs too keeps D²_GED = 0 whenever
    the samples equal the raters (under ``"nan"``: NaN if every mask is empty).

    Missing raters (``rater_valid`` False) are left out of both rater terms.

    ``unbiased=True``: the sample term over the M(M − 1) distinct ordered pairs only (a U-statistic). For M random
    draws from a distribution P, the all-pairs sample term is biased low by E[d(S, S')]/M, so a perfect sampler of the
    raters scores ``ged_floor`` > 0 at every finite M (0.042 at M = 16 on mnist-5k's pool); the unbiased form is 0 in
    expectation for it at any M. With M = 1 there is no distinct pair; the one sample stands for M identical draws
    (a deterministic method's), whose distinct pairs are d(S, S), so both forms agree.

    Empty-mask rule (``empty``): the value of d for an empty-empty pair, see
    :data:`EMPTY_RULES`: 0 (``"one"``, default, as PHiSeg), 1 (``"zero"``, as
    D-Persona) or excluded (``"nan"``; NaN if a term has no defined pair).
    A case without any valid rater gives NaN.

    Args:
        samples: (N, M, H, W) bool, M >= 1 predicted segmentations per case.
        raters: (N, R, H, W) bool, the raters' masks.
        rater_valid: (N, R) bool or None (all valid).
        empty: empty-pair rule.

    Returns:
        (N,) float64.

    Reference:
        S. A. A. Kohl, B. Romera-Paredes, C. Meyer, J. De Fauw, J. R. Ledsam,
        K. H. Maier-Hein, S. M. A. Eslami, D. J. Rezende, O. Ronneberger, "A
        probabilistic U-Net for segmentation of ambiguous images", NeurIPS 2018;
        G. J. Székely, M. L. Rizzo, "Energy statistics: a class of statistics
        based on distances", J. Stat. Plan. Inference 143(8):1249-1272, 2013.
    """
    fill = empty_value(empty)
    s, y, valid = check_sets(samples, raters, rater_valid)
    d_sy = 1.0 - _pairwise(s, y, "iou", fill)  # (N, M, R)
    d_ss = 1.0 - _pairwise(s, s, "iou", fill)  # (N, M, M)
    d_yy = 1.0 - _pairwise(y, y, "iou", fill)  # (N, R, R)
    d_sy[~np.broadcast_to(valid[:, None, :], d_sy.shape)] = np.nan
    d_yy[~(valid[:, :, None] & valid[:, None, :])] = np.nan
    if unbiased and d_ss.shape[1] > 1:
        d_ss[:, np.eye(d_ss.shape[1], dtype=bool)] = np.nan  # distinct pairs only
    return 2.0 * nanmean(d_sy, (1, 2)) - nanmean(d_ss, (1, 2)) - nanmean(d_yy, (1, 2))


def ged_floor(raters: np.ndarray, rater_valid: np.ndarray | None, m: int, empty: str = "one") -> np.ndarray:
    """The expected (all-pairs) GED of a perfect sampler at M = m: M draws with replacement from the case's valid raters.

    Formula, with D = mean of d(Y, Y') over all ordered valid pairs (self-pairs included) and s = mean of d(Y, Y):
        E[D²_GED] = 2D − D − [(M − 1)/M · D + s/M] = (D − s) / M
    (E d(S, Y) = D; a pair of distinct draws is a pair of raters; a self-pair is d(S, S)). s is 0 under the
    ``"one"`` rule and counts the empty raters under ``"zero"``. The floor under every table with GED
    (docs/methods.md#samples): a perfect sampler's GED is not 0 at finite M, while a perfect per-rater model's R outputs
    score 0, so methods are compared at one M and beside this floor. raters (N, R, H, W) bool; → (N,) float64.
    """
    fill = empty_value(empty)
    y = check_stack(raters, "raters", "R")
    valid = check_valid(rater_valid, y.shape[0], y.shape[1])
    y = y.reshape(y.shape[0], y.shape[1], -1)
    d_yy = 1.0 - _pairwise(y, y, "iou", fill)
    pair_valid = valid[:, :, None] & valid[:, None, :]
    d_yy[~pair_valid] = np.nan
    self_d = np.where(valid, np.diagonal(d_yy, axis1=1, axis2=2), np.nan)
    return (nanmean(d_yy, (1, 2)) - nanmean(self_d, 1)) / m


# --------------------------------------------------------------------------- Dice over sets


def dice_match(
    samples: np.ndarray,
    raters: np.ndarray,
    rater_valid: np.ndarray | None = None,
    empty: str = "one",
) -> np.ndarray:
    """Hungarian-matched Dice: each rater paired with a distinct sample, best total.

    Formula, with D[r, m] = Dice(Y_r, S_m) over the R valid raters and M samples:
        σ* = argmax over one-to-one σ of Σ_r D[r, σ(r)]
             (``scipy.optimize.linear_sum_assignment(D, maximize=True)``)
        Dice_match = (1 / R) Σ_r D[r, σ*(r)]

    M != R: with M >= R every rater gets its own sample and surplus samples are
    unused; this is D-Persona's convention (mean over raters; verified in
    ``dice_at_all``). With M < R only M raters can be matched; the others score
    0, so the mean stays over all R raters and never rewards predicting fewer
    segmentations than there are raters. D-Persona's code does not handle M < R
    (IndexError); this half is our choice, not a published convention.

    Empty-mask rule (``empty``): an empty sample vs an empty rater has Dice 1
    (``"one"``, default, as D-Persona's Dice) or 0 (``"zero"``). Under ``"nan"``
    such a pair counts as a perfect match for the assignment and is then left
    out of the mean (R shrinks by one; NaN if nothing is left). Missing raters
    are removed before matching; a case without valid raters gives NaN.

    Args:
        samples: (N, M, H, W) bool, M >= 1 predicted segmentations per case
            (samples, or one output per rater).
        raters: (N, R, H, W) bool.
        rater_valid: (N, R) bool or None (all valid).
        empty: empty-pair rule.

    Returns:
        (N,) float64 in [0, 1] (or NaN).

    Reference:
        H. W. Kuhn, "The Hungarian method for the assignment problem", Naval Res.
        Logist. Q. 2:83-97, 1955; Y. Wu, X. Luo, Z. Xu, X. Guo, L. Ju, Z. Ge,
        W. Liao, J. Cai, "Diversified and personalized multi-rater medical image
        segmentation", CVPR 2024 (code: ``lib/metrics_set.dice_at_all``).
    """
    fill = empty_value(empty)
    s, y, valid = check_sets(samples, raters, rater_valid)
    dsc = _pairwise(y, s, "dice", fill)  # (N, R, M): raters as rows
    out = np.full(s.shape[0], np.nan)
    for i in range(s.shape[0]):
        mat = dsc[i][valid[i]]
        if mat.shape[0] == 0:
            continue
        rows, cols = linear_sum_assignment(np.nan_to_num(mat, nan=1.0), maximize=True)
        matched = mat[rows, cols]
        n_raters = mat.shape[0] - np.count_nonzero(np.isnan(matched))
        if n_raters > 0:
            out[i] = np.nansum(matched) / n_raters
    return out


def dice_max(
    samples: np.ndarray,
    raters: np.ndarray,
    rater_valid: np.ndarray | None = None,
    empty: str = "one",
    per: str = "rater",
) -> np.ndarray:
    """Dice_max: the best Dice of each rater over the samples, averaged over raters.

    Formula, with D[r, m] = Dice(Y_r, S_m):
        per="rater" (default):  Dice_max = mean_r max_m D[r, m]
        per="sample":           Dice_max = mean_m max_r D[r, m]

    ``per="rater"`` asks "is every rater's opinion among the samples?" and is
    D-Persona's ``dice_max_reverse`` (verified; their validation uses it);
    ``per="sample"`` asks "is every sample some rater's opinion?" and is their
    ``dice_max``. Which of the two D-Persona's paper tables report was not
    verified; we default to the per-rater one.

    Empty-mask rule (``empty``): an empty sample vs an empty rater has Dice 1
    (``"one"``, default) or 0 (``"zero"``). Under ``"nan"`` such a pair is the
    best possible match; when it is the one selected, that rater (or sample) is
    left out of the mean. Missing raters are excluded; a case without valid
    raters gives NaN.

    Args:
        samples: (N, M, H, W) bool, M >= 1.
        raters: (N, R, H, W) bool.
        rater_valid: (N, R) bool or None (all valid).
        empty: empty-pair rule.
        per: ``"rater"`` or ``"sample"``, the set the mean runs over.

    Returns:
        (N,) float64 in [0, 1] (or NaN).

    Reference:
        Y. Wu et al., "Diversified and personalized multi-rater medical image
        segmentation", CVPR 2024 (code: ``lib/metrics_set.dice_at_all``).
    """
    fill = empty_value(empty)
    if per not in ("rater", "sample"):
        raise ValueError(f"per must be 'rater' or 'sample'; got {per!r}")
    s, y, valid = check_sets(samples, raters, rater_valid)
    dsc = _pairwise(y, s, "dice", fill)  # (N, R, M)
    ranked = np.where(np.isnan(dsc), _UNDEFINED_BEST, dsc)
    if per == "rater":
        best = ranked.max(axis=2)  # (N, R)
        best[~valid] = np.nan
    else:
        best = np.where(valid[:, :, None], ranked, -np.inf).max(axis=1)  # (N, M)
        best[np.isneginf(best)] = np.nan
    best[best == _UNDEFINED_BEST] = np.nan
    return nanmean(best, 1)


def per_rater_dice(
    pred: np.ndarray,
    raters: np.ndarray,
    rater_valid: np.ndarray | None = None,
    empty: str = "one",
) -> np.ndarray:
    """Dice of one prediction against each rater.

    Formula:
        D[n, r] = 2 |S_n ∩ Y_nr| / (|S_n| + |Y_nr|)

    Empty-mask rule (``empty``): both empty -> 1 (``"one"``, default, as
    :func:`labels.overlap.dice`), 0 (``"zero"``) or NaN (``"nan"``). A missing
    rater (``rater_valid`` False) gives NaN.

    Args:
        pred: (N, H, W) bool, the prediction S.
        raters: (N, R, H, W) bool.
        rater_valid: (N, R) bool or None (all valid).
        empty: empty-pair rule.

    Returns:
        (N, R) float64 in [0, 1], NaN where the rater is missing.

    Reference:
        L. R. Dice, "Measures of the amount of ecologic association between
        species", Ecology 26(3):297-302, 1945.
    """
    return paired_dice(check_pred_raters(pred, raters)[:, None], raters, rater_valid, empty)


def paired_dice(
    outputs: np.ndarray,
    raters: np.ndarray,
    rater_valid: np.ndarray | None = None,
    empty: str = "one",
) -> np.ndarray:
    """Personalised Dice: the output for rater r against rater r.

    Formula:
        D[n, r] = 2 |S_nr ∩ Y_nr| / (|S_nr| + |Y_nr|)

    A method with one output per rater slot passes them (N, R, H, W); one prediction (N, 1, H, W) is
    offered to every rater (then D is :func:`per_rater_dice`). Empty-mask rule (``empty``) as
    :func:`per_rater_dice`; a missing rater gives NaN.

    Args:
        outputs: (N, R, H, W) or (N, 1, H, W) bool.
        raters: (N, R, H, W) bool.
        rater_valid: (N, R) bool or None (all valid).
        empty: empty-pair rule.

    Returns:
        (N, R) float64 in [0, 1], NaN where the rater is missing.

    Reference:
        Y. Wu et al., "Diversified and personalized multi-rater medical image segmentation", CVPR 2024
        (their personalised table: head r against rater r).
    """
    fill = empty_value(empty)
    s, y, valid = check_sets(outputs, raters, rater_valid)
    if s.shape[1] not in (1, y.shape[1]):
        raise ValueError(f"outputs must have one mask per rater ({y.shape[1]}) or one for all; got {s.shape[1]}")
    inter = np.count_nonzero(s & y, axis=2)
    dsc = overlap(inter, np.count_nonzero(s, axis=2), np.count_nonzero(y, axis=2), "dice", fill)
    dsc = np.broadcast_to(dsc, valid.shape).astype(np.float64)
    dsc[~valid] = np.nan
    return dsc


def between_dice(masks: np.ndarray, valid: np.ndarray | None = None, empty: str = "one") -> np.ndarray:
    """How alike a stack's masks are: the mean Dice over distinct pairs of its valid slots.

    Formula, over the ordered pairs r ≠ r' of valid slots:
        B[n] = mean 2 |X_nr ∩ X_nr'| / (|X_nr| + |X_nr'|)

    Of a method's per-rater outputs it is the spread of its heads (100 % when they all say the same); of the raters'
    masks, the pool's own spread, which a perfect per-rater model's heads reproduce. Empty-mask rule (``empty``) as
    :func:`per_rater_dice`.

    Args:
        masks: (N, K, H, W) bool.
        valid: (N, K) bool or None (all valid).
        empty: empty-pair rule.

    Returns:
        (N,) float64 in [0, 1]; NaN where fewer than two slots are valid (one output has no pair).
    """
    fill = empty_value(empty)
    x = check_stack(masks, "masks", "K")
    ok = check_valid(valid, x.shape[0], x.shape[1])
    x = x.reshape(x.shape[0], x.shape[1], -1)
    dsc = _pairwise(x, x, "dice", fill)
    pairs = ok[:, :, None] & ok[:, None, :] & ~np.eye(x.shape[1], dtype=bool)
    dsc[~pairs] = np.nan
    return nanmean(dsc, (1, 2))


# --------------------------------------------------------------------------- calibration
