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

from bench.evaluate.long_table import select
from bench.evaluate.metrics import higher_is_better
from bench.report import stats
from bench.report.intervals import difference_range, interval
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
        return label_claim(paper, claim, cells)
    checks = []
    if claim.kind == "best":
        for report in tables:
            if report.table.id in claim.params["tables"]:
                for j, column in enumerate(report.table.columns):
                    where = f"{report.table.label} {column.dataset} {column.metric}"
                    groups = [g for g in report.groups if j in g.entries and g.dataset in samples(column.dataset)]
                    pairs = [(paper.reference_method, m) for m in competitors(report.table.id, paper)]
                    checks += [
                        order_check(paper, table, g, column, pairs, where, study_tolerance(column, paper)) | {"part": where} for g in groups
                    ]
                    checks += [] if groups else [not_run(where)]
        return combine(paper, claim, checks)
    for column in claim_columns(claim):
        tol = study_tolerance(column, paper)
        part = f"{column.dataset} {column.metric} {column.structure}"
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
                        order_check(paper, table, group, column, pairs, f"{where} noise {level}", tol, reference, level)
                        | {"part": part if claim.kind == "order" else f"{part} noise {level}"}
                        for level in levels
                    ]
                elif claim.kind == "significant":  # against the paper table's competitors on this dataset
                    pairs = [(paper.reference_method, m) for m in competitors(table_of_dataset(column.dataset, paper), paper)]
                    checks.append(order_check(paper, table, group, column, pairs, where, tol, reference) | {"part": part})
                elif claim.kind == "margin":
                    checks.append(margin_check(claim, table, group, column, reference, where, paper, tol) | {"part": part})
                elif claim.kind == "tie":
                    checks.append(tie_check(paper, claim, table, group, column, reference, where, tol) | {"part": part})
        checks += [] if found else [not_run(part)]
    return combine(paper, claim, checks)


def not_run(where: str) -> dict:
    """A part of a claim's scope with no cell: the claim is incomplete at best."""
    return {"group": None, "where": where, "part": where, "status": "not run", "lines": [f"{where}: not run"], "results": []}


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
            rows = select(table, dataset=t.stand_in, metric=column.metric, structure=column.structure)
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
    return table[
        (table["dataset"] == group.dataset)
        & (table["raters"] == group.raters)
        & (table["noise"] == noise)
        & (table["reference"] == reference)
    ]


#: A claim's verdicts from the most to the least decisive: a claim, a part of its scope or a check takes the first that
#: any of its pieces has.
SEVERITY = ("does not hold", "incomplete", "inconclusive", "no material difference", "holds")


def worst(statuses) -> str:
    return min(statuses, key=SEVERITY.index)


def decide(states: list[str], missing: list) -> str:
    """A check's status from its own per-pair states (each one of SEVERITY but "incomplete"): "does not hold" as soon as
    one pair refutes it, whatever is missing; otherwise "incomplete" when a pair was not run; otherwise the worst state."""
    if "does not hold" in states:
        return "does not hold"
    return "incomplete" if missing else worst(states)


