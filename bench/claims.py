"""The claims of the paper's text, checked against a results folder (`CLAIM_RULE` of bench/verdicts.py).

Each claim of the study file has a kind: `best` (the reference method beats every competitor in
every column of some tables), `order` (each pair (better, worse) on some datasets), `significant`
(every paired test of the reference method), `margin` (ahead by at least some points), `tie` (no
effect), `noise` (an order at every noise level), `label` (a property of the fused labels of the
rater pool, checked without training) and `unchecked` (the text gives nothing to check).
"""

from __future__ import annotations

import math

import pandas as pd

from bench import stats, study
from bench.evaluate.metrics import higher_is_better
from bench.rows import display
from bench.study import Claim, Column, Study
from bench.verdicts import (
    ALPHA,
    TOLERANCE_POINTS,
    ClaimReport,
    Group,
    TableReport,
    group_for,
    is_paper_setting,
    measured_reference,
    paper_setting,
    samples,
    scale,
)
from datasets import DATASETS


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
    factor = scale(column.metric)
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
        means = rows[(rows["metric"] == column.metric) & (rows["structure"] == column.structure)].groupby("method")["value"].mean() * factor
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
    means = rows.groupby("method")["value"].mean() * scale(column.metric)
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
    means = rows.groupby("method")["value"].mean() * scale(column.metric)
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
