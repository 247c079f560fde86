"""bench.report.render: tables and figures from a small synthetic results folder (no training)."""

import argparse
import re

import numpy as np
import pandas as pd
import pytest
from conftest import long_row
from matplotlib.image import imread
from test_reproduction import write_cell

from bench import files, store, study
from bench.cli import report as cli_report
from bench.evaluate import long_table
from bench.report import plots, render, rows, table_notes, table_text, tables

PAPER = study.default()

# (method, DSC offset): lf-net best among the compared methods, the oracle above it (it must not be bolded).
TOY_METHODS = {"mv-unet": -0.20, "cm-unet": -0.10, "lf-net": 0.0, "oracle": 0.05}
ABLATIONS = {"lf-net-s": -0.20, "lf-net-s-tv": -0.10, "lf-net-no-ce": -0.02}
EYE_METHODS = {"mv-unet": -0.10, "mr-net": -0.05, "lf-net": 0.0}  # RIGA has no ground truth: no oracle
NOISE_SHIFT = {"0.45": 0.10, "protocol": 0.0}  # DSC lost at each noise level
AVERAGE_DSC = {"0.45": 0.46, "protocol": 0.50}  # the realised Average DSC of the rater pool per noise level
# DSC shift per reference, so that tables against different references differ
REFERENCE_SHIFT = {"gt": 0.0, "majority": -0.03, "staple": -0.06, "rater:a": -0.10, "rater:b": 0.02}
ALL_REFERENCES = {  # what bench.evaluate.scoring writes for a binary dataset with ground truth
    "gt": ["dsc", "bahd", "ece"],
    "majority": ["dsc", "bahd"],
    "staple": ["dsc", "bahd"],
    "rater:a": ["dsc", "bahd"],
    "rater:b": ["dsc", "bahd"],
    "raters": ["ged", "dice_match", "dice_max"],
    "rater-mean": ["soft_dice", "soft_iou", "ece"],
}


def metric_values(dsc: float) -> dict[str, float]:
    return {
        "dsc": dsc,
        "bahd": 5 * (1 - dsc),
        "soft_dice": dsc,
        "soft_iou": dsc / (2 - dsc),
        "ged": 1 - dsc,
        "dice_match": dsc,
        "dice_max": min(1.0, dsc + 0.05),
        "ece": 0.1 * (1 - dsc),
    }


def rows_for(dataset, raters, noise, methods, structures, references, rng, n_cases=12, n_seeds=3):
    """Long rows (bench.evaluate.long_table.COLUMNS) for every method × seed × case × structure × reference × metric.

    `references` maps a reference to its metrics; counts are left at 0 and the bAHD sums at NaN.
    """
    rows = []
    for method, offset in methods.items():
        for seed in range(n_seeds):
            for case in range(n_cases):
                for structure in structures:
                    dsc = float(np.clip(0.6 + offset - NOISE_SHIFT.get(noise, 0.0) + rng.normal(0, 0.03), 0, 1))
                    for reference, metrics in references.items():
                        values = metric_values(float(np.clip(dsc + REFERENCE_SHIFT.get(reference, 0.0), 0, 1)))
                        for metric in metrics:
                            rows.append(
                                long_row(dataset, raters, noise, method, seed, reference, f"c{case:02d}", structure, metric, values[metric])
                            )
    return rows


def write_results(folder, rows, averages=None):
    """metrics.parquet and summary.csv as `store.collect` writes them; returns the long table."""
    table = pd.DataFrame(rows, columns=long_table.COLUMNS)
    files.write_table(folder / "metrics.parquet", table)
    files.write_table(folder / "summary.csv", long_table.summarise(table, averages))
    return table


