"""bench.report.example_figures: panel counts, DSC numbers read back from the panels, axis scales, saving; bench.run.resolve.load_trained round trip."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.image import imread

import methods
from bench import store, study
from bench.report import example_figures, plots, rater_figures
from bench.run import resolve
from datasets.raters import RATER_NAMES
from datasets.raters.morpho import simulate_raters
from labels.fusion import majority_vote, threshold_vote_mask

PAPER = study.default()

SIZE = 28
N_RATERS = len(RATER_NAMES)


def disk_gt(n: int = 4, size: int = SIZE) -> np.ndarray:
    """(n, size, size) uint8 disks of growing radius, off-centre so that the raters differ."""
    yy, xx = np.mgrid[:size, :size]
    return np.stack([np.hypot(yy - 13 - i, xx - 12 + i) <= 3 + 2 * i for i in range(n)]).astype(np.uint8)


def dsc_by_hand(pred: np.ndarray, ref: np.ndarray) -> float:
    """Foreground (> 0) DSC in %, written out here independently of bench.evaluate.pixel; both empty = 100."""
    p, g = pred > 0, ref > 0
    denom = p.sum() + g.sum()
    return 100.0 if denom == 0 else 200.0 * (p & g).sum() / denom


def panels(fig, prefix: str) -> list:
    return [ax for ax in fig.axes if ax.get_label().startswith(prefix)]


@pytest.fixture(scope="module")
def data():
    gt = disk_gt()
    raters = simulate_raters(gt, seed=0)
    rng = np.random.default_rng(0)
    images = (gt[:, None] + 0.3 * rng.standard_normal((len(gt), 1, SIZE, SIZE))).astype(np.float32)
    valid = np.ones(raters.shape[:2], dtype=bool)
    valid[1, 4] = False  # one missing rater: its panel says so, it casts no vote
    return images, raters, valid, gt


@pytest.fixture(scope="module")
def lf_net():
    torch.manual_seed(0)
    return methods.build_method("lf-net", methods.DataSpec(in_channels=1, n_classes=2, n_raters=N_RATERS)).eval()


# --------------------------------------------------------------------------- param_figure


def param_points(values, structures=("disc", "cup")) -> pd.DataFrame:
    rows = []
    for s, structure in enumerate(structures):
        for j, v in enumerate(values):
            rows.append(
                {"value": v, "structure": structure, "mean": 0.6 + 0.05 * j - 0.1 * s, "std": np.nan if j == 0 else 0.02, "n_seeds": 3}
            )
    return pd.DataFrame(rows)


def test_param_figure_log_axis_for_lambda_and_one_line_per_structure():
    points = param_points([0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0])
    fig = plots.param_figure(points, "λ", "toy", default=0.01)
    (ax,) = fig.axes
    assert ax.get_xscale() == "log"
    assert len(ax.containers) == 2  # one errorbar line per structure
    for container, structure in zip(ax.containers, ["disc", "cup"]):  # STRUCTURE_ORDER: disc before cup
        expected = points[points["structure"] == structure].sort_values("value")["mean"] * 100
        np.testing.assert_allclose(container.lines[0].get_ydata(), expected)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "default λ = 0.01" in legend and "disc (3 seeds)" in legend


def test_param_figure_linear_axis_for_beta():
    fig = plots.param_figure(param_points([1, 2, 3, 4, 5], ["foreground"]), "β", "toy")
    (ax,) = fig.axes
    assert ax.get_xscale() == "linear"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3", "4", "5"]
    assert not any("default" in t.get_text() for t in ax.get_legend().get_texts())


def test_param_figure_rejects_duplicates():
    points = param_points([1, 2])
    with pytest.raises(ValueError, match="aggregate over seeds"):
        plots.param_figure(pd.concat([points, points]), "β", "toy")


# --------------------------------------------------------------------------- rater examples


def test_rater_examples_panels_and_dsc(data):
    images, raters, valid, gt = data
    fig = example_figures.rater_examples_figure(images, raters, gt, RATER_NAMES, [1, 3], "toy", rater_valid=valid)
    assert len(panels(fig, "image")) == 2 and len(panels(fig, "reference")) == 2
    rater_axes = panels(fig, "rater:")
    assert len(rater_axes) == 2 * N_RATERS
    assert len(panels(fig, "separator")) == 1
    checked = 0
    for k, ax in enumerate(rater_axes):  # created row by row, rater by rater
        i, r = [1, 3][k // N_RATERS], k % N_RATERS
        name, *rest = ax.get_title().split("\n")
        assert name == RATER_NAMES[r]
        if not valid[i, r]:
            assert rest == [] and [t.get_text() for t in ax.texts] == ["missing"]
            continue
        assert float(rest[0].removeprefix("DSC ").removesuffix("%")) == pytest.approx(dsc_by_hand(raters[i, r], gt[i]), abs=0.005)
        checked += 1
    assert checked == 2 * N_RATERS - 1


def test_rater_examples_without_gt_and_multiclass():
    gt = disk_gt(2)
    raters = np.stack([gt * 2, gt, np.zeros_like(gt)], axis=1)  # classes 0..2, as RIGA's rim/cup
    images = np.random.default_rng(0).random((2, 3, SIZE, SIZE), dtype=np.float32)  # RGB
    fig = example_figures.rater_examples_figure(images, raters, None, ["a", "b", "c"], [0, 1], "no gt")
    assert len(panels(fig, "reference")) == 0 and len(panels(fig, "image")) == 2
    rater_axes = panels(fig, "rater:")
    assert [ax.get_title() for ax in rater_axes] == ["a", "b", "c"] * 2  # no reference, no DSC
    shown = rater_axes[0].images[0]
    assert shown.cmap.N == 3  # discrete: one colour per class
    np.testing.assert_array_equal(shown.get_array(), raters[0, 0])
    assert panels(fig, "image")[0].images[0].get_array().shape == (SIZE, SIZE, 3)


# --------------------------------------------------------------------------- fused labels


def test_fused_label_figure_columns_and_values(data, lf_net):
    images, raters, valid, _ = data
    before = {k: v.clone() for k, v in lf_net.state_dict().items()}
    fig = example_figures.fused_label_figure(images, raters, valid, lf_net, [0, 1], "fused", rater_names=RATER_NAMES)
    assert len(panels(fig, "rater:")) == 2 * N_RATERS
    columns = (*example_figures.FUSION_COLUMNS, "SLL", "TV", "Prob Map")  # the rules, LF-Net's own, its prediction
    fused_axes = {c: panels(fig, f"fused:{c}") for c in columns}
    assert all(len(axes) == 2 for axes in fused_axes.values())
    assert len([ax for ax in fig.axes if ax.get_label() == "<colorbar>"]) == 1  # one shared colour bar
    assert [ax.get_title() for ax in fused_axes.values() for ax in ax[:1]] == list(columns)

    y, v = torch.from_numpy(raters[:2]).long(), torch.from_numpy(valid[:2])
    shown = {c: np.stack([ax.images[0].get_array() for ax in axes]) for c, axes in fused_axes.items()}
    counted = (raters[:2] * valid[:2, :, None, None]).sum(1) / valid[:2].sum(1)[:, None, None]
    np.testing.assert_allclose(shown["Averaging"], counted, atol=1e-6)  # row 1 has 4 valid raters
    np.testing.assert_array_equal(shown["MV"], majority_vote(y, v, 2).numpy())
    np.testing.assert_array_equal(shown["TV"], threshold_vote_mask(y, v, 2, N_RATERS - 1).numpy())
    with torch.no_grad():
        expected = lf_net.predict_proba(torch.from_numpy(images[:2]))[:, 1].numpy()
    np.testing.assert_allclose(shown["Prob Map"], expected, atol=1e-5)
    for c in ("Averaging", "STAPLE", "SLL", "Prob Map"):
        im = fused_axes[c][0].images[0]
        assert (im.norm.vmin, im.norm.vmax) == (0.0, 1.0)
        assert 0.0 <= shown[c].min() and shown[c].max() <= 1.0
    # the caller's model is untouched: same weights, still in eval mode
    assert not lf_net.training
    assert all(torch.equal(before[k], t) for k, t in lf_net.state_dict().items())


def test_fused_label_figure_multiclass_and_errors(data):
    images, raters, valid, _ = data
    torch.manual_seed(0)
    three = methods.build_method("lf-net", methods.DataSpec(1, 3, N_RATERS))
    multi = raters.copy()
    multi[:, :2] *= 2  # two raters say class 2
    fused = example_figures.fused_labels(images[:1], multi[:1], valid[:1], three)
    assert list(fused) == [*example_figures.FUSION_COLUMNS, "SLL", "TV", "Prob Map"] and all(
        a.shape == (1, SIZE, SIZE) for a in fused.values()
    )
    np.testing.assert_allclose(fused["Averaging"], (multi[:1] > 0).mean(1), atol=1e-6)  # foreground = class ≥ 1

    no_sll = methods.build_method("lf-net-s", methods.DataSpec(1, 2, N_RATERS))
    with pytest.raises(ValueError, match="fused labels of its own"):
        example_figures.fused_label_figure(images, raters, valid, no_sll, [0], "x")
    three_raters = methods.build_method("lf-net", methods.DataSpec(1, 2, 3))
    with pytest.raises(ValueError, match="built for 3 raters"):
        example_figures.fused_label_figure(images, raters, valid, three_raters, [0], "x")


# --------------------------------------------------------------------------- qualitative comparison


def test_qualitative_figure_dsc_below_panels(data):
    images, raters, _, gt = data
    rng = np.random.default_rng(1)
    perfect = np.stack([1 - gt, gt], axis=1).astype(np.float32)
    noisy = np.stack([1 - raters[:, 1], raters[:, 1]], axis=1).astype(np.float32) + rng.uniform(0, 0.2, perfect.shape).astype(np.float32)
    probs = {"mv-unet": noisy, "lf-net": perfect, "blank": np.stack([np.ones_like(perfect[:, 0]), np.zeros_like(perfect[:, 0])], 1)}
    fig = example_figures.qualitative_figure(images, gt, probs, [0, 2, 3], "qual", display={"lf-net": "LF-Net"})
    assert len(panels(fig, "image")) == 3 and len(panels(fig, "reference")) == 3
    for name, p in probs.items():
        axes = panels(fig, f"method:{name}")
        assert len(axes) == 3
        assert axes[0].get_title() == {"lf-net": "LF-Net"}.get(name, name)
        for ax, i in zip(axes, [0, 2, 3]):
            (text,) = ax.texts
            assert float(text.get_text()) == pytest.approx(dsc_by_hand(p[i].argmax(0), gt[i]), abs=0.005)
    assert [float(ax.texts[0].get_text()) for ax in panels(fig, "method:lf-net")] == [100.0] * 3
    assert [float(ax.texts[0].get_text()) for ax in panels(fig, "method:blank")] == [0.0] * 3


def test_qualitative_figure_rejects_bad_shapes(data):
    images, _, _, gt = data
    with pytest.raises(ValueError, match="expected \\(N, L, H, W\\)"):
        example_figures.qualitative_figure(images, gt, {"m": np.zeros((len(gt), 2, 5, 5))}, [0], "x")


# --------------------------------------------------------------------------- pick_indices


def test_pick_indices_spread_over_area_and_deterministic():
    size = 40
    yy, xx = np.mgrid[:size, :size]
    radii = [0, 0, 2, 3, 4, 6, 8, 10, 12, 14, 16, 0]  # three empty images
    gt = np.stack([np.hypot(yy - 20, xx - 20) < r for r in radii]).astype(np.uint8)
    picked = example_figures.pick_indices(gt, 3, seed=0)
    assert picked == example_figures.pick_indices(gt, 3, seed=0)
    assert len(set(picked)) == 3 and all(radii[i] > 0 for i in picked)
    area = [int(gt[i].sum()) for i in picked]
    assert area == sorted(area)
    by_area = sorted(a for a in (gt > 0).sum((1, 2)) if a > 0)
    assert area[0] <= by_area[len(by_area) // 3] and area[-1] >= by_area[-len(by_area) // 3]  # smallest and largest thirds
    assert len(example_figures.pick_indices(gt, 20)) == len(radii)  # more than there are: every image once
    fallback = example_figures.pick_indices(np.zeros((5, 4, 4), np.uint8), 2)  # no foreground anywhere: any images
    assert len(set(fallback)) == 2 and all(0 <= i < 5 for i in fallback)
    with pytest.raises(ValueError):
        example_figures.pick_indices(gt, 0)


# --------------------------------------------------------------------------- saving


def test_every_figure_saves_png_and_pdf(data, lf_net, tmp_path):
    images, raters, valid, gt = data
    probs = {"lf-net": np.stack([1 - gt, gt], 1).astype(np.float32)}
    built = {
        "param": plots.param_figure(param_points([0.001, 0.01, 0.1, 1.0]), "λ", "p", default=0.01),
        "raters": example_figures.rater_examples_figure(images, raters, gt, RATER_NAMES, [0, 1], "r", rater_valid=valid),
        "fused": example_figures.fused_label_figure(images, raters, valid, lf_net, [0, 1], "f"),
        "qual": example_figures.qualitative_figure(images, gt, probs, [0, 1], "q"),
    }
    for stem, fig in built.items():
        png, pdf = plots.save(fig, tmp_path / stem)
        pixels = imread(png)
        assert pixels.ndim == 3 and pixels.shape[0] > 100 and pixels.shape[1] > 100
        assert pdf.read_bytes().startswith(b"%PDF")


# --------------------------------------------------------------------------- load_trained


def fake_cell(folder, method: methods.Method, trains: str = "lf-net", write_checkpoint: bool = True):
    config = {"trains": trains, "method_config": dataclasses.asdict(method.cfg), "data_spec": dataclasses.asdict(method.spec)}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "checkpoints").mkdir(exist_ok=True)
    stages = method.stages
    torch.save(method.state_dict(), store.checkpoint_path(folder / "checkpoints", 0, stages[0].name))
    if write_checkpoint:
        torch.save(method.state_dict(), store.checkpoint_path(folder / "checkpoints", len(stages) - 1, stages[-1].name))
    return folder


def test_load_trained_round_trip(tmp_path):
    spec = methods.DataSpec(1, 2, N_RATERS)
    torch.manual_seed(1)
    original = methods.build_method("lf-net", spec, {"lam": 0.01}).eval()
    with torch.no_grad():  # non-default batch-norm statistics: buffers must travel too
        original.seg.head.bias.add_(0.5)
        original.seg.encoders[0][1].running_mean.add_(0.3)
    cell = fake_cell(tmp_path / "cell", original)
    loaded = resolve.load_trained(cell)
    assert isinstance(loaded, type(original)) and loaded.cfg == original.cfg and not loaded.training
    x = torch.randn(2, 1, SIZE, SIZE, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = original.predict_proba(x)
        assert torch.equal(loaded.predict_proba(x), expected)
        torch.manual_seed(2)
        fresh = methods.build_method("lf-net", spec).eval()
        assert not torch.allclose(fresh.predict_proba(x), expected)  # the round trip is not trivially true


def test_load_trained_errors_name_the_file(tmp_path):
    spec = methods.DataSpec(1, 2, N_RATERS)
    method = methods.build_method("lf-net", spec)
    cell = fake_cell(tmp_path / "unfinished", method, write_checkpoint=False)
    with pytest.raises(FileNotFoundError, match="stage-1-segmentation.pt.*did not finish.*stage-0-soft_label.pt"):
        resolve.load_trained(cell)
    with pytest.raises(FileNotFoundError, match="config.json"):
        resolve.load_trained(tmp_path / "nothing")
    bad = fake_cell(tmp_path / "bad", method, trains="no-such-method")
    with pytest.raises(ValueError, match="config.json.*no-such-method"):
        resolve.load_trained(bad)
    wrong_spec = fake_cell(tmp_path / "wrong", method)
    config = json.loads((wrong_spec / "config.json").read_text())
    config["data_spec"]["n_raters"] = 3
    (wrong_spec / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="stage-1-segmentation.pt: weights do not fit"):
        resolve.load_trained(wrong_spec)


# --------------------------------------------------------------------------- rank_figure


def test_rank_figure_orders_by_mean_rank_sizes_by_share_and_marks_the_median(tmp_path):
    shares = pd.DataFrame([[0.1, 0.3, 0.6], [0.9, 0.1, 0.0], [0.0, 0.6, 0.4]], index=["a", "b", "c"], columns=[1, 2, 3])
    colors = dict(zip("abc", plots.PALETTE))
    fig = plots.rank_figure(shares, "toy", colors, {"b": "Best"})
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["Best", "c", "a"]  # mean ranks 1.1, 2.4, 2.5
    blobs = {c.get_gid(): c for c in ax.collections if c.get_gid()}
    a = blobs["method:a"]
    np.testing.assert_allclose(a.get_offsets(), [[2, 1], [2, 2], [2, 3]])  # x = its place, y = the ranks it took
    np.testing.assert_allclose(a.get_sizes() / a.get_sizes().max(), [0.1 / 0.6, 0.3 / 0.6, 1.0])  # area ∝ share
    assert len(blobs["method:b"].get_offsets()) == 2  # a rank never taken draws no circle
    medians = {line.get_gid(): line.get_ydata()[0] for line in ax.lines if line.get_gid()}
    assert medians == {"median:b": 1, "median:c": 2, "median:a": 3}
    assert plots.save(fig, tmp_path / "ranks")[0].stat().st_size > 5000


def eval_logs(steps: dict[str, list[int]]) -> pd.DataFrame:
    """Two seeds of each method evaluated at its `steps` of one stage, the loss falling with the step."""
    rows = [
        {
            "method": m,
            "seed": seed,
            "stage": "train",
            "event": "eval",
            "step": step,
            "val_loss": 1.0 / (step + seed),
            "diagnostic_gt_dsc": 50.0 + step / 10,
            "restored_step": np.nan,
        }
        for m, s in steps.items()
        for seed in (0, 1)
        for step in s
    ]
    return pd.DataFrame(rows)


def test_one_evaluation_is_a_note_not_a_chart_and_steps_are_integer_ticks():
    logs = eval_logs({"mv-unet": [20], "lf-net": [1, 2, 3]})  # three steps: fractional ticks by default
    fig = plots.learning_curve_figure(PAPER, logs, ["mv-unet", "lf-net"], "t")
    once, curve = [ax for ax in fig.axes if ax.get_visible()]
    assert not once.axison and not once.lines and [t.get_gid() for t in once.texts] == ["note"]
    assert "one evaluation only (step 20)" in once.texts[0].get_text().replace("\n", " ")
    assert curve.axison and not curve.texts and curve.lines
    assert all(float(x).is_integer() for x in curve.get_xticks())
    diagnostic = plots.diagnostic_figure(PAPER, logs[logs["method"] == "mv-unet"], ["mv-unet"], ["mv-unet"], "t")
    assert [t.get_gid() for t in diagnostic.axes[0].texts] == ["note"] and not diagnostic.axes[0].lines
    drawn = plots.diagnostic_figure(PAPER, logs, ["mv-unet", "lf-net"], ["mv-unet", "lf-net"], "t")
    assert not drawn.axes[0].texts and all(float(x).is_integer() for x in drawn.axes[0].get_xticks())
    long = plots.learning_curve_figure(PAPER, eval_logs({"mv-unet": list(range(20, 20001, 20))}), ["mv-unet"], "t").axes[0]
    assert len(long.get_xticks()) <= 6  # 5-digit steps in a 3-inch panel: few enough ticks not to run together


def test_the_reliability_diagram_shows_the_pixels_in_each_bin():
    bins = pd.DataFrame(
        {
            "method": "lf-net",
            "reference": "gt",
            "bin": range(4),
            "count": [5000, 0, 30, 800],
            "confidence": [0.1, np.nan, 0.6, 0.9],
            "observed": [0.05, np.nan, 0.5, 0.95],
        }
    )
    fig = rater_figures.reliability_figure(bins, ["lf-net"], {"lf-net": "C0"}, "t")
    (ax,) = fig.axes
    (strip,) = ax.child_axes
    (line,) = strip.get_lines()
    assert line.get_gid() == "counts:lf-net" and strip.get_yscale() == "log"
    np.testing.assert_array_equal(line.get_xdata(), [0.1, 0.6, 0.9])  # the non-empty bins
    np.testing.assert_array_equal(line.get_ydata(), [5000, 30, 800])
