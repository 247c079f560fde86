"""Tables and figures in the paper's layout from the collected results (DESIGN §7, §8: `python -m bench report`).

Reads only `<results>/metrics.parquet` (per-case rows, for box plots and tests),
`<results>/summary.csv` (mean ± std over seeds from `bench.store.summarise`, including the
"average" rater rows) and `<results>/train_logs.parquet` (learning curves). Writes into the output folder:

- `table1_<dataset>_<reference>_noise<n>_<structure>.{md,tex}`: Table I/II style, DSC (%) ↑ and
  bAHD ↓, mean ± std over seeds; Average row first (where the dataset has one), Oracle last.
- `table3_<dataset>_<reference>_noise<n>.{md,tex}`: Table III style, soft DSC / soft IoU (%) per
  structure (disc, cup), when the table holds the metrics "soft_dice" / "soft_iou".
- `table4_<dataset>_<reference>_noise<n>.{md,tex}`: Table IV style ablation rows (S … ‡), when
  LF-Net ablation variants were run; DSC per structure (soft DSC where it exists, as the paper).
- `tables.md`: every Markdown table above in one file.
- `paired_tests.csv`: `bench.stats.paired_tests` for every metric and structure, LF-Net vs the
  paper's methods (family "main") and vs its ablation variants (family "ablation").
- `boxplot_dsc_<dataset>_<reference>_noise<n>_<structure>.{png,pdf}`: per-case DSC per method
  with the Holm-adjusted Wilcoxon p-value vs LF-Net above each box.
- `noise_dsc_<dataset>_<reference>_<structure>.{png,pdf}`: DSC against the realised average
  rater DSC, one line per method, when the dataset was run at two or more noise levels.
- `learning_curves_<dataset>_<reference>_noise<n>.{png,pdf}` (from `train_logs.parquet`): each
  method's validation loss per stage, mean ± std over seeds, with the restored step marked; and
  `diagnostic_gt_dsc_…` where the dataset has ground truth: validation DSC vs GT, a diagnostic only.

Bold rule (as the paper): the best mean per column, compared at the printed precision so that
equal-looking values are bolded alike, over the method rows only — Average and Oracle are never
bold (Tables I–III); in the ablation table every row competes.
"""

from __future__ import annotations

import argparse
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
from bench import stats
from bench.options import UsageError
from methods.registry import PARAM_SEP

# --------------------------------------------------------------------------- method names and order

REFERENCE_METHOD = "lf-net"
AVERAGE = "average"
ORACLE = "oracle"

STRUCTURE_ORDER = ["foreground", "disc", "cup"]


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


def ordered_structures(names) -> list[str]:
    names = set(names)
    return [s for s in STRUCTURE_ORDER if s in names] + sorted(names - set(STRUCTURE_ORDER))


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


def table1_columns(structure: str) -> list[Column]:
    return [
        Column(structure, "dsc", "DSC (%) ↑", r"DSC (\%)~$\uparrow$", 100.0, 2, True),
        Column(structure, "bahd", "bAHD ↓", r"bAHD~$\downarrow$", 1.0, 3, False),
    ]


def soft_column(structure: str, metric: str) -> Column:
    name = {"soft_dice": "DSC", "soft_iou": "IoU"}[metric]
    return Column(
        structure,
        metric,
        f"soft {name} {structure} (%) ↑",
        rf"{name}$_\mathrm{{{structure}}}^\mathrm{{soft}}$ (\%)~$\uparrow$",
        100.0,
        2,
        True,
    )


def ablation_column(structure: str, metric: str) -> Column:
    if metric == "soft_dice":
        return soft_column(structure, metric)
    return Column(structure, "dsc", f"DSC {structure} (%) ↑", rf"DSC$_\mathrm{{{structure}}}$ (\%)~$\uparrow$", 100.0, 2, True)


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


def group_title(kind: str, dataset: str, reference: str, noise: float, structure: str | None = None) -> str:
    where = f", {structure}" if structure else ""
    return f"{kind}: {dataset} (reference: {reference}, rater noise {noise:g}{where}); mean ± std over seeds"


def slug(*parts) -> str:
    """File-name part: noise as `noise<g>`, anything outside [A-Za-z0-9.-] replaced by '-'."""
    return "_".join(re.sub(r"[^A-Za-z0-9.-]+", "-", str(p)) for p in parts)


