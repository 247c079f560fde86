"""The reproduction page (bench/reproduce/page.py): the pipeline-check banner, the headline's numbers, the run table,
contents, rules, colours, captions, rank plots and significance maps, the pipeline-check line on the box plots, Δ and flags,
the not-run rows folded and each dataset's instructions once, on results folders the test writes (tests/test_reproduction.py's
cells). The order a reader meets them in is checked on the HTML, without a browser (tools/screenshot_page.py takes the
screenshots)."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from conftest import long_row
from test_reproduction import make_results, write_cell

from bench import files, store, study
from bench.report import plots, render, table_notes, tables
from bench.reproduce import assessment, page, page_format, provenance

PAPER = study.default()

MEANS = {"mv-unet": 0.5762, "staple-unet": 0.70, "cm-unet": 0.93, "lf-net": 0.99}
MACHINE = {
    "device": "cpu",
    "precision": "torch.bfloat16",
    "engine": "eager",
    "threads": 2,
    "cpu": "x86_64 avx512_bf16 avx2",
    "git_commit": "0123456789abcdef",
    "versions": {"python": "3.11.7", "torch": "2.5.1", "numpy": "2.1.0"},
}


def record_run(results: Path, flags: dict[str, str] | None = None, max_steps: int | None = None) -> None:
    """Add to every cell what bench/run/cell.py records beside its result: machine and versions in manifest.json, options
    and split sizes in config.json; `flags` sets a method's degenerate-prediction flag in every seed."""
    for folder, info in ((r.folder, r.manifest) for r in store.records(results)):
        method = info["cell"]["method"]
        files.write_json(folder / "manifest.json", {**info, **MACHINE, "degenerate": {"flag": (flags or {}).get(method, "")}})
        config = files.read_json(folder / "config.json")
        options = {"budget": config["budget"]["name"], "max_steps": max_steps, "train_size": None, "test_size": None, "threads": 2}
        files.write_json(
            folder / "config.json", {**config, "options": options, "train_images": 4000, "val_images": 1000, "test_images": 20}
        )


def write_page(results: Path, out: Path) -> tuple[str, str, list[Path]]:
    written = page.write(assessment.assess(results, results.parent / "data", PAPER), out, results.parent / "data")
    return written[0].read_text(), written[1].read_text(), written


@pytest.fixture(scope="module")
def plateau(tmp_path_factory):
    """mnist-5k under lfnet at the plateau (MV-UNet flagged empty in every seed, STAPLE-UNet failing its stop audit), rendered."""
    results = tmp_path_factory.mktemp("page") / "results"
    make_results(results, MEANS, fails=("staple-unet",))
    record_run(results, flags={"mv-unet": "empty"})
    return write_page(results, results.parent / "paper")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """mnist-5k under lfnet at the quick budget with a step cap, one seed per method, rendered: a pipeline check."""
    results = tmp_path_factory.mktemp("smoke") / "results"
    make_results(results, {"mv-unet": 0.5762, "lf-net": 0.99}, budget="quick", seeds=1)
    record_run(results, max_steps=20)
    return write_page(results, results.parent / "paper")


