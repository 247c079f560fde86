"""Figures drawn from the collected tables: box plots with p-values, noise curves, learning curves, the diagnostic GT
curves, the method × rater heat map, reliability diagrams, the parameter curves and rank (blob) plots (bench/report/example_figures.py
draws images).

Every function returns a Matplotlib `Figure` (Agg-free, no global state) or saves one as PNG and PDF
(`save`); colours are fixed per method across one report (`method_color`). A figure of the report carries what its
values rest on (budget, seeds per method, pipeline-check status: `bench.report.table_notes.run_text`) as its footer
(`caveat`), and `save` writes that footer into the files' metadata too (PNG text "Description", PDF "Subject"), so
that the caption travels with a copied file and a test reads it without OCR.
"""

from __future__ import annotations

import textwrap
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib import MatplotlibDeprecationWarning
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, MaxNLocator, NullLocator
from matplotlib.transforms import blended_transform_factory

import methods
from bench.evaluate.long_table import ordered_structures
from bench.report import figure_notes, ranking
from bench.report.rows import display, main_methods, registry_order
from bench.study import Study

_HEAT_CMAP = "viridis"  # as bench/report/example_figures.py's heat maps
_FONT = 8

PALETTE = sns.color_palette("tab10") + sns.color_palette("Dark2")


def method_color(paper: Study, method: str, all_methods: list[str]):
    """A fixed colour per method, so a method looks the same in every figure of one report."""
    registered, oracle = methods.method_names(), paper.oracle
    order = [*main_methods(paper, registered), oracle, *registry_order(set(all_methods) - set(registered) - {oracle})]
    order += [m for m in registry_order(all_methods) if m not in order]
    return PALETTE[order.index(method) % len(PALETTE)]


def format_p(p: float) -> str:
    if pd.isna(p):
        return "p n/a"
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"


def caveat(fig: Figure, line: str) -> Figure:
    """`line` (a run line: "Run: budget quick; seeds per method: 1; pipeline check, not a verdict: …") as the figure's
    footer, under any footer it has; the constrained layout makes room for it. Returns the figure."""
    if line:
        before = fig.get_supxlabel()
        width = max(30, int(16 * fig.get_figwidth()))  # characters a line at 7 pt; never split "LF-Net" at its hyphen
        lines = [textwrap.fill(part, width, break_on_hyphens=False, break_long_words=False) for part in line.split("\n")]
        fig.supxlabel("\n".join(t for t in (before, *lines) if t), fontsize=_FONT - 1, color="0.2")
    return fig


def caption(fig: Figure) -> str:
    """The figure's footer (`caveat`) on one line: what `save` writes into the files' metadata."""
    return " ".join(fig.get_supxlabel().split())


def save(fig: Figure, stem: Path) -> list[Path]:
    """PNG and PDF, the footer (`caption`) in their metadata; the PDF's creation date is dropped so that a rerun writes
    the same bytes."""
    png, pdf = stem.parent / f"{stem.name}.png", stem.parent / f"{stem.name}.pdf"  # not with_suffix: "noise0.5" has a dot
    text = caption(fig)
    fig.savefig(png, dpi=150, metadata={"Description": text} if text else None)
    fig.savefig(pdf, metadata={"CreationDate": None, **({"Subject": text} if text else {})})
    return [png, pdf]


def saved_caption(png: Path) -> str:
    """The caption `save` wrote into a PNG ("" where none)."""
    from PIL import Image

    with Image.open(png) as image:
        return image.text.get("Description", "")


