"""Tables and figures in the paper's layout from the collected results (DESIGN §7, §8: `python -m bench report`).

Reads only the tables `bench.store.collect` writes: `<results>/metrics.parquet` (per-case rows
against every reference, for box plots and tests), `summary.csv` (mean ± std over seeds from
`bench.evaluate.tables.summarise`, with the "average" rater rows), `calibration.parquet`
(reliability bins) and `train_logs.parquet` (learning curves). File names carry the dataset, the
rater style, the noise level and, where it matters, the reference (`<d>_<raters>_<noise>_<ref>`):

- `table1_<d>_<raters>_<noise>_<ref>_<structure>.{md,tex}`: Table I style, DSC (%) ↑ and bAHD ↓,
  mean ± std over seeds, one file per headline reference (gt, majority, STAPLE); Average row first
  (where the dataset has one), Oracle last. A dataset without ground truth (LIDC) gets `table2_…`
  instead, with Table II's columns: DSC, bAHD, GED ↓ and Dice_match ↑ (against the rater set).
- `table3_<d>_<raters>_<noise>.{md,tex}`: Table III style, soft DSC / soft IoU (%) per structure
  against the rater mean, for datasets scored with soft metrics (RIGA).
- `table4_…`: Table IV style ablation rows (S … ‡), when LF-Net ablation variants were run.
- `tables.md`: every Markdown table above in one file.
- `paired_tests.csv`: `bench.stats.paired_tests` for every metric and structure, LF-Net vs the
  paper's methods (family "main") and vs its ablation variants (family "ablation"), per reference.
- `boxplot_dsc_…`: per-case DSC per method against the dataset's default reference, with the
  Holm-adjusted Wilcoxon p-value vs LF-Net above each box.
- `noise_dsc_<d>_<raters>_<ref>_<structure>`: DSC against the realised Average DSC of the rater
  pool, one line per method, when the dataset was run at two or more noise levels.
- `rater_dsc_…`: heat map of each method's DSC against each rater alone (method × rater).
- `reliability_…`: reliability diagram of the foreground probability per method, against GT and
  against the rater mean, bins pooled over test cases and seeds, with each method's ECE.
- `learning_curves_…` (from `train_logs.parquet`): each method's validation loss per stage, mean ±
  std over seeds, with the restored step marked; and `diagnostic_gt_dsc_…` where the dataset has
  ground truth: validation DSC vs GT, a diagnostic only.

Bold rule (as the paper): the best mean per column, compared at the printed precision so that
equal-looking values are bolded alike, over the method rows only — Average and Oracle are never
bold (Tables I–III); in the ablation table every row competes.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib import MatplotlibDeprecationWarning
from matplotlib.figure import Figure
from matplotlib.transforms import blended_transform_factory

import methods
from bench import figures, stats, store, study
from bench.evaluate import metrics, tables
from bench.evaluate.scoring import HEADLINE
from bench.evaluate.tables import ordered_structures
from datasets.raters import RATER_NAMES
from methods.registry import PARAM_SEP

# --------------------------------------------------------------------------- method names and order

REFERENCE_METHOD = study.current().reference_method  # the paper's "ours": the reference of every paired test
AVERAGE = "average"
ORACLE = study.current().oracle


def entry(method: str) -> methods.MethodEntry | None:
    """The registry entry behind a row's name; None for the Average/Oracle rows, parameter cells and names no longer registered."""
    if is_param_variant(method) or method in (AVERAGE, ORACLE):
        return None
    try:
        return methods.get_entry(method)
    except methods.UnknownMethodError:
        return None


def table_of(method: str) -> str | None:
    """Which table a row belongs to (registry `table`); a name no longer registered goes to Table I; parameter cells to none."""
    if is_param_variant(method) or method in (AVERAGE, ORACLE):
        return None
    found = entry(method)
    return found.table if found else "main"


def is_ablation(method: str) -> bool:
    return table_of(method) in ("ablation", "ablation-text")


