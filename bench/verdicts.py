"""The verdict rules of the reproduction report, stated once (`VALUE_RULE`, `CLAIM_RULE`), and what both its tables
(bench/reproduction.py) and its claims (bench/claims.py) share: a measured value, a row, a protocol group, the
tolerance, and which rater setting is the one the study identifies as the paper's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from bench import study
from bench.evaluate import metrics
from bench.study import Claim, Column, Study, Table
from datasets import DATASETS

#: The tolerance of a value verdict: points for the % metrics, a share of the paper's value for the others.
TOLERANCE_POINTS = 2.0
TOLERANCE_SHARE = 0.10
ALPHA = 0.05  # of the Holm-adjusted paired tests behind a claim


def scale(metric: str) -> float:
    """Paper units per stored unit, from the metric's descriptor: 100 for DSC, soft DSC and soft IoU (stored as fractions)."""
    return metrics.get(metric).scale if metric in metrics.METRICS else 1.0


def digits(metric: str) -> int:
    """The decimals the paper prints (its descriptor's): 2 for the % metrics, 3 for bAHD."""
    return metrics.get(metric).digits if metric in metrics.METRICS else 2


VALUE_RULE = (
    "A measured value **reproduces** the paper's when the paper's mean lies inside the measured 95 % confidence interval "
    "of the mean over seeds (Student's t with n − 1 degrees of freedom) widened on each side by the paper's standard "
    f"deviation, or within the tolerance of the measured mean: {TOLERANCE_POINTS:g} points for DSC, soft DSC and soft IoU "
    f"(%), {TOLERANCE_SHARE:.0%} of the paper's value for bAHD. With one seed only the tolerance applies. Otherwise it is "
    "**not reproduced**. Cells trained at the `quick` budget, or on a dataset that stands in for another, are a "
    "**pipeline check, not a verdict**, whatever they show; a sample of the paper's dataset (mnist-5k of MNIST) gets a "
    "verdict, marked as such. A column the paper scored against a ground truth it drew and did not release (LIDC, RIGA's "
    "experts) is **not comparable** value for value; only its rankings are checked, against this benchmark's reference."
)


CLAIM_RULE = (
    "A claim about an order (a method beats another, is best, each module helps) **holds** only where the order holds "
    "in the means and every paired two-sided Wilcoxon signed-rank test behind it, on per-case values averaged over "
    f"seeds and Holm-adjusted within each column (dataset, metric, noise level) of the claim, has p < {ALPHA:g} with "
    'its effect in the claimed direction. A claim against "every competitor" means the rows of the paper\'s table. A '
    f"margin claim also needs the measured margin to be at least the claimed one minus {TOLERANCE_POINTS:g} points; a "
    f"claim of no effect holds when each difference is within {TOLERANCE_POINTS:g} points or not significant, either "
    "way. A claim on label statistics is checked on the rater pool itself, without training. Otherwise it **does not "
    "hold**; with only pipeline checks behind it, it is a **pipeline check**; with part of its comparisons missing, "
    "**incomplete**; with no cell behind it, **not run**."
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


@dataclass
class Group:
    """One rater setting's measurements of a paper table: the column group of the report."""

    dataset: str
    raters: str
    kind: str  # "verdict", "pipeline check" (quick budget or stand-in) or "not comparable"
    note: str
    budget: str
    labels: dict  # label-level statistics of the training pool (bench/data.py)
    stops: str
    entries: dict[int, list[Entry]] = field(default_factory=dict)  # column index -> rows
    ranking: dict[int, dict] = field(default_factory=dict)  # column index -> Kendall tau, p, winners, best-vs-reference test
    extra: dict[int, pd.DataFrame] = field(default_factory=dict)  # column index -> precision / recall / area per method


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


def value_verdict(paper: tuple[float, float], measured: Measured, metric: str) -> str:
    """`VALUE_RULE` for one value."""
    mean, sd = paper
    sd = 0.0 if math.isnan(sd) else sd
    tolerance = TOLERANCE_POINTS if scale(metric) == 100 else TOLERANCE_SHARE * abs(mean)
    inside = measured.n > 1 and measured.ci[0] - sd <= mean <= measured.ci[1] + sd
    return "reproduced" if inside or abs(measured.mean - mean) <= tolerance else "not reproduced"


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


def paper_setting(dataset: str) -> str | None:
    """The rater setting the study identifies as the paper's on this dataset (or on the dataset it samples), if any."""
    paper = study.current()
    return paper.paper_raters.get(dataset) or paper.paper_raters.get(DATASETS[dataset].subset_of)


def is_paper_setting(group: Group) -> bool:
    return paper_setting(group.dataset) in (None, group.raters)


def group_for(dataset: str, raters: str, own: str, cells: pd.DataFrame, column: Column, paper: Study) -> Group:
    """The protocol group of a rater setting: how far its cells can be trusted (budget, stand-in, reference), their label
    statistics (at the protocol) and how they stopped (every noise level: a noise sweep is graded as its cells are)."""
    mine = cells[(cells["dataset"] == dataset) & (cells["raters"] == raters)]
    budget = ", ".join(sorted(set(mine["budget"])))
    labels = next((x for x in mine.loc[mine["noise"] == "protocol", "labels"] if x), {})
    counts = mine["stops"].value_counts()
    stops = " · ".join(f"{s or 'unknown'} {c}/{len(mine)}" for s, c in counts.items())
    flagged = mine[mine["flag"] != ""].groupby(["method", "flag"]).size()
    if len(flagged):  # most validation cases predicted empty (or full): such a mean measures nothing
        stops += "; degenerate predictions: " + ", ".join(f"{m} {f} {n}/{(mine['method'] == m).sum()}" for (m, f), n in flagged.items())
    notes, kind = [], "verdict"
    if dataset != own and DATASETS[dataset].subset_of != own:
        kind = "pipeline check"
        notes.append(f"{dataset} stands in for {own}")
    elif dataset != own:
        notes.append(f"on {dataset}, a sample of {own}'s images")
    if "quick" in budget:
        kind = "pipeline check"  # group_line says why: "budget quick (a pipeline check)"
    identified = paper_setting(own)
    if identified:
        notes.append("the setting identified as the paper's" if raters == identified else f"not the paper's setting ({identified} is)")
    if column.reference == "expert" and kind == "verdict":
        kind = "not comparable"
        notes.append(
            f"the paper scored against an expert GT it did not release; measured against the {measured_reference(column, dataset)}"
        )
    return Group(dataset, raters, kind, "; ".join(notes), budget, labels, stops)


@dataclass
class TableReport:
    table: Table
    groups: list[Group]
    not_run: list[str]  # one line per column without cells
