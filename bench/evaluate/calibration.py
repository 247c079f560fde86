"""Calibration of a foreground probability: expected calibration error (ECE) and reliability bins, per case.

Equal-width bins of the probability over [0, 1]; a bin's confidence is the mean probability of its
pixels and its observed frequency the mean target there (the target may be a hard mask or the
raters' mean, a soft one). Shapes as bench/evaluate/multirater.py: probs and target (N, H, W).
"""

from __future__ import annotations

import numpy as np

from labels.checks import check_n_bins, check_prob_pair


def _bins(probs: np.ndarray, n_bins: int) -> np.ndarray:
    # Bin b holds [b/B, (b+1)/B); the last bin is closed, so p = 1.0 falls in bin B-1.
    return np.minimum((probs * n_bins).astype(np.int64), n_bins - 1)


def ece(probs: np.ndarray, target: np.ndarray, n_bins: int = 15) -> np.ndarray:
    """Expected calibration error of the foreground probability, per case.

    Formula, over the n pixels of one case, with B equal-width bins over [0, 1]:
        ECE = Σ_b (n_b / n) |mean(target in b) - mean(probs in b)|
            = (1 / n) Σ_b |Σ_{i in b} (target_i - probs_i)|

    Bin edges: pixel i goes to bin b = min(floor(p_i · B), B - 1), i.e. bin b is
    [b/B, (b+1)/B) and the last bin is [(B-1)/B, 1] closed; p = 0 falls in the
    first bin and p = 1.0 in the last. (Guo et al. write left-open bins, which
    would drop p = 0.) Empty bins contribute 0.

    The confidence is the foreground probability itself, not max(p, 1 - p):
    this is the calibration of "P(foreground)" against the observed frequency,
    which is what a soft target (the rater mean) supports.

    Empty-mask rule: none needed; every case has n > 0 pixels, an all-background
    target is a valid target.

    Args:
        probs: (N, H, W) float in [0, 1], predicted foreground probability.
        target: (N, H, W) bool mask (GT) or float in [0, 1] (rater mean).
        n_bins: number of bins B.

    Returns:
        (N,) float64 in [0, 1].

    Reference:
        M. P. Naeini, G. F. Cooper, M. Hauskrecht, "Obtaining well calibrated
        probabilities using Bayesian binning", AAAI 2015; C. Guo, G. Pleiss,
        Y. Sun, K. Q. Weinberger, "On calibration of modern neural networks",
        ICML 2017.
    """
    n_bins = check_n_bins(n_bins)
    p, t = check_prob_pair(probs, target, "probs", "target")
    n = p.shape[0]
    index = np.arange(n)[:, None] * n_bins + _bins(p, n_bins)
    gap = np.bincount(index.ravel(), weights=(t - p).ravel(), minlength=n * n_bins).reshape(n, n_bins)
    return np.abs(gap).sum(axis=1) / p.shape[1]


def reliability(probs: np.ndarray, target: np.ndarray, n_bins: int = 15) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Reliability-diagram data pooled over all pixels of all cases.

    Formula, per bin b (same edges as :func:`ece`):
        count_b = n_b,  confidence_b = mean(probs in b),  observed_b = mean(target in b)

    Empty-mask rule: an empty bin has count 0 and NaN means.

    Args:
        probs: (N, H, W) float in [0, 1].
        target: (N, H, W) bool or float in [0, 1].
        n_bins: number of bins B.

    Returns:
        (count, confidence, observed): (B,) int64, (B,) float64, (B,) float64.
        ECE over the pooled pixels is Σ_b count_b |observed_b - confidence_b| / Σ_b count_b.

    Reference:
        A. Niculescu-Mizil, R. Caruana, "Predicting good probabilities with
        supervised learning", ICML 2005; C. Guo et al., ICML 2017.
    """
    n_bins = check_n_bins(n_bins)
    p, t = check_prob_pair(probs, target, "probs", "target")
    index = _bins(p, n_bins).ravel()
    count = np.bincount(index, minlength=n_bins)
    sum_p = np.bincount(index, weights=p.ravel(), minlength=n_bins)
    sum_t = np.bincount(index, weights=t.ravel(), minlength=n_bins)
    confidence = np.full(n_bins, np.nan)
    observed = np.full(n_bins, np.nan)
    np.divide(sum_p, count, out=confidence, where=count > 0)
    np.divide(sum_t, count, out=observed, where=count > 0)
    return count.astype(np.int64), confidence, observed