def make_results(folder, noise_levels=("0.45", "protocol")):
    """toy (rater style cm): 1 structure, dsc + bahd against gt at the given noise levels, ablations at the last level;
    riga (real raters, no GT): disc/cup against the majority, the rater set (GED, Dice_match) and the rater mean (soft metrics)."""
    rng = np.random.default_rng(0)
    rows = []
    for noise in noise_levels:
        rows += rows_for("toy", "cm", noise, TOY_METHODS, ["foreground"], {"gt": ["dsc", "bahd"]}, rng)
    rows += rows_for("toy", "cm", noise_levels[-1], ABLATIONS, ["foreground"], {"gt": ["dsc", "bahd"]}, rng)
    eye = {"majority": ["dsc", "bahd"], "raters": ["ged", "dice_match", "dice_max"], "rater-mean": ["soft_dice", "soft_iou"]}
    rows += rows_for("riga", "real", "protocol", EYE_METHODS, ["disc", "cup"], eye, rng)
    averages = pd.DataFrame({"dataset": "toy", "raters": "cm", "noise": list(noise_levels), "dsc": [AVERAGE_DSC[n] for n in noise_levels]})
    return write_results(folder, rows, averages)


def markdown_rows(path):
    """(labels, header, cells) of the Markdown table in `path`."""
    lines = [line for line in path.read_text().splitlines() if line.startswith("|")]
    split = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    header, body = split[0], split[2:]
    return [r[0] for r in body], header, {r[0]: r[1:] for r in body}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    make_results(root / "results")
    written = render.render(PAPER, root / "results", root / "out")
    return root, written


def test_render_writes_every_expected_file(rendered):
    root, written = rendered
    stems = [
        "table1_toy_cm_0.45_gt_foreground",
        "table1_toy_cm_protocol_gt_foreground",
        "table4_toy_cm_protocol_gt",
        "table2_riga_real_protocol_majority_disc",
        "table2_riga_real_protocol_majority_cup",
        "table3_riga_real_protocol",
    ]
    figures = [
        "boxplot_dsc_toy_cm_0.45_gt_foreground",
        "boxplot_dsc_toy_cm_protocol_gt_foreground",
        "boxplot_dsc_riga_real_protocol_majority_disc",
        "boxplot_dsc_riga_real_protocol_majority_cup",
        "noise_dsc_toy_cm_gt_foreground",
    ]
    expected = {f"{s}.{ext}" for s in stems for ext in ("md", "tex")} | {f"{f}.{ext}" for f in figures for ext in ("png", "pdf")}
    expected |= {"tables.md", "paired_tests.csv"}
    assert {p.name for p in written} == expected
    assert {p.name for p in (root / "out").iterdir()} == expected
    assert written == sorted(written)


def test_pngs_decode_and_pdfs_are_pdfs(rendered):
    _, written = rendered
    for path in written:
        if path.suffix == ".png":
            image = imread(path)
            assert image.shape[0] > 300 and image.shape[1] > 400, path
            assert image[..., :3].std() > 0.05, f"{path} looks blank"
        if path.suffix == ".pdf":
            assert path.read_bytes().startswith(b"%PDF") and path.stat().st_size > 5000


def summary_mean(summary, **where):
    rows = summary
    for key, value in where.items():
        rows = rows[rows[key] == value]
    (row,) = rows.to_dict("records")
    return row


def test_table1_rows_columns_and_bold(rendered):
    root, _ = rendered
    path = root / "out" / "table1_toy_cm_protocol_gt_foreground.md"
    labels, header, cells = markdown_rows(path)
    assert labels == ["*Average*", "MV-UNet", "CM-UNet", "LF-Net", "*Oracle*"]  # no ablation rows in Table I
    assert header == ["Methods", "DSC (%) ↑", "bAHD ↓"]
    assert cells["*Average*"] == ["50.00", "N/A"]  # the pool's Average DSC at the protocol, no std, no bAHD
    assert all(c.startswith("**") for c in cells["LF-Net"])  # best DSC and best (lowest) bAHD
    assert not any("**" in c for label in ("*Oracle*", "*Average*", "MV-UNet", "CM-UNet") for c in cells[label])
    assert "toy (raters cm, noise protocol; against gt, foreground)" in path.read_text().splitlines()[0]

    summary = store.read_summary(root / "results")
    lf = summary_mean(summary, dataset="toy", raters="cm", noise="protocol", reference="gt", method="lf-net", metric="dsc")
    assert cells["LF-Net"][0] == f"**{lf['mean'] * 100:.2f} ± {lf['std'] * 100:.2f}**"
    _, _, harder = markdown_rows(root / "out" / "table1_toy_cm_0.45_gt_foreground.md")
    assert harder["*Average*"] == ["46.00", "N/A"]  # each noise level gets its own Average row
    lf = summary_mean(summary, dataset="toy", raters="cm", noise="0.45", reference="gt", method="lf-net", metric="dsc")
    assert harder["LF-Net"][0] == f"**{lf['mean'] * 100:.2f} ± {lf['std'] * 100:.2f}**"


