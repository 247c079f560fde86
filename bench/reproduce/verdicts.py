"""The verdict rules of the reproduction report, stated once (`VALUE_RULE`, `CLAIM_RULE`), and what both its tables
(bench/reproduce/assessment.py) and its claims (bench/reproduce/claims.py) share: a measured value, a row, a protocol group, the
tolerance, and which rater setting is the one the study identifies as the paper's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from bench.evaluate import metrics
from bench.evaluate.long_table import select
from bench.report import stats, table_notes
from bench.report.table_notes import MIN_SEEDS  # a protocol group with fewer seeds per method is a pipeline check
from bench.study import Claim, Column, Study, Table
from datasets import DATASETS

#: The tolerance of a verdict on a value, stated before any number: a measured value and the paper's are "the same"
#: when their difference is within it. For the % metrics (DSC, soft DSC, soft IoU) it is 1.5 points: above the paper's
#: own precision at its median sd (0.45 over 3 runs: a 95 % half-width of 1.1) and below the smallest gap the paper draws
#: a conclusion from (about 4 points), narrowed to a quarter of the spread of the paper's column where that is narrower
#: (RIGA's disc: 2.66 → 0.67). For the others (bAHD) it is 10 % of the paper's value, and never less than 1/40 of the
#: spread of the paper's column, so that a value near 0 is not held to a hair's breadth (0.009 on MNIST: 0.026).
TOLERANCE_POINTS = 1.5
TOLERANCE_SPREAD = 0.25
TOLERANCE_SHARE = 0.10
TOLERANCE_FLOOR = 1 / 40
#: "Experiments are repeated at least 3 times": the paper's n, read at its most conservative (the widest interval).
PAPER_RUNS = 3
ALPHA = stats.ALPHA  # of the Holm-adjusted paired tests behind a claim


def scale(metric: str) -> float:
    """Paper units per stored unit, from the metric's descriptor: 100 for DSC, soft DSC and soft IoU (stored as fractions)."""
    return metrics.get(metric).scale if metric in metrics.METRICS else 1.0


def digits(metric: str) -> int:
    """The decimals the paper prints (its descriptor's): 2 for the % metrics, 3 for bAHD."""
    return metrics.get(metric).digits if metric in metrics.METRICS else 2


def tolerance(metric: str, paper_mean: float, column: list[float]) -> float:
    """The tolerance (paper units) of a value of `metric` whose paper column holds the values `column` (trained methods)."""
    spread = max(column) - min(column) if len(column) > 1 else math.inf
    if scale(metric) == 100:
        return min(TOLERANCE_POINTS, TOLERANCE_SPREAD * spread)
    return max(TOLERANCE_SHARE * abs(paper_mean), TOLERANCE_FLOOR * spread if math.isfinite(spread) else 0.0)


REPRODUCE_POWER_TEXT = "80 %"  # REPRODUCE_POWER, as VALUE_RULE says it

#: The verdict of a value that no measurement could reproduce: the paper's own precision alone (its 95 % half-width from
#: its sd over PAPER_RUNS runs) already uses the whole tolerance.
UNATTAINABLE = "unattainable with the paper's stated precision"


VALUE_RULE = (
    "A value is **reproduced** when the 95 % confidence interval of (measured − paper) lies inside ± the tolerance, **not "
    "reproduced** when it lies entirely outside, and **inconclusive** otherwise; both decisions are two one-sided tests "
    "at 2.5 % each (stricter than the usual 5 % TOST, which reads a 90 % interval). The interval adds the two sides' "
    "95 % half-widths in quadrature, each from its own t (Banerjee's conservative interval): the measured mean's over its "
    f"seeds and the paper's, its sd over the {PAPER_RUNS} runs it states at least (the most conservative reading), so "
    "it never widens as the measured sd falls; one seed gives no interval (inconclusive). An inconclusive value that a "
    "faithful rerun with the seeds at hand (its true mean the paper's, its seed sd the measured one) would reproduce less "
    f"than half the time says the seeds that would reach {REPRODUCE_POWER_TEXT} (**inconclusive: needs N seeds**). Where the paper's half-width "
    f"alone reaches the tolerance no measurement can be reproduced: such a value is **{UNATTAINABLE}** unless its "
    "interval lies outside. The tolerance is stated before any number: "
    f"{TOLERANCE_POINTS:g} points for DSC, soft DSC and soft IoU (%), or a quarter of the spread of the paper's column "
    f"where that is narrower (RIGA's disc); {TOLERANCE_SHARE:.0%} of the paper's value for bAHD, never less than 1/40 of "
    "its column's spread. A group is a **pipeline check, not a verdict**, whatever it shows, when a cell of it ran at the "
    f"`quick` budget, with a step cap, on fewer training or test images than its dataset has, or with fewer than "
    f"{MIN_SEEDS} seeds per method, or on a dataset that stands in for another; a sample of the paper's dataset (mnist-5k "
    "of MNIST) gets a verdict, marked as such. A column the paper scored against a ground truth it drew and did not "
    "release (LIDC, RIGA's experts) is **not comparable** value for value; only its rankings are checked, against this "
    "benchmark's reference."
)


