"""The training protocol (bench/train/budget.py, harness.fit): the stopping rule, best-weight restore, budgets per stage,
ground truth kept out of selection, and exact resume of a stage in progress."""

from __future__ import annotations

import dataclasses
import os
import subprocess
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

import methods
from bench import study
from bench.run import cell, plan
from bench.train import harness, steps
from bench.train.budget import BUDGETS, Schedule
from datasets import get_dataset
from datasets.contract import RaterData
from methods.base import DataSpec, Method, Stage, StepContext

PAPER = study.default()

CPU = torch.device("cpu")
RUN, QUIET = harness.Runtime(0, CPU), harness.Output(progress=False)


class Scripted(Method):
    """A one-parameter method whose validation loss follows `curve` (one value per evaluation), whatever the weights.

    Training moves the weight every step, so each evaluation's weights are distinct and recorded in `seen`.
    """

    @dataclass(frozen=True)
    class Config:
        pass

    def __init__(self, curve: list[float]):
        super().__init__(self.Config(), DataSpec(1, 2, 1))
        self.net = nn.Linear(1, 1)
        self.curve, self.evals, self.seen = curve, 0, []

    @property
    def stages(self):
        return [Stage("train", ("net",))]

    def loss(self, batch, ctx: StepContext):
        if self.net.training:
            out = self.net(batch["images"].float().mean((1, 2, 3))[:, None])
            return {"loss": (out - 10).pow(2).mean()}
        self.seen.append(self.net.weight.detach().clone())
        value = self.curve[min(self.evals, len(self.curve) - 1)]
        self.evals += 1
        return {"loss": torch.tensor(value)}

    def predict_proba(self, images):
        return torch.full((len(images), 2, *images.shape[-2:]), 0.5)


def tiny(n: int = 8, size: int = 16, seed: int = 0):
    rng = np.random.default_rng(seed)
    images = rng.random((n, 1, size, size), dtype=np.float32)
    raters = (rng.random((n, 3, size, size)) > 0.5).astype(np.uint8)
    return images, raters, np.ones((n, 3), bool)


def rule(max_steps: int = 100, patience: int = 3, min_delta: float = 0.01, early: bool = True) -> dict[str, Schedule]:
    return {"train": Schedule("adam", 0.1, 4, max_steps, early, eval_every=2, patience=patience, min_delta=min_delta)}


def test_stops_after_patience_evaluations_and_restores_the_best_weights(tmp_path):
    # evaluations:  1    2    3    4      5 (best, but < 1 % better than 3)  6    7: stop after 3 without a 1 % gain
    curve = [5.0, 4.0, 3.0, 3.1, 2.995, 3.2, 3.05, 1.0]
    m = Scripted(curve)
    data = tiny()
    log = tmp_path / "train_log.csv"
    fitted = harness.fit(m, harness.Split(*data), rule(), RUN, val=harness.Split(*data), out=harness.Output(log_path=log, progress=False))
    record = fitted.stages["train"]
    assert record["step"] == 12 and record["stop"] == "plateau"  # 6 evaluations × 2 steps; never sees the 1.0
    assert record["best_step"] == 10 and record["restored_step"] == 10 and record["best_val_loss"] == pytest.approx(2.995)
    assert torch.equal(m.net.weight, m.seen[4]) and not torch.equal(m.net.weight, m.seen[5])
    rows = pd.read_csv(log)
    assert list(rows["event"]) == ["eval"] * 6 + ["stop"]
    assert list(rows["step"][:6]) == [2, 4, 6, 8, 10, 12] and list(rows["best"][:6]) == [1, 1, 1, 0, 1, 0]
    assert rows["stop"].iloc[-1] == "plateau"


def test_a_loss_that_keeps_improving_stops_at_the_cap_and_fixed_schedules_keep_the_last_weights():
    data = tiny()
    m = Scripted([0.9**k for k in range(50)])
    record = harness.fit(m, harness.Split(*data), rule(max_steps=9), RUN, val=harness.Split(*data), out=QUIET).stages["train"]
    assert record["step"] == 9 and record["stop"] == "cap" and record["best_step"] == 9  # evaluated at the cap too
    m = Scripted([1.0, 0.5, 2.0, 3.0, 4.0])
    record = harness.fit(m, harness.Split(*data), rule(max_steps=10, early=False), RUN, val=harness.Split(*data), out=QUIET).stages["train"]
    assert record["stop"] == "fixed" and record["best_step"] == 4 and record["restored_step"] == 10
    assert torch.equal(m.net.weight, m.seen[-1])


