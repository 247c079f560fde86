"""How a cell's name and the run's options resolve to what trains: the registered method and its parameters, the study's
settings for the dataset, each stage's schedule, the options recorded beside the result; and a finished cell's trained
method rebuilt from its folder (`load_trained`).

The plan (bench/run/plan.py) checks a sweep with these before anything trains, and the cell (bench/run/cell.py) trains
with the same: one resolution, not two.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

import torch

import methods
from bench import store
from bench.evaluate.scoring import DEFAULT_SAMPLES
from bench.study import Study
from bench.study import default as packaged_study
from bench.train.budget import Budget, Schedule
from datasets import DatasetSpec, RaterData


@dataclass(frozen=True)
class RunOptions:
    results: Path
    data_root: Path
    budget: Budget
    max_steps: int | None = None  # caps every stage at N steps (smoke runs; the budget's rule still applies); `long`: its length
    device: str = "auto"
    precision: str = "auto"
    engine: str = "auto"  # how each training step runs (bench/train/steps.py); recorded in the manifest
    train_size: int | None = None  # overrides the budget's training-set cap
    test_size: int | None = None  # evaluate on the first N test images (smoke runs only)
    force: bool = False
    progress: bool = True
    announce: bool = False  # a line when a cell starts and when each stage stops (parallel workers, which show no bars)
    threads: int = 1  # torch threads per cell on CPU, the same in every backend (results depend on it, not on scheduling)
    samples: int = DEFAULT_SAMPLES  # M: test-time draws of a method that samples (the set metrics; bench.evaluate.scoring)
    empty_pair: str = "one"  # the set metrics' value for two empty masks (bench.evaluate.multirater.EMPTY_RULES)
    study: Study = field(default_factory=packaged_study)  # the paper rerun: its Oracle, its settings, its budget lines


def trained(ref: methods.MethodRef, paper: Study) -> methods.MethodRef:
    """The registered method a cell trains, with its parameters; the study's Oracle trains its `oracle_trains`
    (`oracle@beta=3` -> `lf-net@beta=3` for the LF-Net paper)."""
    return dataclasses.replace(ref, name=paper.oracle_trains) if ref.name == paper.oracle else ref


def is_oracle(ref: methods.MethodRef, paper: Study) -> bool:
    """Whether a cell's method is the study's Oracle row (a data view: its only rater is the ground truth)."""
    return ref.name == paper.oracle


def dataset_overrides(dataset: DatasetSpec, name: str, paper: Study) -> dict:
    """The study's settings on this dataset for the method class behind `name` (LF-Net's λ = 0.01 on MNIST), so they
    reach every variant built on it and the Oracle."""
    cls = methods.get_entry(name).cls
    first = next(n for n in methods.method_names() if methods.get_entry(n).cls is cls)
    return paper.method_settings(dataset.card.name, first)


def cell_method(ref: methods.MethodRef, seed: int, dataset: DatasetSpec, train: RaterData, budget: Budget, paper: Study) -> methods.Method:
    """The cell's method for data shaped like `train`, initialised from `seed`: registry defaults, the dataset's paper
    settings, the budget's (paper-rcl15 only), then the cell's own parameters (`lf-net@beta=3`)."""
    trains = trained(ref, paper)
    spec = methods.DataSpec(train.in_channels, train.n_classes, train.n_raters, train.rater_ids_consistent)
    overrides = {
        **dataset_overrides(dataset, trains.name, paper),
        **budget.config_overrides(trains.name, dataset, paper),
        **trains.kwargs,
    }
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # network initialisation
        return methods.build_method(trains.name, spec, overrides)


def stage_schedules(stages: list[str], trains: str, dataset: DatasetSpec, n_train: int, opts: RunOptions) -> dict[str, Schedule]:
    """Each named stage's Schedule under the budget, capped at `--max-steps` when given; a fixed-length budget (`long`)
    takes `--max-steps` as its length, longer than its own too (the stop audit's long run is 4 × the rule's stop)."""
    out = {}
    for stage in stages:
        sched = opts.budget.schedule(trains, stage, dataset, n_train, opts.study)
        if opts.max_steps is not None and (opts.max_steps < sched.max_steps or opts.budget.fixed_length):
            sched = dataclasses.replace(sched, max_steps=opts.max_steps, eval_every=min(sched.eval_every, opts.max_steps))
        out[stage] = sched
    return out


def option_record(opts: RunOptions) -> dict:
    """The run options that change a cell's result beyond its identity; recorded in config.json."""
    return {
        "budget": opts.budget.name,
        "max_steps": opts.max_steps,
        "train_size": opts.train_size,
        "test_size": opts.test_size,
        "threads": opts.threads,
        "samples": opts.samples,
        "empty_pair": opts.empty_pair,
    }


def load_trained(cell_dir: Path):
    """Rebuild a finished cell's trained method (CPU, eval mode) from its folder.

    Reads `cell_dir/config.json` ("trains": the registered name that was trained, "method_config":
    the resolved Config fields, "data_spec": the DataSpec fields, as `bench.run.cell` writes them) and
    the last stage's checkpoint `cell_dir/checkpoints/stage-<k>-<name>.pt` (`bench.train.harness`). An
    Oracle cell rebuilds the LF-Net it trained (its "trains"). Raises FileNotFoundError naming the
    missing file (a missing last-stage checkpoint means the cell did not finish training) and
    ValueError naming config.json or the checkpoint when their content does not fit.
    """
    cell_dir = Path(cell_dir)
    config_path = cell_dir / store.CONFIG
    if not config_path.is_file():
        raise FileNotFoundError(f"{config_path}: no such file; is {cell_dir} a cell folder (results/runs/<dataset>/…/seed-<s>)?")
    try:
        config = store.read_config(cell_dir)
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
    path = store.checkpoint_path(cell_dir / store.CHECKPOINTS, k, stages[k].name)
    if not path.is_file():
        found = sorted(p.name for p in (cell_dir / store.CHECKPOINTS).glob("*.pt"))
        raise FileNotFoundError(
            f"{path}: no checkpoint of the last stage {stages[k].name!r}; the cell did not finish training "
            f"(checkpoints found: {', '.join(found) or 'none'})"
        )
    state = torch.load(path, map_location="cpu", weights_only=True)
    try:
        method.load_state_dict(state)
    except RuntimeError as err:
        raise ValueError(f"{path}: weights do not fit {trains!r} with the config in {config_path}: {err}") from err
    return method.eval()
