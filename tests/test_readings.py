"""One trajectory, many readings (docs/decisions.md, "Readings along one trajectory"; bench/train/readings.py,
bench/run/readings.py, bench/report/trajectory_audit.py, bench/report/views.py) and the paper recipe's test curve."""

from __future__ import annotations

import dataclasses
import functools
import math
import re

import numpy as np
import pandas as pd
import pytest
import torch
from test_protocol import RUN, Scripted, tiny

import methods
from bench import cli, files, store, study
from bench.report import stop_audit, trajectory_audit
from bench.run import cell as cell_module
from bench.train import budget, checkpoints, harness
from bench.train.budget import Schedule
from methods.base import DataSpec


def curve_dsc(curve: pd.DataFrame) -> pd.Series:
    """Mean per-case DSC of a test curve (its counts), per step; an empty pair reads 1, as the long table's DSC."""
    denominator = 2 * curve["tp"] + curve["fp"] + curve["fn"]
    return curve.assign(dsc=np.where(denominator > 0, 2 * curve["tp"] / denominator.clip(lower=1), 1.0)).groupby("step")["dsc"].mean()


def gt_dsc(rows: pd.DataFrame) -> float:
    return rows[(rows["metric"] == "dsc") & (rows["reference"] == "gt")]["value"].mean()


