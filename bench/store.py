"""Results store (docs/architecture.md#who-owns-what): the only code that knows a results folder's layout.

A cell (one training run) lives in `<results>/runs/<dataset>/<raters>/<noise>/<method>/seed-<s>/`
(`cell_dir`), beside its claim `seed-<s>.lock`. It holds config.json, manifest.json, train_log.csv,
checkpoints/, predictions.npz, calibration.parquet and metrics.parquet. A cell is done iff its
`metrics.parquet` exists; it is written last, through a temporary file and `os.replace`, so a killed
run never leaves a truncated or half-counted table. `collect` gathers every done cell into the
results folder's long tables.

Every file is read through `bench.files` (`read_json`, `read_table`), and a file that is there but damaged (a disk
fault, a copy cut short, an editor) raises `UnreadableFile`: one line naming the file, what is wrong and the command
that repairs it (`damage`, `repair`). A damaged finished cell is never dropped from a table silently: `bench run`
retrains it where it is one of the run's cells and refuses to collect otherwise, `bench rescore` rebuilds its metrics
from its predictions, and a damaged collected table is rebuilt from the cells (`read_collected`).

Results folders written before the evaluation reference left the cell's path
(`runs/<dataset>/<reference>/noise-<x>/…`) are found by `ResultsFolder.old_layout`; `bench rescore` moves them.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pandas as pd

from bench.evaluate.long_table import CALIBRATION, COLUMNS, KEYS, summarise
from bench.files import (
    UnreadableFile,
    alive,
    check_table,
    check_zip,
    locked,
    read_json,
    read_table,
    write_json,
    write_table,
)
from bench.identity import Cell, cell_of, retrain_command

# A results folder's file names: no other module spells them.
CONFIG = "config.json"  # a cell's: what decides its result besides its identity (bench.run.cell.cell_config)
MANIFEST = "manifest.json"  # a cell's provenance, status and measurements beside the result
TRAIN_LOG = "train_log.csv"  # a cell's evaluations and stage stops (bench.train.checkpoints)
CHECKPOINTS, RESULT_WEIGHTS = "checkpoints", "result.pt"  # a cell's stage weights (`checkpoint_path`); its result's, if others
PREDICTIONS = "predictions.npz"  # a cell's test probabilities (bench/evaluate/predictions.py)
METRICS = "metrics.parquet"  # a cell's long rows; at the top, every finished cell's (`collect`)
CALIBRATION_BINS = "calibration.parquet"  # reliability bins, per cell and collected
TEST_CURVE, READINGS = "test_curve.parquet", "readings.parquet"  # a cell's test counts along its trajectory; its other readings
PARTS = "readings"  # ... one file a point or reading while it trains, joined when it finishes
SUMMARY = "summary.csv"  # mean ± std over seeds (`collect`)
TRAIN_LOGS = "train_logs.parquet"  # every cell's training log (`collect`)
COLLECTED = (METRICS, SUMMARY, CALIBRATION_BINS, TRAIN_LOGS)  # the tables `collect` writes at the top
RUNS = "runs"  # the cells' folders (`cell_dir`)
REPORT = "report"  # `bench report`'s tables and figures, by default
PAPER = "paper"  # the reproduction page (`bench report`) and `bench paper`'s recipes
STOP_AUDIT = "stop_audit"  # `bench audit-stops`, under the rule's results folder


def cell_dir(results: Path, cell: Cell) -> Path:
    return results.joinpath(RUNS, *cell.parts)


def lock_path(results: Path, cell: Cell) -> Path:
    folder = cell_dir(results, cell)
    return folder.with_name(folder.name + ".lock")  # beside the cell folder, so --force can delete the folder under it


def is_done(results: Path, cell: Cell) -> bool:
    return (cell_dir(results, cell) / METRICS).is_file()


def precision_record() -> Path:
    """Where the fp32-or-bf16 choice measured per method and shape on CUDA is kept for later cells of this machine."""
    return cache_dir() / "cuda-precision.json"


def gpu_slot_lock(results: Path, card: int, slot: int) -> Path:
    """The lock a worker of this host holds while its cell uses slot `slot` of GPU `card`."""
    return results / "locks" / platform.node() / f"gpu-{card}-slot-{slot}.lock"


def sweep_record(results: Path, name: str) -> Path:
    """Where a sweep file given to `bench run --config` is kept with the results it produced."""
    return results / "sweeps" / f"{name}.toml"


def cell_at(folder: Path) -> Cell:
    """The cell a folder `<results>/runs/<dataset>/<raters>/<noise>/<method>/seed-<s>` holds, from its path alone (its
    manifest may be what is damaged)."""
    dataset, raters, noise, method, seed = folder.parts[-5:]
    return Cell(dataset, raters, noise, method, int(seed.removeprefix("seed-")))


def results_of(folder: Path) -> Path:
    """The results folder of a cell folder."""
    return folder.parents[5]


def repair(folder: Path, name: str) -> str:
    """How to repair the damaged file `name` of the finished cell in `folder`: re-scoring where only its scores are
    damaged (it needs the predictions), else training it again with the run that made it, or removing the cell folder."""
    results, cell = results_of(folder), cell_at(folder)
    retrain = f"`{retrain_command(results, cell)}` (with the options it ran with) retrains it, or remove {folder}"
    if name in (METRICS, CALIBRATION_BINS) and (folder / PREDICTIONS).is_file():
        return f"`python -m bench rescore --results {results}` rebuilds it from the cell's predictions; or {retrain}"
    return retrain


def read_cell_file(folder: Path, name: str):
    """A cell's JSON record ({} where missing) or table; UnreadableFile, with its repair, where it is damaged."""
    try:
        return read_json(folder / name) if name.endswith(".json") else read_table(folder / name)
    except UnreadableFile as e:
        raise e.with_repair(repair(folder, name)) from None


