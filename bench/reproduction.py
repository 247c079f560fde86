"""Does the paper reproduce? Every number and claim of the study beside what a results folder measured, with a verdict.

`assess(results, data_root)` reads the collected long table, the cells' manifests and the study
(bench/study.py) and returns an `Assessment`: per paper table, one column group per rater setting
that was run (the setting the study identifies as the paper's first), each value with its verdict;
per column, the rank agreement with the paper; per claim of the text, its verdict and evidence.
bench/reproduction_page.py renders it as REPRODUCTION.md and a self-contained REPRODUCTION.html.

The verdict rules are fixed here (`VALUE_RULE`, `CLAIM_RULE`) and printed above any number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from bench import stats, store, study
from bench.evaluate.metrics import higher_is_better
from bench.report import display, table_of
from bench.study import Claim, Column, Study, Table
from datasets import DATASETS

#: Paper units per stored unit: DSC, soft DSC and soft IoU are stored as fractions and given in %; digits as the paper prints them.
SCALE = {"dsc": 100.0, "soft_dice": 100.0, "soft_iou": 100.0}
DIGITS = {"bahd": 3}
#: The tolerance of a value verdict: points for the % metrics, a share of the paper's value for the others.
TOLERANCE_POINTS, TOLERANCE_SHARE = 2.0, 0.10
ALPHA = 0.05
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
    f"seeds and Holm-adjusted within the claim, has p < {ALPHA:g}. A margin claim also needs the measured margin to be "
    f"at least the claimed one minus {TOLERANCE_POINTS:g} points; a claim of no effect holds when the difference is "
    f"within {TOLERANCE_POINTS:g} points or not significant. A claim on label statistics is checked on the rater pool "
    "itself, without training. Otherwise it **does not hold**; with only pipeline checks behind it, it is a **pipeline "
    "check**; with no cell behind it, **not run**."
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
class TableReport:
    table: Table
    groups: list[Group]
    not_run: list[str]  # one line per column without cells


@dataclass
class ClaimReport:
    claim: Claim
    verdict: str
    evidence: list[str]


@dataclass
class Assessment:
    study: Study
    results: Path
    budget: str
    tables: list[TableReport]
    claims: list[ClaimReport]
    values: list[tuple]  # (study Value, Group or None, Entry or None)


# --------------------------------------------------------------------------- reading the results folder


def cell_info(results: Path) -> pd.DataFrame:
    """One row per finished cell: keys, budget, rater setting's label statistics and input, and how its stages stopped."""
    rows = []
    for folder, info in store.manifests(results):
        config = store.read_json(folder / "config.json")
        setting = info.get("rater_setting") or {}
        stops = "+".join(s.get("reason", "").split(":")[0] for s in info.get("stages", {}).values())
        rows.append({**info["cell"], "budget": config.get("budget", {}).get("name", ""), "labels": setting.get("labels") or {},
                     "input": setting.get("input", ""), "stops": stops})  # fmt: skip
    return pd.DataFrame(rows, columns=[*store.KEYS, "budget", "labels", "input", "stops"])


def per_seed(table: pd.DataFrame, column: Column, reference: str) -> pd.DataFrame:
    """Per (dataset, raters, method, seed): the mean over cases of the column's metric at the protocol level."""
    rows = table[(table["metric"] == column.metric) & (table["structure"] == column.structure) & (table["reference"] == reference)
                 & (table["noise"] == "protocol")]  # fmt: skip
    return rows.groupby(["dataset", "raters", "method", "seed"], dropna=False)["value"].mean().reset_index()


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
    tolerance = TOLERANCE_POINTS if metric in SCALE else TOLERANCE_SHARE * abs(mean)
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


# --------------------------------------------------------------------------- assessing


def assess(results: Path, data_root: Path, paper: Study | None = None) -> Assessment:
    paper = paper or study.current()
    table = pd.read_parquet(results / "metrics.parquet") if (results / "metrics.parquet").is_file() else pd.DataFrame()
    if not set(store.COLUMNS) <= set(table.columns):  # nothing collected yet (or a table from elsewhere): nothing measured
        table = pd.DataFrame(columns=store.COLUMNS)
    cells = cell_info(results)
    budgets = sorted(set(cells["budget"]))
    budget = budgets[0] if len(budgets) == 1 else ", ".join(budgets)
    tables = [assess_table(t, table, cells, paper, data_root) for t in paper.tables]
    values = [assess_value(v, table, cells, paper) for v in paper.values]
    claims = [assess_claim(c, tables, table, cells, paper) for c in paper.claims]
    return Assessment(paper, results, budget, tables, claims, values)