def test_the_audit_replays_the_rule_where_the_harness_stopped(tmp_path):
    """`bench audit-stops` replays a rule on a long run's validation curve; on the same curve it stops and restores where
    the harness did."""
    from bench.train.stopping import replay_stage

    curve = [float(v) for v in np.linspace(5.0, 1.0, 12)] + [1.2, 0.99, 1.3] + [1.1] * 40  # new lows to evaluation 14
    early = Schedule("adam", 0.1, 4, 200, True, eval_every=2, patience=3, patience_ratio=0.5, smooth=3, min_evals=4)
    logs = {}
    for name, sched in (("early", early), ("fixed", dataclasses.replace(early, early_stopping=False, restore=True, max_steps=110))):
        logs[name] = tmp_path / f"{name}.csv"
        harness.fit(
            Scripted(curve),
            harness.Split(*tiny()),
            {"train": sched},
            RUN,
            val=harness.Split(*tiny()),
            out=harness.Output(log_path=logs[name], progress=False),
        )
    stop = pd.read_csv(logs["early"]).iloc[-1]
    evals = pd.read_csv(logs["fixed"]).query("event == 'eval'")
    rule = {"patience": 3, "min_delta": 0.0, "patience_ratio": 0.5, "smooth": 3, "min_evals": 4, "max_steps": 200}
    replay = replay_stage(evals["step"].tolist(), evals["val_loss"].tolist(), rule)
    assert (replay["step"], replay["restored_step"], replay["how"]) == (stop["step"], stop["restored_step"], "plateau")
    assert replay["restored_step"] == 28 and replay["step"] > 2 * (14 + 3)  # the 0.99; a patience grown past 3
    assert replay_stage(evals["step"].tolist(), evals["val_loss"].tolist(), {**rule, "patience_ratio": 0.0})["step"] < replay["step"]
    assert replay_stage(evals["step"].tolist()[:10], evals["val_loss"].tolist()[:10], rule)["how"] == "beyond"


def test_early_stopping_without_a_validation_split_is_refused():
    data = tiny()
    with pytest.raises(ValueError, match="validation split"):
        harness.fit(Scripted([1.0]), harness.Split(*data), rule(), RUN, out=QUIET)


def train_mv(data, val, val_gt, patience=2, **out) -> tuple[methods.Method, harness.Fitted]:
    torch.manual_seed(0)
    m = methods.build_method("mv-unet", DataSpec(1, 2, 3))
    sched = {"train": Schedule("adam", 1e-3, 4, 16, True, eval_every=2, patience=patience, min_delta=0.01)}
    fitted = harness.fit(
        m,
        harness.Split(*data),
        sched,
        harness.Runtime(1, CPU),
        val=harness.Split(*val, gt=val_gt),
        out=harness.Output(progress=False, **out),
    )
    return m, fitted


def test_ground_truth_never_steers_selection(tmp_path):
    data, val = tiny(16, seed=0), tiny(8, seed=1)
    gt = np.zeros_like(val[1][:, 0])
    noise = (np.random.default_rng(5).random(gt.shape) > 0.5).astype(np.uint8)
    (a, ra), (b, rb) = (train_mv(data, val, g, log_path=tmp_path / f"{i}.csv") for i, g in enumerate((gt, noise)))
    assert [{**r, "seconds": 0} for r in ra.stages.values()] == [{**r, "seconds": 0} for r in rb.stages.values()]
    for key, value in a.state_dict().items():
        assert torch.equal(value, b.state_dict()[key]), key
    logs = [pd.read_csv(tmp_path / f"{i}.csv") for i in range(2)]
    assert not logs[0]["diagnostic_gt_dsc"].dropna().equals(logs[1]["diagnostic_gt_dsc"].dropna())  # logged, and it differs
    losses = [c for c in logs[0] if c.startswith("val_")]
    pd.testing.assert_frame_equal(logs[0][losses], logs[1][losses])


class Killed(Exception):
    pass


def dies_at_step(monkeypatch, step: int, exc: type[BaseException] = Killed):
    """MV-UNet's loss raises `exc` at training step `step` (as a kill lands mid-stage); returns the call that puts the
    real loss back."""
    cls = methods.get_entry("mv-unet").cls
    real_loss = cls.loss

    def loss(self, batch, ctx):
        if ctx.step == step and self.net.training:
            raise exc
        return real_loss(self, batch, ctx)

    monkeypatch.setattr(cls, "loss", loss)
    return lambda: monkeypatch.setattr(cls, "loss", real_loss)


