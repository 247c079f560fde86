"""Dispatch: run a sweep's cells one after another, in local worker processes (loky) or on a dask cluster.

What a sweep trains is `bench.run.plan`'s business, how one cell runs `bench.run.cell`'s; this module only
sends cells to where they run, shows progress, and turns a lost worker into failed outcomes that a
rerun resumes.
"""

from __future__ import annotations

import dataclasses
import os
import sys

from tqdm.auto import tqdm

from bench import files, store
from bench.run.cell import run_cell
from bench.run.resolve import RunOptions
from bench.store import Cell
from bench.train import hardware

BACKENDS = ("auto", "sequential", "loky", "dask")


def resolve_backend(backend: str, n_jobs: int | None, n_cells: int, device: str) -> tuple[str, int]:
    """`auto`: several cells at once where there are several to run: one loky worker per usable CPU on the CPU, and on
    CUDA as many as the cards' free memory and the CPUs allow (`hardware.gpu_slots`); else sequential. `--n-jobs` overrides.

    Measured on this project's 2-core machine (Xeon with AMX, bf16, the shared U-Net at 28×28, batch
    32): a step takes 164 ms on one thread and 103 ms on two, so two one-thread processes do up to
    1.25× the work of one two-thread process. On one H100, 30 `plateau` cells took 95 s with 10 loky
    workers against 126 s for the quick ones in sequence: a small model's step is bound by its host
    thread, so several cells per card pay. Results do not depend on the choice: every backend runs a
    cell on the same number of threads (`--threads`), and a cell never shares its process.
    """
    on_cpu = hardware.resolve_device(device).type == "cpu"
    workers = n_jobs or (usable_cpus() if on_cpu else hardware.gpu_slots(usable_cpus()))
    if backend != "auto":
        return backend, n_jobs or usable_cpus()
    return ("loky", min(workers, n_cells)) if workers > 1 and n_cells > 1 else ("sequential", 1)


def run_sweep(
    cells: list[Cell], opts: RunOptions, backend: str = "sequential", n_jobs: int = 1, scheduler: str | None = None
) -> list[dict]:
    """Run the cells and return one outcome per cell, in the order of `cells`.

    sequential: one after another in this process (the one-time kernel set-up is paid once).
    loky: `n_jobs` local worker processes through joblib.
    dask: joblib's dask backend on the dask.distributed cluster at `scheduler` (or a local one of
    `n_jobs` workers). Every backend runs a cell on `opts.threads` torch threads (CPU), so a cell's
    numbers never depend on where or beside what it ran. Cells write only their own folder, under their own claim, so workers never
    share a file; the table is collected afterwards by the caller. Cells another process was
    running are waited for at the end and then skipped, or trained here if that process died.
    """
    files.flock_module()  # claims need flock: without it, one clear error here rather than every cell failing
    outcomes: dict[Cell, dict] = {}
    pending = [c for c in cells if opts.force or not store.is_done(opts.results, c)]
    for cell in cells:
        if cell not in pending:
            outcomes[cell] = {"cell": str(cell), "status": "skipped", "reason": "finished earlier"}
    by_name = {str(c): c for c in pending}
    bars = opts.progress and sys.stderr.isatty()  # redirected to a log: one plain line per cell, no cursor escapes
    finished = len(cells) - len(pending)
    with tqdm(total=len(cells), initial=finished, desc="sweep", unit="cell", disable=not bars) as bar:
        try:
            for outcome in dispatch(pending, opts, backend, n_jobs, scheduler):
                outcomes[by_name[outcome["cell"]]] = outcome
                finished += 1
                bar.update()
                if not bars:
                    print(progress_line(finished, len(cells), outcome), flush=True)
                elif outcome["status"] == "failed":
                    tqdm.write(f"cell {outcome['cell']} failed: {outcome['reason']}")
        except KeyboardInterrupt:  # Ctrl-C: the cells left running say so (a worker killed before it could is marked here)
            mark_stopped(pending, opts.results, "interrupted; rerun the same command to resume it")
            raise
        except Exception as e:  # a worker process died (killed, out of memory), or the disk failed: left to a rerun
            what = "sweep stopped" if backend == "sequential" else "worker lost"
            reason = f"{what} ({type(e).__name__}: {e}); rerun the same command to resume"
            mark_stopped(pending, opts.results, reason)
            for cell in pending:
                outcomes.setdefault(cell, {"cell": str(cell), "status": "failed", "reason": reason})
        for cell in [c for c in pending if outcomes[c]["status"] == "busy"]:
            bar.set_postfix_str(f"waiting for {cell}")
            outcomes[cell] = run_cell(cell, opts, wait=True)
            if not bars:
                print(f"waited for {cell}: {outcomes[cell]['status']}", flush=True)
    return [outcomes[c] for c in cells]


