"""The FSL-style mask rules CM-UNet made its raters with: the edge, the edge pass, the cross erosion, block deletion.

CM-UNet's authors simulated their raters with ``fslmaths`` and a short NumPy script (Zhang et al., NeurIPS 2020;
docs/datasets.md#cm-unets-released-mnist-examples). Three styles re-implement those operations: ``cm`` and ``lfnet``
(datasets/raters/cm.py), ``cm-fit`` (datasets/raters/cm_fit.py) and ``ms`` (datasets/raters/ms.py). They share the
code below and differ in one thing only, what the edge rule sees beyond the array: the **border rule**.

* ``border="skip"`` (FSL's own, the ``cm`` and ``lfnet`` styles): ``fslmaths -edge`` computes no gradient on the
  outermost pixels of the array, so a border pixel is never an edge. With it the 100 released MNIST Over masks are
  reproduced exactly; the MNIST volumes were three equal slices, so in 3-D the first and last slice are border too and
  gain no edge.
* ``border="zero"`` (the ``cm-fit`` and ``ms`` styles): the array is zero-padded, so outside counts as background and a
  border pixel is an edge where its inner neighbour is foreground. ``cm-fit`` keeps the reading this project had before
  the exact rules were found (51 of the 100 released Over masks), so that results made with it can be rerun; ``ms``
  reads "outside the volume is background" as the MS rules state it (datasets/raters/ms.py). The two rules differ
  only for a mask that reaches the array's border.

The erosion and the block deletion have one rule each: outside the array is background for the erosion (a foreground
pixel on the border is eroded), and block deletion never looks outside the foreground.
"""

from __future__ import annotations

import numpy as np

__all__ = ["BLOCK", "BORDERS", "delete_blocks", "edge_pass", "erode_cross", "fsl_edge", "support_ranks"]

#: Voxels per block of CM-UNet's wrong rule (``artificial_wrong_mask.py``).
BLOCK = 100
#: The edge's border rules (see the module docstring).
BORDERS = ("skip", "zero")


def fsl_edge(x: np.ndarray, border: str, axes: tuple[int, ...] = (-2, -1)) -> np.ndarray:
    """Where ``fslmaths -edge`` is non-zero: x (..., H, W) grey or bool -> same shape, bool.

    A pixel is an edge where its two neighbours along any of `axes` differ (the central difference is non-zero).
    `axes` are the spatial axes: the last two for images, the last three for volumes. `border` is the border rule:
    "skip" (no pixel on the border of `axes` is an edge) or "zero" (outside the array counts as 0).
    """
    if border not in BORDERS:
        raise ValueError(f"border must be one of {BORDERS}, got {border!r}")
    x = np.asarray(x)
    axes = tuple(a % x.ndim for a in axes)
    if border == "zero":
        x = np.pad(x, [(1, 1) if a in axes else (0, 0) for a in range(x.ndim)])
    inner = [slice(1, -1) if a in axes else slice(None) for a in range(x.ndim)]
    edge = np.zeros(x[tuple(inner)].shape, dtype=bool)
    for axis in axes:
        before, after = list(inner), list(inner)
        before[axis], after[axis] = slice(0, -2), slice(2, None)
        edge |= x[tuple(before)] != x[tuple(after)]
    if border == "zero":
        return edge
    out = np.zeros(x.shape, dtype=bool)
    out[tuple(inner)] = edge
    return out


def edge_pass(mask: np.ndarray, border: str, axes: tuple[int, ...] = (-2, -1)) -> np.ndarray:
    """``fslmaths m -edge e; fslmaths m -add e -bin`` on a mask: mask | fsl_edge(mask) -> bool, a superset of mask.

    Unlike a cross dilation it skips a background pixel whose two neighbours along every axis are equal (a one-pixel
    gap between two foreground pixels).
    """
    mask = np.asarray(mask, dtype=bool)
    return mask | fsl_edge(mask, border, axes)


def erode_cross(mask: np.ndarray, axes: tuple[int, ...] = (-2, -1), passes: int = 1) -> np.ndarray:
    """`passes` erosions with the cross of `axes` (4-connected in 2-D, 6-connected in 3-D): mask -> same shape, bool.

    A pixel survives a pass where it and its two neighbours along every axis are foreground; outside the array is
    background.
    """
    m = np.asarray(mask, dtype=bool)
    axes = tuple(a % m.ndim for a in axes)
    inner = [slice(1, -1) if a in axes else slice(None) for a in range(m.ndim)]
    for _ in range(max(passes, 0)):
        p = np.pad(m, [(1, 1) if a in axes else (0, 0) for a in range(m.ndim)])
        out = m.copy()
        for axis in axes:
            before, after = list(inner), list(inner)
            before[axis], after[axis] = slice(0, -2), slice(2, None)
            out &= p[tuple(before)] & p[tuple(after)]
        m = out
    return m


def support_ranks(support: np.ndarray) -> np.ndarray:
    """C-order rank of each foreground pixel of each item: (N, ...) bool -> (N, ...) int64, k for the k-th, -1 outside."""
    flat = support.reshape(len(support), -1)
    ranks = np.cumsum(flat, axis=1) - 1
    return np.where(flat, ranks, -1).reshape(support.shape)


def delete_blocks(ranks: np.ndarray, slices: int = 1, slice_index: int = 0, block: int = BLOCK) -> np.ndarray:
    """Which pixels CM-UNet's wrong rule deletes: ranks (N, ...) from ``support_ranks`` -> (N, ...) bool.

    The rule numbers the foreground voxels in C order and deletes blocks 0, 2, 4, ... of `block`: ranks [0, 100),
    [200, 300), ... go, [100, 200), ... stay. With ``slices`` equal slices stacked last (the MNIST volumes), voxel
    ``slices * k + slice_index`` is pixel k's voxel in slice ``slice_index``. Pixels outside the support (rank -1) are
    never deleted.
    """
    voxel = slices * ranks + slice_index
    return (ranks >= 0) & ((voxel // block) % 2 == 0)