def test_the_page_opens_with_the_headline_numbers_then_the_run_contents_and_rules(plateau):
    md, _, _ = plateau
    headline = md[md.index("## Headline") : md.index("## Contents")]
    for line in (
        "| budget | `plateau`: under this benchmark's plateau protocol (the stopping rule on the raters' validation loss); the paper's recipe (`--budget paper`) not run |",
        "| seeds | 0, 1, 2 (3 per method) |",
        "| images (train / val / test) | mnist-5k 4000 / 1000 / 20 |",
        "| run options | --max-steps none, --train-size none, --test-size none |",
        "| rater settings | mnist-5k `lfnet` (style lfnet, input clean) |",
        "| machine | cpu, torch.bfloat16, eager engine, CPU x86_64 avx512_bf16 avx2, 2 threads |",
        "| software | python 3.11.7, torch 2.5.1, numpy 2.1.0, commit 0123456789 |",
        "| verdict grade? | yes, every rater setting |",
        "| cells | 12 finished: 4 methods, 1 rater setting |",
    ):
        assert line in headline, line
    assert "> **Pipeline check" not in md  # verdict grade: no banner
    first = next(line for line in headline.splitlines() if line.startswith("- **Table I**"))
    assert first.startswith(
        "- **Table I** (mnist dsc, on mnist-5k `lfnet`): LF-Net 99.00 [98.75, 99.25] (n 3, df 2) vs paper 99.25 ± 0.17: "
        "Δ -0.25 [-0.74, +0.24]: **reproduced**; the best measured here. Values: 3 reproduced, 5 not reproduced, 46 not run."
    ), first
    stand_in = next(line for line in headline.splitlines() if line.startswith("- **Table IV**"))
    assert "(a stand-in for choledoch: no comparison with the paper's value)" in stand_in and "vs paper" not in stand_in
    assert "best measured here" not in stand_in  # LF-Net is the only row measured in that column: "best" of one says nothing
    assert "- Not run: Table II (DSC (%) and bAHD on LIDC-IDRI), Table III (" in headline
    assert "- Claims of the text: holds 2 (`mv-label-under-segments`, `staple-label-beats-averaging`)" in headline
    assert md.index("## Contents") < md.index("**How verdicts are given**") < md.index("## Table I") < md.index("## Datasets")
    assert "## Table II" not in md and "## Run configuration and environment" not in md  # no cells; one setting: the run table


def test_a_pipeline_check_opens_with_the_banner_then_the_headline_numbers_then_the_contents(smoke):
    """The order a reader meets in the HTML, as the screenshots show it: the red banner, the headline with its measured
    values, the run table, the contents."""
    _, page, _ = smoke
    banner = page.index('<div class="banner">')
    numbers = re.search(r"LF-Net \d+\.\d\d \(no interval with 1 seed\) vs paper 99\.25 ± 0\.17", page)
    assert numbers and banner < page.index('<h2 id="headline">') < numbers.start() < page.index("<table>") < page.index('<p class="toc">')
    assert "Pipeline check, not a verdict: mnist-5k <code>lfnet</code>: budget quick, step cap 20 (--max-steps), fewer than 3 seeds" in page
    assert page[:banner].count("<p>") == 1  # only the paper's title and line above it
    assert '<b class="v-check">pipeline check</b>' in page  # in the headline, as red as the banner, not pale grey
    assert "no, a pipeline check: mnist-5k <code>lfnet</code>: budget quick" in page


def test_not_run_rows_are_folded_and_each_datasets_instructions_appear_once(plateau):
    md, page, _ = plateau
    table1 = md[md.index("## Table I") : md.index("## Table IV")]
    assert (
        "**46 values not run**: QMV-UNet, Mean-UNet, LS-UNet, MH-UNet, Oracle not trained here; no cells of ms-lesion, choledoch (see [Datasets](#datasets))."
        in table1
    )
    assert not [line for line in md.splitlines() if line.startswith("|") and "| not run |" in line]
    for dataset in ("ms-lesion", "choledoch", "lidc", "riga"):
        assert md.count(f"{dataset} not found under") == 1 and page.count(f"{dataset} not found under") == 1, dataset
    assert "- **riga** (needed by Table III, Table IV): riga not found under" in md
    assert '<a href="#datasets">Datasets</a>' in page


def test_the_contents_link_to_every_section_in_both_writers(plateau):
    md, page, _ = plateau
    toc = md[md.index("## Contents") : md.index("**How verdicts are given**")]
    links = re.findall(r"\]\(#([^)]+)\)", toc)
    assert "datasets" in links and "claims-of-the-text" in links and len(links) == len(set(links))
    ids = set(re.findall(r'<h\d id="([^"]+)"', page))
    html_toc = page[page.index('<p class="toc">') :]
    hrefs = re.findall(r'<a href="#([^"]+)"', html_toc[: html_toc.index("</p>")])
    assert hrefs == links and set(re.findall(r'<a href="#([^"]+)"', page)) <= ids  # every HTML link lands on a heading
    assert "mnist-5k-raters-lfnet-verdict" in ids and "mnist-5k-raters-lfnet-pipeline-check" in ids


