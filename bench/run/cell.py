"""One cell (a training run): its data, method, schedules and config, then its steps under its claim (`run_cell`).

`train_cell` runs the named steps of one cell: open its folder, load its data, build its method,
record its config and manifest (provenance: versions, git commit, device, precision, CPU), train,
predict, score, and mark it done; where its files go is `bench.store`'s business, how it is scored
`bench.evaluate`'s. A failure is recorded in the cell's manifest and the sweep goes on.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

import methods
from bench import store
from bench.evaluate import predictions
from bench.evaluate.pixel import dice
from bench.evaluate.scoring import reference_mask
from bench.run.readings import Scorer, held_readings, trajectory
from bench.run.resolve import RunOptions, cell_method, is_oracle, option_record, stage_schedules, trained
from bench.run.split_cache import DataKey, data_fingerprint, fused_test_references, load_splits, training_subset
from bench.store import Cell
from bench.train import hardware, harness, inference, steps
from bench.train.budget import Schedule, curve_steps, reading_steps
from bench.train.checkpoints import save_result
from bench.train.teacher import teacher_diagnostic
from datasets import DatasetSpec, RaterData, Splits, get_dataset, oracle_view
from labels.fusion import vote_targets

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class CellData:
    """What one cell trains, validates and is scored on (after the budget's subsets and the oracle's view), and the key
    of its data (`DataKey`, made once a cell: its splits, fingerprint and fused references are read by it)."""

    key: DataKey
    dataset: DatasetSpec
    splits: Splits
    train: RaterData
    val: RaterData
    test: RaterData


def cell_data(cell: Cell, opts: RunOptions) -> CellData:
    key = DataKey.of_cell(cell, opts.data_root)
    splits = load_splits(key)
    dataset = get_dataset(cell.dataset)
    train = training_subset(splits.train, opts.train_size or opts.budget.train_size(dataset))
    val = training_subset(splits.val, opts.budget.val_size(dataset))
    test = splits.test if opts.test_size is None else splits.test.subset(np.arange(min(opts.test_size, splits.test.n)))
    if is_oracle(cell.ref, opts.study):
        train, val = oracle_view(train), oracle_view(val)  # the oracle's own objective: ground truth is its only rater
    return CellData(key, dataset, splits, train, val, test)


def cell_config(cell: Cell, opts: RunOptions, data: CellData, method: methods.Method, schedules: dict[str, Schedule]) -> dict:
    """config.json: everything that decides the cell's result besides its identity."""
    return {
        "options": option_record(opts),
        "method": cell.method,
        "trains": trained(cell.ref, opts.study).name,
        "method_config": dataclasses.asdict(method.cfg),
        "budget": opts.budget.record(),
        "schedules": {name: dataclasses.asdict(s) for name, s in schedules.items()},
        "train_images": data.train.n,
        "val_images": data.val.n,
        "test_images": data.test.n,
        "split_rule": data.splits.rule,
        "rater_setting": data.splits.raters_info,
        "precision": opts.precision,
        "threads": opts.threads,
        "data_spec": dataclasses.asdict(method.spec),
        "raters": list(data.train.rater_names),
    }


CODE = ("bench", "methods", "datasets", "labels")  # the packages a cell's numbers depend on besides its config and data


def git(*args: str, repo: Path = REPO) -> str | None:
    """The output of `git ARGS` in `repo`; None where git cannot say (not installed, not a repository)."""
    try:
        proc = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def git_commit() -> str:
    return (git("rev-parse", "HEAD") or "").strip()


def git_changed(repo: Path = REPO) -> list[str] | None:
    """The code files (CODE) that differ from `git_commit`, new ones included: [] for a committed tree, so a run from
    an uncommitted change says so; None where git cannot say."""
    out = git("status", "--porcelain", "--untracked-files=all", "--", *CODE, repo=repo)
    return None if out is None else sorted(line[3:] for line in out.splitlines())


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


def new_manifest(cell: Cell) -> dict:
    return {
        "cell": cell.record(),
        "status": "running",
        "started": time.time(),
        "command": sys.argv,
        "git_commit": git_commit(),
        "git_changed": git_changed(),
        "versions": versions(),
        "host": platform.node(),
        "pid": os.getpid(),
    }


SETUP = ("device", "cpu", "precision", "threads", "engine")  # what changes a run's numbers besides its code and data


