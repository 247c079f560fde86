"""Results store (DESIGN §6): one folder per cell, files written atomically, collected into one long table.

A cell is done iff its `metrics.parquet` exists; it is written last, through a temporary file
and `os.replace`, so a killed run never leaves a truncated or half-counted table.
"""

from __future__ import annotations

import json
import os
import re
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

KEYS = ["dataset", "reference", "noise", "method", "seed"]
COUNTS = ["tp", "fp", "fn", "n_gt", "n_pred"]
COLUMNS = [*KEYS, "case", "structure", "metric", "value", *COUNTS]


class PlatformError(RuntimeError):
    """This system lacks what claims need (fcntl.flock)."""


def flock_module():
    """`fcntl`, imported here and not at the top so that reading results works on any system; only claims need it."""
    try:
        import fcntl
    except ImportError:
        raise PlatformError(
            "claiming cells needs a POSIX system (Linux, macOS) for fcntl.flock, which this one lacks; on Windows, run the benchmark under WSL"
        ) from None
    return fcntl


@contextmanager
def locked(path: Path, wait: bool = True):
    """Hold an exclusive flock on `path` (created if missing); yields False instead of waiting when `wait` is False and it is held.

    The kernel releases an flock when its process dies, so a killed run never leaves a stale lock.
    The file is opened read-only, so an open lock does not keep its file system from going read-only.
    """
    fcntl = flock_module()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


@contextmanager
def atomic(path: Path):
    """Yield a temporary path beside `path`; on success it replaces `path` in one step, on failure it is removed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:  # e.g. a read-only file system: keep the error that got us here
            pass


def write_json(path: Path, obj: dict) -> None:
    with atomic(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, default=str) + "\n")


def read_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def write_table(path: Path, df: pd.DataFrame) -> None:
    """Parquet or CSV by suffix, atomically."""
    with atomic(path) as tmp:
        if path.suffix == ".parquet":
            df.to_parquet(tmp, index=False)
        else:
            df.to_csv(tmp, index=False)


def write_predictions(path: Path, probs: np.ndarray, case_ids: np.ndarray) -> None:
    """Test probabilities (N, L, H, W) quantised to uint8 (1/255 steps), enough to re-score any threshold."""
    with atomic(path) as tmp:
        np.savez_compressed(tmp, probs=np.round(probs * 255).astype(np.uint8), case_ids=case_ids)


def collect(results: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Concatenate every finished cell's rows into `<results>/metrics.parquet`, write `summary.csv`; returns both."""
    with locked(results / ".collect.lock"):  # two sweeps finishing together: the later read is written last
        for stale in results.glob(".*.tmp*"):  # a collect killed mid-write left it
            pid = re.search(r"\.(\d+)\.tmp", stale.name)
            if pid and not alive(int(pid.group(1))):
                stale.unlink(missing_ok=True)
        files = sorted((results / "runs").glob("**/metrics.parquet"))
        frames = [pd.read_parquet(f) for f in files]
        table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
        summary = summarise(table, rater_averages(results))
        write_table(results / "metrics.parquet", table)
        write_table(results / "summary.csv", summary)
        write_table(results / "train_logs.parquet", training_logs(results))
    return table, summary


def training_logs(results: Path) -> pd.DataFrame:
    """Every finished cell's train_log.csv (one row per evaluation or stage stop) with the cell's KEYS in front."""
    frames = []
    for path in sorted((results / "runs").glob("*/*/*/*/*/manifest.json")):
        info = read_json(path)
        log = path.parent / "train_log.csv"
        if info.get("status") != "done" or not log.is_file():
            continue
        frame = pd.read_csv(log)
        for i, key in enumerate(KEYS):
            frame.insert(i, key, info["cell"][key])
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*KEYS, "stage", "event", "step"])


def alive(pid: int) -> bool:
    """Whether a process of this host has this id (a temporary file named after it may still be written)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def rater_averages(results: Path) -> pd.DataFrame:
    """The paper's "Average" row: mean rater DSC vs GT on the training split, one row per dataset × reference × noise.

    Every cell records it in its own manifest (cells never share a file); cells of one dataset and
    noise level saw the same raters, so the first finished one gives the row.
    """
    rows = {}
    for path in sorted((results / "runs").glob("*/*/*/*/*/manifest.json")):
        info = read_json(path)
        cell = info.get("cell", {})
        key = (cell.get("dataset"), cell.get("reference"), cell.get("noise"))
        if info.get("status") == "done" and "average_dsc" in info.get("raters", {}) and key not in rows:
            rows[key] = info["raters"]["average_dsc"]
    return pd.DataFrame([(*k, v) for k, v in rows.items()], columns=["dataset", "reference", "noise", "dsc"])


def training_outcomes(results: Path) -> pd.DataFrame:
    """One row per finished cell: how each stage stopped and whether its predictions are degenerate (from manifest.json).

    Columns: the KEYS, `stops` ("plateau", "cap" or "fixed" per stage, joined by "+"), `flag`
    ("empty", "full" or ""), the shares of validation cases predicted empty / full.
    """
    rows = []
    for path in sorted((results / "runs").glob("*/*/*/*/*/manifest.json")):
        info = read_json(path)
        if info.get("status") != "done":
            continue
        stops = "+".join(s.get("reason", "").split(":")[0] for s in info.get("stages", {}).values())
        bad = info.get("degenerate", {})
        cell = info["cell"]
        rows.append({**{k: cell[k] for k in KEYS}, "stops": stops, "flag": bad.get("flag", ""), "empty_share": bad.get("empty_share"),
                     "full_share": bad.get("full_share")})  # fmt: skip
    return pd.DataFrame(rows, columns=[*KEYS, "stops", "flag", "empty_share", "full_share"])


def summarise(table: pd.DataFrame, averages: pd.DataFrame | None = None) -> pd.DataFrame:
    """Mean over cases per seed, then mean ± sample std over seeds, per dataset × reference × noise × method × structure × metric."""
    group = ["dataset", "reference", "noise", "method", "structure", "metric"]
    per_seed = table.groupby([*group, "seed"], dropna=False)["value"].mean().reset_index()
    out = per_seed.groupby(group, dropna=False)["value"].agg(mean="mean", std="std", n_seeds="count").reset_index()
    n_cases = table.groupby(group, dropna=False)["case"].nunique().rename("n_cases").reset_index()
    out = out.merge(n_cases, on=group, how="left")
    if averages is not None and len(averages):
        avg = averages.assign(
            method="average", structure="foreground", metric="dsc", mean=averages["dsc"], std=np.nan, n_seeds=0, n_cases=0
        )
        out = pd.concat([avg[out.columns], out], ignore_index=True)
    return out
