"""Sweep backends: a dask.distributed LocalCluster and loky worker processes give the sequential table, in bf16 and
fp32 (a cell runs on the same thread count in every backend); a loky worker killed mid-cell loses nothing that a
rerun does not restore.

The sequential table is the session's reference sweep (tests/conftest.py: lf-net and mv-unet × seeds 0, 1, the same
flags, `--backend sequential`); only the other side of each comparison trains here.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import REFERENCE_METHODS, REPO, TINY_SWEEP, ReferenceSweep, cell_folder, read_table, run_cli

SWEEP = ["run", "--methods", ",".join(REFERENCE_METHODS), *TINY_SWEEP]
table = read_table  # <results>/metrics.parquet, rows sorted by their key


@pytest.fixture(scope="module")
def sequential(reference_sweep: ReferenceSweep) -> pd.DataFrame:
    """The sequential table: the session's reference sweep ran SWEEP with `--backend sequential`."""
    assert reference_sweep.command == [
        sys.executable,
        "-m",
        "bench",
        *SWEEP,
        "--backend",
        "sequential",
        "--results",
        str(reference_sweep.results),
    ]
    return reference_sweep.table


def test_loky_gives_the_sequential_table_in_fp32_and_bf16(tmp_path, reference_sweep, sequential):
    """The default precision here is bf16 on a CPU with AMX (fp32 elsewhere): both precisions are compared."""
    auto = pd.read_json(next(reference_sweep.results.glob("runs/**/manifest.json")), typ="series")["precision"]
    other = "fp32" if auto == "torch.bfloat16" else "bf16"
    precise = run_cli(*SWEEP, "--results", str(tmp_path / "seq"), "--backend", "sequential", "--precision", other, "--methods", "mv-unet")
    loky = run_cli(
        *SWEEP, "--results", str(tmp_path / "loky"), "--backend", "loky", "--n-jobs", "2", "--precision", other, "--methods", "mv-unet"
    )
    assert precise.returncode == 0 and loky.returncode == 0, precise.stderr + loky.stderr
    pd.testing.assert_frame_equal(table(tmp_path / "loky"), table(tmp_path / "seq"))
    manifests = [pd.read_json(p, typ="series") for p in (tmp_path / "loky").glob("runs/**/manifest.json")]
    assert len(manifests) == 2 and {m["precision"] for m in manifests} == {"float32" if other == "fp32" else "torch.bfloat16"}


def test_dask_local_cluster_gives_the_sequential_table(tmp_path, sequential):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        out = run_cli(*SWEEP, "--results", str(tmp_path), "--backend", "dask", "--scheduler", cluster.scheduler_address)
    assert out.returncode == 0, out.stderr
    assert "4 trained, 0 already done, 0 failed" in out.stdout
    pd.testing.assert_frame_equal(table(tmp_path), sequential)
    pids = {pd.read_json(p, typ="series")["pid"] for p in tmp_path.glob("runs/**/manifest.json")}
    assert os.getpid() not in pids and len(pids) >= 1  # trained in the cluster's worker processes


def children(pid: int) -> list[int]:
    """Direct child processes of `pid` (Linux /proc)."""
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        text = (task / "children").read_text() if (task / "children").exists() else ""
        out += [int(c) for c in text.split()]
    return out


def test_loky_worker_killed_mid_cell_resumes_to_the_sequential_table(tmp_path, reference_sweep, sequential):
    """The reference's mv-unet cells are copied in and its lf-net cells removed: the two loky workers both train an
    LF-Net cell (two stages) when they are killed, and the rerun restores them."""
    results = reference_sweep.copy(tmp_path / "results")
    for seed in (0, 1):
        shutil.rmtree(cell_folder(results, "lf-net", seed))
    (results / "metrics.parquet").unlink()  # the table the rerun collects, not the copied one
    args = [sys.executable, "-m", "bench", *SWEEP, "--results", str(results), "--backend", "loky", "--n-jobs", "2"]
    proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.time() + 120
        killed = None
        while time.time() < deadline and killed is None:
            logs = list(results.glob("runs/**/lf-net/seed-*/train_log.csv"))
            workers = [c for c in children(proc.pid) if "loky" in Path(f"/proc/{c}/cmdline").read_text(errors="ignore")]
            if logs and workers:  # an LF-Net cell is training in a worker: kill every worker
                for worker in workers:
                    os.kill(worker, signal.SIGKILL)
                killed = len(workers)
            time.sleep(0.05)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert killed, "no loky worker was found training"
    assert proc.returncode == 1 and "worker lost" in stderr and "rerun the same command to resume" in stderr, stderr
    assert not any(results.glob("runs/**/.*.tmp*")), "a half-written file was left behind"
    rerun = run_cli(*SWEEP, "--results", str(results), "--backend", "loky", "--n-jobs", "2")
    assert rerun.returncode == 0, rerun.stderr
    cells, _, done, failed = map(int, re.search(r"(\d+) cells: (\d+) trained, (\d+) already done, (\d+) failed", rerun.stdout).groups())
    assert cells == 4 and failed == 0 and done >= 2, rerun.stdout  # at least the copied mv-unet cells were done
    pd.testing.assert_frame_equal(table(results), sequential)