def starts(previous: dict, now: dict, resumed: bool) -> tuple[list[dict], dict]:
    """The manifest's `starts` with this one: each start's time, code (commit and changed files), host and SETUP; the
    earlier starts are kept where this one resumes their checkpoints (`resumed`), so a run trained in parts says how
    each part trained. Also what this start trains otherwise than the first ({key: (first, now)}): such a run is two
    trajectories, not the one a single start would have trained. previous: the manifest an earlier start wrote ({}
    where none could be read)."""
    record = {k: now.get(k) for k in ("started", "git_commit", "git_changed", "host", *SETUP)}
    earlier = (previous.get("starts") or [{k: previous.get(k) for k in record}]) if resumed and previous.get("device") else []
    first = (earlier or [record])[0]
    return [*earlier, record], {k: (first.get(k), record[k]) for k in SETUP if first.get(k) != record[k]}


def previous_manifest(out: Path) -> dict:
    """The manifest an earlier start of this cell wrote; {} where there is none or it cannot be read (it is rewritten)."""
    try:
        return store.read_manifest(out)
    except store.UnreadableFile:
        return {}


DEGENERATE_SHARE = 0.5  # "most validation cases"


def degenerate(probs: np.ndarray, val: RaterData) -> dict:
    """Share of validation cases predicted all background (`empty`) or all foreground (`full`), and a flag.

    probs (N, L, H, W). The flag is set when more than half the cases are predicted empty (full)
    while fewer than half of the raters' majority masks are: so a dataset of mostly empty masks
    (LIDC has 30 %) does not flag a method that is right to predict nothing. Raters only, no GT.
    """
    fg = probs.argmax(1) > 0
    mv = vote_targets(val.raters, val.rater_valid, val.n_classes)["mv"] > 0
    share = {"empty": float((~fg.any((1, 2))).mean()), "full": float(fg.all((1, 2)).mean())}
    ref = {"empty": float((~mv.any((1, 2))).mean()), "full": float(mv.all((1, 2)).mean())}
    flag = next((k for k in ("empty", "full") if share[k] > DEGENERATE_SHARE and ref[k] <= DEGENERATE_SHARE), "")
    return {
        "empty_share": round(share["empty"], 4),
        "full_share": round(share["full"], 4),
        "majority_empty_share": round(ref["empty"], 4),
        "flag": flag,
    }


def run_cell(cell: Cell, opts: RunOptions, wait: bool = False) -> dict:
    """Train, predict and score one cell under its claim.

    Returns {"cell", "status": done|skipped|busy|failed, "reason", "seconds"}; "busy" when another process
    holds the cell's claim (with `wait`, block until it is released, then skip it if it finished).
    """
    started = time.time()
    return {**claim_and_run(cell, opts, wait), "seconds": round(time.time() - started, 2)}


def claim_and_run(cell: Cell, opts: RunOptions, wait: bool) -> dict:
    if store.is_done(opts.results, cell) and not opts.force:
        return {"cell": str(cell), "status": "skipped", "reason": "finished earlier"}
    with store.claim(opts.results, cell, wait) as claimed:
        if not claimed:
            return {"cell": str(cell), "status": "busy", "reason": "running in another process"}
        if store.is_done(opts.results, cell) and not (opts.force and not wait):
            return {"cell": str(cell), "status": "skipped", "reason": "finished by another process"}
        with hardware.pinned_device(opts.device, opts.results) as device:
            if device.type == "cpu":
                torch.set_num_threads(opts.threads)
            return train_cell(cell, opts, device)


def first_batch(method: methods.Method, train: RaterData, device: torch.device, size: int = 256) -> dict[str, torch.Tensor]:
    """The first training images with their raters and prepared targets, on `device`: what a precision is measured on
    (CUDA only; on the CPU nothing is measured and nothing is copied)."""
    if device.type != "cuda":
        return {"images": torch.empty(0)}
    part = slice(0, min(size, train.n))
    arrays = {"images": train.images[part], "raters": train.raters[part], "rater_valid": train.rater_valid[part]}
    return hardware.to_tensors({**arrays, **method.prepare(arrays["raters"], arrays["rater_valid"])}, device)


def readout_spread(method: methods.Method, probs: np.ndarray, test: RaterData, device: torch.device, precision: str, seed: int) -> dict:
    """How much a drawing consensus depends on its draws: the test DSC (%, foreground, against GT, else the majority
    vote) of the cell's read-out `probs` beside a second read-out of the same weights with other draws (draw seed 1).
    `sd` ≈ |a − b| / √2, the Monte-Carlo sd of one read-out's DSC (docs/methods.md#samples)."""
    other = inference.predict_proba(method, test.images, device=device, precision=precision, seed=seed, draw_seed=1)
    ref = test.gt if test.gt is not None else reference_mask(test, "majority")
    a, b = (float(dice(p.argmax(1) > 0, ref > 0).mean()) * 100 for p in (probs, other))
    return {
        "draws": method.consensus_draws,
        "estimator": method.consensus_estimator,
        "reference": "gt" if test.gt is not None else "majority",
        "dsc": round(a, 4),
        "dsc_other_draws": round(b, 4),
        "sd": round(abs(a - b) / 2**0.5, 4),
    }