def is_param_variant(method: str) -> bool:
    """A parameter-sweep cell (`lf-net@beta=3`): drawn in the parameter figures, not in the tables."""
    return PARAM_SEP in method


def registry_order(names) -> list[str]:
    """`names` in registration order (the import list of methods/__init__.py), unregistered names after, alphabetically."""
    names = set(names)
    known = [m for m in methods.method_names() if m in names]
    return known + sorted(names - set(known))


def main_methods(names) -> list[str]:
    """Table I rows present, in registration order; no Oracle, Average, ablations or parameter variants."""
    return registry_order(n for n in names if table_of(n) == "main")


def ablation_methods(names) -> list[str]:
    """Table IV rows present, in registration order, with the full model (LF-Net) where its entry places it."""
    rows = registry_order(n for n in names if is_ablation(n))
    full = entry(REFERENCE_METHOD)
    if REFERENCE_METHOD in set(names) and full is not None:
        registered = methods.method_names()
        after = registered.index(full.ablation_after) if full.ablation_after in registered else len(registered)
        later = [i for i, r in enumerate(rows) if r not in registered or registered.index(r) > after]
        rows.insert(later[0] if later else len(rows), REFERENCE_METHOD)
    return rows


def display(method: str, table: str = "main") -> str:
    """A row's label: the registry's display name (Table IV: the full model's `ablation_label`); else the name itself."""
    if method in (AVERAGE, ORACLE):
        return method.capitalize()
    found = entry(method)
    if found is None:
        return method
    return found.ablation_label if table == "ablation" and found.ablation_label else found.display


# --------------------------------------------------------------------------- tables


@dataclass(frozen=True)
class Column:
    structure: str
    metric: str
    markdown: str  # header text
    latex: str
    scale: float  # 100 for fractions shown in %
    digits: int
    higher_is_better: bool


@dataclass
class Cell:
    text: str  # mean, or "N/A" / "–" when missing
    std: str | None = None
    bold: bool = False


@dataclass
class Table:
    title: str
    label_header: str
    columns: list[Column]
    labels: list[str] = field(default_factory=list)
    rows: list[list[Cell]] = field(default_factory=list)
    italic: list[bool] = field(default_factory=list)  # Average and Oracle, as \emph in the paper
    rule_before: set[int] = field(default_factory=set)  # row indices preceded by a light rule


def column(metric: str, structure: str, named: bool = False) -> Column:
    """A table column from the metric's descriptor (bench/evaluate/metrics.py); `named` puts the structure in the header."""
    m = metrics.get(metric)
    shown = structure if named else None
    return Column(structure, metric, m.header(shown), m.header(shown, latex=True), m.scale, m.digits, m.higher_is_better)


def table_columns(table: str, structure: str, named: bool = False) -> list[Column]:
    """The columns of one kind of table ("table1", "table2", "table3"), in the metrics' registration order."""
    return [column(m.name, structure, named) for m in metrics.in_table(table)]


def has_gt(dataset: str) -> bool:
    from datasets import DATASETS

    return dataset not in DATASETS or DATASETS[dataset].reference == "gt"


def soft_metrics(dataset: str) -> bool:
    from datasets import DATASETS

    return dataset in DATASETS and DATASETS[dataset].soft_metrics


def build_table(
    summary: pd.DataFrame,
    columns: list[Column],
    methods: list[str],
    title: str,
    label_header: str,
    table_name: str,
    compete_all: bool,
) -> Table:
    """Rows = [Average] + methods + [Oracle] (those present), cells mean ± std, the best bolded (see module doc)."""
    lookup = {(r["method"], r["structure"], r["metric"]): (r["mean"], r["std"]) for r in summary.to_dict("records")}
    has = {m for m, s, k in lookup if (s, k) in {(c.structure, c.metric) for c in columns}}
    order = ([AVERAGE] if AVERAGE in has else []) + [m for m in methods if m in has] + ([ORACLE] if ORACLE in has else [])
    table = Table(title, label_header, columns)
    for method in order:
        table.labels.append(display(method, table_name))
        table.italic.append(method in (AVERAGE, ORACLE))
        table.rows.append([cell(lookup.get((method, c.structure, c.metric)), c, method == AVERAGE) for c in columns])
    if order and order[0] == AVERAGE and len(order) > 1:
        table.rule_before.add(1)
    if order and order[-1] == ORACLE and len(order) > 1:
        table.rule_before.add(len(order) - 1)
    for i, method in enumerate(order):
        if table_of(method) == "ablation-text" and not any(table_of(m) == "ablation-text" for m in order[:i]):
            table.rule_before.add(i)
    competing = [i for i, m in enumerate(order) if compete_all or m not in (AVERAGE, ORACLE)]
    for j, column in enumerate(columns):
        mark_best(table, j, column, competing, [lookup.get((order[i], column.structure, column.metric)) for i in competing])
    return table


