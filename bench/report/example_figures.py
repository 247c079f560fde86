"""Paper figures of images: raters, fused labels and predictions (bench/report/plots.py draws the results tables).

Pure rendering: every function takes arrays or a trained method and returns a Matplotlib `Figure`
(no pyplot global state); `bench.report.plots.save` writes it as PNG and PDF. No file access: a
trained method comes from `bench.run.resolve.load_trained`.

- `rater_examples_figure`: image, reference and every rater's mask with its DSC (the paper's
  "Visualizations on five noisy segmentation labels").
- `fused_label_figure`: the raters, then Averaging, STAPLE, MV, SLL, TV and the segmentation
  network's probability map of a trained LF-Net (the paper's "Visualization of different fused
  labels on MNIST").
- `qualitative_figure`: test images, reference and each method's prediction with its DSC (the
  paper's "Qualitative comparisons").
- `pick_indices`: which images to show.

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
import torch
from matplotlib import colors
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.figure import Figure

import methods
from bench.evaluate.scoring import reference_mask
from datasets import RaterData
from labels.fusion import majority_vote, rater_mean
from labels.overlap import dice
from labels.staple import staple

__all__ = [
    "FUSION_COLUMNS",
    "fused_label_figure",
    "pick_indices",
    "qualitative_figure",
    "rater_examples_figure",
]

#: The fused-label columns of `fused_label_figure`, after the raters, in the paper's order.
FUSION_COLUMNS = ("Averaging", "STAPLE", "MV")  # the fusion rules every fused-label figure shows, before the method's own
_HEAT_CMAP = "viridis"
_PANEL = 1.3  # inches per image panel: 12 columns still fit a 16-inch-wide page at a legible size
_FONT = 8


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
    temperature: float = 1.0,
) -> Figure:
    """The raters' labels, the fusion rules and a trained method's own fused labels, one row per (training) image.

    Columns: Ŷ1 … ŶR (the raters, class indices), then `FUSION_COLUMNS`:
    - Averaging: fraction of the valid raters voting foreground (`labels.fusion.rater_mean`);
    - STAPLE: the binary STAPLE posterior of foreground per image (`labels.staple.staple`);
    - MV: the majority vote Ω (`labels.fusion.majority_vote`, ties to the lower class) > 0;
    then the method's own (`Method.own_fused_labels`, with `temperature`; LF-Net: its soft label and threshold-vote
    mask), then Prob Map: `method.predict_proba(image)`'s probability of foreground. Probabilities share one 0–1
    colour scale and one colour bar; masks are black 0 / white 1. Foreground is every class ≥ 1: with more than two
    classes (RIGA) each column shows "not background" (STAPLE fuses the raters' class > 0 masks), so the figure stays a
    binary comparison of the fusion rules.

    images float32 (N, C, H, W); raters uint8 (N, R, H, W); rater_valid bool (N, R) or None (all
    valid). Everything runs on a CPU float32 copy of `method` in eval mode under no_grad; `method` itself is left
    untouched. ValueError for a method with no fused labels of its own.
    """
    n, n_raters = raters.shape[:2]
    if n_raters != method.spec.n_raters:
        raise ValueError(f"the method was built for {method.spec.n_raters} raters, the data have {n_raters}")
    if images.shape[1] != method.spec.in_channels:
        raise ValueError(f"the method was built for {method.spec.in_channels} input channels, the images have {images.shape[1]}")
    rows = _check_indices(indices, n)
    valid = np.ones((n, n_raters), dtype=bool) if rater_valid is None else np.asarray(rater_valid, dtype=bool)
    names = [f"Ŷ{r + 1}" for r in range(n_raters)] if rater_names is None else [f"Ŷ{r + 1}\n{s}" for r, s in enumerate(rater_names)]
    fused = fused_labels(images[rows], raters[rows], valid[rows], method, temperature)
    if set(fused) == {*FUSION_COLUMNS, "Prob Map"}:  # the rules and the prediction only: nothing of its own to show
        raise ValueError(
            f"fused_label_figure needs a method with fused labels of its own (Method.own_fused_labels); {type(method).__name__} "
            f"{getattr(method, 'cfg', '')} has none"
        )

    n_classes = method.spec.n_classes
    style, binary = _mask_style(n_classes), _mask_style(2)
    heat = {"cmap": _HEAT_CMAP, "norm": colors.Normalize(0.0, 1.0), "interpolation": "nearest"}
    n_cols = n_raters + len(fused)
    fig = Figure(figsize=(_PANEL * (n_cols + 0.2) + 0.8, _PANEL * len(rows) + 0.7), layout="constrained")
    gs = _panel_grid(fig, len(rows), [1.0] * n_raters + [0.15] + [1.0] * len(fused))
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
        for c, column in enumerate(fused):
            ax = fig.add_subplot(gs[row, n_raters + 1 + c], label=f"fused:{column}")
            _show_mask(ax, fused[column][row], binary if fused[column].dtype == bool else heat)
            panels.append(ax)
            if row == 0:
                ax.set_title(column, fontsize=_FONT)
    fig.colorbar(ScalarMappable(heat["norm"], _HEAT_CMAP), ax=panels, shrink=0.8, aspect=15, pad=0.01).set_label(
        "probability of foreground", fontsize=_FONT
    )
    # The masks' key: what white (1) means in each, the fusion rule's and the method's own.
    meanings = {"MV": "foreground", **method.fused_label_keys}
    key = "; ".join(f"{c}: {meanings[c]}" for c in fused if fused[c].dtype == bool and c in meanings)
    if key:
        fig.supxlabel(f"masks: white = 1, black = 0. {key}", fontsize=_FONT)
    fig.suptitle(title, fontsize=10)
    return fig


def fused_labels(
    images: np.ndarray, raters: np.ndarray, rater_valid: np.ndarray, method: methods.Method, temperature: float = 1.0
) -> dict[str, np.ndarray]:
    """The fused-label columns of `fused_label_figure` as arrays, in order: {column: (B, H, W)}, float32 in [0, 1] for a
    probability, bool for a mask.

    images (B, C, H, W), raters (B, R, H, W) class indices, rater_valid (B, R) bool; foreground = class ≥ 1. Runs on a
    CPU float32 eval-mode copy of `method` under no_grad.
    """
    model = copy.deepcopy(method).to(device="cpu", dtype=torch.float32).eval()  # a copy: the caller's device and mode stay
    n_classes = model.spec.n_classes
    x = torch.from_numpy(np.ascontiguousarray(images, dtype=np.float32))
    y = torch.from_numpy(np.ascontiguousarray(raters)).long()
    v = torch.from_numpy(np.ascontiguousarray(rater_valid, dtype=bool))
    with torch.no_grad():
        out = {
            "Averaging": rater_mean(y, v, n_classes)[:, 1:].sum(1),
            "STAPLE": torch.from_numpy(staple(np.asarray(raters) > 0, np.asarray(rater_valid, dtype=bool))),
            "MV": majority_vote(y, v, n_classes) > 0,
            **model.own_fused_labels(x, y, v, temperature),
            "Prob Map": model.predict_proba(x).float()[:, 1:].sum(1),
        }
    return {k: t.numpy() if t.dtype == torch.bool else t.float().numpy().astype(np.float32) for k, t in out.items()}


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


def example_indices(split: RaterData, k: int) -> list[int]:
    """`pick_indices` on the split's GT, or on its raters' majority vote where it has none."""
    return pick_indices(split.gt if split.gt is not None else reference_mask(split, "majority"), k)


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