def group_for(dataset: str, raters: str, own: str, cells: pd.DataFrame, column: Column, paper: Study) -> Group:
    mine = cells[(cells["dataset"] == dataset) & (cells["raters"] == raters) & (cells["noise"] == "protocol")]
    budget = ", ".join(sorted(set(mine["budget"])))
    labels = next((x for x in mine["labels"] if x), {})
    counts = mine["stops"].value_counts()
    stops = " · ".join(f"{s or 'unknown'} {c}/{len(mine)}" for s, c in counts.items())
    notes, kind = [], "verdict"
    if dataset != own and DATASETS[dataset].subset_of != own:
        kind = "pipeline check"
        notes.append(f"{dataset} stands in for {own}")
    elif dataset != own:
        notes.append(f"on {dataset}, a sample of {own}'s images")
    if "quick" in budget:
        kind = "pipeline check"
        notes.append("quick budget")
    identified = paper_setting(own)
    if identified:
        notes.append("the setting identified as the paper's" if raters == identified else f"not the paper's setting ({identified} is)")
    if column.reference == "expert" and kind == "verdict":
        kind = "not comparable"
        notes.append(
            f"the paper scored against an expert GT it did not release; measured against the {measured_reference(column, dataset)}"
        )
    return Group(dataset, raters, kind, "; ".join(notes), budget, labels, stops)


def assess_table(t: Table, table: pd.DataFrame, cells: pd.DataFrame, paper: Study, data_root: Path) -> TableReport:
    groups: dict[tuple[str, str], Group] = {}
    not_run = []
    for j, column in enumerate(t.columns):
        found = False
        for dataset in stand_ins(t, column.dataset):
            reference = measured_reference(column, dataset)
            seeds = per_seed(table, column, reference)
            seeds = seeds[seeds["dataset"] == dataset]
            for raters in sorted(set(seeds["raters"]), key=lambda r: (r != paper.paper_raters.get(column.dataset), r)):
                key = (dataset, raters)
                if key not in groups:
                    groups[key] = group_for(dataset, raters, column.dataset, cells, column, paper)
                group = groups[key]
                part = seeds[seeds["raters"] == raters]
                group.entries[j] = column_entries(t, j, part, column, group, cells)
                group.ranking[j] = ranking(t, j, group.entries[j], table, column, dataset, raters, reference)
                group.extra[j] = areas(table, dataset, raters, reference, column)
                found = True
        if not found:
            not_run.append(f"{column.dataset}: {absent(column.dataset, data_root)}")
    return TableReport(t, list(groups.values()), list(dict.fromkeys(not_run)))


def column_entries(t: Table, j: int, part: pd.DataFrame, column: Column, group: Group, cells: pd.DataFrame) -> list[Entry]:
    scale = SCALE.get(column.metric, 1.0)
    measured = {m: measure(g["value"].to_numpy(), scale) for m, g in part.groupby("method")}
    if column.metric == "dsc" and group.labels.get("average") is not None:
        measured["average"] = Measured(100 * group.labels["average"], math.nan, 0, (math.nan, math.nan))
    kinds = {table_of(r.method) for r in t.rows} - {None}  # other measured methods of the same registry table, after the paper's rows
    rows = [r.method for r in t.rows]
    order = rows + [m for m in sorted(measured) if m not in rows and table_of(m) in kinds]
    out = []
    for method in order:
        paper_value, mine = t.value(method, j), measured.get(method)
        entry = Entry(method, paper_value, mine)
        if paper_value is None or mine is None:
            entry.verdict = "no paper value" if paper_value is None else "not run"
        elif group.kind != "verdict":
            entry.verdict = group.kind
        else:
            entry.verdict = value_verdict(paper_value, mine, column.metric)
        out.append(entry)
    return out


