"""The figures of the reproduction page (bench/reproduce/page.py): each paper column's ranking with its bootstrap
uncertainty (bench/report/ranking.py) and rank plot, its significance map over every pair of methods and its ranks under
three ranking schemes (bench/report/significance.py, `ranking.scheme_ranks`), the box plots and learning curves of the report behind each table
with their captions, and the fused-label figure of a trained reference method.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bench import store
from bench.evaluate.metrics import higher_is_better
from bench.report import example_figures, plots, ranking, render, significance, tables
from bench.report.rows import display
from bench.reproduce.assessment import Assessment
from bench.reproduce.page_format import plural
from bench.reproduce.provenance import pipeline_line
from bench.reproduce.verdicts import digits, measured_reference, scale
from bench.run import resolve, split_cache
from bench.study import Column, Study

Shown = tuple  # a figure on the page: (PNG path, caption)

N_BOOT = 1000  # bootstrap resamples of each column's ranking (bench/report/ranking.py)
TEST = render.TEST_NAME  # the paired test the page and the box plots name: "seed-aware test (docs/methods.md#statistics)"


# --------------------------------------------------------------------------- rankings


@dataclass
class ColumnRanking:
    """One group's ranking of one paper column under the two-level bootstrap (bench/report/ranking.py)."""

    table: str  # the paper table's id
    column: Column
    dataset: str
    raters: str
    reference: str  # what the measurements are scored against
    shares: pd.DataFrame | None  # method × rank -> share of resamples (`ranking.rank_distribution`); None with < 2 rankable
    tau: tuple[float, float, float]  # Kendall τ with the paper's order and its 95 % interval; NaN with < 3 paper values
    n_tau: int  # methods with a paper value behind τ
    warning: str  # "pipeline check, not a verdict: …" (`pipeline_line`), "" for a verdict-grade group
    seeds: dict[str, int]  # method -> its seeds in the column
    significance: significance.SignificanceMap | None = None  # every pair of the methods with >= 2 seeds; None with < 2 such
    schemes: pd.DataFrame | None = None  # those methods' ranks under `ranking.SCHEMES` (method × scheme), with the map


def column_rows(table: pd.DataFrame, column: Column, dataset: str, raters: str, reference: str) -> pd.DataFrame:
    """The long table's rows of one column of one group at the protocol: method, seed, case, value."""
    rows = table[
        (table["dataset"] == dataset)
        & (table["raters"] == raters)
        & (table["noise"] == "protocol")
        & (table["reference"] == reference)
        & (table["metric"] == column.metric)
        & (table["structure"] == column.structure)
    ]
    return rows[["method", "seed", "case", "value"]]


def rank_columns(a: Assessment, cells: pd.DataFrame) -> dict[tuple, ColumnRanking]:
    """(table id, dataset, raters, column index) -> the column's ranking, for each group column with two or more trained
    methods (not the Average row, not the Oracle)."""
    out = {}
    for t in a.tables:
        for g in t.groups:
            for j, entries in g.entries.items():
                column = t.table.columns[j]
                trained = [e for e in entries if e.measured and e.measured.n and e.method not in ("average", a.study.oracle)]
                reference = measured_reference(column, g.dataset)
                rows = column_rows(a.table, column, g.dataset, g.raters, reference)
                if len(trained) < 2:
                    continue
                seeded, _ = ranking.rankable(rows, [e.method for e in trained])  # one seed: no seed level, no seed-aware test
                shares = (
                    ranking.rank_distribution(rows, seeded, higher_is_better(column.metric), N_BOOT, seed=0) if len(seeded) >= 2 else None
                )
                paper = {e.method: e.paper[0] for e in trained if e.paper and e.method in seeded}
                tau = ranking.kendall_interval(rows, paper, N_BOOT, seed=0) if len(paper) >= 3 else (math.nan,) * 3
                warning = pipeline_line(cells, g.dataset, g.raters, g)
                seeds = {e.method: rows.loc[rows["method"] == e.method, "seed"].nunique() for e in trained}
                r = ColumnRanking(t.table.id, column, g.dataset, g.raters, reference, shares, tau, len(paper), warning, seeds)
                if len(seeded) >= 2:
                    higher = higher_is_better(column.metric)
                    seeded = ranking.mean_then_rank(rows, seeded, higher).sort_values(kind="stable").index.tolist()  # best first
                    r.significance = significance.significance_map(rows, seeded, higher)
                    r.schemes = ranking.scheme_ranks(rows, seeded, higher, r.significance.better)
                out[(t.table.id, g.dataset, g.raters, j)] = r
    return out


# --------------------------------------------------------------------------- figures