def test_a_killed_stage_resumes_with_the_same_stopping_state(tmp_path, monkeypatch):
    data, val = tiny(16, seed=0), tiny(8, seed=1)
    straight, records = train_mv(data, val, None, patience=100, log_path=tmp_path / "straight.csv")
    assert records.stages["train"]["step"] > 8  # the kill below lands mid-stage
    folder, log = tmp_path / "ckpt", tmp_path / "resumed.csv"
    revive = dies_at_step(monkeypatch, 7)
    with pytest.raises(Killed):
        train_mv(data, val, None, patience=100, log_path=log, checkpoint_dir=folder, checkpoint_seconds=0)
    partial = torch.load(folder / "stage-0-train.partial.pt", weights_only=True)
    assert (partial["step"], partial["n_sum"]) == (7, 1)  # saved after step 7, between the evaluations at 6 and 8
    revive()
    resumed, again = train_mv(data, val, None, patience=100, log_path=log, checkpoint_dir=folder, checkpoint_seconds=0)
    assert {**again.stages["train"], "seconds": 0} == {**records.stages["train"], "seconds": 0}
    for key, value in straight.state_dict().items():
        assert torch.equal(value, resumed.state_dict()[key]), key
    got, want = (pd.read_csv(p).drop(columns="seconds") for p in (log, tmp_path / "straight.csv"))
    pd.testing.assert_frame_equal(got, want)
    assert not (folder / "stage-0-train.partial.pt").exists()  # a finished stage keeps only its final weights


def test_a_resumed_cell_keeps_each_start_and_says_what_changed_since_the_first():
    first = {
        "started": 1.0,
        "git_commit": "a",
        "git_changed": [],
        "host": "vm",
        "device": "cpu",
        "cpu": "x86_64 avx2",
        "precision": "float32",
        "threads": 2,
        "engine": "eager",
        "status": "running",
    }
    same, other = (
        {**first, "started": 2.0, "git_commit": "b", "git_changed": ["methods/a.py"]},
        {**first, "started": 3.0, "cpu": "x86_64 amx_bf16", "precision": "torch.bfloat16"},
    )
    kept, changed = cell.starts(first, same, resumed=True)
    assert [s["started"] for s in kept] == [1.0, 2.0] and "status" not in kept[0] and changed == {}  # code alone is not the setup
    kept, changed = cell.starts({**same, "starts": kept}, other, resumed=True)
    assert [s["started"] for s in kept] == [1.0, 2.0, 3.0]
    assert changed == {"cpu": ("x86_64 avx2", "x86_64 amx_bf16"), "precision": ("float32", "torch.bfloat16")}
    assert cell.starts(first, other, resumed=False) == ([{k: other[k] for k in kept[0]}], {})  # nothing resumed: a new run
    assert cell.starts({}, other, resumed=True)[1] == {}  # no earlier manifest to compare with


def test_a_finished_cell_resumed_reports_every_stage_as_logged(tmp_path):
    images, raters, valid = tiny(8)
    logs, records, readings = tmp_path / "log.csv", [], []
    for _ in range(2):  # the second run finds both stages finished and trains nothing
        torch.manual_seed(0)
        m = methods.build_method("lf-net", DataSpec(1, 2, 3))
        split = harness.Split(images, raters, valid)
        out = harness.Output(tmp_path / "ckpt", log_path=logs, progress=False)
        fitted = harness.fit(m, split, harness.fixed_schedules(m, 2, 4), RUN, val=split, out=out)
        records.append(fitted.stages)
        readings.append({f"{name} at {r['step']}": r["score"] for name, r in fitted.readings.items()})
    assert list(records[1]) == ["soft_label", "segmentation"]
    for stage, record in records[0].items():
        assert records[1][stage] == pytest.approx(record), stage
    assert readings[1] == pytest.approx(readings[0], nan_ok=True) and "last at 2" in readings[0]  # from its .held.pt
    # the last stage's file holds both networks: the soft-label stage's own weights were dropped when it was written;
    # its readings stay until the cell has scored them
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["stage-1-segmentation.held.pt", "stage-1-segmentation.pt"]


