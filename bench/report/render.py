"""`python -m bench report`: every table and figure of a collected results folder, in the paper's layout.

Reads only the tables `bench.store.collect` writes: `<results>/metrics.parquet` (per-case rows
against every reference, for box plots and tests), `summary.csv` (mean ± std over seeds from
`bench.evaluate.long_table.summarise`, with the "average" rater rows), `calibration.parquet`
(reliability bins) and `train_logs.parquet` (learning curves). File names carry the dataset, the
rater style, the noise level and, where it matters, the reference (`<d>_<raters>_<noise>_<ref>`):

- `table1_<d>_<raters>_<noise>_<ref>_<structure>.{md,tex}`: Table I style, DSC (%) ↑ and bAHD ↓,
  mean ± std over seeds, one file per headline reference (gt, majority, STAPLE); Average row (the raters' DSC
  against GT) first in the gt table (where the dataset has one), Oracle last; a method whose predictions were degenerate (manifest.json
  `degenerate.flag`) is marked `[empty 2/3]` and never bold. Bold only where the seed-aware test resolves the best
  from every other row (Holm-adjusted); unresolved leaders share the mark ≈ (bench/report/tables.py). A dataset without
  ground truth (LIDC) gets `table2_…` instead, with Table II's columns: DSC, bAHD, GED ↓ and Dice_match ↑ (against
  the rater set). `bench report --metrics hd95,assd,nsd` adds those hard metrics' columns to both (`extra`).
- `table3_<d>_<raters>_<noise>.{md,tex}`: Table III style, soft DSC / soft IoU (%) per structure
  against the rater mean, for datasets scored with soft metrics (RIGA).
- `table4_…`: Table IV style ablation rows (S … ‡), when LF-Net ablation variants were run.
- `set_metrics_<d>_<raters>_<noise>.{md,tex}`: the field's set metrics against the rater set (GED, GED_u, Dice_match,
  Dice_max, Dice_soft, Dice_personal), each header with its M, the perfect sampler's GED floor under it; written
  where a method with samples or per-rater outputs ran (`bench.report.tables.set_metrics_table`).
- `tables.md`: every Markdown table above in one file. Every table states under its title the budget, the seeds per
  method and whether its cells are a pipeline check (`bench.report.table_notes.run_line`, from the cells' config.json).
- `paired_tests.csv`: `bench.report.stats.paired_tests` for every metric and structure, LF-Net vs the
  paper's methods (family "main") and vs its ablation variants (family "ablation"), per reference; and every pair of
  the set-metrics table's methods on its metrics (family "set", Holm over the pairs of each column).
- `boxplot_dsc_…`: per-case DSC per method against the dataset's default reference, with the
  Holm-adjusted p of the seed-aware test (docs/methods.md#statistics) vs LF-Net above each box, or vs the best mean
  where LF-Net did not run (the title names which); a method without a DSC value is left out, named in the title.
- `noise_dsc_<d>_<raters>_<ref>_<structure>`: DSC against the realised Average DSC of the rater
  pool, one line per method, when the dataset was run at two or more noise levels.
- `rater_dsc_…`: heat map of each method's DSC against each rater alone (method × rater).
- `reliability_…`: reliability diagram of the foreground probability per method, against GT and
  against the rater mean, bins pooled over test cases and seeds, with each method's ECE.
- `learning_curves_…` (from `train_logs.parquet`): each method's validation loss per stage, mean ±
  std over seeds, with the restored step marked; and `diagnostic_gt_dsc_…` where the dataset has
  ground truth: validation DSC vs GT, a diagnostic only.

Every figure carries its run line (budget, seeds per method, pipeline-check status) as its footer, and the same text
in its files' metadata (`bench.report.plots.caveat`, `save`: PNG text "Description", PDF "Subject"), so that a copied
figure keeps its caveats; tests read it back with `bench.report.plots.saved_caption`.

Rooms: bench/report/rows.py (which methods, in which order, under which names), bench/report/tables.py
(the tables and their Markdown / LaTeX), bench/report/plots.py (the figures); this module reads
the collected tables, runs the paired tests and writes every file.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bench import store
from bench.evaluate import long_table, metrics
from bench.evaluate.long_table import ordered_structures
from bench.report import stats, stop_audit
from bench.report.plots import (
    boxplot_figure,
    caveat,
    diagnostic_figure,
    learning_curve_figure,
    method_color,
    noise_figure,
    save,
)
from bench.report.rater_figures import rater_heatmap_figure, reliability_figure
from bench.report.rows import AVERAGE, ablation_methods, display, figure_methods, main_methods, registry_order
from bench.report.table_notes import run_records, run_text, samples_note
from bench.report.tables import SET_TABLE, default_reference, slug, write_tables
from bench.results_folder import ResultsFolder
from bench.study import Study
from datasets.raters import RATER_NAMES

# --------------------------------------------------------------------------- tables


# --------------------------------------------------------------------------- statistics


def all_tests(paper: Study, table: pd.DataFrame) -> pd.DataFrame:
    """Paired tests of LF-Net for every structure × metric: vs the paper's methods and, separately, vs its ablations;
    and every pair of the paper's methods on the set-metrics table's metrics (family "set", `set_tests`).

    Against the headline references, the rater set and the rater mean; not against each rater alone
    (the heat map shows those), which would only multiply the families.
    """
    table = table[~table["reference"].str.startswith("rater:")]
    names, reference = set(table["method"]), paper.reference_method
    families = {
        "main": [m for m in main_methods(paper, names) if m != reference],
        "ablation": [m for m in ablation_methods(paper, names) if m != reference],
    }
    frames = []
    for structure in ordered_structures(set(table["structure"])):
        for metric in sorted(set(table.loc[table["structure"] == structure, "metric"])):
            higher = metrics.higher_is_better(metric)
            for family, others in families.items():
                if others:
                    tests = stats.paired_tests(paper, table, metric, structure, reference, higher, others=others)
                    frames.append(tests.assign(family=family))
    frames.append(set_tests(paper, table))
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame(columns=[*stats.TEST_COLUMNS, "family"])
    return pd.concat(frames, ignore_index=True)


def set_tests(paper: Study, table: pd.DataFrame) -> pd.DataFrame:
    """Every pair of the paper's methods on each set-metrics column (`SET_TABLE` against the rater set), Holm over the
    pairs of one column (`bench.report.stats.every_pair`), family "set"; methods scored at another M are left out
    (`samples_note`), and a group where no method scored more than one segmentation has no rows (no set-metrics table)."""
    rows = table[(table["reference"] == "raters") & table["metric"].isin(SET_TABLE)]
    if rows.empty or "n_samples" not in rows or not (rows["n_samples"] > 1).any():
        return pd.DataFrame(columns=[*stats.TEST_COLUMNS, "family"])
    apart = samples_note(paper, table)
    drawn = set(rows.loc[rows["n_samples"] > 1, ["dataset", "raters", "noise"]].itertuples(index=False, name=None))
    out = []
    for (dataset, raters, noise, structure, metric), part in rows.groupby(["dataset", "raters", "noise", "structure", "metric"], sort=True):
        if (dataset, raters, noise) not in drawn:
            continue
        left_out = apart.get((dataset, raters, noise), ("", set()))[1] if metrics.get(metric).outputs == "samples" else set()
        for r in stats.every_pair(part, main_methods(paper, set(part["method"]) - left_out), metrics.higher_is_better(metric)):
            out.append(
                {
                    "dataset": dataset,
                    "raters": raters,
                    "noise": noise,
                    "reference": "raters",
                    "structure": structure,
                    "metric": metric,
                    **r,
                    "family": "set",
                }
            )
    return pd.DataFrame(out, columns=[*stats.TEST_COLUMNS, "family"])


# --------------------------------------------------------------------------- figures


def seeds_shown(paper: Study, frame: pd.DataFrame, column: str = "seed") -> dict[str, int]:
    """Method display name -> its seeds in `frame`: the distinct `seed` values, or the largest `n_seeds` (summaries)."""
    frame = frame[frame["method"] != AVERAGE]
    counts = frame.groupby("method")[column].nunique() if column == "seed" else frame.groupby("method")[column].max()
    return {display(paper, m): int(counts[m]) for m in registry_order(counts.index) if pd.notna(counts[m])}  # in table order


def run_of(cells: pd.DataFrame | None, seeds: dict[str, int], dataset: str, raters: str, noise: str | None = None) -> str:
    """A figure's run line (`bench.report.table_notes.run_text`) from the `run_records` of its dataset × raters (× noise)."""
    here = None
    if cells is not None:
        here = cells[(cells["dataset"] == dataset) & (cells["raters"] == raters) & ((cells["noise"] == noise) if noise else True)]
    return run_text(seeds, here)


