"""The command line end to end on mnist-5k with a tiny budget, and bad input.

Each command runs in-process (`conftest.run_bench`); the tests that need a real `python -m bench` (kills,
backends, the real exit status) are in tests/reliability/ and tests/test_backends.py.
"""

import json

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
    hard_metrics = ("dsc", "bahd", "hd95", "assd", "nsd")
    hard = {(ref, m) for ref in ("gt", "majority", "staple", *(f"rater:{r}" for r in RATERS)) for m in hard_metrics}
    every = hard | {
        ("gt", "ece"),
        ("rater-mean", "soft_dice"),
        ("rater-mean", "soft_iou"),
        ("rater-mean", "ece"),
        ("raters", "ged"),
        ("raters", "ged_unbiased"),
        ("raters", "ged_floor"),
        ("raters", "dice_match"),
        ("raters", "dice_max"),
        ("raters", "dice_soft"),
        ("raters", "dice_personal"),
        ("raters", "dice_personal_match"),
        ("raters", "dice_between"),
        ("raters", "dice_between_raters"),
    }
    counts = table.groupby(["reference", "metric"]).size()
    assert set(counts.index) == every and (counts == 3 * 2 * 24).all()  # every reference, each methods × seeds × cases
    assert not table.duplicated(["method", "seed", "reference", "case", "metric"]).any()
    assert set(table["raters"]) == {"lfnet"} and set(table["noise"]) == {"protocol"}
    cell = results / "runs" / "mnist-5k" / "lfnet" / "protocol" / "mv-unet" / "seed-0"
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
    out = run_bench(
        "run",
        "--dataset",
        "mnist",
        "--data-root",
        str(tmp_path / "data"),
        "--methods",
        "mv-unet,qmv-unet",
        "--seeds",
        "0",
        "--results",
        str(tmp_path / "r"),
        "--max-steps",
        "2",
        "--no-progress",
        "--backend",
        "sequential",
    )
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
        (["--raters", "wobbly"], "--raters wobbly: mnist-5k: unknown rater style 'wobbly'; this dataset has lfnet, cm, cm-fit, morpho"),
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


def test_the_input_is_part_of_a_cells_identity(tmp_path):
    """`--input` names the rater setting `<style>+<input>` where it is not the style's own: its own folder, config and table rows."""
    results = tmp_path / "r"
    common = ["run", "--methods", "mv-unet", "--seeds", "0", "--results", str(results), *TINY]
    for extra in (["--raters", "cm", "--input", "clean"], ["--raters", "cm", "--input", "gaussian"], ["--input", "clean"]):
        out = run_bench(*common, *extra)
        assert out.returncode == 0, out.stderr
    runs = results / "runs" / "mnist-5k"
    assert {p.name for p in runs.iterdir()} == {"cm+clean", "cm", "lfnet"}  # gaussian is cm's own input, clean lfnet's
    for setting, kind in (("cm+clean", "clean"), ("cm", "gaussian"), ("lfnet", "clean")):
        cell = runs / setting / "protocol" / "mv-unet" / "seed-0"
        config, manifest = (json.loads((cell / f).read_text()) for f in ("config.json", "manifest.json"))
        assert config["rater_setting"]["input"] == kind and manifest["rater_setting"]["input"] == kind
        assert manifest["cell"]["raters"] == setting
    assert set(pd.read_parquet(results / "metrics.parquet")["raters"]) == {"cm+clean", "cm", "lfnet"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--input", "noisy"],
            "--input noisy: mnist-5k: unknown input 'noisy' in 'lfnet+noisy'; this dataset has clean, gaussian, cm-release",
        ),
        (
            ["--dataset", "lidc", "--input", "clean"],
            "--input clean: lidc: 'real+clean' names a network input, but this dataset has one input; give the rater style alone "
            "(real); --input applies to mnist-5k, mnist",
        ),
    ],
)
def test_a_bad_input_gets_one_line(tmp_path, args, message):
    out = run_bench("run", "--dry-run", *args, "--results", str(tmp_path / "r"))
    assert out.returncode == 2 and out.stderr.strip() == f"error: {message}", out.stderr


def test_finished_cells_made_from_other_data_are_refused(tmp_path):
    """A setting's name can outlive its rules: a finished cell whose data fingerprint differs from today's is not reused."""
    results = tmp_path / "r"
    args = ["run", "--methods", "mv-unet", "--seeds", "0", "--results", str(results), *TINY]
    assert run_bench(*args).returncode == 0
    manifest = results / "runs" / "mnist-5k" / "lfnet" / "protocol" / "mv-unet" / "seed-0" / "manifest.json"
    info = json.loads(manifest.read_text())
    info["data_fingerprint"] = "0" * 32
    manifest.write_text(json.dumps(info))
    before = {p: p.read_bytes() for p in results.rglob("*") if p.is_file() and "cache" not in p.parts}
    out = run_bench(*args)
    assert out.returncode == 2 and "were trained on other data than mnist-5k/lfnet/protocol gives now" in out.stderr, out.stderr
    assert {p: p.read_bytes() for p in results.rglob("*") if p.is_file() and "cache" not in p.parts} == before
    assert run_bench(*args, "--force").returncode == 0


def test_lf_net_cells_record_their_teacher_outside_the_vote(tmp_path):
    results = tmp_path / "r"
    out = run_bench("run", "--methods", "lf-net,mv-unet", "--seeds", "0", "--results", str(results), *TINY)
    assert out.returncode == 0, out.stderr
    runs = results / "runs" / "mnist-5k" / "lfnet" / "protocol"
    teacher = json.loads((runs / "lf-net" / "seed-0" / "manifest.json").read_text())["teacher"]
    assert set(teacher) >= {"p_fg_outside_gt_fg", "p_fg_outside_gt_bg", "pixels_outside_gt_fg"}
    assert all(0 <= teacher[k] <= 1 for k in teacher if k.startswith("p_fg")) and teacher["pixels_outside_gt_fg"] > 0
    assert "teacher" not in json.loads((runs / "mv-unet" / "seed-0" / "manifest.json").read_text())  # no learned fused label


def test_raters_prints_the_label_level_statistics(tmp_path):
    out = run_bench("raters", "--raters", "lfnet,cm", "--markdown")
    assert out.returncode == 0, out.stderr
    rows = {
        line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]] for line in out.stdout.splitlines() if line.startswith("| ")
    }
    assert rows[""] == ["lfnet", "cm"]
    lfnet_avg, cm_avg = (float(v) for v in rows["Average"])
    assert 0.44 < lfnet_avg < 0.49 and 0.47 < cm_avg < 0.52
    mv = [float(v.split()[0]) for v in rows["majority-vote label"]]
    staple = [float(v.split()[0]) for v in rows["STAPLE label"]]
    assert staple[0] > mv[0] and mv[1] > staple[1]  # the two pools order the fused labels the other way round
    assert out.stderr.count("note: mnist-5k: noise level protocol (lfnet raters") == 1  # a fact of the published pool, said once
