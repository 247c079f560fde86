"""The rater simulators: five raters (good, over, under, wrong, blank) made from ground truth, in several styles.

One module per style family: morpho.py (this project's disk morphology, on morphology.py), cm.py (CM-UNet's released
MNIST rules: ``cm`` and ``lfnet``), cm_fit.py (the earlier approximation of ``cm``) and ms.py (CM-UNet's MS lesion rules
in 3-D); fsl.py holds the FSL-style edge, erosion and block rules the last three share, each border rule stated.
strength.py turns a target Average DSC into a style's knob value, pool.py measures how usable a simulated pool is, and
levels.py runs the two for an adapter (``simulate_level``: level -> knob -> every split's raters -> the pool's record).
The styles themselves are named in datasets/settings.py (``STYLE_NOTES``).
"""

from __future__ import annotations

import numpy as np

#: The simulated raters, in the order every simulator returns them.
RATER_NAMES = ("good", "over", "under", "wrong", "blank")


def image_keys(keys: np.ndarray | None, n: int) -> np.ndarray:
    """The per-image generator keys (default arange(n)), checked to be one per image."""
    keys = np.arange(n) if keys is None else np.asarray(keys)
    if keys.shape != (n,):
        raise ValueError(f"keys must have shape ({n},), got {keys.shape}")
    return keys
