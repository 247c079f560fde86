"""Statistics on the long results table (docs/methods.md#statistics): paired comparisons of the reference method with
each other method that see both sources of variance, the trained model (seed) and the test case.

Mean ± std over seeds for the tables is `bench.evaluate.long_table.summarise`; this module adds whether the reference
method beats each other method, by how much, and how sure that is.

The verdict's test (`seed_case_test`, docs/methods.md#statistics): per method a (seeds × cases) matrix of values on the
cases both methods have. The difference of the two methods' means, Δ, has the variance

    Var(Δ) = s²_ref / S_ref + s²_other / S_other + s²_d / C

where s² is the sample variance of a method's per-seed means over the cases (how much two trainings of one method
differ, test-case noise included), S its number of seeds, and s²_d the sample variance over the C cases of the paired
per-case difference of seed-averaged values (how much the difference depends on which cases were drawn). The first two
terms are Welch's, with the seed as the unit; the third adds the test cases as a second unit of replication. Δ / √Var
is referred to Student's t with `seed_df` degrees of freedom (docs/methods.md#statistics): the smallest
Welch–Satterthwaite df of the three terms over the seed variances' joint confidence region (each seed variance at its
one-sided SEED_DF_LEVEL limits, the case term as estimated), and never fewer than the smaller method's S − 1. The plain
Welch–Satterthwaite df, estimated from the same one- or two-df seed variances, jumps towards the case count whenever
those come out small by chance, and the test then rejected up to 12 times too often at Holm's levels (0.0033, 0.001);
the region's df stays at S − 1 wherever the seed terms can matter and grows only where even their upper limits are
small beside the case term. The 95 % interval is Δ ± t·√Var. The residual (seed × case) variance enters both the seed and the case terms, so V overstates Var(Δ) by up
to 2× where the residual dominates (few cases, little seed spread): the test errs on the safe side, at a cost in power
that docs/methods.md#statistics states; with one seed of either method the training variance is unknown and there is no
p-value. `bench power` proves the error rate by simulation.

One Holm family per comparison (`family_pairs`): per column (dataset × raters × noise × reference × metric × structure),
the reference method against every other method of the column but the Oracle and parameter-sweep cells, plus each pair
a claim of the study names whose two methods the column has. `paired_tests` and `family_tests` always adjust over that whole family, whichever rows
a caller asks for, so the tables, box plots, claims and page read one p_holm per comparison.

The paper's test is kept beside it, labelled as such, never as a verdict's only basis: a paired two-sided Wilcoxon
signed-rank test (Wilcoxon 1945) on per-case values averaged over seeds (`compare_pair`), whose unit is the test case
alone, with the matched-pairs rank-biserial correlation (Kerby 2014) and the median paired difference as its effect
sizes. Every effect is signed so that a positive value favours the reference method.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.multitest import multipletests

from bench.evaluate.long_table import GROUP, select
from bench.report.rows import is_param_variant
from bench.study import Study

ALPHA = 0.05  # two-sided, of each Holm-adjusted comparison
SEED_DF_LEVEL = 0.10  # each seed variance's one-sided confidence limits that `seed_df` ranges over
POWER = 0.80  # of the "seeds needed" estimates
MAX_SEEDS = 50  # the most seeds a "seeds needed" estimate considers

TEST_COLUMNS = [
    *GROUP,
    "structure",
    "metric",
    "reference_method",
    "method",
    "n",
    "n_nan",
    "n_seeds_ref",
    "n_seeds",
    "diff",
    "se",
    "df",
    "ci_low",
    "ci_high",
    "p",
    "p_holm",
    "seeds_needed",
    "statistic",
    "n_zero",
    "p_wilcoxon",
    "p_wilcoxon_holm",
    "effect_size",
    "median_diff",
]


def default_exclude(paper: Study) -> tuple[str, ...]:
    """The study's Oracle is trained on ground truth: an upper bound, not a competitor, so by default it is left out of
    the comparisons (it would only enlarge the Holm family)."""
    return (paper.oracle,)


def welch_df(var_ref, var_other, var_case, s_ref: int, s_other: int, c: int):
    """The Welch–Satterthwaite degrees of freedom of the three variance terms (arrays or floats)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return (var_ref + var_other + var_case) ** 2 / (var_ref**2 / (s_ref - 1) + var_other**2 / (s_other - 1) + var_case**2 / (c - 1))


