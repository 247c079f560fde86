"""The claims of the paper's text, checked against a results folder (`CLAIM_RULE` of bench/reproduce/verdicts.py).

Each claim of the study file has a kind: `best` (the reference method beats every competitor in
every column of some tables), `order` (each pair (better, worse) on some datasets), `significant`
(every paired test of the reference method), `margin` (ahead by at least some points), `tie` (no
effect), `noise` (an order at every noise level), `label` (a property of the fused labels of the
rater pool, checked without training) and `unchecked` (the text gives nothing to check).
"""

from __future__ import annotations

import math

import pandas as pd

from bench.evaluate.metrics import higher_is_better
from bench.report import stats
from bench.report.rows import display
from bench.reproduce.verdicts import (
    ALPHA,
    ClaimReport,
    Group,
    TableReport,
    group_for,
    is_paper_setting,
    measured_reference,
    paper_setting,
    pipeline_reasons,
    samples,
    scale,
    study_tolerance,
)
from bench.study import Claim, Column, Study
from datasets import DATASETS


def assess_claim(claim: Claim, tables: list[TableReport], table: pd.DataFrame, cells: pd.DataFrame, paper: Study) -> ClaimReport:
    if claim.kind == "unchecked":
        return ClaimReport(claim, "not checkable", [claim.params.get("why", "")])
    if claim.kind == "label":
        return label_claim(claim, cells)
    checks = []
    if claim.kind == "best":
        for report in tables:
            if report.table.id in claim.params["tables"]:
                for j, column in enumerate(report.table.columns):
                    where = f"{report.table.label} {column.dataset} {column.metric}"
                    groups = [g for g in report.groups if j in g.entries and g.dataset in samples(column.dataset)]
                    pairs = [(paper.reference_method, m) for m in competitors(report.table.id, paper)]
                    checks += [order_check(table, g, column, pairs, where, study_tolerance(column, paper)) for g in groups]
                    checks += [] if groups else [not_run(where)]
        return combine(claim, checks)
    for column in claim_columns(claim):
        tol = study_tolerance(column, paper)
        found = False
        for dataset in claim_datasets(column, table, paper):
            reference = measured_reference(column, dataset)
            mine = cells[cells["dataset"] == dataset]
            for raters in sorted(set(mine["raters"])):
                found = True
                group = group_for(dataset, raters, column.dataset, cells, column, paper)
                where = f"{dataset}/{raters} {column.metric}"
                if claim.kind in ("order", "noise"):
                    pairs = [tuple(p) for p in claim.params["pairs"]]
                    levels = sorted(set(mine.loc[mine["raters"] == raters, "noise"])) if claim.kind == "noise" else ["protocol"]
                    checks += [
                        order_check(table, group, column, pairs, f"{where} noise {level}", tol, reference, level) for level in levels
                    ]
                elif claim.kind == "significant":  # against the paper table's competitors on this dataset
                    pairs = [(paper.reference_method, m) for m in competitors(table_of_dataset(column.dataset, paper), paper)]
                    checks.append(order_check(table, group, column, pairs, where, tol, reference))
                elif claim.kind == "margin":
                    checks.append(margin_check(claim, table, group, column, reference, where, paper, tol))
                elif claim.kind == "tie":
                    checks.append(tie_check(claim, table, group, column, reference, where, tol))
        checks += [] if found else [not_run(f"{column.dataset} {column.metric}")]
    return combine(claim, checks)


def not_run(where: str) -> dict:
    """A part of a claim's scope with no cell: the claim is incomplete at best."""
    return {"group": None, "where": where, "status": "not run", "lines": [f"{where}: not run"], "results": []}


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
    """The columns a claim is checked on: its metric on each of its datasets' structures; where a dataset scores soft metrics
    (`DatasetSpec.soft_metrics`, RIGA) the paper's DSC is the soft DSC against the rater mean."""
    datasets = claim.params.get("datasets") or [claim.params["dataset"]]
    metric = claim.params.get("metric", "dsc")
    out = []
    for dataset in datasets:
        spec = DATASETS[dataset]
        metric_here = "soft_dice" if spec.soft_metrics and metric == "dsc" else metric
        reference = "rater-mean" if metric_here.startswith("soft") else spec.reference
        out += [Column(dataset, metric_here, reference, s) for s in spec.structures]
    return out


def scoped(table: pd.DataFrame, group: Group, reference: str, noise: str = "protocol") -> pd.DataFrame:
    return table[(table["dataset"] == group.dataset) & (table["raters"] == group.raters) & (table["noise"] == noise)
                 & (table["reference"] == reference)]  # fmt: skip


