"""bench.report: tables and figures from a small synthetic results folder (no training)."""

import argparse
import re

import numpy as np
import pandas as pd
import pytest
from matplotlib.image import imread

from bench import report, store

# (method, DSC offset): lf-net best among the compared methods, the oracle above it (it must not be bolded).
TOY_METHODS = {"mv-unet": -0.20, "cm-unet": -0.05, "lf-net": 0.0, "oracle": 0.05}
ABLATIONS = {"lf-net-s": -0.20, "lf-net-s-tv": -0.10, "lf-net-no-ce": -0.02}
EYE_METHODS = {"mv-unet": -0.10, "mr-net": -0.05, "lf-net": 0.0, "oracle": 0.01}


def rows_for(dataset, reference, noise, methods, structures, metrics, rng, n_cases=12, n_seeds=3):
    rows = []
    for method, offset in methods.items():
        for seed in range(n_seeds):
            for case in range(n_cases):
                for structure in structures:
                    dsc = float(np.clip(0.6 + offset - 0.1 * noise + rng.normal(0, 0.03), 0, 1))
                    values = {"dsc": dsc, "bahd": 5 * (1 - dsc), "soft_dice": dsc, "soft_iou": dsc / (2 - dsc)}
                    for metric in metrics:
                        rows.append(
                            (dataset, reference, noise, method, seed, f"c{case:02d}", structure, metric, values[metric], 0, 0, 0, 0, 0)
                        )
    return rows


def make_results(folder, noise_levels=(0.5, 1.0)):
    """toy: 1 structure, dsc + bahd, given noise levels, ablations at the last level; eye: disc/cup with soft metrics, no Average."""
    rng = np.random.default_rng(0)
    rows = []
    for noise in noise_levels:
        rows += rows_for("toy", "gt", noise, TOY_METHODS, ["foreground"], ["dsc", "bahd"], rng)
    rows += rows_for("toy", "gt", noise_levels[-1], ABLATIONS, ["foreground"], ["dsc", "bahd"], rng)
    rows += rows_for("eye", "majority", 1.0, EYE_METHODS, ["disc", "cup"], ["dsc", "bahd", "soft_dice", "soft_iou"], rng)
    table = pd.DataFrame(rows, columns=store.COLUMNS)
    averages = pd.DataFrame(
        {"dataset": "toy", "reference": "gt", "noise": list(noise_levels), "dsc": [0.7 - 0.2 * n for n in noise_levels]}
    )
    store.write_table(folder / "metrics.parquet", table)
    store.write_table(folder / "summary.csv", store.summarise(table, averages))
    return table


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
    written = report.render(root / "results", root / "out")
    return root, written


def test_render_writes_every_expected_file(rendered):
    root, written = rendered
    stems = [
        "table1_toy_gt_noise0.5_foreground", "table1_toy_gt_noise1_foreground", "table4_toy_gt_noise1",
        "table1_eye_majority_noise1_disc", "table1_eye_majority_noise1_cup", "table3_eye_majority_noise1",
    ]  # fmt: skip
    figures = [
        "boxplot_dsc_toy_gt_noise0.5_foreground", "boxplot_dsc_toy_gt_noise1_foreground",
        "boxplot_dsc_eye_majority_noise1_disc", "boxplot_dsc_eye_majority_noise1_cup", "noise_dsc_toy_gt_foreground",
    ]  # fmt: skip
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


def test_table1_rows_columns_and_bold(rendered):
    root, _ = rendered
    labels, header, cells = markdown_rows(root / "out" / "table1_toy_gt_noise1_foreground.md")
    assert labels == ["*Average*", "MV-UNet", "CM-UNet", "LF-Net", "*Oracle*"]  # no ablation rows in Table I
    assert header == ["Methods", "DSC (%) ↑", "bAHD ↓"]
    assert cells["*Average*"] == ["50.00", "N/A"]  # rater average 0.7 − 0.2 · 1.0, no std, no bAHD
    assert all(c.startswith("**") for c in cells["LF-Net"])  # best DSC and best (lowest) bAHD
    assert not any("**" in c for label in ("*Oracle*", "*Average*", "MV-UNet", "CM-UNet") for c in cells[label])

    summary = pd.read_csv(root / "results" / "summary.csv")
    lf = summary[
        (summary["dataset"] == "toy") & (summary["method"] == "lf-net") & (summary["metric"] == "dsc") & (summary["noise"] == 1.0)
    ].iloc[0]
    assert cells["LF-Net"][0] == f"**{lf['mean'] * 100:.2f} ± {lf['std'] * 100:.2f}**"


