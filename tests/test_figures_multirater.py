"""bench.report.example_figures: the per-rater DSC heat map, pooled ECE and the reliability diagrams, on small synthetic frames."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.image import imread

from bench.report import plots, rater_figures

RATERS = ["r1", "r2", "r3"]
COLORS = {"mv-unet": "tab:blue", "lf-net": "tab:orange", "staple-unet": "tab:green"}


def summary_rows() -> pd.DataFrame:
    """Per-rater DSC rows (fractions) and distractors: another metric, the GT reference, a method not asked for."""
    rows = [
        ("lf-net", "rater:r1", "dsc", 0.81),
        ("lf-net", "rater:r2", "dsc", 0.7234),
        ("lf-net", "rater:r3", "dsc", 0.655),
        ("mv-unet", "rater:r1", "dsc", 0.5),
        ("mv-unet", "rater:r3", "dsc", 0.9),  # no r2 row: a blank cell
        ("staple-unet", "gt", "dsc", 0.77),  # no per-rater row at all: no heat-map row
        ("lf-net", "gt", "dsc", 0.99),
        ("lf-net", "rater:r1", "iou", 0.11),
        ("mv-unet", "rater:r2", "ged", 0.33),
        ("other", "rater:r1", "dsc", 0.2),
        ("lf-net", "rater:r9", "dsc", 0.3),  # a rater not asked for
    ]
    frame = pd.DataFrame(rows, columns=["method", "reference", "metric", "mean"])
    return frame.assign(std=0.01, n_seeds=3)


def tick_texts(labels) -> list[str]:
    return [t.get_text() for t in labels]


# --------------------------------------------------------------------------- heat map


def test_heatmap_matrix_ticks_and_annotations():
    methods = ["mv-unet", "staple-unet", "lf-net"]
    fig = rater_figures.rater_heatmap_figure(summary_rows(), methods, RATERS, "per-rater", labels={"lf-net": "LF-Net"})
    ax, colorbar = fig.axes
    assert colorbar.get_label() == "<colorbar>" and colorbar.get_ylabel() == "DSC (%) vs rater"
    (image,) = ax.images
    expected = np.array([[50.0, np.nan, 90.0], [81.0, 72.34, 65.5]])  # staple-unet dropped, order kept
    shown = image.get_array()
    np.testing.assert_allclose(np.ma.filled(shown.astype(float), np.nan), expected)
    assert np.ma.getmaskarray(shown).tolist() == np.isnan(expected).tolist()
    assert (image.norm.vmin, image.norm.vmax) == (0.0, 100.0)
    assert np.allclose(image.cmap.get_bad(), [0.85, 0.85, 0.85, 1.0])  # missing is grey, not the colour of 0
    assert tick_texts(ax.get_yticklabels()) == ["mv-unet", "LF-Net"]
    assert tick_texts(ax.get_xticklabels()) == RATERS
    cells = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in ax.texts}
    assert cells == {(0, 0): "50.0", (0, 2): "90.0", (1, 0): "81.0", (1, 1): "72.3", (1, 2): "65.5"}  # none for the blank cell
    assert ax.get_title() == "per-rater"


def test_heatmap_fixed_scale_does_not_follow_the_data():
    frame = pd.DataFrame({"method": ["a", "a"], "reference": ["rater:x", "rater:y"], "metric": "dsc", "mean": [0.4, 0.45]})
    fig = rater_figures.rater_heatmap_figure(frame, ["a"], ["x", "y"], "t")
    image = fig.axes[0].images[0]
    assert (image.norm.vmin, image.norm.vmax) == (0.0, 100.0)
    np.testing.assert_allclose(image.get_array(), [[40.0, 45.0]])


def test_heatmap_errors():
    frame = summary_rows()
    with pytest.raises(ValueError, match="'reference'"):
        rater_figures.rater_heatmap_figure(frame.drop(columns="reference"), ["lf-net"], RATERS, "t")
    with pytest.raises(ValueError, match="'mean'"):
        rater_figures.rater_heatmap_figure(frame.drop(columns="mean"), ["lf-net"], RATERS, "t")
    with pytest.raises(ValueError, match="more than one DSC row.*lf-net"):
        rater_figures.rater_heatmap_figure(pd.concat([frame, frame]), ["lf-net"], RATERS, "t")
    with pytest.raises(ValueError, match="no method has a per-rater DSC"):
        rater_figures.rater_heatmap_figure(frame, ["staple-unet"], RATERS, "t")
    with pytest.raises(ValueError, match="no raters"):
        rater_figures.rater_heatmap_figure(frame, ["lf-net"], [], "t")


# --------------------------------------------------------------------------- pooled ECE


def test_pooled_ece_by_hand():
    bins = pd.DataFrame(
        {
            "bin": [0, 1, 2, 3],
            "count": [10, 30, 0, 60],
            "confidence": [0.05, 0.35, np.nan, 0.9],
            "observed": [0.10, 0.25, np.nan, 0.95],
        }
    )
    # (10·0.05 + 30·0.10 + 60·0.05) / 100; the empty bin adds nothing
    assert rater_figures.pooled_ece(bins) == pytest.approx((0.5 + 3.0 + 3.0) / 100)
    assert rater_figures.pooled_ece(bins.drop(index=2)) == pytest.approx(0.065)  # an absent empty bin is the same as count 0


def test_pooled_ece_perfect_calibration_is_zero_and_all_empty_is_nan():
    confidence = (np.arange(10) + 0.5) / 10
    bins = pd.DataFrame({"bin": range(10), "count": np.arange(1, 11) * 7, "confidence": confidence, "observed": confidence})
    assert rater_figures.pooled_ece(bins) == 0.0
    empty = pd.DataFrame({"count": [0, 0], "confidence": [np.nan, np.nan], "observed": [np.nan, np.nan]})
    assert np.isnan(rater_figures.pooled_ece(empty))


def test_pooled_ece_errors():
    bins = pd.DataFrame({"count": [5, 5], "confidence": [0.2, 0.7], "observed": [0.1, 0.8]})
    with pytest.raises(ValueError, match="'observed'"):
        rater_figures.pooled_ece(bins.drop(columns="observed"))
    with pytest.raises(ValueError, match="counts must be ≥ 0"):
        rater_figures.pooled_ece(bins.assign(count=[5, -1]))
    with pytest.raises(ValueError, match="not %"):
        rater_figures.pooled_ece(bins.assign(confidence=[20.0, 70.0]))
    with pytest.raises(ValueError, match="more than one method"):
        rater_figures.pooled_ece(bins.assign(method=["a", "b"]))
    with pytest.raises(ValueError, match="more than one row per \\(bin\\)"):
        rater_figures.pooled_ece(bins.assign(bin=[3, 3]))


# --------------------------------------------------------------------------- reliability diagrams


def calibration_bins(n_bins: int = 5) -> pd.DataFrame:
    """lf-net and mv-unet against gt and rater-mean (mv-unet has no rater-mean bins), plus one "other" reference."""
    rng = np.random.default_rng(0)
    rows = []
    for method, reference in [("lf-net", "rater-mean"), ("lf-net", "gt"), ("mv-unet", "gt"), ("lf-net", "majority")]:
        for b in rng.permutation(n_bins):  # rows out of bin order: the lines must follow the bin order
            count = 0 if b in (1, 3) and method == "lf-net" else int(rng.integers(1, 1000))
            conf = (b + rng.uniform(0.2, 0.8)) / n_bins
            obs = float(np.clip(conf + rng.normal(0, 0.08), 0, 1))
            rows.append((method, reference, int(b), count, np.nan if count == 0 else conf, np.nan if count == 0 else obs))
    return pd.DataFrame(rows, columns=["method", "reference", "bin", "count", "confidence", "observed"])


def test_reliability_panels_lines_and_legend():
    bins = calibration_bins()
    methods = ["mv-unet", "lf-net"]
    fig = rater_figures.reliability_figure(bins, methods, COLORS, "calibration", labels={"lf-net": "LF-Net"})
    assert [ax.get_label() for ax in fig.axes] == ["reference:gt", "reference:rater-mean", "reference:majority"]  # nothing else
    for ax in fig.axes:
        reference = ax.get_label().removeprefix("reference:")
        assert (ax.get_xlim(), ax.get_ylim()) == ((0.0, 1.0), (0.0, 1.0)) and ax.get_aspect() == 1.0
        assert ax.get_xlabel() == "predicted foreground probability" and ax.get_ylabel() == "observed frequency"
        lines = {line.get_gid(): line for line in ax.get_lines()}
        diagonal = lines.pop("diagonal")
        assert diagonal.get_linestyle() == "--"
        np.testing.assert_array_equal(diagonal.get_xydata(), [[0, 0], [1, 1]])
        expected_methods = [m for m in methods if ((bins["method"] == m) & (bins["reference"] == reference)).any()]
        assert list(lines) == [f"method:{m}" for m in expected_methods]  # mv-unet has no rater-mean panel line
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert len(legend) == len(expected_methods)
        for method, text in zip(expected_methods, legend):
            part = bins[(bins["method"] == method) & (bins["reference"] == reference)]
            full = part[part["count"] > 0].sort_values("bin")
            line = lines[f"method:{method}"]
            np.testing.assert_allclose(line.get_xdata(), full["confidence"])
            np.testing.assert_allclose(line.get_ydata(), full["observed"])
            assert line.get_marker() == "o" and line.get_color() == COLORS[method]
            ece = (full["count"] * (full["observed"] - full["confidence"]).abs()).sum() / full["count"].sum()
            assert text == f"{'LF-Net' if method == 'lf-net' else method} (ECE {100 * ece:.2f} %)"
            assert line.get_label() == text
    assert fig.get_suptitle() == "calibration"


def test_reliability_only_the_methods_asked_for(tmp_path):
    bins = calibration_bins()
    fig = rater_figures.reliability_figure(bins, ["mv-unet"], COLORS, "one method")
    assert [ax.get_label() for ax in fig.axes] == ["reference:gt"]  # mv-unet has gt bins only
    assert [line.get_gid() for line in fig.axes[0].get_lines()] == ["diagonal", "method:mv-unet"]
    png, pdf = plots.save(fig, tmp_path / "reliability")
    assert imread(png).shape[0] > 100 and pdf.read_bytes().startswith(b"%PDF")


def test_reliability_errors():
    bins = calibration_bins()
    with pytest.raises(ValueError, match="'confidence'"):
        rater_figures.reliability_figure(bins.drop(columns="confidence"), ["lf-net"], COLORS, "t")
    with pytest.raises(ValueError, match="'bin'"):
        rater_figures.reliability_figure(bins.drop(columns="bin"), ["lf-net"], COLORS, "t")
    with pytest.raises(ValueError, match="no colour for method\\(s\\) \\['lf-net'\\]"):
        rater_figures.reliability_figure(bins, ["lf-net"], {"mv-unet": "k"}, "t")
    with pytest.raises(ValueError, match="more than one row per"):
        rater_figures.reliability_figure(pd.concat([bins, bins]), ["lf-net"], COLORS, "t")
    with pytest.raises(ValueError, match="no bins for methods"):
        rater_figures.reliability_figure(bins, ["staple-unet"], COLORS, "t")


def test_heatmap_saves(tmp_path):
    fig = rater_figures.rater_heatmap_figure(summary_rows(), ["lf-net", "mv-unet"], RATERS, "t")
    png, pdf = plots.save(fig, tmp_path / "heatmap")
    assert imread(png).shape[1] > 100 and pdf.read_bytes().startswith(b"%PDF")
