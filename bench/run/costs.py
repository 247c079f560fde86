"""What a sweep's cells would cost on this machine, measured before they run (`bench run --dry-run`): a few training steps
of each stage of each method, at the cell's batch size, precision and threads, times the steps its budget gives it.

The estimate counts training steps only (evaluations, the test curve and the readings add about a tenth on mnist-5k). It
is made for budgets of fixed length (paper, long, trajectory): under a stopping rule a stage's length is known only once
it stops.
"""

from __future__ import annotations

import os
import time

import torch

from bench.identity import Cell
from bench.run.cell import cell_data
from bench.run.resolve import RunOptions, cell_method, stage_schedules, trained
from bench.run.sweep import usable_cpus
from bench.train.hardware import autocast_dtype, to_tensors
from bench.train.steps import make_step
from methods.base import StepContext

STEPS = 3  # timed steps a stage, after one warm-up step


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


def stage_costs(cell: Cell, opts: RunOptions) -> dict[str, tuple[int, float]]:
    """Per stage of the cell's method: (its steps under the budget, seconds a step measured here on the CPU)."""
    data = cell_data(cell, opts)
    method = cell_method(cell.ref, cell.seed, data.dataset, data.train, opts.budget, opts.study)
    stages = method.stages
    schedules = stage_schedules([s.name for s in stages], trained(cell.ref, opts.study).name, data.dataset, data.train.n, opts)
    device, threads = torch.device("cpu"), torch.get_num_threads()
    dtype = autocast_dtype(device, opts.precision)
    train = data.train
    arrays = {"images": train.images, "raters": train.raters, "rater_valid": train.rater_valid}
    tensors = to_tensors({**arrays, **method.prepare(train.raters, train.rater_valid)}, device)
    method.to(memory_format=torch.channels_last)
    out = {}
    try:
        torch.set_num_threads(opts.threads)
        for stage in stages:
            sched = schedules[stage.name]
            for name, child in method.named_children():  # as the harness trains a stage (StageRun)
                child.train(not stage.modules or name in stage.modules)
                child.requires_grad_(not stage.modules or name in stage.modules)
            step = make_step("eager", method, sched, device, dtype)
            index = torch.arange(min(sched.batch_size, train.n))
            gen = torch.Generator().manual_seed(cell.seed)
            step(tensors, index, StepContext(stage.name, 0, 0, gen))
            started = time.perf_counter()
            for k in range(STEPS):
                step(tensors, index, StepContext(stage.name, 0, k + 1, gen))
            out[stage.name] = (sched.max_steps, (time.perf_counter() - started) / STEPS)
    finally:
        torch.set_num_threads(threads)
    return out


def measured(cells: list[Cell], opts: RunOptions, say=print) -> dict[tuple[str, str], dict[str, tuple[int, float]]]:
    """`stage_costs` once per (dataset, method) of `cells`, with a line each as it goes (a paper baseline takes seconds),
    and `busy_note`'s line last where other work shared the CPU."""
    out: dict[tuple[str, str], dict[str, tuple[int, float]]] = {}
    todo = list(dict.fromkeys((c.dataset, c.method) for c in cells))
    for i, key in enumerate(todo):
        say(f"measuring step costs {i + 1}/{len(todo)}: {key[1]} on {key[0]}")
        out[key] = stage_costs(next(c for c in cells if (c.dataset, c.method) == key), opts)
    if hasattr(os, "getloadavg") and (note := busy_note(os.getloadavg()[0], usable_cpus(), opts.threads)):
        say(note)
    return out