def test_verdicts_are_coloured_in_the_html(plateau):
    _, page, _ = plateau
    assert '<td class="v-good">reproduced</td>' in page and '<td class="v-bad">not reproduced</td>' in page
    assert '<td class="v-check">pipeline check</td>' in page  # the stand-in's value
    assert '<summary><b class="v-good">holds</b>' in page  # a claim's verdict, its evidence folded under it
    assert '<td class="v-good">MV-UNet' not in page  # a method's name is not a verdict


def test_a_degenerate_method_is_flagged_and_a_stand_in_has_no_delta(plateau):
    md, _, _ = plateau
    assert re.search(r"\| MV-UNet \[empty 3/3\] \| 57\.62 ± 0\.44 \|", md)
    ablation = md[md.index("### mnist-5k, raters `lfnet`: pipeline check") :]
    row = next(line for line in ablation.splitlines() if line.startswith("| LF-Net |"))
    assert row.split(" | ")[4] == "" and row.split(" | ")[5] == "pipeline check", row  # mnist-5k stands in for Choledoch
    table1 = md[md.index("### mnist-5k, raters `lfnet`: verdict") :]
    row = next(line for line in table1.splitlines() if line.startswith("| LF-Net |"))
    assert row.split(" | ")[4].startswith("-0.25 ["), row  # measured − paper with its interval


def test_a_method_failing_its_stop_audit_is_flagged_in_the_headline_every_table_and_its_note(plateau):
    md, _, _ = plateau
    assert "- Not shown to be at their best by the stop audit of " in md and ": STAPLE-UNet [stop audit: fails] (bench audit-stops)" in md
    start = md.index("### mnist-5k, raters `lfnet`: verdict")
    table1 = md[start : md.index("\n## ", start)]
    assert re.search(r"\| STAPLE-UNet \[stop audit: fails\] \| 90\.49 ± 0\.45 \|", table1)
    assert "| LF-Net | 99.25 ± 0.17 |" in table1 and table1.count("[stop audit: fails]: trained longer") == 1


def test_each_column_has_its_rank_plot_and_tau_with_an_interval(plateau):
    md, page, written = plateau
    assert "figures/ranks_mnist-5k_lfnet_table1_dsc_foreground.png" in {p.relative_to(p.parent.parent).as_posix() for p in written}
    assert "![ranks_mnist-5k_lfnet_table1_dsc_foreground](figures/ranks_mnist-5k_lfnet_table1_dsc_foreground.png)" in md
    assert "Kendall τ with the paper's order 1.00 the same in every bootstrap resample over 4 methods" in md
    captions = [line for line in md.splitlines() if line.startswith("Figure: ")]
    assert any("two-level bootstrap" in c and "Circle area" in c for c in captions)
    assert any("each of the 20 test cases against gt" in c and "seed-aware test" in c for c in captions)  # the box plot
    assert page.count("<figure") == md.count("![") and "data:image/png;base64," in page


def test_each_column_compares_every_pair_and_ranks_under_three_schemes(plateau, smoke):
    md, _, written = plateau
    names = {p.name for p in written}
    assert {"significance_mnist-5k_lfnet_table1_dsc_foreground.png", "significance_mnist-5k_lfnet_table1_bahd_foreground.png"} <= names
    line = next(line for line in md.splitlines() if "figures/significance_mnist-5k_lfnet_table1_dsc_foreground.png" in line)
    assert line.startswith("![significance_")
    pairs = next(line for line in md.splitlines() if line.startswith("Kendall τ") and "Every pair" in line)
    assert "Every pair (6 pairs, seed-aware test, Holm over the 6 pairs): resolved LF-Net > CM-UNet, " in pairs, pairs
    assert pairs.endswith(
        "Ranks agree under the three schemes (mean-then-rank, rank-then-mean, test-then-rank): 1 LF-Net, 2 CM-UNet, "
        "3 STAPLE-UNet, 4 MV-UNet."
    ), pairs
    smoke_md, _, smoke_written = smoke
    assert "Every pair: no significance map, it needs two methods with 2 or more seeds each (seeds here: MV-UNet 1, LF-Net 1)." in smoke_md
    assert not any(p.name.startswith("significance_") for p in smoke_written)


