import fcntl
import io
import json
import os
import shutil
import subprocess
import sys
import time
import traceback
import warnings
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from bench.cli import main
from datasets.contract import RaterData

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session", autouse=True)
def shared_cache(tmp_path_factory):
    """One decoded-dataset cache for the whole session, so CLI tests decode mnist-5k once."""
    os.environ["BENCH_CACHE"] = str(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="session", autouse=True)
def one_thread_subprocesses():
    """Every subprocess (`python -m bench`, loky and dask workers) starts with one OpenMP thread.

    pytest-xdist runs one test process per core, and some tests run two sweeps at once: subprocesses that each
    spun up an OpenMP pool per core oversubscribed them, and OpenMP's spin-waits made a 12 s sweep take over
    60 s. A cell's numbers do not depend on it: cells train on `--threads` torch threads (1) whatever the
    environment. The environment also carries BENCH_CACHE, the session's cache.
    """
    before = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"
    yield
    if before is None:
        del os.environ["OMP_NUM_THREADS"]
    else:
        os.environ["OMP_NUM_THREADS"] = before


@pytest.fixture(scope="session", autouse=True)
def one_thread():
    """In-process tests train on tiny tensors, where a second intra-op thread only adds overhead
    (and oversubscribes a busy machine); CLI subprocesses keep the default."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# `Splits.raters_info` of a dataset with real raters: no noise knob, no ground truth to measure them against.
REAL_RATERS_INFO = {"style": "real", "level": "protocol", "target": None, "strength": None, "realised_average": None, "usable": None}


def blobs(n: int, size: int = 16, seed: int = 0) -> np.ndarray:
    """n binary masks (n, size, size) with one random rectangle each."""
    rng = np.random.default_rng(seed)
    out = np.zeros((n, size, size), dtype=np.uint8)
    for m in out:
        y, x = rng.integers(1, size // 2, 2)
        h, w = rng.integers(3, size // 2, 2)
        m[y : y + h, x : x + w] = 1
    return out


@pytest.fixture
def tiny_data() -> RaterData:
    """8 noisy 16×16 images with 3 raters (gt, gt shifted, gt with a hole) and one missing rater slot."""
    gt = blobs(8)
    rng = np.random.default_rng(1)
    raters = np.stack([gt, np.roll(gt, 1, axis=2), gt * (rng.random(gt.shape) > 0.2)], axis=1).astype(np.uint8)
    valid = np.ones((8, 3), dtype=bool)
    valid[0, 2] = False
    images = (gt[:, None] + rng.normal(0, 0.3, (8, 1, 16, 16))).astype(np.float32)
    ids = np.array([f"case-{i}" for i in range(8)])
    return RaterData(images, raters, valid, gt, ids, ids, rater_names=("a", "b", "c"))


def run_cli(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """`python -m bench ARGS` in a subprocess from the repo root: for what needs a real process (kills, exit codes
    of the interpreter, environment); everything else runs in-process through `run_bench`, 3 s faster a call."""
    return subprocess.run(
        [sys.executable, "-m", "bench", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def run_bench(*args: str) -> subprocess.CompletedProcess:
    """`python -m bench ARGS` in this process, with its exit status, stdout and stderr as `run_cli` returns them.

    An exception that escapes `main` is printed as the interpreter would (a traceback) and counts as exit 1;
    warnings are printed to stderr however often they occur, so a warning before an error is a second line.
    Tests that train through it pass `--backend sequential` where the backend is not what they test: `auto`
    would start one loky worker per CPU beside pytest-xdist's own.
    """
    out, err = io.StringIO(), io.StringIO()

    def show(message, category, filename, lineno, file=None, line=None):
        err.write(warnings.formatwarning(message, category, filename, lineno, line))

    with redirect_stdout(out), redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        try:
            code = main(list(args))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except Exception:
            traceback.print_exc(file=err)
            code = 1
    return subprocess.CompletedProcess(["python", "-m", "bench", *args], code, out.getvalue(), err.getvalue())


# --------------------------------------------------------------------------- the session's reference sweep
#
# The fault, backend and reproducibility tests (tests/reliability/, tests/test_backends.py) compare what a
# sweep wrote under some stress (kills, races, other backends, a second identical run) with one uninterrupted
# sequential run of the same tiny sweep. It is trained once per session (`reference_sweep`) and shared: a test
# that runs a sweep into it copies it first (`ReferenceSweep.copy`), so every test sees it as it was written.

# Budget flags of every sweep these tests run: seeds 0 and 1, 4 steps a stage (one evaluation each), 64 training
# and 24 test images. A results folder holds cells of one set of options (`bench run` refuses others), so a test
# that reuses reference cells runs with exactly these.
TINY_SWEEP = ["--seeds", "0,1", "--max-steps", "4", "--train-size", "64", "--test-size", "24", "--no-progress"]
REFERENCE_METHODS = ["lf-net", "mv-unet"]  # lf-net first: two stages, so a kill early in a run finds stage checkpoints
SEEDS = (0, 1)
CELL_PATH = ("runs", "mnist-5k", "lfnet", "protocol")  # the embedded dataset's default rater style, protocol noise
# The unique key of a row of the long table (bench.evaluate.long_table.COLUMNS): the cell, then what it was scored against.
ROW_KEYS = ["dataset", "raters", "noise", "method", "seed", "reference", "case", "structure", "metric"]


def sweep_command(methods: list[str], results: Path, *extra: str) -> list[str]:
    """`python -m bench run` of the tiny sweep, sequential; `extra` comes last, so a flag given there wins (`--seeds 0`)."""
    return [
        sys.executable,
        "-m",
        "bench",
        "run",
        "--methods",
        ",".join(methods),
        *TINY_SWEEP,
        "--backend",
        "sequential",
        "--results",
        str(results),
        *extra,
    ]


def long_row(dataset, raters, noise, method, seed, reference, case, structure, metric, value, n_samples=1) -> tuple:
    """One row of the long table (`bench.evaluate.long_table.COLUMNS`) for a test that needs no counts: 0 counts, NaN
    distance sums."""
    return (dataset, raters, noise, method, seed, reference, case, structure, metric, value, 0, 0, 0, 0, 0, np.nan, np.nan, n_samples)


def sorted_table(table: pd.DataFrame) -> pd.DataFrame:
    """The long table in ROW_KEYS order (rows of equal key would compare in arbitrary order: there are none)."""
    return table.sort_values(ROW_KEYS).reset_index(drop=True)


def read_table(results: Path) -> pd.DataFrame:
    """`<results>/metrics.parquet`, sorted."""
    return sorted_table(pd.read_parquet(results / "metrics.parquet"))


def cell_folder(results: Path, method: str, seed: int) -> Path:
    return results.joinpath(*CELL_PATH, method, f"seed-{seed}")


def file_states(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file below `folder`: relative path -> (size, mtime)."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.rglob("*")) if p.is_file()}


@dataclass(frozen=True)
class ReferenceSweep:
    """The uninterrupted sequential run of `sweep_command(REFERENCE_METHODS, results)`; never write into `results`."""

    results: Path
    seconds: float  # wall time of the command
    command: list[str]
    table: pd.DataFrame  # its metrics.parquet, sorted (sorted_table)

    def cell(self, method: str, seed: int) -> Path:
        return cell_folder(self.results, method, seed)

    def rows(self, methods: list[str], seeds: tuple[int, ...] = SEEDS) -> pd.DataFrame:
        """The table's rows of these methods and seeds, sorted."""
        return self.table[self.table["method"].isin(methods) & self.table["seed"].isin(seeds)].reset_index(drop=True)

    def copy(self, dest: Path, cells: list[tuple[str, int]] | None = None) -> Path:
        """A writable copy at `dest`: the whole results folder, or only these (method, seed) cells (folder and claim
        file; a run collects the tables)."""
        if cells is None:
            shutil.copytree(self.results, dest)
            return dest
        for method, seed in cells:
            source = self.cell(method, seed)
            shutil.copytree(source, cell_folder(dest, method, seed))
            lock = source.with_name(source.name + ".lock")
            if lock.exists():
                shutil.copy2(lock, cell_folder(dest, method, seed).with_name(lock.name))
        return dest