# --------------------------------------------------------------------------- render


def read_inputs(results_dir: Path | ResultsFolder) -> tuple[pd.DataFrame, pd.DataFrame]:
    folder = ResultsFolder.of(results_dir)
    return folder.read_collected(store.METRICS), folder.read_summary()


def render(
    paper: Study, results_dir: Path | ResultsFolder, out_dir: Path, audit: Path | None = None, extra: tuple[str, ...] = ()
) -> list[Path]:
    """Write every table and figure for `<results_dir>`'s collected results into `out_dir`, its rows those of the study
    `paper` (bench/report/rows.py); return the written paths (sorted).

    Reads only the collected tables (see the module docstring). An empty results table writes nothing and returns [].
    `audit`: the folder whose stop audit flags the methods (`stop_audit.failures`; default `results_dir`), named atop
    each table when it is another. `extra`: hard metrics added as columns of Tables I and II (`bench report --metrics`).
    """
    results_dir, out_dir = ResultsFolder.of(results_dir), Path(out_dir)  # the folder read once
    table, summary = read_inputs(results_dir)
    if table.empty:
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    cells = run_records(results_dir)
    written += write_tables(
        paper,
        summary,
        out_dir,
        outcomes=ResultsFolder.of(results_dir).training_outcomes,
        note="" if audit is None else f"stop-audit flags from {audit / store.STOP_AUDIT} (another run of the same rule)",
        samples=samples_note(paper, table),
        audit=stop_audit.failures(results_dir, audit),
        cells=cells,
        cases=table,
        extra=extra,
    )
    tests = all_tests(paper, table)
    written.append(write_tests(tests, out_dir))
    written += write_boxplots(paper, table, tests, out_dir, cells=cells)
    written += write_noise_figures(paper, summary, out_dir, cells=cells)
    written += write_rater_heatmaps(paper, summary, out_dir, cells=cells)
    for name, writer in ((store.CALIBRATION_BINS, write_reliability), (store.TRAIN_LOGS, write_learning_curves)):
        collected = results_dir.read_collected(name)
        if not collected.empty:
            written += writer(paper, collected, out_dir, cells=cells)
    written += write_test_curves(paper, results_dir, out_dir, cells)
    return sorted(written)