def test_the_best_method_against_the_reference_names_the_seed_aware_test(tmp_path):
    make_results(tmp_path, {"mv-unet": 0.5762, "staple-unet": 0.995, "lf-net": 0.99})
    md, _, _ = write_page(tmp_path, tmp_path / "paper")
    line = next(line for line in md.splitlines() if "STAPLE-UNet vs LF-Net by the" in line)
    test = "STAPLE-UNet vs LF-Net by the seed-aware test (docs/methods.md#statistics): "
    assert re.search(
        re.escape(test) + r"Δ \+0\.50 points \[\+0\.\d\d, \+0\.\d\d\] \(n 3/3, df [\d.]+\) in STAPLE-UNet's favour, p [\d.e-]+", line
    ), line
    assert "Wilcoxon" not in line


def test_a_pipeline_check_says_so_on_its_box_plot(tmp_path, monkeypatch):
    drawn = {}
    original = render.boxplot_figure

    def spy(paper, cases, tests, methods, all_methods, title, warning="", *rest):
        drawn[title] = warning
        return original(paper, cases, tests, methods, all_methods, title, warning, *rest)

    monkeypatch.setattr(render, "boxplot_figure", spy)
    make_results(tmp_path, MEANS, budget="quick")
    record_run(tmp_path, max_steps=10)
    md, _, _ = write_page(tmp_path, tmp_path / "paper")
    ((title, warning),) = drawn.items()
    assert warning == "pipeline check, not a verdict: budget quick, step cap 10 (--max-steps)", warning
    assert title.endswith("Holm-adjusted p vs LF-Net of the\nseed-aware test (docs/methods.md#statistics)")
    caption = next(line for line in md.splitlines() if line.startswith("Figure: ") and "test cases against gt" in line)
    assert "**Pipeline check, not a verdict: budget quick, step cap 10 (--max-steps).**" in caption
    assert "| run options | --max-steps 10, --train-size none, --test-size none |" in md
    ranks = next(line for line in md.splitlines() if line.startswith("Figure: ") and "bootstrap resamples" in line)
    assert ranks.endswith("**Pipeline check, not a verdict: budget quick, step cap 10 (--max-steps).**")


def test_the_box_plot_footer_states_the_budget_the_cells_ran_under(plateau):
    """The page's box plots carry the run line of their cells (issue 76): the budget they ran under, not "not recorded"."""
    _, _, written = plateau
    (png,) = [p for p in (written[0].parent / "figures").glob("boxplot_dsc_*.png")]
    footer = plots.saved_caption(png)
    assert footer.startswith("Run: budget plateau; seeds per method: 3; not a pipeline check"), footer
    assert "not recorded" not in footer


def test_the_box_plot_draws_the_warning():
    cases = pd.DataFrame({"method": ["lf-net"] * 4 + ["mv-unet"] * 4, "case": list("abcd") * 2, "value": np.linspace(0.5, 0.9, 8)})
    tests = pd.DataFrame({"method": ["mv-unet"], "p_holm": [0.01]})
    fig = render.boxplot_figure(
        PAPER, cases, tests, ["mv-unet", "lf-net"], ["lf-net", "mv-unet"], "t", "pipeline check, not a verdict: budget quick"
    )
    assert fig._suptitle.get_text() == "pipeline check, not a verdict: budget quick"
    assert render.boxplot_figure(PAPER, cases, tests, ["mv-unet", "lf-net"], ["lf-net", "mv-unet"], "t")._suptitle is None


def test_paths_with_stars_are_code_not_italics():
    hint = "put SpecTr's MDC (MHSI/*.hdr + data files, Mask/*.png) in <data-root>/choledoch/ (any nesting)."
    page = page_format._inline(hint)
    assert "<i>" not in page and "<code>MHSI/*.hdr</code>" in page and "<code>&lt;data-root&gt;/choledoch/</code>" in page
    md = page_format.to_markdown([("p", hint), ("list", [hint])])
    assert md.count("`MHSI/*.hdr`") == 2 and md.count("`Mask/*.png`") == 2
    assert page_format._inline("**holds** — *every* competitor, `a*b*c`") == (
        '<b class="v-good">holds</b> — <i>every</i> competitor, <code>a*b*c</code>'
    )


