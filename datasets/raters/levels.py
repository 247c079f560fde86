"""From a noise level to a simulated rater pool: the one flow every adapter that simulates raters runs.

A level (datasets/settings.py) becomes a knob value (``choose_strength``, datasets/raters/strength.py: "protocol" is
knob 1, a target Average DSC is bisected on the training images or the first of them), every split is simulated at that
value, and the training pool is measured and refused when degenerate (``pool_info``, datasets/raters/pool.py).
``simulate_level`` runs it; an adapter brings its own simulator, one callable per split, so MNIST's digits, Choledoch's
scenes, the MS lesion volumes and a folder's GT all go through the same steps in the same order.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping

import numpy as np

from datasets.raters.pool import pool_info
from datasets.raters.strength import DEFAULT_HI, choose_strength
from labels.overlap import average_dsc

__all__ = ["simulate_level"]

#: A split's simulator: knob value -> its raters (N, R, H, W).
Simulate = Callable[[float], np.ndarray]


def simulate_level(
    name: str,
    style: str,
    level: str,
    gt: np.ndarray,
    simulate: Mapping[str, Simulate],
    *,
    hi: float = DEFAULT_HI,
    subset: tuple[Simulate, np.ndarray] | None = None,
    unit: str = "images",
    searched_on: str | None = None,
    same_pool: Callable[[float], Hashable] | None = None,
) -> tuple[dict[str, np.ndarray], dict]:
    """The raters of every split at a canonical `level`, and the training pool's record -> ({split: raters}, raters_info).

    gt: the training split's GT (N, H, W). simulate: {split: simulate(strength) -> its raters}, with "train" (whose
    raters match `gt`); a split may be any block of images ("rest": val and test in one). The knob of a target level is
    bisected on [0, `hi`] (``choose_strength``) over the training split, or over `subset` = (simulate(strength), gt) of
    its first images where measuring all would be slow; a refusal says where it measured: `searched_on`, by default
    "the training split" or "the first <n> training <unit>". `same_pool`: a key of the knob value under which two
    values give one pool (the MS rules move in whole passes), so each pool is measured once. The training raters are
    then those of the last pool measured when the search saw the whole split at that value, else simulated; the record
    is ``pool_info``'s (it refuses a degenerate target, warns of a sparse protocol), measured on the whole training
    split, and the other splits are simulated after it, in the order given.
    """
    search, search_gt = subset or (simulate["train"], gt)
    whole = len(search_gt) == len(gt)
    if searched_on is None:
        searched_on = "the training split" if whole else f"the first {len(search_gt)} training {unit}"
    key = same_pool or (lambda strength: strength)
    measured: dict[Hashable, float] = {}
    last: dict[Hashable, np.ndarray] = {}  # the last pool measured, kept for the training raters

    def average(strength: float) -> float:
        at = key(strength)
        if at not in measured:
            last.clear()
            last[at] = search(strength)
            measured[at] = average_dsc(last[at], search_gt)
        return measured[at]

    strength, _ = choose_strength(name, style, level, average, hi=hi, searched_on=searched_on)
    reuse = last.get(key(strength)) if whole else None
    raters = {"train": simulate["train"](strength) if reuse is None else reuse}
    info = pool_info(name, style, level, strength, raters["train"], gt)
    raters.update((part, sim(strength)) for part, sim in simulate.items() if part != "train")
    return raters, info
