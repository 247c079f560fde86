"""How sure is a ranking? Each method's rank, and Kendall's τ with the paper's order, under a two-level bootstrap.

One column of the long table (one dataset × raters × noise × reference × metric × structure) has
`values[method, seed, case]`. Its ranking is uncertain at two levels: training seeds (a method
retrained from another seed lands elsewhere) and test cases (another test set gives other means).
Each resample therefore

1. draws the test cases with replacement, the same draw for every method (cases are paired: every
   method predicted the same images), and scores each method by the mean over the drawn cases of its
   seed-averaged values, and
2. adds to each method's score its own draw of the seed level, independently per method (seeds are
   not paired: seed 0 of two methods share nothing but a number): s / √S · T with T ~ Student's t on
   S − 1 degrees of freedom, s the sd of the method's S per-seed means. With 3 seeds a resample of
   the seeds themselves has only 10 distinct draws and shrinks their variance by (S − 1) / S: for two
   identical methods (3 seeds, seed sd 2 points, 1,000 cases) it put one at rank 1 in ≥ 95 % of
   resamples in a quarter of the columns. The t draw mirrors the seed terms of the paired test
   (bench/report/stats.py) and brings that rate under 5 % (tests/test_ranking.py simulates it). A
   method with one seed has no seed spread to draw, so it is not ranked (`rankable`): with its one
   training held fixed, two identical methods, 3 seeds against 1, put one at rank 1 in ≥ 95 % of
   resamples in 27 % of columns.

Ranks are 1 = best; ties (two methods with identical values) are broken at random, so two
indistinguishable methods share ranks 1 and 2 instead of both claiming rank 1.

Everything is vectorised over the resamples with numpy: a case resample is a count per case, and a
method's score is a weighted mean plus its seed draw.

A ranking also depends on its scheme (challengeR shows all three side by side): `scheme_ranks` ranks the methods by
their mean (mean-then-rank), by their mean rank over the test cases (rank-then-mean) and by their number of
significant wins in the pairwise tests (test-then-rank, from bench/report/significance.py's map).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats


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
    """Each method's score in `n_boot` two-level resamples (see the module docstring): (n_boot, K) float.

    NaN where a resample drew none of a method's values (a method without rows).
    """
    values, present, n_seeds = value_cube(rows, methods)
    return draw_scores(values, present, n_seeds, n_boot, np.random.default_rng(seed))


def draw_scores(values: np.ndarray, present: np.ndarray, n_seeds: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """`bootstrap_scores` on `value_cube`'s arrays: values and present (K, S, C), n_seeds (K,); returns (n_boot, K)."""
    n_cases = values.shape[2]
    # (B, C): how often each case is drawn; one draw shared by every method, so the comparison stays paired. Counted with
    # one bincount over the B × C drawn indices (offset per resample), far faster than numpy's multinomial per row.
    drawn = rng.integers(0, n_cases, (n_boot, n_cases)) + n_cases * np.arange(n_boot)[:, None] if n_cases else np.zeros((n_boot, 0), int)
    case_counts = np.bincount(drawn.ravel(), minlength=n_boot * n_cases).reshape(n_boot, n_cases).astype(float)
    scores = np.full((n_boot, len(n_seeds)), np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        for k, s in enumerate(n_seeds):
            v, p = values[k, :s], present[k, :s].astype(float)  # (S_k, C)
            per_case = (v * p).sum(0) / p.sum(0)  # (C,): the seed-averaged value of each case, NaN where no seed has one
            here = np.isfinite(per_case)
            counts = case_counts if here.all() else case_counts[:, here]  # a case without any value weighs nothing
            scores[:, k] = (counts @ per_case[here]) / counts.sum(1)
            seed_means = ((v * p).sum(1) / p.sum(1))[p.any(1)]  # (S'_k,): the means of the seeds that have values
            if len(seed_means) >= 2:  # the seed level, as the paired test's seed term: s / √S · t_{S−1}
                spread = seed_means.std(ddof=1) / np.sqrt(len(seed_means))
                scores[:, k] += spread * rng.standard_t(len(seed_means) - 1, size=n_boot)
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


def rankable(rows: pd.DataFrame, methods: list[str]) -> tuple[list[str], list[str]]:
    """(`methods` with two or more seeds in `rows`, those with fewer). A method with one seed has no seed level to
    resample: the bootstrap would hold its one training fixed and rank it as if it had no training variance (two identical
    methods, 3 seeds against 1, put one at rank 1 in ≥ 95 % of resamples in 27 % of columns), so it is not ranked."""
    seeds = rows.groupby("method")["seed"].nunique()
    return [m for m in methods if seeds.get(m, 0) >= 2], [m for m in methods if seeds.get(m, 0) < 2]


def rank_distribution(rows: pd.DataFrame, methods: list[str], higher_is_better: bool, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """The share of resamples in which each method takes each rank: index `methods`, columns 1 … K, rows sum to 1. Every
    method needs two or more seeds (`rankable`)."""
    few = rankable(rows, methods)[1]
    if few:
        raise ValueError(f"cannot rank {few}: fewer than two seeds, no seed level to resample; rank the methods `rankable` keeps")
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


# --------------------------------------------------------------------------- ranking schemes

#: The ranking schemes `scheme_ranks` compares, in the order the page shows them.
SCHEMES = ("mean-then-rank", "rank-then-mean", "test-then-rank")


def competition_ranks(key: np.ndarray) -> np.ndarray:
    """Ranks 1 … K of `key` (K,), lower key = better; ties share the best of their ranks ("1, 1, 3"); NaN ranked last."""
    key = np.where(np.isnan(key), np.inf, key)
    return stats.rankdata(key, method="min").astype(int)


def mean_then_rank(rows: pd.DataFrame, methods: list[str], higher_is_better: bool) -> pd.Series:
    """Each method's rank by its mean over all its (seed, case) values (`observed_scores`): method -> rank, 1 = best."""
    scores = observed_scores(rows, methods)
    return pd.Series(competition_ranks(-scores if higher_is_better else scores), index=methods)


def rank_then_mean(rows: pd.DataFrame, methods: list[str], higher_is_better: bool) -> pd.Series:
    """Each method's rank by its mean rank over the test cases: on each case the methods are ranked by their
    seed-averaged values (ties share the average rank), the ranks averaged over the cases every method was scored on,
    and the methods ranked by that mean. method -> rank, 1 = best."""
    values, present, _ = value_cube(rows, methods)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_case = (values * present).sum(1) / present.sum(1)  # (K, C): each method's seed-averaged value per case
    shared = np.isfinite(per_case).all(0)
    if not shared.any():
        return pd.Series(np.full(len(methods), len(methods)), index=methods)
    key = -per_case[:, shared] if higher_is_better else per_case[:, shared]
    case_ranks = stats.rankdata(key, axis=0)  # (K, C'), 1 = best on that case
    return pd.Series(competition_ranks(case_ranks.mean(1)), index=methods)


def test_then_rank(better: pd.DataFrame) -> pd.Series:
    """Each method's rank by its number of significant wins: `better` (methods × methods bool) is True at [a, b] where a
    is significantly better than b (bench/report/significance.py `SignificanceMap.better`); the method with the most
    wins ranks first, equal counts share a rank. method -> rank, 1 = best."""
    wins = better.sum(axis=1).to_numpy(float)
    return pd.Series(competition_ranks(-wins), index=better.index)


def scheme_ranks(rows: pd.DataFrame, methods: list[str], higher_is_better: bool, better: pd.DataFrame) -> pd.DataFrame:
    """The methods' ranks under each of `SCHEMES`: index `methods`, one column per scheme, 1 = best; `better` as
    `test_then_rank` takes it, for the same methods."""
    return pd.DataFrame(
        {
            "mean-then-rank": mean_then_rank(rows, methods, higher_is_better),
            "rank-then-mean": rank_then_mean(rows, methods, higher_is_better),
            "test-then-rank": test_then_rank(better.loc[methods, methods]),
        }
    )
