"""What a results folder ran and where, as its cells recorded it: the reproduction page's banner and its configuration
section (bench/reproduce/page.py), and the reasons a rater setting is a pipeline check.

config.json gives the budget, the run options and the split sizes (`bench.reproduce.assessment.cell_info`); manifest.json the
device, precision, engine, CPU, threads, versions and commit.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pandas as pd

from bench import store
from bench.evaluate.long_table import select
from bench.report.table_notes import OPTIONS
from bench.report.views import own_reading
from bench.reproduce.assessment import Assessment, cell_info, span
from bench.reproduce.page_format import Block, plural
from bench.reproduce.verdicts import Group, pipeline_reasons
from bench.results_folder import ResultsFolder
from datasets import DataError, get_dataset


def is_stand_in(g: Group) -> bool:
    """A group on a dataset that stands in for the table's own (mnist-5k for Choledoch): its Δ to the paper means nothing."""
    return bool(g.stands_in_for)


def provenance(results: Path) -> pd.DataFrame:
    """One row per finished cell: `bench.reproduce.assessment.cell_info`'s columns (keys, budget, input, flag, run options, split
    sizes) and, from its manifest.json, the machine (cpu, device, precision, engine, threads), software (python, torch,
    numpy, commit) and the reading its numbers are read from (`bench.report.views.own_reading`)."""
    cells = cell_info(results)
    machine = [
        {
            **info["cell"],
            "cpu": info.get("cpu", ""),
            "device": info.get("device", ""),
            "precision": info.get("precision", ""),
            "engine": info.get("engine", ""),
            "threads": info.get("threads"),
            "python": info.get("versions", {}).get("python", ""),
            "torch": info.get("versions", {}).get("torch", ""),
            "numpy": info.get("versions", {}).get("numpy", ""),
            "commit": (info.get("git_commit") or "")[:10],
            "reading": own_reading(r),
        }
        for r in ResultsFolder.of(results).records
        for info in (r.manifest,)
    ]
    columns = ["cpu", "device", "precision", "engine", "threads", "python", "torch", "numpy", "commit", "reading"]
    return cells.merge(pd.DataFrame(machine, columns=[*store.KEYS, *columns]), on=store.KEYS, how="left")


def _distinct(values) -> list:
    """The distinct values in first-seen order, None and NaN left out."""
    return list(dict.fromkeys(v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))))


def seeds_per_method(cells: pd.DataFrame) -> str:
    """The seeds and how many each method has: "0, 1, 2 (3 per method)"."""
    if cells.empty:
        return "–"
    per = cells.groupby(["dataset", "raters", "noise", "method"])["seed"].nunique()
    count = f"{per.min()}" if per.min() == per.max() else f"{per.min()}–{per.max()}"
    return f"{', '.join(map(str, sorted(set(cells['seed']))))} ({count} per method)"


def _sizes(cells: pd.DataFrame) -> str:
    """Train / val / test images per dataset: "mnist-5k 4000 / 500 / 1000" (a range where cells differ)."""
    out = []
    for dataset, part in cells.groupby("dataset", sort=True):
        out.append(f"{dataset} " + " / ".join(span(_distinct(part[f"{split}_images"])) for split in ("train", "val", "test")))
    return "; ".join(out) or "–"


def _options(cells: pd.DataFrame) -> str:
    """The run options that cut a run short (`--max-steps`, `--train-size`, `--test-size`), "none" where not set."""
    parts = []
    for option in OPTIONS:
        values = sorted(int(v) for v in _distinct(cells[option]))
        parts.append(f"--{option.replace('_', '-')} {', '.join(map(str, values)) or 'none'}")
    return ", ".join(parts)


def _settings(cells: pd.DataFrame) -> str:
    """Each rater setting: "mnist-5k `lfnet` (style lfnet, input clean)"."""
    rows = cells[["dataset", "raters", "input"]].drop_duplicates().sort_values(["dataset", "raters"])
    return "; ".join(f"{d} `{r}` (style {_style(d, r)}, input {i or '–'})" for d, r, i in rows.itertuples(index=False)) or "–"


def _style(dataset: str, label: str) -> str:
    """The rater style of a setting label a cell ran under; the label itself where it no longer checks (an old folder)."""
    try:
        return get_dataset(dataset).setting(label).style
    except DataError:
        return label


MACHINE = ["device", "precision", "engine", "cpu", "threads"]
SOFTWARE = ["python", "torch", "numpy", "commit"]