def write_test_curves(paper: Study, results_dir: Path, out_dir: Path, cells: pd.DataFrame) -> list[Path]:
    """Per dataset × raters × noise whose cells kept a test curve: each method's test DSC along its trajectory, against
    the epoch where every cell ran the paper's recipe, else the step (`trajectory_audit.curves`)."""
    from bench.report.trajectory_audit import curves, test_curves

    written, data = [], test_curves(results_dir)
    for (dataset, raters, noise), part in data.groupby(["dataset", "raters", "noise"], sort=True):
        here = cells[(cells["dataset"] == dataset) & (cells["raters"] == raters) & (cells["noise"] == noise)]
        by = "epoch" if len(here) and here["budget"].str.startswith("paper").all() else "step"
        fig = caveat(curves(paper, part, by=by), run_of(cells, seeds_shown(paper, part), dataset, raters, noise))
        written += save(fig, out_dir / f"test_curve_{slug(dataset, raters, noise)}")
    return written


def write_tests(tests: pd.DataFrame, out_dir: Path) -> Path:
    path = out_dir / "paired_tests.csv"
    tests.to_csv(path, index=False, float_format="%.6g")
    return path


def write_learning_curves(paper: Study, logs: pd.DataFrame, out_dir: Path, note: str = "", cells: pd.DataFrame | None = None) -> list[Path]:
    """Per dataset × raters × noise: the validation-loss curves, and where ground truth exists the diagnostic DSC curves.

    `cells` (`run_records`) gives each figure's footer (`run_of`); the keyword arguments `cells` of the writers below
    are the same."""
    written = []
    if logs.empty or "val_loss" not in logs:
        return written
    for (dataset, raters, noise), part in logs.groupby(["dataset", "raters", "noise"], sort=True):
        names = list(part["method"].unique())
        methods = list(dict.fromkeys([*main_methods(paper, names), *ablation_methods(paper, names), *names]))
        where, stem = f"{dataset} (raters {raters}, noise {noise})", slug(dataset, raters, noise)
        title = f"{where}: validation loss per stage; dotted: restored step"
        run = run_of(cells, seeds_shown(paper, part), dataset, raters, noise)
        fig = learning_curve_figure(paper, part, methods, f"{note}\n{title}" if note else title)
        written += save(caveat(fig, run), out_dir / f"learning_curves_{stem}")
        if "diagnostic_gt_dsc" in part and part["diagnostic_gt_dsc"].notna().any():
            title = f"{where}: validation DSC vs ground truth\na diagnostic only, never used to stop or select"
            fig = diagnostic_figure(paper, part, methods, names, f"{note}\n{title}" if note else title)
            written += save(caveat(fig, run), out_dir / f"diagnostic_gt_dsc_{stem}")
    return written