CLAIM_RULE = (
    "Every comparison behind a claim is the seed-aware paired test (docs/methods.md#statistics): the difference of two "
    "methods' means with a 95 % interval whose variance counts both the seed-to-seed spread of each method's trained "
    "models and the case-to-case spread of their paired difference, its p Holm-adjusted once per column over that "
    "column's registered comparisons (the reference method against every other method, and each pair a claim names), "
    "the same p the tables and box plots show. Each pair is **ahead** or **behind** when significant "
    f"(p < {ALPHA:g}) one way or the other, shows **no material difference** when not significant and its interval lies "
    "inside ± the column's tolerance, and is unresolved otherwise. A claimed order (a method beats another, is best, "
    "each module helps) is judged by direction: it **holds** when every pair is ahead, **does not hold** only when one "
    "is behind, shows **no material difference** when a pair is inside the tolerance (a gap smaller than the tolerance "
    "is no refutation), and is **inconclusive** otherwise, with the seeds per method at which a true gap of that size "
    'would be found with 80 % power. "Every competitor" means the rows of the paper\'s table. A claimed margin is '
    "measured against the paper's best competitor row (or the named ones): a pair behind refutes it; it holds when the "
    "interval's lower end reaches the claimed points minus the tolerance and does not hold when its upper end falls "
    "below that. A claim of no effect **holds** only on equivalence (every interval inside ± the tolerance) and does "
    "not hold when an interval lies entirely outside it. A pair not run leaves a check **incomplete** unless a pair "
    "that ran already refutes it. A claim on label statistics is checked on the rater pool itself, without training. "
    "A claim is judged part by part of its scope (each column, and each noise level of a noise claim), on the "
    "verdict-grade groups of each dataset, the paper's setting where the dataset has one: a part with no cell or only "
    "pipeline checks makes it **incomplete**, naming the part; with only pipeline checks behind it, a claim is a "
    "**pipeline check**; with no cell behind it, **not run**. Each verdict names its budget: under this benchmark's "
    "`plateau` protocol, the paper's own recipe (`paper` budget) is a different protocol."
)


@dataclass
class Measured:
    """One method's value in one column under one setting, in the paper's units."""

    mean: float
    sd: float
    n: int
    ci: tuple[float, float]


@dataclass
class Entry:
    method: str
    paper: tuple[float, float] | None
    measured: Measured | None
    verdict: str = ""
    delta: tuple[float, float, float] | None = None  # measured − paper with its 95 % interval (`difference_interval`)
    tolerance: float = math.nan  # the value's tolerance, paper units


def judge(entry: Entry, tol: float) -> Entry:
    """Set a measured entry's Δ interval, tolerance and `VALUE_RULE` verdict; an inconclusive value that a faithful rerun
    with the seeds at hand would reproduce less than half the time says how many seeds would reach REPRODUCE_POWER."""
    entry.delta, entry.tolerance = difference_interval(entry.paper, entry.measured), tol
    entry.verdict = value_verdict(entry.paper, entry.measured, tol)
    m = entry.measured
    if entry.verdict == "inconclusive" and m.n >= 2 and m.sd > 0 and reproduce_chance(entry.paper, m.sd, m.n, tol) < 0.5:
        need = seeds_to_reproduce(entry.paper, m.sd, tol)
        entry.verdict = f"inconclusive: needs {need} seeds" if need else f"inconclusive: needs more than {MAX_RERUN_SEEDS} seeds"
    return entry


REPRODUCE_POWER = 0.80  # the chance of "reproduced" a faithful rerun's seed count is chosen for
MAX_RERUN_SEEDS = 50


def reproduce_chance(paper: tuple[float, float], sd: float, seeds: int, tol: float, sims: int = 4000) -> float:
    """The chance that a faithful rerun reads "reproduced" (`VALUE_RULE`): its true mean the paper's, its seeds spread
    by `sd` (the measured seed sd, paper units), `seeds` of them, the paper's own half-width as stated. By simulation on
    fixed numbers, so one value always reads the same."""
    draws = np.random.default_rng(0).standard_normal((sims, seeds)) * sd
    half_m = scipy_stats.t.ppf(0.975, seeds - 1) * draws.std(1, ddof=1) / math.sqrt(seeds)
    return float(np.mean(np.abs(draws.mean(1)) + np.hypot(half_m, paper_half_width(paper[1])) <= tol))


