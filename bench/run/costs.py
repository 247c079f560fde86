"""What a sweep's cells would cost on this machine, measured before they run (`bench run --dry-run`), through the code a
cell runs: a few training steps of each stage of each method (`harness.StageRun`, at the cell's batch size, precision
and threads), one validation evaluation of each stage (the stage that decides the consensus with its readings' passes),
one test-curve point and one full read-out of the test split, each pass timed on at most SUBSET images and scaled to
its split. A cell's time is then its budget's steps, evaluations (one every `eval_every` steps), curve points and
read-outs (its result, and under a budget with readings each fixed-step and held reading) at those costs; the few
predictions a cell makes once after training (the validation split's, the GT-selected weights') are left out.

It is made for budgets of fixed length (paper, long, trajectory): under a stopping rule a stage's length is known only
once it stops.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

import numpy as np
import torch

from bench.evaluate.scoring import fused_references
from bench.identity import Cell
from bench.run.cell import cell_data, selection_label
from bench.run.readings import Scorer
from bench.run.resolve import RunOptions, cell_method, stage_schedules, trained
from bench.run.sweep import usable_cpus
from bench.train.budget import curve_steps, reading_steps
from bench.train.hardware import autocast_dtype, to_tensors
from bench.train.harness import Runtime, StageRun
from bench.train.readings import READINGS

STEPS = 3  # timed steps a stage, after one warm-up step
SUBSET = 128  # images of a split a timed pass reads (one validation batch); its time is scaled to the split


@dataclass(frozen=True)
class StageCost:
    """One stage's count and cost (seconds each) of training steps and validation evaluations."""

    steps: int
    step_s: float
    evals: int
    eval_s: float


@dataclass(frozen=True)
class CellCost:
    """A cell's parts: its stages by name, its test-curve points and its full read-outs of the test split."""

    stages: dict[str, StageCost]
    curve: int
    curve_s: float
    reads: int
    read_s: float

    @property
    def steps_seconds(self) -> float:
        return sum(s.steps * s.step_s for s in self.stages.values())

    @property
    def seconds(self) -> float:
        evals = sum(s.evals * s.eval_s for s in self.stages.values())
        return self.steps_seconds + evals + self.curve * self.curve_s + self.reads * self.read_s

    @property
    def evaluation_share(self) -> float:
        """The share of the cell's time that is not training steps."""
        return 1 - self.steps_seconds / self.seconds


def timed(fn, *args) -> float:
    started = time.perf_counter()
    fn(*args)
    return time.perf_counter() - started


def cell_cost(cell: Cell, opts: RunOptions) -> CellCost:
    """The cell's `CellCost`, measured here on the CPU."""
    data = cell_data(cell, opts)
    method = cell_method(cell.ref, cell.seed, data.dataset, data.train, opts.budget, opts.study)
    stages, budget = method.stages, opts.budget
    schedules = stage_schedules([s.name for s in stages], trained(cell.ref, opts.study).name, data.dataset, data.train.n, opts)
    device, threads = torch.device("cpu"), torch.get_num_threads()
    dtype = autocast_dtype(device, opts.precision)
    run = Runtime(cell.seed, device, opts.precision)
    train, val = data.train, data.val.subset(np.arange(min(SUBSET, data.val.n)))
    test = data.test.subset(np.arange(min(SUBSET, data.test.n)))

    def tensors(split) -> dict[str, torch.Tensor]:  # as `harness.fit` moves a split
        arrays = {"images": split.images, "raters": split.raters, "rater_valid": split.rater_valid}
        return to_tensors({**arrays, **method.prepare(split.raters, split.rater_valid)}, device)

    data_t, val_t = tensors(train), tensors(val)
    decides = method.consensus_stage or stages[-1].name
    method.to(memory_format=torch.channels_last)
    out, scale_val, scale_test = {}, data.val.n / val.n, data.test.n / test.n
    try:
        torch.set_num_threads(opts.threads)
        for k, stage in enumerate(stages):
            sched = schedules[stage.name]
            stage_run = StageRun(method, k, stage, sched, train.n, run, dtype, None)
            stage_run.train_step(data_t)  # warm-up
            step_s = sum(timed(stage_run.train_step, data_t) for _ in range(STEPS)) / STEPS
            reads = (val.gt, selection_label(val)) if stage.name == decides else None
            stage_run.evaluate(val_t, reads)  # warm-up
            eval_s = timed(stage_run.evaluate, val_t, reads) * scale_val
            out[stage.name] = StageCost(sched.max_steps, step_s, math.ceil(sched.max_steps / sched.eval_every), eval_s)
        method.eval()
        scorer = Scorer(cell, test, fused_references(test), device, opts.precision, opts.samples, opts.empty_pair, progress=False)
        curve_s = timed(scorer.counts, method, decides, 0, 0) * scale_test
        read_s = timed(scorer.read, method) * scale_test
    finally:
        torch.set_num_threads(threads)
    last = schedules[decides]
    curve = curve_steps(last, train.n, budget.paper_lines) if budget.readings else frozenset()
    fixed = reading_steps(last) if budget.readings and not budget.paper_lines else frozenset()
    # The result, then under a budget with readings each fixed-step and held reading but the result: "rule" is held where
    # the stage replays a rule, and is one read-out fewer where that rule stops past the horizon.
    held = len(READINGS) - (0 if last.rule_cap and not last.early_stopping else 1)
    reads = 1 + (len(fixed) + held - 1 if budget.readings else 0)
    return CellCost(out, len(curve), curve_s, reads, read_s)


def busy_note(load: float, cores: int, threads: int) -> str | None:
    """A line saying the step costs were measured on a shared CPU, or None: `load` the 1-minute load average as the
    measurement ends, of which the measurement itself is at most `threads`; more than half a core of other work beside
    it makes every step cost that of a cell running beside that work, not alone."""
    others = load - threads
    if others <= 0.5:
        return None
    return (
        f"note: the CPU was busy while the step costs were measured (load average {load:.1f} on {cores} cores, about "
        f"{others:.1f} of it other work): the estimate is that of cells running beside that work; measure on an idle CPU "
        "for their time alone"
    )


def measured(cells: list[Cell], opts: RunOptions, say=print) -> dict[tuple[str, str], CellCost]:
    """`cell_cost` once per (dataset, method) of `cells`, with a line each as it goes (a paper baseline takes seconds),
    and `busy_note`'s line last where other work shared the CPU."""
    out: dict[tuple[str, str], CellCost] = {}
    todo = list(dict.fromkeys((c.dataset, c.method) for c in cells))
    for i, key in enumerate(todo):
        say(f"measuring step costs {i + 1}/{len(todo)}: {key[1]} on {key[0]}")
        out[key] = cell_cost(next(c for c in cells if (c.dataset, c.method) == key), opts)
    if hasattr(os, "getloadavg") and (note := busy_note(os.getloadavg()[0], usable_cpus(), opts.threads)):
        say(note)
    return out