def figure_files(
    assessment: Assessment, fig_dir: Path, data_root: Path, cells: pd.DataFrame, ranks: dict[tuple, ColumnRanking]
) -> dict[tuple, list[Shown]]:
    """Box plots and learning curves of every protocol group, the fused-label figure of each rater setting and the rank
    plot of each group column, each with its caption.

    Keys: ("boxplot" | "curves" | "fused", dataset, raters) and ("ranks" | "significance", table id, dataset, raters, column
    index). `cells` (`provenance`) gives the box plots' and learning curves' footer: the budget, seeds and pipeline-check
    status their cells ran under (`render.run_of`).
    """
    fig_dir.mkdir(parents=True, exist_ok=True)
    results, paper = assessment.results, assessment.study
    out: dict[tuple, list[Shown]] = {}
    if assessment.table.empty:  # nothing collected: no figure
        return out
    table = assessment.table[assessment.table["noise"] == "protocol"]
    groups = table[["dataset", "raters"]].drop_duplicates().itertuples(index=False)
    checks = {(d, r): pipeline_line(cells, d, r) for d, r in groups}
    for path in render.write_boxplots(paper, table, render.all_tests(paper, table), fig_dir, pipeline_checks=checks, cells=cells):
        if path.suffix == ".png":
            dataset, raters = _group_of(path.stem, table, "boxplot_dsc_")
            out.setdefault(("boxplot", dataset, raters), []).append((path, boxplot_caption(paper, path, table, dataset, raters, checks)))
    logs = assessment.logs
    if not logs.empty:
        for path in render.write_learning_curves(paper, logs[logs["noise"] == "protocol"], fig_dir, cells=cells):
            if path.suffix == ".png":
                diagnostic = not path.stem.startswith("learning")
                dataset, raters = _group_of(path.stem, table, "diagnostic_gt_dsc_" if diagnostic else "learning_curves_")
                out.setdefault(("curves", dataset, raters), []).append((path, curves_caption(dataset, raters, diagnostic)))
    for dataset, raters in sorted({(g.dataset, g.raters) for t in assessment.tables for g in t.groups}):
        path = fused_figure(paper, results, data_root, dataset, raters, fig_dir)
        if path is not None:
            caption = (
                f"{dataset}, raters `{raters}`: two training images, each rater's label, then the fused labels "
                f"{display(paper, paper.reference_method)} (seed 0) is trained with or against: the raters' "
                "average, STAPLE, the majority vote, its own fused labels (`Method.own_fused_labels`, each titled "
                "in the figure) and its predicted probability map."
            )
            out[("fused", dataset, raters)] = [(path, caption)]
    for key, r in ranks.items():
        if r.shares is not None:
            out[("ranks", *key)] = [rank_plot(paper, r, fig_dir)]
        if r.significance is not None:
            out[("significance", *key)] = [significance_plot(paper, r, fig_dir)]
    return out


def _group_of(stem: str, table: pd.DataFrame, prefix: str) -> tuple[str, str]:
    """The (dataset, raters) a figure's file stem belongs to (stems are `prefix` + tables.slug(dataset, raters, ...))."""
    for dataset, raters in table[["dataset", "raters"]].drop_duplicates().itertuples(index=False):
        if stem.startswith(prefix + tables.slug(dataset, raters, "protocol")):
            return dataset, raters
    return "", ""


def boxplot_caption(paper: Study, path: Path, table: pd.DataFrame, dataset: str, raters: str, checks: dict) -> str:
    reference = tables.default_reference(dataset)
    structure = path.stem.removeprefix("boxplot_dsc_" + tables.slug(dataset, raters, "protocol", reference) + "_")
    rows = table[
        (table["dataset"] == dataset) & (table["raters"] == raters) & (table["reference"] == reference) & (table["metric"] == "dsc")
    ]
    warning = checks.get((dataset, raters), "")
    return (
        f"{dataset}, raters `{raters}`, at the protocol: DSC (%) of each of the {rows['case'].nunique()} test cases against "
        f"{reference} ({structure}), averaged over each method's seeds; box: quartiles, whiskers: 1.5 × IQR, triangle: "
        f"mean. Above each box: the Holm-adjusted p of the {TEST} against {display(paper, paper.reference_method)}."
        + (f" **{_sentence(warning)}**" if warning else "")
    )


def _sentence(text: str) -> str:
    return text[0].upper() + text[1:] + "."


def curves_caption(dataset: str, raters: str, diagnostic: bool) -> str:
    if diagnostic:
        return (
            f"{dataset}, raters `{raters}`: validation DSC against ground truth during training, mean ± sd over seeds; a "
            "diagnostic only, never used to stop or to select a checkpoint."
        )
    return (
        f"{dataset}, raters `{raters}`: each method's validation loss (its own objective, against the raters) per stage, "
        "mean ± sd over seeds; dotted: the restored step."
    )