def _combos(cells: pd.DataFrame, columns: list[str], fmt) -> str:
    """Each distinct combination of `columns` (missing values as "") formatted by `fmt(dict)`, with its number of cells
    where the cells differ."""
    if cells.empty:
        return "–"
    rows = cells[columns].astype(object).where(cells[columns].notna(), "")
    counts = Counter(tuple(r) for r in rows.to_numpy())  # first-seen order
    texts = [fmt(dict(zip(columns, key))) for key in counts]
    return texts[0] if len(texts) == 1 else "; ".join(f"{t} ({n} cells)" for t, n in zip(texts, counts.values()))


def _machine(row: dict) -> str:
    n = int(row["threads"]) if row["threads"] != "" else 0
    threads = f", {n} thread{'s' if n > 1 else ''}" if n else ""
    return f"{row['device'] or '–'}, {row['precision'] or '–'}, {row['engine'] or '–'} engine, CPU {row['cpu'] or '–'}{threads}"


def _software(row: dict) -> str:
    return f"python {row['python'] or '–'}, torch {row['torch'] or '–'}, numpy {row['numpy'] or '–'}, commit {row['commit'] or '–'}"


def banner(a: Assessment, cells: pd.DataFrame) -> list[list[str]]:
    """What was run and where, as (what, value) rows: the first thing on the page."""
    return [
        ["results folder", f"`{a.results}`"],
        [
            "verdict grade?",
            "; ".join(
                f"no, a pipeline check: {d} `{r}`: {reason}"
                for (d, r), part in cells.groupby(["dataset", "raters"], sort=True)
                if (reason := ", ".join(pipeline_reasons(part)))
            )
            or "yes, every rater setting",
        ],
        ["budget", (f"`{a.budget}`: {a.protocol}" if a.protocol else f"`{a.budget}`") if a.budget else "–"],
        [
            "reading",
            ", ".join(f"`{r}`" for r in sorted(set(cells["reading"]))) + " (the weights each cell's numbers are read from: "
            'docs/decisions.md, "Readings along one trajectory"; `bench report --reading NAME` for another)',
        ],
        [
            "cells",
            f"{len(cells)} finished: {plural(cells['method'].nunique(), 'method')}, "
            f"{plural(len(cells[['dataset', 'raters']].drop_duplicates()), 'rater setting')}",
        ],
        ["seeds", seeds_per_method(cells)],
        ["images (train / val / test)", _sizes(cells)],
        ["run options", _options(cells)],
        ["rater settings", _settings(cells)],
        ["machine", _combos(cells, MACHINE, _machine)],
        ["software", _combos(cells, SOFTWARE, _software)],
    ]


def configuration_blocks(cells: pd.DataFrame) -> list[Block]:
    """The run's configuration and environment per rater setting, with the reasons a setting is a pipeline check; nothing
    where there is one setting (the run table at the top of the page says it all)."""
    if cells[["dataset", "raters"]].drop_duplicates().shape[0] <= 1:
        return []
    rows = []
    for (dataset, raters), part in cells.groupby(["dataset", "raters"], sort=True):
        reasons = pipeline_reasons(part)
        rows.append(
            [
                f"{dataset} `{raters}`",
                ", ".join(sorted(set(part["budget"]))),
                seeds_per_method(part),
                _sizes(part).removeprefix(f"{dataset} "),
                _options(part),
                ", ".join(_distinct(part["input"])) or "–",
                _combos(part, MACHINE, _machine),
                _combos(part, SOFTWARE, _software),
                "; ".join(reasons) or "none: verdict grade",
            ]
        )
    return [
        ("h", 2, "Run configuration and environment"),
        (
            "p",
            "Per rater setting, as each finished cell recorded it (config.json: budget, options, split sizes; manifest.json: "
            "device, precision, CPU, versions, commit). Any of the reasons in the last column makes the setting's values and "
            "claims a pipeline check, not a verdict.",
        ),
        (
            "table",
            [
                "setting",
                "budget",
                "seeds",
                "images (train / val / test)",
                "run options",
                "input",
                "machine",
                "software",
                "pipeline check because",
            ],
            rows,
        ),
    ]


def pipeline_line(cells: pd.DataFrame, dataset: str, raters: str, group: Group | None = None) -> str:
    """ "pipeline check, not a verdict: <reasons>" for a rater setting's cells (and, given its `group` in a paper table,
    the dataset it stands in for), "" when they are verdict grade."""
    reasons = pipeline_reasons(select(cells, dataset=dataset, raters=raters))
    if group is not None and is_stand_in(group):
        reasons = [f"{group.dataset} stands in for {group.stands_in_for}", *reasons]
    return f"pipeline check, not a verdict: {', '.join(reasons)}" if reasons else ""