def seed_df(var_ref, var_other, var_case, s_ref: int, s_other: int, c: int, level: float = SEED_DF_LEVEL):
    """The degrees of freedom the test refers Δ / √Var to: the smallest `welch_df` over the four corners of the seed
    variances' confidence region (each term × (S − 1) / χ²_{S−1} at its `level` and 1 − `level` quantiles), the case
    term as estimated (C − 1 df), and at least min(S) − 1. Where the seed terms could dominate Var, one of them at its
    upper limit and the other at its lower makes the smaller S − 1 the df; where even their upper limits are small
    beside the case term, the df stays near the case count. Proven by simulation at 0.05, 0.01, 0.0033 and 0.001
    (tests/test_stats.py, docs/methods.md#statistics)."""
    corners = []
    for s, var in ((s_ref, var_ref), (s_other, var_other)):
        high, low = (s - 1) / stats.chi2.ppf(level, s - 1), (s - 1) / stats.chi2.ppf(1 - level, s - 1)
        corners.append((var * high, var * low))
    low = np.minimum.reduce([welch_df(a, b, var_case, s_ref, s_other, c) for a in corners[0] for b in corners[1]])
    return np.maximum(low, min(s_ref, s_other) - 1)


def seed_case_test(ref: np.ndarray, other: np.ndarray, alpha: float = ALPHA) -> dict[str, np.ndarray]:
    """The two-level paired comparison of the module docstring, vectorised over any leading dimensions.

    ref (..., S_ref, C) and other (..., S_other, C): values per seed and case on the same C cases, signed so that
    higher favours `ref`. A NaN (a metric undefined for one seed on one case) is left out of the means it would enter;
    each case needs a value from at least one seed of each method. Returns arrays of shape (...): diff (mean ref − mean
    other), se, df, ci_low, ci_high (the 1 − alpha interval), p (two-sided), and the three variance terms var_ref,
    var_other, var_case whose sum is se². With S < 2 for either method, or C < 2, p, se and the interval are NaN.
    """
    ref, other = np.asarray(ref, dtype=float), np.asarray(other, dtype=float)
    s_ref, s_other, c = ref.shape[-2], other.shape[-2], ref.shape[-1]
    seeds_ref, seeds_other = np.nanmean(ref, -1), np.nanmean(other, -1)  # (..., S): each trained model's case mean
    diff = seeds_ref.mean(-1) - seeds_other.mean(-1)
    nan = np.full(diff.shape, np.nan)
    if min(s_ref, s_other) < 2 or c < 2:
        return {
            "diff": diff,
            "se": nan,
            "df": nan,
            "ci_low": nan,
            "ci_high": nan,
            "p": nan,
            "var_ref": nan,
            "var_other": nan,
            "var_case": nan,
        }
    var_ref = seeds_ref.var(-1, ddof=1) / s_ref
    var_other = seeds_other.var(-1, ddof=1) / s_other
    var_case = np.var(np.nanmean(ref, -2) - np.nanmean(other, -2), -1, ddof=1) / c
    var = var_ref + var_other + var_case
    df = seed_df(var_ref, var_other, var_case, s_ref, s_other, c)
    with np.errstate(divide="ignore", invalid="ignore"):
        se = np.sqrt(var)
        t = diff / se
    df = np.where(var > 0, df, np.nan)
    p = np.where(var > 0, 2 * stats.t.sf(np.abs(t), df), np.where(diff == 0, 1.0, 0.0))
    half = np.where(var > 0, stats.t.ppf(1 - alpha / 2, df) * se, 0.0)  # no spread at all: the difference is exact
    return {
        "diff": diff,
        "se": se,
        "df": df,
        "ci_low": diff - half,
        "ci_high": diff + half,
        "p": p,
        "var_ref": var_ref,
        "var_other": var_other,
        "var_case": var_case,
    }