def pair_tests(
    paper: Study, table, group: Group, column: Column, pairs, where: str, tol: float, reference: str | None = None, noise: str = "protocol"
) -> dict:
    """The pairs of one check that ran, each read from its column's one Holm family (`bench.report.stats.family_tests` of
    `paper`):
    "ahead" when significant in the better method's favour, "behind" when significant the other way, "no material
    difference" when not significant and its 95 % interval lies inside ± `tol`, else "unresolved" (so is a pair the
    study does not register, which has no test). Returns the check without a status: group, where, missing (pairs not
    run), results (one per pair run, diff and interval in paper units), lines (the pairs not run), means (paper units)."""
    reference = reference or measured_reference(column, group.dataset)
    rows = scoped(table, group, reference, noise)
    rows = select(rows, metric=column.metric, structure=column.structure)
    present = set(rows["method"])
    missing = [p for p in pairs if p[0] not in present or p[1] not in present]
    out = {
        "group": group,
        "where": where,
        "missing": missing,
        "results": [],
        "means": {},
        "lines": [f"{where}: not run: {', '.join(f'{display(paper, a)} vs {display(paper, b)}' for a, b in missing)}"] if missing else [],
    }
    ran = [p for p in pairs if p not in missing]
    if not ran:
        return out
    higher, unit = higher_is_better(column.metric), scale(column.metric)
    out["means"] = (rows.groupby("method")["value"].mean() * unit).to_dict()
    family = stats.family_tests(paper, rows, paper.reference_method, higher)
    for better, worse in ran:
        r = stats.pair_test(family, better, worse) or {
            "diff": math.nan,
            "ci_low": math.nan,
            "ci_high": math.nan,
            "p_holm": math.nan,
            "seeds_needed": math.nan,
        }
        diff, low, high, p = unit * r["diff"], unit * r["ci_low"], unit * r["ci_high"], r["p_holm"]
        r = {**r, "metric": column.metric}  # for the interval's range (`shown`)
        state = (
            ("ahead" if diff > 0 else "behind") if p < ALPHA else "no material difference" if -tol <= low and high <= tol else "unresolved"
        )
        out["results"].append({**r, "state": state, "better": better, "worse": worse, "diff": diff, "low": low, "high": high})
    return out


def order_check(
    paper: Study, table, group: Group, column: Column, pairs, where: str, tol: float, reference: str | None = None, noise: str = "protocol"
) -> dict:
    """Each (better, worse) pair by its state (`pair_tests`), judged by direction: the check does not hold only when a
    pair is behind (significant the other way), holds when every pair is ahead, shows "no material difference" when a
    pair is inside ± `tol` (a real gap smaller than the tolerance is no refutation), is inconclusive when one is
    unresolved (with the seeds that would find a gap of that size), and incomplete when a pair was not run (`missing`
    names it) unless a pair that ran already refutes it; "not run" when no pair ran."""
    check = pair_tests(paper, table, group, column, pairs, where, tol, reference, noise)
    if not check["results"]:
        return {**check, "status": "not run"}
    to_status = {
        "ahead": "holds",
        "behind": "does not hold",
        "no material difference": "no material difference",
        "unresolved": "inconclusive",
    }
    lines = [
        f"{where} ({group.budget}): {display(paper, r['better'])} {check['means'][r['better']]:.2f} vs {display(paper, r['worse'])} "
        f"{check['means'][r['worse']]:.2f}, {comparison(r, tol)}"
        for r in check["results"]
    ]
    states = [to_status[r["state"]] for r in check["results"]]
    return {**check, "status": decide(states, check["missing"]), "lines": check["lines"] + lines}


def comparison(r: dict, tol: float) -> str:
    """One comparison's evidence: Δ with its interval, Holm p, its state and, unresolved, the seeds per method at which a
    gap of that size would be found with 80 % power."""
    if math.isnan(r["diff"]):  # a pair outside the column's registered family
        return f"no test → {r['state']}"
    if math.isnan(r["p_holm"]):  # one seed of a method: its training variance, so the interval, is unknown
        return f"Δ {r['diff']:+.2f}, no interval (fewer than 2 seeds of a method) → {r['state']}"
    text = f"Δ {r['diff']:+.2f} {shown(r)}, Holm p {r['p_holm']:.2g} → {r['state']}"
    if r["state"] == "no material difference":
        text += f" (within ±{tol:.2g})"
    if r["state"] == "unresolved":
        needed = r.get("seeds_needed", math.nan)
        if math.isfinite(needed):
            text += f"; a true gap of this size would be found with 80 % power at {int(needed)} seeds per method"
        elif math.isinf(needed):
            text += f"; more than {stats.MAX_SEEDS} seeds per method, or more test cases, would be needed to find a gap of this size"
    return text


