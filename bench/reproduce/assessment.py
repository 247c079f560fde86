"""Does the paper reproduce? Every number and claim of the study beside what a results folder measured, with a verdict.

`assess(results, data_root)` reads the collected long table, the cells' manifests and the study
(bench/study.py) and returns an `Assessment`: per paper table, one column group per rater setting
that was run (the setting the study identifies as the paper's first), each value with its verdict;
per column, the rank agreement with the paper; per claim of the text, its verdict and evidence.
bench/reproduce/page.py renders it as REPRODUCTION.md and a self-contained REPRODUCTION.html.

The verdict rules are fixed in bench/reproduce/verdicts.py (`VALUE_RULE`, `CLAIM_RULE`) and printed above any
number; the claims are checked in bench/reproduce/claims.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from bench import store
from bench.evaluate.long_table import pooled_areas, select
from bench.evaluate.metrics import higher_is_better
from bench.report import stats, stop_audit
from bench.report.rows import table_of
from bench.report.table_notes import OPTIONS  # the run options that make a cell a pipeline check (config.json)
from bench.reproduce.claims import assess_claim
from bench.reproduce.verdicts import (
    ClaimReport,
    Entry,
    Group,
    Measured,
    TableReport,
    group_for,
    judge,
    measure,
    measured_reference,
    scale,
    stand_ins,
    study_tolerance,
)
from bench.results_folder import ResultsFolder
from bench.study import Column, Study, Table
from datasets import DATASETS


@dataclass
class Assessment:
    study: Study
    results: Path
    budget: str
    tables: list[TableReport]
    claims: list[ClaimReport]
    values: list[tuple]  # (study Value, Group or None, Entry or None)
    readings: list[dict]  # one row per declared reading × (dataset, raters) that ran it, see `assess_readings`
    table: pd.DataFrame  # the results folder's long table (empty when nothing was collected), for the page's figures
    selection: pd.DataFrame  # the selection reading (docs/decisions.md), see `assess_selection`
    protocol: str = ""  # under which protocol every verdict stands, see `protocol_note`
    logs: pd.DataFrame = field(default_factory=pd.DataFrame)  # the collected training logs, for the selection and the page's curves
    stops: dict = field(default_factory=dict)  # {(dataset, raters, noise): {method: flag}}: bench.report.stop_audit.failures
    audit: Path | None = None  # the folder whose stop audit gave `stops`
    folder: ResultsFolder | None = None  # `results` as read once (for the page's provenance)


# --------------------------------------------------------------------------- reading the results folder


def cell_info(results: Path) -> pd.DataFrame:
    """One row per finished cell: keys, budget, rater setting's label statistics and input, how its stages stopped, its
    degenerate-prediction flag ("empty", "full" or "") and its teacher diagnostic ({} for a method without one), the
    run options `OPTIONS` (None where not set), the split sizes `IMAGES` it trained, validated and was scored on, and its
    selection reading ({} where not kept: `bench.run.cell.gt_selected`)."""
    rows = []
    for r in ResultsFolder.of(results).records:
        setting, options, config = r.manifest.get("rater_setting") or {}, r.config.get("options") or {}, r.config
        rows.append(
            {
                **r.manifest["cell"],
                "budget": config.get("budget", {}).get("name", ""),
                "labels": setting.get("labels") or {},
                "input": setting.get("input", ""),
                "stops": "+".join(r.stops),
                "flag": r.degenerate.get("flag", ""),
                "teacher": r.manifest.get("teacher") or {},
                "selection": r.manifest.get("selection") or {},
                **{k: options.get(k) for k in OPTIONS},
                **{k: config.get(k) for k in IMAGES},
            }
        )
    return pd.DataFrame(
        rows, columns=[*store.KEYS, "budget", "labels", "input", "stops", "flag", "teacher", "selection", *OPTIONS, *IMAGES]
    )


IMAGES = ("train_images", "val_images", "test_images")


def per_seed(table: pd.DataFrame, column: Column, reference: str) -> pd.DataFrame:
    """Per (dataset, raters, method, seed): the mean over cases of the column's metric at the protocol level."""
    rows = select(table, metric=column.metric, structure=column.structure, reference=reference, noise="protocol")
    return rows.groupby(["dataset", "raters", "method", "seed"], dropna=False)["value"].mean().reset_index()


# --------------------------------------------------------------------------- assessing