def ranking(t: Table, j: int, entries: list[Entry], table: pd.DataFrame, column: Column, dataset: str, raters: str, reference: str) -> dict:
    """Kendall τ between the paper's and the measured order of the methods both have, each column's winner, and the
    paired test of the measured best method against the reference method."""
    paper = study.current()
    higher = higher_is_better(column.metric)
    both = [e for e in entries if e.paper and e.measured and e.method not in ("average", paper.oracle)]
    out: dict = {"n": len(both), "scale": SCALE.get(column.metric, 1.0)}
    if len(both) >= 3:
        tau, p = scipy_stats.kendalltau([e.paper[0] for e in both], [e.measured.mean for e in both])
        out.update(tau=float(tau), p=float(p))
    rows = {r.method for r in t.rows}
    competing = [e for e in entries if e.measured and e.method in rows and e.method not in ("average", paper.oracle)]
    if competing:
        pick = max if higher else min
        best = pick(competing, key=lambda e: e.measured.mean)
        out["winner"] = best.method
        paper_rows = [e for e in entries if e.paper and e.method not in ("average", paper.oracle)]
        out["paper_winner"] = pick(paper_rows, key=lambda e: e.paper[0]).method if paper_rows else ""
        if best.method != paper.reference_method and any(e.method == paper.reference_method for e in competing):
            rows = table[(table["dataset"] == dataset) & (table["raters"] == raters) & (table["noise"] == "protocol")
                         & (table["reference"] == reference)]  # fmt: skip
            tests = stats.paired_tests(rows, column.metric, column.structure, paper.reference_method, higher, others=[best.method])
            if len(tests):
                out["test"] = tests.iloc[0].to_dict()
    return out


def areas(table: pd.DataFrame, dataset: str, raters: str, reference: str, column: Column) -> pd.DataFrame:
    """Precision, recall and predicted area ÷ reference area per method, pooled over cases and seeds (hard-mask rows)."""
    rows = table[(table["dataset"] == dataset) & (table["raters"] == raters) & (table["noise"] == "protocol") & (table["metric"] == "dsc")
                 & (table["reference"] == reference) & (table["structure"] == column.structure)]  # fmt: skip
    sums = rows.groupby("method")[["tp", "fp", "fn", "n_gt", "n_pred"]].sum()
    return pd.DataFrame({
        "precision": sums["tp"] / (sums["tp"] + sums["fp"]).replace(0, np.nan),
        "recall": sums["tp"] / (sums["tp"] + sums["fn"]).replace(0, np.nan),
        "area": sums["n_pred"] / sums["n_gt"].replace(0, np.nan),
    })  # fmt: skip


def absent(dataset: str, data_root: Path) -> str:
    """Why a dataset's column has no cells: its files are not under the data root (with the card's hint), or it was not run."""
    card = DATASETS[dataset].card
    if card.layout and not (data_root / dataset).exists():
        return f"not run: {dataset} not found under {data_root} (put {card.download} in {card.layout})"
    return f"not run: no {dataset} cells in this results folder (python -m bench run --dataset {dataset} --budget plateau --methods all)"


def assess_value(value, table: pd.DataFrame, cells: pd.DataFrame, paper: Study) -> tuple:
    """A number of the text, against the first setting that measured it (the paper's setting first)."""
    t = Table(value.id, value.id, value.line, value.text, (value.column,), ())
    for dataset in stand_ins(t, value.column.dataset):
        reference = measured_reference(value.column, dataset)
        seeds = per_seed(table, value.column, reference)
        seeds = seeds[(seeds["dataset"] == dataset) & (seeds["method"] == value.method)]
        for raters in sorted(set(seeds["raters"]), key=lambda r: r != paper.paper_raters.get(value.column.dataset)):
            group = group_for(dataset, raters, value.column.dataset, cells, value.column, paper)
            mine = measure(seeds[seeds["raters"] == raters]["value"].to_numpy(), SCALE.get(value.column.metric, 1.0))
            entry = Entry(value.method, (value.mean, value.sd), mine)
            entry.verdict = group.kind if group.kind != "verdict" else value_verdict((value.mean, value.sd), mine, value.column.metric)
            return value, group, entry
    return value, None, None


# --------------------------------------------------------------------------- claims


