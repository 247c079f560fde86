"""Figures drawn from the collected tables: box plots with p-values, noise curves, learning curves, the diagnostic GT
curves, the method × rater heat map, reliability diagrams, the parameter curves and rank (blob) plots (bench/report/example_figures.py
draws images).

Every function returns a Matplotlib `Figure` (Agg-free, no global state) or saves one as PNG and PDF
(`save`); colours are fixed per method across one report (`method_color`).
"""

from __future__ import annotations

import textwrap
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib import MatplotlibDeprecationWarning, colormaps, colors
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, MaxNLocator, NullLocator
from matplotlib.transforms import blended_transform_factory

import methods
from bench.evaluate.long_table import ordered_structures
from bench.report import figure_notes, ranking
from bench.report.rows import display, main_methods, oracle, reference_method, registry_order

_HEAT_CMAP = "viridis"  # as bench/report/example_figures.py's heat maps
_FONT = 8

PALETTE = sns.color_palette("tab10") + sns.color_palette("Dark2")


def method_color(method: str, all_methods: list[str]):
    """A fixed colour per method, so a method looks the same in every figure of one report."""
    order = [*main_methods(methods.method_names()), oracle(), *registry_order(set(all_methods) - set(methods.method_names()) - {oracle()})]
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


def boxplot_figure(
    cases: pd.DataFrame, tests: pd.DataFrame, methods: list[str], all_methods: list[str], title: str, warning: str = ""
) -> Figure:
    """Per-case DSC (%) per method; the Holm-adjusted p (`tests`' p_holm) vs LF-Net written above each other box.

    `warning` (e.g. "pipeline check, not a verdict: budget quick") is drawn in red above everything, so that the figure
    says so wherever it is shown.
    """
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
    if reference_method() in methods:  # without LF-Net in this group there is nothing to test against
        for i, method in enumerate(methods):
            text = "reference" if method == reference_method() else format_p(p_by_method.get(method, np.nan))
            ax.text(i, 1.01, text, transform=above, ha="center", va="bottom", fontsize=8)
    ax.set_xlabel("method")
    ax.set_ylabel("DSC per test case (%), mean over seeds")
    ax.tick_params(axis="x", labelrotation=30)
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(title, fontsize=10, pad=22)
    if warning:
        fig.suptitle(textwrap.fill(warning, 70), fontsize=10, color=WARNING_COLOR, fontweight="bold")
    return fig


WARNING_COLOR = "#b00020"  # a figure's "pipeline check, not a verdict" line


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
        ax.scatter(np.full(taken.sum(), x), rank_values[taken], s=600 * share[taken], color=colors[method], alpha=0.8,
                   edgecolors="none", gid=f"method:{method}")  # fmt: skip
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
        ax.set_title(display(method), fontsize=9)
        if figure_notes.no_curve(ax, part):
            continue
        sns.lineplot(  # markers: a stage evaluated once is a point, not empty axes
            data=part, x="step", y="val_loss", hue="stage", palette=palette, errorbar="sd", ax=ax, legend=len(part["stage"].unique()) > 1,
            marker="o", markersize=4,
        )  # fmt: skip
        for stage, done in stops[stops["method"] == method].groupby("stage"):
            ax.axvline(done["restored_step"].astype(float).mean(), color=palette.get(stage, "grey"), linestyle=":", linewidth=1)
        if (part["val_loss"] > 0).all():
            ax.set_yscale("log")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("step (per stage)")
        ax.set_ylabel("validation loss")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(methods) :]:
        ax.set_visible(False)
    fig.suptitle(fill(title, 3.0 * cols), fontsize=10)
    return fig


def diagnostic_figure(logs: pd.DataFrame, methods: list[str], all_methods: list[str], title: str) -> Figure:
    """Validation DSC against ground truth over the last stage's steps, mean ± std over seeds: a diagnostic that never
    stopped or selected anything. Evaluations at fewer than two steps: a note in place of the chart."""
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
                label=display(method),
                color=method_color(method, all_methods),
                marker="o",  # a method evaluated once among others is a point, not nothing
                markersize=4,
            )
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("step of the last stage")
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


_RATER_PREFIX = "rater:"  # the summary's `reference` of a per-rater score is "rater:<name>"


_MISSING_CELL = "0.85"  # light grey: no score for this (method, rater); no colour of the DSC scale is grey


_RELIABILITY_ORDER = ("gt", "rater-mean")  # panels first, in this order; other references follow, sorted


_PROB_TOL = 1e-6  # bin means of values in [0, 1] may leave it by rounding, not by more


def _require_columns(frame: pd.DataFrame, required: Sequence[str], who: str, what: str) -> None:
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise ValueError(f"{who}: {what} lacks column(s) {missing}; it has {list(frame.columns)}")


def _distinct(names: Sequence[str], who: str, what: str) -> list[str]:
    names = [str(n) for n in names]
    if not names:
        raise ValueError(f"{who}: no {what} given")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"{who}: {what} {repeated} given more than once")
    return names


