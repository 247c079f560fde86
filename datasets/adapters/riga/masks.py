"""RIGA's label maps and image geometry: disc and cup from a rater's marked copy, MR-Net's masks as classes, the ROI.

Holds the thresholds of the derivation, `derive_masks` (with `outline_components` and `most_convex_hole`),
`label_map` and `mrnet_labels` (class indices 0 background, 1 rim, 2 cup), the disc-centred square ROI
(`disc_roi`, `crop_square`) and the resizing to `SIZE`×`SIZE` (`resize_image`, `resize_labels`, `to_input`).

Masks from a marked copy of the raw release (`derive_masks`, docs/datasets.md#riga-the-raw-release):
`max over RGB |marked - prime| > 0` (lossless TIFF) or `> 40` (either file JPEG, whose
compression noise is suppressed; also used when a TIFF copy differs in more than 5 % of its
pixels, i.e. was re-encoded) → 3×3 closing (bridges 1-px gaps in the drawn curve) → the
largest connected outline, holes filled, is the disc; the second largest, filled and lying inside
the disc, is the cup. Where the two contours touch (one outline component) the cup is the most
convex hole inside the disc outline. A contour that stays open is retried with 2 and 3 closing
iterations.
Then a square, disc-centred ROI is cut: centre = centre of the bounding box of the union of the
valid raters' discs, side = `ROI_SCALE` × the larger box side (pixels outside the photo are
black / background), resized to `SIZE`×`SIZE`. Centring on the raters' discs uses the
annotations, as every disc/cup benchmark crop does (MR-Net's `DiscRegion` crops too).

JPEG limit: a 1-px line in a colour of about the same luminance as the fundus under it (green on
orange) is smeared by JPEG's 2×2 chroma subsampling below the threshold and cannot be recovered
(the rater is then marked invalid, with a warning); blue, black or 2-px lines are recovered with
Dice ≥ 0.93 on the fixtures. The real BinRushed ink colour has not been checked.
"""

from __future__ import annotations

import numpy as np
from PIL import Image
from scipy import ndimage as ndi

SIZE = 256  # MR-Net's input size; one size for every image of the dataset
ROI_SCALE = 2.0  # ROI side / larger side of the raters' union disc box: the disc fills the central half
LOSSLESS_THRESHOLD = 0  # any change in a TIFF copy is ink
LOSSY_THRESHOLD = 40  # JPEG: compression noise near the ink stays below this (0-255 scale, max over RGB)
MAX_INK_FRACTION = 0.05  # drawn contours cover far less of a photo than this
MIN_CUP_FRACTION = 0.01  # a cup candidate smaller than this share of the disc is noise, not a contour


# ---------------------------------------------------------------- masks from marked copies


def outline_components(outline: np.ndarray, closing: int) -> tuple[np.ndarray, np.ndarray]:
    """Close the drawn curve, then label its 8-connected parts. Returns labels and sizes, largest first."""
    closed = ndi.binary_closing(outline, structure=np.ones((3, 3), bool), iterations=closing, border_value=0)
    labels, n = ndi.label(closed, structure=np.ones((3, 3), bool))
    sizes = np.bincount(labels.ravel(), minlength=n + 1)[1:]
    return labels, np.argsort(-sizes, kind="stable") + 1


def most_convex_hole(ring: np.ndarray, disc: np.ndarray) -> np.ndarray | None:
    """Touching contours: the holes inside the disc outline are the rim annulus (C-shaped) and the cup.

    The cup is the hole closest to convex (area / convex-hull area); it is grown back over the drawn
    line that bounds it (the ring width) so that it includes its own contour, like a filled outline.
    """
    from skimage.measure import regionprops  # scikit-image is a dependency; imported here because it is slow

    holes, n = ndi.label(disc & ~ring)
    props = [p for p in regionprops(holes) if p.area >= MIN_CUP_FRACTION * disc.sum()]
    if len(props) < 2:
        return None
    best = max(props, key=lambda p: p.solidity)
    width = max(1, int(round(2 * ndi.distance_transform_edt(ring).max())))
    cup = ndi.binary_dilation(holes == best.label, iterations=width, mask=ring | (holes == best.label))
    return ndi.binary_fill_holes(cup)