def test_latex_tables(rendered):
    root, _ = rendered
    tex = (root / "out" / "table1_toy_cm_protocol_gt_foreground.tex").read_text()
    assert r"\begin{tabular}{lcc}" in tex and r"\end{tabular}" in tex
    body = [line for line in tex.splitlines() if line.endswith(r"\\")]
    assert len(body) == 1 + 5 + 1  # header + Average, 3 methods, Oracle + the run line under the table
    assert "Run: budget not recorded; seeds per method: 3" in body[-1] and tex.splitlines()[1].startswith("% Run: budget")
    body = body[:-1]
    assert body[1].startswith(r"\emph{Average}") and body[-1].startswith(r"\emph{Oracle}")
    assert re.search(r"LF-Net & \\textbf\{[\d.]+\} \$\\pm\$ \\textbf\{[\d.]+\}", tex)
    assert tex.count(r"\begin{") == tex.count(r"\end{")
    assert "±" not in tex and "↑" not in tex  # Unicode mapped to math mode


def test_table2_table3_and_table4(rendered):
    root, _ = rendered
    labels, header, cells = markdown_rows(root / "out" / "table2_riga_real_protocol_majority_disc.md")
    assert header == ["Methods", "DSC (%) ↑", "bAHD ↓", "GED ↓", "Dice_match (%) ↑"]
    assert labels == ["MV-UNet", "MR-Net", "LF-Net"]  # no Average row without ground truth
    assert all(c.startswith("**") for c in cells["LF-Net"])

    labels, header, cells = markdown_rows(root / "out" / "table3_riga_real_protocol.md")
    assert header == ["Methods", "soft DSC disc (%) ↑", "soft IoU disc (%) ↑", "soft DSC cup (%) ↑", "soft IoU cup (%) ↑"]
    assert labels == ["MV-UNet", "MR-Net", "LF-Net"]
    assert all(c.startswith("**") for c in cells["LF-Net"])

    labels, header, cells = markdown_rows(root / "out" / "table4_toy_cm_protocol_gt.md")
    assert labels == ["S", "S+TV", "S+TV+SLS+RCLS", "‡"]
    assert header == ["Variant", "DSC foreground (%) ↑"]
    # S+TV+SLS+RCLS is 2 points below the full model (‡) with 3-point noise: the lead is not resolved, both share the mark
    assert cells["S+TV+SLS+RCLS"][0].endswith(table_text.SHARED) and cells["‡"][0].endswith(table_text.SHARED)
    assert not any("**" in c for row in cells.values() for c in row) and not cells["S"][0].endswith(table_text.SHARED)
    assert r"$\ddagger$" in (root / "out" / "table4_toy_cm_protocol_gt.tex").read_text()
    assert (root / "out" / "tables.md").read_text().count("### ") == 6


def test_paired_tests_csv(rendered):
    root, _ = rendered
    tests = pd.read_csv(root / "out" / "paired_tests.csv", dtype={"noise": str})
    main = tests[(tests["family"] == "main") & (tests["dataset"] == "toy") & (tests["metric"] == "dsc") & (tests["noise"] == "protocol")]
    assert set(main["method"]) == {"mv-unet", "cm-unet"} and set(main["reference"]) == {"gt"}
    assert (main["n"] == 12).all() and (main["p_holm"] < 0.05).all()
    ablation = tests[(tests["family"] == "ablation") & (tests["metric"] == "dsc")]
    assert set(ablation["method"]) == {"lf-net-s", "lf-net-s-tv", "lf-net-no-ce"}
    riga = tests[tests["dataset"] == "riga"]
    assert set(zip(riga["reference"], riga["metric"])) == {
        ("majority", "dsc"),
        ("majority", "bahd"),
        ("raters", "ged"),
        ("raters", "dice_match"),
        ("raters", "dice_max"),
        ("rater-mean", "soft_dice"),
        ("rater-mean", "soft_iou"),
    }