def test_versus_states_the_gap_its_interval_and_the_seeds_it_needs():
    test = {
        "method": "staple-unet",
        "reference_method": "lf-net",
        "metric": "dsc",
        "diff": -0.032,
        "ci_low": -0.035,
        "ci_high": -0.029,
        "df": 3.8,
        "n_seeds_ref": 3,
        "n_seeds": 3,
        "p_holm": 0.2,
        "seeds_needed": 7.0,
    }
    text = page.versus(PAPER, test, 100, "staple-unet")
    assert text == (
        "Δ +3.20 points [+2.90, +3.50] (n 3/3, df 3.8) in STAPLE-UNet's favour, p 0.2, a true gap of this size found with 80 % "
        "power at about 7 seeds per method"
    )
    assert page.versus(PAPER, test, 100, "staple-unet", named=False).startswith("Δ +3.20 points [+2.90, +3.50] (n 3/3, df 3.8), p 0.2,")
    assert page.versus(PAPER, test, 100, "lf-net").startswith("Δ -3.20 points [-3.50, -2.90] (n 3/3, df 3.8) in LF-Net's favour")
    assert "seeds per method" not in page.versus(PAPER, {**test, "p_holm": 0.01}, 100, "staple-unet")
    assert "more test cases" in page.versus(PAPER, {**test, "seeds_needed": float("inf")}, 100, "staple-unet")
    assert page.versus(PAPER, {**test, "p_holm": float("nan")}, 100, "staple-unet").startswith("Δ +3.20 points in")


def test_a_flag_from_the_manifests_reaches_the_group_table(tmp_path):
    for seed in range(3):
        write_cell(tmp_path, "lf-net", seed, np.full(5, 0.9))
    store.collect(tmp_path)
    record_run(tmp_path, flags={"lf-net": "full"})
    cells = provenance.provenance(tmp_path)
    assert table_notes.degenerate_flags(cells, "mnist-5k", "lfnet", "protocol") == {"lf-net": "full 3/3"}
    found = assessment.assess(tmp_path, tmp_path / "data", PAPER)
    table1 = next(line for line in page.headline(found) if line.startswith("**Table I**"))
    assert "LF-Net 90.00" in table1 and "[full 3/3: its mean measures nothing]" in table1, table1  # the headline carries the flag too


INTERVAL = re.compile(r"\[([-+]?\d+\.\d+), ([-+]?\d+\.\d+)\]")


def test_no_printed_interval_leaves_the_metrics_range_or_has_zero_width(tmp_path):
    """Two seeds, MV-UNet's far apart (20 % and 77 % DSC): its t interval (df 1) spans hundreds of points, so it is not
    estimable; every interval the page prints lies in DSC's range, none is NaN or of zero width, and each names n and df."""
    for seed, mean in enumerate((0.20, 0.77)):
        write_cell(tmp_path, "mv-unet", seed, np.full(20, mean) + np.linspace(-0.004, 0.004, 20))
    for method, mean in (("staple-unet", 0.70), ("cm-unet", 0.93), ("lf-net", 0.99)):
        for seed in range(2):
            write_cell(tmp_path, method, seed, np.full(20, mean - 0.002 * seed) + np.linspace(-0.004, 0.004, 20))
    store.collect(tmp_path)
    md, _, _ = write_page(tmp_path, tmp_path / "paper")
    # no stop audit in this folder: every row of a plateau run is flagged as not audited
    row = next(line for line in md.splitlines() if line.startswith("| MV-UNet [stop not audited] | 57.62 ± 0.44 | 48.50 ± 40.31 (2) |"))
    assert row.split(" | ")[3] == "not estimable with 2 seeds (df 1)" and row.split(" | ")[4].startswith("-9.12 not estimable"), row
    claims = md[md.index("## Claims of the text") : md.index("## Numbers of the text")]  # its evidence is bench/reproduce/claims.py's
    assert "not estimable with 2/2 seeds" in claims and INTERVAL.search(claims)
    found = INTERVAL.findall(md)
    assert found and "nan" not in md.lower()
    for low, high in found:
        assert -100 <= float(low) < float(high) <= 100, (low, high)  # DSC points (values and differences) or bAHD
    lf = next(line for line in md.splitlines() if line.startswith("| LF-Net [stop not audited] |") and "(2) |" in line)
    assert "| [97.63, 100.00] (n 2, df 1) | -0.35 [-1.69, +0.99] (n 2, df 1) |" in lf, lf  # clipped at 100 %, n and df shown
    average = next(line for line in md.splitlines() if line.startswith("| *Average* | 47.10 |"))
    assert "| -0.60 no interval: a pool statistic, no seeds |" in average  # was a zero-width interval