def shown(r: dict) -> str:
    """A comparison's 95 % interval (paper units) as bench/report/intervals.py prints every interval: with each method's
    seeds and the df, "not estimable" where wider than the metric's range, no NaN or zero-width bounds as numbers."""
    if "n_seeds" not in r:  # a pair outside the column's registered family: no test was run
        return "(no test)"
    seeds = (int(r["n_seeds_ref"]), int(r["n_seeds"]))
    return interval(r["low"], r["high"], seeds, r["df"], 2, difference_range(r["metric"]), signed=True)


def holm_p(p: float) -> str:
    """ "Holm p 0.003", or "no p" where the test has none (a method with one seed)."""
    return "no p (fewer than 2 seeds of a method)" if math.isnan(p) else f"Holm p {p:.2g}"


def margin_check(claim: Claim, table, group: Group, column: Column, reference: str, where: str, paper: Study, tol: float) -> dict:
    """The reference method ahead of the named competitors (`versus`), or of the paper table's best competitor row, by at
    least the claimed points minus the tolerance. Per pair, "behind" (significant the other way) is read first and
    refutes it whatever the gap; then it holds when the interval's lower end reaches the claimed points minus the
    tolerance, does not hold when its upper end falls short of it, and is inconclusive otherwise; a pair not run makes
    it incomplete unless a pair that ran refutes it."""
    versus = claim.params.get("versus") or {}
    if not versus:
        t = paper.table(table_of_dataset(column.dataset, paper)) if table_of_dataset(column.dataset, paper) else None
        j = (
            next(
                (
                    j
                    for j, c in enumerate(t.columns)
                    if (c.dataset, c.metric, c.structure) == (column.dataset, column.metric, column.structure)
                ),
                None,
            )
            if t
            else None
        )
        rows = [(v[0], m) for m in competitors(t.id, paper) if (v := t.value(m, j))] if j is not None else []
        pick = max if higher_is_better(column.metric) else min
        versus = {pick(rows)[1]: claim.params["points"]} if rows else {}
    check = pair_tests(paper, table, group, column, [(paper.reference_method, m) for m in versus], where, tol, reference)
    if not check["results"]:
        return {**check, "status": "not run"}
    lines, states = [], []
    for r in check["results"]:
        need = versus[r["worse"]] - tol
        state = "does not hold" if r["state"] == "behind" or r["high"] < need else "holds" if r["low"] >= need else "inconclusive"
        states.append(state)
        lines.append(
            f"{where} ({group.budget}): {display(paper, r['better'])} − {display(paper, r['worse'])} = {r['diff']:+.2f} points "
            f"{shown(r)}, {holm_p(r['p_holm'])} → {r['state']} (claimed ≈ "
            f"{versus[r['worse']]:g}, at least {need:g}) → {state}"
        )
    return {**check, "status": decide(states, check["missing"]), "lines": lines + check["lines"]}


def tie_check(paper: Study, claim: Claim, table, group: Group, column: Column, reference: str, where: str, tol: float) -> dict:
    """No effect: per pair, "no effect" (holds) when its 95 % interval lies inside ± `tol` (equivalence), "an effect"
    (does not hold) when it lies entirely outside it, inconclusive otherwise; a pair not run makes it incomplete unless
    a pair that ran shows an effect (a missing test is no evidence of no effect)."""
    check = pair_tests(paper, table, group, column, [tuple(p) for p in claim.params["pairs"]], where, tol, reference)
    if not check["results"]:
        return {**check, "status": "not run"}
    lines, states = [], []
    for r in check["results"]:
        inside, outside = -tol <= r["low"] and r["high"] <= tol, r["high"] < -tol or r["low"] > tol
        states.append("holds" if inside else "does not hold" if outside else "inconclusive")
        lines.append(
            f"{where} ({group.budget}): {display(paper, r['better'])} vs {display(paper, r['worse'])}: Δ {r['diff']:+.2f} "
            f"{shown(r)} against ±{tol:.2g} → "
            f"{'no effect' if inside else 'an effect' if outside else 'inconclusive'}"
        )
    return {**check, "status": decide(states, check["missing"]), "lines": lines + check["lines"]}


