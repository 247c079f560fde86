"""The one training loop (docs/decisions.md#harness): stages → steps → loss → backward → step, stopped by the budget's rule.

The harness owns the optimiser, seeds, the stopping rule, checkpoints and the training log (the device and
precision come from `bench/train/hardware.py`); methods own only their networks and losses.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from bench import store
from bench.train.budget import Schedule
from bench.train.checkpoints import append_log, load_held, logged_stops, resume, save_checkpoint, save_held, trim_log
from bench.train.hardware import autocast, autocast_dtype, make_batch, to_tensors
from bench.train.inference import evaluating, probabilities, readout_ids
from bench.train.readings import Curve, Held, agreement, snapshot
from bench.train.steps import make_step
from bench.train.stopping import StopState
from methods.base import Method, StepContext


class NonFiniteLoss(RuntimeError):
    """A loss became NaN or infinite: the cell fails with this message."""


def fixed_schedules(method: Method, steps: int, batch_size: int, lr: float = 1e-3) -> dict[str, Schedule]:
    """Every stage for exactly `steps` steps with Adam at `lr`, evaluated once at the end (tests and smoke runs)."""
    return {s.name: Schedule("adam", lr, batch_size, steps, False, steps, source="fixed") for s in method.stages}


@torch.inference_mode()
def validate(
    method: Method,
    data: dict[str, torch.Tensor],
    stage: str,
    epoch: int,
    step: int,
    seed: int,
    device,
    dtype,
    consensus: bool = False,
    batch_size: int = 128,
) -> tuple[dict[str, float], np.ndarray | None]:
    """The method's own loss on the validation split, in eval mode, with one fixed generator: {part: mean over images};
    with `consensus`, also the consensus (N, L, H, W) float32 where the loss's pass gives it (`Method.validation`), else
    None.

    The same generator seed at every evaluation makes evaluations differ only by the weights (LS-UNet samples raters).
    """
    gen = torch.Generator(device=device).manual_seed(seed * 1000 + 999)
    n = len(data["images"])
    sums: dict[str, torch.Tensor] = {}
    probs: list[torch.Tensor] | None = [] if consensus else None
    with evaluating(method):
        for index in torch.arange(n).split(batch_size):
            batch = make_batch(data, index, device)
            with autocast(device, dtype):
                parts, batch_probs = method.validation(batch, StepContext(stage, epoch, step, gen))
            for key, value in parts.items():
                sums[key] = sums.get(key, 0) + value.detach().float() * len(index)
            if probs is not None and batch_probs is not None:
                probs.append(batch_probs.float().cpu())
            elif batch_probs is None:
                probs = None  # the method's loss pass holds no consensus: the caller reads it in a pass of its own
    return {k: float(v) / n for k, v in sums.items()}, (torch.cat(probs).numpy() if probs else None)


# The draws a drawing consensus averages in the logged validation DSC: it runs at every evaluation, so fewer than the
# test read-out's (fresh per image, so its spread over 800 validation images stays small).
DIAGNOSTIC_DRAWS = 16


def diagnostic_dsc(
    method: Method, images: torch.Tensor, gt: np.ndarray, device, dtype, seed: int = 0, probs: np.ndarray | None = None
) -> float:
    """Mean per-image DSC (%) of the foreground (any class but 0) against ground truth: logged, never used to select.
    `probs` (N, L, H, W): the consensus already read by the validation pass (`validate`); None reads it here."""
    return agreement(validation_consensus(method, images, device, dtype, seed) if probs is None else probs, gt)


def validation_consensus(method: Method, images: torch.Tensor, device, dtype, seed: int) -> np.ndarray:
    """The consensus (N, L, H, W) of the validation images, a drawing one from at most DIAGNOSTIC_DRAWS draws."""
    draws = method.consensus_draws
    try:
        method.consensus_draws = min(draws, DIAGNOSTIC_DRAWS)
        with evaluating(method):
            return probabilities(method, images, device, dtype, readout_ids(seed, "consensus", len(images)))
    finally:
        method.consensus_draws = draws


@dataclass(frozen=True)
class Split:
    """One split as `fit` sees it: images (N, C, H, W) float32, raters (N, R, H, W) uint8 class indices, rater_valid (N, R)
    bool; on the validation split only, `gt` (N, H, W) for the logged diagnostic and the GT-best reading (never trained
    on, never restored) and `fused` (N, H, W), the raters' fused label the GT-free selection agrees with."""

    images: np.ndarray
    raters: np.ndarray
    rater_valid: np.ndarray
    gt: np.ndarray | None = None
    fused: np.ndarray | None = None