def test_noise_figure_x_is_the_realised_average_dsc(rendered):
    root, _ = rendered
    summary = store.read_summary(root / "results")
    dsc = summary[(summary["dataset"] == "toy") & (summary["metric"] == "dsc")]
    runs = dsc[(dsc["reference"] == "gt") & (dsc["method"] == "lf-net")]
    averages = dsc[dsc["method"] == rows.AVERAGE]
    # a third level whose realised Average DSC (0.61) sorts unlike its label: x must come from the label's own average
    runs = pd.concat([runs, runs.iloc[[0]].assign(noise="0.6", mean=0.7)], ignore_index=True)
    averages = pd.concat([averages, averages.iloc[[0]].assign(noise="0.6", mean=0.61)], ignore_index=True)
    fig = plots.noise_figure(PAPER, runs, averages, ["lf-net"], ["lf-net"], "t")
    (ax,) = fig.axes
    (line,) = [c.lines[0] for c in ax.containers]
    by_noise = runs.set_index("noise")["mean"]
    order = ["0.45", "protocol", "0.6"]  # by realised Average DSC: 46, 50, 61 %
    np.testing.assert_allclose(np.asarray(line.get_xdata(), dtype=float), [100 * AVERAGE_DSC["0.45"], 100 * AVERAGE_DSC["protocol"], 61])
    np.testing.assert_allclose(np.asarray(line.get_ydata(), dtype=float), [100 * by_noise[n] for n in order])
    assert ax.get_xlabel().startswith("realised Average DSC")


def test_render_is_deterministic(rendered, tmp_path):
    root, written = rendered
    again = render.render(PAPER, root / "results", tmp_path)
    assert [p.name for p in again] == [p.name for p in written]
    for a, b in zip(written, again):
        assert a.read_bytes() == b.read_bytes(), a.name


def calibration_bins(methods, references=("gt", "rater-mean"), n_bins=5, n_seeds=2) -> pd.DataFrame:
    """Reliability bins (bench.evaluate.long_table.CALIBRATION) of toy/cm/protocol: each method over-confident by its own margin."""
    rows = []
    for k, method in enumerate(methods):
        for seed in range(n_seeds):
            for reference in references:
                for b in range(n_bins):
                    confidence = (b + 0.5) / n_bins
                    rows.append(
                        (
                            "toy",
                            "cm",
                            "protocol",
                            method,
                            seed,
                            reference,
                            "foreground",
                            b,
                            100 + 10 * b,
                            confidence,
                            max(0.0, confidence - 0.05 * (k + 1)),
                        )
                    )
    return pd.DataFrame(rows, columns=long_table.CALIBRATION)