def test_budgets_resolve_per_stage():
    mnist, lidc = get_dataset("mnist-5k"), get_dataset("lidc")
    paper = BUDGETS["paper"]
    sll = paper.schedule("lf-net", "soft_label", mnist, 3200, PAPER)
    assert (sll.max_steps, sll.batch_size, sll.lr, sll.optimiser, sll.early_stopping) == (10 * 25, 128, 1e-4, "adam", False)
    assert paper.schedule("lf-net", "segmentation", mnist, 3200, PAPER).max_steps == 15 * 25  # "RCN epoch 15" read as stage 2's length
    assert paper.schedule("lf-net-s", "segmentation", lidc, 100, PAPER).max_steps == 70 * 50  # variants use LF-Net's line; batch 2
    other = BUDGETS["paper-rcl15"]
    assert other.schedule("lf-net", "segmentation", mnist, 3200, PAPER).max_steps == 70 * 25
    assert other.config_overrides("lf-net", mnist, PAPER) == {"rcl_epochs": 15} and other.config_overrides("lf-net", lidc, PAPER) == {}
    cm = paper.schedule("cm-unet-global", "train", mnist, 3200, PAPER)
    assert (cm.optimiser, cm.lr, cm.weight_decay, cm.batch_size, cm.augment, cm.max_steps) == ("adamw", 1e-2, 1e-5, 5, "flip", 40 * 640)
    assert paper.schedule("qmv-unet", "train", mnist, 3200, PAPER).max_steps == 150 * 25
    mr = paper.schedule("mr-net", "train", lidc, 80, PAPER)
    assert (mr.lr, mr.weight_decay, mr.batch_size, mr.max_steps) == (1e-4, 5e-4, 8, 123 * 10)
    quick, plateau = BUDGETS["quick"], BUDGETS["plateau"]
    for name in methods.method_names():
        m = methods.build_method(name, DataSpec(1, 2, 5))
        for stage in m.stages:
            q, p = quick.schedule(name, stage.name, mnist, 3200, PAPER), plateau.schedule(name, stage.name, mnist, 3200, PAPER)
            assert q.early_stopping and p.early_stopping
            assert (q.eval_every, q.patience, q.min_delta, q.lr) == (p.eval_every, p.patience, p.min_delta, p.lr)  # one rule
            assert p.max_steps > q.max_steps
            paper.schedule(name, stage.name, mnist, 3200, PAPER)  # every stage of every method has a paper line


def test_set_refuses_epoch_and_step_fields():
    mnist = get_dataset("mnist-5k")
    for key in ("seg_epochs", "epochs", "max_steps"):
        with pytest.raises(methods.UnknownMethodError, match="budget"):
            plan.expand_params(["lf-net"], {"lf-net": {key: [3]}}, mnist, PAPER)
    assert plan.expand_params(["lf-net"], {"lf-net": {"rcl_epochs": [15]}}, mnist, PAPER) == [
        methods.MethodRef.parse("lf-net@rcl_epochs=15")
    ]  # a loss schedule


def test_flips_move_image_raters_and_targets_together():
    gen = torch.Generator().manual_seed(0)
    images = torch.arange(4 * 16, dtype=torch.float32).reshape(4, 1, 4, 4)
    batch = {
        "images": images.clone(),
        "raters": images.long().repeat(1, 3, 1, 1),
        "staple": images[:, 0].clone(),
        "rater_valid": torch.ones(4, 3),
    }
    steps.flip(batch, gen)
    assert torch.equal(batch["raters"][:, :1].float(), batch["images"]) and torch.equal(batch["staple"], batch["images"][:, 0])
    assert not torch.equal(batch["images"], images)  # something flipped (seeded)
    assert torch.equal(batch["rater_valid"], torch.ones(4, 3))


def val_data(majority_empty: bool) -> RaterData:
    raters = np.zeros((4, 3, 6, 6), np.uint8)
    if not majority_empty:
        raters[:, :, 2:4, 2:4] = 1
    return RaterData(
        images=np.zeros((4, 1, 6, 6), np.float32),
        raters=raters,
        rater_valid=np.ones((4, 3), bool),
        gt=None,
        case_ids=np.arange(4).astype(str),
        groups=np.arange(4).astype(str),
    )