def boxplot_figure(
    paper: Study,
    cases: pd.DataFrame,
    tests: pd.DataFrame,
    methods: list[str],
    all_methods: list[str],
    title: str,
    warning: str = "",
    against: str | None = None,
) -> Figure:
    """Per-case DSC (%) per method; the Holm-adjusted p (`tests`' p_holm, rows by `method`) of each box against `against`
    (default: `paper`'s reference method where it is among `methods`; no p where None is found) written above each other box.

    The y axis spans the values drawn (`data_limits`), not Matplotlib's ± 0.04 around a constant. `warning` (e.g.
    "pipeline check, not a verdict: budget quick") is drawn in red above everything, so that the figure says so
    wherever it is shown.
    """
    reference = paper.reference_method
    against = against if against is not None else (reference if reference in methods else None)
    labels = [display(paper, m) for m in methods]
    data = cases.assign(label=cases["method"].map(lambda m: display(paper, m)), dsc=cases["value"] * 100)
    fig = Figure(figsize=(max(6.0, 1.0 + 0.9 * len(methods)), 5.0), layout="constrained")
    ax = fig.subplots()
    palette = {display(paper, m): method_color(paper, m, all_methods) for m in methods}
    with warnings.catch_warnings():  # seaborn 0.13 still passes `vert` to Matplotlib ≥ 3.11; not ours to fix
        warnings.filterwarnings("ignore", message=".*vert: bool", category=MatplotlibDeprecationWarning)
        sns.boxplot(
            data=data,
            x="label",
            y="dsc",
            order=labels,
            hue="label",
            hue_order=labels,
            palette=palette,
            legend=False,
            showmeans=True,
            meanprops={"marker": "^", "markerfacecolor": "white", "markeredgecolor": "black"},
            ax=ax,
        )
    above = blended_transform_factory(ax.transData, ax.transAxes)
    p_by_method = dict(zip(tests["method"], tests["p_holm"]))
    if against in methods:  # nothing tested: no p
        for i, method in enumerate(methods):
            text = "reference" if method == against else format_p(p_by_method.get(method, np.nan))
            ax.text(i, 1.01, text, transform=above, ha="center", va="bottom", fontsize=8)
    ax.set_ylim(*data_limits(data["dsc"], (0.0, 100.0)))
    ax.set_xlabel("method")
    ax.set_ylabel("DSC per test case (%), mean over seeds")
    ax.tick_params(axis="x", labelrotation=30)
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(title, fontsize=10, pad=22)
    if warning:
        fig.suptitle(textwrap.fill(warning, 70), fontsize=10, color=WARNING_COLOR, fontweight="bold")
    return fig


WARNING_COLOR = "#b00020"  # a figure's "pipeline check, not a verdict" line