def seeds_to_reproduce(paper: tuple[float, float], sd: float, tol: float) -> int | None:
    """The fewest seeds (2 … MAX_RERUN_SEEDS) at which a faithful rerun reads "reproduced" with REPRODUCE_POWER; None
    where no count does (the paper's own half-width leaves no room)."""
    return next((s for s in range(2, MAX_RERUN_SEEDS + 1) if reproduce_chance(paper, sd, s, tol, 2000) >= REPRODUCE_POWER), None)


@dataclass
class Group:
    """One rater setting's measurements of a paper table: the column group of the report."""

    dataset: str
    raters: str
    kind: str  # "verdict", "pipeline check" (quick budget or stand-in) or "not comparable"
    note: str
    budget: str
    labels: dict  # label-level statistics of the training pool (bench/run/split_cache.py)
    stops: str
    entries: dict[int, list[Entry]] = field(default_factory=dict)  # column index -> rows
    ranking: dict[int, dict] = field(default_factory=dict)  # column index -> Kendall tau, p, winners, best-vs-reference test
    extra: dict[int, pd.DataFrame] = field(default_factory=dict)  # column index -> precision / recall / area per method
    stands_in_for: str = ""  # the table's own dataset where this one stands in for it (mnist-5k for Choledoch): its Δ means nothing
    degenerate: dict[str, str] = field(default_factory=dict)  # method -> "empty 2/3" where its predictions were degenerate


@dataclass
class ClaimReport:
    claim: Claim
    verdict: str
    evidence: list[str]


def measure(values: np.ndarray, scale: float) -> Measured:
    values = np.asarray(values, dtype=float) * scale
    n, mean = len(values), float(np.mean(values))
    sd = float(np.std(values, ddof=1)) if n > 1 else math.nan
    half = float(scipy_stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)) if n > 1 else math.nan
    return Measured(mean, sd, n, (mean - half, mean + half))


def paper_half_width(sd: float) -> float:
    """The paper's own 95 % half-width (paper units) for a value stated with sd over PAPER_RUNS runs; 0 without an sd."""
    return 0.0 if math.isnan(sd) else float(scipy_stats.t.ppf(0.975, PAPER_RUNS - 1)) * sd / math.sqrt(PAPER_RUNS)


def difference_interval(paper: tuple[float, float], measured: Measured) -> tuple[float, float, float]:
    """(measured − paper, low, high): the difference with its 95 % interval (`VALUE_RULE`); NaN bounds with one seed.

    Banerjee's interval: half-width √(h_m² + h_p²) with h_m = t_{n−1} · sd_m / √n and h_p = `paper_half_width`. Each
    side keeps its own t, so the width never grows as the measured sd falls (a Welch interval's pooled degrees of freedom
    can: more measured spread lends it more degrees of freedom). A measured pool statistic (n = 0, the Average row) and a
    paper value without sd count as exact numbers."""
    mean, sd = paper
    diff = measured.mean - mean
    if measured.n == 1:
        return diff, math.nan, math.nan
    half_m = 0.0 if measured.n == 0 else float(scipy_stats.t.ppf(0.975, measured.n - 1)) * measured.sd / math.sqrt(measured.n)
    half = math.hypot(half_m, paper_half_width(sd))
    return diff, diff - half, diff + half


def value_verdict(paper: tuple[float, float], measured: Measured, tol: float) -> str:
    """`VALUE_RULE` for one value at tolerance `tol` (paper units, `tolerance`)."""
    _, low, high = difference_interval(paper, measured)
    if math.isnan(low):
        return "inconclusive"
    if -tol <= low and high <= tol:
        return "reproduced"
    if high < -tol or low > tol:
        return "not reproduced"
    return UNATTAINABLE if paper_half_width(paper[1]) >= tol else "inconclusive"


def column_tolerance(table: Table, j: int, metric: str, paper_mean: float | None = None) -> float:
    """`tolerance` of a value in column j of a paper table (the column's trained methods: not the Average row); without
    `paper_mean`, at the column's median (which matters for bAHD only)."""
    values = [v[0] for r in table.rows if r.method != "average" and (v := table.value(r.method, j))]
    return tolerance(metric, float(np.median(values)) if paper_mean is None and values else paper_mean or 0.0, values)


def study_tolerance(column: Column, paper: Study, paper_mean: float | None = None) -> float:
    """The tolerance of a comparison or value on `column`: that of the first paper table column with its dataset, metric
    and structure (`column_tolerance`), else the metric's own."""
    for t in paper.tables:
        for j, c in enumerate(t.columns):
            if (c.dataset, c.metric, c.structure) == (column.dataset, column.metric, column.structure):
                return column_tolerance(t, j, c.metric, paper_mean)
    return tolerance(column.metric, paper_mean or 0.0, [])


