"""Bold only on a best the seed-aware test resolves (bench/report/tables.py `mark_best`), the field's set-metrics table
(`set_metrics_table`, family "set" of paired_tests.csv), and the run line every report figure carries (footer and
metadata)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from conftest import long_row
from test_report import markdown_rows, rows_for, write_results

from bench import study
from bench.evaluate import long_table
from bench.report import plots, render, stats, table_text, tables

PAPER = study.default()


def long_rows(offsets: dict[str, float], n_seeds: int = 3, n_cases: int = 12, seed: int = 0) -> pd.DataFrame:
    """toy/cm/protocol, DSC and bAHD against gt: each method's DSC 0.6 + its offset, noise 0.03 per seed and case."""
    rows = rows_for(
        "toy", "cm", "protocol", offsets, ["foreground"], {"gt": ["dsc", "bahd"]}, np.random.default_rng(seed), n_cases, n_seeds
    )
    return pd.DataFrame(rows, columns=long_table.COLUMNS)


def dsc_cells(table: pd.DataFrame, tmp_path, with_cases: bool = True) -> dict[str, str]:
    """Each method row's DSC cell as Table I's Markdown prints it, after `write_tables` with (or without) the per-case rows."""
    tmp_path.mkdir(exist_ok=True)
    tables.write_tables(PAPER, long_table.summarise(table), tmp_path, cases=table if with_cases else None)
    _, _, cells = markdown_rows(tmp_path / "table1_toy_cm_protocol_gt_foreground.md")
    return {label: row[0] for label, row in cells.items()}


def test_a_best_resolved_by_the_seed_aware_test_is_bold(tmp_path):
    table = long_rows({"mv-unet": -0.20, "cm-unet": -0.10, "lf-net": 0.0})
    cells = dsc_cells(table, tmp_path)
    assert cells["LF-Net"].startswith("**") and table_text.SHARED not in cells["LF-Net"]
    assert not any("**" in cells[m] or table_text.SHARED in cells[m] for m in ("MV-UNet", "CM-UNet"))
    rows = table[table["metric"] == "dsc"]
    tests = stats.leader_tests(rows, "lf-net", ["mv-unet", "cm-unet"])
    assert all(stats.resolved(r) for r in tests.values())  # what the bold rests on


def test_leaders_within_noise_share_a_mark_and_none_is_bold(tmp_path):
    """LF-Net's mean is the best, CM-UNet 0.5 points behind with 3-point noise: not resolved, so no bold; MV-UNet, 20
    points behind, is resolved and unmarked."""
    table = long_rows({"mv-unet": -0.20, "cm-unet": -0.005, "lf-net": 0.0}, seed=1)
    cells = dsc_cells(table, tmp_path)
    assert not any("**" in c for c in cells.values())
    assert cells["LF-Net"].endswith(f" {table_text.SHARED}") and cells["CM-UNet"].endswith(f" {table_text.SHARED}")
    assert table_text.SHARED not in cells["MV-UNet"]
    text = (tmp_path / "table1_toy_cm_protocol_gt_foreground.md").read_text()
    assert table_text.SHARED_NOTE in text
    assert r"$^{\approx}$" in (tmp_path / "table1_toy_cm_protocol_gt_foreground.tex").read_text()


def test_one_seed_or_no_per_case_rows_is_never_bold(tmp_path):
    one = long_rows({"mv-unet": -0.20, "lf-net": 0.0}, n_seeds=1)
    cells = dsc_cells(one, tmp_path / "one")
    assert not any("**" in c or table_text.SHARED in c for c in cells.values())  # one seed: nothing resolved, nothing marked
    three = long_rows({"mv-unet": -0.20, "lf-net": 0.0})
    cells = dsc_cells(three, tmp_path / "untested", with_cases=False)
    assert not any("**" in c or table_text.SHARED in c for c in cells.values())  # no per-case rows: nothing tested


def test_rows_equal_as_printed_are_never_resolved():
    summary = pd.DataFrame(
        {
            "method": ["mv-unet", "cm-unet", "lf-net"],
            "structure": "foreground",
            "metric": "dsc",
            "mean": [0.81234, 0.81231, 0.5],
            "std": [0.01, 0.03, 0.02],
        }
    )
    cases = pd.DataFrame(
        [
            {
                "method": m,
                "seed": s,
                "case": f"c{c}",
                "structure": "foreground",
                "metric": "dsc",
                "value": mean + 0.01 * (s - 1) + 0.001 * c,
            }
            for m, mean in zip(summary["method"], summary["mean"])
            for s in range(3)
            for c in range(8)
        ]
    )
    columns, names = tables.table_columns("table1", "foreground")[:1], ["mv-unet", "cm-unet", "lf-net"]
    table = tables.build_table(PAPER, summary, columns, names, "t", "Methods", "main", False, cases=cases)
    assert [(row[0].bold, row[0].shared) for row in table.rows] == [(False, True), (False, True), (False, False)]
    assert table_text.markdown_cell(table.rows[1][0]) == f"81.23 ± 3.00 {table_text.SHARED}"