def cell(value: tuple[float, float] | None, column: Column, is_average: bool) -> Cell:
    if value is None or pd.isna(value[0]):
        return Cell("N/A" if is_average else "–")  # the paper writes N/A where Average has no value
    mean, std = value
    std_text = None if pd.isna(std) else f"{std * column.scale:.{column.digits}f}"
    return Cell(f"{mean * column.scale:.{column.digits}f}", std_text)


def mark_best(table: Table, j: int, column: Column, rows: list[int], values: list) -> None:
    """Bold every competing row whose mean, rounded as printed, equals the best rounded mean of column j."""
    rounded = {i: round(v[0] * column.scale, column.digits) for i, v in zip(rows, values) if v is not None and not pd.isna(v[0])}
    if not rounded:
        return
    best = max(rounded.values()) if column.higher_is_better else min(rounded.values())
    for i, value in rounded.items():
        if value == best:
            table.rows[i][j].bold = True


def to_markdown(table: Table) -> str:
    lines = [f"### {table.title}", "", "| " + " | ".join([table.label_header, *(c.markdown for c in table.columns)]) + " |"]
    lines.append("|:--" + "|--:" * len(table.columns) + "|")
    for label, row, italic in zip(table.labels, table.rows, table.italic):
        texts = [markdown_cell(c) for c in row]
        lines.append("| " + " | ".join([f"*{label}*" if italic else label, *texts]) + " |")
    return "\n".join(lines) + "\n"


def markdown_cell(c: Cell) -> str:
    text = c.text if c.std is None else f"{c.text} ± {c.std}"
    return f"**{text}**" if c.bold else text