def rater_heatmap_figure(
    summary: pd.DataFrame, methods: list[str], raters: list[str], title: str, labels: dict[str, str] | None = None
) -> Figure:
    """Mean test DSC (%) of each method against each rater, as a heat map with the value written in each cell.

    `summary` is the results summary, one row per method × reference × metric (filtered beforehand
    to one dataset, noise level and structure): columns `method`, `reference`, `metric`, `mean`
    (over seeds, a fraction 0–1 as `bench.store` writes it); `std` and `n_seeds` may be there and
    are not drawn. The rows used are metric == "dsc" with reference == "rater:<name>"; every other
    row is ignored. Rows of the heat map are `methods` in the given order, labelled `labels[m]`
    (default: the name); columns are `raters` in the given order. Colours are mean × 100 on a
    fixed 0–100 scale (viridis), so two heat maps compare; a (method, rater) pair without a row,
    or with a NaN mean, is a blank light-grey cell, not 0. A method with no value for any of the
    given raters gets no row. The image's data (`Axes.images[0].get_array()`) is the
    (methods shown × raters) matrix in %, masked where missing. Raises ValueError for a missing
    column, an empty or repeated `methods` / `raters`, more than one row per (method, rater), or
    when no method has a per-rater DSC.
    """
    who = "rater_heatmap_figure"
    _require_columns(summary, ["method", "reference", "metric", "mean"], who, "summary")
    methods = _distinct(methods, who, "methods")
    raters = _distinct(raters, who, "raters")
    labels = dict(labels or {})
    references = {f"{_RATER_PREFIX}{r}": j for j, r in enumerate(raters)}
    rows = summary[(summary["metric"] == "dsc") & summary["reference"].isin(list(references)) & summary["method"].isin(methods)]
    repeated = rows[rows.duplicated(["method", "reference"], keep=False)]
    if len(repeated):
        pairs = sorted(set(zip(repeated["method"], repeated["reference"])))
        raise ValueError(f"{who}: more than one DSC row for (method, reference) {pairs}; "
                         "filter the summary to one dataset, noise level and structure first")  # fmt: skip
    values = np.full((len(methods), len(raters)), np.nan)
    where = {m: i for i, m in enumerate(methods)}
    for method, reference, mean in zip(rows["method"], rows["reference"], rows["mean"].astype(float)):
        values[where[method], references[reference]] = 100.0 * mean
    keep = ~np.isnan(values).all(axis=1)
    if not keep.any():
        raise ValueError(f"{who}: no method has a per-rater DSC (metric 'dsc', reference 'rater:<name>') for raters {raters}")
    shown = [m for m, k in zip(methods, keep) if k]
    values = values[keep]

    cmap = colormaps[_HEAT_CMAP].with_extremes(bad=_MISSING_CELL)
    norm = colors.Normalize(0.0, 100.0)
    fig = Figure(figsize=(max(4.5, 2.6 + 0.8 * len(raters)), max(2.6, 1.4 + 0.42 * len(shown))), layout="constrained")
    ax = fig.subplots()
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, norm=norm, aspect="auto", interpolation="nearest")
    for (i, j), v in np.ndenumerate(values):
        if np.isnan(v):
            continue  # blank: grey cell, no number
        r, g, b, _ = cmap(norm(v))
        ink = "white" if 0.299 * r + 0.587 * g + 0.114 * b < 0.5 else "black"
        ax.text(j, i, f"{v:.1f}", ha="center", va="center", fontsize=_FONT, color=ink)
    ax.set_xticks(np.arange(len(raters)), labels=raters)
    ax.set_yticks(np.arange(len(shown)), labels=[labels.get(m, m) for m in shown])
    ax.tick_params(length=0)
    if max(len(r) for r in raters) > 6:
        ax.tick_params(axis="x", labelrotation=30)
    ax.set_xlabel("rater")
    ax.set_ylabel("method")
    fig.colorbar(image, ax=ax, pad=0.02).set_label("DSC (%) vs rater", fontsize=_FONT)
    ax.set_title(title, fontsize=10)
    return fig


def _check_bins(bins: pd.DataFrame, who: str, keys: Sequence[str]) -> pd.DataFrame:
    """Validated calibration bins: the columns in `keys` + count, confidence, observed; float values, non-empty bins finite in [0, 1]."""
    _require_columns(bins, [*keys, "count", "confidence", "observed"], who, "bins")
    if "bin" in keys and bins.duplicated(list(keys)).any():
        raise ValueError(f"{who}: more than one row per ({', '.join(keys)}); pool the bins over cases and seeds first")
    out = bins.assign(
        count=bins["count"].astype(float), confidence=bins["confidence"].astype(float), observed=bins["observed"].astype(float)
    )
    if (out["count"] < 0).any() or out["count"].isna().any():
        raise ValueError(f"{who}: bin counts must be ≥ 0 and not NaN")
    full = out[out["count"] > 0]
    for column in ("confidence", "observed"):
        value = full[column].to_numpy()
        if not np.isfinite(value).all() or (value < -_PROB_TOL).any() or (value > 1 + _PROB_TOL).any():
            raise ValueError(f"{who}: {column} of a non-empty bin must be a probability in [0, 1] (a fraction, not %)")
    return out


