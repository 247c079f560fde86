"""Rater noise in the paper's units, for any rater style.

The LF-Net paper reports the noise of a simulated rater pool as its "Average" row: each
rater's mean Dice with GT, averaged over the pool of five raters, good and blank included
(good counts 1, blank 0). At the protocol's noise level that is about 0.49 on mnist-5k for
both styles; the range reachable by either style's knob is about [0.25, 0.80] (0.80: the
four non-blank raters equal GT; the floor: over fills the image, under and wrong vanish).

* ``average_dsc`` measures it.
* ``strength_for_target`` finds, by bisection, the knob value (``strength`` of the ``cm``
  style, ``noise`` of the ``morpho`` style) whose pool has a given Average; ``simulator``
  wraps either style as the ``simulate(strength)`` callable it needs.
* ``check_usable`` / ``require_usable`` refuse pools that a method cannot learn from: a
  non-blank rater that is empty in many images, or images where the threshold-voting mask
  (LF-Net eq. 1, β = R - 1) has no foreground pixel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from datasets.raters import RATER_NAMES, rater_dice, simulate_raters
from datasets.raters_cm import simulate_raters_cm

__all__ = [
    "DEFAULT_HI",
    "STYLES",
    "USABLE_MINIMUM",
    "average_dsc",
    "check_usable",
    "require_usable",
    "simulator",
    "strength_for_target",
    "threshold_vote_foreground",
]

#: Rater styles and the function behind each.
STYLES = ("morpho", "cm")
#: Default top of the bisection bracket: both styles are within 0.003 of their floor there.
DEFAULT_HI = 8.0
#: Smallest share (of images) that ``require_usable`` accepts.
USABLE_MINIMUM = 0.95


def average_dsc(raters: np.ndarray, gt: np.ndarray) -> float:
    """The pool's Average DSC: raters (N, R, H, W), gt (N, H, W) -> mean over raters of each rater's mean Dice."""
    return float(rater_dice(raters, gt).mean())


def simulator(
    style: str,
    gt: np.ndarray,
    *,
    raw: np.ndarray | None = None,
    seed: int,
    keys: np.ndarray | None = None,
) -> Callable[[float], np.ndarray]:
    """``simulate(strength) -> (N, 5, H, W)`` for a style: "cm" (``strength``) or "morpho" (``noise``).

    raw: the raw digits (N, H, W), used by "cm" only (its over rule starts from raw > 0).
    """
    if style == "cm":
        return lambda strength: simulate_raters_cm(gt, raw, seed=seed, strength=strength, keys=keys)
    if style == "morpho":
        return lambda strength: simulate_raters(gt, seed=seed, noise=strength, keys=keys)
    raise ValueError(f"unknown rater style {style!r}; choose one of {', '.join(STYLES)}")


def strength_for_target(
    simulate: Callable[[float], np.ndarray],
    gt: np.ndarray,
    target: float,
    *,
    tol: float = 0.01,
    lo: float = 0.0,
    hi: float = DEFAULT_HI,
    max_steps: int = 40,
) -> tuple[float, float]:
    """The knob value whose pool has Average DSC ``target`` within ``tol``: -> (strength, realised Average).

    simulate(strength) returns the raters (N, R, H, W) of the digits whose GT is gt (N, H, W).
    The Average must be monotone in the strength over [lo, hi] (both styles' Average falls as
    it grows). Raises ValueError (one line) when the target is outside the range reachable
    on [lo, hi], or when no strength within ``max_steps`` halvings lands within tol.
    """
    if not tol > 0:
        raise ValueError(f"tol must be > 0, got {tol}")
    if not lo < hi:
        raise ValueError(f"need lo < hi, got lo={lo}, hi={hi}")
    f_lo = average_dsc(simulate(lo), gt)
    f_hi = average_dsc(simulate(hi), gt)
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
        mid = 0.5 * (lo + hi)
        f_mid = average_dsc(simulate(mid), gt)
        if abs(f_mid - target) <= tol:
            return mid, f_mid
        if (f_mid > target) == falling:
            lo, f_lo = mid, f_mid
        else:
            hi, f_hi = mid, f_mid
    raise ValueError(
        f"no strength gives Average DSC {target:.3f} within {tol:g}: it jumps from {f_lo:.3f} to {f_hi:.3f} between strengths {lo:g} and {hi:g}"
    )


def threshold_vote_foreground(raters: np.ndarray, rater_valid: np.ndarray | None = None, beta: int | None = None) -> np.ndarray:
    """Foreground of the threshold-voting mask, per pixel: (N, R, H, W) class indices -> (N, H, W) bool.

    True where the most-voted class, background included, has >= beta votes of valid
    raters (LF-Net eq. 1, methods/fusion.py ``threshold_vote_mask``) and is not background.
    beta defaults to R - 1. Ties go to the lowest class (as ``majority_vote``); with
    beta > R / 2 there are none inside the mask.
    """
    raters = np.asarray(raters)
    n, r = raters.shape[:2]
    valid = np.ones((n, r), dtype=bool) if rater_valid is None else np.asarray(rater_valid, dtype=bool)
    beta = r - 1 if beta is None else int(beta)
    n_classes = max(int(raters.max(initial=0)) + 1, 2)
    best = np.zeros((n,) + raters.shape[2:], dtype=np.int64)  # votes of the most-voted class so far
    best_class = np.zeros((n,) + raters.shape[2:], dtype=np.int64)
    for label in range(n_classes):
        votes = ((raters == label) & valid[:, :, None, None]).sum(axis=1)
        better = votes > best  # strict: a tie keeps the lower class
        best = np.where(better, votes, best)
        best_class = np.where(better, label, best_class)
    return (best >= beta) & (best_class != 0)


def check_usable(
    raters: np.ndarray,
    rater_valid: np.ndarray | None = None,
    beta: int | None = None,
    *,
    names: Sequence[str] | None = None,
) -> dict:
    """How usable a rater pool is: raters (N, R, H, W) class indices, rater_valid (N, R) bool.

    Returns a dict:
      "nonempty": {name: share of the images (where that rater is valid) in which it has any
        foreground pixel}, for every rater not named "blank";
      "tv_foreground": share of the images whose threshold-voting mask at beta (default
        R - 1) holds a foreground pixel;
      "beta", "n_images".
    names default to RATER_NAMES for a pool of five, else "rater0", "rater1", ...
    A share is NaN where no image counts (a rater never valid, or no images).
    """
    raters = np.asarray(raters)
    if raters.ndim != 4:
        raise ValueError(f"raters must be (N, R, H, W), got shape {raters.shape}")
    n, r = raters.shape[:2]
    valid = np.ones((n, r), dtype=bool) if rater_valid is None else np.asarray(rater_valid, dtype=bool)
    if valid.shape != (n, r):
        raise ValueError(f"rater_valid must have shape ({n}, {r}), got {valid.shape}")
    if names is None:
        names = RATER_NAMES if r == len(RATER_NAMES) else tuple(f"rater{k}" for k in range(r))
    if len(names) != r:
        raise ValueError(f"{len(names)} names for {r} raters")
    beta = r - 1 if beta is None else int(beta)
    filled = (raters > 0).reshape(n, r, -1).any(axis=2)  # (N, R)
    nonempty = {}
    for k, name in enumerate(names):
        if name != "blank":
            count = valid[:, k].sum()
            nonempty[name] = float((filled[:, k] & valid[:, k]).sum() / count) if count else float("nan")
    tv = threshold_vote_foreground(raters, valid, beta).reshape(n, -1).any(axis=1)
    return {
        "nonempty": nonempty,
        "tv_foreground": float(tv.mean()) if n else float("nan"),
        "beta": beta,
        "n_images": n,
    }


def require_usable(
    raters: np.ndarray,
    rater_valid: np.ndarray | None = None,
    beta: int | None = None,
    *,
    names: Sequence[str] | None = None,
    minimum: float = USABLE_MINIMUM,
) -> dict:
    """``check_usable``, raising ValueError (one line, with the measured shares) when any share is below ``minimum``."""
    report = check_usable(raters, rater_valid, beta, names=names)
    problems = [f"{name} is non-empty in {share:.1%} of images" for name, share in report["nonempty"].items() if share < minimum]
    if report["tv_foreground"] < minimum:
        problems.append(f"the threshold-voting mask (beta={report['beta']}) has foreground in {report['tv_foreground']:.1%} of images")
    if problems:
        raise ValueError(f"degenerate rater pool: {'; '.join(problems)} (each must be >= {minimum:.0%})")
    return report