@pytest.fixture(scope="session")
def reference_sweep(tmp_path_factory, worker_id, shared_cache, one_thread_subprocesses) -> ReferenceSweep:
    """lf-net and mv-unet × seeds 0, 1 on the embedded mnist-5k, trained once for the session (about 12 s on 2 idle cores).

    Under pytest-xdist every worker asks for it: the first one trains it into the folder all workers share (the
    session's base temporary folder), under an flock, and the others wait and read it. At the end of the session
    the folder must be as it was written: a test that ran a sweep into it instead of a copy would have changed
    what every later test compared against.
    """
    root = tmp_path_factory.getbasetemp()
    root = (root.parent if worker_id != "master" else root) / "reference-sweep"
    root.mkdir(exist_ok=True)
    results, record = root / "results", root / "trained.json"
    command = sweep_command(REFERENCE_METHODS, results)
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not record.exists():  # the first worker here, or an earlier attempt failed
            shutil.rmtree(results, ignore_errors=True)
            t0 = time.perf_counter()
            out = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
            seconds = time.perf_counter() - t0
            assert out.returncode == 0, out.stderr
            assert "4 cells: 4 trained, 0 already done, 0 failed" in out.stdout, out.stdout
            record.write_text(json.dumps({"seconds": seconds}))
    seconds = json.loads(record.read_text())["seconds"]
    before = file_states(results)
    yield ReferenceSweep(results, seconds, command, read_table(results))
    assert file_states(results) == before, "a test wrote into the shared reference sweep; copy it first (ReferenceSweep.copy)"