# --------------------------------------------------------------------------- the field's set-metrics table

SET = {"ged": 0.5, "ged_unbiased": 0.3, "ged_floor": 0.04, "dice_match": 0.7, "dice_max": 0.8, "dice_soft": 0.75, "dice_personal": 0.7}


def field_rows(samples: dict[str, int], offsets: dict[str, float], n_seeds: int = 3, n_cases: int = 10) -> pd.DataFrame:
    """lidc/real/protocol: DSC and bAHD against the majority, every set metric against the rater set at each method's M."""
    rng = np.random.default_rng(5)
    rows = []
    for method, m in samples.items():
        for seed in range(n_seeds):
            for case in range(n_cases):
                shift = offsets[method] + rng.normal(0, 0.02)
                for metric, base in SET.items():
                    better = -shift if metric.startswith("ged") and metric != "ged_floor" else shift
                    value = base if metric == "ged_floor" else base + better
                    n = m if metric != "dice_personal" else (4 if method == "mh-unet" else 1)
                    rows.append(
                        long_row("lidc", "real", "protocol", method, seed, "raters", f"c{case}", "foreground", metric, value, n_samples=n)
                    )
                for metric, value in (("dsc", 0.6 + shift), ("bahd", 2 - shift)):
                    rows.append(long_row("lidc", "real", "protocol", method, seed, "majority", f"c{case}", "foreground", metric, value))
    return pd.DataFrame(rows, columns=long_table.COLUMNS)


def test_a_field_run_gets_the_set_metrics_table_with_m_the_floor_and_every_pair_tested(tmp_path):
    """Prob. U-Net and D-Persona drew 16 samples, MV-UNet has one prediction: a set-metrics table in report/ and in
    tables.md, each header with its M, the perfect sampler's floor under it, bold only where resolved; paired_tests.csv has
    every pair on every set metric (family "set"); no LF-Net ran, so the box plot's p is against the best mean."""
    table = field_rows({"prob-unet": 16, "d-persona": 16, "mv-unet": 1}, {"prob-unet": 0.0, "d-persona": -0.005, "mv-unet": -0.2})
    write_results(tmp_path / "results", table.to_records(index=False).tolist())
    written = render.render(PAPER, tmp_path / "results", tmp_path / "out")
    path = tmp_path / "out" / "set_metrics_lidc_real_protocol.md"
    assert path in written and (tmp_path / "out" / "set_metrics_lidc_real_protocol.tex") in written
    labels, header, cells = markdown_rows(path)
    assert labels == ["MV-UNet", "Prob. U-Net", "D-Persona"]
    assert header == [
        "Methods",
        "GED ↓ (M = 16)",
        "GED_u ↓ (M = 16)",
        "Dice_match (%) ↑ (M = 16)",
        "Dice_max (%) ↑ (M = 16)",
        "Dice_soft (%) ↑ (M = 16)",
        "Dice_personal (%) ↑ (M = 1)",
    ]
    text = path.read_text()
    assert "a perfect sampler of the raters scores GED 0.040 at this M" in text and "Run: budget not recorded; seeds per method: 3" in text
    assert "### set metrics" in (tmp_path / "out" / "tables.md").read_text()
    prob, persona = cells["Prob. U-Net"], cells["D-Persona"]
    assert not any(c.startswith("**") for c in prob + persona)  # half a point apart with 2-point noise: not resolved
    assert all(c.endswith(table_text.SHARED) for c in prob[:5] + persona[:5])

    tests = pd.read_csv(tmp_path / "out" / "paired_tests.csv")
    family = tests[tests["family"] == "set"]
    assert set(family["metric"]) == set(tables.SET_TABLE)
    pairs = {frozenset(p) for p in zip(family["reference_method"], family["method"])}
    assert pairs == {frozenset(p) for p in (("mv-unet", "prob-unet"), ("mv-unet", "d-persona"), ("prob-unet", "d-persona"))}
    ged = family[family["metric"] == "ged"].set_index("method")
    assert (ged["p_holm"] >= ged["p"]).all()  # Holm over the column's three pairs

    box = tmp_path / "out" / "boxplot_dsc_lidc_real_protocol_majority_foreground.png"
    assert box in written
    caption = plots.saved_caption(box)
    assert caption.startswith("Run: budget not recorded; seeds per method: 3")


