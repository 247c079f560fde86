"""The five simulated raters of `ms-lesion`: the MS rules of Zhang et al.'s released data, on 3-D binary volumes.

Holds the rules' pass counts at noise 1, the three operations on a volume (`erode6`, `edge_add`, `delete_passes`, on
the FSL-style rules of datasets/raters/fsl.py), the pass counts at a knob value (`passes_at`) and the five raters of
one GT volume (`simulate_ms_raters`).

**Simulated raters** (`ms-lesion`, R = 5, `RATER_NAMES` order), on the 3-D GT volume and then
sliced, the rules that reproduce Zhang et al.'s released MS data exactly (docs/datasets.md#ms-lesion-simulated-raters):
good = GT; over = the FSL-style edge-add pass applied twice; under = one 6-connected erosion;
wrong = over with alternating 100-voxel blocks of its C-order foreground deleted, twice;
blank = zeros. Voxels outside the volume count as background. These rules are deterministic:
there is nothing to seed.
"""

from __future__ import annotations

import numpy as np

from datasets.raters import RATER_NAMES
from datasets.raters.fsl import BLOCK, delete_blocks, edge_pass, erode_cross, support_ranks

#: Official MS rules at noise 1 (docs/datasets.md#ms-lesion-simulated-raters): passes of each operation and the block size.
UNDER_EROSIONS = 1
OVER_EDGE_PASSES = 2
WRONG_DELETION_PASSES = 2
WRONG_BLOCK = BLOCK
#: The edge's border rule: outside the volume is background (zero-padded; datasets/raters/fsl.py).
BORDER = "zero"
#: The spatial axes of a volume (X, Y, Z).
VOLUME = (0, 1, 2)


# ---------------------------------------------------------------------------------------
# The MS rater rules (docs/datasets.md#ms-lesion-simulated-raters), on 3-D binary volumes
# ---------------------------------------------------------------------------------------


def erode6(mask: np.ndarray, passes: int = UNDER_EROSIONS) -> np.ndarray:
    """`passes` 3-D erosions with the 6-connected cross: (X, Y, Z) -> (X, Y, Z) bool.

    A voxel survives a pass iff it and its 6 face neighbours are foreground; outside the volume
    is background.
    """
    return erode_cross(np.asarray(mask) > 0, VOLUME, passes)


def edge_add(mask: np.ndarray, passes: int = OVER_EDGE_PASSES) -> np.ndarray:
    """`passes` FSL-style edge-add passes: (X, Y, Z) -> (X, Y, Z) bool.

    One pass: mask OR (Σ over the 3 axes of |x[i+1] - x[i-1]| > 0), the central-difference
    gradient of ``fslmaths -edge`` added to the mask. Unlike a 6-connected dilation it skips a
    background voxel whose two neighbours along every axis are equal (a one-voxel gap between
    two foreground voxels). Outside the volume is background (``BORDER``).
    """
    mask = np.asarray(mask) > 0
    for _ in range(max(passes, 0)):
        mask = edge_pass(mask, BORDER, VOLUME)
    return mask


def delete_passes(mask: np.ndarray, passes: int = WRONG_DELETION_PASSES, block: int = WRONG_BLOCK) -> np.ndarray:
    """Delete alternating blocks of the foreground in C order, `passes` times: (X, Y, Z) -> bool.

    The foreground voxels are listed in C order of the array as nibabel loads it (z fastest);
    those at list positions [0, block), [2·block, 3·block), … are deleted (`delete_blocks`).
    Each pass lists the remaining foreground again, so two passes keep about a quarter.
    """
    mask = np.asarray(mask) > 0
    for _ in range(max(passes, 0)):
        mask = mask & ~delete_blocks(support_ranks(mask[None]), block=block)[0]
    return mask


def passes_at(noise: float) -> tuple[int, int, int]:
    """(erosions, edge-add passes, deletion passes) at knob value `noise` (1: the protocol): the official counts × noise, rounded half up."""
    if not np.isfinite(noise) or noise < 0:
        raise ValueError(f"noise must be finite and >= 0, got {noise}")

    def scaled(count: int) -> int:
        return int(np.floor(count * noise + 0.5))

    return scaled(UNDER_EROSIONS), scaled(OVER_EDGE_PASSES), scaled(WRONG_DELETION_PASSES)


def simulate_ms_raters(gt: np.ndarray, noise: float = 1.0) -> np.ndarray:
    """The five MS raters of one 3-D GT volume at knob value `noise` (1: the protocol): (X, Y, Z) -> (5, X, Y, Z) uint8 in {0, 1}.

    Order `RATER_NAMES` (good, over, under, wrong, blank). The array must be in nibabel's
    (x, y, z) order: "wrong" depends on the C order of the voxels.
    """
    gt = np.asarray(gt) > 0
    erosions, edge_passes, deletions = passes_at(noise)
    over = edge_add(gt, edge_passes)
    out = np.zeros((len(RATER_NAMES), *gt.shape), dtype=np.uint8)
    out[0] = gt
    out[1] = over
    out[2] = erode6(gt, erosions)
    out[3] = delete_passes(over, deletions)
    return out  # blank (index 4) stays zero
