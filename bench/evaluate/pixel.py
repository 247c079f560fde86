"""Pixel metrics of one mask against one reference, as pure NumPy/SciPy functions (torchmetrics-functional style).

Every function takes a batch of 2-D masks, shape (N, H, W), and returns one value
per image, shape (N,). Each docstring states the formula, the empty-mask rule and
the citation (see also docs/methods.md#metrics and docs/methods.md#soft-dsc-and-soft-iou, docs/methods.md#dsc-conventions).

Conventions shared by all functions:

- ``pred`` is the predicted mask S, ``gt`` the reference mask G; both bool.
- ``spacing`` is the pixel size along (H, W), i.e. (row, column), in physical
  units; distances are Euclidean in those units.
- Raw counts (tp, fp, fn, |G|, |S|) are returned by :func:`score` so that a
  different empty-mask convention is a re-computation, not a re-training.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import ndimage

from labels.checks import check_mask_pair, check_spacing
from labels.overlap import dice, overlap  # the one strict Dice, listed here with the other pixel metrics

__all__ = [
    "bahd",
    "confusion_counts",
    "dice",
    "directed_distance_sums",
    "score",
]

# --------------------------------------------------------------------------- counts


def confusion_counts(pred: np.ndarray, gt: np.ndarray) -> dict[str, np.ndarray]:
    """Per-image confusion counts of two binary masks.

    Args:
        pred: (N, H, W) bool, predicted mask S.
        gt: (N, H, W) bool, reference mask G.

    Returns:
        dict with int64 arrays of shape (N,):
        ``tp`` = |S ∩ G|, ``fp`` = |S \\ G|, ``fn`` = |G \\ S|,
        ``n_gt`` = |G|, ``n_pred`` = |S|.

    Empty masks need no rule here: all counts are simply 0.
    """
    pred, gt = check_mask_pair(pred, gt)
    axes = (1, 2)
    return {
        "tp": np.count_nonzero(pred & gt, axis=axes).astype(np.int64),
        "fp": np.count_nonzero(pred & ~gt, axis=axes).astype(np.int64),
        "fn": np.count_nonzero(~pred & gt, axis=axes).astype(np.int64),
        "n_gt": np.count_nonzero(gt, axis=axes).astype(np.int64),
        "n_pred": np.count_nonzero(pred, axis=axes).astype(np.int64),
    }


# --------------------------------------------------------------------------- bAHD


def _image_diagonal(shape: tuple[int, int], spacing: tuple[float, float]) -> float:
    # Physical extent of the image, sqrt((H*dy)^2 + (W*dx)^2): strictly larger than
    # any distance between two pixel centres, so "nothing predicted" is penalised
    # more than the worst placed single prediction in the GtoS term.
    return float(np.hypot(shape[0] * spacing[0], shape[1] * spacing[1]))


def _directed_sums_2d(
    pred: np.ndarray,
    gt: np.ndarray,
    spacing: tuple[float, float],
    crop: bool = True,
) -> tuple[float, float]:
    """GtoS = Σ_{g∈G} d(g, S) and StoG = Σ_{s∈S} d(s, G) for one (H, W) image.

    Both S and G must be non-empty. With ``crop=False`` the EDTs run on the full
    image (kept for the test that shows cropping is exact).
    """
    if crop:
        # Cropping to the bounding box of S ∪ G is exact. distance_transform_edt(~S)
        # gives, at each pixel, the distance to the nearest zero of ~S, i.e. to the
        # nearest pixel of S. Every pixel of S (the feature points) lies inside the
        # box, so the nearest one is found there as well; every pixel we read the
        # EDT at (the pixels of G) lies inside the box too. Pixels outside the box
        # are neither features nor queries, so dropping them changes no value we
        # sum. The same holds with the roles of S and G swapped.
        union = pred | gt
        rows = np.flatnonzero(union.any(axis=1))
        cols = np.flatnonzero(union.any(axis=0))
        box = np.s_[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]
        pred, gt = pred[box], gt[box]
    dist_to_pred = ndimage.distance_transform_edt(~pred, sampling=spacing)
    dist_to_gt = ndimage.distance_transform_edt(~gt, sampling=spacing)
    gt_to_pred = float(dist_to_pred[gt].sum())
    pred_to_gt = float(dist_to_gt[pred].sum())
    return gt_to_pred, pred_to_gt


def directed_distance_sums(
    pred: np.ndarray,
    gt: np.ndarray,
    spacing: Sequence[float] = (1.0, 1.0),
) -> tuple[np.ndarray, np.ndarray]:
    """Directed sums of point-to-set distances over all foreground pixels.

    Formula (d = Euclidean distance in spacing units, d(x, A) = min_{a∈A} d(x, a)):
        GtoS = Σ_{g∈G} d(g, S),    StoG = Σ_{s∈S} d(s, G)

    computed exactly as GtoS = Σ edt(~S)[G] and StoG = Σ edt(~G)[S] with
    ``scipy.ndimage.distance_transform_edt(..., sampling=spacing)`` on the bounding
    box of S ∪ G.

    Empty-mask rule:
        A sum over an empty set is 0. A distance to an empty set is undefined, so a
        sum whose source is non-empty and whose target is empty is NaN:
        S empty -> GtoS = NaN if G non-empty (else 0), StoG = 0;
        G empty -> StoG = NaN if S non-empty (else 0), GtoS = 0.

    Args:
        pred: (N, H, W) bool, predicted mask S.
        gt: (N, H, W) bool, reference mask G.
        spacing: pixel size along (H, W).

    Returns:
        (gt_to_pred, pred_to_gt): two (N,) float64 arrays.

    Reference:
        O. U. Aydin et al., "On the usage of average Hausdorff distance for
        segmentation performance assessment: hidden error when used for ranking",
        Eur. Radiol. Exp. 5:4, 2021.
    """
    pred, gt = check_mask_pair(pred, gt)
    spacing = check_spacing(spacing)
    n = pred.shape[0]
    gt_to_pred = np.zeros(n, dtype=np.float64)
    pred_to_gt = np.zeros(n, dtype=np.float64)
    for i in range(n):
        has_pred = bool(pred[i].any())
        has_gt = bool(gt[i].any())
        if has_pred and has_gt:
            gt_to_pred[i], pred_to_gt[i] = _directed_sums_2d(pred[i], gt[i], spacing)
        elif has_gt:
            gt_to_pred[i] = np.nan
        elif has_pred:
            pred_to_gt[i] = np.nan
    return gt_to_pred, pred_to_gt


def _bahd_from_sums(
    gt_to_pred: np.ndarray,
    pred_to_gt: np.ndarray,
    n_pred: np.ndarray,
    n_gt: np.ndarray,
    diagonal: float,
) -> np.ndarray:
    out = np.zeros(gt_to_pred.shape, dtype=np.float64)  # both empty -> 0.0
    both = (n_gt > 0) & (n_pred > 0)
    out[both] = (gt_to_pred[both] + pred_to_gt[both]) / n_gt[both] / 2.0
    out[(n_gt == 0) & (n_pred > 0)] = np.nan
    # S empty, G non-empty: d(g, ∅) := diagonal for every g, so GtoS/|G| = diagonal
    # and StoG = 0.
    out[(n_gt > 0) & (n_pred == 0)] = diagonal / 2.0
    return out


def bahd(
    pred: np.ndarray,
    gt: np.ndarray,
    spacing: Sequence[float] = (1.0, 1.0),
) -> np.ndarray:
    """Balanced average Hausdorff distance (bAHD) per image.

    Formula (d = Euclidean distance in spacing units, d(x, A) = min_{a∈A} d(x, a)):
        bAHD(S, G) = ( Σ_{g∈G} d(g, S) / |G|  +  Σ_{s∈S} d(s, G) / |G| ) / 2

    Both directed sums are divided by |G| (the "balanced" part: false positives
    are not diluted by a large |S|), and the sums run over ALL foreground pixels,
    not only surface pixels; pixels in S ∩ G contribute 0. The sums are exact,
    from two Euclidean distance transforms on the bounding box of S ∪ G (see
    :func:`directed_distance_sums`). Units: those of ``spacing`` (pixels for the
    default (1, 1)).

    Empty-mask rule:
        - S and G both empty -> 0.0 (perfect agreement);
        - G empty, S non-empty -> NaN: undefined, the formula divides by |G| = 0
          and d(s, ∅) is undefined. :func:`score` stores the raw counts and
          directed sums, so another convention is a re-computation;
        - S empty, G non-empty -> d(g, ∅) := D, the image diagonal in spacing
          units, D = sqrt((H·dy)² + (W·dx)²); hence bAHD = D / 2.

    Args:
        pred: (N, H, W) bool, predicted mask S.
        gt: (N, H, W) bool, reference mask G.
        spacing: pixel size (dy, dx) along (H, W).

    Returns:
        (N,) float64, >= 0 or NaN.

    Reference:
        O. U. Aydin, A. A. Taha, A. Hilbert, A. A. Khalil, I. Galinovic,
        J. B. Fiebach, D. Frey, V. I. Madai, "On the usage of average Hausdorff
        distance for segmentation performance assessment: hidden error when used
        for ranking", Eur. Radiol. Exp. 5:4, 2021 (bAVD in EvaluateSegmentation).
    """
    pred, gt = check_mask_pair(pred, gt)
    spacing = check_spacing(spacing)
    gt_to_pred, pred_to_gt = directed_distance_sums(pred, gt, spacing)
    n_gt = np.count_nonzero(gt, axis=(1, 2))
    n_pred = np.count_nonzero(pred, axis=(1, 2))
    diagonal = _image_diagonal(gt.shape[1:], spacing)
    return _bahd_from_sums(gt_to_pred, pred_to_gt, n_pred, n_gt, diagonal)


# --------------------------------------------------------------------------- all at once


def score(
    pred: np.ndarray,
    gt: np.ndarray,
    spacing: Sequence[float] = (1.0, 1.0),
) -> dict[str, np.ndarray]:
    """All hard-mask metrics and raw counts per image, for the results store.

    Args:
        pred: (N, H, W) bool, predicted mask S.
        gt: (N, H, W) bool, reference mask G.
        spacing: pixel size (dy, dx) along (H, W).

    Returns:
        dict of (N,) arrays:
        ``dice`` (float64, see :func:`dice`), ``bahd`` (float64, see :func:`bahd`),
        ``tp``, ``fp``, ``fn``, ``n_gt``, ``n_pred`` (int64, see
        :func:`confusion_counts`), and ``gt_to_pred_sum``, ``pred_to_gt_sum``
        (float64, the directed distance sums of :func:`directed_distance_sums`,
        NaN where the target set is empty) so that another Dice or bAHD empty-mask
        convention, or the unbalanced AHD, is a re-computation.

    Empty-mask rules: those of :func:`dice` and :func:`bahd`.
    """
    pred, gt = check_mask_pair(pred, gt)
    spacing = check_spacing(spacing)
    counts = confusion_counts(pred, gt)
    gt_to_pred, pred_to_gt = directed_distance_sums(pred, gt, spacing)
    diagonal = _image_diagonal(gt.shape[1:], spacing)
    return {
        "dice": overlap(counts["tp"], counts["n_pred"], counts["n_gt"]),
        "bahd": _bahd_from_sums(gt_to_pred, pred_to_gt, counts["n_pred"], counts["n_gt"], diagonal),
        **counts,
        "gt_to_pred_sum": gt_to_pred,
        "pred_to_gt_sum": pred_to_gt,
    }