def rank_plot(paper: Study, r: ColumnRanking, fig_dir: Path) -> Shown:
    """The blob plot of one column's ranking, saved; its caption says what the circles and crosses are."""
    methods = list(r.shares.index)
    every = sorted(set(methods))
    where = f"{r.dataset}, raters `{r.raters}`: {column_name(r.column)} against {r.reference}"
    fig = plots.rank_figure(
        r.shares,
        f"{where.replace('`', '')}\nrank over {N_BOOT} bootstrap resamples (cases, then seed level)",
        {m: plots.method_color(paper, m, every) for m in methods},
        {m: display(paper, m) for m in methods},
        r.warning,
    )
    stem = f"ranks_{tables.slug(r.dataset, r.raters, r.table, r.column.metric, r.column.structure)}"
    path = plots.save(fig, fig_dir / stem)[0]
    caption = (
        f"{where} ({r.table}): each method's rank (1 = best) over {N_BOOT} two-level bootstrap resamples: the test "
        "cases drawn with replacement, the same for every method, and each method's seed level from its own t "
        "(bench/report/ranking.py). Circle area: "
        "the share of resamples at that rank; cross: the median rank; line: the central 95 % of ranks; methods "
        "ordered by mean rank."
        + (f" {tau_text(r)}." if r.n_tau >= 3 else "")
        + unranked(paper, r)
        + (f" **{_sentence(r.warning)}**" if r.warning else "")
    )
    return path, caption


def unranked(paper: Study, r: ColumnRanking) -> str:
    """ " Not ranked: X (1 seed) …", the column's methods with one seed (no seed level to resample), or ""."""
    left = [f"{display(paper, m)} ({n} seed)" for m, n in r.seeds.items() if n < 2]
    return f" Not ranked (one seed, no seed level to resample): {', '.join(left)}." if left else ""


def significance_plot(paper: Study, r: ColumnRanking, fig_dir: Path) -> Shown:
    """The significance map of one column (every pair of its methods with two or more seeds), saved, with its caption."""
    sig = r.significance
    where = f"{r.dataset}, raters `{r.raters}`: {column_name(r.column)} against {r.reference}"
    unit = " points" if scale(r.column.metric) == 100 else ""
    n_pairs = len(sig.tests)
    title = f"{where.replace('`', '')}\nevery pair, {TEST.split(' (')[0]}, Holm over {plural(n_pairs, 'pair')}"
    fig = significance.significance_figure(
        sig, title, {m: display(paper, m) for m in sig.methods}, scale(r.column.metric), digits(r.column.metric), r.warning
    )
    path = plots.save(fig, fig_dir / f"significance_{tables.slug(r.dataset, r.raters, r.table, r.column.metric, r.column.structure)}")[0]
    left = [f"{display(paper, m)} ({n} seed)" for m, n in r.seeds.items() if n < 2]
    caption = (
        f"{where} ({r.table}): every pair of methods by the {TEST}, Holm-adjusted over the column's "
        f"{plural(n_pairs, 'pair')}. Cell: the row's method against the column's, Δ of the means in the row's favour{unit} and its "
        f"Holm p; green: the row's method significantly better (p < {sig.alpha:g}), red: significantly worse, grey "
        "n.s.: not resolved."
        + (f" Left out (no seed-to-seed spread): {', '.join(left)}." if left else "")
        + (f" **{_sentence(r.warning)}**" if r.warning else "")
    )
    return path, caption


def fused_figure(paper: Study, results: Path, data_root: Path, dataset: str, raters: str, fig_dir: Path) -> Path | None:
    """The paper's fused-label figure (averaging, STAPLE, MV, the method's own fused labels, probability map) from the
    reference method's seed-0 cell: its trained weights reloaded (`resolve.load_trained`) and run on two training images;
    None where the cell is not finished or the method has no fused label of its own (`Method.has_own_fused_labels`)."""
    cell = store.Cell(dataset, raters, "protocol", paper.reference_method, 0)
    try:
        method = resolve.load_trained(store.cell_dir(results, cell))
    except (FileNotFoundError, ValueError):  # not run, or not finished: no figure
        return None
    if not method.has_own_fused_labels():  # the figure's subject: a fused label of the method's own
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a sparse pool's warning was printed when the cells ran
        train = split_cache.load_splits(split_cache.DataKey.of_cell(cell, data_root)).train
    if train.gt is None:
        return None
    idx = example_figures.example_indices(train, 2)
    title = f"{dataset}, raters {raters}: fused labels of two training images ({display(paper, cell.method)}, seed 0)"
    fig = example_figures.fused_label_figure(train.images, train.raters, train.rater_valid, method, idx, title, list(train.rater_names))
    return plots.save(fig, fig_dir / f"fused_labels_{tables.slug(dataset, raters)}")[0]


# --------------------------------------------------------------------------- the page


def column_name(column: Column) -> str:
    return column.metric + ("" if column.structure == "foreground" else f" ({column.structure})")


def tau_text(r: ColumnRanking) -> str:
    """τ with its bootstrap interval; where every resample gave the same τ (as printed) no zero-width interval is shown."""
    tau, low, high = r.tau
    spread = "the same in every bootstrap resample" if f"{low:.2f}" == f"{high:.2f}" else f"[95 % bootstrap interval {low:.2f}, {high:.2f}]"
    return f"Kendall τ with the paper's order {tau:.2f} {spread} over {r.n_tau} methods"