def test_degenerate_predictions_are_flagged_unless_the_raters_agree():
    empty = np.stack([np.ones((4, 6, 6)), np.zeros((4, 6, 6))], 1)  # background everywhere
    assert cell.degenerate(empty, val_data(False))["flag"] == "empty"
    assert cell.degenerate(empty, val_data(True))["flag"] == ""  # the raters say nothing is there either
    assert cell.degenerate(empty[:, ::-1], val_data(False))["flag"] == "full"
    mixed = empty.copy()
    mixed[:2, 1, 2:4, 2:4], mixed[:2, 0, 2:4, 2:4] = 1, 0
    out = cell.degenerate(mixed, val_data(False))
    assert out["flag"] == "" and out["empty_share"] == 0.5


def test_the_printed_table_says_how_cells_stopped_and_flags_degenerate_rows():
    from bench.cli.run import format_table

    summary = pd.DataFrame(
        [("lidc", "real", "protocol", "majority", m, "foreground", "dsc", 0.5, 0.1, 3, 10) for m in ("mv-unet", "lf-net")],
        columns=["dataset", "raters", "noise", "reference", "method", "structure", "metric", "mean", "std", "n_seeds", "n_cases"],
    )
    outcomes = pd.DataFrame(
        [("lidc", "real", "protocol", "mv-unet", s, "plateau", f, 0.9, 0.0) for s, f in ((0, "empty"), (1, "empty"), (2, ""))]
        + [("lidc", "real", "protocol", "lf-net", s, "plateau+cap", "", 0.1, 0.0) for s in range(3)],
        columns=["dataset", "raters", "noise", "method", "seed", "stops", "flag", "empty_share", "full_share"],
    )
    lines = format_table(PAPER, summary, ["mv-unet", "lf-net"], outcomes).splitlines()
    mv, lf = next(x for x in lines if x.startswith("mv-unet")), next(x for x in lines if x.startswith("lf-net"))
    assert "plateau 3/3" in mv and mv.endswith("empty 2/3")
    assert "plateau+cap 3/3" in lf and "empty" not in lf
    assert any("scored against majority" in x for x in lines)


def test_a_cell_records_its_threads_isa_stops_and_flag(tmp_path):
    from bench import cli, files

    results = tmp_path / "r"
    args = ["run", "--methods", "mv-unet", "--seeds", "0", "--max-steps", "3", "--test-size", "8", "--no-progress"]
    assert cli.main([*args, "--results", str(results)]) == 0
    folder = next(results.glob("runs/**/mv-unet/seed-0"))
    manifest, config = files.read_json(folder / "manifest.json"), files.read_json(folder / "config.json")
    assert manifest["threads"] == 1 and manifest["cpu"] and manifest["stages"]["train"]["stop"] == "cap"
    assert manifest["git_changed"] == cell.git_changed()  # the tree as it stands: [] on a clean clone
    assert set(manifest["degenerate"]) == {"empty_share", "full_share", "majority_empty_share", "flag"}
    assert config["budget"]["name"] == "quick" and config["schedules"]["train"]["max_steps"] == 3 and config["threads"] == 1
    log = pd.read_csv(folder / "train_log.csv")
    assert list(log["event"]) == ["eval", "stop"] and log["diagnostic_gt_dsc"].notna().iloc[0]
    assert dataclasses.asdict(BUDGETS["quick"].schedule("mv-unet", "train", get_dataset("mnist-5k"), 1, PAPER))["eval_every"] == 20
    logs = pd.read_parquet(results / "train_logs.parquet")
    assert set(logs["method"]) == {"mv-unet"} and list(logs["event"]) == ["eval", "stop"]
    assert cli.main(["report", "--results", str(results), "--out", str(tmp_path / "report")]) == 0
    for stem in ("learning_curves", "diagnostic_gt_dsc"):
        png = tmp_path / "report" / f"{stem}_mnist-5k_lfnet_protocol.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png