@dataclass(frozen=True)
class Runtime:
    """Where and how the steps run: the cell's seed, the device, the autocast precision ("auto", "fp32", "bf16") and the
    engine ("eager": op by op; "graphed": a replayed CUDA graph, bench/train/steps.py)."""

    seed: int
    device: torch.device
    precision: str = "auto"
    engine: str = "eager"


@dataclass(frozen=True)
class Output:
    """What a fit leaves and shows: mid-stage checkpoints in `checkpoint_dir` (at most every `checkpoint_seconds`), the
    training log, a bar per stage ("<desc> <stage>", only where `progress` and stderr is a terminal, so logs get no cursor
    escapes) or, with `announce`, one line per finished stage (parallel workers, whose bars would interleave); `curve`:
    the test curve the cell keeps along the trajectory (`Curve`), or None; `keep_readings`: write the readings the
    deciding stage held beside its weights (`.held.pt`), so that a run resumed past that stage or during the read-outs
    still scores them (off where the cell scores none but its result, which the weights it ended on then give: `quick`)."""

    checkpoint_dir: Path | None = None
    checkpoint_seconds: float = 60.0
    log_path: Path | None = None
    progress: bool = True
    desc: str = ""
    announce: bool = False
    curve: Curve | None = None
    keep_readings: bool = True


@dataclass
class Fitted:
    """What `fit` returns: each stage's stop record by stage name, and the readings held by the stage that decides the
    consensus (the last, or `Method.consensus_stage`): name → {"step", "score", "state"} (`bench.train.readings`; a run
    resumed after that stage reads them from its `.held.pt` file, {} where it has none), never restored by the harness.
    Each state holds the modules later stages trained as they ended (D-Persona's heads), not as they were when held."""

    stages: dict[str, dict]
    readings: dict[str, dict]

    @property
    def gt_best(self) -> dict:
        """The GT-best reading as {"dsc", "step", "state"} ({} without GT): the selection reading of docs/decisions.md."""
        r = self.readings.get("gt-best")
        return {"dsc": r["score"], "step": r["step"], "state": r["state"]} if r else {}


