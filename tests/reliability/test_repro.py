"""Reproducibility and provenance: same command, same numbers; the manifest says how to rerun a cell;
--dry-run lists exactly what runs; cell paths stay inside the results folder."""

import dataclasses
import json
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REFERENCE_METHODS, REPO, TINY_SWEEP, ReferenceSweep, read_table, run_cli

from bench import cli, store, study
from bench.run import plan, split_cache
from datasets import Splits, get_dataset


@pytest.fixture(scope="module")
def twice(tmp_path_factory, reference_sweep: ReferenceSweep) -> list[Path]:
    """The same command into two fresh folders: the session's reference sweep (lf-net, mv-unet × seeds 0, 1), then its
    command again with only the results folder changed. The first is shared: never run anything into it."""
    second = tmp_path_factory.mktemp("second") / "results"
    command = [str(second) if arg == str(reference_sweep.results) else arg for arg in reference_sweep.command]
    assert command.count(str(second)) == 1
    out = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return [reference_sweep.results, second]


def test_same_command_and_seed_give_bit_identical_metrics(twice):
    first, second = (pd.read_parquet(f / "metrics.parquet") for f in twice)
    pd.testing.assert_frame_equal(first, second, check_exact=True)
    preds = [sorted(f.glob("runs/**/predictions.npz")) for f in twice]
    assert len(preds[0]) == len(preds[1]) == 4
    for a, b in zip(*preds):  # quantised probabilities, compressed: equal files hold equal arrays
        assert a.relative_to(twice[0]) == b.relative_to(twice[1])
        with np.load(a) as x, np.load(b) as y:
            assert np.array_equal(x["probs"], y["probs"]) and np.array_equal(x["case_ids"], y["case_ids"]), a


def test_manifest_records_what_a_rerun_needs(twice):
    manifests = [json.loads(p.read_text()) for p in sorted(twice[0].glob("runs/**/manifest.json"))]
    assert len(manifests) == 4
    for m in manifests:
        assert m["status"] == "done"
        assert {"python", "torch", "numpy", "scipy", "pandas"} <= set(m["versions"])
        assert len(m["git_commit"]) == 40 and m["device"] == "cpu" and m["precision"] in ("float32", "torch.bfloat16")
        assert len(m["data_fingerprint"]) == 32 and m["data_root"]
        assert m["command"][1:3] == ["run", "--methods"]  # argv as given
        assert m["cell"] == {
            "dataset": "mnist-5k",
            "raters": "lfnet",
            "noise": "protocol",
            "method": m["cell"]["method"],
            "seed": m["cell"]["seed"],
        }
        assert m["cell"]["method"] in ("mv-unet", "lf-net") and m["seconds"] > 0
        selection = m["selection"]  # the GT-best weights of the last stage, scored on the test split (docs/decisions.md)
        assert selection["gt_best_step"] in (2, 4) and 0 <= selection["test_gt_dsc"] <= 100 and 0 <= selection["val_gt_dsc"] <= 100
    assert len({m["data_fingerprint"] for m in manifests}) == 1  # every cell saw the same data
    config = json.loads(next(twice[0].glob("runs/**/lf-net/seed-0/config.json")).read_text())
    assert config["options"] == {
        "budget": "quick",
        "max_steps": 4,
        "train_size": 64,
        "test_size": 24,
        "threads": 1,
        "samples": 16,
        "empty_pair": "one",
    }
    assert config["method_config"]["lam"] == 0.01 and list(config["schedules"]) == ["soft_label", "segmentation"]
    assert all(s["max_steps"] == 4 and s["lr"] == 1e-3 and s["early_stopping"] for s in config["schedules"].values())


def test_fingerprint_changes_with_any_pixel_rater_or_case(tiny_data):
    splits = Splits(tiny_data, tiny_data.subset(np.arange(2)), tiny_data, "test rule")
    same = Splits(*(dataclasses.replace(p, images=p.images.copy()) for p in (splits.train, splits.val, splits.test)), "test rule")
    assert split_cache.fingerprint(splits) == split_cache.fingerprint(same)
    images, raters, ids = tiny_data.images.copy(), tiny_data.raters.copy(), tiny_data.case_ids.copy()
    images[3, 0, 5, 5] += 1e-6
    raters[0, 1, 0, 0] ^= 1
    ids[7] = "case-x"
    for change in ({"images": images}, {"raters": raters}, {"case_ids": ids}):
        changed = Splits(dataclasses.replace(tiny_data, **change), splits.val, splits.test, "test rule")
        assert split_cache.fingerprint(changed) != split_cache.fingerprint(splits), change