def to_latex(table: Table) -> str:
    """A booktabs tabular (\\input it inside a table environment); the caption is the leading comment."""
    lines = [
        f"% {latex_text(table.title)}",
        r"\begin{tabular}{l" + "c" * len(table.columns) + "}",
        r"\toprule",
        " & ".join([latex_text(table.label_header), *(c.latex for c in table.columns)]) + r" \\",
        r"\midrule",
    ]
    for i, (label, row, italic) in enumerate(zip(table.labels, table.rows, table.italic)):
        if i in table.rule_before:
            lines.append(r"\midrule")
        label = latex_text(label)
        lines.append(" & ".join([rf"\emph{{{label}}}" if italic else label, *(latex_cell(c) for c in row)]) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def latex_cell(c: Cell) -> str:
    def b(text: str) -> str:
        return rf"\textbf{{{text}}}" if c.bold else text

    text = latex_text(c.text)
    return b(text) if c.std is None else rf"{b(text)} $\pm$ {b(c.std)}"  # bold like the paper: mean and std


LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\~{}", "^": r"\^{}"}  # fmt: skip
LATEX_UNICODE = {"†": r"$\dagger$", "‡": r"$\ddagger$", "→": r"$\rightarrow$", "±": r"$\pm$", "↑": r"$\uparrow$", "↓": r"$\downarrow$", "–": "--", "×": r"$\times$"}  # fmt: skip


def latex_text(text: str) -> str:
    """Escape TeX specials and map the few Unicode symbols the tables use to math-mode commands."""
    return "".join(LATEX_UNICODE.get(ch, LATEX_SPECIAL.get(ch, ch)) for ch in str(text))


def group_title(kind: str, group: tuple, structure: str | None = None) -> str:
    dataset, raters, noise, reference = group
    where = f", {structure}" if structure else ""
    return f"{kind}: {dataset} (raters {raters}, noise {noise}; against {reference}{where}); mean ± std over seeds"


def slug(*parts) -> str:
    """File-name part: anything outside [A-Za-z0-9.-] replaced by '-'."""
    return "_".join(re.sub(r"[^A-Za-z0-9.-]+", "-", str(p)) for p in parts)


def group_tables(part: pd.DataFrame, group: tuple) -> list[tuple[str, Table]]:
    """(file stem, table) for one dataset × raters × noise × headline reference of the summary.

    `part` holds that reference's rows, the Average rows, and the rows against the rater set
    (GED, Dice_match) and the rater mean (soft DSC / IoU), which do not depend on the headline reference.
    Datasets without ground truth (real raters: LIDC, RIGA) get Table II's columns, DSC, bAHD, GED
    and Dice_match; a dataset scored with soft metrics (RIGA) gets Table III, soft DSC / IoU per structure.
    """
    dataset, raters, noise, reference = group
    out = []
    pairs = set(zip(part["structure"], part["metric"]))
    methods_here = set(part["method"])
    main = main_methods(methods_here)
    base = slug(dataset, raters, noise, reference)
    real = not has_gt(dataset)
    if main or ORACLE in methods_here:
        for structure in ordered_structures({s for s, k in pairs if k in ("dsc", "bahd")}):
            columns = table_columns("table2" if real else "table1", structure)
            kind = "DSC (%) ↑, bAHD ↓, GED ↓ and Dice_match (%) ↑" if real else "DSC (%) ↑ and bAHD ↓"
            table = build_table(part, columns, main, group_title(kind, group, structure), "Methods", "main", compete_all=False)
            out.append((f"{'table2' if real else 'table1'}_{base}_{slug(structure)}", table))
        soft = [
            c for s in ordered_structures({s for s, _ in pairs}) for c in table_columns("table3", s, named=True) if (s, c.metric) in pairs
        ]
        if soft and soft_metrics(dataset):
            title = group_title("soft DSC and soft IoU (%) ↑", (dataset, raters, noise, "the rater mean"))
            out.append(
                (f"table3_{slug(dataset, raters, noise)}", build_table(part, soft, main, title, "Methods", "main", compete_all=False))
            )
    ablation = ablation_methods(methods_here)
    if any(m != REFERENCE_METHOD for m in ablation):
        rows = part[part["method"].isin(ablation)]
        row_pairs = set(zip(rows["structure"], rows["metric"]))
        ablation_metrics = [m.name for m in metrics.in_table("ablation")]  # per structure the last it has: soft DSC on RIGA, else DSC
        columns = [
            column(next(k for k in reversed(ablation_metrics) if (s, k) in row_pairs), s, named=True)
            for s in ordered_structures({s for s, k in row_pairs if k in ablation_metrics})
        ]
        title = group_title("ablation, DSC (%) ↑", group)
        out.append((f"table4_{base}", build_table(rows, columns, ablation, title, "Variant", "ablation", compete_all=True)))
    return out


# --------------------------------------------------------------------------- statistics


def all_tests(table: pd.DataFrame) -> pd.DataFrame:
    """Paired tests of LF-Net for every structure × metric: vs the paper's methods and, separately, vs its ablations.

    Against the headline references, the rater set and the rater mean; not against each rater alone
    (the heat map shows those), which would only multiply the families.
    """
    table = table[~table["reference"].str.startswith("rater:")]
    names = set(table["method"])
    families = {
        "main": [m for m in main_methods(names) if m != REFERENCE_METHOD],
        "ablation": [m for m in ablation_methods(names) if m != REFERENCE_METHOD],
    }
    frames = []
    for structure in ordered_structures(set(table["structure"])):
        for metric in sorted(set(table.loc[table["structure"] == structure, "metric"])):
            higher = metrics.higher_is_better(metric)
            for family, others in families.items():
                if others:
                    tests = stats.paired_tests(table, metric, structure, REFERENCE_METHOD, higher, others=others)
                    frames.append(tests.assign(family=family))
    if not frames:
        return pd.DataFrame(columns=[*stats.TEST_COLUMNS, "family"])
    return pd.concat(frames, ignore_index=True)


# --------------------------------------------------------------------------- figures

PALETTE = sns.color_palette("tab10") + sns.color_palette("Dark2")


def method_color(method: str, all_methods: list[str]):
    """A fixed colour per method, so a method looks the same in every figure of one report."""
    order = [*main_methods(methods.method_names()), ORACLE, *registry_order(set(all_methods) - set(methods.method_names()) - {ORACLE})]
    order += [m for m in registry_order(all_methods) if m not in order]
    return PALETTE[order.index(method) % len(PALETTE)]


def format_p(p: float) -> str:
    if pd.isna(p):
        return "p n/a"
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"


def save(fig: Figure, stem: Path) -> list[Path]:
    """PNG and PDF; the PDF's creation date is dropped so that a rerun writes the same bytes."""
    png, pdf = stem.parent / f"{stem.name}.png", stem.parent / f"{stem.name}.pdf"  # not with_suffix: "noise0.5" has a dot
    fig.savefig(png, dpi=150)
    fig.savefig(pdf, metadata={"CreationDate": None})
    return [png, pdf]


def boxplot_figure(cases: pd.DataFrame, tests: pd.DataFrame, methods: list[str], all_methods: list[str], title: str) -> Figure:
    """Per-case DSC (%) per method; Holm-adjusted p vs LF-Net written above each other box."""
    labels = [display(m) for m in methods]
    data = cases.assign(label=cases["method"].map(display), dsc=cases["value"] * 100)
    fig = Figure(figsize=(max(6.0, 1.0 + 0.9 * len(methods)), 5.0), layout="constrained")
    ax = fig.subplots()
    palette = {display(m): method_color(m, all_methods) for m in methods}
    with warnings.catch_warnings():  # seaborn 0.13 still passes `vert` to Matplotlib ≥ 3.11; not ours to fix
        warnings.filterwarnings("ignore", message=".*vert: bool", category=MatplotlibDeprecationWarning)
        sns.boxplot(data=data, x="label", y="dsc", order=labels, hue="label", hue_order=labels, palette=palette, legend=False,
                    showmeans=True, meanprops={"marker": "^", "markerfacecolor": "white", "markeredgecolor": "black"}, ax=ax)  # fmt: skip
    above = blended_transform_factory(ax.transData, ax.transAxes)
    p_by_method = dict(zip(tests["method"], tests["p_holm"]))
    if REFERENCE_METHOD in methods:  # without LF-Net in this group there is nothing to test against
        for i, method in enumerate(methods):
            text = "reference" if method == REFERENCE_METHOD else format_p(p_by_method.get(method, np.nan))
            ax.text(i, 1.01, text, transform=above, ha="center", va="bottom", fontsize=8)
    ax.set_xlabel("method")
    ax.set_ylabel("DSC per test case (%), mean over seeds")
    ax.tick_params(axis="x", labelrotation=30)
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(title, fontsize=10, pad=22)
    return fig


def noise_figure(summary: pd.DataFrame, averages: pd.DataFrame, methods: list[str], all_methods: list[str], title: str) -> Figure:
    """Mean test DSC (%) ± std over seeds against the realised average rater DSC (or the noise level where that is missing)."""
    noise_levels = sorted(summary["noise"].unique())
    x_by_noise = dict(zip(averages["noise"], averages["mean"] * 100))
    use_average = all(n in x_by_noise for n in noise_levels)  # else fall back to the noise labels themselves
    fig = Figure(figsize=(7.0, 4.5), layout="constrained")
    ax = fig.subplots()
    for method in methods:
        rows = summary[summary["method"] == method]
        rows = rows.assign(x=rows["noise"].map(x_by_noise) if use_average else rows["noise"]).sort_values("x")
        x = list(rows["x"])
        ax.errorbar(x, rows["mean"] * 100, yerr=rows["std"].fillna(0) * 100, marker="o", capsize=3, label=display(method),
                    color=method_color(method, all_methods))  # fmt: skip
    if use_average:
        ax.set_xlabel("realised Average DSC of the rater pool vs GT, training split (%)")
    else:
        ax.set_xlabel("rater noise level")
    ax.set_ylabel("test DSC (%), mean ± std over seeds")
    ax.grid(alpha=0.3)
    fig.legend(loc="outside right center", fontsize=8, frameon=False)
    ax.set_title(title, fontsize=10)
    return fig


def learning_curve_figure(logs: pd.DataFrame, methods: list[str], title: str) -> Figure:
    """One panel per method: the validation loss (the method's own objective, raters only) against the step of each stage,
    mean ± std band over seeds, log scale; a dotted line at each stage's restored step (mean over seeds)."""
    evals = logs[logs["event"] == "eval"]
    stops = logs[logs["event"] == "stop"]
    cols = min(5, len(methods))
    rows = -(-len(methods) // cols)
    fig = Figure(figsize=(3.0 * cols, 2.5 * rows + 0.6), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    stages = list(dict.fromkeys(evals["stage"]))
    palette = dict(zip(stages, sns.color_palette("Set1", len(stages))))
    for ax, method in zip(axes.flat, methods):
        part = evals[evals["method"] == method]
        sns.lineplot(
            data=part, x="step", y="val_loss", hue="stage", palette=palette, errorbar="sd", ax=ax, legend=len(part["stage"].unique()) > 1
        )
        for stage, done in stops[stops["method"] == method].groupby("stage"):
            ax.axvline(done["restored_step"].astype(float).mean(), color=palette.get(stage, "grey"), linestyle=":", linewidth=1)
        if (part["val_loss"] > 0).all() and len(part):
            ax.set_yscale("log")
        ax.set_title(display(method), fontsize=9)
        ax.set_xlabel("step (per stage)")
        ax.set_ylabel("validation loss")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(methods) :]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=10)
    return fig


def diagnostic_figure(logs: pd.DataFrame, methods: list[str], all_methods: list[str], title: str) -> Figure:
    """Validation DSC against ground truth over the last stage's steps, mean ± std over seeds: a diagnostic that never
    stopped or selected anything."""
    fig = Figure(figsize=(7.0, 4.5), layout="constrained")
    ax = fig.subplots()
    evals = logs[(logs["event"] == "eval") & logs["diagnostic_gt_dsc"].notna()]
    for method in methods:
        part = evals[evals["method"] == method]
        if len(part):
            sns.lineplot(
                data=part,
                x="step",
                y="diagnostic_gt_dsc",
                errorbar="sd",
                ax=ax,
                label=display(method),
                color=method_color(method, all_methods),
            )
    ax.set_xlabel("step of the last stage")
    ax.set_ylabel("validation DSC vs ground truth (%)")
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=10)
    return fig


