"""The machinery behind the morpho-style simulated raters: supersampled disk morphology and Morpho-MNIST fractures.

Holds `_HighRes` (a mask's supersampled crop with its two distance maps, giving disk dilation and
erosion at any radius), the up- and downsampling it uses, and `_wrong` (thicken, then cut fractures
across the skeleton) with its helpers; datasets/raters/morpho.py builds the five raters from them.

The morphology runs at ``SCALE`` x the input resolution (Morpho-MNIST uses scale=4).
The mask is cropped to its bounding box plus a background margin, upsampled bilinearly
(order 1, thresholded at 0.5; this round-trips every MNIST digit exactly), dilated or
eroded by thresholding Euclidean distance transforms (exact disk morphology, and the
radius - hence ``noise`` - is continuous), and brought back by block mean >= 0.5. Cuts are
painted with antialiased edges so that their area also shrinks continuously to 0 with
``noise``. Pixels outside the image count as background (erosion acts from the border; dilation is
clipped at it).
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage as ndi
from skimage.morphology import skeletonize

#: Supersampling factor of the morphology (Morpho-MNIST ``ImageMorphology(scale=4)``).
SCALE = 4
#: Cuts stay this many input pixels away from skeleton tips/forks (Morpho-MNIST prune=2).
FRACTURE_PRUNE = 2.0
#: Larger supersampled crops are skeletonised at the input resolution (speed only).
_MAX_SKELETON_SUBPIXELS = 256 * 256


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