def derive_masks(prime: np.ndarray, marked: np.ndarray, lossy: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """Disc and cup of one rater from a clean image and the rater's marked copy.

    Args:
        prime, marked: uint8 (H, W, 3) (or (H, W)), the same shape.
        lossy: True where either file is JPEG (a higher difference threshold).
    Returns:
        (disc, cup) bool (H, W) with cup ⊂ disc, or None when no closed disc and cup contour is found.
    """
    diff = np.maximum(marked, prime) - np.minimum(marked, prime)  # |marked - prime| without overflow
    if diff.ndim == 3:
        diff = np.maximum(np.maximum(diff[..., 0], diff[..., 1]), diff[..., 2])
    ink = diff > (LOSSY_THRESHOLD if lossy else LOSSLESS_THRESHOLD)
    if not lossy and ink.mean() > MAX_INK_FRACTION:
        ink = diff > LOSSY_THRESHOLD  # a "lossless" copy changed everywhere (re-encoded): treat it as lossy
    rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
    if len(rows) == 0:
        return None
    # Work inside the bounding box of the ink (plus a margin for the closing): the photos are large.
    pad = 4
    r0, r1 = max(rows[0] - pad, 0), min(rows[-1] + pad + 1, ink.shape[0])
    c0, c1 = max(cols[0] - pad, 0), min(cols[-1] + pad + 1, ink.shape[1])
    box = ink[r0:r1, c0:c1]
    for closing in (1, 2, 3):
        labels, order = outline_components(box, closing)
        if len(order) == 0:
            return None
        ring = labels == order[0]
        disc = ndi.binary_fill_holes(ring)
        if disc.sum() < 1.5 * ring.sum():
            continue  # the disc contour is still open: close harder
        cup = None
        if len(order) >= 2:
            filled = ndi.binary_fill_holes(labels == order[1])
            inside = (filled & disc).sum()
            if inside >= 0.9 * filled.sum() and filled.sum() >= MIN_CUP_FRACTION * disc.sum():
                cup = filled & disc
        if cup is None:
            cup = most_convex_hole(ring, disc)
        if cup is None or cup.sum() > 0.98 * disc.sum():
            continue
        full_disc = np.zeros(ink.shape, bool)
        full_cup = np.zeros(ink.shape, bool)
        full_disc[r0:r1, c0:c1] = disc
        full_cup[r0:r1, c0:c1] = cup
        return full_disc, full_cup
    return None


def label_map(disc: np.ndarray, cup: np.ndarray) -> np.ndarray:
    """bool disc, cup (H, W) → uint8 class indices: 0 background, 1 rim (disc minus cup), 2 cup (inside the disc)."""
    out = disc.astype(np.uint8)
    out[cup & disc] = 2
    return out


def mrnet_labels(mask: np.ndarray, lossy: bool) -> np.ndarray:
    """An MR-Net mask (H, W) uint8 → class indices: 0 / ~128 rim / 255 cup; {0, 1, 2} masks are class indices already."""
    if mask.max() <= 2:
        return mask.astype(np.uint8)
    disc = mask > (64 if lossy else 0)
    cup = mask > 191 if lossy else mask == 255
    return label_map(disc, cup)


# ---------------------------------------------------------------- ROI and resizing


def disc_roi(discs: np.ndarray) -> tuple[int, int, int]:
    """Square ROI around the union of the raters' discs (R, H, W) bool → (top, left, side), may leave the image."""
    union = discs.any(axis=0)
    rows, cols = np.nonzero(union)
    height, width = rows.max() - rows.min() + 1, cols.max() - cols.min() + 1
    side = int(np.ceil(ROI_SCALE * max(height, width)))
    top = int(np.floor((rows.min() + rows.max() + 1) / 2 - side / 2))
    left = int(np.floor((cols.min() + cols.max() + 1) / 2 - side / 2))
    return top, left, side


def crop_square(array: np.ndarray, top: int, left: int, side: int) -> np.ndarray:
    """array (H, W[, C]) → (side, side[, C]); zeros (black, background) where the square leaves the array."""
    out = np.zeros((side, side, *array.shape[2:]), dtype=array.dtype)
    r0, c0 = max(top, 0), max(left, 0)
    r1, c1 = min(top + side, array.shape[0]), min(left + side, array.shape[1])
    if r1 > r0 and c1 > c0:
        out[r0 - top : r1 - top, c0 - left : c1 - left] = array[r0:r1, c0:c1]
    return out


def resize_image(rgb: np.ndarray) -> np.ndarray:
    """uint8 (H, W, 3) → uint8 (SIZE, SIZE, 3), bilinear with Pillow's anti-aliasing when shrinking."""
    return np.asarray(Image.fromarray(rgb).resize((SIZE, SIZE), Image.Resampling.BILINEAR))


def resize_labels(labels: np.ndarray) -> np.ndarray:
    """uint8 class indices (H, W) → (SIZE, SIZE), nearest neighbour (no invented labels at edges)."""
    return np.asarray(Image.fromarray(labels).resize((SIZE, SIZE), Image.Resampling.NEAREST))


def to_input(rgb: np.ndarray) -> np.ndarray:
    """uint8 (H, W, 3) → float32 (3, H, W) in [0, 1]: a fixed scale keeps colour comparable across images."""
    return (rgb.astype(np.float32) / np.float32(255)).transpose(2, 0, 1)
