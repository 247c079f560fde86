"""One line per cell of a results folder: training steps, training seconds, steps/s and mean DSC vs GT.

    python scripts/cells.py A [B]

With two folders (the same sweep run two ways, e.g. `--engine eager` and `--engine graphed`) it
prints both side by side with B − A, cell by cell, and the largest |ΔDSC|. Used by
scripts/gpu_check.sh; reads only `train_logs.parquet` and `metrics.parquet`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

KEYS = ["method", "seed"]


def cells(folder: Path) -> pd.DataFrame:
    """(method, seed) → steps (summed over stages), seconds (each stage's last logged time, summed), steps_per_s, dsc (mean vs GT, %)."""
    logs = pd.read_parquet(folder / "train_logs.parquet")
    stops = logs[logs.event == "stop"].groupby(KEYS + ["stage"]).agg(steps=("step", "max"), seconds=("seconds", "max"))
    out = stops.groupby(KEYS).sum()
    out["steps_per_s"] = out.steps / out.seconds
    m = pd.read_parquet(folder / "metrics.parquet")
    dsc = m[(m.reference == "gt") & (m.metric == "dsc")].groupby(KEYS).value.mean() * 100
    return out.join(dsc.rename("dsc"), how="outer")


def main(argv: list[str]) -> None:
    pd.set_option("display.width", 200)
    a = cells(Path(argv[0]))
    if len(argv) == 1:
        print(a.round(2).to_string())
        return
    b = cells(Path(argv[1]))
    both = a.merge(b, left_index=True, right_index=True, suffixes=("_a", "_b"), how="outer")
    both["d_dsc"] = both.dsc_b - both.dsc_a
    print(both.round(2).to_string())
    print(
        f"largest |ΔDSC| over {both.d_dsc.notna().sum()} cells: {both.d_dsc.abs().max():.2f} points; "
        f"cells whose steps differ: {(both.steps_a != both.steps_b).sum()}"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