def write_rater_heatmaps(
    paper: Study, summary: pd.DataFrame, out_dir: Path, note: str = "", cells: pd.DataFrame | None = None
) -> list[Path]:
    """Per dataset × raters × noise × structure: each method's DSC against each rater alone (method × rater heat map)."""
    written = []
    per_rater = summary[summary["reference"].str.startswith("rater:") & (summary["metric"] == "dsc")]
    for (dataset, raters, noise, structure), part in per_rater.groupby(["dataset", "raters", "noise", "structure"], sort=True):
        names = set(part["method"])
        order = figure_methods(paper, names)
        if not order:  # only parameter cells (lf-net@beta=2): their figures are the parameter curves
            continue
        names = set(r.removeprefix("rater:") for r in part["reference"])
        rater_names = [r for r in RATER_NAMES if r in names] + sorted(names - set(RATER_NAMES))
        title = f"{dataset} (raters {raters}, noise {noise}, {structure}):\ntest DSC against each rater, mean over seeds"
        fig = rater_heatmap_figure(part, order, rater_names, f"{note}\n{title}" if note else title, {m: display(paper, m) for m in order})
        run = run_of(cells, seeds_shown(paper, part[part["method"].isin(order)], "n_seeds"), dataset, raters, noise)
        written += save(caveat(fig, run), out_dir / f"rater_dsc_{slug(dataset, raters, noise, structure)}")
    return written


def write_reliability(
    paper: Study, calibration: pd.DataFrame, out_dir: Path, note: str = "", cells: pd.DataFrame | None = None
) -> list[Path]:
    """Per dataset × raters × noise × structure: a reliability diagram per reference (gt, rater mean), bins pooled over seeds."""
    written = []
    if calibration.empty:
        return written
    bins = long_table.pooled_bins(calibration)
    for (dataset, raters, noise, structure), part in bins.groupby(["dataset", "raters", "noise", "structure"], sort=True):
        names = set(part["method"])
        order = figure_methods(paper, names)
        if not order:  # only parameter cells (lf-net@beta=2): their figures are the parameter curves
            continue
        every = sorted(names)
        title = f"{dataset} (raters {raters}, noise {noise}, {structure}): reliability of the foreground probability"
        fig = reliability_figure(
            part,
            order,
            {m: method_color(paper, m, every) for m in order},
            f"{note}\n{title}" if note else title,
            {m: display(paper, m) for m in order},
        )
        raw = calibration[
            (calibration["dataset"] == dataset)
            & (calibration["raters"] == raters)
            & (calibration["noise"] == noise)
            & calibration["method"].isin(order)
        ]
        run = run_of(cells, seeds_shown(paper, raw), dataset, raters, noise)
        written += save(caveat(fig, run), out_dir / f"reliability_{slug(dataset, raters, noise, structure)}")
    return written


#: The test whose Holm-adjusted p the box plots print (bench/report/stats.py); named the same on the reproduction page.
TEST_NAME = "seed-aware test (docs/methods.md#statistics)"


