"""Reproducibility and provenance: same command, same numbers; the manifest says how to rerun a cell;
--dry-run lists exactly what runs; cell paths stay inside the results folder."""

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from conftest import run_cli

from bench import cli, data, store, sweep
from datasets import Splits, get_dataset

SWEEP = "run --methods mv-unet,lf-net --seeds 0 --max-steps 4 --train-size 64 --test-size 16 --no-progress".split()


@pytest.fixture(scope="module")
def twice(tmp_path_factory):
    """The same command into two fresh folders."""
    folders = [tmp_path_factory.mktemp("first"), tmp_path_factory.mktemp("second")]
    for folder in folders:
        out = run_cli(*SWEEP, "--results", str(folder))
        assert out.returncode == 0, out.stderr
    return folders


def test_same_command_and_seed_give_bit_identical_metrics(twice):
    first, second = (pd.read_parquet(f / "metrics.parquet") for f in twice)
    pd.testing.assert_frame_equal(first, second, check_exact=True)
    preds = [sorted(f.glob("runs/**/predictions.npz")) for f in twice]
    assert len(preds[0]) == 2 and [p.read_bytes() for p in preds[0]] != [] and len(preds[1]) == 2


def test_manifest_records_what_a_rerun_needs(twice):
    manifests = [json.loads(p.read_text()) for p in sorted(twice[0].glob("runs/**/manifest.json"))]
    assert len(manifests) == 2
    for m in manifests:
        assert m["status"] == "done"
        assert {"python", "torch", "numpy", "scipy", "pandas"} <= set(m["versions"])
        assert len(m["git_commit"]) == 40 and m["device"] == "cpu" and m["precision"] in ("float32", "torch.bfloat16")
        assert len(m["data_fingerprint"]) == 32 and m["data_root"]
        assert m["command"][1:3] == ["run", "--methods"]  # argv as given
        assert m["cell"]["method"] in ("mv-unet", "lf-net") and m["seconds"] > 0
    assert manifests[0]["data_fingerprint"] == manifests[1]["data_fingerprint"]  # both cells saw the same data
    config = json.loads(next(twice[0].glob("runs/**/lf-net/seed-0/config.json")).read_text())
    assert config["options"] == {"budget": "quick", "max_steps": 4, "train_size": 64, "test_size": 16, "threads": 1}
    assert config["method_config"]["lam"] == 0.01 and list(config["schedules"]) == ["soft_label", "segmentation"]
    assert all(s["max_steps"] == 4 and s["lr"] == 1e-3 and s["early_stopping"] for s in config["schedules"].values())


def test_fingerprint_changes_with_any_pixel_rater_or_case(tiny_data):
    splits = Splits(tiny_data, tiny_data.subset(np.arange(2)), tiny_data, "test rule")
    same = Splits(*(dataclasses.replace(p, images=p.images.copy()) for p in (splits.train, splits.val, splits.test)), "test rule")
    assert data.fingerprint(splits) == data.fingerprint(same)
    images, raters, ids = tiny_data.images.copy(), tiny_data.raters.copy(), tiny_data.case_ids.copy()
    images[3, 0, 5, 5] += 1e-6
    raters[0, 1, 0, 0] ^= 1
    ids[7] = "case-x"
    for change in ({"images": images}, {"raters": raters}, {"case_ids": ids}):
        changed = Splits(dataclasses.replace(tiny_data, **change), splits.val, splits.test, "test rule")
        assert data.fingerprint(changed) != data.fingerprint(splits), change


def test_reused_folder_with_other_options_is_refused(twice, capsys):
    assert cli.main([*SWEEP[:-1], "--max-steps", "6", "--results", str(twice[0])]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ran with other options" in err[0] and "max_steps 4 (now 6)" in err[0]


def test_dry_run_lists_exactly_the_cells_that_then_run(tmp_path, twice):
    # Half done: copy one finished cell, so the dry run must list only the other.
    base = ["run", "--methods", "mv-unet,lf-net", "--seeds", "0", "--max-steps", "4", "--train-size", "64", "--test-size", "16"]
    done = next(twice[0].glob("runs/**/mv-unet/seed-0"))
    target = tmp_path / done.relative_to(twice[0])
    target.parent.mkdir(parents=True)
    import shutil

    shutil.copytree(done, target)
    dry = run_cli(*base, "--dry-run", "--results", str(tmp_path))
    listed = {line.split()[-1] for line in dry.stdout.splitlines() if line.startswith("to run")}
    assert listed == {"mnist-5k/cm/protocol/lf-net/seed-0"} and "1 of 2 cells would run" in dry.stdout
    before = {p.parent for p in tmp_path.glob("runs/**/metrics.parquet")}
    out = run_cli(*base, "--no-progress", "--results", str(tmp_path))
    assert out.returncode == 0 and "1 trained, 1 already done" in out.stdout
    trained = {str(p.parent.relative_to(tmp_path / "runs")) for p in tmp_path.glob("runs/**/metrics.parquet")} - {
        str(p.relative_to(tmp_path / "runs")) for p in before
    }
    assert trained == listed


def test_cell_paths_stay_inside_the_results_folder(tmp_path, capsys):
    names = sweep.expand_params(["lf-net"], {"lf-net": {"tau": [1.5, -2.0]}}, get_dataset("mnist-5k"))
    for cell in sweep.plan(names, "mnist-5k", "cm", ["protocol"], [0]):
        assert store.cell_dir(tmp_path, cell).resolve().is_relative_to(tmp_path.resolve())
    assert cli.main(["run", "--methods", "lf-net", "--set", "lf-net.soft_label=../../../etc", "--results", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "may hold only letters, digits" in err and not (tmp_path / "r").exists()
