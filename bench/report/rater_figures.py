"""Figures of methods against each rater and of their calibration: the method × rater heat map and reliability diagrams
with each method's ECE (`pooled_ece`) and the bins' counts. Like bench/report/plots.py, each function returns a Matplotlib
`Figure`; the inputs are checked first, with one-line errors naming what is wrong."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib import colormaps, colors
from matplotlib.figure import Figure

from bench.report import figure_notes
from bench.report.plots import _FONT, _HEAT_CMAP, fill

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
        raise ValueError(
            f"{who}: more than one DSC row for (method, reference) {pairs}; "
            "filter the summary to one dataset, noise level and structure first"
        )
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
            ax.plot(
                rows["confidence"].to_numpy(),
                rows["observed"].to_numpy(),
                marker="o",
                ms=3.5,
                lw=1.3,
                color=colors[method],
                label=label,
                gid=f"method:{method}",
                clip_on=False,
            )
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