def seeds_needed(
    var_seed_ref: float, var_seed_other: float, var_case: float, n_cases: int, gap: float, alpha: float = ALPHA, power: float = POWER
) -> float:
    """Seeds per method (the same for both) at which the test would find `gap` with the given power, or inf if no count
    up to MAX_SEEDS does (the case term alone is too wide: more test cases are needed), NaN if unknown.

    var_seed_* are the variances of one seed's mean (s² of the module docstring, not divided by S); var_case is the case
    term s²_d / C, held at its measured value. Power from the t approximation: (t_{1−α/2} + t_{power})·se(S) ≤ |gap|,
    with the test's own degrees of freedom (`seed_df`, the seed variances taken as measured with S seeds).
    """
    if any(math.isnan(v) for v in (var_seed_ref, var_seed_other, var_case, gap)) or gap == 0:
        return math.nan
    for s in range(2, MAX_SEEDS + 1):
        a, b = var_seed_ref / s, var_seed_other / s
        var = a + b + var_case
        df = float(seed_df(a, b, var_case, s, s, n_cases)) if var > 0 else math.inf
        if (stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(power, df)) * math.sqrt(var) <= abs(gap):
            return float(s)
    return math.inf


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
    """The paper's test on two aligned per-case arrays of seed-averaged values (NaN pairs dropped here).

    Test: scipy.stats.wilcoxon(ref, other, zero_method="wilcox", alternative="two-sided",
    method="auto"): pairs with a zero difference are discarded (counted in n_zero); without
    ties or zeros the p-value is exact for n ≤ 50; with ties or zeros SciPy uses an exhaustive
    permutation for n ≤ 13 and the tie-corrected normal approximation above (no continuity
    correction). `statistic` is SciPy's: the smaller of the two signed-rank sums. Its unit is the
    test case alone: it does not see how much two trainings of one method differ.

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
        "n_zero": n_zero,
        "statistic": float("nan"),
        "p_wilcoxon": float("nan"),
        "effect_size": rank_biserial(diff),
        "median_diff": float(np.median(diff)) if diff.size else float("nan"),
    }
    if diff.size - n_zero == 0:  # nothing to rank: the test is undefined, not "p = 1"
        return out
    result = stats.wilcoxon(ref, other, zero_method="wilcox", alternative="two-sided", method="auto")
    out["statistic"] = float(result.statistic)
    out["p_wilcoxon"] = float(result.pvalue)
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


def seed_case_matrix(part: pd.DataFrame, method: str) -> pd.DataFrame:
    """One method's values of one comparison group as a (seeds × cases) frame."""
    return part[part["method"] == method].set_index(["seed", "case"])["value"].unstack("case")


def compare_models(ref: pd.DataFrame, other: pd.DataFrame, higher_is_better: bool = True) -> dict:
    """The verdict's test (`seed_case_test`) and the paper's (`compare_pair`) on two (seeds × cases) frames.

    Only the cases both methods were scored on are paired, and only those with a finite value in every seed of both
    methods: a case missing in one seed would enter that seed's mean and not the others', so the seeds would no longer
    be scored on the same cases. Dropped cases are counted in n_nan; `n` is the number of cases compared.
    """
    shared = ref.columns.intersection(other.columns)
    ref, other = ref[shared].to_numpy(float), other[shared].to_numpy(float)
    if not higher_is_better:
        ref, other = -ref, -other
    keep = np.isfinite(ref).all(0) & np.isfinite(other).all(0)
    ref, other = ref[:, keep], other[:, keep]
    out = {"n": int(keep.sum()), "n_nan": int((~keep).sum()), "n_seeds_ref": ref.shape[0], "n_seeds": other.shape[0]}
    if out["n"] == 0:
        return {
            **out,
            **{k: math.nan for k in ("diff", "se", "df", "ci_low", "ci_high", "p", "seeds_needed")},
            **compare_pair(np.array([]), np.array([])),
        }
    test = {k: float(v) for k, v in seed_case_test(ref, other).items()}
    s_ref, s_other = ref.shape[0], other.shape[0]
    needed = seeds_needed(test["var_ref"] * s_ref, test["var_other"] * s_other, test["var_case"], out["n"], test["diff"])
    wilcoxon = compare_pair(np.nanmean(ref, 0), np.nanmean(other, 0))  # already signed: higher favours ref
    return {**out, **{k: test[k] for k in ("diff", "se", "df", "ci_low", "ci_high", "p")}, "seeds_needed": needed, **wilcoxon}