def test_render_every_reference_rater_heat_map_and_reliability(tmp_path):
    """A cell scored against every reference: Table I per headline reference, the rater heat map, the reliability diagram."""
    rng = np.random.default_rng(1)
    methods_here = {"mv-unet": -0.20, "lf-net": 0.0, "oracle": 0.05}
    rows = rows_for("toy", "cm", "protocol", methods_here, ["foreground"], ALL_REFERENCES, rng, n_cases=8, n_seeds=2)
    averages = pd.DataFrame({"dataset": ["toy"], "raters": ["cm"], "noise": ["protocol"], "dsc": [0.5]})
    results = tmp_path / "results"
    write_results(results, rows, averages)

    without = {p.name for p in render.render(PAPER, results, tmp_path / "without")}
    files.write_table(results / "calibration.parquet", calibration_bins(list(methods_here)))
    written = render.render(PAPER, results, tmp_path / "out")
    names = {p.name for p in written}
    stems = [f"table1_toy_cm_protocol_{r}_foreground" for r in ("gt", "majority", "staple")]
    figures = ["boxplot_dsc_toy_cm_protocol_gt_foreground", "rater_dsc_toy_cm_protocol_foreground"]
    expected = {f"{s}.{ext}" for s in stems for ext in ("md", "tex")} | {f"{f}.{ext}" for f in figures for ext in ("png", "pdf")}
    expected |= {"tables.md", "paired_tests.csv"}
    assert without == expected  # no table per rater, none against the rater set or mean alone; one box plot, against gt
    assert names == expected | {"reliability_toy_cm_protocol_foreground.png", "reliability_toy_cm_protocol_foreground.pdf"}
    for path in written:
        if path.name.startswith(("rater_dsc_", "reliability_")) and path.suffix == ".png":
            assert imread(path)[..., :3].std() > 0.05, f"{path} looks blank"

    summary = store.read_summary(results)
    shown = {}
    for reference in ("gt", "majority", "staple"):
        path = tmp_path / "out" / f"table1_toy_cm_protocol_{reference}_foreground.md"
        labels, header, cells = markdown_rows(path)
        assert f"against {reference}, foreground" in path.read_text().splitlines()[0]
        assert header == ["Methods", "DSC (%) ↑", "bAHD ↓"]
        average = ["*Average*"] if reference == "gt" else []  # the raters' Average DSC is against GT: only in the gt table
        assert labels == [*average, "MV-UNet", "LF-Net", "*Oracle*"], reference
        for method, label in (("lf-net", "LF-Net"), ("mv-unet", "MV-UNet")):
            row = summary_mean(summary, dataset="toy", reference=reference, method=method, metric="dsc")
            assert cells[label][0].strip("*") == f"{row['mean'] * 100:.2f} ± {row['std'] * 100:.2f}", (reference, method)
        shown[reference] = cells["LF-Net"][0]
    assert len(set(shown.values())) == 3  # each table shows its own reference's values

    tests = pd.read_csv(tmp_path / "out" / "paired_tests.csv")
    assert set(tests["reference"]) == {"gt", "majority", "staple", "raters", "rater-mean"}  # not against each rater alone
    assert set(tests.loc[tests["reference"] == "gt", "metric"]) == {"dsc", "bahd", "ece"}


def test_the_average_row_is_the_raters_against_gt_and_only_in_the_gt_table(tmp_path):
    """The Average row is the raters' mean DSC against GT on the training split (`store.rater_averages`, from each cell's
    label statistics); no cell records the raters against the majority or STAPLE, so the tables against those references
    carry no Average row rather than the GT value under their header (issue 76)."""
    references = {r: ["dsc", "bahd"] for r in ("gt", "majority", "staple")}
    long = rows_for("toy", "cm", "protocol", {"mv-unet": -0.20, "lf-net": 0.0}, ["foreground"], references, np.random.default_rng(2), 6, 2)
    averages = pd.DataFrame({"dataset": ["toy"], "raters": ["cm"], "noise": ["protocol"], "dsc": [0.5]})
    summary = long_table.summarise(pd.DataFrame(long, columns=long_table.COLUMNS), averages)
    assert set(summary.loc[summary["method"] == rows.AVERAGE, "reference"]) == {"gt"}
    tables.write_tables(PAPER, summary, tmp_path)
    for reference in ("gt", "majority", "staple"):
        labels, _, cells = markdown_rows(tmp_path / f"table1_toy_cm_protocol_{reference}_foreground.md")
        if reference == "gt":
            assert labels == ["*Average*", "MV-UNet", "LF-Net"] and cells["*Average*"] == ["50.00", "N/A"]
        else:
            assert labels == ["MV-UNet", "LF-Net"], (reference, labels)