def assess(results: Path, data_root: Path, paper: Study, audit: Path | None = None) -> Assessment:
    """`paper`: the study whose numbers and claims are checked; `audit`: the folder whose stop audit flags the methods
    (`stop_audit.failures`; default `results`)."""
    results = ResultsFolder.of(results)
    table = results.read_collected(store.METRICS)
    if not set(store.COLUMNS) <= set(table.columns):  # nothing collected yet (or a table from elsewhere): nothing measured
        table = pd.DataFrame(columns=store.COLUMNS)
    cells = cell_info(results)
    budgets = sorted(set(cells["budget"]))
    budget = budgets[0] if len(budgets) == 1 else ", ".join(budgets)
    tables = [assess_table(t, table, cells, paper, data_root) for t in paper.tables]
    values = [assess_value(v, table, cells, paper) for v in paper.values]
    claims = [assess_claim(c, tables, table, cells, paper) for c in paper.claims]
    logs = results.read_collected(store.TRAIN_LOGS)
    selection = assess_selection(logs, table, cells)
    return Assessment(
        paper,
        results.path,
        budget,
        tables,
        claims,
        values,
        assess_readings(table, cells, paper),
        table,
        selection,
        protocol_note(budgets),
        logs,
        stop_audit.failures(results, audit),
        audit or results.path,
        results,
    )


def protocol_note(budgets: list[str]) -> str:
    """What the verdicts stand under: this benchmark's protocol unless every cell ran the paper's own recipe."""
    if not budgets:
        return ""
    if set(budgets) <= {"paper", "paper-rcl15"}:
        return f"under the paper's own recipe (budget {', '.join(budgets)})"
    ours = ", ".join(b for b in budgets if not b.startswith("paper"))
    ran = " and the paper's recipe" if any(b.startswith("paper") for b in budgets) else "; the paper's recipe (`--budget paper`) not run"
    rule = all(b in ("quick", "plateau", "plateau-1127") for b in budgets if not b.startswith("paper"))
    how = "the stopping rule on the raters' validation loss" if rule else "fixed lengths read without GT"
    return f"under this benchmark's {ours} protocol ({how}){ran}"


SELECTION_COLUMNS = [
    "dataset",
    "raters",
    "noise",
    "method",
    "seeds",
    "rule_step",
    "rule_dsc",
    "rule_sd",
    "gt_step",
    "gt_dsc",
    "gt_sd",
    "gain",
    "gain_low",
    "gain_high",
    "test_dsc",
    "test_sd",
    "gt_test_dsc",
    "gt_test_sd",
    "gt_test_seeds",
]


def selection_steps(logs: pd.DataFrame) -> pd.DataFrame:
    """Per cell, in the stage that logs the validation DSC against GT (the last): the step the stopping rule restored and
    the evaluation with the highest validation GT DSC, with that DSC at each (%), from the collected training logs."""
    if "diagnostic_gt_dsc" not in logs.columns:
        return pd.DataFrame(columns=[*store.KEYS, "rule_step", "rule_dsc", "gt_step", "gt_dsc"])
    evals = logs[(logs["event"] == "eval") & logs["diagnostic_gt_dsc"].notna()]
    stops = logs[logs["event"] == "stop"].set_index([*store.KEYS, "stage"])["restored_step"]
    rows = []
    for key, part in evals.groupby([*store.KEYS, "stage"], sort=True):
        by_step = part.set_index("step")["diagnostic_gt_dsc"]
        rule = stops.get(key)
        if rule is None or rule not in by_step.index:  # a stage that did not finish, or stopped between evaluations
            continue
        rows.append(
            {
                **dict(zip(store.KEYS, key)),
                "rule_step": int(rule),
                "rule_dsc": float(by_step[rule]),
                "gt_step": int(by_step.idxmax()),
                "gt_dsc": float(by_step.max()),
            }
        )
    return pd.DataFrame(rows, columns=[*store.KEYS, "rule_step", "rule_dsc", "gt_step", "gt_dsc"])


def span(values) -> str:
    """Numbers as the page prints a range of them: "240–340", "240" when all agree, "–" when there are none."""
    values = sorted({int(v) for v in values})
    if not values:
        return "–"
    return str(values[0]) if len(values) == 1 else f"{values[0]}–{values[-1]}"