def mark_stopped(cells: list[Cell], results, reason: str) -> None:
    """Tidy the cells a stopped sweep left that nobody claims any more: a worker killed mid-write left a half-written file
    (removed), a worker killed before it could write its manifest left it "running" (now "interrupted", with `reason`).
    A cell still claimed is being written by a live process and is left alone. Best effort: the disk that stopped the
    sweep may refuse this too, and then the next run tidies each cell it opens."""
    for cell in cells:
        folder = store.cell_dir(results, cell)
        if not folder.is_dir():
            continue
        try:  # the claim's lock file is on the same disk, so it is inside the guard too
            with store.claim(results, cell) as free:
                if not free:
                    continue
                store.remove_half_written(folder)
                manifest = store.read_manifest(folder)
                if manifest.get("status") == "running":
                    store.write_manifest(folder, {**manifest, "status": "interrupted", "reason": reason})
        except (files.UnreadableFile, OSError):  # damaged: the next run trains it again; a failed disk: see above
            continue


def progress_line(k: int, n: int, outcome: dict) -> str:
    """`cell 3/30 done: mnist-5k/gt/noise-1/mv-unet/seed-2 (done, 24 s)`; a failed or busy cell adds its reason."""
    status = outcome["status"] if outcome["status"] in ("done", "skipped") else f"{outcome['status']}: {outcome['reason']}"
    return f"cell {k}/{n} done: {outcome['cell']} ({status}, {outcome.get('seconds', 0):.0f} s)"


def dispatch(cells: list[Cell], opts: RunOptions, backend: str, n_jobs: int, scheduler: str | None):
    """Yield each cell's outcome as it finishes."""
    if backend == "sequential":
        for cell in cells:
            yield run_cell(cell, opts)
        return
    from joblib import Parallel, delayed, parallel_config

    quiet = dataclasses.replace(opts, progress=False, announce=opts.progress)  # bars from many workers would interleave: lines
    if backend == "loky":
        # Workers stopped by Ctrl-C leave semaphores that multiprocessing's resource tracker frees at shutdown; its warning
        # about them ("leaked semaphore objects") is noise to a user, so the tracker (a child process) is told to keep quiet.
        os.environ.setdefault("PYTHONWARNINGS", "ignore:resource_tracker:UserWarning")
        with parallel_config(backend="loky", n_jobs=n_jobs):
            yield from Parallel(return_as="generator_unordered")(delayed(run_cell)(c, quiet) for c in cells)
        return
    if backend != "dask":
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    from distributed import Client, LocalCluster

    cluster = None if scheduler else LocalCluster(n_workers=n_jobs, threads_per_worker=1, processes=True)
    try:
        with Client(scheduler or cluster), parallel_config(backend="dask"):
            yield from Parallel(n_jobs=-1, return_as="generator_unordered")(delayed(run_cell)(c, quiet) for c in cells)
    finally:
        if cluster is not None:
            cluster.close()


SCHEDULER_TIMEOUT = 3  # seconds to reach a dask scheduler before the run is refused: a wrong address fails fast


def check_scheduler(address: str) -> None:
    """Open one connection to the dask scheduler at `address` (its handshake included) before anything is written;
    ConnectionError in one line when that fails within SCHEDULER_TIMEOUT seconds (a wrong address, a scheduler not
    started, a firewall, another service on that port). A `Client` is not used: its failed start waits far longer."""
    import asyncio

    from distributed.comm import connect

    async def probe():
        comm = await connect(address, timeout=SCHEDULER_TIMEOUT)
        await comm.close()

    try:
        asyncio.run(asyncio.wait_for(probe(), SCHEDULER_TIMEOUT + 1))
    except Exception as e:  # refused, unreachable, timed out, not an address, or something else answering there
        why = str(e).splitlines()[0][:160] if isinstance(e, (OSError, ValueError)) and str(e) else "no dask scheduler answered"
        raise ConnectionError(
            f"cannot reach the dask scheduler at {address} within {SCHEDULER_TIMEOUT} s ({why}); start it "
            "(`dask scheduler`, then `dask worker ADDRESS`) or correct --scheduler"
        ) from None


def usable_cpus() -> int:
    """CPUs this process may run on (a Slurm or container cpuset, not the whole machine)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