def fit(
    method: Method, train: Split, schedules: dict[str, Schedule], run: Runtime, val: Split | None = None, out: Output = Output()
) -> Fitted:
    """Train `method` stage by stage on `train`; returns each stage's stop record (`Fitted`).

    Each stage trains under its Schedule: every `eval_every` steps the method's own loss on `val` (raters only, never its
    ground truth) is logged; with early stopping the stage ends after `patience` evaluations without an improvement
    (`StopState`), not before `min_evals`, or at `max_steps`; it then ends on the weights with the lowest validation loss,
    as a `long` stage of fixed length does (`Schedule.restore_best`). `val.gt`, where given, only adds the logged
    diagnostic `diagnostic_gt_dsc` (and the GT-best reading) to the stage that decides the consensus, and `val.fused` its
    agreement with the raters' fused label `val_rater_dsc` (and the selection reading); that stage holds its readings.

    Each stage gets a fresh optimiser and its own generators seeded by (seed, stage index). A mid-stage checkpoint (after
    any step, at most every `out.checkpoint_seconds`, so a paper epoch of half an hour between evaluations is not lost
    with it) holds the weights, optimiser, best weights, stopping state, generator states and the training losses summed
    since the last evaluation, so a killed run resumes exactly as an uninterrupted one would have gone on, log included.
    """
    progress = out.progress and sys.stderr.isatty()
    lines = out.announce or (out.progress and not progress)  # a log, or a parallel worker: lines instead of a bar
    method.to(device=run.device, memory_format=torch.channels_last)
    dtype = autocast_dtype(run.device, run.precision)

    def tensors(split: Split) -> dict[str, torch.Tensor]:
        data = to_tensors({"images": split.images, "raters": split.raters, "rater_valid": split.rater_valid}, run.device)
        return data | to_tensors(method.prepare(split.raters, split.rater_valid), run.device)

    data, val_data = tensors(train), (tensors(val) if val is not None else None)
    stages = method.stages
    names = [s.name for s in stages]
    missing = [name for name in names if name not in schedules]
    if missing:
        raise ValueError(f"no schedule for stage(s) {missing} of {type(method).__name__}")
    if method.consensus_stage not in (None, *names):
        raise ValueError(f"{type(method).__name__}.consensus_stage {method.consensus_stage!r} is none of its stages {names}")
    decides = names.index(method.consensus_stage) if method.consensus_stage else len(stages) - 1  # the stage the consensus reads
    later = {m for s in stages[decides + 1 :] for m in s.modules}  # what the stages after it train (D-Persona: its heads)
    consensus_modules = set(stages[decides].modules) or {name for name, _ in method.named_children()}
    if not all(s.modules for s in stages[decides + 1 :]) or later & consensus_modules:
        raise ValueError(
            f"{type(method).__name__}: the stages after its consensus stage {names[decides]!r} must name their modules, "
            "none of that stage's (Stage.modules): its readings keep what those stages train"
        )
    if val_data is None and any(schedules[s.name].early_stopping for s in stages):
        raise ValueError("early stopping needs a validation split (val=...)")
    first, partial = resume(method, stages, out.checkpoint_dir)
    if lines and (first or partial) and first < len(stages):
        where = f"{stages[first].name} at step {partial['step']}" if partial else f"{stages[first].name}, after {stages[first - 1].name}"
        print(f"{out.desc}: resuming {where} from its checkpoint", file=sys.stderr, flush=True)
    trim_log(out.log_path, {s.name for s in stages[:first]}, (stages[first].name, partial["step"]) if partial else None)
    # stages a resumed run finished before, and the readings where it resumes past the stage that held them
    fitted = Fitted(logged_stops(out.log_path), load_held(decides, names[decides], out.checkpoint_dir) if first > decides else {})
    for k in range(first, len(stages)):
        stage = StageRun(method, k, stages[k], schedules[stages[k].name], len(train.images), run, dtype, partial if k == first else None)
        reads = (val.gt, val.fused) if val is not None and k == decides else None  # only the deciding stage holds readings
        r = fitted.stages[stages[k].name] = stage.train(data, val_data, reads, out, progress, lines)
        if out.announce:  # a worker without bars: one line a stage, so a parallel sweep shows its cells moving
            line = f"{out.desc} {stages[k].name}: {store.stop_kind(r)} at step {r['step']} ({r['seconds']:.0f} s)"
            print(line, file=sys.stderr, flush=True)
        if reads is not None:
            fitted.readings = stage.held.readings
    if later:  # a reading is the consensus stage's weights at a point; what later stages trained stays as they trained it
        trained = {key: t.detach().clone() for key, t in method.state_dict().items() if key.split(".")[0] in later}
        fitted.readings = {name: {**r, "state": {**r["state"], **trained}} for name, r in fitted.readings.items()}
    method.eval()
    return fitted


LINE_SECONDS = 60.0  # the least time between two progress lines of a stage shown without a bar