def test_the_selection_table_prints_no_nan_interval():
    """One seed: the gain has no interval; it was printed `+0.00 [+nan, +nan]`."""
    selection = pd.DataFrame(
        [
            {
                "dataset": "mnist-5k",
                "raters": "lfnet",
                "noise": "protocol",
                "method": "lf-net",
                "seeds": 1,
                "rule_step": "40",
                "rule_dsc": 90.0,
                "rule_sd": np.nan,
                "gt_step": "40",
                "gt_dsc": 90.0,
                "gt_sd": np.nan,
                "gain": 0.0,
                "gain_low": np.nan,
                "gain_high": np.nan,
                "test_dsc": 89.0,
                "test_sd": np.nan,
                "gt_test_dsc": np.nan,
                "gt_test_sd": np.nan,
                "gt_test_seeds": 0,
            }
        ]
    )
    (*_, (_, header, rows)) = page.selection_blocks(SimpleNamespace(selection=selection, study=PAPER))
    assert header[6] == "gain [95 % CI] (n seeds, df)" and rows[0][6] == "+0.00 no interval with 1 seed"
    two = selection.assign(seeds=2, gain=3.0, gain_low=-250.0, gain_high=256.0)
    assert page.selection_blocks(SimpleNamespace(selection=two, study=PAPER))[-1][2][0][6] == "+3.00 not estimable with 2 seeds (df 1)"


def test_a_field_run_gets_the_set_metrics_section_and_a_run_without_samples_none():
    """A method that drew samples (Prob. U-Net, M = 16) beside one with one prediction: the page shows the report's
    set-metrics table (bench/report/tables.py), each header with its M, under its own heading; without samples, nothing."""
    rows = []
    for method, m, shift in (("prob-unet", 16, 0.0), ("mv-unet", 1, -0.2)):
        for seed in range(2):
            for case in range(6):
                for metric in tables.SET_TABLE:
                    value = (0.5 - shift if metric.startswith("ged") else 0.7 + shift) + 0.01 * seed + 0.001 * case
                    rows.append(
                        long_row(
                            "lidc",
                            "real",
                            "protocol",
                            method,
                            seed,
                            "raters",
                            f"c{case}",
                            "foreground",
                            metric,
                            value,
                            n_samples=m if metric != "dice_personal" else 1,
                        )
                    )
    table = pd.DataFrame(rows, columns=store.COLUMNS)
    cells = pd.DataFrame(columns=[*store.KEYS, "budget", "flag", *table_notes.OPTIONS])
    blocks = page.set_metrics_blocks(SimpleNamespace(table=table, stops={}, study=PAPER), cells)
    assert blocks[0] == ("h", 2, "Set metrics against the rater set") and ("h", 3, "lidc, raters `real`") in blocks
    (_, header, body), *_ = [b for b in blocks if b[0] == "table"]
    assert header[1] == "GED ↓ (M = 16)" and [r[0] for r in body] == ["MV-UNet", "Prob. U-Net"]
    one = table.assign(n_samples=1)
    assert page.set_metrics_blocks(SimpleNamespace(table=one, stops={}, study=PAPER), cells) == []