def write_learning_curves(logs: pd.DataFrame, out_dir: Path, note: str = "") -> list[Path]:
    """Per dataset × raters × noise: the validation-loss curves, and where ground truth exists the diagnostic DSC curves."""
    written = []
    if logs.empty or "val_loss" not in logs:
        return written
    for (dataset, raters, noise), part in logs.groupby(["dataset", "raters", "noise"], sort=True):
        names = list(part["method"].unique())
        methods = list(dict.fromkeys([*main_methods(names), *ablation_methods(names), *names]))
        where, stem = f"{dataset} (raters {raters}, noise {noise})", slug(dataset, raters, noise)
        title = f"{where}: validation loss per stage; dotted: restored step"
        fig = learning_curve_figure(part, methods, f"{note}\n{title}" if note else title)
        written += save(fig, out_dir / f"learning_curves_{stem}")
        if "diagnostic_gt_dsc" in part and part["diagnostic_gt_dsc"].notna().any():
            title = f"{where}: validation DSC vs ground truth\na diagnostic only, never used to stop or select"
            fig = diagnostic_figure(part, methods, names, f"{note}\n{title}" if note else title)
            written += save(fig, out_dir / f"diagnostic_gt_dsc_{stem}")
    return written


def figure_methods(names) -> list[str]:
    """The methods a per-method figure shows, in table order: the paper's, the Oracle, then LF-Net's ablations."""
    return list(dict.fromkeys([*main_methods(names), *([ORACLE] if ORACLE in names else []), *ablation_methods(names)]))


