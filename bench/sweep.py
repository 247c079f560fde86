"""Sweeps: a grid of cells, each one (dataset, reference, noise, method, seed) training run (DESIGN §1, §6)."""

from __future__ import annotations

import dataclasses
import os
import platform
import shutil
import subprocess
import time
import traceback
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

import methods
from bench import harness, store
from bench.budget import Budget
from bench.metrics import score, soft_dice_iou
from datasets import DatasetSpec, RaterData, Splits, get_dataset, oracle_view
from datasets import cache as data_cache
from datasets.raters import rater_dice
from methods.fusion import majority_vote

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Cell:
    dataset: str
    reference: str
    noise: float
    method: str
    seed: int

    @property
    def parts(self) -> tuple[str, ...]:
        return (self.dataset, self.reference, f"noise-{self.noise:g}", self.method, f"seed-{self.seed}")

    def __str__(self) -> str:
        return "/".join(self.parts)


@dataclass(frozen=True)
class RunOptions:
    results: Path
    data_root: Path
    budget: Budget
    epochs: int | None = None  # overrides every stage's epochs
    device: str = "auto"
    precision: str = "auto"
    train_size: int | None = None  # overrides the budget's training-set cap
    test_size: int | None = None  # evaluate on the first N test images (smoke runs only)
    force: bool = False
    progress: bool = True
    overrides: dict = field(default_factory=dict)  # method name -> {config field: value}


def plan(method_names: list[str], dataset: str, seeds: list[int], noise_levels: list[float], reference: str) -> list[Cell]:
    return [Cell(dataset, reference, noise, m, s) for noise in noise_levels for m in method_names for s in seeds]


def cache_dir(results: Path) -> Path:
    """Decoded datasets are cached in $BENCH_CACHE, else `<results>/cache`."""
    return Path(os.environ.get("BENCH_CACHE") or results / "cache")


def cell_dir(results: Path, cell: Cell) -> Path:
    return results.joinpath("runs", *cell.parts)


def is_done(results: Path, cell: Cell) -> bool:
    return (cell_dir(results, cell) / "metrics.parquet").is_file()


@lru_cache(maxsize=4)
def load_splits(dataset: str, data_root: Path, noise: float, cache_folder: Path | None = None) -> Splits:
    """The dataset's splits at a rater noise level, from the on-disk cache when it is there."""
    path = data_cache.cache_path(cache_folder, dataset, noise, data_root) if cache_folder is not None else None
    splits = data_cache.load(path) if path is not None and path.is_file() else None
    if splits is None:
        splits = get_dataset(dataset).load(data_root, noise)
        if path is not None:
            data_cache.save(path, splits)
    return splits


def training_subset(train: RaterData, size: int | None) -> RaterData:
    """A fixed random subset (seed 0, independent of the training seed) when the budget caps the training set."""
    if size is None or size >= train.n:
        return train
    return train.subset(np.sort(np.random.default_rng(0).permutation(train.n)[:size]))


def reference_masks(test: RaterData, reference: str) -> np.ndarray:
    """The evaluation reference (N, H, W) named in every result row."""
    if reference == "gt":
        if test.gt is None:
            raise ValueError("reference 'gt' requested but the dataset has no ground truth")
        return test.gt
    if reference == "majority":
        raters = torch.from_numpy(test.raters).long()
        return majority_vote(raters, torch.from_numpy(test.rater_valid), test.n_classes).numpy().astype(np.uint8)
    raise ValueError(f"unknown evaluation reference {reference!r}")


def score_rows(cell: Cell, probs: np.ndarray, ref: np.ndarray, test: RaterData, soft: bool = False) -> pd.DataFrame:
    """Long rows: one per case × structure × metric, with the raw counts beside each value.

    probs (N, L, H, W); ref (N, H, W) class indices. DSC and bAHD score argmax(probs) against the
    reference; with `soft`, soft DSC / IoU (MR-Net) score the structure's probability against the
    mean of the valid raters' structure masks (the paper's RIGA protocol).
    """
    pred = probs.argmax(1)
    frames = []
    for structure, classes in test.structures.items():
        scores = score(np.isin(pred, classes), np.isin(ref, classes), test.spacing)
        values = {"dsc": scores["dice"], "bahd": scores["bahd"]}
        if soft:
            votes = np.isin(test.raters, classes) & test.rater_valid[:, :, None, None]
            rater_mean = votes.sum(1) / np.maximum(test.rater_valid.sum(1), 1)[:, None, None]
            values["soft_dice"], values["soft_iou"] = soft_dice_iou(probs[:, list(classes)].sum(1), rater_mean)
        counts = {k: scores[k] for k in store.COUNTS}
        for metric, value in values.items():
            frames.append(pd.DataFrame({"case": test.case_ids, "structure": structure, "metric": metric, "value": value, **counts}))
    rows = pd.concat(frames, ignore_index=True)
    for key in store.KEYS:
        rows.insert(store.KEYS.index(key), key, getattr(cell, key))
    return rows[store.COLUMNS]


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def versions() -> dict[str, str]:
    import numpy
    import scipy

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "pandas": pd.__version__,
    }


def write_rater_stats(results: Path, cell: Cell, train: RaterData) -> dict:
    """Each rater's mean DSC vs GT on the training split and their average (the paper's "Average" row)."""
    if train.gt is None:
        return {}
    per_rater = rater_dice(train.raters, train.gt)
    info = {
        "dataset": cell.dataset,
        "reference": cell.reference,
        "noise": cell.noise,
        "raters": dict(zip(train.rater_names, map(float, per_rater))),
        "average_dsc": float(np.mean(per_rater)),
    }
    store.write_json(cell_dir(results, cell).parent.parent / "raters.json", info)
    return info