def split(data: RaterData, val: bool = False) -> harness.Split:
    """A split as training sees it; the validation split (`val`) with its ground truth (the logged diagnostic and the GT-best
    reading) and the raters' fused label the GT-free selection agrees with (`selection_label`)."""
    return harness.Split(data.images, data.raters, data.rater_valid, data.gt if val else None, selection_label(data) if val else None)


def selection_label(data: RaterData) -> np.ndarray:
    """The raters' fused label the `selection` reading agrees with (docs/decisions.md): STAPLE ≥ 0.5 on binary data,
    else the majority vote (STAPLE here fuses binary labels only). (N, H, W) class indices."""
    return reference_mask(data, "staple" if data.n_classes == 2 else "majority")


def gt_selected(method: methods.Method, best: dict, test: RaterData, device: torch.device, precision: str, seed: int) -> dict:
    """The selection reading (docs/decisions.md): the weights of the stage that decides the consensus at its highest
    validation GT DSC, scored on the test split against GT (mean per-image foreground DSC, %, the long table's rule). The
    cell's rows stay the rule's."""
    method.load_state_dict(best["state"])
    probs = inference.predict_proba(method, test.images, device=device, precision=precision, seed=seed)
    test_dsc = dice(probs.argmax(1) > 0, test.gt > 0)
    return {"gt_best_step": int(best["step"]), "val_gt_dsc": float(best["dsc"]), "test_gt_dsc": round(float(test_dsc.mean()) * 100, 4)}


def validation_agreement(probs: np.ndarray, val: RaterData) -> dict:
    """A GT-free agreement of the final weights with the validation raters: mean per-image foreground DSC (%) of the
    prediction (probs (N, L, H, W)) against their majority vote and (binary data) their STAPLE label (≥ 0.5)."""
    pred = probs.argmax(1) > 0
    names = ("majority", "staple") if val.n_classes == 2 else ("majority",)
    return {f"{name}_dsc": round(float(dice(pred, reference_mask(val, name) > 0).mean()) * 100, 4) for name in names}