def write_boxplots(
    paper: Study,
    table: pd.DataFrame,
    tests: pd.DataFrame,
    out_dir: Path,
    note: str = "",
    pipeline_checks: dict[tuple[str, str], str] | None = None,
    cells: pd.DataFrame | None = None,
) -> list[Path]:
    """Per-case DSC per method against the dataset's default reference (gt where it exists, else the majority).

    The p above each box: the Holm-adjusted seed-aware test against `paper`'s reference method, LF-Net (`tests`, family
    "main") where it ran, else
    against the method with the best mean (`boxplot_tests`); the title names which. A method without a DSC value in
    the group is left out and named in the title. `pipeline_checks` maps (dataset, raters) to a line drawn in red on
    that group's figures ("pipeline check, not a verdict: budget quick"), so that a figure says so wherever it is shown.
    """
    pipeline_checks = pipeline_checks or {}
    written = []
    all_methods = sorted(set(table["method"]))
    dsc_structures = ordered_structures(set(table.loc[table["metric"] == "dsc", "structure"]))
    for structure in dsc_structures:
        cases = long_table.per_case(table, "dsc", structure)
        for group, part in cases.groupby(long_table.GROUP, sort=True):
            dataset, raters, noise, reference = group
            present = main_methods(paper, set(part["method"]))
            if not present or reference != default_reference(dataset):
                continue
            valued = set(part.loc[part["value"].notna(), "method"])
            methods, empty = [m for m in present if m in valued], [m for m in present if m not in valued]
            if not methods:
                continue
            part = part[part["method"].isin(methods)]
            against, here = boxplot_tests(paper, table, tests, group, structure, methods)
            n_cases = part["case"].nunique()
            if against is None:
                tested = "one method: no test"
            elif against == paper.reference_method:
                tested = f"Holm-adjusted p vs {display(paper, against)} of the\n{TEST_NAME}"
            else:
                ours = display(paper, paper.reference_method)
                tested = f"Holm-adjusted p vs {display(paper, against)} (best mean; no {ours} run) of the\n{TEST_NAME}"
            title = (
                f"{dataset}: per-case DSC, {n_cases} test cases\n"
                f"raters {raters}, noise {noise}, against {reference}, structure: {structure}\n{tested}"
                + (f"\nno DSC value, left out: {', '.join(display(paper, m) for m in empty)}" if empty else "")
            )
            warning = pipeline_checks.get((dataset, raters), "")
            fig = boxplot_figure(paper, part, here, methods, all_methods, f"{note}\n{title}" if note else title, warning, against or "")
            run = run_of(cells, seeds_shown(paper, part, "n_seeds"), dataset, raters, noise)
            written += save(caveat(fig, run), out_dir / f"boxplot_dsc_{slug(dataset, raters, noise, reference, structure)}")
    return written


def boxplot_tests(
    paper: Study, table: pd.DataFrame, tests: pd.DataFrame, group: tuple, structure: str, methods: list[str]
) -> tuple[str | None, pd.DataFrame]:
    """(the method a box plot's p-values are against, its tests: rows with `method` and `p_holm`): LF-Net and its family
    "main" rows of `tests` where it is among `methods`; else the best mean DSC, tested here against each other method
    (`bench.report.stats.leader_tests`, Holm over those); (None, no rows) with one method."""
    if paper.reference_method in methods:
        here = tests[
            (tests["family"] == "main")
            & (tests["metric"] == "dsc")
            & (tests["structure"] == structure)
            & (tests[long_table.GROUP] == pd.Series(group, index=long_table.GROUP)).all(axis=1)
        ]
        return paper.reference_method, here
    if len(methods) < 2:
        return None, pd.DataFrame(columns=["method", "p_holm"])
    rows = table[
        (table["metric"] == "dsc")
        & (table["structure"] == structure)
        & (table[long_table.GROUP] == pd.Series(group, index=long_table.GROUP)).all(axis=1)
        & table["method"].isin(methods)
    ]
    best = rows.groupby("method")["value"].mean().idxmax()
    found = stats.leader_tests(rows, best, [m for m in methods if m != best])
    return best, pd.DataFrame([{"method": m, "p_holm": r["p_holm"]} for m, r in found.items()], columns=["method", "p_holm"])


def write_noise_figures(
    paper: Study, summary: pd.DataFrame, out_dir: Path, note: str = "", cells: pd.DataFrame | None = None
) -> list[Path]:
    """Test DSC against the realised Average DSC of the rater pool, per dataset × raters, when two or more noise levels ran."""
    written = []
    all_methods = sorted(set(summary["method"]))
    dsc = summary[summary["metric"] == "dsc"]
    for (dataset, raters), part in dsc.groupby(["dataset", "raters"], sort=True):
        reference = default_reference(dataset)
        averages = part[part["method"] == AVERAGE]
        runs = part[(part["method"] != AVERAGE) & (part["reference"] == reference)]
        if runs["noise"].nunique() < 2:  # one noise level: no curve to draw
            continue
        methods = main_methods(paper, set(runs["method"])) + ([paper.oracle] if paper.oracle in set(runs["method"]) else [])
        for structure in ordered_structures(set(runs["structure"])):
            rows = runs[runs["structure"] == structure]
            levels = ", ".join(sorted(rows["noise"].unique()))
            title = f"{dataset}: test DSC vs annotation noise\nraters {raters}, against {reference}, structure: {structure}, noise levels {levels}"
            fig = noise_figure(paper, rows, averages, methods, all_methods, f"{note}\n{title}" if note else title)
            run = run_of(cells, seeds_shown(paper, rows[rows["method"].isin(methods)], "n_seeds"), dataset, raters)
            written += save(caveat(fig, run), out_dir / f"noise_dsc_{slug(dataset, raters, reference, structure)}")
    return written
