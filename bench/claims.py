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

from bench import stats
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
                            pairs = [(paper.reference_method, m) for m in competitors(report.table.id, paper)]
                            where = f"{report.table.label} {column.dataset} {column.metric}"
                            checks.append(order_check(table, group, column, pairs, where, optional=True))
        return combine(claim, checks)
    checks = []
    for column in claim_columns(claim):
        for dataset in claim_datasets(column, table, paper):
            reference = measured_reference(column, dataset)
            mine = cells[cells["dataset"] == dataset]
            for raters in sorted(set(mine["raters"])):
                group = group_for(dataset, raters, column.dataset, cells, column, paper)
                where = f"{dataset}/{raters} {column.metric}"
                if claim.kind in ("order", "noise"):
                    pairs = [tuple(p) for p in claim.params["pairs"]]
                    levels = sorted(set(mine.loc[mine["raters"] == raters, "noise"])) if claim.kind == "noise" else ["protocol"]
                    checks += [order_check(table, group, column, pairs, f"{where} noise {level}", reference, level) for level in levels]
                elif claim.kind == "significant":  # against the paper table's competitors on this dataset
                    pairs = [(paper.reference_method, m) for m in competitors(table_of_dataset(column.dataset, paper), paper)]
                    checks.append(order_check(table, group, column, pairs, where, reference, optional=True))
                elif claim.kind == "margin":
                    checks.append(margin_check(claim, table, group, column, reference, where, paper))
                elif claim.kind == "tie":
                    checks.append(tie_check(claim, table, group, column, reference, where))
    return combine(claim, checks)


def competitors(table_id: str, paper: Study) -> list[str]:
    """The methods a paper table compares with its reference method: its rows but the reference, the Oracle and the Average."""
    rows = [r.method for r in paper.table(table_id).rows] if table_id else []
    return [m for m in rows if m not in (paper.reference_method, paper.oracle, "average")]


def claim_datasets(column: Column, table: pd.DataFrame, paper: Study) -> list[str]:
    """Where a claim on a column is checked: its dataset and the samples of it, then the stand-in any paper table declares
    for that dataset where the stand-in has the column's metric and structure (its checks are pipeline checks)."""
    out = samples(column.dataset)
    for t in paper.tables:
        if t.stand_in and t.stand_in not in out and any(c.dataset == column.dataset for c in t.columns):
            rows = table[(table["dataset"] == t.stand_in) & (table["metric"] == column.metric) & (table["structure"] == column.structure)]
            out += [t.stand_in] if len(rows) else []
    return out


def table_of_dataset(dataset: str, paper: Study) -> str:
    """The id of the first paper table with a column on `dataset` ("" if none)."""
    return next((t.id for t in paper.tables if any(c.dataset == dataset for c in t.columns)), "")


def claim_columns(claim: Claim) -> list[Column]:
    """The columns a claim is checked on: its metric on each of its datasets (RIGA: soft DSC of disc and cup, against the rater mean)."""
    datasets = claim.params.get("datasets") or [claim.params["dataset"]]
    metric = claim.params.get("metric", "dsc")
    out = []
    for dataset in datasets:
        structures = ["disc", "cup"] if dataset == "riga" else ["foreground"]
        metric_here = "soft_dice" if dataset == "riga" and metric == "dsc" else metric
        reference = "rater-mean" if metric_here.startswith("soft") else DATASETS[dataset].reference
        out += [Column(dataset, metric_here, reference, s) for s in structures]
    return out


def scoped(table: pd.DataFrame, group: Group, reference: str, noise: str = "protocol") -> pd.DataFrame:
    return table[(table["dataset"] == group.dataset) & (table["raters"] == group.raters) & (table["noise"] == noise)
                 & (table["reference"] == reference)]  # fmt: skip


