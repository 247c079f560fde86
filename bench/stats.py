"""Statistics on the long results table (docs/methods.md#statistics): per-case values and paired tests against LF-Net.

Mean ± std over seeds for the tables is `bench.evaluate.long_table.summarise`; this module adds what the tables
cannot show: whether the reference method beats each other method on the same test cases.

Protocol (the paper reports p < 0.05 for LF-Net against every competitor on LIDC but names no
test; docs/methods.md#statistics):

1. Per case, average each method's value over its seeds (`bench.evaluate.long_table.per_case`), so the unit of the test is
   the test case, not the (case, seed) pair, whose seeds are not independent observations.
2. For each other method, a paired two-sided Wilcoxon signed-rank test (Wilcoxon 1945) of the
   reference method against it, on the cases both have (`paired_tests`).
3. Holm's step-down adjustment (Holm 1979) across the comparisons of one dataset × reference ×
   noise level × evaluation reference, which controls the family-wise error rate without assuming independence.
4. Effect sizes: the matched-pairs rank-biserial correlation (Kerby 2014) and the median paired
   difference, both signed so that a positive value favours the reference method.
"""

from __future__ import annotations

import gc
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.multitest import multipletests

from bench import study
from bench.evaluate.long_table import GROUP, per_case

TEST_COLUMNS = [
    *GROUP, "structure", "metric", "reference_method", "method",
    "n", "n_nan", "n_zero", "statistic", "p", "p_holm", "effect_size", "median_diff",
]  # fmt: skip


def default_exclude() -> tuple[str, ...]:
    """The study's Oracle is trained on ground truth: an upper bound, not a competitor, so by default it is left out of
    the comparisons (it would only enlarge the Holm family)."""
    return (study.current().oracle,)


def rank_biserial(diff: np.ndarray) -> float:
    """Matched-pairs rank-biserial correlation r = (R+ − R−) / (R+ + R−) (Kerby 2014, "simple difference formula").

    R+ and R− are the sums of the ranks of |d| over the positive and negative differences; zero
    differences are dropped before ranking (as Wilcoxon's zero_method="wilcox") and tied |d| get
    their average rank. r ∈ [−1, 1]: +1 when every nonzero difference is positive. NaN when no
    difference is nonzero.
    """
    diff = np.asarray(diff, dtype=float)
    diff = diff[diff != 0]
    if diff.size == 0:
        return float("nan")
    ranks = stats.rankdata(np.abs(diff))
    r_plus = ranks[diff > 0].sum()
    r_minus = ranks[diff < 0].sum()
    return float((r_plus - r_minus) / (r_plus + r_minus))


def compare_pair(ref: np.ndarray, other: np.ndarray, higher_is_better: bool = True) -> dict:
    """One paired comparison of two aligned per-case arrays (NaN pairs dropped here).

    Test: scipy.stats.wilcoxon(ref, other, zero_method="wilcox", alternative="two-sided",
    method="auto"): pairs with a zero difference are discarded (counted in n_zero); without
    ties or zeros the p-value is exact for n ≤ 50; with ties or zeros SciPy uses an exhaustive
    permutation for n ≤ 13 and the tie-corrected normal approximation above (no continuity
    correction). `statistic` is SciPy's: the smaller of the two signed-rank sums.

    Signs: d = ref − other when higher is better, other − ref otherwise, so a positive
    effect_size and median_diff mean the reference method is better.
    """
    ref = np.asarray(ref, dtype=float)
    other = np.asarray(other, dtype=float)
    finite = ~(np.isnan(ref) | np.isnan(other))
    ref, other = ref[finite], other[finite]
    diff = (ref - other) if higher_is_better else (other - ref)
    n_zero = int((diff == 0).sum())
    out = {
        "n": int(diff.size),
        "n_nan": int((~finite).sum()),
        "n_zero": n_zero,
        "statistic": float("nan"),
        "p": float("nan"),
        "effect_size": rank_biserial(diff),
        "median_diff": float(np.median(diff)) if diff.size else float("nan"),
    }
    if diff.size - n_zero == 0:  # nothing to rank: the test is undefined, not "p = 1"
        return out
    result = stats.wilcoxon(ref, other, zero_method="wilcox", alternative="two-sided", method="auto")
    out["statistic"] = float(result.statistic)
    out["p"] = float(result.pvalue)
    return out


def holm(p: Sequence[float]) -> np.ndarray:
    """Holm-adjusted p-values (statsmodels multipletests, method="holm"); NaN entries stay NaN and are not in the family."""
    p = np.asarray(p, dtype=float)
    adjusted = np.full(p.shape, np.nan)
    valid = ~np.isnan(p)
    if valid.any():
        # statsmodels' Holm branch ends with gc.collect(), ~0.1 s per call once matplotlib and pandas
        # are loaded; freezing the existing objects makes that collection scan only new ones.
        gc.freeze()
        try:
            adjusted[valid] = multipletests(p[valid], method="holm")[1]
        finally:
            gc.unfreeze()
    return adjusted


def paired_tests(
    table: pd.DataFrame,
    metric: str,
    structure: str,
    reference_method: str | None = None,
    higher_is_better: bool = True,
    others: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Reference method (default: the study's) vs each other method: paired Wilcoxon on seed-averaged per-case values,
    Holm-adjusted.

    Per dataset × raters × noise × reference (one Holm family each), for each other method — `others`, or by
    default every other method in the table except the oracle — the cases both methods have are
    paired; pairs where either value is NaN are dropped and counted (n_nan), `n` is the number of
    pairs tested (zeros included; SciPy then discards them, counted in n_zero). See `compare_pair`
    for the test and the signs, `rank_biserial` for the effect size. A group without the reference
    method yields no rows.

    Returns columns TEST_COLUMNS: dataset, raters, noise, reference, structure, metric, reference_method,
    method, n, n_nan, n_zero, statistic, p, p_holm, effect_size, median_diff.
    """
    reference_method = reference_method or study.current().reference_method
    values = per_case(table, metric, structure)
    rows = []
    for key, part in values.groupby(GROUP, dropna=False, sort=True):
        wide = part.pivot(index="case", columns="method", values="value")
        present = part.groupby("method")["case"].apply(set)  # which cases each method was scored on
        if reference_method not in present:
            continue
        candidates = others if others is not None else [m for m in sorted(present.index) if m not in default_exclude()]
        family = []
        for method in candidates:
            if method == reference_method or method not in present:
                continue
            shared = sorted(present[reference_method] & present[method], key=str)
            result = compare_pair(wide.loc[shared, reference_method], wide.loc[shared, method], higher_is_better)
            family.append({**dict(zip(GROUP, key)), "structure": structure, "metric": metric,
                           "reference_method": reference_method, "method": method, **result})  # fmt: skip
        for row, p_adj in zip(family, holm([r["p"] for r in family])):
            row["p_holm"] = float(p_adj)
        rows.extend(family)
    return pd.DataFrame(rows, columns=TEST_COLUMNS)