def label_claim(paper: Study, claim: Claim, cells: pd.DataFrame) -> ClaimReport:
    """A claim on the fused labels, checked on each rater setting's training pool at the protocol (label statistics, no
    training). Per dataset of its scope, the verdict-grade settings are judged, the paper's setting where the dataset has
    one; a dataset with only pipeline checks (a smoke run's pool is read all the same) leaves the claim incomplete, and a
    claim with nothing but pipeline checks is one."""
    left, op, right = claim.params["check"].split()
    evidence, statuses, gaps = [], [], []  # gaps: the datasets of its scope without verdict-grade evidence
    for dataset in claim.params["datasets"]:
        mine = cells[cells["dataset"].isin(samples(dataset)) & (cells["noise"] == "protocol")]
        verdicts = []
        for (name, raters), part in mine.groupby(["dataset", "raters"]):
            labels = next((x for x in part["labels"] if x), None)
            if not labels:
                continue
            a, b = labels[left], float(right) if right.replace(".", "").isdigit() else labels[right]
            holds = a < b if op == "<" else a > b
            verdicts.append((paper_setting(paper, name) in (None, raters), holds, bool(pipeline_reasons(part))))
            evidence.append(f"{name}/{raters}: {left} {a:.3f} {op} {b:.3f} → {'holds' if holds else 'does not hold'}")
        graded = [(is_paper, h) for is_paper, h, pipeline in verdicts if not pipeline]
        if not graded:
            gaps.append(
                f"{dataset}: only pipeline checks ran, no verdict-grade evidence: incomplete" if verdicts else f"{dataset}: not run"
            )
            continue
        identified = [h for is_paper, h in graded if is_paper] or [h for _, h in graded]  # the paper's setting, per dataset
        statuses.append("holds" if all(identified) else "does not hold")
    if not evidence:
        return ClaimReport(claim, "not run", ["no cell of a dataset this claim is about"])
    if not statuses:
        return ClaimReport(claim, "pipeline check", evidence)
    return ClaimReport(claim, worst(statuses + ["incomplete"] * len(gaps)), evidence + gaps)


def combine(paper: Study, claim: Claim, checks: list[dict]) -> ClaimReport:
    """A claim's verdict from its checks, part by part of its scope (a column, or a column at one noise level, each
    check's "part"): a part is judged on its verdict-grade checks, under the paper's setting per dataset where that
    dataset has one, and takes the worst of their statuses (`SEVERITY`); a part with no cell, or with only pipeline
    checks, is incomplete and named. The claim takes the worst of its parts; "pipeline check" when every check that ran
    is one; "not run" when nothing did."""
    evidence = [line for c in checks for line in c["lines"]]
    ran = [c for c in checks if c["status"] != "not run"]
    if not ran:
        return ClaimReport(claim, "not run", evidence or ["no cells measure it in this results folder"])
    if all(c["group"].kind == "pipeline check" for c in ran):
        return ClaimReport(claim, "pipeline check", evidence)
    statuses = []
    for part in dict.fromkeys(c["part"] for c in checks):
        graded = [c for c in ran if c["part"] == part and c["group"].kind != "pipeline check"]
        if not graded:
            statuses.append("incomplete")
            if any(c["part"] == part for c in ran):
                evidence.append(f"{part}: only pipeline checks ran, no verdict-grade evidence: incomplete")
            continue
        for dataset in dict.fromkeys(c["group"].dataset for c in graded):
            mine = [c for c in graded if c["group"].dataset == dataset]
            judged = [c for c in mine if is_paper_setting(paper, c["group"])] or mine  # the paper's setting, per dataset
            statuses += [c["status"] for c in judged]
    return ClaimReport(claim, worst(statuses), evidence)