def assess_claim(claim: Claim, tables: list[TableReport], table: pd.DataFrame, cells: pd.DataFrame, paper: Study) -> ClaimReport:
    if claim.kind == "unchecked":
        return ClaimReport(claim, "not checkable", [claim.params.get("why", "")])
    if claim.kind == "label":
        return label_claim(claim, cells)
    if claim.kind == "best":
        checks = []
        for report in tables:
            if report.table.id in claim.params["tables"]:
                for group in report.groups:
                    for j, column in enumerate(report.table.columns):
                        if j in group.entries and group.dataset in samples(column.dataset):
                            others = [
                                e.method for e in group.entries[j] if e.measured and e.paper and e.method not in ("average", paper.oracle)
                            ]
                            pairs = [(paper.reference_method, m) for m in others if m != paper.reference_method]
                            checks.append(
                                order_check(table, group, column, pairs, f"{report.table.label} {column.dataset} {column.metric}")
                            )
        return combine(claim, checks)
    columns = claim_columns(claim)
    checks = []
    for column in columns:
        for dataset in samples(column.dataset):
            reference = measured_reference(column, dataset)
            for raters in sorted(set(cells.loc[cells["dataset"] == dataset, "raters"])):
                group = group_for(dataset, raters, column.dataset, cells, column, paper)
                where = f"{dataset}/{raters} {column.metric}"
                if claim.kind in ("order", "significant", "noise"):
                    pairs = [tuple(p) for p in claim.params.get("pairs", [])]
                    if claim.kind == "significant":
                        present = set(cells.loc[(cells["dataset"] == dataset) & (cells["raters"] == raters), "method"])
                        pairs = [(paper.reference_method, m) for m in sorted(present - {paper.reference_method, paper.oracle})]
                    levels = (
                        sorted(set(cells.loc[(cells["dataset"] == dataset) & (cells["raters"] == raters), "noise"]))
                        if claim.kind == "noise"
                        else ["protocol"]
                    )
                    for level in levels:
                        checks.append(order_check(table, group, column, pairs, f"{where} noise {level}", reference, level))
                elif claim.kind == "margin":
                    checks.append(margin_check(claim, table, group, column, reference, where))
                elif claim.kind == "tie":
                    checks.append(tie_check(claim, table, group, column, reference, where))
    return combine(claim, checks)


def claim_columns(claim: Claim) -> list[Column]:
    datasets = claim.params.get("datasets") or [claim.params["dataset"]]
    metric = claim.params.get("metric", "dsc")
    out = []
    for dataset in datasets:
        structures = ["disc", "cup"] if dataset == "riga" else ["foreground"]
        reference = "rater-mean" if metric.startswith("soft") else DATASETS[dataset].reference
        metric_here = "soft_dice" if dataset == "riga" and metric == "dsc" else metric
        out += [Column(dataset, metric_here, reference, s) for s in structures]
    return out


def scoped(table: pd.DataFrame, group: Group, reference: str, noise: str = "protocol") -> pd.DataFrame:
    return table[(table["dataset"] == group.dataset) & (table["raters"] == group.raters) & (table["noise"] == noise)
                 & (table["reference"] == reference)]  # fmt: skip


def order_check(table, group: Group, column: Column, pairs, where: str, reference: str | None = None, noise: str = "protocol") -> dict:
    """Each (better, worse) pair: better in the mean and in a Holm-adjusted paired test (one family for the pairs)."""
    reference = reference or measured_reference(column, group.dataset)
    rows = scoped(table, group, reference, noise)
    higher = higher_is_better(column.metric)
    scale = SCALE.get(column.metric, 1.0)
    present = set(rows["method"])
    pairs = [p for p in pairs if p[0] in present and p[1] in present]
    if not pairs:
        return {"group": group, "where": where, "holds": None, "lines": []}
    results, lines = [], []
    for better, worse in pairs:
        test = stats.paired_tests(rows, column.metric, column.structure, better, higher, others=[worse])
        results.append(test.iloc[0].to_dict() if len(test) else {"p": math.nan, "median_diff": math.nan})
    ps = stats.holm([r["p"] for r in results])
    for (better, worse), r, p in zip(pairs, results, ps):
        means = rows[(rows["metric"] == column.metric) & (rows["structure"] == column.structure)].groupby("method")["value"].mean() * scale
        ahead = means[better] > means[worse] if higher else means[better] < means[worse]
        ok = bool(ahead and p < ALPHA)
        r.update(ok=ok, p_holm=p)
        lines.append(f"{where}: {display(better)} {means[better]:.2f} vs {display(worse)} {means[worse]:.2f}, "
                     f"Holm p {p:.2g} → {'holds' if ok else 'does not hold'}")  # fmt: skip
    return {"group": group, "where": where, "holds": all(r["ok"] for r in results), "lines": lines}


