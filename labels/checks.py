"""The checks of every metric's and fusion's inputs, in one place: masks, rater and sample stacks, rater_valid,
probability maps, pixel spacing and bin counts. Each returns its input in the form the caller computes on, or raises
one line naming the argument, its expected shape or type and what it got.

Masks are bool; an integer array holding only 0/1 is accepted, anything else raises TypeError, because a probability
map or a class map passed by mistake would otherwise be binarised silently at > 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def as_bool(x: np.ndarray, name: str) -> np.ndarray:
    """A mask as bool: bool passes unchanged, integer 0/1 is converted, anything else raises TypeError."""
    if x.dtype == np.bool_:
        return x
    if np.issubdtype(x.dtype, np.integer) and np.isin(x, (0, 1)).all():
        return x.astype(bool)
    raise TypeError(f"{name} must be a bool mask (or integer 0/1); got dtype {x.dtype}. Binarise probabilities first, e.g. probs >= 0.5.")


def check_mask_pair(
    a: np.ndarray, b: np.ndarray, name_a: str = "pred", name_b: str = "gt", volumes: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Two mask batches of one shape, (N, H, W) (or (N, ...) with any spatial axes when `volumes`), as bool, or raise."""
    a, b = np.asarray(a), np.asarray(b)
    if (a.ndim < 2 if volumes else a.ndim != 3) or a.shape != b.shape:
        raise ValueError(f"{name_a} and {name_b} must both have shape (N, H, W) and match; got {name_a} {a.shape} and {name_b} {b.shape}")
    return as_bool(a, name_a), as_bool(b, name_b)


def check_stack(x: np.ndarray, name: str, letter: str) -> np.ndarray:
    """A stack of masks per case, (N, K, H, W) with K >= 1 (`letter` names K: R raters, M samples), as bool, or raise."""
    x = np.asarray(x)
    if x.ndim < 4 or x.shape[1] < 1:
        raise ValueError(f"{name} must have shape (N, {letter}, H, W) with {letter} >= 1; got {x.shape}")
    return as_bool(x, name)


def check_valid(rater_valid: np.ndarray | None, n: int, r: int) -> np.ndarray:
    """rater_valid (N, R) as bool; None means every rater annotated every case."""
    if rater_valid is None:
        return np.ones((n, r), dtype=bool)
    rater_valid = np.asarray(rater_valid)
    if rater_valid.shape != (n, r):
        raise ValueError(f"rater_valid must have shape (N, R) = {(n, r)}; got {rater_valid.shape}")
    return as_bool(rater_valid, "rater_valid")


def check_sets(samples: np.ndarray, raters: np.ndarray, rater_valid: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A case's samples and raters: samples (N, M, P), raters (N, R, P) bool (P the pixels) and rater_valid (N, R) bool,
    or raise."""
    samples = check_stack(samples, "samples", "M")
    raters = check_stack(raters, "raters", "R")
    if samples.shape[0] != raters.shape[0] or samples.shape[2:] != raters.shape[2:]:
        raise ValueError(
            f"samples (N, M, H, W) and raters (N, R, H, W) must agree in N and H, W; got samples {samples.shape} and raters {raters.shape}"
        )
    valid = check_valid(rater_valid, raters.shape[0], raters.shape[1])
    n = samples.shape[0]
    return samples.reshape(n, samples.shape[1], -1), raters.reshape(n, raters.shape[1], -1), valid


def check_pred_raters(pred: np.ndarray, raters: np.ndarray) -> np.ndarray:
    """One prediction per case, (N, H, W), against a rater stack (N, R, H, W): the prediction as bool, or raise."""
    pred, raters = np.asarray(pred), np.asarray(raters)
    if raters.ndim < 4 or pred.shape != raters.shape[:1] + raters.shape[2:]:
        raise ValueError(
            f"pred must have shape (N, H, W) and raters (N, R, H, W) with the same N, H, W; got pred {pred.shape} and raters {raters.shape}"
        )
    return as_bool(pred, "pred")


def as_unit_float(x: np.ndarray, name: str) -> np.ndarray:
    """``x`` as float64 with every value in [0, 1], or raise (TypeError for non-numeric dtypes)."""
    x = np.asarray(x)
    if x.dtype != np.bool_ and not (np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.floating)):
        raise TypeError(f"{name} must hold probabilities in [0, 1] (float, or a bool mask); got dtype {x.dtype}")
    x = x.astype(np.float64)
    n_bad = np.count_nonzero(~((x >= 0.0) & (x <= 1.0)))  # NaN fails both comparisons
    if n_bad:
        raise ValueError(f"{name} must lie in [0, 1] with no NaN; {n_bad} of {x.size} values do not")
    return x


def check_prob_pair(a: np.ndarray, b: np.ndarray, name_a: str, name_b: str) -> tuple[np.ndarray, np.ndarray]:
    """Two probability maps (N, ...) of one non-empty shape, each in [0, 1] (`as_unit_float`), or raise naming them.

    → both as float64 (N, P), P the pixels per image.
    """
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim < 2 or a.shape != b.shape or math.prod(a.shape[1:]) == 0:
        raise ValueError(f"{name_a} and {name_b} must both have shape (N, H, W), non-empty, and match; got {a.shape} and {b.shape}")
    a, b = as_unit_float(a, name_a), as_unit_float(b, name_b)
    return a.reshape(a.shape[0], -1), b.reshape(b.shape[0], -1)


def check_spacing(spacing: Sequence[float]) -> tuple[float, float]:
    """A pixel size (row, column): two positive finite numbers."""
    spacing = tuple(float(s) for s in spacing)
    if len(spacing) != 2 or not all(np.isfinite(s) and s > 0 for s in spacing):
        raise ValueError(f"spacing must be two positive numbers (row, col); got {spacing}")
    return spacing


def check_n_bins(n_bins: int) -> int:
    """A number of calibration bins: a positive integer (not a bool)."""
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer; got {n_bins!r}")
    return int(n_bins)
