"""Results store (docs/architecture.md#who-owns-what): the only code that knows a results folder's layout.

A cell (one training run) lives in `<results>/runs/<dataset>/<raters>/<noise>/<method>/seed-<s>/`
(`cell_dir`), beside its claim `seed-<s>.lock`. It holds config.json, manifest.json, train_log.csv,
checkpoints/, predictions.npz, calibration.parquet and metrics.parquet. A cell is done iff its
`metrics.parquet` exists; it is written last, through a temporary file and `os.replace`, so a killed
run never leaves a truncated or half-counted table. `collect` gathers every done cell into the
results folder's long tables.

Results folders written before the evaluation reference left the cell's path
(`runs/<dataset>/<reference>/noise-<x>/…`) are found by `old_layout_cells`; `bench rescore` moves them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from bench.evaluate.long_table import CALIBRATION, COLUMNS, KEYS, summarise


@dataclass(frozen=True)
class Cell:
    """One training run: a dataset, its rater style and noise level ("protocol" or a target Average DSC), a method, a seed.

    What predictions are scored against is not part of it: every cell is scored against every reference.
    """

    dataset: str
    raters: str
    noise: str
    method: str
    seed: int

    @property
    def parts(self) -> tuple[str, ...]:
        return (self.dataset, self.raters, self.noise, self.method, f"seed-{self.seed}")

    def __str__(self) -> str:
        return "/".join(self.parts)


def cell_dir(results: Path, cell: Cell) -> Path:
    return results.joinpath("runs", *cell.parts)


def lock_path(results: Path, cell: Cell) -> Path:
    folder = cell_dir(results, cell)
    return folder.with_name(folder.name + ".lock")  # beside the cell folder, so --force can delete the folder under it


def is_done(results: Path, cell: Cell) -> bool:
    return (cell_dir(results, cell) / "metrics.parquet").is_file()


def cache_dir(results: Path) -> Path:
    """Decoded datasets are cached in $BENCH_CACHE, else `<results>/cache`."""
    return Path(os.environ.get("BENCH_CACHE") or results / "cache")


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
    for stale in out.rglob(".*.tmp*"):  # a process killed mid-write left it; under the claim nobody else writes here
        stale.unlink()
    return out


def manifests(results: Path, done: bool = True):
    """Yield (cell folder, manifest) of every cell in the current layout (only finished ones when `done`)."""
    for path in sorted((results / "runs").glob("*/*/*/*/*/manifest.json")):
        info = read_json(path)
        if set(info.get("cell", {})) != set(KEYS) or (done and info.get("status") != "done"):
            continue
        yield path.parent, info


def old_layout_cells(results: Path) -> list[Path]:
    """Cell folders written with the reference in the path (`runs/<dataset>/<reference>/noise-<x>/<method>/seed-<s>`)."""
    return [p.parent for p in sorted((results / "runs").glob("*/*/*/*/*/manifest.json")) if "reference" in read_json(p).get("cell", {})]


def cell_of(info: dict) -> Cell:
    return Cell(**{k: info["cell"][k] for k in KEYS})


def checkpoint_path(checkpoint_dir: Path, k: int, name: str, partial: bool = False) -> Path:
    """Stage k's weights (`stage-<k>-<name>.pt`), or the state of that stage in progress (`.partial.pt`)."""
    return checkpoint_dir / f"stage-{k}-{name}{'.partial' if partial else ''}.pt"


