"""`bench rescore`: old results folders move to the current layout and gain every reference's metrics, without training."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import torch

from bench import cli, files
from bench.evaluate.long_table import SUMS
from methods.registry import get_entry

TINY = ["--max-steps", "2", "--train-size", "32", "--test-size", "12", "--no-progress", "--backend", "sequential"]


def make_old_layout(results, new_cell: str, reference: str, noise: float) -> tuple:
    """Turn a finished cell into one written before the reference left the path: old folder, old cell record, gt-only rows."""
    new = results / "runs" / new_cell
    dataset, _, _, method, seed = new_cell.split("/")
    old = results / "runs" / dataset / reference / f"noise-{noise:g}" / method / seed
    shutil.copytree(new, old)
    info = json.loads((old / "manifest.json").read_text())
    info["cell"] = {"dataset": dataset, "reference": reference, "noise": noise, "method": method, "seed": int(seed[5:])}
    (old / "manifest.json").write_text(json.dumps(info))
    rows = pd.read_parquet(old / "metrics.parquet")
    rows = rows[(rows["reference"] == "gt") & rows["metric"].isin(["dsc", "bahd"])].drop(columns=["raters", "reference", *SUMS])
    rows.insert(1, "reference", reference)
    rows.to_parquet(old / "metrics.parquet")
    (old / "calibration.parquet").unlink()
    return old, rows


def test_rescore_moves_old_cells_and_adds_every_reference_without_training(tmp_path, capsys):
    results = tmp_path / "r"
    assert cli.main(["run", "--methods", "mv-unet", "--seeds", "0", "--raters", "morpho", "--results", str(results), *TINY]) == 0
    old, old_rows = make_old_layout(results, "mnist-5k/morpho/protocol/mv-unet/seed-0", "gt", 1.0)
    twin, _ = make_old_layout(results, "mnist-5k/morpho/protocol/mv-unet/seed-0", "majority", 1.0)  # the same training, twice
    scaled, _ = make_old_layout(results, "mnist-5k/morpho/protocol/mv-unet/seed-0", "gt", 0.5)  # the old radius scale
    shutil.rmtree(results / "runs" / "mnist-5k" / "morpho")
    log = (old / "train_log.csv").read_bytes()
    weights = sorted(p.read_bytes() for p in (old / "checkpoints").glob("*.pt"))

    assert cli.main(["run", "--methods", "mv-unet", "--seeds", "0", "--raters", "morpho", "--dry-run", "--results", str(results)]) == 0
    assert "to run" in capsys.readouterr().out  # old cells are not read as current ones

    assert cli.main(["rescore", "--results", str(results), "--no-progress"]) == 0
    out, err = capsys.readouterr()
    new = results / "runs" / "mnist-5k" / "morpho" / "protocol" / "mv-unet" / "seed-0"
    assert "moved runs/mnist-5k/gt/noise-1/mv-unet/seed-0 -> runs/mnist-5k/morpho/protocol/mv-unet/seed-0" in out
    assert not old.exists() and twin.exists() and scaled.exists()  # copies and the old scale stay where they were, said why
    assert "already at runs/mnist-5k/morpho/protocol" in err and "radius scale" in err
    assert (new / "train_log.csv").read_bytes() == log and sorted(p.read_bytes() for p in (new / "checkpoints").glob("*.pt")) == weights
    assert files.read_json(new / "manifest.json")["cell"] == {
        "dataset": "mnist-5k",
        "raters": "morpho",
        "noise": "protocol",
        "method": "mv-unet",
        "seed": 0,
    }
    table = pd.read_parquet(results / "metrics.parquet")
    assert {"gt", "majority", "staple", "rater:over", "raters", "rater-mean"} <= set(table["reference"])
    assert {"ged", "dice_match", "ece", "soft_dice"} <= set(table["metric"]) and table["gt_to_pred_sum"].notna().any()
    gt = table[(table["reference"] == "gt") & (table["metric"] == "dsc")].set_index("case")["value"]
    before = old_rows[old_rows["metric"] == "dsc"].set_index("case")["value"]
    pd.testing.assert_series_equal(gt.sort_index(), before.sort_index(), check_names=False)  # same predictions, same scores
    assert (results / "calibration.parquet").is_file()
    # a rerun of the same run (its options: a dry run checks them as the run does) now finds the cell done
    same = ["--max-steps", "2", "--train-size", "32", "--test-size", "12"]
    assert (
        cli.main(["run", "--methods", "mv-unet", "--seeds", "0", "--raters", "morpho", *same, "--dry-run", "--results", str(results)]) == 0
    )
    assert "done" in capsys.readouterr().out


def test_reread_reads_a_samplers_consensus_again_from_its_weights_where_its_read_out_changed(tmp_path, capsys, monkeypatch):
    """A Prob. U-Net cell read with other draws than its method gives now is read again from its checkpoint (new
    probabilities, the draw-seed-1 read-out beside them, the old read-out kept in the manifest), once; a cell whose
    weights are gone is named with its checkpoints folder and the run that retrains it; without --reread nothing is read
    again."""
    results = tmp_path / "r"
    assert cli.main(["run", "--methods", "prob-unet,mv-unet", "--seeds", "0", "--results", str(results), *TINY]) == 0
    cell = results / "runs" / "mnist-5k" / "lfnet" / "protocol" / "prob-unet" / "seed-0"
    before = np.load(cell / "predictions.npz")["probs"]
    assert files.read_json(cell / "manifest.json")["consensus"]["draws"] == 64
    weights = cell / "checkpoints" / "stage-0-train.pt"  # two steps leave the output blind to z: let the latent count
    state = torch.load(weights, weights_only=True)
    state["fcomb.layers.0.weight"][:, -6:] *= 300
    torch.save(state, weights)

    assert cli.main(["rescore", "--results", str(results), "--reread", "--no-progress"]) == 0  # already at today's read-out
    assert np.array_equal(np.load(cell / "predictions.npz")["probs"], before)

    monkeypatch.setitem(get_entry("prob-unet").overrides, "consensus_estimator", "mc")  # today's read-out changes
    assert cli.main(["rescore", "--results", str(results), "--no-progress"]) == 0  # a plain rescore reads nothing again
    assert np.array_equal(np.load(cell / "predictions.npz")["probs"], before)
    assert cli.main(["rescore", "--results", str(results), "--reread", "--no-progress"]) == 0
    after = np.load(cell / "predictions.npz")["probs"]
    info, config = files.read_json(cell / "manifest.json"), files.read_json(cell / "config.json")
    assert not np.array_equal(after, before) and after.shape == before.shape
    assert info["consensus"]["estimator"] == "mc" and info["consensus"]["reread"]["had"]["estimator"] == "rqmc"
    assert config["method_config"]["consensus_estimator"] == "mc"
    table = pd.read_parquet(results / "metrics.parquet")
    dsc = table[(table["method"] == "prob-unet") & (table["reference"] == "gt") & (table["metric"] == "dsc")]
    assert np.isclose(dsc["value"].mean() * 100, info["consensus"]["dsc"], atol=0.01)  # the rows score the new read-out
    mtime = (cell / "predictions.npz").stat().st_mtime_ns
    assert cli.main(["rescore", "--results", str(results), "--reread", "--no-progress"]) == 0
    assert (cell / "predictions.npz").stat().st_mtime_ns == mtime  # read once

    monkeypatch.setitem(get_entry("prob-unet").overrides, "consensus_draws", 128)
    shutil.rmtree(cell / "checkpoints")  # a kept cell: no weights
    capsys.readouterr()
    assert cli.main(["rescore", "--results", str(results), "--reread", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert (
        "failed: mnist-5k/lfnet/protocol/prob-unet/seed-0" in err and "no weights" in err and "--methods prob-unet --seeds 0 --force" in err
    )
    assert np.array_equal(np.load(cell / "predictions.npz")["probs"], after)  # nothing written
