"""Rater styles and rater noise in the paper's units.

**Styles.** A dataset's raters come in one or more styles (``DatasetSpec.rater_styles``, the
first is the default; ``STYLE_NOTES`` says what each is):

* ``lfnet``: the LF-Net paper's MNIST pool, CM-UNet's rules without the thickened wrong
  (datasets/raters_cm.py), knob ``strength``;
* ``cm``: CM-UNet's released MNIST rules, exactly (datasets/raters_cm.py), knob ``strength``;
* ``cm-fit``: this project's earlier calibrated approximation of ``cm`` (datasets/raters_cm_fit.py);
* ``morpho``: this project's own Morpho-MNIST-style disk morphology (datasets/raters.py),
  knob ``noise``;
* ``ms``: CM-UNet's released MS lesion rules in 3-D (datasets/ms_lesion.py), knob = a
  multiplier of the number of passes;
* ``choledoch``: the ``morpho`` rules with radii × 4 (datasets/choledoch.py), knob ``noise``;
* ``real`` / ``files``: real raters, or rater masks read from files: no knob.

Every knob is 1 at the protocol (the unscaled rules) and 0 where every non-blank rater
equals GT.

**Levels.** A noise level is a string: ``"protocol"`` (knob 1) or a target **Average DSC**
of the rater pool, a decimal in (0, 1) such as ``"0.45"`` (``parse_level``). The LF-Net
paper reports a simulated pool's noise as its "Average" row: each rater's mean Dice with
GT (per image, then averaged over images), averaged over the five raters, good and blank
included (good counts 1, blank 0 where GT has foreground). That is ``average_dsc``. It
falls monotonically from 0.80 (knob 0) as the knob grows, towards a floor where over fills
the image and under and wrong vanish.

**From a target to a knob value.** ``choose_strength`` bisects the knob on the training
split (``strength_for_average``, tolerance ``TOLERANCE`` = 0.01 of Average DSC) and refuses
a target outside the reachable range, or one the knob jumps over (the MS knob moves in
whole passes). ``pool_info`` then measures the training pool that the loader simulated at
that knob value, refuses it when it is degenerate (``usable_problems``: a non-blank rater
empty in more than 5 % of the images, or a threshold-voting mask, LF-Net eq. 3 at
β = R − 1, with no foreground in more than 5 %; images whose GT is empty do not count),
and returns the record that ``Splits.raters_info`` holds. A protocol (the published rules) is
checked too, but never refused: a sparse protocol pool is recorded with a one-line warning
(``raters_info["warning"]``) that the run prints, because the paper's own pool is sparse (the
``lfnet`` wrong is empty on digits of at most 100 support pixels) and another dataset of digits
may be sparser still.

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
target takes about 4 s (cm) or 1.5 min (morpho) once; the splits are cached (datasets/cache.py).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence

import numpy as np

from datasets.contract import DataError, Note, RaterSetting, refuse_noise_level
from datasets.raters import RATER_NAMES, simulate_raters
from datasets.raters_cm import simulate_raters_cm, simulate_raters_lfnet
from datasets.raters_cm_fit import simulate_raters_cm_fit
from labels.fusion import threshold_vote_foreground
from labels.overlap import average_dsc

__all__ = [
    "DEFAULT_HI",
    "PROTOCOL",
    "STYLES",
    "STYLE_NOTES",
    "TOLERANCE",
    "USABLE_MINIMUM",
    "XTOL",
    "check_fixed",
    "check_level",
    "check_setting",
    "check_style",
    "check_usable",
    "choose_strength",
    "fixed_pool_info",
    "level_target",
    "parse_level",
    "pool_info",
    "simulator",
    "strength_for_average",
    "strength_for_target",
    "usable_problems",
]

#: The level of the unscaled rules (every knob = 1).
PROTOCOL = "protocol"
#: Rater styles of MNIST-like digits, simulated by ``simulator``.
STYLES = ("lfnet", "cm", "cm-fit", "morpho")
#: What each rater style is, for the dataset cards and messages.
STYLE_NOTES = {
    "lfnet": "lfnet = the LF-Net paper's pool: CM-UNet's rules (under = one cross erosion of GT, over = FSL edge passes on the grey "
    "digit, then its mask) with wrong = the support raw > 0 minus every second block of 100 pixels, unthickened",
    "cm": "cm = CM-UNet's released MNIST rules exactly (lfnet's under and over; wrong = block deletion on a 3-slice stack, "
    "then two FSL edge passes)",
    "cm-fit": "cm-fit = this project's earlier approximation of cm (wrong = a thickened digit with calibrated cuts)",
    "morpho": "morpho = this project's own Morpho-MNIST-style disk morphology (4x supersampled, per-image jitter)",
    "ms": "ms = CM-UNet's released MS lesion rules in 3-D (one 6-connected erosion, two edge-add passes, "
    "alternating 100-voxel deletions twice)",
    "choledoch": "choledoch = this project's morpho rules with radii x4 (the MNIST radii barely touch 256x320 cancer regions)",
    "real": "real = the dataset's own human raters (no noise knob)",
    "files": "files = rater masks read from your files (no noise knob)",
}
#: Default top of the bisection bracket (knob units): the cm style is within 0.003 of its floor there.
DEFAULT_HI = 8.0
#: Tolerance of a target level, in Average DSC.
TOLERANCE = 0.01
#: The bisection stops when the bracket is narrower than this (knob units): the knob jumps there.
XTOL = 1e-3
#: Smallest share (of images) that ``usable_problems`` accepts.
USABLE_MINIMUM = 0.95


# ---------------------------------------------------------------------------------------
# Styles and levels
# ---------------------------------------------------------------------------------------


def check_style(name: str, raters: RaterSetting | str | None, styles: Sequence[str]) -> str:
    """The rater style to use: ``raters``, or the first of ``styles`` when None; DataError (one line) for any other. A
    `RaterSetting` was checked when it was made: its style is taken as it is."""
    if isinstance(raters, RaterSetting):
        return raters.style
    style = styles[0] if raters is None else raters
    if style not in styles:
        raise DataError(f"{name}: unknown rater style {style!r}; this dataset has {', '.join(styles)}")
    return style


def check_setting(
    name: str,
    label: RaterSetting | str | None,
    styles: Sequence[str],
    inputs: Sequence[str] = (),
    style_inputs: dict[str, str] | None = None,
    network_input: str | None = None,
) -> RaterSetting:
    """A rater setting as given -> the checked `RaterSetting`; DataError (one line) for an unknown style or input.

    A setting is a rater style, optionally with a network input other than the style's own: ``"cm+clean"``, or the
    style with `network_input` ("cm", "clean"). None is the first style with its own input. The canonical label drops an
    input equal to the style's own (``"lfnet+clean"`` -> ``"lfnet"``), so one setting has one name (results path, cache
    file, table). Datasets without input choices (``inputs`` empty) refuse any input. A `RaterSetting` is returned as
    it is (it was checked when made).
    """
    if isinstance(label, RaterSetting):
        return label
    style, plus, kind = (label or "").partition("+")
    if network_input is not None:
        if plus:
            raise DataError(f"{name}: {label!r} already names a network input; give the rater style alone with an input")
        plus, kind, label = "+", network_input, f"{style or styles[0]}+{network_input}"
    style = check_style(name, style or None, styles)
    own = (style_inputs or {}).get(style)
    if not plus:
        return RaterSetting(style, own, style)
    if not inputs:
        raise DataError(f"{name}: {label!r} names a network input, but this dataset has one input; give the rater style alone ({style})")
    if kind not in inputs:
        raise DataError(f"{name}: unknown input {kind!r} in {label!r}; this dataset has {', '.join(inputs)}")
    return RaterSetting(style, kind, style if kind == own else f"{style}+{kind}")


def parse_level(text: str | float) -> str:
    """A noise level as given on the command line -> its canonical label: "protocol" or f"{target:g}".

    Accepted: "protocol" (any case, spaces ignored) or a target Average DSC strictly between 0
    and 1 ("0.45", ".45", "4.5e-1" -> "0.45"). Raises ValueError (one line) for anything else:
    not a number, NaN, infinite, or outside (0, 1); "1" too, the old spelling of the protocol.
    """
    raw = str(text).strip()
    if raw.lower() == PROTOCOL:
        return PROTOCOL
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(
            f"noise level {raw!r} is neither 'protocol' nor a number; give 'protocol' or a target Average DSC in (0, 1), e.g. 0.45"
        ) from None
    if not (math.isfinite(value) and 0 < value < 1):
        hint = " ('protocol' is the unscaled rules, the old level 1)" if value == 1 else ""
        raise ValueError(f"noise level {raw} is not 'protocol' or a target Average DSC strictly between 0 and 1{hint}; e.g. 0.45")
    return f"{value:g}"


def check_level(name: str, level: str | float) -> str:
    """``parse_level`` for a dataset: its ValueError becomes a DataError naming the dataset."""
    try:
        return parse_level(level)
    except ValueError as e:
        raise DataError(f"{name}: {e}") from None


def check_fixed(name: str, raters: RaterSetting | str | None, noise: str, style: str = "real", why: str = "has real raters") -> None:
    """The checks of a dataset without a noise knob: style ``style`` (or None), level "protocol" only; DataError otherwise."""
    check_style(name, raters, (style,))
    refuse_noise_level(name, check_level(name, noise), why)


def level_target(level: str) -> float | None:
    """The target Average DSC of a canonical level, or None for the protocol."""
    return None if level == PROTOCOL else float(level)


# ---------------------------------------------------------------------------------------
# Measuring a pool
# ---------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------
# From a target Average DSC to a knob value
# ---------------------------------------------------------------------------------------


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
            raise DataError(f"{what} gives a degenerate rater pool: {detail} (each must be >= {USABLE_MINIMUM:.0%}); "
                            "choose a higher target Average DSC (less noise)")  # fmt: skip
        warning = (f"{what}: the rater pool is sparse: {detail} (below the {USABLE_MINIMUM:.0%} a chosen noise level needs; "
                   "the published protocol's pool is kept as it is)")  # fmt: skip
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