def test_a_dataset_without_gt_gets_table2_with_the_rater_set_metrics(tmp_path):
    rng = np.random.default_rng(2)
    references = {r: m for r, m in ALL_REFERENCES.items() if r != "gt"}
    rows = rows_for("lidc", "real", "protocol", {"mv-unet": -0.2, "lf-net": 0.0}, ["foreground"], references, rng, n_cases=8, n_seeds=2)
    table = write_results(tmp_path / "results", rows)
    written = render.render(PAPER, tmp_path / "results", tmp_path / "out")
    tables_written = {p.name for p in written if p.name.startswith("table") and p.name != "tables.md"}
    stems = [f"table2_lidc_real_protocol_{r}_foreground" for r in ("majority", "staple")]
    assert tables_written == {f"{s}.{ext}" for s in stems for ext in ("md", "tex")}  # no Table I, no Table III (no soft metrics)
    assert "boxplot_dsc_lidc_real_protocol_majority_foreground.png" in {p.name for p in written}  # the default reference

    summary = store.read_summary(tmp_path / "results")
    set_cells = []
    for reference in ("majority", "staple"):
        labels, header, cells = markdown_rows(tmp_path / "out" / f"table2_lidc_real_protocol_{reference}_foreground.md")
        assert header == ["Methods", "DSC (%) ↑", "bAHD ↓", "GED ↓", "Dice_match (%) ↑"]
        assert labels == ["MV-UNet", "LF-Net"]  # no Average (no GT), no Oracle
        dsc = summary_mean(summary, reference=reference, method="lf-net", metric="dsc")
        ged = summary_mean(summary, reference="raters", method="lf-net", metric="ged")
        match = summary_mean(summary, reference="raters", method="lf-net", metric="dice_match")
        assert cells["LF-Net"][0] == f"**{dsc['mean'] * 100:.2f} ± {dsc['std'] * 100:.2f}**"
        assert cells["LF-Net"][2] == f"**{ged['mean']:.3f} ± {ged['std']:.3f}**"  # lowest GED is best
        assert cells["LF-Net"][3] == f"**{match['mean'] * 100:.2f} ± {match['std'] * 100:.2f}**"
        assert not any("**" in c for c in cells["MV-UNet"])
        set_cells.append(cells["LF-Net"][2:])
    assert set_cells[0] == set_cells[1]  # GED and Dice_match are against the rater set, whatever the headline reference
    tex = (tmp_path / "out" / "table2_lidc_real_protocol_majority_foreground.tex").read_text()
    assert r"\begin{tabular}{lcccc}" in tex and r"Dice$_\mathrm{match}$" in tex and r"GED~$\downarrow$" in tex
    assert set(table["reference"]) >= {"raters", "majority"}


def test_render_with_parameter_cells_only_writes_no_table_or_figure(tmp_path):
    """A results folder of one parameter sweep (`run --set lf-net.beta=2,3`): such cells belong to the parameter figures, so the
    report has no row for them anywhere, and no per-rater heat map or reliability diagram of nobody either."""
    rng = np.random.default_rng(3)
    cells = {"lf-net@beta=2": 0.0, "lf-net@beta=3": 0.01}
    write_results(tmp_path / "results", rows_for("toy", "cm", "protocol", cells, ["foreground"], ALL_REFERENCES, rng, n_cases=4, n_seeds=1))
    files.write_table(tmp_path / "results" / "calibration.parquet", calibration_bins(list(cells), n_seeds=1))
    written = render.render(PAPER, tmp_path / "results", tmp_path / "out")
    assert [p.name for p in written] == ["paired_tests.csv"]
    assert pd.read_csv(written[0]).empty  # no LF-Net to test against


def test_every_table_file_states_budget_seeds_and_pipeline_check_and_one_seed_is_never_bold(tmp_path):
    """One seed per method under the quick budget: every table file says so under its title, and nothing is bold."""
    summary = pd.DataFrame(
        {
            "dataset": "toy",
            "raters": "cm",
            "noise": "protocol",
            "reference": "gt",
            "method": ["mv-unet", "lf-net", "oracle", "lf-net-s"],
            "structure": "foreground",
            "metric": "dsc",
            "mean": [0.95, 0.80, 0.99, 0.7],
            "std": np.nan,
            "n_seeds": 1,
            "n_cases": 10,
        }
    )
    cells = pd.DataFrame(
        {
            "dataset": "toy",
            "raters": "cm",
            "noise": "protocol",
            "method": ["mv-unet", "lf-net", "oracle", "lf-net-s"],
            "seed": 0,
            "budget": "quick",
            "max_steps": 20,
            "train_size": None,
            "test_size": None,
        }
    )
    written = tables.write_tables(PAPER, summary, tmp_path, cells=cells)
    run = "Run: budget quick; seeds per method: 1; pipeline check, not a verdict: budget quick, --max-steps 20, fewer than 3 seeds ("
    assert {p.name for p in written} >= {"tables.md", "table1_toy_cm_protocol_gt_foreground.md", "table4_toy_cm_protocol_gt.tex"}
    for path in written:
        text = path.read_text()
        assert text.count(run) == (2 if path.suffix == ".tex" else text.count("### ")) > 0, path.name  # .tex: header and footnote
        assert "**" not in text and r"\textbf" not in text, path.name
    (tmp_path / "plain").mkdir()
    plain = tables.write_tables(PAPER, summary, tmp_path / "plain")
    assert all(
        "Run: budget not recorded; seeds per method: 1; pipeline check, not a verdict: fewer than 3 seeds" in p.read_text() for p in plain
    )