def dataset_overrides(dataset: DatasetSpec, name: str) -> dict:
    """The dataset's paper settings for the method class behind `name` (e.g. LF-Net's λ = 0.01 on MNIST)."""
    cls = methods.get_entry(name).cls
    return {k: v for base, values in dataset.method_overrides.items() if methods.get_entry(base).cls is cls for k, v in values.items()}


def run_cell(cell: Cell, opts: RunOptions) -> dict:
    """Train, predict and score one cell; returns {"cell", "status": done|skipped|failed, "reason"}."""
    out = cell_dir(opts.results, cell)
    if is_done(opts.results, cell) and not opts.force:
        return {"cell": str(cell), "status": "skipped", "reason": "finished earlier"}
    if opts.force and out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    manifest = {
        "cell": dataclasses.asdict(cell),
        "status": "running",
        "started": started,
        "git_commit": git_commit(),
        "versions": versions(),
        "host": platform.node(),
        "pid": os.getpid(),
    }
    try:
        splits = load_splits(cell.dataset, opts.data_root, cell.noise, cache_dir(opts.results))
        spec_ds = get_dataset(cell.dataset)
        train = training_subset(splits.train, opts.train_size or opts.budget.train_size(spec_ds))
        test = splits.test if opts.test_size is None else splits.test.subset(np.arange(min(opts.test_size, splits.test.n)))
        manifest["raters"] = write_rater_stats(opts.results, cell, splits.train)
        trains = cell.method
        if cell.method == methods.ORACLE:
            train, trains = oracle_view(train), methods.ORACLE_TRAINS
        spec = methods.DataSpec(train.in_channels, train.n_classes, train.n_raters, train.rater_ids_consistent)
        overrides = {**dataset_overrides(spec_ds, trains), **opts.overrides.get(cell.method, {})}  # the user's last
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cell.seed)  # network initialisation
            method = methods.build_method(trains, spec, overrides)
        device = harness.resolve_device(opts.device)
        epochs = {s.name: opts.epochs if opts.epochs is not None else opts.budget.epochs(s) for s in method.stages}
        batch_size = opts.budget.batch_size(spec_ds)
        config = {
            "method": cell.method,
            "trains": trains,
            "method_config": dataclasses.asdict(method.cfg),
            "budget": opts.budget.name,
            "optimiser": "Adam",
            "lr": opts.budget.lr,
            "batch_size": batch_size,
            "epochs": epochs,
            "train_images": train.n,
            "test_images": test.n,
            "split_rule": splits.rule,
            "precision": opts.precision,
            "data_spec": dataclasses.asdict(spec),
            "raters": list(train.rater_names),
        }
        store.write_json(out / "config.json", config)
        manifest.update(
            device=str(device), precision=str(harness.autocast_dtype(device, opts.precision) or "float32"), deviations=method.deviations()
        )
        if method.needs_consistent_raters and not train.rater_ids_consistent:
            manifest["deviations"].append("rater slots are not consistent identities here; per-rater modelling runs per slot")
        store.write_json(out / "manifest.json", manifest)
        t0 = time.time()
        harness.fit(
            method, train.images, train.raters, train.rater_valid,
            epochs=epochs, batch_size=batch_size, lr=opts.budget.lr, seed=cell.seed, device=device,
            precision=opts.precision, checkpoint_dir=out / "checkpoints", log_path=out / "train_log.csv",
            progress=opts.progress, desc=cell.method,
        )  # fmt: skip
        t1 = time.time()
        probs = harness.predict_proba(method, test.images, device=device, precision=opts.precision)
        store.write_predictions(out / "predictions.npz", probs, test.case_ids)
        rows = score_rows(cell, probs, reference_masks(test, cell.reference), test, soft=spec_ds.soft_metrics)
        manifest.update(
            status="done",
            train_seconds=round(t1 - t0, 2),
            predict_seconds=round(time.time() - t1, 2),
            seconds=round(time.time() - started, 2),
        )
        store.write_json(out / "manifest.json", manifest)
        store.write_table(out / "metrics.parquet", rows)  # last: marks the cell done
        return {"cell": str(cell), "status": "done", "reason": ""}
    except Exception as e:  # a failed cell is recorded and the sweep goes on
        reason = f"{type(e).__name__}: {e}"
        manifest.update(status="failed", reason=reason, traceback=traceback.format_exc(), seconds=round(time.time() - started, 2))
        try:
            store.write_json(out / "manifest.json", manifest)
        except OSError:
            pass
        return {"cell": str(cell), "status": "failed", "reason": reason}


def run_sweep(cells: list[Cell], opts: RunOptions) -> list[dict]:
    """Run the cells one after another in this process (the one-time kernel set-up is paid once)."""
    outcomes = []
    with tqdm(cells, desc="sweep", unit="cell", disable=not opts.progress) as bar:
        for cell in bar:
            bar.set_postfix_str(f"{cell.method} seed {cell.seed}")
            outcome = run_cell(cell, opts)
            if outcome["status"] == "failed":
                tqdm.write(f"cell {outcome['cell']} failed: {outcome['reason']}")
            outcomes.append(outcome)
    return outcomes
