"""From a target Average DSC to a knob value: the bisection of a simulated style's knob.

A noise level (datasets/settings.py) is ``"protocol"`` (knob 1) or a target **Average DSC**
of the rater pool. The LF-Net paper reports a simulated pool's noise as its "Average" row:
each rater's mean Dice with GT (per image, then averaged over images), averaged over the five
raters, good and blank included (good counts 1, blank 0 where GT has foreground). That is
``average_dsc`` (labels/overlap.py). It falls monotonically from 0.80 (knob 0) as the knob
grows, towards a floor where over fills the image and under and wrong vanish.

``choose_strength`` bisects the knob on the training split (``strength_for_average``,
tolerance ``TOLERANCE`` = 0.01 of Average DSC) and refuses a target outside the reachable
range, or one the knob jumps over (the MS knob moves in whole passes). The pool is then
simulated at that knob value and datasets/raters/pool.py measures it (``pool_info``); every
adapter runs these steps through datasets/raters/levels.py (``simulate_level``).

Measured on the mnist-5k training split (3,200 digits, seed 0):

=======  ===================  =====================  ==========================================
style    Average, protocol    reachable (knob 0-hi)  usable targets (first refused: its share)
=======  ===================  =====================  ==========================================
lfnet    0.465 (sparse)       [0.253, 0.800], hi 8   >= 0.50 (0.47: TV foreground 79.1 %)
cm       0.497                [0.306, 0.800], hi 8   >= 0.43 (0.42: TV foreground 94.9 %)
cm-fit   0.494                [0.248, 0.800], hi 8   >= 0.437 (0.436: TV foreground just < 95 %)
morpho   0.495                [0.270, 0.800], hi 4   >= 0.475 (0.473: TV foreground 94.6 %)
=======  ===================  =====================  ==========================================

"Usable" is the realised Average of the training pool: a target within 0.01 of the edge may land
on either side of it. A bisection costs about 0.1 ms a digit and step for cm and 3 ms for morpho: on mnist-5k a
target takes about 4 s (cm) or 1.5 min (morpho) once; the splits are cached (bench/run/split_cache.py).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from datasets.contract import DataError
from datasets.raters.cm import simulate_raters_cm, simulate_raters_lfnet
from datasets.raters.cm_fit import simulate_raters_cm_fit
from datasets.raters.morpho import simulate_raters
from datasets.settings import level_target
from labels.overlap import average_dsc

__all__ = ["DEFAULT_HI", "STYLES", "TOLERANCE", "XTOL", "choose_strength", "simulator", "strength_for_average", "strength_for_target"]

#: Rater styles of MNIST-like digits, simulated by ``simulator``.
STYLES = ("lfnet", "cm", "cm-fit", "morpho")
#: Default top of the bisection bracket (knob units): the cm style is within 0.003 of its floor there.
DEFAULT_HI = 8.0
#: Tolerance of a target level, in Average DSC.
TOLERANCE = 0.01
#: The bisection stops when the bracket is narrower than this (knob units): the knob jumps there.
XTOL = 1e-3


def simulator(
    style: str,
    gt: np.ndarray,
    *,
    raw: np.ndarray | None = None,
    seed: int,
    keys: np.ndarray | None = None,
) -> Callable[[float], np.ndarray]:
    """``simulate(strength) -> (N, 5, H, W)`` for a style of ``STYLES``; the knob is ``strength`` ("morpho": ``noise``).

    raw: the grey digits (N, H, W), used by every style but "morpho" (which sees only gt).
    """
    rules = {"lfnet": simulate_raters_lfnet, "cm": simulate_raters_cm, "cm-fit": simulate_raters_cm_fit}
    if style in rules:
        return lambda strength: rules[style](gt, raw, seed=seed, strength=strength, keys=keys)
    if style == "morpho":
        return lambda strength: simulate_raters(gt, seed=seed, noise=strength, keys=keys)
    raise ValueError(f"unknown rater style {style!r}; choose one of {', '.join(STYLES)}")


def strength_for_target(simulate: Callable[[float], np.ndarray], gt: np.ndarray, target: float, **search) -> tuple[float, float]:
    """The knob value whose pool has Average DSC ``target`` within ``tol``: -> (strength, realised Average).

    simulate(strength) returns the raters (N, R, H, W) of the images whose GT is gt (N, H, W);
    ``search`` (tol, lo, hi, max_steps, xtol) and the errors are those of ``strength_for_average``.
    """
    return strength_for_average(lambda s: average_dsc(simulate(s), gt), target, **search)


def strength_for_average(
    average: Callable[[float], float],
    target: float,
    *,
    tol: float = TOLERANCE,
    lo: float = 0.0,
    hi: float = DEFAULT_HI,
    max_steps: int = 40,
    xtol: float = XTOL,
) -> tuple[float, float]:
    """Bisection of a monotone knob: average(strength) -> Average DSC; returns (strength, realised Average).

    The Average must be monotone in the strength over [lo, hi] (every style's falls as it
    grows). The ends are measured first: a target more than ``tol`` outside their range is
    refused. Then the bracket is halved until the midpoint's Average is within ``tol`` of
    the target. Raises ValueError (one line) for a target outside the reachable range, or
    when the bracket shrinks below ``xtol`` (or ``max_steps`` halvings pass) without landing
    within tol: the Average jumps over the target there (a knob that moves in whole passes).
    """
    if not tol > 0:
        raise ValueError(f"tol must be > 0, got {tol}")
    if not lo < hi:
        raise ValueError(f"need lo < hi, got lo={lo}, hi={hi}")
    f_lo, f_hi = average(lo), average(hi)
    low, high = min(f_lo, f_hi), max(f_lo, f_hi)
    if not low - tol <= target <= high + tol:
        raise ValueError(
            f"target Average DSC {target:.3f} is outside the reachable range [{low:.3f}, {high:.3f}] "
            f"(strength {lo:g} to {hi:g}, tolerance {tol:g})"
        )
    best = min(((lo, f_lo), (hi, f_hi)), key=lambda sf: abs(sf[1] - target))
    if abs(best[1] - target) <= tol:
        return best
    falling = f_lo >= f_hi
    for _ in range(max_steps):
        if hi - lo < xtol:
            break
        mid = 0.5 * (lo + hi)
        f_mid = average(mid)
        if abs(f_mid - target) <= tol:
            return mid, f_mid
        if (f_mid > target) == falling:
            lo, f_lo = mid, f_mid
        else:
            hi, f_hi = mid, f_mid
    raise ValueError(
        f"no strength gives Average DSC {target:.3f} within {tol:g}: it jumps from {f_lo:.3f} to {f_hi:.3f} between strengths {lo:g} and {hi:g}"
    )


def choose_strength(
    name: str,
    style: str,
    level: str,
    average: Callable[[float], float],
    *,
    protocol: float = 1.0,
    hi: float = DEFAULT_HI,
    searched_on: str = "the training split",
) -> tuple[float, float | None]:
    """The knob value of a canonical level -> (strength, target or None).

    "protocol" gives ``protocol`` without measuring anything. A target goes through
    ``strength_for_average`` on [0, hi] with ``TOLERANCE``; average(strength) is the
    Average DSC of the pool simulated on ``searched_on`` (the training split, or a fixed
    part of it). Its ValueError becomes a DataError naming the dataset, the style and the level.
    """
    target = level_target(level)
    if target is None:
        return protocol, None
    try:
        strength, _ = strength_for_average(average, target, tol=TOLERANCE, hi=hi)
    except ValueError as e:
        raise DataError(f"{name}: noise level {level} ({style} raters, measured on {searched_on}): {e}") from None
    return strength, target