def family_pairs(paper: Study, present: set[str], reference_method: str, extra: Sequence[str] = ()) -> list[tuple[str, str]]:
    """The registered comparisons of one column (module docstring), each (a, b) once: the reference method against every
    other method in `present` but the Oracle and parameter-sweep cells (`lf-net@beta=3`, drawn in the parameter figures,
    never tested), and against each of `extra` (a caller's explicit choice, Oracle included); then each pair named by a
    claim of the study (`paper`) whose two methods are present."""
    registered = [m for m in present if m not in default_exclude(paper) and not is_param_variant(m)]
    others = [m for m in sorted(present) if m != reference_method and (m in registered or m in extra)]
    pairs = [(reference_method, m) for m in others] if reference_method in present else []
    seen = {frozenset(p) for p in pairs}
    for claim in paper.claims:
        for a, b in claim.params.get("pairs", []):
            if a in present and b in present and frozenset((a, b)) not in seen:
                pairs.append((a, b))
                seen.add(frozenset((a, b)))
    return pairs


def family_tests(
    paper: Study, part: pd.DataFrame, reference_method: str, higher_is_better: bool = True, extra: Sequence[str] = ()
) -> list[dict]:
    """Every comparison of one column's family (`family_pairs`), each Holm-adjusted over the whole family.

    `part`: the long rows of one column (one group, metric and structure). Returns one dict per pair: reference_method
    (the pair's first method, the one a positive diff favours), method, and `compare_models`'s keys, with p_holm and
    p_wilcoxon_holm.
    """
    return holm_family(part, family_pairs(paper, set(part["method"]), reference_method, extra), higher_is_better)


def holm_rows(p: np.ndarray) -> np.ndarray:
    """Holm's adjustment of each row of p (..., m) at once (no NaN): what `holm` does to one family, for simulations of
    many families (tests/test_significance.py, scripts/calibrate_stats.py)."""
    order = np.argsort(p, axis=-1)
    ranked = np.take_along_axis(p, order, axis=-1) * (p.shape[-1] - np.arange(p.shape[-1]))
    adjusted = np.minimum(np.maximum.accumulate(ranked, axis=-1), 1.0)
    out = np.empty_like(adjusted)
    np.put_along_axis(out, order, adjusted, axis=-1)
    return out


def holm_family(part: pd.DataFrame, pairs: Sequence[tuple[str, str]], higher_is_better: bool = True) -> list[dict]:
    """The seed-aware test (`compare_models`) of each (a, b) of `pairs` on one column's long rows `part` (one group, metric
    and structure), Holm-adjusted over `pairs`: one dict per pair, reference_method a (a positive diff favours a), method b,
    `compare_models`'s keys, p_holm and p_wilcoxon_holm."""
    matrices = {m: seed_case_matrix(part, m) for m in {m for pair in pairs for m in pair}}
    family = [{"reference_method": a, "method": b, **compare_models(matrices[a], matrices[b], higher_is_better)} for a, b in pairs]
    for column in ("p", "p_wilcoxon"):
        for row, p_adj in zip(family, holm([r[column] for r in family])):
            row[f"{column}_holm"] = float(p_adj)
    return family