def train_cell(cell: Cell, opts: RunOptions, device: torch.device) -> dict:
    if opts.announce:
        print(f"started {cell} (process {os.getpid()})", file=sys.stderr, flush=True)
    out = store.open_cell(opts.results, cell, fresh=opts.force)
    previous, manifest = previous_manifest(out), new_manifest(cell)
    try:
        data = cell_data(cell, opts)
        manifest.update(
            data_root=str(opts.data_root),
            rater_setting=data.splits.raters_info,
            data_fingerprint=data_fingerprint(data.key),
        )
        method = cell_method(cell.ref, cell.seed, data.dataset, data.train, opts.budget, opts.study)
        schedules = stage_schedules([s.name for s in method.stages], trained(cell.ref, opts.study).name, data.dataset, data.train.n, opts)
        store.write_config(out, cell_config(cell, opts, data, method, schedules))
        chosen = hardware.resolve_precision(
            method,
            first_batch(method, data.train, device),
            schedules[method.stages[0].name],
            device,
            opts.precision,
            store.precision_record(),
        )
        precision, engine = chosen["precision"], steps.pick_engine(opts.engine, device)
        manifest.update(
            device=str(device),
            precision=str(hardware.autocast_dtype(device, precision) or "float32"),
            precision_choice=chosen,
            deviations=method.deviations(),
            threads=torch.get_num_threads(),
            cpu=hardware.cpu_isa(),
            engine=engine,
        )
        manifest["starts"], changed = starts(previous, manifest, resumed=any((out / store.CHECKPOINTS).glob("stage-*.pt")))
        if changed:
            said = ", ".join(f"{k} {a} (now {b})" for k, (a, b) in changed.items())
            print(
                f"warning: {cell} resumes a run started with {said}: its steps before and after are two trajectories, not "
                "one run's (the manifest's `starts` records each part); rerun it with --force for one",
                file=sys.stderr,
                flush=True,
            )
        if method.needs_consistent_raters and not data.train.rater_ids_consistent:
            manifest["deviations"].append("rater slots are not consistent identities here; per-rater modelling runs per slot")
        store.write_manifest(out, manifest)
        t0 = time.time()
        train, val = data.train, data.val
        fused = fused_test_references(data.key)
        scorer = Scorer(cell, data.test, {k: v[: data.test.n] for k, v in fused.items()}, device, precision, opts.samples, opts.empty_pair)
        decides, budget = method.consensus_stage or method.stages[-1].name, opts.budget  # the stage whose weights predict
        curve = curve_steps(schedules[decides], train.n, budget.paper_lines) if budget.readings else frozenset()
        fixed = reading_steps(schedules[decides]) if budget.readings and not budget.paper_lines else frozenset()
        manifest["reading"] = budget.primary
        if curve:
            manifest["test_curve"] = {"stage": decides, "steps": sorted(curve), "selects": False}
        store.write_manifest(out, manifest)
        fitted = harness.fit(
            method,
            split(train),
            schedules,
            harness.Runtime(cell.seed, device, precision, engine),
            val=split(val, val=True),
            out=harness.Output(
                out / store.CHECKPOINTS,
                log_path=out / store.TRAIN_LOG,
                progress=opts.progress,
                desc=f"{cell.method} seed {cell.seed}",
                announce=opts.announce,
                curve=trajectory(scorer, out, decides, curve, fixed, hold=decides != method.stages[-1].name),
                keep_readings=budget.readings,
            ),
        )
        manifest["stages"] = fitted.stages
        if budget.primary in fitted.readings:  # the cell's result: its budget's primary reading (`trajectory`: the selection)
            method.load_state_dict(fitted.readings[budget.primary]["state"])
            if budget.readings:  # other weights than training ended on: kept for `bench predict`
                save_result(method, out / store.CHECKPOINTS / store.RESULT_WEIGHTS)
        else:  # resumed past that stage from checkpoints older than its .held.pt file: the weights it ended on
            ended = schedules[decides]
            manifest["reading"] = "rule" if ended.early_stopping else "min-val-loss" if ended.restore_best else "last"
        t1 = time.time()
        val_probs = inference.predict_proba(method, val.images, device=device, precision=precision, seed=cell.seed)
        manifest["degenerate"] = degenerate(val_probs, val)
        manifest["validation_raters"] = validation_agreement(val_probs, val)
        if val.gt is not None:  # a diagnostic of the method's learned fused label, if it has one (GT read after training only)
            teacher = teacher_diagnostic(method, val.images, val.raters, val.rater_valid, val.gt, device=device, precision=precision)
            if teacher is not None:
                manifest["teacher"] = teacher
        probs, outputs, rows, bins = scorer.read(method)
        if method.consensus_draws:
            manifest["consensus"] = readout_spread(method, probs, data.test, device, precision, cell.seed)
        predictions.write_predictions(out / store.PREDICTIONS, probs, data.test.case_ids, outputs)
        if "samples" in outputs:
            manifest["samples"] = opts.samples
        if fitted.gt_best and data.test.gt is not None:  # it loads other weights into the method
            manifest["selection"] = gt_selected(method, fitted.gt_best, data.test, device, precision, cell.seed)
        if budget.readings:  # last: each loads its weights into the method
            reached = fitted.stages[decides]["step"]
            fixed_read = {f"step-{n}": {"step": n, "score": None} for n in sorted(fixed) if n <= reached}
            manifest["readings"] = {**fixed_read, **held_readings(scorer, out, method, fitted.readings, budget.primary)}
        manifest.update(
            status="done",
            train_seconds=round(t1 - t0, 2),
            predict_seconds=round(time.time() - t1, 2),
            seconds=round(time.time() - manifest["started"], 2),
        )
        store.finish_cell(out, manifest, rows, bins)
        for held in (out / store.CHECKPOINTS).glob("*.held.pt"):  # scored: only a resume needed them
            held.unlink()
        return {"cell": str(cell), "status": "done", "reason": ""}
    except KeyboardInterrupt:  # Ctrl-C: the manifest says so (its checkpoints resume it), and the interrupt goes on up
        record_end(out, manifest, status="interrupted", reason="interrupted (Ctrl-C); rerun the same command to resume it")
        raise
    except Exception as e:  # a failed cell is recorded and the sweep goes on
        reason = f"{type(e).__name__}: {e}"
        record_end(out, manifest, status="failed", reason=reason, traceback=traceback.format_exc())
        return {"cell": str(cell), "status": "failed", "reason": reason}


def record_end(out: Path, manifest: dict, **fields) -> None:
    """Write how a cell that did not finish ended into its manifest, as far as the disk allows."""
    manifest.update(**fields, seconds=round(time.time() - manifest["started"], 2))
    try:
        store.write_manifest(out, manifest)
    except OSError:
        pass
