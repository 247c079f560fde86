"""A results folder read at another of its cells' readings (`bench report --reading NAME`; docs/decisions.md, "Readings
along one trajectory").

A cell's result is its budget's primary reading (metrics.parquet); the other readings it scored are in readings.parquet.
`view` writes `<results>/views/<NAME>/`, a results folder whose cells hold the rows of reading NAME as their
metrics.parquet (each cell's config, training log and manifest beside them, the manifest naming the reading), so that
every table, figure and page of the report reads it as it reads the primary one. A cell without that reading is left out
of the view, and the report says how many were.
"""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

from bench import store
from bench.files import read_table, write_json, write_table
from bench.results_folder import ResultsFolder
from bench.train.budget import BUDGETS

VIEWS = "views"  # under a results folder: one folder a reading


def own_reading(record: store.CellRecord) -> str:
    """The reading a cell's metrics.parquet holds: its manifest's `reading`, else its budget's primary (a cell from before
    readings were kept; `rule` for a budget no longer defined)."""
    budget = BUDGETS.get((record.config.get("budget") or {}).get("name", ""))
    return record.manifest.get("reading") or (budget.primary if budget else "rule")


def readings_of(results: Path) -> Counter:
    """How many finished cells of `results` hold each reading, their own or scored beside it."""
    counts: Counter = Counter()
    for r in ResultsFolder.of(results).records:
        counts.update({own_reading(r), *(r.manifest.get("readings") or {})})
    return counts


def view(results: Path, name: str) -> tuple[Path, int, int]:
    """Write `<results>/views/<name>/` (replacing an earlier one) and collect it; returns (its folder, the cells in it, the
    cells left out because they do not hold `name`)."""
    folder = results / VIEWS / name
    shutil.rmtree(folder, ignore_errors=True)
    held = left = 0
    for r in ResultsFolder.of(results).records:
        own = own_reading(r) == name
        if not own and name not in (r.manifest.get("readings") or {}):
            left += 1
            continue
        rows = read_table(r.folder / store.METRICS)
        if not own:
            kept = read_table(r.folder / store.READINGS)
            rows = kept[kept["reading"] == name].drop(columns=["reading", "reading_step"])
        out = store.cell_dir(folder, r.cell)
        out.mkdir(parents=True)
        for file in (store.CONFIG, store.TRAIN_LOG) + ((store.CALIBRATION_BINS,) if own else ()):
            if (r.folder / file).is_file():
                shutil.copy2(r.folder / file, out / file)
        step = (r.manifest.get("readings") or {}).get(name, {}).get("step")
        write_json(out / store.MANIFEST, {**r.manifest, "reading": name, "reading_step": step, "read_from": str(r.folder)})
        write_table(out / store.METRICS, rows)
        held += 1
    if held:
        store.collect(folder)
    return folder, held, left