def group_tables(part: pd.DataFrame, dataset: str, reference: str, noise: float) -> list[tuple[str, Table]]:
    """(file stem, table) for one dataset × reference × noise of the summary."""
    out = []
    pairs = set(zip(part["structure"], part["metric"]))
    methods_here = set(part["method"])
    main = main_methods(methods_here)
    base = slug(dataset, reference, f"noise{noise:g}")
    if main or ORACLE in methods_here:
        for structure in ordered_structures({s for s, k in pairs if k in ("dsc", "bahd")}):
            title = group_title("DSC (%) ↑ and bAHD ↓", dataset, reference, noise, structure)
            table = build_table(part, table1_columns(structure), main, title, "Methods", "main", compete_all=False)
            out.append((f"table1_{base}_{slug(structure)}", table))
        soft = [soft_column(s, k) for s in ordered_structures({s for s, _ in pairs}) for k in ("soft_dice", "soft_iou") if (s, k) in pairs]
        if soft:
            title = group_title("soft DSC and soft IoU (%) ↑", dataset, reference, noise)
            out.append((f"table3_{base}", build_table(part, soft, main, title, "Methods", "main", compete_all=False)))
    ablation = ablation_methods(methods_here)
    if any(m != REFERENCE_METHOD for m in ablation):
        rows = part[part["method"].isin(ablation)]
        row_pairs = set(zip(rows["structure"], rows["metric"]))
        columns = [
            ablation_column(s, "soft_dice" if (s, "soft_dice") in row_pairs else "dsc")
            for s in ordered_structures({s for s, k in row_pairs if k in ("dsc", "soft_dice")})
        ]
        title = group_title("ablation, DSC (%) ↑", dataset, reference, noise)
        out.append((f"table4_{base}", build_table(rows, columns, ablation, title, "Variant", "ablation", compete_all=True)))
    return out


# --------------------------------------------------------------------------- statistics


METRIC_HIGHER_IS_BETTER = {"dsc": True, "bahd": False, "soft_dice": True, "soft_iou": True}


def all_tests(table: pd.DataFrame) -> pd.DataFrame:
    """Paired tests of LF-Net for every structure × metric: vs the paper's methods and, separately, vs its ablations."""
    names = set(table["method"])
    families = {
        "main": [m for m in main_methods(names) if m != REFERENCE_METHOD],
        "ablation": [m for m in ablation_methods(names) if m != REFERENCE_METHOD],
    }
    frames = []
    for structure in ordered_structures(set(table["structure"])):
        for metric in sorted(set(table.loc[table["structure"] == structure, "metric"])):
            higher = METRIC_HIGHER_IS_BETTER.get(metric, True)
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
    use_average = all(n in x_by_noise for n in noise_levels)  # else fall back to the noise parameter itself
    fig = Figure(figsize=(7.0, 4.5), layout="constrained")
    ax = fig.subplots()
    for method in methods:
        rows = summary[summary["method"] == method].sort_values("noise")
        x = [x_by_noise[n] for n in rows["noise"]] if use_average else list(rows["noise"])
        ax.errorbar(x, rows["mean"] * 100, yerr=rows["std"].fillna(0) * 100, marker="o", capsize=3, label=display(method),
                    color=method_color(method, all_methods))  # fmt: skip
    if use_average:
        ax.set_xlabel("average rater DSC vs reference, training split (%)")
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
    """Per dataset × reference × noise: the validation-loss curves, and where ground truth exists the diagnostic DSC curves."""
    written = []
    if logs.empty or "val_loss" not in logs:
        return written
    for (dataset, reference, noise), part in logs.groupby(["dataset", "reference", "noise"], sort=True):
        names = list(part["method"].unique())
        methods = list(dict.fromkeys([*main_methods(names), *ablation_methods(names), *names]))
        title = f"{dataset} (rater noise {noise:g}): validation loss per stage; dotted: restored step"
        fig = learning_curve_figure(part, methods, f"{note}\n{title}" if note else title)
        written += save(fig, out_dir / f"learning_curves_{slug(dataset, reference, f'noise{noise:g}')}")
        if "diagnostic_gt_dsc" in part and part["diagnostic_gt_dsc"].notna().any():
            title = f"{dataset} (rater noise {noise:g}): validation DSC vs ground truth\na diagnostic only, never used to stop or select"
            fig = diagnostic_figure(part, methods, names, f"{note}\n{title}" if note else title)
            written += save(fig, out_dir / f"diagnostic_gt_dsc_{slug(dataset, reference, f'noise{noise:g}')}")
    return written


# --------------------------------------------------------------------------- render


