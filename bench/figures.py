"""Paper figures that need more than the results table: parameter curves and image panels.

Pure rendering, in the style of `bench.report`: every function takes arrays, a DataFrame or a
trained method and returns a Matplotlib `Figure` (no pyplot global state); `bench.report.save`
writes it as PNG and PDF. No file access: a trained method comes from `bench.store.load_trained`.

- `param_figure`: DSC against a hyper-parameter (the paper's "Performance changes by varying (a)
  the threshold β … and (b) the trade-off λ").
- `rater_examples_figure`: image, reference and every rater's mask with its DSC (the paper's
  "Visualizations on five noisy segmentation labels").
- `fused_label_figure`: the raters, then Averaging, STAPLE, MV, SLL, TV and the segmentation
  network's probability map of a trained LF-Net (the paper's "Visualization of different fused
  labels on MNIST").
- `qualitative_figure`: test images, reference and each method's prediction with its DSC (the
  paper's "Qualitative comparisons").
- `pick_indices`: which images to show.
- `rater_heatmap_figure`: each method's mean DSC against each rater, as a heat map (from the results
  summary's "rater:<name>" rows).
- `reliability_figure` and `pooled_ece`: reliability diagrams of pooled calibration bins, one panel
  per reference (ground truth, rater mean), with each method's ECE.

Conventions shared by the image panels:

- Images (C, H, W): one channel is shown in grey, C = 3 as RGB (RIGA fundus photographs are RGB
  and unreadable as one channel), C > 3 as the mean over channels in grey; each image is scaled
  to its own min–max.
- Label maps are class indices: binary maps black (0) / white (1); with more classes (RIGA:
  0 background, 1 rim, 2 cup) a discrete grey ramp, background black and the last class white.
- DSC in the panels is `bench.evaluate.pixel.dice` of foreground = any class > 0, in %, two decimals.
- Every panel's axes carry a label (`Axes.get_label()`): "image", "reference", "rater:<r>",
  "method:<name>", "fused:<column>", "separator", so callers and tests can find them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from matplotlib import colormaps, colors
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, NullLocator

import methods
from bench.evaluate.pixel import dice
from bench.evaluate.tables import ordered_structures
from methods.fusion import majority_vote, rater_mean, threshold_vote_mask
from methods.staple import staple

__all__ = [
    "FUSED_COLUMNS",
    "fused_label_figure",
    "param_figure",
    "pick_indices",
    "pooled_ece",
    "qualitative_figure",
    "rater_examples_figure",
    "rater_heatmap_figure",
    "reliability_figure",
]

#: The fused-label columns of `fused_label_figure`, after the raters, in the paper's order.
FUSED_COLUMNS = ("Averaging", "STAPLE", "MV", "SLL", "TV", "Prob Map")
_HEAT_COLUMNS = {"Averaging", "STAPLE", "SLL", "Prob Map"}  # probabilities, on one shared 0–1 scale
_HEAT_CMAP = "viridis"
_PANEL = 1.3  # inches per image panel: 12 columns still fit a 16-inch-wide page at a legible size
_FONT = 8


# --------------------------------------------------------------------------- parameter curves


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


# --------------------------------------------------------------------------- image panels: helpers


def _show_image(ax: Axes, image: np.ndarray) -> None:
    """One image (C, H, W): grey for C ∈ {1, 2} (channel 0) and C > 3 (channel mean), RGB for C = 3; own min–max."""
    image = np.asarray(image, dtype=np.float32)
    if image.shape[0] == 3:
        lo, hi = float(image.min()), float(image.max())
        rgb = (image.transpose(1, 2, 0) - lo) / (hi - lo if hi > lo else 1.0)
        ax.imshow(np.clip(rgb, 0, 1), interpolation="nearest")
    else:
        grey = image.mean(0) if image.shape[0] > 3 else image[0]
        ax.imshow(grey, cmap="gray", interpolation="nearest")
    ax.set_axis_off()


def _mask_style(n_classes: int) -> dict:
    """imshow arguments for class-index maps: black/white when binary, a discrete grey ramp otherwise."""
    n_classes = max(int(n_classes), 2)
    cmap = colors.ListedColormap([str(g) for g in np.linspace(0.0, 1.0, n_classes)], name=f"classes{n_classes}")
    norm = colors.BoundaryNorm(np.arange(n_classes + 1) - 0.5, n_classes)
    return {"cmap": cmap, "norm": norm, "interpolation": "nearest"}


def _show_mask(ax: Axes, mask: np.ndarray, style: dict) -> None:
    ax.imshow(np.asarray(mask), **style)
    ax.set_axis_off()


def _show_missing(ax: Axes) -> None:
    ax.text(0.5, 0.5, "missing", transform=ax.transAxes, ha="center", va="center", fontsize=_FONT, color="0.4")
    ax.set_axis_off()


def _dsc_percent(pred: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """DSC (%) of foreground (class > 0) per image; pred, ref (N, H, W) class indices."""
    return 100 * dice(np.asarray(pred) > 0, np.asarray(ref) > 0)


def _check_indices(indices: Sequence[int], n: int) -> list[int]:
    out = [int(i) for i in indices]
    if not out:
        raise ValueError("no indices to show")
    bad = [i for i in out if not 0 <= i < n]
    if bad:
        raise ValueError(f"indices {bad} out of range for {n} images")
    return out


def _panel_grid(fig: Figure, n_rows: int, width_ratios: list[float]):
    return fig.add_gridspec(n_rows, len(width_ratios), width_ratios=width_ratios, wspace=0.02, hspace=0.02)


def _separator(fig: Figure, gs, column: int) -> None:
    """A dotted vertical line through all rows, in a narrow empty grid column (survives constrained layout)."""
    ax = fig.add_subplot(gs[:, column], label="separator")
    ax.plot([0.5, 0.5], [0.0, 1.0], ls=":", color="0.3", lw=1.2, clip_on=False)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_axis_off()


# --------------------------------------------------------------------------- rater examples


def rater_examples_figure(
    images: np.ndarray,
    raters: np.ndarray,
    gt: np.ndarray | None,
    rater_names: Sequence[str],
    indices: Sequence[int],
    title: str,
    rater_valid: np.ndarray | None = None,
) -> Figure:
    """Image, reference and every rater's mask, one row per index; a dotted line after the reference.

    images float32 (N, C, H, W); raters uint8 class indices (N, R, H, W); gt uint8 (N, H, W) or None
    (then there is no reference column and the rater panels carry no DSC); rater_names R names;
    rater_valid bool (N, R) or None (all present): a missing rater's panel says "missing".
    Each rater panel is titled with its name and, with gt, its foreground (class > 0) DSC vs gt in %.
    """
    n, n_raters = raters.shape[:2]
    if len(rater_names) != n_raters:
        raise ValueError(f"rater_names has {len(rater_names)} names for {n_raters} raters")
    rows = _check_indices(indices, n)
    valid = np.ones((n, n_raters), dtype=bool) if rater_valid is None else np.asarray(rater_valid, dtype=bool)
    n_classes = int(max(raters.max(initial=0), 0 if gt is None else gt.max(initial=0))) + 1
    style = _mask_style(n_classes)
    ref_cols = 1 if gt is None else 2
    fig = Figure(figsize=(_PANEL * (ref_cols + n_raters + 0.2), _PANEL * len(rows) + 0.6), layout="constrained")
    gs = _panel_grid(fig, len(rows), [1.0] * ref_cols + [0.15] + [1.0] * n_raters)
    _separator(fig, gs, ref_cols)
    for row, i in enumerate(rows):
        ax = fig.add_subplot(gs[row, 0], label="image")
        _show_image(ax, images[i])
        if row == 0:
            ax.set_title("image", fontsize=_FONT)
        if gt is not None:
            ax = fig.add_subplot(gs[row, 1], label="reference")
            _show_mask(ax, gt[i], style)
            if row == 0:
                ax.set_title("GT", fontsize=_FONT)
        scores = _dsc_percent(raters[i], np.broadcast_to(gt[i], raters[i].shape)) if gt is not None else None
        for r, name in enumerate(rater_names):
            ax = fig.add_subplot(gs[row, ref_cols + 1 + r], label=f"rater:{r}")
            if not valid[i, r]:
                _show_missing(ax)
                ax.set_title(name, fontsize=_FONT)
                continue
            _show_mask(ax, raters[i, r], style)
            ax.set_title(name if scores is None else f"{name}\nDSC {scores[r]:.2f}%", fontsize=_FONT)
    fig.suptitle(title, fontsize=10)
    return fig


# --------------------------------------------------------------------------- fused labels of a trained LF-Net


def fused_label_figure(
    images: np.ndarray,
    raters: np.ndarray,
    rater_valid: np.ndarray | None,
    method: methods.Method,
    indices: Sequence[int],
    title: str,
    rater_names: Sequence[str] | None = None,
    sll_temperature: float = 1.0,
) -> Figure:
    """The raters' labels and the fused labels of a trained LF-Net, one row per (training) image.

    Columns: Ŷ1 … ŶR (the raters, class indices), then `FUSED_COLUMNS`:
    - Averaging: fraction of the valid raters voting foreground (`methods.fusion.rater_mean`);
    - STAPLE: the binary STAPLE posterior of foreground per image (`methods.staple.staple`);
    - MV: the majority vote Ω (`methods.fusion.majority_vote`, ties to the lower class) > 0;
    - SLL: the soft-label network's probability of foreground, softmax(a1 / `sll_temperature`);
      the default 1 is the network's own output, `method.cfg.tau` shows the softened target q̂1
      that L_sl trains against;
    - TV: the threshold-vote mask M^tv with the method's β (`method.beta`), black 0 / white 1;
    - Prob Map: `method.predict_proba(image)`'s probability of foreground.
    Heat maps share one 0–1 colour scale and one colour bar.

    images float32 (N, C, H, W); raters uint8 (N, R, H, W); rater_valid bool (N, R) or None (all
    valid). `method` is a trained `methods.lf_net.LFNet` with a soft-label network
    (`cfg.soft_label == "sll"`, i.e. LF-Net and the variants that keep the SLL) built for R raters.
    Foreground is every class ≥ 1: with more than two classes (RIGA) each column shows the
    probability or mask of "not background" (STAPLE fuses the raters' class > 0 masks), so the
    figure stays a binary comparison of the fusion rules.
    Everything runs on a CPU float32 copy of `method` in eval mode under no_grad; `method` itself
    is left untouched.
    """
    if not hasattr(method, "sll") or not hasattr(method, "sll_logits"):
        soft = getattr(getattr(method, "cfg", None), "soft_label", None)
        raise ValueError(f"fused_label_figure needs an LF-Net with a soft-label network (cfg.soft_label='sll'); got {type(method).__name__} "
                         f"with soft_label={soft!r}")  # fmt: skip
    n, n_raters = raters.shape[:2]
    if n_raters != method.spec.n_raters:
        raise ValueError(f"the method was built for {method.spec.n_raters} raters, the data have {n_raters}")
    if images.shape[1] != method.spec.in_channels:
        raise ValueError(f"the method was built for {method.spec.in_channels} input channels, the images have {images.shape[1]}")
    rows = _check_indices(indices, n)
    valid = np.ones((n, n_raters), dtype=bool) if rater_valid is None else np.asarray(rater_valid, dtype=bool)
    names = [f"Ŷ{r + 1}" for r in range(n_raters)] if rater_names is None else [f"Ŷ{r + 1}\n{s}" for r, s in enumerate(rater_names)]
    fused = fused_labels(images[rows], raters[rows], valid[rows], method, sll_temperature)

    n_classes = method.spec.n_classes
    style, binary = _mask_style(n_classes), _mask_style(2)
    heat = {"cmap": _HEAT_CMAP, "norm": colors.Normalize(0.0, 1.0), "interpolation": "nearest"}
    n_cols = n_raters + len(FUSED_COLUMNS)
    fig = Figure(figsize=(_PANEL * (n_cols + 0.2) + 0.8, _PANEL * len(rows) + 0.7), layout="constrained")
    gs = _panel_grid(fig, len(rows), [1.0] * n_raters + [0.15] + [1.0] * len(FUSED_COLUMNS))
    _separator(fig, gs, n_raters)  # raters | fused labels
    panels = []
    for row, i in enumerate(rows):
        for r in range(n_raters):
            ax = fig.add_subplot(gs[row, r], label=f"rater:{r}")
            if valid[i, r]:
                _show_mask(ax, raters[i, r], style)
            else:
                _show_missing(ax)
            if row == 0:
                ax.set_title(names[r], fontsize=_FONT)
        for c, column in enumerate(FUSED_COLUMNS):
            ax = fig.add_subplot(gs[row, n_raters + 1 + c], label=f"fused:{column}")
            _show_mask(ax, fused[column][row], heat if column in _HEAT_COLUMNS else binary)
            panels.append(ax)
            if row == 0:
                ax.set_title(column, fontsize=_FONT)
    fig.colorbar(ScalarMappable(heat["norm"], _HEAT_CMAP), ax=panels, shrink=0.8, aspect=15, pad=0.01).set_label(
        "probability of foreground", fontsize=_FONT
    )
    fig.suptitle(title, fontsize=10)
    return fig


def fused_labels(
    images: np.ndarray, raters: np.ndarray, rater_valid: np.ndarray, method: methods.Method, sll_temperature: float = 1.0
) -> dict[str, np.ndarray]:
    """The `FUSED_COLUMNS` of `fused_label_figure` as arrays: {column: (B, H, W)}, float32 in [0, 1].

    images (B, C, H, W), raters (B, R, H, W) class indices, rater_valid (B, R) bool; foreground =
    class ≥ 1. Runs on a CPU float32 eval-mode copy of `method` under no_grad.
    """
    model = copy.deepcopy(method).to(device="cpu", dtype=torch.float32).eval()  # a copy: the caller's device and mode stay
    n_classes = model.spec.n_classes
    x = torch.from_numpy(np.ascontiguousarray(images, dtype=np.float32))
    y = torch.from_numpy(np.ascontiguousarray(raters)).long()
    v = torch.from_numpy(np.ascontiguousarray(rater_valid, dtype=bool))
    with torch.no_grad():
        sll = torch.softmax(model.sll_logits(x, y, v).float() / sll_temperature, dim=1)
        out = {
            "Averaging": rater_mean(y, v, n_classes)[:, 1:].sum(1),
            "STAPLE": torch.from_numpy(staple(np.asarray(raters) > 0, np.asarray(rater_valid, dtype=bool))),
            "MV": (majority_vote(y, v, n_classes) > 0).float(),
            "SLL": sll[:, 1:].sum(1),
            "TV": threshold_vote_mask(y, v, n_classes, model.beta).float(),
            "Prob Map": model.predict_proba(x).float()[:, 1:].sum(1),
        }
    return {k: t.numpy().astype(np.float32) for k, t in out.items()}


# --------------------------------------------------------------------------- qualitative comparison


def qualitative_figure(
    images: np.ndarray,
    gt: np.ndarray,
    probs_by_method: Mapping[str, np.ndarray],
    indices: Sequence[int],
    title: str,
    display: Mapping[str, str] | None = None,
    reference_label: str = "GT",
) -> Figure:
    """Test images, the reference and each method's argmax prediction with its DSC (%) below it.

    images float32 (N, C, H, W); gt (N, H, W) class indices, the evaluation reference (ground
    truth, or e.g. the majority vote where a dataset has none: name it with `reference_label`);
    probs_by_method {method: (N, L, H, W)} probabilities (any numeric dtype, e.g. the uint8 1/255
    steps of predictions.npz; only the argmax is used); display maps method names to column labels
    (default: the name). The DSC is `bench.evaluate.pixel.dice` of foreground = any class > 0 against the
    reference, also for multi-class data (RIGA: the disc); predictions are drawn with all classes.
    """
    if not probs_by_method:
        raise ValueError("qualitative_figure: no methods to show")
    n = gt.shape[0]
    for name, probs in probs_by_method.items():
        if probs.ndim != 4 or probs.shape[0] != n or probs.shape[2:] != gt.shape[1:]:
            raise ValueError(f"probs of {name!r} have shape {probs.shape}; expected (N, L, H, W) with N, H, W = {n}, {gt.shape[1:]}")
    rows = _check_indices(indices, n)
    display = dict(display or {})
    preds = {name: np.asarray(probs[rows]).argmax(1) for name, probs in probs_by_method.items()}  # (k, H, W)
    n_classes = max(max(p.shape[1] for p in probs_by_method.values()), int(gt.max(initial=0)) + 1)
    style = _mask_style(n_classes)
    n_cols = 2 + len(preds)
    fig = Figure(figsize=(_PANEL * (n_cols + 0.2), (_PANEL + 0.25) * len(rows) + 0.6), layout="constrained")
    gs = _panel_grid(fig, len(rows), [1.0] * 2 + [0.15] + [1.0] * len(preds))
    _separator(fig, gs, 2)  # reference | methods
    for row, i in enumerate(rows):
        ax = fig.add_subplot(gs[row, 0], label="image")
        _show_image(ax, images[i])
        ax_ref = fig.add_subplot(gs[row, 1], label="reference")
        _show_mask(ax_ref, gt[i], style)
        if row == 0:
            ax.set_title("image", fontsize=_FONT)
            ax_ref.set_title(reference_label, fontsize=_FONT)
        for c, (name, pred) in enumerate(preds.items()):
            ax = fig.add_subplot(gs[row, 3 + c], label=f"method:{name}")
            _show_mask(ax, pred[row], style)
            score = _dsc_percent(pred[row][None], gt[i][None])[0]
            ax.text(0.5, -0.03, f"{score:.2f}", transform=ax.transAxes, ha="center", va="top", fontsize=_FONT + 1)
            if row == 0:
                ax.set_title(display.get(name, name), fontsize=_FONT)
    fig.supxlabel(f"numbers: DSC (%) of each prediction vs {reference_label}, foreground = class > 0", fontsize=_FONT)
    fig.suptitle(title, fontsize=10)
    return fig


# --------------------------------------------------------------------------- which images


def pick_indices(gt: np.ndarray, k: int, seed: int = 0) -> list[int]:
    """k distinct, deterministic image indices spread over the foreground-area quantiles.

    gt (N, H, W) class indices (foreground = class > 0). Images with foreground are preferred;
    if fewer than k have any, the rest are drawn from the empty ones. The candidates are sorted by
    foreground area and cut into k equal bins (quantiles); one image is drawn per bin with
    `np.random.default_rng(seed)`, so the examples span small to large objects instead of being
    all tiny. Returns min(k, N) indices in order of increasing area.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    area = (np.asarray(gt) > 0).reshape(len(gt), -1).sum(1)
    rng = np.random.default_rng(seed)
    with_fg = np.flatnonzero(area > 0)
    candidates = with_fg[np.argsort(area[with_fg], kind="stable")]
    picked = [int(rng.choice(part)) for part in np.array_split(candidates, min(k, len(candidates)))] if len(candidates) else []
    if len(picked) < k:  # not enough images with foreground: fill with empty ones, still seeded
        empty = np.flatnonzero(area == 0)
        picked = [int(i) for i in rng.permutation(empty)[: k - len(picked)]] + picked
    return picked


# --------------------------------------------------------------------------- multi-rater evaluation: per-rater DSC, calibration

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
    mean target), as `bench.evaluate.multirater.reliability` returns them, pooled over cases and
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
    0–1 with equal aspect. Raises ValueError for a missing column, a method without a colour, a
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

    fig = Figure(figsize=(4.2 * len(references) + 0.4, 4.6), layout="constrained")
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
        ax.grid(alpha=0.3)
        ax.set_title(f"reference: {reference}", fontsize=9)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=_FONT - 1, frameon=False, loc="upper left")
    fig.suptitle(title, fontsize=10)
    return fig