def order_check(table, group: Group, column: Column, pairs, where: str, tol: float, reference: str | None = None,
                noise: str = "protocol") -> dict:  # fmt: skip
    """Each (better, worse) pair by the seed-aware paired test (`bench.report.stats.paired_tests`, Holm-adjusted within the
    check): "ahead" when significant in the better method's favour, "behind" when significant the other way,
    "equivalent" when its 95 % interval lies inside ± `tol`, else "unresolved" (with the seeds that would resolve it).
    The check holds when every pair is ahead, does not hold when one is behind or equivalent, is inconclusive otherwise,
    and incomplete when a pair was not run (`missing` names it) unless what ran already does not hold."""
    reference = reference or measured_reference(column, group.dataset)
    rows = scoped(table, group, reference, noise)
    rows = rows[(rows["metric"] == column.metric) & (rows["structure"] == column.structure)]
    present = set(rows["method"])
    missing = [p for p in pairs if p[0] not in present or p[1] not in present]
    out = {"group": group, "where": where, "status": "not run", "lines": [], "missing": missing, "results": []}
    if not pairs or len(missing) == len(pairs):
        return out
    if missing:
        out["lines"] = [f"{where}: not run: {', '.join(f'{display(a)} vs {display(b)}' for a, b in missing)}"]
        pairs = [p for p in pairs if p not in missing]
    higher, unit = higher_is_better(column.metric), scale(column.metric)
    means = rows.groupby("method")["value"].mean() * unit
    results = []
    for better, worse in pairs:
        test = stats.paired_tests(rows, column.metric, column.structure, better, higher, others=[worse])
        results.append(test.iloc[0].to_dict() if len(test) else {"diff": math.nan, "ci_low": math.nan, "ci_high": math.nan,
                                                                  "p": math.nan, "seeds_needed": math.nan})  # fmt: skip
    for (better, worse), r, p in zip(pairs, results, stats.holm([r["p"] for r in results])):
        diff, low, high = (unit * r[k] for k in ("diff", "ci_low", "ci_high"))
        state = ("ahead" if diff > 0 else "behind") if p < ALPHA else "equivalent" if -tol <= low and high <= tol else "unresolved"
        r.update(state=state, p_holm=p, better=better, worse=worse, diff=diff, low=low, high=high)
        out["lines"].append(f"{where} ({group.budget}): {display(better)} {means[better]:.2f} vs {display(worse)} {means[worse]:.2f}, "
                            f"{comparison(r, tol)}")  # fmt: skip
    states = {r["state"] for r in results}
    if states & {"behind", "equivalent"}:  # decided by what ran, whatever is missing
        return {**out, "status": "does not hold", "results": results}
    status = "incomplete" if missing else "inconclusive" if "unresolved" in states else "holds"
    return {**out, "status": status, "results": results}


def comparison(r: dict, tol: float) -> str:
    """One comparison's evidence: Δ with its interval, Holm p, its state and, unresolved, the seeds that would resolve it."""
    if math.isnan(r["p_holm"]):  # one seed of a method: its training variance, so the interval, is unknown
        return f"Δ {r['diff']:+.2f}, no interval (fewer than 2 seeds of a method) → {r['state']}"
    text = f"Δ {r['diff']:+.2f} [{r['low']:+.2f}, {r['high']:+.2f}], Holm p {r['p_holm']:.2g} → {r['state']}"
    if r["state"] == "equivalent":
        text += f" (within ±{tol:.2g})"
    if r["state"] == "unresolved":
        needed = r.get("seeds_needed", math.nan)
        if math.isfinite(needed):
            text += f"; {int(needed)} seeds per method would resolve it"
        elif math.isinf(needed):
            text += f"; more than {stats.MAX_SEEDS} seeds per method, or more test cases, would be needed"
    return text


