"""CM-UNet's MNIST simulation rule for rule: the ``cm`` style (its release) and the ``lfnet`` style (the LF-Net paper's pool).

Both styles start from a digit's grey image ``raw`` (0-255) and its ground truth ``gt`` (raw >=
127.5) and produce five raters in ``RATER_NAMES`` order: good, over, under, wrong, blank. The
rules were identified on the 100 MNIST examples that CM-UNet's authors released (Zhang et al.,
NeurIPS 2020; the cm-folder layout, ``{train,validate,test}/{GT,Gaussian,Over,Under,Wrong}``,
whose GT file holds the grey digit): docs/datasets.md#cm-unets-released-mnist-examples lists
how each rule was found and how many examples it reproduces exactly.

The FSL edge. CM-UNet made over and wrong with ``fslmaths x -edge e; fslmaths x -add e -bin``.
``fsl_edge`` (datasets/raters/fsl.py) is that edge as a set: a pixel is an edge where its two
vertical or its two horizontal neighbours differ (the central difference is non-zero), and never
on the image border, where FSL computes no gradient (border rule "skip", ``BORDER``). ``edge_pass``
adds the edge to a mask. On a grey image
the edge also appears inside the digit's support, wherever the grey values of two neighbours
differ, so one pass on the grey image grows the support almost as a cross dilation does.

Block deletion. CM-UNet's ``artificial_wrong_mask.py`` numbers a mask's foreground voxels in C
order (``np.nonzero``) and sets every second block of 100 to 0, the first block included:
ranks [0, 100), [200, 300), ... go, [100, 200), [300, 400), ... stay (``delete_blocks``, datasets/raters/fsl.py). The
MNIST masks were 28 x 28 x 3 volumes of three equal slices (the release keeps slice 1), so C
order runs over the three slices of a pixel before moving to the next pixel: pixel k of the
digit's support (raster order) is voxels 3k, 3k + 1, 3k + 2.

* good = GT; blank = all zeros (the release keeps one stray pixel at (0, 0) so that no mask is
  empty; we do not).
* under (both styles) = one erosion of GT with the 4-connected cross, outside = background.
  This reproduces 61 of the 100 released Under masks exactly; the rest differ by a few pixels.
* over (both styles) = an FSL edge pass on the grey digit (support raw > 0 plus ``fsl_edge(raw)``),
  then an FSL edge pass on that mask: 100 of 100 released Over masks exactly.
* wrong, ``cm`` = ``delete_blocks`` on the 3-slice stack of the support raw > 0, then two FSL
  edge passes in 3-D (the middle slice gains an edge where its two neighbouring slices differ;
  the outer slices are the volume's border and gain none), slice 1 kept: 95 of 100 released
  Wrong masks exactly (the other five took four passes instead of two).
* wrong, ``lfnet`` = ``delete_blocks`` on the 2-D support raw > 0, no thickening: the wrong of the
  LF-Net paper's Table I. There, the pool's Average is 47.10, majority-vote training
  under-segments, STAPLE-UNet (90.49) is far ahead of MV-UNet (57.62) and the paper's fused-label
  figure shows STAPLE near GT and the majority vote under-estimated; with any thickened wrong
  (the release, ``cm``, ``morpho``) the majority vote is close to GT and STAPLE follows
  GT ∪ wrong instead. Reading the same script without the three-slice stack and without the
  thickening gives this rule (docs/datasets.md#the-lfnet-rater-style). A digit whose support has
  at most 100 pixels gets an empty wrong; such pools are sparse and run with a warning
  (datasets/raters/pool.py).

The noise knob ``strength`` (s >= 0; 1 = the rules above, 0 = every non-blank rater equals GT)
moves each rater along a nested chain of masks; a fractional level k + f takes from step k + 1
the pixels whose seeded uniform draw is below f:

* over: level 3 s of GT ⊂ GT ∪ support ⊂ grey pass ⊂ edge pass ⊂ edge pass ⊂ ... (both styles);
* under: level s of GT ⊃ erosion ⊃ erosion ⊃ ... (both styles);
* wrong, ``cm``: the support level min(s, 1) of that chain, minus the voxels that ``delete_blocks``
  removes from the full support whose draw is below min(s, 1), then 2 s FSL edge passes in 3-D;
* wrong, ``lfnet``: the support level min(s, 1), minus the pixels that ``delete_blocks`` removes
  from the full support whose draw is below min(s, 1); for 1 < s <= 2 also the pixels of the
  kept blocks whose draw is below s - 1, so wrong is empty from s = 2 on.

Block membership is always that of the full support, so a pixel's fate does not move with s.
Over and under are nested chains; wrong is not (it gains support pixels and loses deleted ones as
s grows), but its Dice with GT, and the pool's Average, fall monotonically enough in s for
bisection (datasets/raters/strength.py). Wrong's start and over share their growth draws, so at any s the
support pixels wrong gains are among those over gains. Random draws: image i draws from
``np.random.default_rng([seed, keys[i], 1])``, in a fixed order that does not depend on s; at
s = 1 every rule is deterministic.
"""