def test_reused_folder_with_other_options_is_refused(tmp_path, reference_sweep, capsys):
    results = reference_sweep.copy(tmp_path / "results")  # a copy: the shared folder is never run into
    before = {p: p.read_bytes() for p in sorted(results.rglob("*")) if p.is_file()}
    args = ["run", "--methods", ",".join(REFERENCE_METHODS), *TINY_SWEEP, "--max-steps", "6", "--results", str(results)]
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ran with other options" in err[0] and "max_steps 4 (now 6)" in err[0]
    assert {p: p.read_bytes() for p in sorted(results.rglob("*")) if p.is_file()} == before


def test_reused_folder_whose_budget_changed_since_is_refused(tmp_path, reference_sweep, capsys):
    """A budget's definition can change under a results folder (the large-image quick batch did): a finished cell whose
    recorded schedules are not what its budget gives now is refused, not mixed in."""
    results = reference_sweep.copy(tmp_path / "results")
    config_path = next(results.glob("runs/**/lf-net/seed-0/config.json"))
    config = json.loads(config_path.read_text())
    config["schedules"]["segmentation"]["batch_size"] += 1  # as written by an older definition of the budget
    config_path.write_text(json.dumps(config))
    args = ["run", "--methods", ",".join(REFERENCE_METHODS), *TINY_SWEEP, "--results", str(results)]
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    batch = config["schedules"]["segmentation"]["batch_size"]
    assert len(err) == 1 and "budget changed since: segmentation batch_size" in err[0] and f"{batch} (now {batch - 1})" in err[0], err


def test_a_schedule_field_a_kept_cell_did_not_record_reads_as_its_default(tmp_path, reference_sweep, capsys):
    """Cells kept before a Schedule field existed (docs/paper's, before `rule_cap`) ran as its default does: they still
    match; a recorded value other than today's is refused as above."""
    results = reference_sweep.copy(tmp_path / "results")
    config_path = next(results.glob("runs/**/lf-net/seed-0/config.json"))
    config = json.loads(config_path.read_text())
    args = ["run", "--methods", ",".join(REFERENCE_METHODS), *TINY_SWEEP, "--results", str(results), "--dry-run"]
    for value, rc in ((None, 0), (5_000, 2)):
        for sched in config["schedules"].values():
            sched.pop("rule_cap", None)
            if value is not None:
                sched["rule_cap"] = value
        config_path.write_text(json.dumps(config))
        assert cli.main(args) == rc
        err = capsys.readouterr().err
        assert ("rule_cap 5000 (now 0)" in err) == bool(value), err


def test_dry_run_lists_exactly_the_cells_that_then_run(tmp_path, reference_sweep, capsys):
    # Half done: copy one finished cell, so the dry run must list only the other.
    base = ["run", "--methods", "mv-unet,lf-net", *TINY_SWEEP, "--seeds", "0", "--results", str(tmp_path)]
    reference_sweep.copy(tmp_path, cells=[("lf-net", 0)])
    assert cli.main([*base, "--dry-run"]) == 0  # in process: it trains nothing
    dry = capsys.readouterr().out
    listed = {line.split()[-1] for line in dry.splitlines() if line.startswith("to run")}
    assert listed == {"mnist-5k/lfnet/protocol/mv-unet/seed-0"} and "1 of 2 cells would run" in dry, dry
    before = {p.parent for p in tmp_path.glob("runs/**/metrics.parquet")}
    out = run_cli(*base)
    assert out.returncode == 0 and "1 trained, 1 already done" in out.stdout, out.stderr
    trained = {str(p.parent.relative_to(tmp_path / "runs")) for p in tmp_path.glob("runs/**/metrics.parquet")} - {
        str(p.relative_to(tmp_path / "runs")) for p in before
    }
    assert trained == listed
    pd.testing.assert_frame_equal(read_table(tmp_path), reference_sweep.rows(["lf-net", "mv-unet"], (0,)), check_exact=True)


def test_cell_paths_stay_inside_the_results_folder(tmp_path, capsys):
    names = plan.expand_params(["lf-net"], {"lf-net": {"tau": [1.5, -2.0]}}, get_dataset("mnist-5k"), study.default())
    for cell in plan.plan_cells(names, "mnist-5k", "cm", ["protocol", "0.45"], [0]):
        assert store.cell_dir(tmp_path, cell).resolve().is_relative_to(tmp_path.resolve())
    assert cli.main(["run", "--methods", "lf-net", "--set", "lf-net.soft_label=../../../etc", "--results", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "may hold only letters, digits" in err and not (tmp_path / "r").exists()
