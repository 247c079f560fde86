"""scripts/cells.py, the per-cell table `scripts/gpu_check.sh` prints to compare two runs of one sweep; scripts/stop_audit.sh,
the stop audit's two runs sized one by the other, scripts/stop_audit_keep.sh, their evidence kept small, and
scripts/stop_audit_restore.sh, that evidence brought back to start an audit again; scripts/keep_cells.sh, a run's finished
cells kept without their checkpoints."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
from conftest import REPO, cell_folder, sweep_command


def test_cells_lists_every_cell_and_compares_two_folders(reference_sweep):
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import cells
    finally:
        sys.path.pop(0)
    one = cells.cells(reference_sweep.results)
    assert sorted(one.index) == [("lf-net", 0), ("lf-net", 1), ("mv-unet", 0), ("mv-unet", 1)]
    logs = pd.read_parquet(reference_sweep.results / "train_logs.parquet")
    lf0 = logs[(logs.method == "lf-net") & (logs.seed == 0) & (logs.event == "stop")]
    assert one.loc[("lf-net", 0), "steps"] == lf0.step.sum()  # LF-Net's two stages add up
    assert one.dsc.between(0, 100).all() and (one.steps_per_s > 0).all()  # a 4-step cell may mark nothing
    out = subprocess.run(
        [sys.executable, "scripts/cells.py", str(reference_sweep.results), str(reference_sweep.results)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "largest |ΔDSC| over 4 cells: 0.00 points; cells whose steps differ: 0" in out


def test_the_stop_audit_script_sizes_the_long_run_from_the_rule_runs_stop(tmp_path):
    rule, long = tmp_path / "rule", tmp_path / "long"
    tiny = "--train-size 32 --test-size 12 --backend sequential --max-steps 2"  # the rule run stops at its cap of 2
    proc = subprocess.run(
        ["bash", "scripts/stop_audit.sh", str(rule), str(long), "mv-unet", "0"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "RUN_ARGS": tiny, "MIN_LONG": "4"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "mv-unet seed 0: rule stopped at 2 -> long run 20 steps" in (rule / "stop_audit_runs.txt").read_text()  # 4 × 2 → 20
    logs = pd.read_parquet(long / "train_logs.parquet")
    assert logs.loc[logs.event == "stop", "step"].tolist() == [20] and "| MV-UNet | train | 2 (cap) |" in proc.stdout
    missing = subprocess.run(
        [sys.executable, "scripts/stop_audit_length.py", str(rule), "mh-unet", "0"], cwd=REPO, capture_output=True, text=True
    )
    assert missing.returncode == 1 and "holds no finished cell of mh-unet seed 0" in missing.stderr
    # the kept copy (no checkpoints, predictions or collected tables) remakes the same audit
    kept = tmp_path / "kept"
    keep = subprocess.run(["bash", "scripts/stop_audit_keep.sh", str(rule), str(long), str(kept)], cwd=REPO, capture_output=True, text=True)
    assert keep.returncode == 0, keep.stderr
    assert not list(kept.rglob("checkpoints")) and not list(kept.rglob("predictions.npz")) and not (kept / "rule/metrics.parquet").exists()
    again = (kept / "rule/stop_audit/stop_audit.md").read_text().replace(str(kept), str(tmp_path))
    assert again == (rule / "stop_audit/stop_audit.md").read_text()
    bad = subprocess.run(
        ["bash", "scripts/stop_audit_keep.sh", str(rule), str(tmp_path / "nowhere"), str(kept)], cwd=REPO, capture_output=True, text=True
    )
    assert bad.returncode == 2 and "nowhere holds no runs/ folder" in bad.stderr and (kept / "rule/stop_audit").is_dir()  # rule kept too
    # restored on a fresh machine: the finished cells and the script's log come back; a kept run that had not finished
    # (no metrics: its checkpoints were never kept) is left out, to train again
    (kept_long,) = (kept / "long").rglob("seed-0")
    (kept_long / "metrics.parquet").rename(tmp_path / "metrics.parquet")
    manifest = kept_long / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"status": "done"', '"status": "running"'))
    new = tmp_path / "new"
    restore = subprocess.run(["bash", "scripts/stop_audit_restore.sh", str(kept), str(new)], cwd=REPO, capture_output=True, text=True)
    assert restore.returncode == 0, restore.stderr
    assert "restored 1 finished cells" in restore.stdout and "1 unfinished left out" in restore.stdout
    (cell,) = (new / "rule").rglob("seed-0")
    assert sorted(f.name for f in cell.iterdir()) == ["config.json", "manifest.json", "metrics.parquet", "train_log.csv"]
    assert (
        not (new / "long" / "runs").exists()
        and (new / "rule/stop_audit_runs.txt").read_text() == (rule / "stop_audit_runs.txt").read_text()
    )
    # keeping the new folders again, before the run left out trains there, keeps that run's earlier log
    (new / "long" / "runs").mkdir(parents=True)
    earlier = "2026-01-01T00:00:00Z a run the earlier copy's log holds and the new folders' do not\n"
    with open(kept / "rule/stop_audit_runs.txt", "a") as f:
        f.write(earlier)
    rekept = subprocess.run(
        ["bash", "scripts/stop_audit_keep.sh", str(new / "rule"), str(new / "long"), str(kept)], cwd=REPO, capture_output=True, text=True
    )
    assert rekept.returncode == 0, rekept.stderr
    assert "carried over 1 cells of the earlier copy" in rekept.stdout
    merged = (kept / "rule/stop_audit_runs.txt").read_text()  # the log keeps both, in time order
    assert merged == "".join(sorted({earlier, *(rule / "stop_audit_runs.txt").read_text().splitlines(keepends=True)}))
    assert sorted(f.name for f in kept_long.iterdir()) == ["config.json", "manifest.json", "train_log.csv"]
    waiting = (kept / "rule/stop_audit/stop_audit.md").read_text().partition("Cells without a finished pair")[2]
    assert "| MV-UNet | 0 | train: 2 (cap), restored 2," in waiting  # no evaluated step in common with the long run: "0" twins
    nothing = subprocess.run(
        ["bash", "scripts/stop_audit_restore.sh", str(tmp_path / "nowhere"), str(new)], cwd=REPO, capture_output=True, text=True
    )
    assert nothing.returncode == 2 and "nowhere/rule holds no runs/ folder" in nothing.stderr


def test_the_stop_audit_script_can_run_a_fixed_long_run_beside_the_rule_run(tmp_path):
    """LONG_STEPS: each long run starts at once at that length beside its rule run (a card's cells run side by side), and
    a rule stop above a quarter of it is noted."""
    rule, long = tmp_path / "rule", tmp_path / "long"
    tiny = "--train-size 32 --test-size 12 --backend sequential --max-steps 6"  # the rule run stops at its cap of 6
    proc = subprocess.run(
        ["bash", "scripts/stop_audit.sh", str(rule), str(long), "mv-unet", "0"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "RUN_ARGS": tiny, "LONG_STEPS": "20"},
    )
    assert proc.returncode == 0, proc.stderr
    said = (rule / "stop_audit_runs.txt").read_text()
    assert "mv-unet seed 0: long run 20 steps, beside the rule run" in said and "long run rc 0" in said
    assert "mv-unet seed 0: rule stopped at 6 (above a quarter of the long run's 20 steps)" in said
    logs = pd.read_parquet(long / "train_logs.parquet")
    assert logs.loc[logs.event == "stop", "step"].tolist() == [20] and "| MV-UNet | train | 6 (cap) |" in proc.stdout


def test_kept_cells_are_a_results_folder_that_a_run_goes_on_from(reference_sweep, tmp_path):
    kept = tmp_path / "kept"
    keep = subprocess.run(
        ["bash", "scripts/keep_cells.sh", str(reference_sweep.results), str(kept)], cwd=REPO, capture_output=True, text=True
    )
    assert keep.returncode == 0, keep.stderr
    assert "kept 4 finished cells (4 new)" in keep.stdout and "4 cells); 0 unfinished left out" in keep.stdout
    assert sorted(p.name for p in kept.iterdir()) == ["runs"] and not list(kept.rglob("checkpoints"))
    cell = cell_folder(kept, "lf-net", 0)
    assert sorted(p.name for p in cell.iterdir()) == sorted(
        p.name for p in reference_sweep.cell("lf-net", 0).iterdir() if p.is_file()
    )  # every file but the checkpoints
    assert (cell / "predictions.npz").read_bytes() == (reference_sweep.cell("lf-net", 0) / "predictions.npz").read_bytes()
    # a fresh machine's run goes on from the kept cells and trains none of them again
    again = tmp_path / "again"
    again.mkdir()
    subprocess.run(["cp", "-rn", str(kept / "runs"), str(again)], check=True)
    run = subprocess.run(sweep_command(["lf-net", "mv-unet"], again), cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "4 cells: 0 trained, 4 already done, 0 failed" in run.stdout
    assert pd.read_parquet(again / "metrics.parquet").shape == reference_sweep.table.shape
    # keeping again from a folder where a cell has not finished leaves the kept copy of it as it was
    unfinished = reference_sweep.copy(tmp_path / "unfinished", [("mv-unet", 1)])
    (cell_folder(unfinished, "mv-unet", 1) / "metrics.parquet").unlink()
    before = (cell_folder(kept, "mv-unet", 1) / "metrics.parquet").read_bytes()
    rekept = subprocess.run(["bash", "scripts/keep_cells.sh", str(unfinished), str(kept)], cwd=REPO, capture_output=True, text=True)
    assert rekept.returncode == 0 and "kept 0 finished cells (0 new)" in rekept.stdout and "1 unfinished left out" in rekept.stdout
    assert (cell_folder(kept, "mv-unet", 1) / "metrics.parquet").read_bytes() == before
    # with SINCE, only the cells that finished after it (what a card's call returns, scripts/gpu_check.sh)
    since = tmp_path / "since"
    since.touch()
    os.utime(since, (1, 1))
    for method, seed in (("lf-net", 0), ("lf-net", 1), ("mv-unet", 0), ("mv-unet", 1)):
        os.utime(cell_folder(kept, method, seed) / "metrics.parquet", (0, 0) if method == "mv-unet" else (2, 2))
    only = subprocess.run(
        ["bash", "scripts/keep_cells.sh", str(kept), str(tmp_path / "new"), str(since)], cwd=REPO, capture_output=True, text=True
    )
    assert only.returncode == 0 and "kept 2 finished cells (2 new)" in only.stdout, only.stdout + only.stderr
    assert sorted(p.name for p in (tmp_path / "new" / "runs").rglob("seed-*")) == ["seed-0", "seed-1"]
    assert not list((tmp_path / "new").rglob("mv-unet"))
    bad = subprocess.run(["bash", "scripts/keep_cells.sh", str(tmp_path / "nowhere"), str(kept)], cwd=REPO, capture_output=True, text=True)
    assert bad.returncode == 2 and "nowhere holds no runs/ folder" in bad.stderr