def test_the_run_line_names_a_row_whose_seeds_trained_on_other_cpus_or_precisions():
    """A seed sd pooled over a bf16 seed and an fp32 seed is said so, with each setup; a row trained one way is not named."""
    bf16, fp32 = "cpu avx512_bf16, bf16, 1 thread", "cpu avx2, fp32, 1 thread"
    cells = pd.DataFrame(
        {
            "dataset": "toy",
            "method": ["mv-unet"] * 3 + ["lf-net"] * 3 + ["qmv-unet"] * 3,
            "seed": [0, 1, 2] * 3,
            "budget": "paper",
            "setup": [bf16, bf16, fp32, bf16, bf16, bf16, bf16, fp32, fp32],
            **{k: None for k in table_notes.OPTIONS},
        }
    )
    line = table_notes.run_text({"MV-UNet": 3, "LF-Net": 3, "QMV-UNet": 3}, cells)
    assert line.endswith(f"not a pipeline check; seeds trained on other CPUs or precisions: mv-unet, qmv-unet ({bf16} / {fp32})"), line
    assert table_notes.run_text({"MV-UNet": 3, "LF-Net": 3, "QMV-UNet": 3}, cells.assign(setup=bf16)).endswith("not a pipeline check")


def parse_report(*argv):
    parser = argparse.ArgumentParser()
    cli_report.add_parser(parser.add_subparsers(dest="verb"))
    return parser.parse_args(["report", *argv], argparse.Namespace(study=PAPER))


def test_cli_defaults_and_errors(tmp_path, capsys):
    from bench.cli.options import UsageError

    args = parse_report()
    assert (args.results, args.out, args.func) == ("results", None, cli_report.cmd_report)  # --out: <results>/report

    with pytest.raises(UsageError, match=r"metrics\.parquet.*python -m bench run"):
        cli_report.cmd_report(parse_report("--results", str(tmp_path / "nothing")))

    empty = tmp_path / "empty"
    files.write_table(empty / "metrics.parquet", pd.DataFrame(columns=long_table.COLUMNS).astype({"value": float}))
    files.write_table(empty / "summary.csv", pd.DataFrame(columns=["dataset"]))
    with pytest.raises(UsageError, match="empty"):
        cli_report.cmd_report(parse_report("--results", str(empty)))


def test_cli_writes_report_and_no_noise_figure_with_one_noise_level(tmp_path, capsys):
    make_results(tmp_path / "results", noise_levels=("protocol",))
    assert cli_report.cmd_report(parse_report("--results", str(tmp_path / "results"), "--out", str(tmp_path / "figs"))) == 0
    assert "files written to" in capsys.readouterr().out
    names = {p.name for p in (tmp_path / "figs").iterdir()}
    assert "tables.md" in names and "boxplot_dsc_toy_cm_protocol_gt_foreground.png" in names
    assert not any(n.startswith("noise_dsc") for n in names)  # the two-level run of `rendered` has one


