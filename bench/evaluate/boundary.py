"""Boundary metrics of one mask against one reference: HD95, ASSD and normalised surface Dice (NSD), per 2-D image.

Every function takes a batch of 2-D masks, shape (N, H, W) bool, and the pixel spacing (row, column) in
physical units, and returns one value per image, shape (N,); distances are Euclidean in spacing units.

Surface: a pixel is on the surface of a mask when it is foreground and at least one of its four edge neighbours
is background or lies outside the image, i.e. ``mask ^ binary_erosion(mask, cross)`` with the connectivity-1
(4-neighbour) structure and SciPy's default ``border_value=0``: exactly medpy.metric.binary's
``__surface_distances`` with ``connectivity=1``, so ``hd95`` and ``assd`` agree with ``medpy.metric.binary.hd95``
and ``.assd`` (medpy 0.5, ``voxelspacing=spacing``) wherever medpy is defined (tests/test_boundary_metrics.py checks
it to 1e-6, one-pixel masks and masks touching the image border included; no disagreement was found). A non-empty
mask always has a non-empty surface. The distance of a surface pixel to the other surface, d(x, S), comes from
``scipy.ndimage.distance_transform_edt(~S, sampling=spacing)``, on the bounding box of both surfaces (exact: every
feature pixel and every pixel read lies inside it, as for bAHD in bench/evaluate/pixel.py).

Empty-mask rules (medpy raises RuntimeError on an empty mask; these are the project's). D is the image diagonal in
spacing units, sqrt((H·dy)² + (W·dx)²), strictly larger than any distance between two pixels of the image:

- both empty: hd95 = 0, assd = 0, nsd = 1 (perfect agreement, as DSC = 1 and bAHD = 0);
- empty prediction, non-empty reference: d(g, ∅) := D for every reference surface pixel, as bAHD does, so
  hd95 = assd = D: the worst value, so that a method that predicts nothing is penalised, not dropped; nsd = 0;
- non-empty prediction, empty reference: hd95 = assd = NaN (d(s, ∅) is undefined: left out of means, as bAHD's
  NaN), nsd = 0 (no surface pixel is within tolerance: NSD is an overlap score, and DSC's one-empty rule is 0).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import ndimage

from bench.evaluate.pixel import _image_diagonal
from labels.checks import check_mask_pair, check_spacing

__all__ = ["NSD_TOLERANCE", "assd", "hd95", "nsd", "surface_scores", "surfaces"]

# NSD's tolerance τ in spacing units: pixels on the datasets with unit spacing (MNIST, RIGA, Choledoch), mm on the MS and
# LIDC crops. Nikolov et al. set τ per organ from inter-observer variation; this benchmark has no such per-structure
# figure, so τ = 1 forgives a boundary placed one pixel (one spacing step along a row or column) off, the rasterisation
# uncertainty of a drawn contour, and counts anything farther (a diagonal step, √2, included) as a miss.
NSD_TOLERANCE = 1.0
# A distance equal to τ counts as within it (d ≤ τ) even where rounding puts it a hair above: with spacing 0.1, three
# pixels measure 0.30000000000000004, not 0.3. Relative, so that it is the same at any unit.
_TIE = 1e-9

# The connectivity-1 (4-neighbour) cross in the middle of a 3×3×3 structure: erodes every image of an (N, H, W) stack
# at once, without reaching across images (medpy: generate_binary_structure(2, 1)).
_CROSS = np.zeros((3, 3, 3), dtype=bool)
_CROSS[1] = ndimage.generate_binary_structure(2, 1)


def surfaces(mask: np.ndarray) -> np.ndarray:
    """(N, H, W) bool: the foreground pixels with a background 4-neighbour or on the image border (see module doc)."""
    mask = np.asarray(mask, dtype=bool)
    return mask & ~ndimage.binary_erosion(mask, structure=_CROSS, border_value=0)


def _surface_distances(a: np.ndarray, b: np.ndarray, spacing: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """(d(a_i, B) for each surface pixel of A, d(b_j, A) for each of B) of two non-empty (H, W) surfaces."""
    union = a | b
    rows, cols = np.flatnonzero(union.any(axis=1)), np.flatnonzero(union.any(axis=0))
    box = np.s_[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]  # exact: see the module doc
    a, b = a[box], b[box]
    to_b = ndimage.distance_transform_edt(~b, sampling=spacing)
    to_a = ndimage.distance_transform_edt(~a, sampling=spacing)
    return to_b[a], to_a[b]


def surface_scores(
    pred: np.ndarray,
    gt: np.ndarray,
    spacing: Sequence[float] = (1.0, 1.0),
    tolerance: float = NSD_TOLERANCE,
) -> dict[str, np.ndarray]:
    """HD95, ASSD and NSD at `tolerance` per image, from one pair of surface-distance sets each.

    With S_p, S_g the surfaces of the prediction and the reference, d_pg = {d(s, S_g): s ∈ S_p} and
    d_gp = {d(g, S_p): g ∈ S_g}:

    - ``hd95`` = the 95th percentile (NumPy's default linear interpolation) of d_pg ∪ d_gp, both sets pooled, as
      medpy.metric.binary.hd95;
    - ``assd`` = (Σ d_pg + Σ d_gp) / (|S_p| + |S_g|), the mean of the pooled distances, as medpy 0.5's
      medpy.metric.binary.assd and Heimann et al. (IEEE TMI 28:1251, 2009). medpy 0.4 and earlier averaged the two
      directed means instead, (mean d_pg + mean d_gp) / 2, which weighs the shorter surface's pixels more; the two
      agree when |S_p| = |S_g|;
    - ``nsd`` = (|{s ∈ S_p: d(s, S_g) ≤ τ}| + |{g ∈ S_g: d(g, S_p) ≤ τ}|) / (|S_p| + |S_g|), the surface Dice at
      tolerance τ (S. Nikolov et al., "Clinically applicable segmentation of head and neck anatomy for
      radiotherapy", J. Med. Internet Res. 23:e26151, 2021), counted over surface pixels, each weighing 1, not over
      surfel areas (lengths of boundary elements) as DeepMind's surface-distance package does; d ≤ τ up to a relative
      1e-9 (`_TIE`), so that a distance equal to τ is within it whatever the rounding.

    Empty-mask rules: those of the module doc (both empty 0, 0, 1; empty prediction D, D, 0; empty reference NaN,
    NaN, 0).

    Args:
        pred: (N, H, W) bool, predicted mask.
        gt: (N, H, W) bool, reference mask.
        spacing: pixel size (dy, dx) along (H, W).
        tolerance: NSD's τ, in spacing units (default `NSD_TOLERANCE`).

    Returns:
        {"hd95", "assd", "nsd"}: (N,) float64 each.
    """
    pred, gt = check_mask_pair(pred, gt)
    spacing = check_spacing(spacing)
    n = pred.shape[0]
    diagonal = _image_diagonal(gt.shape[1:], spacing)
    out = {"hd95": np.zeros(n), "assd": np.zeros(n), "nsd": np.ones(n)}  # both empty
    surf_pred, surf_gt = surfaces(pred), surfaces(gt)
    has_pred, has_gt = surf_pred.any(axis=(1, 2)), surf_gt.any(axis=(1, 2))
    for i in range(n):
        if has_pred[i] and has_gt[i]:
            d_pg, d_gp = _surface_distances(surf_pred[i], surf_gt[i], spacing)
            pooled = np.concatenate((d_pg, d_gp))
            out["hd95"][i] = np.percentile(pooled, 95)
            out["assd"][i] = pooled.mean()
            out["nsd"][i] = np.count_nonzero(pooled <= tolerance * (1 + _TIE)) / pooled.size
        elif has_gt[i]:  # empty prediction: d(g, ∅) := D
            out["hd95"][i] = out["assd"][i] = diagonal
            out["nsd"][i] = 0.0
        elif has_pred[i]:  # empty reference: d(s, ∅) undefined
            out["hd95"][i] = out["assd"][i] = np.nan
            out["nsd"][i] = 0.0
    return out


def hd95(pred: np.ndarray, gt: np.ndarray, spacing: Sequence[float] = (1.0, 1.0)) -> np.ndarray:
    """95th-percentile symmetric Hausdorff distance per image, (N,): see :func:`surface_scores`."""
    return surface_scores(pred, gt, spacing)["hd95"]


def assd(pred: np.ndarray, gt: np.ndarray, spacing: Sequence[float] = (1.0, 1.0)) -> np.ndarray:
    """Average symmetric surface distance per image, (N,): see :func:`surface_scores`."""
    return surface_scores(pred, gt, spacing)["assd"]


def nsd(pred: np.ndarray, gt: np.ndarray, spacing: Sequence[float] = (1.0, 1.0), tolerance: float = NSD_TOLERANCE) -> np.ndarray:
    """Normalised surface Dice at `tolerance` (spacing units) per image, (N,) in [0, 1]: see :func:`surface_scores`."""
    return surface_scores(pred, gt, spacing, tolerance)["nsd"]
