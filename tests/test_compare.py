"""`python -m bench compare A B` explains itself (bench/report/compare.py, bench/cli/compare.py): the options and machine
facts that differ, each side's budget, seeds and pipeline-check status, the main reference only by default, no row of
NaN, a folder of its own beside the two, axes scaled to the data."""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
import pytest
from test_reproduction import write_cell

from bench import files, store, study
from bench.cli import compare as cli_compare
from bench.cli.options import UsageError
from bench.report import compare, plots


def results(folder, shift: float, max_steps: int) -> None:
    """mnist-5k: MV-UNet and LF-Net, 3 seeds, 20 cases against gt, run with --max-steps `max_steps`; DSC + `shift`."""
    spread = np.linspace(-0.03, 0.03, 20)
    for method, mean in (("mv-unet", 0.6), ("lf-net", 0.8)):
        for seed in range(3):
            write_cell(folder, method, seed, np.clip(mean + shift + spread + 0.002 * (seed - 1), 0, 1), options={"max_steps": max_steps})
    store.collect(folder)


def parse(*argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli_compare.add_parser(parser.add_subparsers(dest="verb"))
    return parser.parse_args(["compare", *argv], argparse.Namespace(study=study.default()))


@pytest.fixture
def pair(tmp_path):
    a, b = tmp_path / "short", tmp_path / "long"
    results(a, 0.0, 20)
    results(b, 0.02, 40)
    return a, b


def test_compare_names_what_differs_and_writes_beside_the_two_never_inside(pair, capsys):
    a, b = pair
    before = sorted(p.relative_to(b) for p in b.rglob("*"))
    assert cli_compare.cmd_compare(parse(str(a), str(b))) == 0
    out = capsys.readouterr().out
    assert sorted(p.relative_to(b) for p in b.rglob("*")) == before  # nothing written into B
    folder = a.parent / "compare_short_vs_long"
    assert (folder / "compare.md").is_file() and (folder / "compare.csv").is_file()
    assert "options.max_steps: 20 (A) vs 40 (B)" in out and "options.max_steps: 20 (A) vs 40 (B)" in (folder / "compare.md").read_text()
    assert "A: Run: budget plateau; seeds per method: 3; pipeline check, not a verdict: --max-steps 20" in out
    assert "| " not in out and str(folder) in out  # a short summary and the path, not the tables
    assert "DSC LF-Net: 80.00 ± 0.20 (A) → 82.00 ± 0.20 (B), B − A +2.00 [" in out
    figures = sorted(folder.glob("diff_*.png"))
    assert len(figures) == 2
    caption = plots.saved_caption(figures[0])
    assert "A: Run: budget plateau; seeds per method: 3" in caption and "B: Run: budget plateau" in caption

    with pytest.raises(UsageError, match="inside B"):
        cli_compare.cmd_compare(parse(str(a), str(b), "--out", str(b / "cmp")))


def test_compare_takes_the_main_reference_and_prints_no_nan_rows(pair):
    """A rater who annotated nothing (rater:blank, every value NaN) and a second reference: by default only gt is compared;
    with every reference, the blank rater still has no row."""
    a, b = pair
    tables = []
    for folder in (a, b):
        table = store.read_collected(folder, store.METRICS)
        blank = table.assign(reference="rater:blank", value=np.nan)
        majority = table.assign(reference="majority")
        tables.append(pd.concat([table, blank, majority], ignore_index=True))
    main = compare.compare_tables(*tables, ["dsc", "bahd"])
    assert set(main["reference"]) == {"gt"}
    every = compare.compare_tables(*tables, ["dsc", "bahd"], references="all")
    assert set(every["reference"]) == {"gt", "majority"}
    assert every[["mean_a", "mean_b", "diff"]].notna().all().all()
    assert "nan" not in compare.to_markdown(study.default(), every, "a", "b")


def test_difference_axis_spans_the_data():
    """B − A of +2 DSC points with a 1-point interval: the axis spans a few points around 0 and +2, not ± 100."""
    table = pd.DataFrame(
        {
            "dataset": "toy",
            "raters": "cm",
            "noise": "protocol",
            "reference": "gt",
            "structure": "foreground",
            "metric": "dsc",
            "method": ["mv-unet", "lf-net"],
            "n": 20,
            "n_seeds_a": 3,
            "n_seeds_b": 3,
            "diff": [2.0, 1.5],
            "ci_low": [1.5, 1.0],
            "ci_high": [2.5, 2.0],
            "df": 4.0,
        }
    )
    (ax,) = compare.difference_figure(study.default(), table, "t", "a", "b").axes
    low, high = ax.get_xlim()
    assert low <= 0 and high >= 2.5 and high - low < 10


def test_differences_without_cell_records_say_so(tmp_path):
    for name in ("a", "b"):
        files.write_table(tmp_path / name / store.METRICS, pd.DataFrame({"dataset": ["toy"]}))
    (line,) = compare.differences(tmp_path / "a", tmp_path / "b")
    assert line.startswith("no cell records (config.json, manifest.json) in A") and "options and machines not compared" in line


def test_compare_shows_how_the_ordering_moves_with_the_protocol(tmp_path):
    """The protocol table: each method's DSC under A and B and its GT-selected weights' test DSC, ranks under each and
    Kendall's τ between them; a reversal of two methods' order between A and B shows in the ranks and τ."""
    a, b = tmp_path / "plateau", tmp_path / "paper"
    spread = np.linspace(-0.01, 0.01, 20)
    means_a, means_b = {"mv-unet": 0.6, "qmv-unet": 0.85, "lf-net": 0.8}, {"mv-unet": 0.6, "qmv-unet": 0.8, "lf-net": 0.9}
    for folder, means in ((a, {**means_a, "oracle": 0.99}), (b, {**means_b, "oracle": 0.95})):
        for method, mean in means.items():
            for seed in range(3):
                write_cell(folder, method, seed, np.clip(mean + spread, 0, 1), budget=folder.name)
                cell = store.cell_dir(folder, store.Cell("mnist-5k", "lfnet", "protocol", method, seed))
                manifest = files.read_json(cell / "manifest.json")
                files.write_json(cell / "manifest.json", {**manifest, "selection": {"test_gt_dsc": 100 * mean + 1}})
        store.collect(folder)
    table = compare.compare_tables(*(store.read_collected(f, store.METRICS) for f in (a, b)), ["dsc"])
    text = compare.protocols(study.default(), a, b, table, "plateau", "paper")
    assert "| LF-Net | 80.00 (2) | 90.00 (1) | 81.00 (2) | 91.00 (1) |" in text
    assert "| QMV-UNet | 85.00 (1) | 80.00 (2) | 86.00 (1) | 81.00 (2) |" in text
    assert "| Oracle | 99.00 | 95.00 | 100.00 | 96.00 |" in text  # shown, never ranked: LF-Net is first under paper
    assert "- τ(plateau, paper) = 0.33 over 3 methods" in text and "- τ(plateau, plateau, GT-selected) = 1.00 over 3 methods" in text
