"""How usable a simulated rater pool is, and the record of it that `Splits.raters_info` keeps.

``pool_info`` measures the training pool that an adapter simulated at a knob value
(datasets/raters/strength.py), refuses it when it is degenerate (``usable_problems``: a
non-blank rater empty in more than 5 % of the images, or a threshold-voting mask, LF-Net eq. 3
at β = R − 1, with no foreground in more than 5 %; images whose GT is empty do not count), and
returns the record that ``Splits.raters_info`` holds. A protocol (the published rules) is
checked too, but never refused: a sparse protocol pool is recorded with a one-line warning
(``raters_info["warning"]``) that the run prints, because the paper's own pool is sparse (the
``lfnet`` wrong is empty on digits of at most 100 support pixels) and another dataset of digits
may be sparser still. ``fixed_pool_info`` is the record of raters without a knob.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from datasets.contract import DataError, Note
from datasets.raters import RATER_NAMES
from datasets.settings import PROTOCOL, level_target
from labels.fusion import threshold_vote_foreground
from labels.overlap import average_dsc

__all__ = ["USABLE_MINIMUM", "check_usable", "fixed_pool_info", "pool_info", "usable_problems"]

#: Smallest share (of images) that ``usable_problems`` accepts.
USABLE_MINIMUM = 0.95


def check_usable(
    raters: np.ndarray,
    rater_valid: np.ndarray | None = None,
    beta: int | None = None,
    *,
    names: Sequence[str] | None = None,
    gt: np.ndarray | None = None,
) -> dict:
    """How usable a rater pool is: raters (N, R, H, W) class indices, rater_valid (N, R) bool.

    Returns a dict (JSON-ready):
      "nonempty": {name: share of the counted images (where that rater is valid) in which it
        has any foreground pixel}, for every rater not named "blank";
      "tv_foreground": share of the counted images whose threshold-voting mask at beta
        (default R - 1) holds a foreground pixel;
      "beta"; "n_images": how many images were counted; "counted": which.
    gt (N, H, W), when given, restricts the count to the images whose GT has a foreground
    pixel: where GT is empty an empty rater mask is right, not degenerate (MS lesion slices
    kept for the other rater's lesion). Without gt every image counts.
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
    if gt is None:
        counted, which = np.ones(n, dtype=bool), "all images"
    else:
        gt = np.asarray(gt)
        if gt.shape != (n, *raters.shape[2:]):
            raise ValueError(f"gt must have shape {(n, *raters.shape[2:])}, got {gt.shape}")
        counted, which = (gt > 0).reshape(n, -1).any(axis=1), "images with GT foreground"
    beta = r - 1 if beta is None else int(beta)
    filled = (raters > 0).reshape(n, r, -1).any(axis=2)  # (N, R)
    nonempty = {}
    for k, name in enumerate(names):
        if name != "blank":
            mine = valid[:, k] & counted
            count = mine.sum()
            nonempty[name] = float((filled[:, k] & mine).sum() / count) if count else float("nan")
    tv = threshold_vote_foreground(raters, valid, beta).reshape(n, -1).any(axis=1)
    return {
        "nonempty": nonempty,
        "tv_foreground": float(tv[counted].mean()) if counted.any() else float("nan"),
        "beta": beta,
        "n_images": int(counted.sum()),
        "counted": which,
    }


def usable_problems(report: dict, minimum: float = USABLE_MINIMUM) -> list[str]:
    """The shares of a ``check_usable`` report below ``minimum``, each as a phrase with its figure."""
    problems = [f"{name} is non-empty in {share:.1%} of images" for name, share in report["nonempty"].items() if share < minimum]
    if report["tv_foreground"] < minimum:
        problems.append(f"the threshold-voting mask (beta={report['beta']}) has foreground in {report['tv_foreground']:.1%} of images")
    return problems


def pool_info(
    name: str,
    style: str,
    level: str,
    strength: float,
    raters: np.ndarray,
    gt: np.ndarray,
    rater_valid: np.ndarray | None = None,
    *,
    names: Sequence[str] | None = None,
    refuse: bool | None = None,
) -> dict:
    """``Splits.raters_info`` of a simulated pool, measured on the training split; refuses a degenerate target level.

    raters (N, R, H, W) and gt (N, H, W) are the training split's. Returns {"style", "level",
    "target" (float or None), "strength", "realised_average" (``average_dsc``), "usable"
    (``check_usable`` over the images with GT foreground), "warning" (a sparse protocol's one
    line, else "")}. When the pool is degenerate (``usable_problems``) it raises DataError (one
    line, with the measured shares) if ``refuse``; otherwise it warns and records the line.
    refuse defaults to "a target level": a published protocol runs, a target is a choice the
    user can move.
    """
    report = check_usable(raters, rater_valid, names=names, gt=gt)
    realised = average_dsc(raters, gt)
    problems = usable_problems(report)
    warning = ""
    if problems:
        what = f"{name}: noise level {level} ({style} raters, strength {strength:.4g}, training Average DSC {realised:.3f})"
        detail = "; ".join(problems)
        if level != PROTOCOL if refuse is None else refuse:
            raise DataError(
                f"{what} gives a degenerate rater pool: {detail} (each must be >= {USABLE_MINIMUM:.0%}); "
                "choose a higher target Average DSC (less noise)"
            )
        warning = (
            f"{what}: the rater pool is sparse: {detail} (below the {USABLE_MINIMUM:.0%} a chosen noise level needs; "
            "the published protocol's pool is kept as it is)"
        )
        warnings.warn(Note(warning), stacklevel=3)
    return {
        "style": style,
        "level": level,
        "target": level_target(level),
        "strength": float(strength),
        "realised_average": realised,
        "usable": report,
        "warning": warning,
    }


def fixed_pool_info(style: str, raters: np.ndarray, gt: np.ndarray | None) -> dict:
    """``Splits.raters_info`` of raters that have no knob (real raters, files): level "protocol", no strength, no usability check."""
    return {
        "style": style,
        "level": PROTOCOL,
        "target": None,
        "strength": None,
        "realised_average": None if gt is None else average_dsc(raters, gt),
        "usable": None,
    }