from __future__ import annotations

import numpy as np

from datasets.raters import RATER_NAMES, image_keys
from datasets.raters.fsl import delete_blocks, edge_pass, erode_cross, fsl_edge, support_ranks

__all__ = [
    "BORDER",
    "OVER_LEVELS",
    "WRONG_PASSES",
    "over_chain",
    "shrink_level",
    "simulate_raters_cm",
    "simulate_raters_lfnet",
    "split_level",
]

#: FSL's own border rule: no edge on the border of the image (or volume); datasets/raters/fsl.py.
BORDER = "skip"
#: The spatial axes of the 3-slice MNIST volumes (N, H, W, Z) that cm's wrong is thickened in.
VOLUME = (-3, -2, -1)
#: Levels of the over chain at strength 1: GT -> support -> grey pass -> edge pass.
OVER_LEVELS = 3
#: FSL edge passes that thicken cm's wrong at strength 1.
WRONG_PASSES = 2
#: Slices of the volume the release was simulated in; the kept slice.
SLICES, KEPT_SLICE = 3, 1
#: The third entropy word of the raters' random stream (see `_draws`).
RATER_STREAM = 1


def simulate_raters_cm(
    gt: np.ndarray, raw: np.ndarray | None = None, *, seed: int, strength: float = 1.0, keys: np.ndarray | None = None
) -> np.ndarray:
    """The five ``cm``-style raters (CM-UNet's release) of a batch of digits.

    gt: (N, H, W), any non-zero value is foreground (MNIST: raw >= 127.5 of 255).
    raw: (N, H, W) the grey digit (0-255 or [0, 1]); its support raw > 0 and its grey edges feed
      over and wrong. None uses gt as the grey image (masks without a grey image).
    seed, keys: image i draws from ``np.random.default_rng([seed, keys[i]])``; keys default to arange(N).
    strength: >= 0; 1 = the release's rules, 0 = every non-blank rater equals gt.
    Returns (N, 5, H, W) uint8 in {0, 1}.
    """
    return _simulate(gt, raw, seed, strength, keys, _wrong_cm)


def simulate_raters_lfnet(
    gt: np.ndarray, raw: np.ndarray | None = None, *, seed: int, strength: float = 1.0, keys: np.ndarray | None = None
) -> np.ndarray:
    """The five ``lfnet``-style raters (the LF-Net paper's pool): as ``simulate_raters_cm`` but wrong is the 2-D block-deleted support."""
    return _simulate(gt, raw, seed, strength, keys, _wrong_lfnet)


def _simulate(gt, raw, seed, strength, keys, wrong_rule) -> np.ndarray:
    gt = np.asarray(gt)
    if gt.ndim != 3:
        raise ValueError(f"gt must be (N, H, W), got shape {gt.shape}")
    grey = gt.astype(np.int16) if raw is None else np.asarray(raw)
    if grey.shape != gt.shape:
        raise ValueError(f"raw must have the shape of gt {gt.shape}, got {grey.shape}")
    strength = float(strength)
    if not np.isfinite(strength) or strength < 0:
        raise ValueError(f"strength must be finite and >= 0, got {strength}")
    gt = gt > 0
    support = gt | (grey > 0)
    keys = image_keys(keys, len(gt))
    u_grow, u_shrink, u_delete = _draws(keys, int(seed), gt.shape[1:])
    out = np.zeros((len(gt), len(RATER_NAMES)) + gt.shape[1:], dtype=np.uint8)
    out[:, 0] = gt  # good; blank (index 4) stays zero
    out[:, 1] = over_chain(gt, support, grey, OVER_LEVELS * strength, u_grow)
    out[:, 2] = shrink_level(gt, strength, u_shrink)
    out[:, 3] = wrong_rule(gt, support, grey, strength, u_grow, u_delete)
    return out