def test_readings_land_at_the_declared_steps_of_a_tiny_run(tmp_path, monkeypatch, capsys):
    """A trajectory cell scores its fixed steps (250 × 2^k, here 2 × 2^k) and the readings its stage held into
    readings.parquet, its test curve every CURVE_EVERY steps, and keeps its primary reading (the selection) as its result;
    `bench report --reading` reports any of them, and `bench audit-stops FOLDER` audits the folder from this one run."""
    monkeypatch.setattr(budget, "FIRST_READING", 2)
    monkeypatch.setattr(budget, "CURVE_EVERY", 4)
    results = tmp_path / "r"
    args = [
        "run",
        "--budget",
        "trajectory",
        "--methods",
        "mv-unet",
        "--seeds",
        "0",
        "--max-steps",
        "8",
        "--train-size",
        "32",
        "--test-size",
        "16",
        "--no-progress",
        "--results",
        str(results),
    ]
    assert cli.main(args) == 0
    folder = next(results.glob("runs/**/mv-unet/seed-0"))
    manifest = files.read_json(folder / store.MANIFEST)
    readings = pd.read_parquet(folder / store.READINGS)
    held = {"min-val-loss", "gt-best", "last"}  # the rule's stop lies past this horizon; the selection is the result
    assert manifest["reading"] == "selection" and set(manifest["readings"]) == {"step-2", "step-4", "step-8", "selection", *held}
    assert set(readings["reading"]) == {"step-2", "step-4", "step-8", *held}
    steps = readings.groupby("reading")["reading_step"].first()
    assert steps[["step-2", "step-4", "step-8", "last"]].tolist() == [2, 4, 8, 8]
    assert not readings["reference"].str.startswith("rater:").any() and {"gt", "staple", "raters"} <= set(readings["reference"])
    curve = pd.read_parquet(folder / store.TEST_CURVE)
    assert sorted(set(curve["step"])) == [4, 8] and len(curve) == 2 * 16
    assert curve_dsc(curve)[8] == pytest.approx(gt_dsc(readings[readings["reading"] == "last"]))
    assert not (folder / store.PARTS).exists()

    assert cli.main(["report", "--results", str(results), "--reading", "step-4"]) == 0
    view = results / "views" / "step-4"
    shown = pd.read_parquet(next(view.glob("runs/**/seed-0")) / store.METRICS)
    assert gt_dsc(shown) == pytest.approx(gt_dsc(readings[readings["reading"] == "step-4"]))
    assert "reading step-4" in (view / "report").joinpath("table1_mnist-5k_lfnet_protocol_gt_foreground.md").read_text()
    assert "| reading | `step-4` (the weights each cell's numbers are read from" in (view / "paper" / "REPRODUCTION.md").read_text()
    assert cli.main(["report", "--results", str(results), "--reading", "rule"]) == 2  # the rule's stop lies past this horizon

    assert cli.main(["audit-stops", str(results)]) == 0
    text = (results / store.STOP_AUDIT / trajectory_audit.MARKDOWN).read_text()
    assert "| MV-UNet | dsc | 1 | — |" in text and "no rule stop" in text and "selection at" in text
    row = next(line for line in text.splitlines() if line.startswith("| MV-UNet | dsc |")).split("|")
    assert row[8].strip() == "—"  # the seed sd: one seed has none
    logged = pd.read_csv(folder / store.TRAIN_LOG).query("event == 'eval'")  # the figure's validation line: every evaluation
    validation = trajectory_audit.validation_curves(results)
    assert validation["step"].tolist() == logged["step"].tolist() == [8]
    assert validation["dsc"].tolist() == pytest.approx((logged["diagnostic_gt_dsc"] / 100).tolist())
    stages = manifest["stages"].values()  # hours: every stage's own clock, which a resumed cell carries over
    assert trajectory_audit.audit(results)[2]["seconds"].tolist() == [pytest.approx(sum(s["seconds"] for s in stages))]
    config = files.read_json(folder / store.CONFIG)
    config["budget"] |= {"name": "plateau", "fixed_length": False}  # the same cell as if it had stopped on the rule
    files.write_json(folder / store.CONFIG, config)
    capsys.readouterr()
    assert cli.main(["audit-stops", str(results)]) == 2  # its last weights are the rule's stop: no horizon to audit
    assert "trained under plateau, which stop on the rule" in capsys.readouterr().err
    config["budget"] |= {"name": "trajectory", "fixed_length": True}
    files.write_json(folder / store.CONFIG, config)

    # The dry run's estimate counts what this run did: its evaluations, curve points and read-outs (the result and every
    # reading, "rule" included: its stop lies past this horizon, so the run made one read-out fewer).
    capsys.readouterr()
    assert cli.main([*args[:-1], str(tmp_path / "dry"), "--dry-run"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("  mv-unet on mnist-5k: "))
    evals, points, reads = map(
        int, re.search(r"\+ (\d+) evaluations × .*; (\d+) test-curve point\(s\) × .*, (\d+) read-out", line).groups()
    )
    log = pd.read_csv(folder / store.TRAIN_LOG)
    assert evals == (log["event"] == "eval").sum() == 8 // 20 + 1  # every eval_every steps and at the last
    assert points == curve["step"].nunique() and reads == len(set(manifest["readings"]) | {"rule"})


def test_the_selection_never_reads_gt():
    """Shuffled ground truth leaves the GT-free selection (its step, score and weights) and every other reading but the
    GT-best as they were; the GT-best moves with it."""
    data, val = tiny(16, seed=0), tiny(8, seed=1)
    fused = (val[1].sum(1) >= 2).astype(np.uint8)
    gt = (np.random.default_rng(5).random(fused.shape) > np.linspace(0.1, 0.9, len(fused))[:, None, None]).astype(np.uint8)
    shuffled = np.random.default_rng(6).permutation(gt.ravel()).reshape(gt.shape)  # its pixels shuffled across images
    fitted = []
    for g in (gt, shuffled):
        torch.manual_seed(0)
        m = methods.build_method("mv-unet", DataSpec(1, 2, 3))
        sched = {"train": Schedule("adam", 1e-2, 4, 24, False, eval_every=2)}
        fitted.append(
            harness.fit(m, harness.Split(*data), sched, RUN, val=harness.Split(*val, gt=g, fused=fused), out=harness.Output(progress=False))
        )
    a, b = (f.readings for f in fitted)
    assert set(a) == set(b) == {"selection", "gt-best", "min-val-loss", "last"}
    for name in ("selection", "min-val-loss", "last"):
        assert (a[name]["step"], a[name]["score"]) == (b[name]["step"], b[name]["score"]) or np.isnan(a[name]["score"])
        for key, value in a[name]["state"].items():
            assert torch.equal(value, b[name]["state"][key]), (name, key)
    assert a["gt-best"]["score"] != b["gt-best"]["score"]


def test_the_selection_holds_the_best_window_of_agreement():
    """The selection reads the mean of the last three evaluations' agreement and holds the newest weights of the best
    window; a later single high evaluation inside a lower window does not win."""
    from bench.train.readings import Held

    held, weights = Held(), []
    for step, value in enumerate([50.0, 60.0, 70.0, 65.0, 40.0, 90.0, 30.0, 20.0]):
        m = torch.nn.Linear(1, 1)
        torch.nn.init.constant_(m.weight, step)
        weights.append(m)
        held.select(value, step, m)
    # windows: 50, 55, 60, 65, 58.3, 65, 53.3, 46.7: the first 65 (steps 1-3) holds, ties keep the earlier
    assert held.readings["selection"]["step"] == 3 and held.readings["selection"]["score"] == pytest.approx(65.0)
    assert held.readings["selection"]["state"]["weight"].item() == 3


def test_a_fixed_length_stage_holds_the_weights_the_rule_would_have_restored(tmp_path):
    """The rule replayed in a fixed-length stage holds the weights an early-stopping run of the same seed restores (its
    prefix), and logs where it would have stopped; the stage itself goes on to its length."""
    curve = [float(v) for v in np.linspace(5.0, 1.0, 12)] + [1.2, 0.99, 1.3] + [1.1] * 40
    early = Schedule("adam", 0.1, 4, 200, True, eval_every=2, patience=3, patience_ratio=0.5, smooth=3, min_evals=4)
    fixed = dataclasses.replace(early, early_stopping=False, restore=True, max_steps=110, rule_cap=200)
    runs = {}
    for name, sched in (("early", early), ("fixed", fixed)):
        m = Scripted(curve)
        torch.manual_seed(0)
        m.net.reset_parameters()
        runs[name] = (
            m,
            harness.fit(
                m,
                harness.Split(*tiny()),
                {"train": sched},
                RUN,
                val=harness.Split(*tiny(), fused=tiny()[1][:, 0]),
                out=harness.Output(log_path=tmp_path / f"{name}.csv", progress=False),
            ),
        )
    (early_m, early_fit), (_, fixed_fit) = runs["early"], runs["fixed"]
    stop = early_fit.stages["train"]
    assert fixed_fit.stages["train"]["step"] == 110 and fixed_fit.stages["train"]["rule_stop"] == stop["step"]
    assert fixed_fit.readings["rule"]["step"] == stop["restored_step"] == fixed_fit.stages["train"]["rule_restored"] == 28
    assert torch.equal(fixed_fit.readings["rule"]["state"]["net.weight"], early_m.state_dict()["net.weight"])
    assert early_fit.readings["rule"]["step"] == 28 and "min-val-loss" not in early_fit.readings
    # a run resumed after this stage reads its stop row back as it was returned (its rule fields are text and steps)
    logged = checkpoints.logged_stops(tmp_path / "fixed.csv")["train"]
    assert {k: logged[k] for k in ("rule_stop", "rule_how", "rule_restored")} == {
        k: fixed_fit.stages["train"][k] for k in ("rule_stop", "rule_how", "rule_restored")
    }


@pytest.mark.parametrize(
    ("metric", "rule", "last", "drifts", "expected"),
    [
        ("dsc", [0.80, 0.82], [0.90, 0.91], False, ("improves", "the rule stopped early")),  # a curve still rising at the stop
        ("dsc", [0.80, 0.82], [0.805, 0.815], False, ("stable", "")),  # flat: within the seed sd
        ("dsc", [0.86, 0.85], [0.76, 0.75], True, ("degrades", "its own loss leaves GT")),  # QMV-UNet's drift
        ("dsc", [0.86, 0.85], [0.76, 0.75], False, ("degrades", "it drifts past its loss minimum")),
        ("ged", [0.50, 0.50], [0.52, 0.52], False, ("stable", "")),  # within 5 % of GED
        ("ged", [0.50, 0.50], [0.56, 0.56], False, ("degrades", "it drifts past its loss minimum")),  # GED up: worse
        ("ged", [0.50, 0.50], [0.44, 0.44], False, ("improves", "the rule stopped early")),
    ],
)
def test_the_signed_verdict_on_synthetic_curves(metric, rule, last, drifts, expected):
    at = pd.DataFrame({"rule": rule, "last": last, "step-250": [0.5, 0.5]}, index=pd.Index([0, 1], name="seed"))
    judged = trajectory_audit.judge(at, metric, spread=0.005, drifts=drifts)
    assert (judged["verdict"], judged["cause"]) == expected
    assert judged["tolerance"] == pytest.approx(max(0.025 if metric == "ged" else 0.005, np.std(rule, ddof=1)))
    assert not judged["second_seed_due"]  # two seeds behind every verdict


def test_the_verdict_judges_the_mean_move_and_keeps_each_seeds():
    """Two seeds whose moves part (QMV-UNet's kept pair: -3.988 and +1.165 DSC points) are judged on their mean against the
    rule reading's seed sd; the page shows each seed's move beside it."""
    at = pd.DataFrame({"rule": [0.8539, 0.8565], "last": [0.8140, 0.8681]}, index=pd.Index([0, 1], name="seed"))
    judged = trajectory_audit.judge(at, "dsc", spread=0.02, drifts=True)
    assert judged["moves"] == pytest.approx((-0.0399, 0.0116))
    assert judged["diff"] == pytest.approx(np.mean(judged["moves"]))
    assert judged["seed_sd"] == pytest.approx(np.std([0.8539, 0.8565], ddof=1))
    assert judged["verdict"] == "stable"


@pytest.mark.parametrize(("last", "due"), [(0.80, True), (0.809, True), (0.811, False), (0.791, True), (0.789, False)])
def test_a_one_seed_verdict_within_twice_its_tolerance_asks_for_a_second_seed(last, due):
    """The declared evidence adds seed 1 where a one-seed move lies within twice its tolerance (here the spread, 0.005)."""
    at = pd.DataFrame({"rule": [0.80], "last": [last]}, index=pd.Index([0], name="seed"))
    judged = trajectory_audit.judge(at, "dsc", spread=0.005, drifts=False)
    assert judged["second_seed_due"] is due
    verdicts = pd.DataFrame([{"method": "mv-unet", "metric": "dsc", **judged}])
    assert ("Second seed due" in trajectory_audit.due_line(study.default(), verdicts)) is due


def test_the_two_run_cost_adds_each_stage_at_its_own_stop():
    """LF-Net's cheap first stage stops late and its dear second stage early: each stage counts at its own stop."""
    stages = {
        "soft_label": {"step": 8000, "seconds": 1000.0, "rule_stop": 4000},
        "segmentation": {"step": 8000, "seconds": 3000.0, "rule_stop": 800},
    }
    assert trajectory_audit.two_run_seconds(stages) == pytest.approx(5 * (1000 * 0.5 + 3000 * 0.1))
    assert math.isnan(trajectory_audit.two_run_seconds({"train": {"step": 8000, "seconds": 10.0}}))  # no rule stop


def test_the_stage_display_says_equal_only_where_every_earlier_stage_restored_the_same_step():
    """A later stage's replay that restores the long run's step starts from other weights where an earlier stage did not:
    it is not "= long" (LF-Net's first stage: the rule restored 5,000, the long run 19,900)."""
    st = pd.DataFrame(
        {
            "dataset": "d",
            "raters": "r",
            "noise": "n",
            "method": ["lf-net", "lf-net", "mv-unet"],
            "stage": ["soft_label", "segmentation", "train"],
            "replay_same": [False, True, True],
        }
    )
    tw = pd.DataFrame(
        {
            "dataset": "d",
            "raters": "r",
            "noise": "n",
            "method": ["lf-net", "lf-net", "mv-unet"],
            "stage": ["soft_label", "segmentation", "train"],
            "shared": [250, 250, 40],
            "twin_diff": [0.0, 0.9, 0.0],
        }
    )
    marked = stop_audit.mark_twins(st, tw)
    assert marked["replay_same"].tolist() == [False, False, True]


def test_the_paper_recipe_keeps_a_test_curve_that_never_selects(tmp_path):
    """Under `--budget paper` a cell scores the test split at the end of every epoch of the stage that predicts and keeps
    the counts; its result is its last weights, which the curve's last point equals."""
    results = tmp_path / "r"
    args = [
        "run",
        "--budget",
        "paper",
        "--methods",
        "mv-unet",
        "--seeds",
        "0",
        "--max-steps",
        "3",
        "--train-size",
        "8",
        "--test-size",
        "16",
        "--no-progress",
        "--results",
        str(results),
    ]
    assert cli.main(args) == 0
    folder = next(results.glob("runs/**/mv-unet/seed-0"))
    manifest = files.read_json(folder / store.MANIFEST)
    assert manifest["test_curve"] == {"stage": "train", "steps": [1, 2, 3], "selects": False} and manifest["reading"] == "last"
    curve = pd.read_parquet(folder / store.TEST_CURVE)
    assert sorted(set(curve["step"])) == [1, 2, 3] and curve.groupby("step")["epoch"].first().tolist() == [1, 2, 3]
    metrics = pd.read_parquet(folder / store.METRICS)
    assert curve_dsc(curve)[3] == pytest.approx(gt_dsc(metrics))
    assert manifest["stages"]["train"]["restored_step"] == 3  # the last weights: nothing restored, nothing selected
    assert set(manifest["readings"]) >= {"selection", "gt-best", "min-val-loss"}  # scored beside, never the result


def test_the_curve_figure_shows_one_panel_per_method_and_no_empty_frame():
    """Five methods on a four-column grid: five panels titled by method, the row's other three hidden."""
    data = pd.DataFrame(
        [(m, 0, step, step, 0.5) for m in ("mv-unet", "qmv-unet", "staple-unet", "lf-net", "oracle") for step in (1, 2)],
        columns=["method", "seed", "step", "epoch", "dsc"],
    )
    fig = trajectory_audit.curves(study.default(), data, by="epoch")
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert len(fig.axes) == 8 and len(shown) == 5 and all(ax.get_title() for ax in shown)


def test_a_sampler_panel_adds_its_ged_at_the_fixed_steps():
    """A sampler's panel (the field's methods) carries its test GED on a right axis: the mean over seeds at each `step-N`
    reading and a star at each seed's primary (so the DSC panel's stars); a method outside the field gets no second
    axis."""
    data = pd.DataFrame(
        [(m, seed, step, 1, 0.5) for m in ("mv-unet", "prob-unet") for seed in (0, 1) for step in (250, 500, 1000)],
        columns=["method", "seed", "step", "epoch", "dsc"],
    )
    values = pd.DataFrame(
        [
            (m, seed, reading, metric, step, value + seed * 0.1)
            for m in ("mv-unet", "prob-unet")
            for seed in (0, 1)
            for reading, step, value in (("step-250", 250, 0.6), ("step-500", 500, 0.4), ("selection", 380, 0.3))
            for metric in ("dsc", "ged")
        ],
        columns=["method", "seed", "reading", "metric", "step", "value"],
    )
    cells = pd.DataFrame(
        [(m, seed, "selection", np.nan) for m in ("mv-unet", "prob-unet") for seed in (0, 1)],
        columns=["method", "seed", "primary", "rule_stop"],
    )
    fig = trajectory_audit.curves(study.default(), data, cells, values)
    twins = [ax for ax in fig.axes if ax.get_visible() and ax.get_ylabel() == "test GED ↓"]
    assert len(twins) == 1 and len([ax for ax in fig.axes if ax.get_visible()]) == 3
    fixed, star = twins[0].get_lines()
    assert list(fixed.get_xdata()) == [250, 500] and list(fixed.get_ydata()) == pytest.approx([0.65, 0.45])
    assert list(star.get_xdata()) == [380, 380] and list(star.get_ydata()) == pytest.approx([0.3, 0.4])  # each seed's
    dsc = [ax for ax in fig.axes if ax.get_visible() and ax.get_title() == "MV-UNet"][0]
    stars = [line for line in dsc.get_lines() if line.get_marker() == "*"]
    assert len(stars) == 1 and list(stars[0].get_ydata()) == pytest.approx([30, 40])


def test_the_validation_line_reaches_back_to_the_first_evaluation_without_flattening_the_test_curve():
    """The validation DSC against GT (every evaluation, from step 20) is drawn behind the test curve (from step 250): its
    early peak stays in view, its first near-zero evaluations do not stretch the axis down, and the step axis then labels
    whole decades."""
    data = pd.DataFrame(
        [("mv-unet", 0, step, 1, dsc) for step, dsc in ((250, 0.60), (8000, 0.64))], columns=["method", "seed", "step", "epoch", "dsc"]
    )
    validation = pd.DataFrame(
        [("mv-unet", 0, step, dsc) for step, dsc in ((20, 0.02), (40, 0.81), (60, 0.7), (8000, 0.62))],
        columns=["method", "seed", "step", "dsc"],
    )
    ax = trajectory_audit.curves(study.default(), data, validation=validation).axes[0]
    grey = [line for line in ax.get_lines() if line.get_color() == "0.7"]
    assert len(grey) == 1 and list(grey[0].get_xdata()) == [20, 40, 60, 8000]
    bottom, top = ax.get_ylim()
    assert 50 < bottom < 60 and top > 81
    assert [t for t in ax.get_xticks() if 20 <= t <= 8000] == [100, 1000]
    fig = trajectory_audit.curves(study.default(), data)  # without it, the test curve's own axis
    assert not [line for line in fig.axes[0].get_lines() if line.get_color() == "0.7"] and fig.axes[0].get_ylim()[1] < 70


def dies_in(monkeypatch, stage: str | None, step: int = 7):
    """KeyboardInterrupt (a SIGINT) before training step `step` of `stage`, or (`stage` None) as the cell starts scoring
    its held readings, after training; returns the call that takes it back."""
    if stage is None:
        real_held = cell_module.held_readings

        def held_readings(*args):
            raise KeyboardInterrupt

        monkeypatch.setattr(cell_module, "held_readings", held_readings)
        return lambda: monkeypatch.setattr(cell_module, "held_readings", real_held)
    real = harness.StageRun.train_step

    def train_step(self, data):
        if self.stage.name == stage and self.step == step:
            raise KeyboardInterrupt
        return real(self, data)

    monkeypatch.setattr(harness.StageRun, "train_step", train_step)
    return lambda: monkeypatch.setattr(harness.StageRun, "train_step", real)


@pytest.mark.parametrize(("method", "stage"), [("lf-net", "segmentation"), ("d-persona", None)])
def test_a_killed_trajectory_cell_resumes_to_the_same_readings_and_curve(tmp_path, monkeypatch, method, stage):
    """A trajectory cell killed and run again ends with the straight run's readings, test curve and result (a long
    evidence cell spans several sessions). LF-Net dies mid-way through its second stage, the one holding the readings
    (after its first readings, curve points and a checkpoint): they come back from the checkpoint, and the first stage's
    stop row, rule replay and all, from the log. D-Persona's readings are held by its first stage and it dies after its
    second, as its read-outs begin: they come back from the first stage's `.held.pt`, with the heads its second stage
    trained (a reading replaces the consensus stage's weights, not the heads)."""
    monkeypatch.setattr(budget, "FIRST_READING", 2)  # step-2, 4, 8
    monkeypatch.setattr(budget, "CURVE_EVERY", 2)
    monkeypatch.setattr(harness, "Output", functools.partial(harness.Output, checkpoint_seconds=0))  # one at each evaluation
    # the rule's replay ends each stage at its cap of 4 steps: the stop rows carry where and how ("cap")
    trajectory = dataclasses.replace(budget.BUDGETS["trajectory"], eval_every=4, rule_cap=4)
    monkeypatch.setitem(budget.BUDGETS, "trajectory", trajectory)
    monkeypatch.setattr(budget.Budget, "val_size", lambda self, dataset: 32)  # evaluations on 32 validation images
    args = ["run", "--budget", "trajectory", "--methods", method, "--seeds", "0", "--max-steps", "8"]
    args += ["--train-size", "32", "--test-size", "16", "--no-progress", "--results"]
    assert cli.main([*args, str(tmp_path / "straight")]) == 0

    killed = tmp_path / "killed"
    revive = dies_in(monkeypatch, stage)
    assert cli.main([*args, str(killed)]) != 0  # "interrupted: finished cells are kept; rerun the same command to resume"
    folder = next(killed.glob(f"runs/**/{method}/seed-0"))
    assert not (folder / store.METRICS).exists()
    if stage:  # after the checkpoint at the evaluation of step 4 and the curve point at 6
        assert next(folder.glob(f"checkpoints/stage-*-{stage}.partial.pt")).is_file()
        assert {p.stem for p in (folder / store.PARTS).glob("*.parquet")} >= {"step-4", "curve-4", "curve-6"}
    else:  # both stages done; the first's readings (its fixed steps too, not scored yet) kept beside the second's weights
        assert {p.name for p in (folder / "checkpoints").iterdir()} == {"stage-0-prior.held.pt", "stage-1-personas.pt", "result.pt"}
        assert not list((folder / store.PARTS).glob("step-*"))
    revive()
    assert cli.main([*args, str(killed)]) == 0
    assert len(files.read_json(folder / store.MANIFEST)["starts"]) == 2  # resumed, not started afresh
    assert not list(folder.glob("checkpoints/*.held.pt"))  # scored: dropped

    straight = next((tmp_path / "straight").glob(f"runs/**/{method}/seed-0"))
    for table in (store.READINGS, store.TEST_CURVE, store.METRICS):
        want, got = (pd.read_parquet(f / table) for f in (straight, folder))
        key = [c for c in ("reading", "stage", "step", "reference", "metric", "case_id") if c in want]
        pd.testing.assert_frame_equal(*(t.sort_values(key).reset_index(drop=True) for t in (got, want)))
    a, b = (files.read_json(f / store.MANIFEST)["readings"] for f in (straight, folder))
    assert a == b and set(a) >= {"step-8", "selection", "min-val-loss", "last"}
    if method == "d-persona":  # the result (the selection) reads the heads as stage 2 ended, not as they were when held
        result, ended = (torch.load(straight / "checkpoints" / f, weights_only=True) for f in ("result.pt", "stage-1-personas.pt"))
        heads = [k for k in ended if k.startswith("heads.")]
        assert heads and all(torch.equal(result[k], ended[k]) for k in heads)
        # step-8 is the first stage's last step: held as `last` is, with the same heads, it reads the same
        rows = pd.read_parquet(straight / store.READINGS)
        step8, last = (
            rows[rows["reading"] == n].drop(columns=["reading", "reading_step"]).reset_index(drop=True) for n in ("step-8", "last")
        )
        assert (step8["metric"] == "dice_personal").any()  # per-rater metrics included
        pd.testing.assert_frame_equal(step8, last)
