"""One descriptor per metric (bench/evaluate/metrics.py): registering a metric is enough to score it, table it and test it."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from conftest import REPO

from bench import study
from bench.cli.run import format_table
from bench.evaluate import long_table, metrics
from bench.evaluate.scoring import score_predictions
from bench.report import stats, table_text, tables

PAPER = study.default()


@pytest.fixture
def toy_metric():
    """The worked example of docs/architecture.md: the predicted foreground share, a hard metric shown in Table I."""
    toy = metrics.register(
        metrics.Metric("fg_share", "hard", lambda p: p.mask.mean(axis=(1, 2)), False, 100, 1, "fg share", "fg share", ("table1",))
    )
    yield toy
    metrics.METRICS.pop(toy.name)


def test_a_registered_metric_is_scored_tabled_and_tested(toy_metric, tiny_data):
    data = tiny_data
    rng = np.random.default_rng(0)
    p = rng.random((data.n, 1, 16, 16)).astype(np.float32)
    rows, _ = score_predictions(np.concatenate([1 - p, p], axis=1), data)
    share = rows[rows["metric"] == "fg_share"]
    assert set(share["reference"]) == {"gt", "majority", "staple", "rater:a", "rater:b", "rater:c"}  # every hard reference
    gt_rows = share[share["reference"] == "gt"]
    np.testing.assert_allclose(gt_rows["value"], (p[:, 0] > 0.5).mean(axis=(1, 2)))
    assert gt_rows["tp"].notna().all()  # a hard metric's rows carry the pair's counts

    long = pd.concat(
        [rows.assign(dataset="toy", raters="r", noise="protocol", method=m, seed=s) for m in ("mv-unet", "lf-net") for s in (0, 1)]
    )
    summary = long_table.summarise(long[long_table.COLUMNS])
    part = summary[summary["reference"] == "gt"]
    (stem, table), *_ = tables.group_tables(PAPER, part, ("toy", "r", "protocol", "gt"))
    markdown = table_text.to_markdown(table)
    assert "fg share (%) ↓" in markdown.splitlines()[2] and r"fg share (\%)~$\downarrow$" in table_text.to_latex(table)
    printed = format_table(PAPER, part, ["mv-unet", "lf-net"])
    assert "fg share (%) ↓" in printed
    tests = stats.paired_tests(PAPER, long, "fg_share", "foreground", "lf-net", metrics.higher_is_better("fg_share"))
    assert len(tests) and not metrics.higher_is_better("fg_share")


def test_the_readme_metric_table_lists_every_metric():
    text = (REPO / "README.md").read_text()
    section = text[text.index("| metric | reference |") :].split("\n\n")[0]
    rows = re.findall(r"^\| `([a-z0-9_]+)` \| (.+?) \| ([↑↓]) \|", section, re.M)
    assert [name for name, _, _ in rows] == list(metrics.METRICS)
    for name, references, arrow in rows:
        m = metrics.get(name)
        assert (arrow == "↑") == m.higher_is_better, name
        assert [r.strip("` ") for r in references.split(",")] == list(m.references), name


def test_headers_are_the_papers():
    assert metrics.get("dsc").header() == "DSC (%) ↑" and metrics.get("bahd").header(latex=True) == r"bAHD~$\downarrow$"
    assert metrics.get("soft_dice").header("disc", latex=True) == r"DSC$_\mathrm{disc}^\mathrm{soft}$ (\%)~$\uparrow$"
    assert metrics.get("dice_match").header() == "Dice_match (%) ↑" and metrics.get("soft_iou").header("cup") == "soft IoU cup (%) ↑"
    with pytest.raises(ValueError, match="kind must be one of"):
        metrics.Metric("x", "fuzzy", lambda p: p, True)
    with pytest.raises(ValueError, match="registered twice"):
        metrics.register(metrics.get("dsc"))