def read_config(folder: Path) -> dict:
    return read_cell_file(folder, CONFIG)


def write_config(folder: Path, config: dict) -> None:
    write_json(folder / CONFIG, config)


def read_manifest(folder: Path) -> dict:
    return read_cell_file(folder, MANIFEST)


def write_manifest(folder: Path, manifest: dict) -> None:
    write_json(folder / MANIFEST, manifest)


def cache_dir() -> Path:
    """Where decoded datasets are cached, one cache for every results folder: $BENCH_CACHE, else the user's cache folder
    (`$XDG_CACHE_HOME/lfnet-bench`, by default `~/.cache/lfnet-bench`). Its files are keyed by dataset, rater setting,
    noise level, data root and the adapters' code, so two results folders share a decode and never a stale one."""
    if os.environ.get("BENCH_CACHE"):
        return Path(os.environ["BENCH_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lfnet-bench"


@contextmanager
def claim(results: Path, cell: Cell, wait: bool = False):
    """Hold an exclusive lock on the cell while it runs; yields False if another process holds it (and `wait` is False).

    A killed sweep never leaves a stale claim (see `locked`), and two sweeps into one results
    folder train each cell once.
    """
    with locked(lock_path(results, cell), wait) as held:
        yield held


def open_cell(results: Path, cell: Cell, fresh: bool = False) -> Path:
    """The cell's folder, created; `fresh` deletes what an earlier run left. Call under the cell's claim."""
    out = cell_dir(results, cell)
    if fresh and out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    remove_half_written(out)
    return out


def remove_half_written(folder: Path) -> None:
    """Remove the `.<name>.<pid>.tmp<suffix>` files that a process killed mid-write left under a cell's folder (the atomic
    writer's own). Call under the cell's claim: then nobody else is writing there."""
    for stale in folder.rglob(".*.tmp*"):
        stale.unlink(missing_ok=True)


def cell_folders(results: Path) -> list[Path]:
    """Every cell folder of `results`, finished or not (`runs/*/*/*/*/seed-<s>`; the claims beside them are files)."""
    return [p for p in sorted((results / RUNS).glob("*/*/*/*/seed-*")) if p.is_dir()]


def finished(results: Path, strict: bool = True, manifests: dict | None = None, configs: dict | None = None) -> list[tuple]:
    """(folder, manifest, damage) of every finished cell in the current layout (a metrics.parquet, or a manifest that says
    so); damage: its first unreadable (`strict`: or missing) file (`damage`), the manifest {} when it is that file.
    `manifests` and `configs`, where given, receive every cell's manifest (None: unreadable) and the configs read."""
    out = []
    for folder in cell_folders(results):
        try:
            info = read_json(folder / MANIFEST)
        except UnreadableFile:
            info = None
        if manifests is not None:
            manifests[folder] = info
        if not (folder / METRICS).is_file() and (info or {}).get("status") != "done":
            continue  # not finished: a run trains it (a damaged manifest of an unfinished cell is rewritten then)
        if "reference" in (info or {}).get("cell", {}):
            continue  # the old layout: `bench rescore` moves it (ResultsFolder.old_layout)
        seen: dict = {}
        found = damage(folder, strict, manifest=info, seen=seen)
        if configs is not None and CONFIG in seen:
            configs[folder] = seen[CONFIG]
        out.append((folder, info if found is None or found.path.name != MANIFEST else {}, found))
    return out


def damage(folder: Path, strict: bool = True, manifest: dict | None = None, seen: dict | None = None) -> UnreadableFile | None:
    """The first file of a finished cell that cannot be read (manifest.json, config.json, metrics.parquet and, where
    present, calibration.parquet, train_log.csv and predictions.npz) or, when `strict`, that is missing but must be there
    (the first three), with its repair; None when there is none. Cheap: Parquet footers and the archive's directory, not
    the predictions themselves. `manifest`: the manifest already read (None: read it here, or it could not be read);
    `seen`: filled with the config it read, for a reader that keeps it (`bench.results_folder`)."""
    checks = (
        (MANIFEST, True, check_manifest if manifest is None else lambda p: check_manifest(p, manifest)),
        (CONFIG, True, read_json if seen is None else lambda p: seen.setdefault(CONFIG, read_json(p))),
        (METRICS, True, check_table),
        (CALIBRATION_BINS, False, check_table),
        (TRAIN_LOG, False, lambda p: read_table(p, columns=["stage", "step"])),
        (PREDICTIONS, False, lambda p: check_zip(p, ("probs", "case_ids"))),
    )
    for name, required, check in checks:
        path = folder / name
        try:
            if path.is_file():
                check(path)
            elif required and strict:
                raise UnreadableFile(path, "missing from a finished cell")
        except UnreadableFile as e:
            return e.with_repair(repair(folder, name))
    return None


def check_manifest(path: Path, manifest: dict | None = None) -> None:
    if not isinstance((manifest if manifest is not None else read_json(path)).get("cell"), dict):
        raise UnreadableFile(path, "holds no cell record")


def discard(results: Path, cell: Cell) -> None:
    """Remove a cell's folder under its claim, so it trains again from scratch (a damaged cell); a cell another process
    holds is left to it."""
    with claim(results, cell) as held:
        if held:
            shutil.rmtree(cell_dir(results, cell), ignore_errors=True)


STOP_KINDS = ("plateau", "cap", "fixed")  # how a stage ended: the stopping rule, the budget's cap, or a fixed length


def stop_kind(stage: dict) -> str:
    """How a stage of a manifest ended (`STOP_KINDS`): its record's `stop`; a manifest written before that field existed
    (2026-11-28) has only the reason text, which starts with the kind."""
    if stage.get("stop"):
        return stage["stop"]
    return next((kind for kind in STOP_KINDS if stage.get("reason", "").startswith(kind)), "")


@dataclass(frozen=True)
class CellRecord:
    """A finished cell as its folder records it, read once: its manifest now, its config.json on first use."""

    folder: Path
    manifest: dict

    @property
    def cell(self) -> Cell:
        return cell_of(self.manifest)

    @property
    def keys(self) -> dict:
        """The cell's KEYS as the long tables spell them."""
        return {k: self.manifest["cell"][k] for k in KEYS}

    @cached_property
    def config(self) -> dict:
        return read_config(self.folder)

    @property
    def stops(self) -> tuple[str, ...]:
        """How each stage ended, in stage order (`STOP_KINDS`)."""
        return tuple(stop_kind(s) for s in self.manifest.get("stages", {}).values())

    @property
    def degenerate(self) -> dict:
        """{"flag": "empty" | "full" | "", "empty_share", "full_share"}: whether its predictions were degenerate."""
        return self.manifest.get("degenerate", {})


def records(results: Path, rows: list | None = None, configs: dict | None = None) -> list[CellRecord]:
    """Every finished cell (`finished`'s `rows`, read here where not given, with the `configs` read beside them); an
    UnreadableFile naming the file and its repair for a cell with a file that cannot be read (a table would drop it)."""
    out = []
    for folder, info, found in finished(results, strict=False) if rows is None else rows:
        if found is not None:
            raise found
        if set(info.get("cell", {})) == set(KEYS) and info.get("status") == "done":
            record = CellRecord(folder, info)
            if configs and folder in configs:
                record.__dict__["config"] = configs[folder]  # the cached property, already read
            out.append(record)
    return out


def checkpoint_path(checkpoint_dir: Path, k: int, name: str, partial: bool = False) -> Path:
    """Stage k's weights (`stage-<k>-<name>.pt`), or the state of that stage in progress (`.partial.pt`)."""
    return checkpoint_dir / f"stage-{k}-{name}{'.partial' if partial else ''}.pt"


def held_path(checkpoint_dir: Path, k: int, name: str) -> Path:
    """The readings stage k held (`stage-<k>-<name>.held.pt`), kept from its end until the cell has scored them."""
    return checkpoint_dir / f"stage-{k}-{name}.held.pt"


def earlier_checkpoints(checkpoint_dir: Path, k: int) -> list[Path]:
    """The finished-stage weights of stages before k: once stage k has finished, its file holds the whole method (every
    stage's networks) and resuming or rebuilding the cell reads only it."""
    return [
        p for p in checkpoint_dir.glob("stage-*.pt") if not p.name.endswith((".partial.pt", ".held.pt")) and int(p.name.split("-")[1]) < k
    ]


def write_part(folder: Path, name: str, rows: pd.DataFrame) -> None:
    """One point of a cell's test curve (`curve-<step>`) or one reading (its name), rewritten alike by a resumed run."""
    (folder / PARTS).mkdir(exist_ok=True)
    write_table(folder / PARTS / f"{name}.parquet", rows)


def join_parts(folder: Path) -> None:
    """A finishing cell's parts joined into its test curve and readings tables (none where it kept none)."""
    parts = sorted((folder / PARTS).glob("*.parquet"))  # none where the folder is not there
    for table, curve in ((TEST_CURVE, True), (READINGS, False)):
        if chosen := [read_table(p) for p in parts if p.stem.startswith("curve-") == curve]:
            write_table(folder / table, pd.concat(chosen, ignore_index=True))
    shutil.rmtree(folder / PARTS, ignore_errors=True)


def finish_cell(folder: Path, manifest: dict, rows: pd.DataFrame, bins: pd.DataFrame) -> None:
    """Write a cell's manifest, reliability bins, test curve and readings and, last, its metrics (which mark it done)."""
    write_manifest(folder, manifest)
    write_table(folder / CALIBRATION_BINS, bins)
    join_parts(folder)
    write_table(folder / METRICS, rows)


def collect(results: Path, cells: list[CellRecord] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Gather every finished cell (`cells`, if read already) into `<results>/`: metrics.parquet (the long table),
    summary.csv, calibration.parquet and train_logs.parquet; returns (table, summary)."""
    with locked(results / ".collect.lock"):  # two sweeps finishing together: the later read is written last
        for stale in results.glob(".*.tmp*"):  # a collect killed mid-write left it
            pid = re.search(r"\.(\d+)\.tmp", stale.name)
            if pid and not alive(int(pid.group(1))):
                stale.unlink(missing_ok=True)
        cells = records(results) if cells is None else cells
        folders = [r.folder for r in cells if (r.folder / METRICS).is_file()]
        # Every cell is read before any table is written: a damaged cell leaves the tables as they were.
        table = gather(folders, METRICS, COLUMNS)
        summary = summarise(table, rater_averages(cells))
        bins, logs = gather(folders, CALIBRATION_BINS, CALIBRATION), training_logs(cells)
        write_table(results / METRICS, table)
        write_table(results / SUMMARY, summary)
        write_table(results / CALIBRATION_BINS, bins)
        write_table(results / TRAIN_LOGS, logs)
    return table, summary


def read_collected(results: Path, name: str, rebuild_missing: bool = False, opened=None) -> pd.DataFrame:
    """A collected table of `<results>/` (`METRICS`, `SUMMARY`, `CALIBRATION_BINS`, `TRAIN_LOGS`); empty where nothing
    was collected. A table that is damaged, or missing while finished cells are there, is first rebuilt from the cells
    (`collect`, with a note); one that cannot be rebuilt raises UnreadableFile naming it and the repair. The reliability
    bins and training logs are optional (an older collect had none): missing, they are rebuilt only on `rebuild_missing`.
    `opened`: the folder's `bench.results_folder.ResultsFolder`, to rebuild from its read."""
    path = results / name
    text = {k: str for k in ("dataset", "raters", "noise", "method", "reference", "structure", "metric")}  # "protocol", "0.45"
    read = (lambda: read_table(path, dtype=text)) if name == SUMMARY else (lambda: read_table(path))
    try:
        if path.is_file():
            return read()
        if name not in (METRICS, SUMMARY) and not rebuild_missing:
            return pd.DataFrame()
        problem = "missing"
    except UnreadableFile as e:
        problem = e.problem
    cells = finished(results) if opened is None else opened.finished
    if not cells:
        if problem == "missing":
            return pd.DataFrame()
        raise UnreadableFile(
            path, problem, f"no finished cell in {results}/runs to rebuild it from; remove it, or rerun the run that made it"
        )
    for _, _, found in cells:
        if found is not None:  # a table rebuilt without that cell would drop it silently: the cell is repaired first
            raise found
    try:
        collect(results) if opened is None else opened.collect()
    except OSError as e:
        raise UnreadableFile(
            path,
            problem,
            f"rebuilding it from the cells failed ({e.strerror or e}); rerun the run that made it where the folder is writable",
        ) from None
    print(
        f"note: {path} was {problem if problem == 'missing' else 'damaged'}; rebuilt from the {len(cells)} finished cell(s)",
        file=sys.stderr,
    )
    return read()


def read_summary(results: Path) -> pd.DataFrame:
    """`<results>/summary.csv` as `collect` wrote it (noise labels stay text: "protocol", "0.45")."""
    return read_collected(results, SUMMARY)


def gather(folders: list[Path], name: str, columns: list[str]) -> pd.DataFrame:
    frames = [read_cell_file(f, name) for f in folders if (f / name).is_file()]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


def training_logs(cells: list[CellRecord]) -> pd.DataFrame:
    """Every finished cell's train_log.csv (one row per evaluation or stage stop) with the cell's KEYS in front."""
    frames = []
    for r in cells:
        if not (r.folder / TRAIN_LOG).is_file():
            continue
        frame = read_cell_file(r.folder, TRAIN_LOG)
        for i, (key, value) in enumerate(r.keys.items()):
            frame.insert(i, key, value)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*KEYS, "stage", "event", "step"])


def rater_averages(cells: list[CellRecord]) -> pd.DataFrame:
    """The paper's "Average" row: mean rater DSC vs GT on the training split, one row per dataset × raters × noise.

    Every cell records it in its own manifest (cells never share a file); cells of one dataset,
    rater style and noise level saw the same raters, so the first finished one gives the row.
    """
    rows = {}
    for r in cells:
        key = tuple(r.keys[k] for k in ("dataset", "raters", "noise"))
        if (average := (r.manifest.get("rater_setting", {}).get("labels") or {}).get("average")) is not None and key not in rows:
            rows[key] = average  # from the pool's label statistics (bench/run/split_cache.py)
    return pd.DataFrame([(*k, v) for k, v in rows.items()], columns=["dataset", "raters", "noise", "dsc"])


def training_outcomes(cells: list[CellRecord]) -> pd.DataFrame:
    """One row per finished cell: how each stage stopped and whether its predictions are degenerate (from manifest.json).

    Columns: the KEYS, `stops` ("plateau", "cap" or "fixed" per stage, joined by "+"), `flag`
    ("empty", "full" or ""), the shares of validation cases predicted empty / full.
    """
    rows = [
        {
            **r.keys,
            "stops": "+".join(r.stops),
            "flag": r.degenerate.get("flag", ""),
            "empty_share": r.degenerate.get("empty_share"),
            "full_share": r.degenerate.get("full_share"),
        }
        for r in cells
    ]
    return pd.DataFrame(rows, columns=[*KEYS, "stops", "flag", "empty_share", "full_share"])