def read_predictions(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """A cell's test probabilities (N, L, H, W) float32 in [0, 1] and case ids, as `write_predictions` stored them."""
    path = folder / "predictions.npz"
    try:
        with np.load(path, allow_pickle=False) as f:
            return f["probs"].astype(np.float32) / 255, f["case_ids"]
    except (OSError, KeyError, ValueError) as e:
        raise ValueError(f"{path}: cannot read the predictions ({e}); retrain the cell with --force") from None


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


def finish_cell(folder: Path, manifest: dict, rows: pd.DataFrame, bins: pd.DataFrame) -> None:
    """Write a cell's manifest, reliability bins and, last, its metrics (which mark it done)."""
    write_json(folder / "manifest.json", manifest)
    write_table(folder / "calibration.parquet", bins)
    write_table(folder / "metrics.parquet", rows)


def collect(results: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Gather every finished cell into `<results>/`: metrics.parquet (the long table), summary.csv, calibration.parquet and
    train_logs.parquet; returns (table, summary)."""
    with locked(results / ".collect.lock"):  # two sweeps finishing together: the later read is written last
        for stale in results.glob(".*.tmp*"):  # a collect killed mid-write left it
            pid = re.search(r"\.(\d+)\.tmp", stale.name)
            if pid and not alive(int(pid.group(1))):
                stale.unlink(missing_ok=True)
        folders = [folder for folder, _ in manifests(results) if (folder / "metrics.parquet").is_file()]
        table = gather(folders, "metrics.parquet", COLUMNS)
        summary = summarise(table, rater_averages(results))
        write_table(results / "metrics.parquet", table)
        write_table(results / "summary.csv", summary)
        write_table(results / "calibration.parquet", gather(folders, "calibration.parquet", CALIBRATION))
        write_table(results / "train_logs.parquet", training_logs(results))
    return table, summary


def read_summary(results: Path) -> pd.DataFrame:
    """`<results>/summary.csv` as `collect` wrote it (noise labels stay text: "protocol", "0.45")."""
    text = {k: str for k in ("dataset", "raters", "noise", "method", "reference", "structure", "metric")}
    return pd.read_csv(results / "summary.csv", dtype=text)


def gather(folders: list[Path], name: str, columns: list[str]) -> pd.DataFrame:
    frames = [pd.read_parquet(f / name) for f in folders if (f / name).is_file()]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


def training_logs(results: Path) -> pd.DataFrame:
    """Every finished cell's train_log.csv (one row per evaluation or stage stop) with the cell's KEYS in front."""
    frames = []
    for folder, info in manifests(results):
        log = folder / "train_log.csv"
        if not log.is_file():
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
    """The paper's "Average" row: mean rater DSC vs GT on the training split, one row per dataset × raters × noise.

    Every cell records it in its own manifest (cells never share a file); cells of one dataset,
    rater style and noise level saw the same raters, so the first finished one gives the row.
    """
    rows = {}
    for _, info in manifests(results):
        key = tuple(info["cell"][k] for k in ("dataset", "raters", "noise"))
        if "average_dsc" in info.get("raters", {}) and key not in rows:
            rows[key] = info["raters"]["average_dsc"]
    return pd.DataFrame([(*k, v) for k, v in rows.items()], columns=["dataset", "raters", "noise", "dsc"])


def training_outcomes(results: Path) -> pd.DataFrame:
    """One row per finished cell: how each stage stopped and whether its predictions are degenerate (from manifest.json).

    Columns: the KEYS, `stops` ("plateau", "cap" or "fixed" per stage, joined by "+"), `flag`
    ("empty", "full" or ""), the shares of validation cases predicted empty / full.
    """
    rows = []
    for _, info in manifests(results):
        stops = "+".join(s.get("reason", "").split(":")[0] for s in info.get("stages", {}).values())
        bad = info.get("degenerate", {})
        rows.append({**{k: info["cell"][k] for k in KEYS}, "stops": stops, "flag": bad.get("flag", ""),
                     "empty_share": bad.get("empty_share"), "full_share": bad.get("full_share")})  # fmt: skip
    return pd.DataFrame(rows, columns=[*KEYS, "stops", "flag", "empty_share", "full_share"])


def load_trained(cell_dir: Path):
    """Rebuild a finished cell's trained method (CPU, eval mode) from its folder.

    Reads `cell_dir/config.json` ("trains": the registered name that was trained, "method_config":
    the resolved Config fields, "data_spec": the DataSpec fields, as `bench.run.cell` writes them) and
    the last stage's checkpoint `cell_dir/checkpoints/stage-<k>-<name>.pt` (`bench.train.harness`). An
    Oracle cell rebuilds the LF-Net it trained (its "trains"). Raises FileNotFoundError naming the
    missing file (a missing last-stage checkpoint means the cell did not finish training) and
    ValueError naming config.json or the checkpoint when their content does not fit.
    """
    import torch

    import methods

    cell_dir = Path(cell_dir)
    config_path = cell_dir / "config.json"
    if not config_path.is_file():
        raise FileNotFoundError(f"{config_path}: no such file; is {cell_dir} a cell folder (results/runs/<dataset>/…/seed-<s>)?")
    try:
        config = json.loads(config_path.read_text())
        trains, method_config, data_spec = config["trains"], config["method_config"], config["data_spec"]
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise ValueError(f"{config_path}: not a cell configuration with 'trains', 'method_config' and 'data_spec' ({err!r})") from err
    try:
        entry = methods.get_entry(trains)
        # JSON turns tuples into lists; frozen configs want hashable values back
        cfg = entry.cls.Config(**{k: tuple(v) if isinstance(v, list) else v for k, v in method_config.items()})
        spec = methods.DataSpec(**data_spec)
        method = entry.cls(cfg, spec)
    except (methods.UnknownMethodError, TypeError, ValueError) as err:
        raise ValueError(f"{config_path}: cannot rebuild method {trains!r}: {err}") from err
    stages = method.stages
    k = len(stages) - 1
    path = checkpoint_path(cell_dir / "checkpoints", k, stages[k].name)
    if not path.is_file():
        found = sorted(p.name for p in (cell_dir / "checkpoints").glob("*.pt"))
        raise FileNotFoundError(f"{path}: no checkpoint of the last stage {stages[k].name!r}; the cell did not finish training "
                                f"(checkpoints found: {', '.join(found) or 'none'})")  # fmt: skip
    state = torch.load(path, map_location="cpu", weights_only=True)
    try:
        method.load_state_dict(state)
    except RuntimeError as err:
        raise ValueError(f"{path}: weights do not fit {trains!r} with the config in {config_path}: {err}") from err
    return method.eval()