def read_inputs(results_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    table = pd.read_parquet(results_dir / "metrics.parquet")
    summary = pd.read_csv(
        results_dir / "summary.csv", dtype={"dataset": str, "reference": str, "method": str, "structure": str, "metric": str}
    )
    return table, summary


def render(results_dir: Path, out_dir: Path) -> list[Path]:
    """Write every table and figure for `<results_dir>`'s collected results into `out_dir`; return the written paths (sorted).

    Reads only metrics.parquet and summary.csv (see the module docstring for the files). An empty
    results table writes nothing and returns [].
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
    logs = results_dir / "train_logs.parquet"
    if logs.is_file():
        written += write_learning_curves(pd.read_parquet(logs), out_dir)
    return sorted(written)


def write_tables(summary: pd.DataFrame, out_dir: Path, note: str = "") -> list[Path]:
    """Every table of the summary as Markdown and LaTeX; `note` (e.g. "quick stand-in: …") heads each file."""
    written, markdown = [], []
    for (dataset, reference, noise), part in summary.groupby(["dataset", "reference", "noise"], sort=True):
        for stem, table in group_tables(part, dataset, reference, noise):
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


def write_boxplots(table: pd.DataFrame, tests: pd.DataFrame, out_dir: Path, note: str = "") -> list[Path]:
    written = []
    all_methods = sorted(set(table["method"]))
    dsc_structures = ordered_structures(set(table.loc[table["metric"] == "dsc", "structure"]))
    for structure in dsc_structures:
        cases = stats.per_case(table, "dsc", structure)
        for (dataset, reference, noise), part in cases.groupby(stats.GROUP, sort=True):
            methods = main_methods(set(part["method"]))
            if not methods:
                continue
            part = part[part["method"].isin(methods)]
            here = tests[
                (tests["family"] == "main") & (tests["metric"] == "dsc") & (tests["structure"] == structure)
                & (tests["dataset"] == dataset) & (tests["reference"] == reference) & (tests["noise"] == noise)
            ]  # fmt: skip
            n_cases = part["case"].nunique()
            title = (
                f"{dataset}: per-case DSC, {n_cases} test cases\n"
                f"reference: {reference}, rater noise {noise:g}, structure: {structure}\n"
                + ("Holm-adjusted two-sided Wilcoxon signed-rank p vs LF-Net" if REFERENCE_METHOD in methods else "no LF-Net run: no tests")
            )
            fig = boxplot_figure(part, here, methods, all_methods, f"{note}\n{title}" if note else title)
            written += save(fig, out_dir / f"boxplot_dsc_{slug(dataset, reference, f'noise{noise:g}', structure)}")
    return written


def write_noise_figures(summary: pd.DataFrame, out_dir: Path, note: str = "") -> list[Path]:
    written = []
    all_methods = sorted(set(summary["method"]))
    dsc = summary[summary["metric"] == "dsc"]
    for (dataset, reference), part in dsc.groupby(["dataset", "reference"], sort=True):
        averages = part[part["method"] == AVERAGE]
        runs = part[part["method"] != AVERAGE]
        if runs["noise"].nunique() < 2:  # one noise level: no curve to draw
            continue
        methods = main_methods(set(runs["method"])) + ([ORACLE] if ORACLE in set(runs["method"]) else [])
        for structure in ordered_structures(set(runs["structure"])):
            rows = runs[runs["structure"] == structure]
            levels = ", ".join(f"{n:g}" for n in sorted(rows["noise"].unique()))
            title = f"{dataset}: test DSC vs annotation noise\nreference: {reference}, structure: {structure}, rater noise levels {levels}"
            fig = noise_figure(rows, averages, methods, all_methods, f"{note}\n{title}" if note else title)
            written += save(fig, out_dir / f"noise_dsc_{slug(dataset, reference, structure)}")
    return written


# --------------------------------------------------------------------------- CLI


def add_parser(verbs) -> None:
    """Add `python -m bench report [--results DIR] [--out DIR]` to the CLI's subparsers."""
    p = verbs.add_parser(
        "report", allow_abbrev=False, help="write the paper's tables (Markdown, LaTeX) and figures (PNG, PDF) from collected results"
    )
    p.add_argument("--results", default="results", help="results folder holding metrics.parquet and summary.csv (default: results)")
    p.add_argument("--out", help="folder for the tables and figures (default: RESULTS/report)")
    p.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    results = Path(args.results)
    out = Path(args.out) if args.out else results / "report"  # beside the results, not in the source tree
    first = f"run `python -m bench run --results {results}` first"
    for name in ("metrics.parquet", "summary.csv"):
        if not (results / name).is_file():
            raise UsageError(f"no results table {results / name}; {first}")
    try:
        n_rows = len(pd.read_parquet(results / "metrics.parquet", columns=["value"]))
    except (OSError, ValueError) as e:
        raise UsageError(f"cannot read {results / 'metrics.parquet'} ({e}); {first}") from None
    if n_rows == 0:
        raise UsageError(f"the results table {results / 'metrics.parquet'} is empty; {first}")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot write the report folder {out} ({e.strerror or e}); choose another with --out") from None
    written = render(results, out)
    for path in written:
        print(path)
    print(f"{len(written)} files written to {out}/")
    return 0