def test_latex_tables(rendered):
    root, _ = rendered
    tex = (root / "out" / "table1_toy_gt_noise1_foreground.tex").read_text()
    assert r"\begin{tabular}{lcc}" in tex and r"\end{tabular}" in tex
    body = [line for line in tex.splitlines() if line.endswith(r"\\")]
    assert len(body) == 1 + 5  # header + Average, 3 methods, Oracle
    assert body[1].startswith(r"\emph{Average}") and body[-1].startswith(r"\emph{Oracle}")
    assert re.search(r"LF-Net & \\textbf\{[\d.]+\} \$\\pm\$ \\textbf\{[\d.]+\}", tex)
    assert tex.count(r"\begin{") == tex.count(r"\end{")
    assert "±" not in tex and "↑" not in tex  # Unicode mapped to math mode


def test_table3_and_table4(rendered):
    root, _ = rendered
    labels, header, cells = markdown_rows(root / "out" / "table3_eye_majority_noise1.md")
    assert header == ["Methods", "soft DSC disc (%) ↑", "soft IoU disc (%) ↑", "soft DSC cup (%) ↑", "soft IoU cup (%) ↑"]
    assert labels == ["MV-UNet", "MR-Net", "LF-Net", "*Oracle*"]  # no Average row without ground truth
    assert all(c.startswith("**") for c in cells["LF-Net"])

    labels, header, cells = markdown_rows(root / "out" / "table4_toy_gt_noise1.md")
    assert labels == ["S", "S+TV", "S+TV+SLS+RCLS", "‡"]
    assert header == ["Variant", "DSC foreground (%) ↑"]
    assert cells["S+TV+SLS+RCLS"][0].startswith("**")
    assert r"$\ddagger$" in (root / "out" / "table4_toy_gt_noise1.tex").read_text()
    assert (root / "out" / "tables.md").read_text().count("### ") == 6


def test_paired_tests_csv(rendered):
    root, _ = rendered
    tests = pd.read_csv(root / "out" / "paired_tests.csv")
    main = tests[(tests["family"] == "main") & (tests["dataset"] == "toy") & (tests["metric"] == "dsc") & (tests["noise"] == 1.0)]
    assert set(main["method"]) == {"mv-unet", "cm-unet"}
    assert (main["n"] == 12).all() and (main["p_holm"] < 0.05).all()
    ablation = tests[(tests["family"] == "ablation") & (tests["metric"] == "dsc")]
    assert set(ablation["method"]) == {"lf-net-s", "lf-net-s-tv", "lf-net-no-ce"}


def test_render_is_deterministic(rendered, tmp_path):
    root, written = rendered
    again = report.render(root / "results", tmp_path)
    assert [p.name for p in again] == [p.name for p in written]
    for a, b in zip(written, again):
        assert a.read_bytes() == b.read_bytes(), a.name


def test_bold_ties_at_printed_precision():
    summary = pd.DataFrame(
        {
            "method": ["mv-unet", "cm-unet", "lf-net"],
            "structure": "foreground",
            "metric": "dsc",
            "mean": [0.81234, 0.81231, 0.5],
            "std": [0.01, np.nan, 0.02],
        }
    )
    table = report.build_table(
        summary, report.table1_columns("foreground")[:1], ["mv-unet", "cm-unet", "lf-net"], "t", "Methods", {}, False
    )
    assert [row[0].bold for row in table.rows] == [True, True, False]  # 81.23 and 81.23
    assert report.markdown_cell(table.rows[1][0]) == "**81.23**"  # one seed: no ± std


def parse_report(*argv):
    parser = argparse.ArgumentParser()
    report.add_parser(parser.add_subparsers(dest="verb"))
    return parser.parse_args(["report", *argv])


def test_cli_defaults_and_errors(tmp_path, capsys):
    from bench.cli import UsageError

    args = parse_report()
    assert (args.results, args.out, args.func) == ("results", None, report.cmd_report)  # --out: <results>/report

    with pytest.raises(UsageError, match=r"metrics\.parquet.*python -m bench run"):
        report.cmd_report(parse_report("--results", str(tmp_path / "nothing")))

    empty = tmp_path / "empty"
    store.write_table(empty / "metrics.parquet", pd.DataFrame(columns=store.COLUMNS).astype({"value": float}))
    store.write_table(empty / "summary.csv", pd.DataFrame(columns=["dataset"]))
    with pytest.raises(UsageError, match="empty"):
        report.cmd_report(parse_report("--results", str(empty)))


def test_cli_writes_report_and_no_noise_figure_with_one_noise_level(tmp_path, capsys):
    make_results(tmp_path / "results", noise_levels=(1.0,))
    assert report.cmd_report(parse_report("--results", str(tmp_path / "results"), "--out", str(tmp_path / "figs"))) == 0
    assert "files written to" in capsys.readouterr().out
    names = {p.name for p in (tmp_path / "figs").iterdir()}
    assert "tables.md" in names and "boxplot_dsc_toy_gt_noise1_foreground.png" in names
    assert not any(n.startswith("noise_dsc") for n in names)  # the two-level run of `rendered` has one