def test_no_set_metrics_table_without_samples_or_per_rater_outputs(tmp_path):
    table = field_rows({"lf-net": 1, "mv-unet": 1}, {"lf-net": 0.0, "mv-unet": -0.1})
    summary = long_table.summarise(table)
    assert tables.set_metrics_table(PAPER, summary, table, "lidc", "real", "protocol") is None
    assert render.set_tests(PAPER, table).empty


# --------------------------------------------------------------------------- captions that travel


def test_every_report_table_and_figure_states_budget_seeds_and_pipeline_check(tmp_path):
    """A render of two methods, 2 seeds, with calibration bins and training logs: every table file and every figure's
    caption (drawn as its footer, stored in its PNG) says the budget, the seeds per method and that it is a pipeline check."""
    from test_report import calibration_bins

    from bench import files

    references = {"gt": ["dsc", "bahd"], "rater:a": ["dsc"]}  # each rater alone: the heat map
    rows = rows_for("toy", "cm", "protocol", {"mv-unet": -0.2, "lf-net": 0.0}, ["foreground"], references, np.random.default_rng(2), 12, 2)
    table = pd.DataFrame(rows, columns=long_table.COLUMNS)
    results = tmp_path / "results"
    write_results(results, table.to_records(index=False).tolist())
    files.write_table(results / "calibration.parquet", calibration_bins(["mv-unet", "lf-net"]))
    logs = pd.DataFrame(
        [
            {
                "dataset": "toy",
                "raters": "cm",
                "noise": "protocol",
                "method": m,
                "seed": s,
                "stage": "train",
                "event": "eval",
                "step": step,
                "val_loss": 1.0 / step,
                "diagnostic_gt_dsc": 50.0 + step,
            }
            for m in ("mv-unet", "lf-net")
            for s in range(2)
            for step in (10, 20, 30)
        ]
    )
    files.write_table(results / "train_logs.parquet", logs)
    written = render.render(PAPER, results, tmp_path / "out")
    run = "seeds per method: 2; pipeline check, not a verdict: fewer than 3 seeds (MV-UNet 2, LF-Net 2)"
    figures = [p for p in written if p.suffix == ".png"]
    assert {p.name.split("_")[0] for p in figures} == {"boxplot", "rater", "reliability", "learning", "diagnostic"}
    for path in figures:
        assert "Run: budget not recorded; " + run in plots.saved_caption(path), path.name
    for path in written:
        if path.suffix in (".md", ".tex"):
            assert run in path.read_text(), path.name
    no_tests = pd.DataFrame(columns=["method", "p_holm"])
    fig = plots.caveat(plots.boxplot_figure(PAPER, table, no_tests, ["mv-unet", "lf-net"], ["mv-unet", "lf-net"], "t"), "Run: budget quick")
    assert plots.caption(fig) == "Run: budget quick"


def test_box_plot_axis_spans_the_data_not_a_constant():
    """Three methods with DSC 0 everywhere (empty predictions): the axis is a few points around 0, not ± 0.04."""
    cases = pd.DataFrame({"method": ["mv-unet", "cm-unet", "lf-net"] * 4, "case": np.repeat(range(4), 3), "value": 0.0})
    names = ["mv-unet", "cm-unet", "lf-net"]
    fig = plots.boxplot_figure(PAPER, cases, pd.DataFrame(columns=["method", "p_holm"]), names, names, "t")
    low, high = fig.axes[0].get_ylim()
    assert low < 0 < high and high - low >= 3


def test_scoring_samples_announces_itself_in_one_line(capsys):
    """Scoring a sampler's draws takes up to a minute a cell: one line on stderr says what is being scored."""
    from types import SimpleNamespace

    from bench.evaluate import scoring

    outputs = {"samples": np.zeros((5, 16, 4, 4), np.uint8), "rater_outputs": np.zeros((5, 3, 4, 4), np.uint8)}
    line = scoring.scoring_line(outputs, SimpleNamespace(n=5, n_raters=3))
    assert line == "scoring 16 samples and 3 per-rater outputs × 5 test images against 3 raters (set metrics)…"