def order_check(table, group: Group, column: Column, pairs, where: str, reference: str | None = None, noise: str = "protocol",
                optional: bool = False) -> dict:  # fmt: skip
    """Each (better, worse) pair: better in the mean, and a Holm-adjusted paired test (one family per column and noise
    level) significant in its favour (positive effect size). A pair that was not run makes the check incomplete
    (`holds` None, `missing` named), unless `optional` (a competitor the results did not train is left out)."""
    reference = reference or measured_reference(column, group.dataset)
    rows = scoped(table, group, reference, noise)
    rows = rows[(rows["metric"] == column.metric) & (rows["structure"] == column.structure)]
    present = set(rows["method"])
    missing = [p for p in pairs if p[0] not in present or p[1] not in present]
    pairs = [p for p in pairs if p not in missing]
    out = {"group": group, "where": where, "holds": None, "lines": [], "missing": [] if optional or not pairs else missing, "results": []}
    if not pairs or out["missing"]:  # none of it run here: not run; part of it: incomplete
        if out["missing"]:
            out["lines"] = [f"{where}: not run: {', '.join(f'{display(a)} vs {display(b)}' for a, b in out['missing'])}"]
        return out
    higher = higher_is_better(column.metric)
    means = rows.groupby("method")["value"].mean() * scale(column.metric)
    results = []
    for better, worse in pairs:
        test = stats.paired_tests(rows, column.metric, column.structure, better, higher, others=[worse])
        results.append(test.iloc[0].to_dict() if len(test) else {"p": math.nan, "effect_size": math.nan})
    for (better, worse), r, p in zip(pairs, results, stats.holm([r["p"] for r in results])):
        ahead = means[better] > means[worse] if higher else means[better] < means[worse]
        r.update(ok=bool(ahead and p < ALPHA and r["effect_size"] > 0), p_holm=p, better=better, worse=worse,
                 diff=abs(means[better] - means[worse]))  # fmt: skip
        out["lines"].append(f"{where}: {display(better)} {means[better]:.2f} vs {display(worse)} {means[worse]:.2f}, Holm p {p:.2g}, "
                            f"effect size {r['effect_size']:+.2f} → {'holds' if r['ok'] else 'does not hold'}")  # fmt: skip
    return {**out, "holds": all(r["ok"] for r in results), "results": results}


def margin_check(claim: Claim, table, group: Group, column: Column, reference: str, where: str, paper: Study) -> dict:
    """The reference method ahead (`order_check`) by at least the claimed points minus the tolerance, against the named
    competitors (`versus`) or the paper table's best one."""
    rows = scoped(table, group, reference)
    rows = rows[(rows["metric"] == column.metric) & (rows["structure"] == column.structure)]
    means = rows.groupby("method")["value"].mean() * scale(column.metric)
    versus = claim.params.get("versus") or {}
    if not versus:
        others = means.reindex(competitors(table_of_dataset(column.dataset, paper), paper)).dropna()
        versus = {others.idxmax(): claim.params["points"]} if len(others) else {}
    check = order_check(table, group, column, [(paper.reference_method, m) for m in versus], where, reference)
    if check["holds"] is None:
        return check
    ok, lines = bool(check["holds"]), []
    for method, points in versus.items():
        margin = means[paper.reference_method] - means[method]
        ok = ok and margin >= points - TOLERANCE_POINTS
        lines.append(f"{where}: {display(paper.reference_method)} − {display(method)} = {margin:+.2f} points (claimed ≈ {points:g})")
    return {**check, "holds": ok, "lines": lines + check["lines"]}


def tie_check(claim: Claim, table, group: Group, column: Column, reference: str, where: str) -> dict:
    """No effect: for each pair, the difference is within the tolerance or its Holm-adjusted test is not significant,
    whichever way it points."""
    check = order_check(table, group, column, [tuple(p) for p in claim.params["pairs"]], where, reference)
    if check["holds"] is None:
        return check
    ties = [r["diff"] <= TOLERANCE_POINTS or not r["p_holm"] < ALPHA for r in check["results"]]
    lines = [f"{where}: {display(r['better'])} vs {display(r['worse'])}: {r['diff']:.2f} points apart, Holm p {r['p_holm']:.2g} → "
             f"{'no effect' if tie else 'an effect'}" for r, tie in zip(check["results"], ties)]  # fmt: skip
    return {**check, "holds": all(ties), "lines": lines}


def label_claim(claim: Claim, cells: pd.DataFrame) -> ClaimReport:
    """A claim on the fused labels, checked on each rater setting's training pool at the protocol (label statistics, no training)."""
    left, op, right = claim.params["check"].split()
    evidence, verdicts = [], []
    for dataset in claim.params["datasets"]:
        mine = cells[cells["dataset"].isin(samples(dataset)) & (cells["noise"] == "protocol")]
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
    """A claim's verdict from its checks, over the verdict-grade ones under the paper's setting where there are some:
    "incomplete" when a comparison it needs was not run there, "not run" when none was."""
    evidence = [line for c in checks for line in c["lines"]]
    ran = [c for c in checks if c["holds"] is not None or c.get("missing")]
    if not ran:
        return ClaimReport(claim, "not run", ["no cells measure it in this results folder"])
    graded = [c for c in ran if c["group"].kind != "pipeline check"]
    if not graded:
        return ClaimReport(claim, "pipeline check", evidence)
    judged = [c for c in graded if is_paper_setting(c["group"])] or graded
    if any(c["holds"] is None for c in judged):
        return ClaimReport(claim, "incomplete", evidence)
    return ClaimReport(claim, "holds" if all(c["holds"] for c in judged) else "does not hold", evidence)