def write_rater_heatmaps(summary: pd.DataFrame, out_dir: Path, note: str = "") -> list[Path]:
    """Per dataset × raters × noise × structure: each method's DSC against each rater alone (method × rater heat map)."""
    written = []
    per_rater = summary[summary["reference"].str.startswith("rater:") & (summary["metric"] == "dsc")]
    for (dataset, raters, noise, structure), part in per_rater.groupby(["dataset", "raters", "noise", "structure"], sort=True):
        names = set(part["method"])
        order = figure_methods(names)
        if not order:  # only parameter cells (lf-net@beta=2): their figures are the parameter curves
            continue
        names = set(r.removeprefix("rater:") for r in part["reference"])
        rater_names = [r for r in RATER_NAMES if r in names] + sorted(names - set(RATER_NAMES))
        title = f"{dataset} (raters {raters}, noise {noise}, {structure}):\ntest DSC against each rater, mean over seeds"
        fig = figures.rater_heatmap_figure(part, order, rater_names, f"{note}\n{title}" if note else title, {m: display(m) for m in order})
        written += save(fig, out_dir / f"rater_dsc_{slug(dataset, raters, noise, structure)}")
    return written


def write_reliability(calibration: pd.DataFrame, out_dir: Path, note: str = "") -> list[Path]:
    """Per dataset × raters × noise × structure: a reliability diagram per reference (gt, rater mean), bins pooled over seeds."""
    written = []
    if calibration.empty:
        return written
    bins = tables.pooled_bins(calibration)
    for (dataset, raters, noise, structure), part in bins.groupby(["dataset", "raters", "noise", "structure"], sort=True):
        names = set(part["method"])
        order = figure_methods(names)
        if not order:  # only parameter cells (lf-net@beta=2): their figures are the parameter curves
            continue
        every = sorted(names)
        title = f"{dataset} (raters {raters}, noise {noise}, {structure}): reliability of the foreground probability"
        fig = figures.reliability_figure(part, order, {m: method_color(m, every) for m in order}, f"{note}\n{title}" if note else title,
                                         {m: display(m) for m in order})  # fmt: skip
        written += save(fig, out_dir / f"reliability_{slug(dataset, raters, noise, structure)}")
    return written


