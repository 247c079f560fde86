"""Every dataset adapter end to end through the CLI (in-process, `conftest.run_bench`), on fixtures written in its exact
on-disk format."""

import json

import pandas as pd
import pytest
from conftest import run_bench
from fixtures.make_choledoch import make_choledoch
from fixtures.make_cm_folder import make_cm_folder
from fixtures.make_lidc import make_lidc_crops, make_lidc_pickle
from fixtures.make_ms_lesion import make_ms_lesion
from fixtures.make_riga import make_mrnet, make_raw

import methods
from bench import study

FIXTURES = {
    "ms-lesion": make_ms_lesion,
    "ms-lesion-real": make_ms_lesion,
    "choledoch": lambda root: make_choledoch(root, "spectr"),
    "lidc": make_lidc_crops,
    "lidc-pickle": make_lidc_pickle,
    "riga": make_raw,
    "riga-mrnet": make_mrnet,
    "cm-folder": make_cm_folder,
}


def run_on_fixture(tmp_path, name: str, method_list: str):
    FIXTURES[name](tmp_path / "data")
    dataset = name.removesuffix("-pickle").removesuffix("-mrnet")
    out = run_bench(
        "run",
        "--dataset",
        dataset,
        "--data-root",
        str(tmp_path / "data"),
        "--methods",
        method_list,
        "--seeds",
        "0",
        "--max-steps",
        "2",
        "--train-size",
        "4",
        "--results",
        str(tmp_path / "r"),
        "--no-progress",
        "--backend",
        "sequential",
    )
    assert out.returncode == 0, out.stderr[-2000:]
    check_degenerate_flags(tmp_path / "r", out.stdout)
    return pd.read_parquet(tmp_path / "r" / "metrics.parquet")


def check_degenerate_flags(results, stdout: str) -> None:
    """Every cell records how its validation predictions degenerate, and a flagged cell's row in the printed table says so."""
    for path in results.glob("runs/*/*/*/*/*/manifest.json"):
        info = json.loads(path.read_text())
        record = info["degenerate"]
        assert 0 <= record["empty_share"] <= 1 and 0 <= record["full_share"] <= 1 and record["flag"] in ("", "empty", "full")
        row = next(line for line in stdout.splitlines() if line.startswith(info["cell"]["method"] + " "))
        assert "stopped by" in stdout and "cap" in row
        if record["flag"]:
            assert f"{record['flag']} 1/1" in row, row


@pytest.mark.parametrize("name", list(FIXTURES))
def test_fusion_baselines_run_on_every_adapter(tmp_path, name):
    table = run_on_fixture(tmp_path, name, "mv-unet,qmv-unet")
    assert set(table["method"]) == {"mv-unet", "qmv-unet"}
    assert table["value"].notna().any()
    if name.startswith("riga"):
        assert {"disc", "cup"} == set(table["structure"]) and {"soft_dice", "soft_iou"} <= set(table["metric"])
    headline = {r for r in table["reference"] if not r.startswith(("rater:", "rater-"))}
    if (
        name.split("-")[0] in ("lidc", "riga") or name == "ms-lesion-real"
    ):  # no ground truth: the fused raters and the rater set, never "gt"
        assert headline == ({"majority", "raters"} if name.startswith("riga") else {"majority", "staple", "raters"})
    else:
        assert {"gt", "majority", "raters"} <= headline
    if name == "lidc":
        check_lidc_report(tmp_path / "r")


def check_lidc_report(results) -> None:
    """Issue 13's LIDC check: Table II (DSC, bAHD, GED, Dice_match) and a method × rater heat map from a fixture run."""
    out = run_bench("report", "--results", str(results))
    assert out.returncode == 0, out.stderr
    report = results / "report"
    table = (report / "table2_lidc_real_protocol_majority_foreground.md").read_text()
    assert all(h in table for h in ("DSC (%) ↑", "bAHD ↓", "GED ↓", "Dice_match (%) ↑")) and "MV-UNet" in table
    assert (report / "rater_dsc_lidc_real_protocol_foreground.png").is_file()
    assert not list(report.glob("table1_lidc*"))  # no ground truth: no Table I


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ms-lesion", "lidc", "riga", "choledoch"])
def test_every_method_runs_on_every_adapter(tmp_path, name):
    binary_only = {"staple-unet", "lf-net-sll-staple"} if name == "riga" else set()
    names = [m for m in [*methods.method_names(), study.default().oracle] if m not in binary_only]
    if name in ("lidc", "riga"):
        names.remove(study.default().oracle)  # no ground truth to train the oracle on
    table = run_on_fixture(tmp_path, name, ",".join(names))
    assert set(table["method"]) == set(names)