def margin_check(claim: Claim, table, group: Group, column: Column, reference: str, where: str) -> dict:
    paper = study.current()
    rows = scoped(table, group, reference)
    rows = rows[(rows["metric"] == column.metric) & (rows["structure"] == column.structure)]
    means = rows.groupby("method")["value"].mean() * SCALE.get(column.metric, 1.0)
    if paper.reference_method not in means:
        return {"group": group, "where": where, "holds": None, "lines": []}
    versus = claim.params.get("versus") or {}
    if not versus:
        others = means.drop([m for m in (paper.reference_method, paper.oracle) if m in means])
        if others.empty:
            return {"group": group, "where": where, "holds": None, "lines": []}
        versus = {others.idxmax(): claim.params["points"]}
    versus = {m: pts for m, pts in versus.items() if m in means}
    check = order_check(table, group, column, [(paper.reference_method, m) for m in versus], where, reference)
    lines, ok = [], bool(check["holds"])
    for method, points in versus.items():
        margin = means[paper.reference_method] - means[method]
        enough = margin >= points - TOLERANCE_POINTS
        ok = ok and enough
        lines.append(f"{where}: {display(paper.reference_method)} − {display(method)} = {margin:+.2f} points (claimed ≈ {points:g})")
    return {"group": group, "where": where, "holds": ok, "lines": lines + check["lines"]}


def tie_check(claim: Claim, table, group: Group, column: Column, reference: str, where: str) -> dict:
    check = order_check(table, group, column, [tuple(p) for p in claim.params["pairs"]], where, reference)
    rows = scoped(table, group, reference)
    rows = rows[(rows["metric"] == column.metric) & (rows["structure"] == column.structure)]
    means = rows.groupby("method")["value"].mean() * SCALE.get(column.metric, 1.0)
    lines, ok = [], check["holds"] is not None
    for a, b in claim.params["pairs"]:
        if a in means and b in means:
            small = abs(means[a] - means[b]) <= TOLERANCE_POINTS
            ok = ok and (small or not check["holds"])
            lines.append(f"{where}: {display(a)} {means[a]:.2f} vs {display(b)} {means[b]:.2f}")
    return {"group": group, "where": where, "holds": ok if check["holds"] is not None else None, "lines": lines}


def label_claim(claim: Claim, cells: pd.DataFrame) -> ClaimReport:
    """A claim on the fused labels, checked on each rater setting's training pool (label statistics, no training)."""
    left, op, right = claim.params["check"].split()
    evidence, verdicts = [], []
    for dataset in claim.params["datasets"]:
        mine = cells[cells["dataset"].isin(samples(dataset))]
        for (name, raters), part in mine.groupby(["dataset", "raters"]):
            labels = next((x for x in part["labels"] if x), None)
            if not labels:
                continue
            a, b = labels[left], float(right) if right.replace(".", "").isdigit() else labels[right]
            holds = a < b if op == "<" else a > b
            verdicts.append((paper_setting(name) in (None, raters), holds))
            evidence.append(f"{name}/{raters}: {left} {a:.3f} {op} {b:.3f} → {'holds' if holds else 'does not hold'}")
    if not verdicts:
        return ClaimReport(claim, "not run", ["no cell of a dataset this claim is about"])
    identified = [h for is_paper, h in verdicts if is_paper] or [h for _, h in verdicts]
    return ClaimReport(claim, "holds" if all(identified) else "does not hold", evidence)


def combine(claim: Claim, checks: list[dict]) -> ClaimReport:
    """A claim's verdict from its checks: over the verdict-grade ones under the paper's setting where there are some."""
    checks = [c for c in checks if c["holds"] is not None]
    if not checks:
        return ClaimReport(claim, "not run", ["no cells measure it in this results folder"])
    evidence = [line for c in checks for line in c["lines"]]
    graded = [c for c in checks if c["group"].kind != "pipeline check"]
    if not graded:
        return ClaimReport(claim, "pipeline check", evidence)
    judged = [c for c in graded if is_paper_setting(c["group"])] or graded
    return ClaimReport(claim, "holds" if all(c["holds"] for c in judged) else "does not hold", evidence)