def test_the_gt_best_weights_are_kept_for_the_selection_reading_and_never_restored(tmp_path):
    """The last stage's weights at its highest validation GT DSC are handed back beside the rule's, which stay the method's."""
    data, val = tiny(16, seed=0), tiny(8, seed=1)
    gt = (np.random.default_rng(5).random(val[1][:, 0].shape) > 0.5).astype(np.uint8)
    plain, records = train_mv(data, val, gt, patience=100, log_path=tmp_path / "plain.csv")
    kept, again = train_mv(data, val, gt, patience=100, log_path=tmp_path / "kept.csv")
    selected = {"gt_best": again.gt_best}
    for key, value in plain.state_dict().items():  # keeping them changes nothing the rule does
        assert torch.equal(value, kept.state_dict()[key]), key
    log = pd.read_csv(tmp_path / "kept.csv")
    evals = log[log["event"] == "eval"]
    best = evals.loc[evals["diagnostic_gt_dsc"].idxmax()]
    assert selected["gt_best"]["step"] == best["step"] and selected["gt_best"]["dsc"] == best["diagnostic_gt_dsc"]
    assert [{**r, "seconds": 0} for r in again.stages.values()] == [{**r, "seconds": 0} for r in records.stages.values()]  # no trace of GT
    kept.load_state_dict(selected["gt_best"]["state"])
    images = torch.as_tensor(val[0])
    dsc = harness.diagnostic_dsc(kept, images, gt, CPU, harness.autocast_dtype(CPU, "auto"))  # as fit evaluated it
    assert dsc == pytest.approx(best["diagnostic_gt_dsc"], abs=1e-4)


def test_the_gt_diagnostic_follows_the_stage_that_decides_the_consensus(tmp_path, monkeypatch):
    """D-Persona's consensus is the mean of its prior's draws, which its second stage (per-rater heads) leaves as it is:
    the logged GT DSC and the selection reading come from its first stage, and training is the same without them. A
    stage name that is none of the method's is refused, and so is a later stage that trains the consensus stage's
    modules (its readings would no longer be that stage's weights)."""
    data, val = tiny(8, seed=0), tiny(4, seed=1)
    gt = (np.random.default_rng(5).random(val[1][:, 0].shape) > 0.5).astype(np.uint8)
    sched = {name: Schedule("adam", 1e-3, 4, 4, False, eval_every=2) for name in ("prior", "personas")}
    trained = []
    for i, g in enumerate((gt, None)):
        torch.manual_seed(0)
        m = methods.build_method("d-persona", DataSpec(1, 2, 3))
        out = harness.Output(progress=False, log_path=tmp_path / f"{i}.csv")
        trained.append((m, harness.fit(m, harness.Split(*data), sched, RUN, val=harness.Split(*val, gt=g), out=out)))
    (m, fitted), (plain, _) = trained
    evals = pd.read_csv(tmp_path / "0.csv").query("event == 'eval'")
    assert evals.groupby("stage", sort=False)["diagnostic_gt_dsc"].count().to_dict() == {"prior": 2, "personas": 0}
    assert fitted.gt_best["step"] in set(evals.loc[evals["stage"] == "prior", "step"])
    for key, value in plain.state_dict().items():
        assert torch.equal(value, m.state_dict()[key]), key
    stray = Scripted([1.0])
    stray.consensus_stage = "nope"
    with pytest.raises(ValueError, match=r"consensus_stage 'nope' is none of its stages \['train'\]"):
        harness.fit(stray, harness.Split(*data), rule(), RUN, val=harness.Split(*val), out=QUIET)
    overlapping = methods.build_method("d-persona", DataSpec(1, 2, 3))
    stages = [Stage("prior", ("net", "prior", "posterior", "fcomb")), Stage("personas", ("heads", "net"))]
    monkeypatch.setattr(type(overlapping), "stages", property(lambda self: stages))
    with pytest.raises(ValueError, match="the stages after its consensus stage 'prior' must name their modules, none of"):
        harness.fit(overlapping, harness.Split(*data), sched, RUN, val=harness.Split(*val), out=QUIET)


def test_a_cell_records_the_code_files_its_tree_changed_from_the_commit(tmp_path):
    """`git_changed`: [] for a committed tree, the changed and new code files otherwise (docs and tests do not count),
    None where git cannot say (a run's manifest holds it beside `git_commit`: the test above)."""
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    (tmp_path / "methods").mkdir()
    (tmp_path / "methods" / "a.py").write_text("x = 1\n")
    (tmp_path / "README.md").write_text("hi\n")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "c"]):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, env={**os.environ, **env})
    assert cell.git_changed(tmp_path) == []
    (tmp_path / "methods" / "a.py").write_text("x = 2\n")
    (tmp_path / "methods" / "b.py").write_text("y = 1\n")
    (tmp_path / "README.md").write_text("changed\n")
    assert cell.git_changed(tmp_path) == ["methods/a.py", "methods/b.py"]
    assert cell.git_changed(tmp_path / "methods" / "nowhere") is None