def test_a_degenerate_row_is_flagged_and_never_bold(tmp_path):
    """MV-UNet has the best mean but predicted an empty mask in 2 of 3 seeds: marked, not bold; LF-Net is the best shown."""
    summary = pd.DataFrame(
        {
            "dataset": "toy",
            "raters": "cm",
            "noise": "protocol",
            "reference": "gt",
            "method": ["mv-unet", "lf-net", "oracle"],
            "structure": "foreground",
            "metric": "dsc",
            "mean": [0.95, 0.80, 0.99],
            "std": 0.01,
            "n_seeds": 3,
            "n_cases": 10,
        }
    )
    outcomes = pd.DataFrame(
        {
            "dataset": "toy",
            "raters": "cm",
            "noise": "protocol",
            "method": ["mv-unet"] * 3 + ["lf-net"] * 3,
            "seed": [0, 1, 2] * 2,
            "stops": "plateau",
            "flag": ["empty", "", "empty", "", "", ""],
        }
    )
    assert table_notes.degenerate_flags(outcomes, "toy", "cm", "protocol") == {"mv-unet": "empty 2/3"}
    # per-case rows whose seed means are the summary's: seeds 1 point apart, every case alike
    cases = pd.DataFrame(
        [
            {
                "dataset": "toy",
                "raters": "cm",
                "noise": "protocol",
                "reference": "gt",
                "method": m,
                "seed": s,
                "case": f"c{c}",
                "structure": "foreground",
                "metric": "dsc",
                "value": mean + 0.01 * (s - 1) + 0.001 * c,
            }
            for m, mean in zip(summary["method"], summary["mean"])
            for s in range(3)
            for c in range(10)
        ]
    )
    written = tables.write_tables(PAPER, summary, tmp_path, outcomes=outcomes, cases=cases)
    labels, _, cells = markdown_rows(tmp_path / "table1_toy_cm_protocol_gt_foreground.md")
    assert labels == ["MV-UNet [empty 2/3]", "LF-Net", "*Oracle*"]
    # LF-Net is the only method left competing: nothing to resolve it from, so nothing is bold
    assert cells["MV-UNet [empty 2/3]"][0] == "95.00 ± 1.00" and cells["LF-Net"][0] == "80.00 ± 1.00"
    assert table_text.FLAG_NOTE in (tmp_path / "table1_toy_cm_protocol_gt_foreground.md").read_text()
    tex = (tmp_path / "table1_toy_cm_protocol_gt_foreground.tex").read_text()
    assert r"MV-UNet [empty 2/3] & 95.00 $\pm$ 1.00" in tex and r"LF-Net & 80.00" in tex and r"\multicolumn{3}" in tex
    assert tex.count(r"\begin{") == tex.count(r"\end{")
    (tmp_path / "plain").mkdir()
    without = tables.write_tables(PAPER, summary, tmp_path / "plain", cases=cases)
    assert [p.name for p in without] == [p.name for p in written]
    labels, _, cells = markdown_rows(tmp_path / "plain" / "table1_toy_cm_protocol_gt_foreground.md")
    assert labels[0] == "MV-UNet" and cells["MV-UNet"][0].startswith("**")  # without the manifests nothing is known


def test_render_reads_the_flags_from_the_manifests(tmp_path):
    rng = np.random.default_rng(4)
    write_results(tmp_path / "results", rows_for("toy", "cm", "protocol", TOY_METHODS, ["foreground"], {"gt": ["dsc", "bahd"]}, rng))
    for seed in range(3):  # lf-net (the best) predicted empty masks in every seed
        keys = {"dataset": "toy", "raters": "cm", "noise": "protocol", "method": "lf-net", "seed": seed}
        folder = store.cell_dir(tmp_path / "results", store.Cell(**keys))
        folder.mkdir(parents=True)
        files.write_json(folder / "manifest.json", {"cell": keys, "status": "done", "degenerate": {"flag": "empty"}})
    render.render(PAPER, tmp_path / "results", tmp_path / "out")
    labels, _, cells = markdown_rows(tmp_path / "out" / "table1_toy_cm_protocol_gt_foreground.md")
    assert "LF-Net [empty 3/3]" in labels and not cells["LF-Net [empty 3/3]"][0].startswith("**")
    assert cells["CM-UNet"][0].startswith("**")  # the best unflagged method


def test_render_reads_budget_and_run_options_from_the_cells(tmp_path):
    for method in ("mv-unet", "lf-net"):
        write_cell(tmp_path, method, 0, np.linspace(0.5, 0.9, 6), budget="quick", options={"max_steps": 10})
    store.collect(tmp_path)
    render.render(PAPER, tmp_path, tmp_path / "out")
    text = (tmp_path / "out" / "table1_mnist-5k_lfnet_protocol_gt_foreground.md").read_text()
    assert "Run: budget quick; seeds per method: 1; pipeline check, not a verdict: budget quick, --max-steps 10, fewer than 3" in text
    assert "**" not in text  # one seed each: no bold