def leader_tests(part: pd.DataFrame, leader: str, others: Sequence[str], higher_is_better: bool = True) -> dict[str, dict]:
    """`leader` against each of `others` (`holm_family`, Holm over these comparisons): other -> its row, a positive diff in
    the leader's favour. What a table's bold rests on (bench/report/tables.py `mark_best`)."""
    return {r["method"]: r for r in holm_family(part, [(leader, m) for m in others], higher_is_better)}


def resolved(row: dict | None, alpha: float = ALPHA) -> bool:
    """A comparison (`holm_family` row) resolved in its reference method's favour: Holm-adjusted p below alpha, diff > 0."""
    return row is not None and not math.isnan(row["p_holm"]) and row["p_holm"] < alpha and row["diff"] > 0


def every_pair(part: pd.DataFrame, methods: Sequence[str], higher_is_better: bool = True) -> list[dict]:
    """Every pair of `methods` (in the given order, each pair once) with rows in `part`, Holm over all the pairs."""
    present = [m for m in methods if m in set(part["method"])]
    return holm_family(part, [(a, b) for i, a in enumerate(present) for b in present[i + 1 :]], higher_is_better)


def pair_test(family: list[dict], better: str, worse: str) -> dict | None:
    """The row of `family` (`family_tests`) comparing `better` with `worse`, signed so that a positive diff favours
    `better`; None when the family has no such comparison."""
    for row in family:
        if (row["reference_method"], row["method"]) == (better, worse):
            return dict(row)
        if (row["reference_method"], row["method"]) == (worse, better):
            flipped = {
                **row,
                "reference_method": better,
                "method": worse,
                "diff": -row["diff"],
                "ci_low": -row["ci_high"],
                "ci_high": -row["ci_low"],
                "effect_size": -row["effect_size"],
                "median_diff": -row["median_diff"],
                "n_seeds_ref": row["n_seeds"],
                "n_seeds": row["n_seeds_ref"],
            }
            return flipped
    return None


def paired_tests(
    paper: Study,
    table: pd.DataFrame,
    metric: str,
    structure: str,
    reference_method: str | None = None,
    higher_is_better: bool = True,
    others: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Reference method (default: the study's, `paper.reference_method`) vs each other method: the seed-aware test and
    the paper's Wilcoxon, each Holm-adjusted over the column's whole family (`family_pairs`), whichever rows are asked for.

    Per dataset × raters × noise × reference, the rows of the reference method against `others`, or by default against
    every method of its family (`family_pairs`: all but the Oracle and parameter-sweep cells); `compare_models` on the
    two methods' (seeds × cases) values. A group without the reference method yields no rows.

    Returns columns TEST_COLUMNS: the group, structure, metric, reference_method, method; n cases compared (n_nan
    dropped), the seeds of each; diff (mean difference, positive favours the reference method), se, df, its 95 %
    interval ci_low–ci_high, p and p_holm (the verdict's test), seeds_needed (per method, to find a gap of the measured
    size with 80 % power); the paper's Wilcoxon on seed-averaged cases: statistic, n_zero, p_wilcoxon, p_wilcoxon_holm,
    effect_size (rank-biserial), median_diff.
    """
    reference_method = reference_method or paper.reference_method
    rows = select(table, metric=metric, structure=structure)
    out = []
    for key, part in rows.groupby(GROUP, dropna=False, sort=True):
        present = set(part["method"])
        if reference_method not in present:
            continue
        family = {
            r["method"]: r
            for r in family_tests(paper, part, reference_method, higher_is_better, extra=others or ())
            if r["reference_method"] == reference_method
        }
        wanted = others if others is not None else list(family)
        out += [{**dict(zip(GROUP, key)), "structure": structure, "metric": metric, **family[m]} for m in wanted if m in family]
    return pd.DataFrame(out, columns=TEST_COLUMNS)
