"""bench.report.ranking: rank distributions and Kendall's τ under the two-level (seed, case) bootstrap, on columns the test builds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bench.report import ranking


def column(values: dict[str, np.ndarray]) -> pd.DataFrame:
    """Rows of one column (method, seed, case, value) from method -> (seeds, cases) array."""
    rows = [(m, s, f"c{c:03d}", float(v[s, c])) for m, v in values.items() for s in range(v.shape[0]) for c in range(v.shape[1])]
    return pd.DataFrame(rows, columns=["method", "seed", "case", "value"])


def noisy(mean: float, rng, n_seeds: int = 3, n_cases: int = 40, seed_sd: float = 0.0, case_sd: float = 0.05) -> np.ndarray:
    """(seeds, cases): a shared per-case difficulty would pair the methods; here each value is mean + seed effect + noise."""
    return mean + seed_sd * rng.standard_normal((n_seeds, 1)) + case_sd * rng.standard_normal((n_seeds, n_cases))


def test_a_clear_winner_takes_rank_one_in_almost_every_resample():
    rng = np.random.default_rng(0)
    rows = column({"a": noisy(0.6, rng), "b": noisy(0.7, rng), "best": noisy(0.9, rng)})
    shares = ranking.rank_distribution(rows, ["a", "b", "best"], higher_is_better=True, n_boot=500)
    assert shares.loc["best", 1] >= 0.99 and shares.loc["a", 3] >= 0.99
    np.testing.assert_allclose(shares.sum(axis=1), 1.0)
    assert ranking.median_rank(shares).to_dict() == {"a": 3, "b": 2, "best": 1}
    # lower is better (bAHD): the same values rank the other way round
    flipped = ranking.rank_distribution(rows, ["a", "b", "best"], higher_is_better=False, n_boot=500)
    assert flipped.loc["a", 1] >= 0.99 and flipped.loc["best", 3] >= 0.99


def test_two_identical_methods_split_their_ranks():
    rng = np.random.default_rng(1)
    same = noisy(0.8, rng)
    rows = column({"one": same, "two": same.copy(), "worse": noisy(0.5, rng)})
    shares = ranking.rank_distribution(rows, ["one", "two", "worse"], higher_is_better=True, n_boot=2000)
    for method in ("one", "two"):  # identical values in every resample: a tie, broken at random
        assert shares.loc[method, 1] == pytest.approx(0.5, abs=0.05) and shares.loc[method, 2] == pytest.approx(0.5, abs=0.05)
    assert shares.loc["worse", 3] == 1.0


def test_the_bootstrap_resamples_seeds_not_only_cases():
    """A method whose seeds disagree widely has an uncertain rank even with many cases; resampling cases alone would not see it."""
    rng = np.random.default_rng(2)
    n_cases = 500
    unstable = np.concatenate([noisy(0.9, rng, 2, n_cases, case_sd=0.01), noisy(0.5, rng, 2, n_cases, case_sd=0.01)])  # mean 0.7
    rows = column(
        {"unstable": unstable, "steady": noisy(0.72, rng, 4, n_cases, case_sd=0.01), "low": noisy(0.6, rng, 4, n_cases, case_sd=0.01)}
    )
    shares = ranking.rank_distribution(rows, ["unstable", "steady", "low"], higher_is_better=True, n_boot=1000)
    assert shares.loc["unstable", 1] > 0.15 and shares.loc["unstable", 3] > 0.15, shares  # all-good or all-bad seed draws
    assert shares.loc["unstable"].max() < 0.8
    assert shares.loc["steady"].max() > 0.5  # its seeds agree: its rank moves only as the unstable one passes it


def test_scores_are_paired_over_cases():
    """The same case draw for every method: two methods that differ by a constant on every case never swap, however hard the cases."""
    rng = np.random.default_rng(3)
    difficulty = rng.uniform(0.2, 1.0, (1, 60)).repeat(3, axis=0)  # cases differ far more than the methods do
    rows = column({"a": difficulty, "b": difficulty + 0.01})
    shares = ranking.rank_distribution(rows, ["a", "b"], higher_is_better=True, n_boot=500)
    assert shares.loc["b", 1] == 1.0


def test_missing_values_weigh_nothing():
    values = np.array([[0.5, np.nan, 0.7], [0.6, 0.6, np.nan]])
    rows = column({"m": values})
    np.testing.assert_allclose(ranking.observed_scores(rows, ["m"]), [np.nanmean(values)])
    drawn = ranking.bootstrap_scores(rows, ["m"], n_boot=200)
    drawn = drawn[~np.isnan(drawn)]  # NaN only where a resample drew nothing but missing values
    assert len(drawn) > 150 and drawn.min() >= 0.5 and drawn.max() <= 0.7  # a missing value never counts as 0


def test_kendall_tau_is_scipys_tau_b():
    rng = np.random.default_rng(4)
    for _ in range(20):
        a, b = rng.integers(0, 4, 6).astype(float), rng.integers(0, 4, 6).astype(float)  # ties on both sides
        expected = stats.kendalltau(a, b).statistic
        assert ranking.kendall_tau(a, b[None])[0] == pytest.approx(expected, nan_ok=True)


def ordered_methods(n_seeds: int, rng) -> dict[str, np.ndarray]:
    """Five methods 1 point apart whose seeds scatter by 3 points: the order is clear only with many seeds."""
    return {f"m{k}": noisy(0.6 + 0.01 * k, rng, n_seeds, 30, seed_sd=0.03, case_sd=0.002) for k in range(5)}


def test_the_tau_interval_holds_the_point_and_narrows_with_more_seeds():
    paper = {f"m{k}": 60.0 + k for k in range(5)}  # the paper's order is the true one
    widths = {3: [], 30: []}
    for n_seeds, draw in ((n, d) for n in widths for d in range(4)):  # four columns each: one column's width is noisy
        rows = column(ordered_methods(n_seeds, np.random.default_rng(draw)))
        tau, low, high = ranking.kendall_interval(rows, paper, n_boot=500, seed=0)
        measured = ranking.observed_scores(rows, list(paper))
        assert tau == pytest.approx(stats.kendalltau(list(paper.values()), measured).statistic)
        assert low <= tau <= high, (n_seeds, tau, low, high)
        widths[n_seeds].append(high - low)
    assert np.mean(widths[3]) > np.mean(widths[30]) + 0.15, widths  # a cases-only bootstrap would not see the seeds' scatter


def test_tau_needs_two_methods_of_the_paper():
    rows = column({"a": np.ones((2, 3)), "b": np.zeros((2, 3))})
    assert np.isnan(ranking.kendall_interval(rows, {"a": 1.0, "gone": 2.0})).all()
    tau, low, high = ranking.kendall_interval(rows, {"a": 1.0, "b": 0.0}, n_boot=100)
    assert (tau, low, high) == (1.0, 1.0, 1.0)


def test_rank_one_for_one_of_two_identical_methods_is_as_rare_as_a_false_positive_of_the_test():
    """Two methods identical in distribution (3 seeds, seed sd 2 points, 1,000 cases): one of them at rank 1 in ≥ 95 % of
    the resamples in at most 5 % of simulated columns plus the Monte Carlo margin (99 % one-sided binomial); a resample
    of the seeds themselves did so in about a quarter of them. 500 resamples per column (the page draws 1,000) keep the
    test at a few seconds; the share at rank 1 does not depend on their number beyond its own Monte Carlo noise."""
    rng = np.random.default_rng(11)
    columns, n_boot = 250, 500
    certain = 0
    for _ in range(columns):
        case = 0.15 * rng.standard_normal((1, 1, 1000))  # shared by both methods: paired cases
        values = 0.7 + case + 0.02 * rng.standard_normal((2, 3, 1)) + 0.05 * rng.standard_normal((2, 3, 1000))
        scores = ranking.draw_scores(values, np.ones(values.shape, bool), np.array([3, 3]), n_boot, rng)
        at_one = (ranking.ranks(scores, True, rng) == 1).mean(axis=0)  # (2,): each method's share of rank 1
        certain += bool((at_one >= 0.95).any())
    margin = stats.norm.ppf(0.99) * np.sqrt(0.05 * 0.95 / columns)
    assert certain / columns <= 0.05 + margin, certain / columns


def test_the_three_ranking_schemes_on_a_toy_column_with_a_known_answer():
    """One seed each, three cases. Means: a 0.70, b 0.60, c 0.65 → a, c, b. Per case, b is second to a twice by a hair
    and last once by a lot: mean ranks a 1, b 2.33, c 2.67 → a, b, c. Significant wins (given): b beats c, nothing else
    resolved → b first, a and c share rank 2."""
    values = {"a": np.array([[0.91, 0.91, 0.28]]), "b": np.array([[0.90, 0.90, 0.0]]), "c": np.array([[0.89, 0.89, 0.17]])}
    rows = column(values)
    methods = ["a", "b", "c"]
    better = pd.DataFrame(False, index=methods, columns=methods)
    better.loc["b", "c"] = True
    ranks = ranking.scheme_ranks(rows, methods, higher_is_better=True, better=better)
    assert list(ranks.columns) == list(ranking.SCHEMES)
    assert ranks["mean-then-rank"].to_dict() == {"a": 1, "b": 3, "c": 2}
    assert ranks["rank-then-mean"].to_dict() == {"a": 1, "b": 2, "c": 3}
    assert ranks["test-then-rank"].to_dict() == {"a": 2, "b": 1, "c": 2}
    flipped = ranking.scheme_ranks(rows, methods, higher_is_better=False, better=better)  # lower is better: the means reverse
    assert flipped["mean-then-rank"].to_dict() == {"a": 3, "b": 1, "c": 2}


def test_a_method_with_one_seed_is_not_ranked():
    """Two identical methods, 3 seeds against 1: with the one training held fixed the bootstrap put one at rank 1 in
    ≥ 95 % of resamples in 27 % of columns. A method with one seed is not ranked: `rankable` leaves it out (the page names
    it under the rank plot) and `rank_distribution` refuses it."""
    rng = np.random.default_rng(5)
    rows = column({"three": noisy(0.8, rng), "one": noisy(0.8, rng, n_seeds=1), "other": noisy(0.7, rng)})
    assert ranking.rankable(rows, ["three", "one", "other"]) == (["three", "other"], ["one"])
    with pytest.raises(ValueError, match=r"cannot rank \['one'\]: fewer than two seeds"):
        ranking.rank_distribution(rows, ["three", "one"], higher_is_better=True)
    assert list(ranking.rank_distribution(rows, ["three", "other"], higher_is_better=True).index) == ["three", "other"]
