"""Sweep backends: a dask.distributed LocalCluster and loky worker processes give the sequential table, in bf16 and
fp32 (a cell runs on the same thread count in every backend); a loky worker killed mid-cell loses nothing that a
rerun does not restore."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, run_cli

SWEEP = "run --methods mv-unet,lf-net --seeds 0,1 --max-steps 4 --train-size 64 --test-size 16 --no-progress".split()


def table(results: Path) -> pd.DataFrame:
    rows = pd.read_parquet(results / "metrics.parquet")
    return rows.sort_values(["method", "seed", "reference", "case", "structure", "metric"]).reset_index(drop=True)


@pytest.fixture(scope="module")
def sequential(tmp_path_factory) -> pd.DataFrame:
    results = tmp_path_factory.mktemp("sequential")
    out = run_cli(*SWEEP, "--results", str(results), "--backend", "sequential")
    assert out.returncode == 0, out.stderr
    return table(results)


def test_loky_gives_the_sequential_table_in_fp32_and_bf16(tmp_path, sequential):
    """The default precision here is bf16 on a CPU with AMX (fp32 elsewhere): both precisions are compared."""
    auto = pd.read_json(next(tmp_path.parent.glob("sequential*/runs/**/manifest.json")), typ="series")["precision"]
    other = "fp32" if auto == "torch.bfloat16" else "bf16"
    precise = run_cli(*SWEEP, "--results", str(tmp_path / "seq"), "--backend", "sequential", "--precision", other, "--methods", "mv-unet")
    loky = run_cli(
        *SWEEP, "--results", str(tmp_path / "loky"), "--backend", "loky", "--n-jobs", "2", "--precision", other, "--methods", "mv-unet"
    )
    assert precise.returncode == 0 and loky.returncode == 0, precise.stderr + loky.stderr
    pd.testing.assert_frame_equal(table(tmp_path / "loky"), table(tmp_path / "seq"))


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


def test_loky_worker_killed_mid_cell_resumes_to_the_sequential_table(tmp_path, sequential):
    args = [sys.executable, "-m", "bench", *SWEEP, "--results", str(tmp_path), "--backend", "loky", "--n-jobs", "2"]
    proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.time() + 120
        killed = None
        while time.time() < deadline and killed is None:
            logs = list(tmp_path.glob("runs/**/lf-net/seed-*/train_log.csv"))
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
    assert not any(tmp_path.glob("runs/**/.*.tmp*")), "a half-written file was left behind"
    rerun = run_cli(*SWEEP, "--results", str(tmp_path), "--backend", "loky", "--n-jobs", "2")
    assert rerun.returncode == 0, rerun.stderr
    pd.testing.assert_frame_equal(table(tmp_path), sequential)