def pooled_ece(bins: pd.DataFrame) -> float:
    """Expected calibration error of pooled reliability bins, a fraction 0–1.

    `bins` holds the bins of one method against one reference: columns `count` (pixels in the
    bin, ≥ 0), `confidence` (their mean predicted foreground probability) and `observed` (their
    mean target), as `bench.evaluate.calibration.reliability` returns them, pooled over cases and
    seeds by summing counts. ECE = Σ_b count_b |observed_b − confidence_b| / Σ_b count_b; empty bins
    (count 0, their means may be NaN) add nothing. NaN when every bin is empty. Raises ValueError
    for a missing column, a negative count, a non-empty bin without a probability, or — when the
    frame has `method` / `reference` / `bin` columns — bins of more than one (method, reference)
    or a bin given twice.
    """
    who = "pooled_ece"
    for key in ("method", "reference"):
        if key in bins.columns and bins[key].nunique(dropna=False) > 1:
            raise ValueError(f"{who}: bins of more than one {key} ({sorted(map(str, bins[key].unique()))}); pass one group at a time")
    bins = _check_bins(bins, who, ["bin"] if "bin" in bins.columns else [])
    full = bins[bins["count"] > 0]
    total = full["count"].sum()
    if total == 0:
        return float("nan")
    return float((full["count"] * (full["observed"] - full["confidence"]).abs()).sum() / total)


def reliability_figure(
    bins: pd.DataFrame, methods: list[str], colors: dict[str, object], title: str, labels: dict[str, str] | None = None
) -> Figure:
    """Reliability diagrams: observed frequency against predicted foreground probability, one panel per reference.

    `bins` holds pooled calibration bins, one row per method × reference × bin: columns `method`,
    `reference` (e.g. "gt", "rater-mean"), `bin` (0 … B−1), `count` (pixels in the bin summed over
    test cases and seeds), `confidence` (their mean predicted foreground probability) and
    `observed` (their mean target: the fraction that is GT foreground, or the mean rater vote);
    empty bins have count 0 (means NaN) or no row. Only the rows of `methods` are drawn.

    One panel per reference present, "gt" first, then "rater-mean", then the others sorted; each
    panel's axes carry the label "reference:<name>". A panel has the diagonal y = x (dashed, grey)
    and, per method in the given order that has a non-empty bin there, a line with markers through
    (confidence, observed) of its non-empty bins in bin order, coloured `colors[method]` and
    named "<labels[method] or method> (ECE x.xx %)", the `pooled_ece` of its bins in %. Axes are
    0–1 with equal aspect. Under each panel the pixels per bin (`figure_notes.bin_counts`). Raises ValueError for a missing column, a method without a colour, a
    bin given twice, bad counts or probabilities (see `pooled_ece`), or no rows for `methods`.
    """
    who = "reliability_figure"
    methods = _distinct(methods, who, "methods")
    bins = _check_bins(bins, who, ["method", "reference", "bin"])
    no_colour = [m for m in methods if m not in colors]
    if no_colour:
        raise ValueError(f"{who}: no colour for method(s) {no_colour}")
    labels = dict(labels or {})
    bins = bins[bins["method"].isin(methods)]
    if bins.empty:
        raise ValueError(f"{who}: no bins for methods {methods}")
    present = set(map(str, bins["reference"]))
    references = [r for r in _RELIABILITY_ORDER if r in present] + sorted(present - set(_RELIABILITY_ORDER))

    fig = Figure(figsize=(4.2 * len(references) + 0.4, 5.0), layout="constrained")
    for k, reference in enumerate(references):
        ax = fig.add_subplot(1, len(references), k + 1, label=f"reference:{reference}")
        ax.plot([0.0, 1.0], [0.0, 1.0], ls="--", color="0.5", lw=1, label="_diagonal", gid="diagonal")
        part = bins[bins["reference"].astype(str) == reference]
        for method in methods:
            rows = part[(part["method"] == method) & (part["count"] > 0)].sort_values("bin")
            if rows.empty:
                continue
            label = f"{labels.get(method, method)} (ECE {100 * pooled_ece(rows):.2f} %)"
            ax.plot(rows["confidence"].to_numpy(), rows["observed"].to_numpy(), marker="o", ms=3.5, lw=1.3, color=colors[method],
                    label=label, gid=f"method:{method}", clip_on=False)  # fmt: skip
        ax.set_xlim(0.0, 1.0)
        ax.set_ylim(0.0, 1.0)
        ax.set_aspect("equal")
        ax.set_xlabel("predicted foreground probability")
        ax.set_ylabel("observed frequency")
        figure_notes.bin_counts(ax, part, methods, colors)
        ax.grid(alpha=0.3)
        ax.set_title(f"reference: {reference}", fontsize=9)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=_FONT - 1, frameon=False, loc="upper left")
    fig.suptitle(fill(title, 4.2 * len(references)), fontsize=10)
    return fig
