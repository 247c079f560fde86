"""The command line end to end on mnist-5k with a tiny budget, and bad input.

Each command runs in-process (`conftest.run_bench`); the tests that need a real `python -m bench` (kills,
backends, the real exit status) are in tests/reliability/ and tests/test_backends.py.
"""

import pandas as pd
import pytest
from conftest import run_bench
from test_datasets import make_mnist

RATERS = ("good", "over", "under", "wrong", "blank")
TINY = ["--max-steps", "2", "--train-size", "48", "--test-size", "24", "--no-progress", "--backend", "sequential"]


def test_tiny_sweep_writes_cells_table_and_summary_then_skips_on_rerun(tmp_path):
    results = tmp_path / "results"
    args = ["run", "--methods", "mv-unet,qmv-unet,oracle", "--seeds", "0,1", "--results", str(results), *TINY]
    first = run_bench(*args)
    assert first.returncode == 0, first.stderr
    assert "mv-unet" in first.stdout and "average" in first.stdout and "DSC (%)" in first.stdout
    table = pd.read_parquet(results / "metrics.parquet")
    hard = {(ref, m) for ref in ("gt", "majority", "staple", *(f"rater:{r}" for r in RATERS)) for m in ("dsc", "bahd")}
    every = hard | {("gt", "ece"), ("rater-mean", "soft_dice"), ("rater-mean", "soft_iou"), ("rater-mean", "ece"),
                    ("raters", "ged"), ("raters", "dice_match"), ("raters", "dice_max")}  # fmt: skip
    counts = table.groupby(["reference", "metric"]).size()
    assert set(counts.index) == every and (counts == 3 * 2 * 24).all()  # every reference, each methods × seeds × cases
    assert not table.duplicated(["method", "seed", "reference", "case", "metric"]).any()
    assert set(table["raters"]) == {"cm"} and set(table["noise"]) == {"protocol"}
    cell = results / "runs" / "mnist-5k" / "cm" / "protocol" / "mv-unet" / "seed-0"
    for name in ("config.json", "manifest.json", "train_log.csv", "predictions.npz", "calibration.parquet", "metrics.parquet"):
        assert (cell / name).is_file(), name
    summary = pd.read_csv(results / "summary.csv")
    assert {"average", "mv-unet", "qmv-unet", "oracle"} <= set(summary["method"])
    second = run_bench(*args)
    assert second.returncode == 0 and "0 trained, 6 already done" in second.stdout
    pd.testing.assert_frame_equal(pd.read_parquet(results / "metrics.parquet"), table)


def test_dry_run_lists_cells_and_writes_nothing(tmp_path):
    out = run_bench(
        "run",
        "--methods",
        "mv-unet,oracle",
        "--seeds",
        "0,1",
        "--noise-levels",
        "protocol,0.6",
        "--dry-run",
        "--results",
        str(tmp_path / "r"),
    )
    assert out.returncode == 0
    assert out.stdout.count("to run") == 8 and "8 of 8 cells would run" in out.stdout
    assert not (tmp_path / "r").exists()


def test_mnist_adapter_runs_from_the_cli(tmp_path):
    make_mnist(tmp_path / "data")
    out = run_bench("run", "--dataset", "mnist", "--data-root", str(tmp_path / "data"), "--methods", "mv-unet,qmv-unet", "--seeds", "0",
                  "--results", str(tmp_path / "r"), "--max-steps", "2", "--no-progress", "--backend", "sequential")  # fmt: skip
    assert out.returncode == 0, out.stderr
    table = pd.read_parquet(tmp_path / "r" / "metrics.parquet")
    assert len(table[(table["reference"] == "gt") & (table["metric"] == "dsc")]) == 2 * 20  # methods × test cases


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--methods", "mv-unet,nope"], "unknown method 'nope'; known: mv-unet"),
        (["--dataset", "lidc-x"], "unknown dataset 'lidc-x'; known: mnist-5k"),
        (["--seeds", "0,one"], "--seeds '0,one': expected comma-separated ints"),
        (["--noise-levels", "protocol,high"], "--noise-levels: "),
        (["--noise-levels", "1.5"], "--noise-levels: "),
        (["--raters", "wobbly"], "--raters wobbly: mnist-5k has rater style(s) cm, morpho"),
        (
            ["--dataset", "lidc", "--noise-levels", "0.5"],
            "lidc has real raters, so there is no noise level to set (got 0.5); use --noise-levels protocol",
        ),
        (["--max-steps", "0"], "--max-steps must be ≥ 1"),
        (["--dataset", "mnist", "--data-root", "{tmp}/empty"], "mnist: missing train-images-idx3-ubyte.gz"),
        (["--results", "{tmp}/file.txt/results"], "cannot write the results folder"),
    ],
)
def test_bad_input_gets_one_line_and_exit_2(tmp_path, args, message):
    (tmp_path / "file.txt").write_text("not a folder")
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    results = ["--results", str(tmp_path / "r")] if "--results" not in args else []
    out = run_bench("run", *TINY, *args, *results)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], out.stderr
    assert not (tmp_path / "r").exists()  # nothing written


# Killed sweeps (12 kill points, concurrent writers, full disk): tests/reliability/test_faults.py.