def _draws(keys: np.ndarray, seed: int, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-image uniform [0, 1) fields (n, H, W) float32, drawn in a fixed order: growth, erosion, deletion.

    The stream is `default_rng([seed, key, RATER_STREAM])`, not the `[seed, key]` stream of the input noise
    (datasets/adapters/mnist.py), so the raters' draws and the image's noise are independent.
    """
    u = np.empty((len(keys), 3) + tuple(shape), dtype=np.float32)
    for i, key in enumerate(keys):
        u[i] = np.random.default_rng([seed, int(key), RATER_STREAM]).random((3,) + tuple(shape), dtype=np.float32)
    return u[:, 0], u[:, 1], u[:, 2]


# ---------------------------------------------------------------------------------------
# The rules
# ---------------------------------------------------------------------------------------


def split_level(level: float) -> tuple[int, float]:
    """Level -> (whole steps, fraction of the next step)."""
    k = int(np.floor(level))
    return k, float(level - k)


def over_chain(gt: np.ndarray, support: np.ndarray, grey: np.ndarray, level: float, u: np.ndarray) -> np.ndarray:
    """Level ``level`` >= 0 of the over chain: (n, H, W) each -> (n, H, W) bool.

    L0 = gt, L1 = gt | support, L2 = L1 | fsl_edge(grey) (the grey pass), L(k+1) = edge_pass(L(k)).
    A fractional level k + f adds to L(k) the pixels of L(k+1) \\ L(k) whose draw in u is below f.
    """

    def step(k: int, cur: np.ndarray) -> np.ndarray:
        return cur | support if k == 0 else cur | fsl_edge(grey, BORDER) if k == 1 else edge_pass(cur, BORDER)

    return _grow(np.asarray(gt, dtype=bool), step, level, u)


def _grow(start: np.ndarray, step, level: float, u: np.ndarray) -> np.ndarray:
    """Level ``level`` of the chain start, step(0, start), step(1, ...), ...; the partial step takes pixels with u < f."""
    k, f = split_level(level)
    cur = start
    for i in range(k + (f > 0)):
        nxt = step(i, cur)
        if i == k:
            return cur | (nxt & (u < f))
        cur = nxt
    return cur


def shrink_level(gt: np.ndarray, level: float, u: np.ndarray) -> np.ndarray:
    """Level ``level`` >= 0 of the under chain: E0 = gt, E(k+1) = erode_cross(E(k)) -> (n, H, W) bool.

    A fractional level k + f removes from E(k) the pixels the next erosion removes whose draw
    in u (n, H, W) is below f.
    """
    k, f = split_level(level)
    cur = np.asarray(gt, dtype=bool)
    for step in range(k + (f > 0)):
        nxt = erode_cross(cur)
        if step == k:
            return nxt | (cur & (u >= f))
        if not nxt.any():
            return nxt
        cur = nxt
    return cur


def _start(gt, support, grey, strength, u_grow) -> np.ndarray:
    """Wrong's starting mask: level min(s, 1) of the over chain (GT at 0, the support at 1)."""
    return over_chain(gt, support, grey, min(strength, 1.0), u_grow)


def _wrong_lfnet(gt, support, grey, strength, u_grow, u_delete) -> np.ndarray:
    ranks = support_ranks(support)
    deleted = delete_blocks(ranks)
    gone = deleted & (u_delete < min(strength, 1.0))
    if strength > 1:  # beyond the protocol the kept blocks go too, so wrong is empty from s = 2
        gone |= ~deleted & (ranks >= 0) & (u_delete < strength - 1)
    return _start(gt, support, grey, strength, u_grow) & ~gone


def _wrong_cm(gt, support, grey, strength, u_grow, u_delete) -> np.ndarray:
    ranks = support_ranks(support)
    start = _start(gt, support, grey, strength, u_grow)
    stack = np.stack([start & ~(delete_blocks(ranks, SLICES, z) & (u_delete < min(strength, 1.0))) for z in range(SLICES)], axis=-1)
    u3 = np.repeat(u_grow[..., None], SLICES, axis=-1)
    return _grow(stack, lambda _, cur: edge_pass(cur, BORDER, VOLUME), WRONG_PASSES * strength, u3)[..., KEPT_SLICE]