def data_limits(values, bounds: tuple[float, float], least: float = 0.05) -> tuple[float, float]:
    """Axis limits around the finite `values`: their span padded by a tenth, at least `least` of the range `bounds` wide
    (a constant is drawn on a readable axis, not ± 0.04), kept within `bounds` widened by that padding."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    low, high = (float(v.min()), float(v.max())) if v.size else bounds
    width = bounds[1] - bounds[0] if np.isfinite(bounds[1] - bounds[0]) else max(abs(low), abs(high), 1.0)
    span = max(high - low, least * width)
    centre = (low + high) / 2
    pad = 0.1 * span
    low, high = centre - span / 2 - pad, centre + span / 2 + pad
    return max(low, bounds[0] - pad), min(high, bounds[1] + pad)


def rank_figure(
    shares: pd.DataFrame, title: str, colors: dict[str, object], labels: dict[str, str] | None = None, warning: str = ""
) -> Figure:
    """The blob plot of a ranking's uncertainty (as the challenge community draws it, e.g. challengeR's): one column per
    method, ordered by mean rank; a circle at each rank the method took, its area ∝ the share of bootstrap resamples;
    a black cross at the median rank and a black line over the central 95 % of ranks.

    `shares` is `bench.report.ranking.rank_distribution`: index methods, columns ranks 1 … K, rows summing to 1. Rank 1
    (best) is at the bottom. `colors[method]` colours its circles; `labels[method]` names it (default: the name);
    `warning` is drawn in red above everything, as on `boxplot_figure`.
    """
    labels = dict(labels or {})
    order = ranking.mean_rank(shares).sort_values(kind="stable").index.tolist()
    shares = shares.loc[order]
    k = shares.shape[1]
    rank_values = shares.columns.to_numpy()
    low, median, high = (ranking.rank_quantile(shares, q) for q in (0.025, 0.5, 0.975))
    fig = Figure(figsize=(max(4.5, 1.2 + 0.75 * len(order)), max(3.2, 1.4 + 0.4 * k)), layout="constrained")
    ax = fig.subplots()
    for x, method in enumerate(order):
        share = shares.loc[method].to_numpy(float)
        taken = share > 0
        ax.scatter(
            np.full(taken.sum(), x),
            rank_values[taken],
            s=600 * share[taken],
            color=colors[method],
            alpha=0.8,
            edgecolors="none",
            gid=f"method:{method}",
        )
        ax.vlines(x, low[method], high[method], color="black", lw=1)
        ax.plot([x], [median[method]], marker="x", color="black", ms=7, mew=1.5, gid=f"median:{method}")
    ax.set_xticks(np.arange(len(order)), labels=[labels.get(m, m) for m in order])
    ax.tick_params(axis="x", labelrotation=30)
    ax.set_yticks(np.arange(1, k + 1))
    ax.set_ylim(0.4, k + 0.6)
    ax.set_xlim(-0.6, len(order) - 0.4)
    ax.set_xlabel("method, by mean rank")
    ax.set_ylabel("rank (1 = best)")
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=9)
    if warning:
        fig.suptitle(textwrap.fill(warning, 60), fontsize=9, color=WARNING_COLOR, fontweight="bold")
    return fig


def noise_figure(
    paper: Study, summary: pd.DataFrame, averages: pd.DataFrame, methods: list[str], all_methods: list[str], title: str
) -> Figure:
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
        ax.errorbar(
            x,
            rows["mean"] * 100,
            yerr=rows["std"].fillna(0) * 100,
            marker="o",
            capsize=3,
            label=display(paper, method),
            color=method_color(paper, method, all_methods),
        )
    if use_average:
        ax.set_xlabel("realised Average DSC of the rater pool vs GT, training split (%)")
    else:
        ax.set_xlabel("rater noise level")
    ax.set_ylabel("test DSC (%), mean ± std over seeds")
    ax.grid(alpha=0.3)
    fig.legend(loc="outside right center", fontsize=8, frameon=False)
    ax.set_title(title, fontsize=10)
    return fig


def learning_curve_figure(paper: Study, logs: pd.DataFrame, methods: list[str], title: str) -> Figure:
    """One panel per method: the validation loss (the method's own objective, raters only) against the step of each stage,
    mean ± std band over seeds, log scale; a dotted line at each stage's restored step (mean over seeds). A method
    evaluated at fewer than two steps gets a note in place of its panel (`figure_notes`); steps are integer ticks."""
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
        ax.set_title(display(paper, method), fontsize=9)
        if figure_notes.no_curve(ax, part):
            continue
        sns.lineplot(  # markers: a stage evaluated once is a point, not empty axes
            data=part,
            x="step",
            y="val_loss",
            hue="stage",
            palette=palette,
            errorbar="sd",
            ax=ax,
            legend=len(part["stage"].unique()) > 1,
            marker="o",
            markersize=4,
        )
        for stage, done in stops[stops["method"] == method].groupby("stage"):
            ax.axvline(done["restored_step"].astype(float).mean(), color=palette.get(stage, "grey"), linestyle=":", linewidth=1)
        if (part["val_loss"] > 0).all():
            ax.set_yscale("log")
        ax.xaxis.set_major_locator(MaxNLocator(nbins=4, integer=True))  # 5-digit steps in a 3-inch panel: few ticks, or they run together
        ax.set_xlabel("step (per stage)")
        ax.set_ylabel("validation loss")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(methods) :]:
        ax.set_visible(False)
    fig.suptitle(fill(title, 3.0 * cols), fontsize=10)
    return fig


def diagnostic_figure(paper: Study, logs: pd.DataFrame, methods: list[str], all_methods: list[str], title: str) -> Figure:
    """Validation DSC against ground truth over the steps of the stage that decides the consensus (the one that logs it),
    mean ± std over seeds: a diagnostic that never stopped or selected anything. Evaluations at fewer than two steps: a
    note in place of the chart."""
    fig = Figure(figsize=(7.0, 4.5), layout="constrained")
    ax = fig.subplots()
    ax.set_title(fill(title, 7.0), fontsize=10)
    evals = logs[(logs["event"] == "eval") & logs["diagnostic_gt_dsc"].notna() & logs["method"].isin(methods)]
    if figure_notes.no_curve(ax, evals):
        return fig
    for method in methods:
        part = evals[evals["method"] == method]
        if len(part):
            sns.lineplot(
                data=part,
                x="step",
                y="diagnostic_gt_dsc",
                errorbar="sd",
                ax=ax,
                label=display(paper, method),
                color=method_color(paper, method, all_methods),
                marker="o",  # a method evaluated once among others is a point, not nothing
                markersize=4,
            )
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("step of the stage that decides the consensus")
    ax.set_ylabel("validation DSC vs ground truth (%)")
    ax.grid(alpha=0.3)
    return fig


def fill(title: str, width_inches: float) -> str:
    """A title wrapped to the figure's width (about 14 characters an inch at 10 pt), each of its lines on its own."""
    return "\n".join(textwrap.fill(line, max(30, int(14 * width_inches))) for line in title.split("\n"))


def param_figure(points: pd.DataFrame, param: str, title: str, default: float | None = None) -> Figure:
    """Test DSC (%) against one hyper-parameter, one line with ± std error bars per structure.

    `points` has one row per (value, structure): `value` (the parameter, numeric), `structure`,
    `mean` and `std` (DSC over seeds as fractions 0–1; std may be NaN, e.g. one seed, then no bar)
    and `n_seeds`. The x axis is logarithmic when every value is > 0 and max/min ≥ 20 (λ ∈
    {0.001 … 1}), linear otherwise (β ∈ {1 … R}); ticks sit at the values that were run.
    `default`, if given, is marked by a dashed vertical line named in the legend.
    """
    missing = {"value", "structure", "mean", "std", "n_seeds"} - set(points.columns)
    if missing:
        raise ValueError(f"param_figure: points lacks column(s) {sorted(missing)}")
    if points.empty:
        raise ValueError("param_figure: no points to plot")
    if points.duplicated(["structure", "value"]).any():
        raise ValueError("param_figure: more than one row per (structure, value); aggregate over seeds first")
    values = np.sort(points["value"].astype(float).unique())
    fig = Figure(figsize=(6.0, 4.0), layout="constrained")
    ax = fig.subplots()
    for structure in ordered_structures(set(points["structure"])):
        rows = points[points["structure"] == structure].sort_values("value")
        seeds = sorted({int(n) for n in rows["n_seeds"]})
        n_text = f"{seeds[0]}" if len(seeds) == 1 else f"{seeds[0]}–{seeds[-1]}"
        std = np.nan_to_num(rows["std"].to_numpy(float))  # one seed: no bar rather than no point
        label = f"{structure} ({n_text} seed{'s' if seeds[-1] != 1 else ''})"
        ax.errorbar(rows["value"].to_numpy(float), rows["mean"].to_numpy(float) * 100, yerr=std * 100, marker="o", capsize=3, label=label)
    if values[0] > 0 and values[-1] / values[0] >= 20:
        ax.set_xscale("log")  # λ-like values span decades; a linear axis would crush the small ones together
        ax.xaxis.set_minor_locator(NullLocator())
    if len(values) <= 12:
        ax.xaxis.set_major_locator(FixedLocator(values))
        ax.set_xticklabels([f"{v:g}" for v in values])
    if default is not None:
        ax.axvline(default, ls="--", color="0.4", lw=1, label=f"default {param} = {default:g}")
    ax.set_xlabel(param)
    ax.set_ylabel("test DSC (%), mean ± std over seeds")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=_FONT, frameon=False)
    ax.set_title(title, fontsize=10)
    return fig