def measured_reference(column: Column, dataset: str) -> str:
    """What a column's measurements are scored against: its own reference, or the dataset's where the paper's was not released."""
    return DATASETS[dataset].reference if column.reference == "expert" else column.reference


def samples(dataset: str) -> list[str]:
    """A dataset and the datasets that are samples of its images (mnist, mnist-5k)."""
    return [dataset, *(n for n, s in DATASETS.items() if s.subset_of == dataset)]


def stand_ins(table: Table, dataset: str) -> list[str]:
    """Datasets whose cells may appear in a column of `dataset`: itself, its samples, then the table's declared stand-in."""
    out = samples(dataset)
    return out + [table.stand_in] if table.stand_in and table.stand_in not in out else out


def paper_setting(paper: Study, dataset: str) -> str | None:
    """The rater setting the study identifies as the paper's on this dataset (or on the dataset it samples), if any."""
    return paper.paper_raters.get(dataset) or paper.paper_raters.get(DATASETS[dataset].subset_of)


def is_paper_setting(paper: Study, group: Group) -> bool:
    return paper_setting(paper, group.dataset) in (None, group.raters)


def group_for(dataset: str, raters: str, own: str, cells: pd.DataFrame, column: Column, paper: Study) -> Group:
    """The protocol group of a rater setting: how far its cells can be trusted (budget, stand-in, reference), their label
    statistics (at the protocol) and how they stopped (every noise level: a noise sweep is graded as its cells are)."""
    mine = select(cells, dataset=dataset, raters=raters)
    budget = ", ".join(sorted(set(mine["budget"])))
    labels = next((x for x in mine.loc[mine["noise"] == "protocol", "labels"] if x), {})
    counts = mine["stops"].value_counts()
    stops = " · ".join(f"{s or 'unknown'} {c}/{len(mine)}" for s, c in counts.items())
    degenerate = table_notes.method_flags(mine)
    if degenerate:  # most validation cases predicted empty (or full): such a mean measures nothing
        stops += "; degenerate predictions: " + ", ".join(f"{m} {flag}" for m, flag in degenerate.items())
    notes, kind, stands_in_for = [], "verdict", ""
    if dataset != own and DATASETS[dataset].subset_of != own:
        kind, stands_in_for = "pipeline check", own
        notes.append(f"{dataset} stands in for {own}")
    elif dataset != own:
        notes.append(f"on {dataset}, a sample of {own}'s images")
    reasons = pipeline_reasons(mine)
    if reasons:
        kind = "pipeline check"
        shown = [r for r in reasons if r != "budget quick"]  # the group's line names its budget already
        notes += ["pipeline check: " + ", ".join(shown)] if shown else []
    identified = paper_setting(paper, own)
    if identified:
        notes.append("the setting identified as the paper's" if raters == identified else f"not the paper's setting ({identified} is)")
    if column.reference == "expert" and kind == "verdict":
        kind = "not comparable"
        notes.append(
            f"the paper scored against an expert GT it did not release; measured against the {measured_reference(column, dataset)}"
        )
    return Group(dataset, raters, kind, "; ".join(notes), budget, labels, stops, stands_in_for=stands_in_for, degenerate=degenerate)


def pipeline_reasons(cells: pd.DataFrame) -> list[str]:
    """Why a group's cells (rows of `bench.reproduce.assessment.cell_info`) are a pipeline check rather than a verdict, [] if
    they are not: the quick budget, a step cap, fewer training or test images than the dataset has, or fewer than
    MIN_SEEDS seeds for some method."""
    if cells.empty:
        return []
    reasons = []
    if (cells["budget"] == "quick").any():
        reasons.append("budget quick")
    caps = sorted({int(x) for x in cells.get("max_steps", pd.Series(dtype=float)).dropna()})
    if caps:
        reasons.append(f"step cap {', '.join(map(str, caps))} (--max-steps)")
    for split in ("train", "test"):
        cut = cells[cells.get(f"{split}_size", pd.Series(index=cells.index, dtype=float)).notna()]
        if len(cut):
            reasons.append(f"{split} set cut to {int(cut[f'{split}_images'].max())} images (--{split}-size)")
    seeds = cells.groupby("method")["seed"].nunique()
    if seeds.min() < MIN_SEEDS:
        few = ", ".join(f"{m} {n}" for m, n in seeds[seeds < MIN_SEEDS].items())
        reasons.append(f"fewer than {MIN_SEEDS} seeds ({few})")
    return reasons


@dataclass
class TableReport:
    table: Table
    groups: list[Group]
    not_run: dict[str, str]  # dataset -> why its columns have no cells (its placement instructions, or not run)
