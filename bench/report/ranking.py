"""How sure is a ranking? Each method's rank, and Kendall's τ with the paper's order, under a two-level bootstrap.

One column of the long table (one dataset × raters × noise × reference × metric × structure) has
`values[method, seed, case]`. Its ranking is uncertain at two levels: training seeds (a method
retrained from another seed lands elsewhere) and test cases (another test set gives other means).
Each bootstrap resample therefore

1. draws each method's seeds with replacement, independently per method (seeds are not paired:
   seed 0 of two methods share nothing but a number), and
2. draws the test cases with replacement, the same draw for every method (cases are paired: every
   method predicted the same images),

and scores each method by the mean of its drawn (seed, case) values. Ranks are 1 = best; ties
(two methods with identical values) are broken at random, so two indistinguishable methods share
ranks 1 and 2 instead of both claiming rank 1.

Everything is vectorised over the resamples with numpy: a resample is a count per seed and a count
per case (multinomial draws), and a method's score is a weighted mean.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def value_cube(rows: pd.DataFrame, methods: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The column as arrays: values (K, S, C) float, present (K, S, C) bool, seeds per method (K,) int.

    `rows` has columns method, seed, case, value (the long table filtered to one column). Method k's
    seeds fill slots 0 … n_seeds[k] − 1 in sorted order; cases are the union over methods, sorted. A
    missing (seed, case) or a NaN value (bAHD of an empty reference) is absent: it weighs nothing.
    """
    rows = rows[rows["method"].isin(methods)]
    cases = sorted(set(rows["case"]), key=str)
    case_index = {c: i for i, c in enumerate(cases)}
    seeds = {m: sorted(set(rows.loc[rows["method"] == m, "seed"])) for m in methods}
    n_seeds = np.array([len(seeds[m]) for m in methods], dtype=int)
    values = np.zeros((len(methods), max(n_seeds.max(initial=0), 1), len(cases)))
    present = np.zeros(values.shape, dtype=bool)
    for k, method in enumerate(methods):
        part = rows[rows["method"] == method]
        slot = {s: i for i, s in enumerate(seeds[method])}
        s = part["seed"].map(slot).to_numpy(int)
        c = part["case"].map(case_index).to_numpy(int)
        v = part["value"].to_numpy(float)
        ok = ~np.isnan(v)
        values[k, s[ok], c[ok]] = v[ok]
        present[k, s[ok], c[ok]] = True
    return values, present, n_seeds


def bootstrap_scores(rows: pd.DataFrame, methods: list[str], n_boot: int = 1000, seed: int = 0) -> np.ndarray:
    """Each method's mean value in `n_boot` two-level resamples (see the module docstring): (n_boot, K) float.

    NaN where a resample drew none of a method's values (a method without rows).
    """
    values, present, n_seeds = value_cube(rows, methods)
    rng = np.random.default_rng(seed)
    n_cases = values.shape[2]
    # (B, C): how often each case is drawn; one draw shared by every method, so the comparison stays paired.
    case_counts = rng.multinomial(n_cases, np.full(n_cases, 1 / n_cases), size=n_boot) if n_cases else np.zeros((n_boot, 0))
    scores = np.full((n_boot, len(methods)), np.nan)
    for k, s in enumerate(n_seeds):
        if s == 0:
            continue
        seed_counts = rng.multinomial(s, np.full(s, 1 / s), size=n_boot)  # (B, S_k): this method's own seed draw
        weights = present[k, :s].astype(float)  # (S_k, C)
        total = ((seed_counts @ (values[k, :s] * weights)) * case_counts).sum(axis=1)  # (B,): Σ_s Σ_c n_s n_c v_sc
        count = ((seed_counts @ weights) * case_counts).sum(axis=1)  # (B,): how many (seed, case) values were drawn
        with np.errstate(invalid="ignore", divide="ignore"):
            scores[:, k] = total / count
    return scores