# --------------------------------------------------------------------------- render


def read_inputs(results_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    return pd.read_parquet(results_dir / "metrics.parquet"), store.read_summary(results_dir)


def render(results_dir: Path, out_dir: Path) -> list[Path]:
    """Write every table and figure for `<results_dir>`'s collected results into `out_dir`; return the written paths (sorted).

    Reads only the collected tables (see the module docstring). An empty results table writes nothing and returns [].
    """
    results_dir, out_dir = Path(results_dir), Path(out_dir)
    table, summary = read_inputs(results_dir)
    if table.empty:
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    written += write_tables(summary, out_dir)
    tests = all_tests(table)
    written.append(write_tests(tests, out_dir))
    written += write_boxplots(table, tests, out_dir)
    written += write_noise_figures(summary, out_dir)
    written += write_rater_heatmaps(summary, out_dir)
    for name, writer in (("calibration.parquet", write_reliability), ("train_logs.parquet", write_learning_curves)):
        if (results_dir / name).is_file():
            written += writer(pd.read_parquet(results_dir / name), out_dir)
    return sorted(written)


def write_tables(summary: pd.DataFrame, out_dir: Path, note: str = "") -> list[Path]:
    """Every table of the summary as Markdown and LaTeX, per headline reference; `note` (e.g. "quick stand-in: …") heads each file."""
    written, markdown = [], []
    for (dataset, raters, noise), part in summary.groupby(["dataset", "raters", "noise"], sort=True):
        shared = part[part["reference"].isin(["raters", "rater-mean"]) | (part["method"] == AVERAGE)]
        for reference in [r for r in HEADLINE if r in set(part.loc[part["method"] != AVERAGE, "reference"])]:
            rows = pd.concat([part[(part["reference"] == reference) & (part["method"] != AVERAGE)], shared])
            for stem, table in group_tables(rows, (dataset, raters, noise, reference)):
                if (out_dir / f"{stem}.md") in written:  # Table III does not depend on the headline reference
                    continue
                md, tex = to_markdown(table), to_latex(table)
                if note:
                    md, tex = f"> {note}\n\n{md}", f"% {note}\n{tex}"
                (out_dir / f"{stem}.md").write_text(md)
                (out_dir / f"{stem}.tex").write_text(tex)
                written += [out_dir / f"{stem}.md", out_dir / f"{stem}.tex"]
                markdown.append(md)
    if markdown:
        (out_dir / "tables.md").write_text("\n".join(markdown))
        written.append(out_dir / "tables.md")
    return written


def write_tests(tests: pd.DataFrame, out_dir: Path) -> Path:
    path = out_dir / "paired_tests.csv"
    tests.to_csv(path, index=False, float_format="%.6g")
    return path


def default_reference(dataset: str) -> str:
    return "gt" if has_gt(dataset) else "majority"


def write_boxplots(table: pd.DataFrame, tests: pd.DataFrame, out_dir: Path, note: str = "") -> list[Path]:
    """Per-case DSC per method against the dataset's default reference (gt where it exists, else the majority)."""
    written = []
    all_methods = sorted(set(table["method"]))
    dsc_structures = ordered_structures(set(table.loc[table["metric"] == "dsc", "structure"]))
    for structure in dsc_structures:
        cases = tables.per_case(table, "dsc", structure)
        for group, part in cases.groupby(tables.GROUP, sort=True):
            dataset, raters, noise, reference = group
            methods = main_methods(set(part["method"]))
            if not methods or reference != default_reference(dataset):
                continue
            part = part[part["method"].isin(methods)]
            here = tests[
                (tests["family"] == "main") & (tests["metric"] == "dsc") & (tests["structure"] == structure)
                & (tests[tables.GROUP] == pd.Series(group, index=tables.GROUP)).all(axis=1)
            ]  # fmt: skip
            n_cases = part["case"].nunique()
            title = (
                f"{dataset}: per-case DSC, {n_cases} test cases\n"
                f"raters {raters}, noise {noise}, against {reference}, structure: {structure}\n"
                + (
                    f"Holm-adjusted two-sided Wilcoxon signed-rank p vs {display(REFERENCE_METHOD)}"
                    if REFERENCE_METHOD in methods
                    else f"no {display(REFERENCE_METHOD)} run: no tests"
                )
            )
            fig = boxplot_figure(part, here, methods, all_methods, f"{note}\n{title}" if note else title)
            written += save(fig, out_dir / f"boxplot_dsc_{slug(dataset, raters, noise, reference, structure)}")
    return written


def write_noise_figures(summary: pd.DataFrame, out_dir: Path, note: str = "") -> list[Path]:
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
        methods = main_methods(set(runs["method"])) + ([ORACLE] if ORACLE in set(runs["method"]) else [])
        for structure in ordered_structures(set(runs["structure"])):
            rows = runs[runs["structure"] == structure]
            levels = ", ".join(sorted(rows["noise"].unique()))
            title = f"{dataset}: test DSC vs annotation noise\nraters {raters}, against {reference}, structure: {structure}, noise levels {levels}"
            fig = noise_figure(rows, averages, methods, all_methods, f"{note}\n{title}" if note else title)
            written += save(fig, out_dir / f"noise_dsc_{slug(dataset, raters, reference, structure)}")
    return written