class StageRun:
    """One stage of `fit`: its optimiser, generators, position in the data and stopping state, resumable from a checkpoint."""

    def __init__(self, method: Method, k: int, stage, sched: Schedule, n: int, run: Runtime, dtype, partial: dict | None):
        seed, device = run.seed, run.device
        self.method, self.k, self.stage, self.sched, self.seed, self.device, self.dtype = method, k, stage, sched, seed, device, dtype
        trained = set(stage.modules) or {name for name, _ in method.named_children()}
        for name, child in method.named_children():
            child.train(name in trained)
            child.requires_grad_(name in trained)
        self.step_fn = make_step(run.engine, method, sched, device, dtype)
        self.optimiser = self.step_fn.optimiser
        self.order = torch.Generator().manual_seed(seed * 1000 + k)  # batch order
        self.gen = torch.Generator(device=device).manual_seed(seed * 1000 + k)  # the method's randomness
        self.stop, self.step, self.epoch, self.offset, elapsed, self.best_state = StopState(), 0, 0, 0, 0.0, None
        self.sums: dict[str, torch.Tensor] = {}  # the training losses summed since the last evaluation (its log row's mean)
        self.n_sum = 0
        self.held, self.rule_stop = Held(), {}  # the readings held (deciding stage); where a replayed rule stopped
        self.epoch_order = None  # state of `order` before the current epoch's permutation was drawn
        if partial is not None:
            self.optimiser.load_state_dict(partial["optimiser"])
            self.order.set_state(partial["order"])
            self.gen.set_state(partial["gen"])
            self.stop, self.best_state = StopState.restore(partial["stop"]), partial["best"]
            self.held, self.rule_stop = Held.restore(partial), partial.get("rule_stop") or {}
            self.step, self.epoch, self.offset, elapsed = partial["step"], partial["epoch"], partial["offset"], partial["seconds"]
            self.sums = {k: v.to(device) for k, v in partial.get("sums", {}).items()}  # none where saved at an evaluation
            self.n_sum = partial.get("n_sum", 0)
        self.n, self.perm = n, None
        if self.offset:  # resumed mid-epoch: `order` is back at the epoch's start, so this draws the same permutation
            self.next_epoch()
        self.started = time.perf_counter() - elapsed

    def next_epoch(self) -> None:
        self.epoch_order = self.order.get_state()
        perm = torch.randperm(self.n, generator=self.order)  # sliced on the device; pinned on CUDA: the upload needs no sync
        self.perm = (perm.pin_memory() if self.device.type == "cuda" else perm).to(self.device, non_blocking=True)

    def train(self, data, val_data, reads: tuple | None, out: Output, progress: bool, lines: bool = False) -> dict:
        """Steps until the stopping rule or the cap; returns the stop record (also logged). reads: the validation split's
        (gt, fused) where this stage holds the readings, else None; `lines`: a line at an evaluation at most every
        LINE_SECONDS (step, losses, time to the stage's cap or end) where no bar is shown."""
        sched, stage, log_path, checkpoint_dir = self.sched, self.stage, out.log_path, out.checkpoint_dir
        title = f"{out.desc} {stage.name}".strip()
        bar = tqdm(total=sched.max_steps, initial=self.step, desc=title, leave=False, disable=not progress, unit="step")
        saved, kind = time.perf_counter(), ""
        said = time.perf_counter()

        def keep_partial() -> None:  # a mid-stage checkpoint, at most every out.checkpoint_seconds
            nonlocal saved
            if checkpoint_dir is not None and time.perf_counter() - saved >= out.checkpoint_seconds:
                save_checkpoint(self.method, self.k, stage.name, checkpoint_dir, partial=self.state())
                saved = time.perf_counter()

        while not kind:
            for key, value in self.train_step(data).items():  # summed on the device: no per-step host sync
                self.sums[key] = self.sums.get(key, 0) + value.detach().float()
            self.n_sum += 1
            bar.update()
            if out.curve is not None and stage.name == out.curve.stage:
                if self.step in out.curve.steps:
                    with evaluating(self.method):
                        out.curve.score(self.method, stage.name, self.step, self.epoch)
                if self.step in out.curve.held:
                    self.held.keep(f"step-{self.step}", self.step, math.nan, snapshot(self.method))
            if self.step % sched.eval_every and self.step < sched.max_steps:
                keep_partial()
                continue
            row = {"stage": stage.name, "event": "eval", "step": self.step, "epoch": self.epoch, "seconds": self.seconds()}
            row.update({f"train_{key}": float(v) / self.n_sum for key, v in self.sums.items()})
            self.sums, self.n_sum = {}, 0
            if not math.isfinite(row["train_loss"]):
                bar.close()
                append_log(log_path, row)  # the log shows the non-finite value
                raise NonFiniteLoss(f"non-finite loss ({row['train_loss']}) in stage {stage.name!r} before step {self.step}")
            if val_data is not None:
                row.update(self.evaluate(val_data, reads))
            if sched.early_stopping:
                kind = self.stop.ends(self.step, sched.max_steps, sched.patience, sched.min_evals, sched.patience_ratio)
            elif self.step >= sched.max_steps:
                kind = "fixed"
            reason = {
                "plateau": f"{self.stop.bad} evaluations without a new low (last at evaluation {self.stop.improved_at})",
                "cap": "reached the budget's step cap",
                "fixed": sched.source,
            }.get(kind, "")
            append_log(log_path, row)
            if lines and not kind and time.perf_counter() - said >= LINE_SECONDS:
                said = time.perf_counter()
                left = (sched.max_steps - self.step) * self.seconds() / max(self.step, 1)  # at the stage's mean rate so far
                val = f", validation loss {row['val_loss']:.4g}" if "val_loss" in row else ""
                print(
                    f"{title}: step {self.step:,}/{sched.max_steps:,} (epoch {self.epoch}), loss {row['train_loss']:.4g}{val}, "
                    f"about {left / 60:.0f} min to the {'cap' if sched.early_stopping else 'end'}",
                    file=sys.stderr,
                    flush=True,
                )
            if not kind:
                keep_partial()
        bar.close()
        if reads is not None:
            self.held.keep("last", self.step, math.nan, snapshot(self.method))
            if self.best_state is not None:
                self.held.keep("rule" if sched.early_stopping else "min-val-loss", self.stop.best_step, -self.stop.best, self.best_state)
        restored = sched.restore_best and self.best_state is not None
        if restored:
            self.method.load_state_dict(self.best_state)
        record = {
            "stage": stage.name,
            "event": "stop",
            "step": self.step,
            "epoch": self.epoch,
            "seconds": self.seconds(),
            "stop": kind,
            "reason": f"{kind}: {reason}",
            "best_step": self.stop.best_step,
            "restored_step": self.stop.best_step if restored else self.step,
        }
        if val_data is not None:
            record["best_val_loss"] = self.stop.best
        if self.rule_stop:
            record.update(self.rule_stop)
        append_log(log_path, record)
        if reads is not None and out.keep_readings:  # before the stage's weights: a run that resumes past it finds them
            save_held(self.held.readings, self.k, stage.name, checkpoint_dir)
        save_checkpoint(self.method, self.k, stage.name, checkpoint_dir)
        return record

    def train_step(self, data: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        if self.perm is None:
            self.next_epoch()
        index = self.perm[self.offset : self.offset + self.sched.batch_size]
        parts = self.step_fn(data, index, StepContext(self.stage.name, self.epoch, self.step, self.gen))
        self.step += 1
        self.offset += self.sched.batch_size
        if self.offset >= self.n:
            self.offset, self.perm = 0, None
            self.epoch += 1
        return parts

    def evaluate(self, val_data: dict[str, torch.Tensor], reads: tuple | None) -> dict:
        """The validation loss parts (`val_*`) and the stopping rule's update (replayed in a fixed-length stage with a
        `rule_cap`); where this stage holds the readings (reads: the validation (gt, fused), either None), the GT
        diagnostic and the agreement with the raters' fused label, each offered to its reading."""
        gt, fused = reads or (None, None)
        parts, probs = validate(
            self.method,
            val_data,
            self.stage.name,
            self.epoch,
            self.step,
            self.seed,
            self.device,
            self.dtype,
            consensus=gt is not None or fused is not None,
        )
        out = {f"val_{key}": v for key, v in parts.items()}
        if (gt is not None or fused is not None) and probs is None:
            probs = validation_consensus(self.method, val_data["images"], self.device, self.dtype, self.seed)
        if gt is not None:
            out["diagnostic_gt_dsc"] = round(agreement(probs, gt), 4)
            self.held.offer("gt-best", self.step, out["diagnostic_gt_dsc"], self.method)  # an upper bound, never restored
        if fused is not None:
            out["val_rater_dsc"] = round(agreement(probs, fused), 4)
            self.held.select(out["val_rater_dsc"], self.step, self.method)
        if not math.isfinite(parts["loss"]):
            raise NonFiniteLoss(f"non-finite validation loss ({parts['loss']}) in stage {self.stage.name!r} at step {self.step}")
        sched = self.sched
        if self.stop.update(parts["loss"], self.step, sched.min_delta, sched.smooth):
            self.best_state = snapshot(self.method)
        if sched.rule_cap and not sched.early_stopping and not self.rule_stop:  # where the rule would have stopped this stage
            how = self.stop.ends(self.step, sched.rule_cap, sched.patience, sched.min_evals, sched.patience_ratio)
            if how:
                self.rule_stop = {"rule_stop": self.step, "rule_how": how, "rule_restored": self.stop.best_step}
                if reads is not None:
                    self.held.keep("rule", self.stop.best_step, -self.stop.best, self.best_state)
        out["best"] = int(self.stop.best_step == self.step)
        return out

    def seconds(self) -> float:
        return round(time.perf_counter() - self.started, 3)

    def state(self) -> dict:
        """What a mid-stage checkpoint holds beside the weights."""
        return {
            "optimiser": self.optimiser.state_dict(),
            "order": self.order.get_state() if self.perm is None else self.epoch_order,
            "gen": self.gen.get_state(),
            "stop": dataclasses.asdict(self.stop),
            "step": self.step,
            "epoch": self.epoch,
            "offset": self.offset,
            "best": self.best_state,
            "held": self.held.saved(),
            "rule_stop": self.rule_stop,
            "sums": {k: v.detach().cpu() for k, v in self.sums.items()},
            "n_sum": self.n_sum,
            "seconds": time.perf_counter() - self.started,
        }