def margin_check(claim: Claim, table, group: Group, column: Column, reference: str, where: str, paper: Study, tol: float) -> dict:
    """The reference method ahead (`order_check`) of the named competitors (`versus`), or of the paper table's best
    competitor row, by at least the claimed points minus the tolerance: holds when the interval's lower end reaches it,
    does not hold when its upper end falls short of it, inconclusive otherwise."""
    versus = claim.params.get("versus") or {}
    if not versus:
        t = paper.table(table_of_dataset(column.dataset, paper)) if table_of_dataset(column.dataset, paper) else None
        j = next((j for j, c in enumerate(t.columns) if (c.dataset, c.metric, c.structure) == (column.dataset, column.metric,
                                                                                                  column.structure)), None) if t else None  # fmt: skip
        rows = [(v[0], m) for m in competitors(t.id, paper) if (v := t.value(m, j))] if j is not None else []
        pick = max if higher_is_better(column.metric) else min
        versus = {pick(rows)[1]: claim.params["points"]} if rows else {}
    check = order_check(table, group, column, [(paper.reference_method, m) for m in versus], where, tol, reference)
    if check["status"] == "not run" or check["missing"]:
        return check
    lines, states = [], []
    for r in check["results"]:
        need = versus[r["worse"]] - tol
        state = "holds" if r["low"] >= need else "does not hold" if r["high"] < need or r["state"] == "behind" else "inconclusive"
        states.append(state)
        lines.append(f"{where} ({group.budget}): {display(r['better'])} − {display(r['worse'])} = {r['diff']:+.2f} "
                     f"[{r['low']:+.2f}, {r['high']:+.2f}] points (claimed ≈ {versus[r['worse']]:g}, at least {need:g}) → {state}")  # fmt: skip
    status = "does not hold" if "does not hold" in states else "inconclusive" if "inconclusive" in states else "holds"
    return {**check, "status": status, "lines": lines + check["lines"]}


def tie_check(claim: Claim, table, group: Group, column: Column, reference: str, where: str, tol: float) -> dict:
    """No effect: holds when every pair's 95 % interval lies inside ± `tol` (equivalence), does not hold when one lies
    entirely outside it, inconclusive otherwise (a missing test is no evidence of no effect)."""
    check = order_check(table, group, column, [tuple(p) for p in claim.params["pairs"]], where, tol, reference)
    if check["status"] == "not run" or check["missing"]:
        return check
    lines, states = [], []
    for r in check["results"]:
        state = ("no effect" if -tol <= r["low"] and r["high"] <= tol else "an effect" if r["high"] < -tol or r["low"] > tol
                 else "inconclusive")  # fmt: skip
        states.append(state)
        lines.append(f"{where} ({group.budget}): {display(r['better'])} vs {display(r['worse'])}: Δ {r['diff']:+.2f} "
                     f"[{r['low']:+.2f}, {r['high']:+.2f}] against ±{tol:.2g} → {state}")  # fmt: skip
    status = "does not hold" if "an effect" in states else "inconclusive" if "inconclusive" in states else "holds"
    return {**check, "status": status, "lines": lines}


def label_claim(claim: Claim, cells: pd.DataFrame) -> ClaimReport:
    """A claim on the fused labels, checked on each rater setting's training pool at the protocol (label statistics, no
    training); a pipeline check where every setting that measured it is one (a smoke run's pool is read all the same)."""
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
            verdicts.append((paper_setting(name) in (None, raters), holds, bool(pipeline_reasons(part))))
            evidence.append(f"{name}/{raters}: {left} {a:.3f} {op} {b:.3f} → {'holds' if holds else 'does not hold'}")
    if not verdicts:
        return ClaimReport(claim, "not run", ["no cell of a dataset this claim is about"])
    if all(pipeline for _, _, pipeline in verdicts):
        return ClaimReport(claim, "pipeline check", evidence)
    identified = [h for is_paper, h, _ in verdicts if is_paper] or [h for _, h, _ in verdicts]
    return ClaimReport(claim, "holds" if all(identified) else "does not hold", evidence)


def combine(claim: Claim, checks: list[dict]) -> ClaimReport:
    """A claim's verdict from its checks, over the verdict-grade ones under the paper's setting where there are some:
    "does not hold" when one does not, else "incomplete" when a part of its scope was not run, else "inconclusive" when
    one is, else "holds"; "pipeline check" when only pipeline checks ran; "not run" when nothing did."""
    evidence = [line for c in checks for line in c["lines"]]
    ran = [c for c in checks if c["status"] != "not run"]
    if not ran:
        return ClaimReport(claim, "not run", evidence or ["no cells measure it in this results folder"])
    graded = [c for c in ran if c["group"].kind != "pipeline check"]
    if not graded:
        return ClaimReport(claim, "pipeline check", evidence)
    judged = [c for c in graded if is_paper_setting(c["group"])] or graded
    statuses = {c["status"] for c in judged}
    scope_missing = len(ran) < len(checks)  # a column, dataset or level of its scope without cells
    if "does not hold" in statuses:
        return ClaimReport(claim, "does not hold", evidence)
    if "incomplete" in statuses or scope_missing:
        return ClaimReport(claim, "incomplete", evidence)
    return ClaimReport(claim, "inconclusive" if "inconclusive" in statuses else "holds", evidence)
