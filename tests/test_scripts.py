"""scripts/cells.py, the per-cell table `scripts/gpu_check.sh` prints to compare two runs of one sweep."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
from conftest import REPO


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
    out = subprocess.run([sys.executable, "scripts/cells.py", str(reference_sweep.results), str(reference_sweep.results)],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert "largest |ΔDSC| over 4 cells: 0.00 points; cells whose steps differ: 0" in out