def assess_selection(logs: pd.DataFrame, table: pd.DataFrame | None = None, cells: pd.DataFrame | None = None) -> pd.DataFrame:
    """The selection reading declared in docs/decisions.md, per (dataset, raters, noise, method): the validation DSC
    against GT (%) at the step the stopping rule restored and at the evaluation with the highest one (mean and sd over
    seeds, and the steps' range), and the gain with its 95 % t interval over seeds; beside them the fair row, the test DSC
    against GT of the rule's weights (mean and sd over seeds of the case means), from the long `table`, and, for the
    cells that kept them (`cells`' selection column), the test DSC against GT of the GT-best weights. The validation
    figures are chosen and measured on the same images: they flatter the reading, and none replaces the fair row."""
    steps = selection_steps(logs)
    fair: dict = {}
    if table is not None and len(table):
        rows = select(table, metric="dsc", reference="gt", structure="foreground")
        seeds = rows.groupby(["dataset", "raters", "noise", "method", "seed"])["value"].mean().mul(100)
        fair = {key: part.to_numpy() for key, part in seeds.groupby(level=[0, 1, 2, 3])}
    kept: dict = {}
    if cells is not None and len(cells):
        scored = cells[cells["selection"].astype(bool)]
        for key, part in scored.groupby(["dataset", "raters", "noise", "method"]):
            kept[key] = pd.Series([x["test_gt_dsc"] for x in part["selection"]], dtype=float)
    rows = []
    for key, part in steps.groupby(["dataset", "raters", "noise", "method"], sort=True):
        test, at_best = pd.Series(fair.get(key, []), dtype=float), kept.get(key, pd.Series(dtype=float))
        gain = measure(part["gt_dsc"].to_numpy() - part["rule_dsc"].to_numpy(), 1.0)
        rows.append(
            {
                **dict(zip(["dataset", "raters", "noise", "method"], key)),
                "seeds": len(part),
                "rule_step": span(part["rule_step"]),
                "rule_dsc": part["rule_dsc"].mean(),
                "rule_sd": part["rule_dsc"].std(),
                "gt_step": span(part["gt_step"]),
                "gt_dsc": part["gt_dsc"].mean(),
                "gt_sd": part["gt_dsc"].std(),
                "gain": gain.mean,
                "gain_low": gain.ci[0],
                "gain_high": gain.ci[1],
                "test_dsc": test.mean() if len(test) else math.nan,
                "test_sd": test.std(),
                "gt_test_dsc": at_best.mean() if len(at_best) else math.nan,
                "gt_test_sd": at_best.std(),
                "gt_test_seeds": len(at_best),
            }
        )
    return pd.DataFrame(rows, columns=SELECTION_COLUMNS)


def assess_readings(table: pd.DataFrame, cells: pd.DataFrame, paper: Study) -> list[dict]:
    """Each declared reading of the reference method, per (dataset, raters) at the protocol: DSC vs the dataset's reference
    (per-seed case means), precision / recall / area, the paired test against the first reading, and the teacher's mean
    p(fg) outside the threshold-vote mask split by GT (`cells`' teacher column, from the manifests)."""
    if not paper.readings:
        return []
    first = paper.readings[0]["method"]
    names = [r["method"] for r in paper.readings]
    taught = cells[cells["method"].isin(names) & (cells["noise"] == "protocol") & cells["teacher"].astype(bool)]
    teachers = taught.groupby(["dataset", "raters", "method"])["teacher"].agg(list).to_dict()
    studied = {d for t in paper.tables for c in t.columns for d in stand_ins(t, c.dataset)}  # as the tables: the study's datasets
    rows = table[(table["metric"] == "dsc") & (table["noise"] == "protocol") & table["method"].isin(names) & table["dataset"].isin(studied)]
    out = []
    for (dataset, raters), part in rows.groupby(["dataset", "raters"], sort=True):
        part = part[part["reference"] == DATASETS[dataset].reference]
        structure = part["structure"].iloc[0] if len(part) else "foreground"
        part = part[part["structure"] == structure]
        column = Column(dataset, "dsc", DATASETS[dataset].reference, structure)
        seeds = per_seed(part, column, column.reference)
        pooled = areas(part, dataset, raters, column.reference, column)
        tests = stats.paired_tests(paper, part, "dsc", structure, first, True, others=[n for n in names if n != first])
        tests = tests.set_index("method") if len(tests) else pd.DataFrame()
        for reading in paper.readings:
            method = reading["method"]
            got = seeds[seeds["method"] == method]["value"].to_numpy()
            if not len(got):
                continue
            ts = teachers.get((dataset, raters, method), [])
            out.append(
                {
                    **reading,
                    "dataset": dataset,
                    "raters": raters,
                    "structure": structure,
                    "measured": measure(got, scale("dsc")),
                    "areas": pooled.loc[method].to_dict() if method in pooled.index else {},
                    "test": tests.loc[method].to_dict() if method in tests.index else None,
                    "teacher_fg": float(np.mean([teacher_value(t, "gt_fg") for t in ts])) if ts else math.nan,
                    "teacher_bg": float(np.mean([teacher_value(t, "gt_bg") for t in ts])) if ts else math.nan,
                    "teacher_cells": len(ts),
                }
            )
    return out


def teacher_value(teacher: dict, where: str) -> float:
    """A manifest's mean teacher foreground probability outside the selected pixels (`bench.train.teacher.teacher_diagnostic`);
    manifests written before its keys lost the name of LF-Net's selection carry `p_fg_outside_tv_…`."""
    return teacher.get(f"p_fg_outside_{where}", teacher.get(f"p_fg_outside_tv_{where}"))