def observed_scores(rows: pd.DataFrame, methods: list[str]) -> np.ndarray:
    """Each method's mean over all its (seed, case) values, the statistic `bootstrap_scores` resamples: (K,) float."""
    values, present, _ = value_cube(rows, methods)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (values * present).sum(axis=(1, 2)) / present.sum(axis=(1, 2))


def ranks(scores: np.ndarray, higher_is_better: bool, rng: np.random.Generator) -> np.ndarray:
    """Ranks 1 … K of each row of scores (B, K): (B, K) int, 1 = best; ties broken at random, NaN scores ranked last."""
    key = -scores if higher_is_better else scores
    key = np.where(np.isnan(key), np.inf, key)
    order = np.lexsort((rng.random(scores.shape), key), axis=-1)  # last key sorts first: by score, then a random tie-break
    return np.argsort(order, axis=-1) + 1  # the inverse permutation: where each method landed


def rank_distribution(rows: pd.DataFrame, methods: list[str], higher_is_better: bool, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """The share of resamples in which each method takes each rank: index `methods`, columns 1 … K, rows sum to 1."""
    scores = bootstrap_scores(rows, methods, n_boot, seed)
    r = ranks(scores, higher_is_better, np.random.default_rng(seed + 1))
    shares = (r[:, :, None] == np.arange(1, len(methods) + 1)).mean(axis=0)  # (K, K): method × rank
    return pd.DataFrame(shares, index=pd.Index(methods, name="method"), columns=pd.Index(range(1, len(methods) + 1), name="rank"))


def mean_rank(shares: pd.DataFrame) -> pd.Series:
    """Each method's mean rank over the resamples (from `rank_distribution`)."""
    return (shares * shares.columns.to_numpy()).sum(axis=1)


def rank_quantile(shares: pd.DataFrame, q: float) -> pd.Series:
    """Each method's q-quantile rank over the resamples: the first rank whose cumulative share reaches q."""
    reached = shares.cumsum(axis=1).to_numpy() >= q - 1e-12  # rounding: shares of 1000 resamples summing to 0.4999…
    return pd.Series(shares.columns.to_numpy()[reached.argmax(axis=1)], index=shares.index)


def median_rank(shares: pd.DataFrame) -> pd.Series:
    """Each method's median rank over the resamples (from `rank_distribution`)."""
    return rank_quantile(shares, 0.5)


def kendall_tau(reference: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Kendall's τ-b between one order (K,) and each row of scores (..., K): (...) float; NaN where undefined.

    τ-b = (concordant − discordant) / sqrt((pairs − ties in reference) (pairs − ties in scores)), as
    scipy.stats.kendalltau computes it, over the K (K − 1) / 2 pairs of methods.
    """
    i, j = np.triu_indices(len(reference), k=1)
    a = np.sign(reference[i] - reference[j])  # (P,)
    b = np.sign(scores[..., i] - scores[..., j])  # (..., P)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (a * b).sum(axis=-1) / np.sqrt((a != 0).sum() * (b != 0).sum(axis=-1))


def kendall_interval(rows: pd.DataFrame, paper_values: dict[str, float], n_boot: int = 1000, seed: int = 0) -> tuple[float, float, float]:
    """Kendall's τ between the paper's order and the measured order, with a 95 % bootstrap percentile interval.

    `paper_values` maps each method to its paper value (in any units: τ compares orders only, and the
    metric's direction does not change it). The methods are those of `paper_values` that `rows` has.
    Returns (τ of the measured means, 2.5th and 97.5th percentile of τ over the two-level resamples);
    all NaN with fewer than two such methods.
    """
    methods = [m for m in paper_values if m in set(rows["method"])]
    if len(methods) < 2:
        return (np.nan, np.nan, np.nan)
    paper = np.array([paper_values[m] for m in methods], dtype=float)
    tau = float(kendall_tau(paper, observed_scores(rows, methods)))
    taus = kendall_tau(paper, bootstrap_scores(rows, methods, n_boot, seed))
    taus = taus[~np.isnan(taus)]
    if not len(taus):
        return (tau, np.nan, np.nan)
    low, high = np.percentile(taus, [2.5, 97.5])
    return (tau, float(low), float(high))