def assess_table(t: Table, table: pd.DataFrame, cells: pd.DataFrame, paper: Study, data_root: Path) -> TableReport:
    groups: dict[tuple[str, str], Group] = {}
    not_run: dict[str, str] = {}
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
                group.entries[j] = column_entries(paper, t, j, part, column, group, cells)
                group.ranking[j] = ranking(paper, t, j, group.entries[j], table, column, dataset, raters, reference)
                group.extra[j] = areas(table, dataset, raters, reference, column)
                found = True
        if not found:
            not_run[column.dataset] = absent(column.dataset, data_root)
    return TableReport(t, list(groups.values()), not_run)


def column_entries(paper: Study, t: Table, j: int, part: pd.DataFrame, column: Column, group: Group, cells: pd.DataFrame) -> list[Entry]:
    factor = scale(column.metric)
    measured = {m: measure(g["value"].to_numpy(), factor) for m, g in part.groupby("method")}
    if column.metric == "dsc" and group.labels.get("average") is not None:
        measured["average"] = Measured(100 * group.labels["average"], math.nan, 0, (math.nan, math.nan))
    # Other measured methods of the rows' registry table after the paper's rows (the reference method shows in every table).
    kinds = {table_of(paper, r.method) for r in t.rows if r.method != paper.reference_method} - {None}
    rows = [r.method for r in t.rows]
    order = rows + [m for m in sorted(measured) if m not in rows and table_of(paper, m) in kinds]
    out = []
    for method in order:
        paper_value, mine = t.value(method, j), measured.get(method)
        entry = Entry(method, paper_value, mine)
        if paper_value is None or mine is None:
            entry.verdict = "no paper value" if paper_value is None else "not run"
        else:
            judge(entry, study_tolerance(column, paper, paper_value[0]))  # one tolerance per measurement, whatever table
            if group.kind != "verdict":  # the interval is shown, the verdict is the group's
                entry.verdict = group.kind
        out.append(entry)
    return out


def ranking(
    paper: Study, t: Table, j: int, entries: list[Entry], table: pd.DataFrame, column: Column, dataset: str, raters: str, reference: str
) -> dict:
    """Kendall τ between the paper's and the measured order of the methods both have, each column's winner, and the
    paired test of the measured best method against the reference method."""
    higher = higher_is_better(column.metric)
    both = [e for e in entries if e.paper and e.measured and e.method not in ("average", paper.oracle)]
    out: dict = {"n": len(both), "scale": scale(column.metric)}
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
            rows = select(table, dataset=dataset, raters=raters, noise="protocol", reference=reference)
            tests = stats.paired_tests(paper, rows, column.metric, column.structure, paper.reference_method, higher, others=[best.method])
            if len(tests):
                out["test"] = tests.iloc[0].to_dict()
    return out


def areas(table: pd.DataFrame, dataset: str, raters: str, reference: str, column: Column) -> pd.DataFrame:
    """Precision, recall and predicted area ÷ reference area per method, pooled over cases and seeds (hard-mask rows)."""
    rows = select(table, dataset=dataset, raters=raters, noise="protocol", metric="dsc", reference=reference, structure=column.structure)
    return pooled_areas(rows, "method")


def absent(dataset: str, data_root: Path) -> str:
    """Why a dataset's column has no cells: its files are not under the data root (with the card's hint), or it was not run."""
    card = DATASETS[dataset].card
    if card.layout and not (data_root / dataset).exists():
        return f"not run: {dataset} not found under {data_root} (put {card.download} in {card.layout})"
    return f"not run: no {dataset} cells in this results folder (python -m bench run --dataset {dataset} --budget plateau --methods all)"


def assess_value(value, table: pd.DataFrame, cells: pd.DataFrame, paper: Study) -> tuple:
    """A number of the text, against the first setting that measured it (the paper's setting first); a number against
    an expert ground truth that was never released is not comparable, measured or not."""
    if value.column.reference == "expert" and value.method == "average":
        return value, None, Entry(value.method, (value.mean, value.sd), None, "not comparable: the paper's expert GT was not released")
    t = Table(value.id, value.id, value.line, value.text, (value.column,), ())
    for dataset in stand_ins(t, value.column.dataset):
        reference = measured_reference(value.column, dataset)
        seeds = per_seed(table, value.column, reference)
        seeds = select(seeds, dataset=dataset, method=value.method)
        for raters in sorted(set(seeds["raters"]), key=lambda r: r != paper.paper_raters.get(value.column.dataset)):
            group = group_for(dataset, raters, value.column.dataset, cells, value.column, paper)
            mine = measure(seeds[seeds["raters"] == raters]["value"].to_numpy(), scale(value.column.metric))
            entry = judge(Entry(value.method, (value.mean, value.sd), mine), study_tolerance(value.column, paper, value.mean))
            entry.verdict = group.kind if group.kind != "verdict" else entry.verdict
            return value, group, entry
    return value, None, None


# --------------------------------------------------------------------------- claims
