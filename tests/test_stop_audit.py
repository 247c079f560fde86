"""The stop audit (bench/report/stop_audit.py, `python -m bench audit-stops`): the rule's run beside a fixed long run."""

from __future__ import annotations

import json
import math
import shutil

import pandas as pd
import pytest
from conftest import REPO, run_bench

from bench import store, study
from bench.report import stop_audit, stop_audit_text, stop_logs
from bench.report.tables import write_tables

PAPER = study.default()

KEY = {"dataset": "mnist-5k", "raters": "lfnet", "noise": "protocol"}


def metrics_frame(rows):
    """rows: (method, metric, rule mean, rule sd, long mean) → the frame `audit` builds."""
    frame = pd.DataFrame(
        [
            {
                **KEY,
                "method": m,
                "metric": k,
                "mean_rule": a,
                "sd_rule": sd,
                "n_seeds_rule": 2,
                "mean_long": b,
                "sd_long": math.nan,
                "n_seeds_long": 1,
            }
            for m, k, a, sd, b in rows
        ]
    )
    floors = frame["metric"].map(lambda k: stop_audit.CHECKED[k][1])
    frame["diff"] = frame["mean_long"] - frame["mean_rule"]
    frame["tolerance"] = [max(f, 0 if math.isnan(sd) else sd) for f, sd in zip(floors, frame["sd_rule"])]
    frame["within"] = frame["diff"].abs() <= frame["tolerance"]
    return frame


def stages_frame(rows):
    return pd.DataFrame(
        [
            {
                **KEY,
                "method": m,
                "stage": "train",
                "step_rule": a,
                "step_long": b,
                "factor": b / a,
                "replay_same": False,
                "twin": True,
                "twin_diff": 0.0,
            }
            for m, a, b in rows
        ]
    )


def test_a_method_passes_when_training_longer_moves_nothing_beyond_its_seed_sd_or_the_floor():
    metrics = metrics_frame(
        [
            ("mv-unet", "dsc", 0.900, 0.004, 0.908),  # +0.8 points, within the 1-point floor
            ("mv-unet", "ged", 0.500, math.nan, 0.505),
            ("prob-unet", "dsc", 0.500, 0.020, 0.540),  # +4 points against a seed sd of 2: moved
            ("prob-unet", "ged", 0.130, 0.010, 0.095),  # −0.035 GED against 0.01: moved
            ("pionono", "dsc", 0.600, 0.050, 0.640),  # +4 points within a seed sd of 5
        ]
    )
    verdict = stop_audit.verdicts(metrics, stages_frame([("mv-unet", 400, 4000), ("prob-unet", 900, 4000), ("pionono", 1500, 4000)]))
    got = verdict.set_index("method")
    assert got.loc["mv-unet", "verdict"] == "passes" and got.loc["pionono", "verdict"] == "passes"
    assert got.loc["prob-unet", "verdict"] == "fails" and got.loc["prob-unet", "moved"] == "dsc, ged"
    assert got.loc["mv-unet", "long_enough"] and got.loc["prob-unet", "long_enough"] and not got.loc["pionono", "long_enough"]
    assert got["twins"].all() and (got["twin_diff"] == 0).all()


def test_a_verdict_on_one_seed_is_close_where_a_metric_moved_half_to_twice_its_tolerance():
    metrics = metrics_frame(
        [
            ("mv-unet", "dsc", 0.600, math.nan, 0.604),  # 0.4 of the 1-point floor: not close
            ("mv-unet", "ged", 0.600, math.nan, 0.593),  # 0.7 of 0.01: close, and within
            ("cm-unet", "dsc", 0.700, math.nan, 0.715),  # 1.5 of the floor: close, and moved
            ("cm-unet", "ged", 0.050, math.nan, 0.080),  # 3 × 0.01: moved, not close
            ("pionono", "dsc", 0.600, 0.010, 0.615),  # 1.5 of its floor, but on two seeds: not close
        ]
    )
    metrics.loc[metrics["method"] != "pionono", "n_seeds_rule"] = 1
    got = stop_audit.verdicts(metrics, stages_frame([("mv-unet", 1000, 4000), ("cm-unet", 5000, 20000), ("pionono", 5000, 20000)]))
    got = got.set_index("method")
    assert got.loc["mv-unet", "verdict"] == "passes" and got.loc["mv-unet", "close"] == "ged"
    assert got.loc["cm-unet", "verdict"] == "fails" and got.loc["cm-unet", "moved"] == "dsc, ged" and got.loc["cm-unet", "close"] == "dsc"
    assert got.loc["cm-unet", "clear"] == "ged" and got.loc["mv-unet", "clear"] == ""
    assert got.loc["pionono", "verdict"] == "fails" and got.loc["pionono", "close"] == ""
    text = stop_audit.to_markdown(
        PAPER,
        metrics,
        pd.DataFrame(),
        got.reset_index().assign(trained="cpu"),
        "cmd",
        "rule",
        pd.DataFrame(columns=["method"]),
        pd.DataFrame(),
        pd.DataFrame(),
    )
    assert "| mnist-5k | MV-UNet | passes | — | ged: a second seed is due |" in text
    assert "| mnist-5k | CM-UNet | fails | dsc, ged | dsc (the fail stands on ged) |" in text  # ged's 3x is clear


def test_the_audit_shows_what_training_longer_does_to_per_rater_outputs():
    def summary(personal, between):
        rows = [
            ("mh-unet", "foreground", "dice_personal", personal),
            ("mh-unet", "foreground", "dice_between", between),
            ("mh-unet", "foreground", "dice_between_raters", 0.215),
            ("mh-unet", "background", "dice_personal", 0.1),
            ("mv-unet", "foreground", "dice_personal", 0.44),
            ("mv-unet", "foreground", "dice_between", math.nan),
            ("mv-unet", "foreground", "dice_between_raters", 0.215),
        ]
        return pd.DataFrame([{**KEY, "reference": "raters", "method": m, "structure": st, "metric": k, "mean": v} for m, st, k, v in rows])

    rule, long = stop_audit.heads(summary(0.90, 0.40)), stop_audit.heads(summary(0.98, 0.21))
    assert rule.set_index("method").loc["mh-unet", "dice_personal"] == 0.90  # the first structure's, not the background's
    assert math.isnan(rule.set_index("method").loc["mv-unet", "dice_between"])  # one output: no spread
    evidence = rule.merge(long, on=stop_audit.GROUP, suffixes=("_rule", "_long"))
    lines = "\n".join(stop_audit_text.heads_table(PAPER, evidence))
    assert "| MH-UNet | 90.00 → 98.00 | 40.00 → 21.00 | 21.50 |" in lines and "MV-UNet" not in lines
    assert stop_audit_text.heads_table(PAPER, evidence[evidence["method"] == "mv-unet"]) == []
    assert list(stop_audit.heads(summary(0.9, 0.4).iloc[:0]).columns) == [*stop_audit.GROUP, *stop_audit.HEADS]


def test_the_audit_says_what_each_stretch_of_the_long_run_bought():
    """Stretches (a, b] of the long run's steps in multiples of the rule's stop: the lowest validation loss at its step and
    the mean GT diagnostic logged there; a stretch without evaluations is left out, and a dataset without GT shows no
    diagnostic."""

    def log(method, steps, losses, gt, stop):
        rows = [
            {**KEY, "method": method, "seed": 0, "stage": "train", "event": "eval", "step": s, "val_loss": v, "diagnostic_gt_dsc": d}
            for s, v, d in zip(steps, losses, gt)
        ]
        return pd.DataFrame([*rows, {**KEY, "method": method, "seed": 0, "stage": "train", "event": "stop", "step": stop}])

    rule = pd.concat([log("mv-unet", [10, 100], [0.5, 0.4], [60.0, 62.0], 100), log("mh-unet", [50], [0.3], [math.nan], 50)])
    long = pd.concat(
        [
            log("mv-unet", [10, 30, 40, 100, 150, 400], [0.5, 0.45, 0.47, 0.4, 0.3, 0.35], [60.0, 61.0, 63.0, 62.0, 64.0, 66.0], 400),
            log("mh-unet", [50, 200], [0.3, 0.2], [math.nan, math.nan], 200),
        ]
    )
    got = stop_logs.spans({"rule": rule, "long": long})
    mv = got[got["method"] == "mv-unet"].set_index("span")
    assert list(mv.index) == ["0–0.1×", "0.1–0.4×", "0.4–1×", "1–2×", "2×–end"]
    assert (mv.loc["0.1–0.4×", "val_loss"], mv.loc["0.1–0.4×", "step"], mv.loc["0.1–0.4×", "gt_dsc"]) == (0.45, 30, 62.0)
    assert mv.loc["0.4–1×", "n"] == 1 and mv.loc["0.4–1×", "step"] == 100  # (40, 100]: step 40 is the stretch before
    assert mv.loc["2×–end", "step"] == 400 and (mv["rule_stop"] == 100).all()
    mh = got[got["method"] == "mh-unet"]
    assert list(mh["span"]) == ["0.4–1×", "2×–end"]  # nothing logged in (0, 5], (5, 20] or (50, 100]
    lines = "\n".join(stop_audit_text.spans_table(PAPER, got))
    assert (
        "| MV-UNet | 0 | train | 100 | 0.5 at 10; 60.0 | 0.45 at 30; 62.0 | 0.4 at 100; 62.0 | 0.3 at 150; 64.0 | 0.35 at 400; 66.0 |"
        in lines
    )
    assert "| MH-UNet | 0 | train | 50 | – | – | 0.3 at 50 | – | 0.2 at 200 |" in lines
    assert stop_audit_text.spans_table(PAPER, got.iloc[:0]) == []


def test_the_spread_of_one_checkpoints_dsc_is_read_after_the_rules_restored_step_free_of_a_trend():
    """The sd of the validation DSC's change between evaluations ÷ √2, from the step the rule restored to the long run's
    end, on the last stage that logs it (the one that decides the consensus); mean over the seeds that have one; NaN
    without a GT diagnostic or where it is one constant."""

    def log(method, seed, stage, steps, gt, restored=None):
        rows = [
            {**KEY, "method": method, "seed": seed, "stage": stage, "event": "eval", "step": s, "val_loss": 0.1, "diagnostic_gt_dsc": d}
            for s, d in zip(steps, gt)
        ]
        stop = {**KEY, "method": method, "seed": seed, "stage": stage, "event": "stop", "step": steps[-1], "restored_step": restored}
        return pd.DataFrame([*rows, stop])

    wiggle = [50 + 0.5 * i + (1 if i % 2 else -1) for i in range(5)]  # a rising trend ± 1: changes 2.5, −1.5, 2.5, −1.5
    long = pd.concat(
        [
            log("mv-unet", 0, "train", [20, 40, 60, 80, 100, 120, 140], [90.0, 10.0, *wiggle]),  # before step 60: left out
            log("mv-unet", 1, "train", [20, 40, 60, 80], [60.0, 61.0, 60.0, 61.0]),  # changes +1, −1, +1
            log("lf-net", 0, "soft_label", [20, 40, 60], [0.0, 99.0, 0.0]),  # not the last stage: left out
            log("lf-net", 0, "segmentation", [20, 40, 60, 80], [80.0, 81.0, 80.0, 81.0]),
            log("mh-unet", 0, "train", [20, 40, 60, 80], [math.nan] * 4),
            log("d-persona", 0, "prior", [20, 40, 60, 80, 100], [0.0, 99.0, 60.0, 61.0, 60.0]),  # the consensus' stage
            log("d-persona", 0, "personas", [20, 40, 60], [math.nan] * 3),  # trains heads only: no diagnostic
            log("d-persona", 1, "prior", [20, 40, 60], [math.nan] * 3),  # logged before consensus_stage: nothing here,
            log("d-persona", 1, "personas", [20, 40, 60, 80], [70.0] * 4),  # one constant here, so no spread for this seed
        ]
    )
    rule = pd.concat(
        [
            log("mv-unet", 0, "train", [20, 60], [90.0, 50.0], restored=60),
            log("mv-unet", 1, "train", [20], [60.0], restored=20),
            log("lf-net", 0, "segmentation", [20], [80.0], restored=20),
            log("mh-unet", 0, "train", [20], [math.nan], restored=20),
            log("d-persona", 0, "prior", [20, 40, 60], [0.0, 99.0, 60.0], restored=60),
            log("d-persona", 0, "personas", [20], [math.nan], restored=20),
            log("d-persona", 1, "prior", [20], [math.nan], restored=20),
            log("d-persona", 1, "personas", [20], [70.0], restored=20),
        ]
    )
    got = stop_logs.spread({"rule": rule, "long": long}).set_index("method")["spread"]
    one = pd.Series([2.5, -1.5, 2.5, -1.5]).std() / math.sqrt(2)
    other = pd.Series([1.0, -1.0, 1.0]).std() / math.sqrt(2)
    assert got["mv-unet"] == pytest.approx((one + other) / 2)
    assert got["lf-net"] == pytest.approx(other) and math.isnan(got["mh-unet"])
    assert got["d-persona"] == pytest.approx(1.0)  # seed 0's 60, 61, 60 from the prior's restored step 60: changes +1, −1
    metrics = metrics_frame([("mv-unet", "dsc", 0.600, math.nan, 0.620), ("mv-unet", "ged", 0.600, math.nan, 0.595)]).assign(
        spread=[0.0131, math.nan]
    )
    text = stop_audit.to_markdown(
        PAPER,
        metrics,
        pd.DataFrame(),
        pd.DataFrame(columns=["method"]),
        "cmd",
        "rule",
        pd.DataFrame(columns=["method"]),
        pd.DataFrame(),
        pd.DataFrame(),
    )
    assert "| MV-UNet | dsc | 60.000 (–, 2) | 62.000 (1) | +2.000 | 1.000 | **no** | 1.31 |" in text
    assert "| MV-UNet | ged | 0.600 (–, 2) | 0.595 (1) | -0.005 | 0.010 | yes | – |" in text


def test_the_verb_audits_two_folders_and_the_report_flags_a_failing_method(tmp_path):
    common = ["--methods", "mv-unet", "--seeds", "0", "--train-size", "32", "--test-size", "12", "--backend", "sequential", "--no-progress"]
    rule, long = tmp_path / "rule", tmp_path / "long"
    assert run_bench("run", *common, "--budget", "plateau", "--max-steps", "2", "--results", str(rule)).returncode == 0
    assert run_bench("run", *common, "--budget", "long", "--max-steps", "4", "--results", str(long)).returncode == 0
    proc = run_bench("audit-stops", str(rule), str(long))
    assert proc.returncode == 0, proc.stderr
    assert "| mnist-5k | MV-UNet |" in proc.stdout and "| MV-UNet | train | 2 (cap) |" in proc.stdout
    table = pd.read_csv(rule / store.STOP_AUDIT / stop_audit.CSV)
    assert (rule / store.STOP_AUDIT / f"{stop_audit.FIGURE}.png").is_file() and f"]({stop_audit.FIGURE}.png)" in proc.stdout
    ax = stop_audit.curves(PAPER, stop_logs.run_logs(rule, long), ["mv-unet"]).axes[0]
    drawn = {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}
    assert set(drawn) == {"train, long", "train, rule"} and drawn["train, rule"].get_linestyle() == "--"
    assert list(drawn["train, long"].get_xdata()) == [4] and list(drawn["train, rule"].get_xdata()) == [2]
    assert [line.get_xdata()[0] for line in ax.get_lines() if line.get_linestyle() == ":"] == [2]  # the rule's stop
    assert set(table["metric"]) == {"dsc", "ged", "dice_match"} and (table["min_factor"] == 2).all()
    # the recorded rule replayed on the long curve (one evaluation, at step 4, past the rule's cap of 2)
    assert "| 2 (cap) | 2, " in proc.stdout and "| 4 (cap), 4 |" in proc.stdout and "cap 2)" in proc.stdout
    assert "| 2.0× (below 4×) | — (no evaluation in common) |" in proc.stdout  # one evaluation each, at steps 2 and 4
    same = run_bench("audit-stops", str(rule), str(rule))
    empty = run_bench("audit-stops", str(rule), str(tmp_path / "none"))
    assert same.returncode == empty.returncode == 2 and "same folder" in same.stderr and f"no cell in {tmp_path / 'none'}" in empty.stderr
    assert "| precision / recall / area: rule | long |" in proc.stdout and "Every cell of both folders is a finished pair." in proc.stdout
    for bad in (("--replay", "long"), ("--replay", "platue")):  # a budget without a rule, a misspelt one
        wrong = run_bench("audit-stops", str(rule), str(long), *bad)
        assert wrong.returncode == 2 and f"--replay {bad[1]!r} is not a budget with a stopping rule" in wrong.stderr
    assert run_bench("audit-stops", str(rule), str(long), "--replay", "plateau-1127").returncode == 0
    assert (
        "plateau-1127: mean of 3 evaluations, an improvement a fall of more than 0.01"
        in (rule / store.STOP_AUDIT / "stop_audit.md").read_text()
    )
    # A seed only the rule's folder holds is left out of both sides: the means and the sd compare the same seeds.
    extra = [*common[:3], "1", *common[4:]]
    assert run_bench("run", *extra, "--budget", "plateau", "--max-steps", "2", "--results", str(rule)).returncode == 0
    proc = run_bench("audit-stops", str(rule), str(long))
    assert proc.returncode == 0, proc.stderr
    again = pd.read_csv(rule / store.STOP_AUDIT / stop_audit.CSV)
    assert (again["n_seeds_rule"] == 1).all() and again["mean_rule"].tolist() == table["mean_rule"].tolist()
    assert set(stop_logs.run_logs(rule, long)["rule"]["seed"]) == {0}
    # ... and listed as not yet audited, with the rule run's stop and test metrics.
    waiting = stop_audit.pending(rule, long)
    assert waiting[["method", "seed", "long_run", "shared"]].values.tolist() == [["mv-unet", 1, "not started", 0]]
    assert waiting["rule_run"].iloc[0].startswith("train: 2 (cap), restored 2, ") and 0 <= waiting["dsc"].iloc[0] <= 1
    assert "| MV-UNet | 1 | train: 2 (cap), restored 2, " in proc.stdout and "| not started | 0 |" in proc.stdout
    # A failing verdict flags the method in every table of the rule's folder (and keeps it from bold).
    table.loc[:, "verdict"] = "fails"
    table.to_csv(rule / store.STOP_AUDIT / stop_audit.CSV, index=False)
    flags = stop_audit.failures(rule)
    assert flags == {("mnist-5k", "lfnet", "protocol"): {"mv-unet": "stop audit: fails"}}
    table.loc[:, "verdict"] = "passes"
    table.to_csv(rule / store.STOP_AUDIT / stop_audit.CSV, index=False)
    assert stop_audit.failures(rule) == {} and stop_audit.failures(long) == {}  # passed; a `long` folder is not flagged
    (rule / store.STOP_AUDIT / stop_audit.CSV).rename(tmp_path / "kept.csv")
    assert stop_audit.failures(rule) == {("mnist-5k", "lfnet", "protocol"): {"mv-unet": "stop not audited"}}
    (tmp_path / "kept.csv").rename(rule / store.STOP_AUDIT / stop_audit.CSV)
    summary = pd.DataFrame(
        [
            {**KEY, "method": m, "reference": "gt", "structure": "foreground", "metric": k, "mean": 0.5, "std": 0.1}
            for m in ("mv-unet", "lf-net")
            for k in ("dsc", "bahd")
        ]
    )
    (tmp_path / "tables").mkdir()
    write_tables(PAPER, summary, tmp_path / "tables", audit=flags)
    md = next((tmp_path / "tables").glob("table1_*.md")).read_text()
    assert "stop audit: fails" in md and "[stop audit: fails]" in md
    # A rerun under the same rule takes the audited run's verdicts (--stop-audit); one under another budget record does not.
    rerun = tmp_path / "rerun"
    shutil.copytree(rule / "runs", rerun / "runs")
    assert stop_audit.failures(rerun)[("mnist-5k", "lfnet", "protocol")] == {"mv-unet": "stop not audited"}
    assert stop_audit.failures(rerun, rule) == {}
    proc = run_bench("report", "--results", str(rerun), "--stop-audit", str(rule))
    assert proc.returncode == 0, proc.stderr
    md = next((rerun / "report").glob("table1_*.md")).read_text()
    assert md.startswith(f"> stop-audit flags from {rule / store.STOP_AUDIT} (another run of the same rule)") and "MV-UNet [stop" not in md
    config = next((rerun / "runs").rglob("seed-0/config.json"))
    record = json.loads(config.read_text())
    record["budget"]["max_steps"] = 3
    config.write_text(json.dumps(record))
    assert stop_audit.failures(rerun, rule) == {("mnist-5k", "lfnet", "protocol"): {"mv-unet": "stop not audited"}}
    missing = run_bench("report", "--results", str(rerun), "--stop-audit", str(long))
    assert missing.returncode == 2 and f"--stop-audit {long}: no {long / store.STOP_AUDIT / stop_audit.CSV}" in missing.stderr


def test_the_audit_says_whether_the_two_runs_are_one_run_up_to_the_stop():
    """Up to the rule's stop the two runs are one run when trained by the same code on the same device: their logged
    validation losses agree exactly. A difference in the first stage (code changed between them, another device) is
    reported, and the replay no longer claims the long run's weights; a later stage's difference is shown, not judged."""

    def log(method, stage, steps, losses):
        return pd.DataFrame(
            [{**KEY, "method": method, "seed": 0, "stage": stage, "event": "eval", "step": s, "val_loss": v} for s, v in zip(steps, losses)]
        )

    rule = pd.concat(
        [
            log("mv-unet", "train", [20, 40], [0.5, 0.4]),
            log("cm-unet", "train", [20, 40], [0.5, 0.4]),
            log("lf-net", "soft_label", [20], [0.3]),
            log("lf-net", "train", [20, 40], [0.6, 0.5]),
        ]
    )
    long = pd.concat(
        [
            log("mv-unet", "train", [20, 40, 60], [0.5, 0.4, 0.3]),
            log("cm-unet", "train", [20, 40, 60], [0.5, 0.4004, 0.3]),
            log("lf-net", "soft_label", [20, 40], [0.3, 0.2]),
            log("lf-net", "train", [20, 40], [0.6, 0.45]),
        ]
    )
    frame = stop_audit.twins({"rule": rule, "long": long})
    tw = frame.set_index(["method", "stage"])
    assert tw.loc[("mv-unet", "train"), "shared"] == 2 and tw.loc[("mv-unet", "train"), "twin_diff"] == 0
    assert math.isclose(tw.loc[("cm-unet", "train"), "twin_diff"], 0.0004 / 0.4004)  # relative to the larger loss
    st = pd.DataFrame(
        [
            {**KEY, "method": m, "stage": s, "replay_same": True}
            for m, s in [("mv-unet", "train"), ("cm-unet", "train"), ("lf-net", "soft_label"), ("lf-net", "train")]
        ]
    )
    marked = stop_audit.mark_twins(st, frame).set_index(["method", "stage"])
    assert marked.loc[("mv-unet", "train"), "twin"] and marked.loc[("mv-unet", "train"), "replay_same"]
    assert not marked.loc[("cm-unet", "train"), "twin"] and not marked.loc[("cm-unet", "train"), "replay_same"]
    assert marked.loc[("lf-net", "soft_label"), "twin"] and not marked.loc[("lf-net", "train"), "twin"]  # not judged
    assert marked.loc[("lf-net", "train"), "replay_same"]  # its first stage is one run in both
    assert stop_audit_text.twin_text(True, 0.0) == "yes (0)" and "**no**" in stop_audit_text.twin_text(False, 5e-5)


def test_the_audit_says_how_each_run_trained_and_marks_a_pair_trained_otherwise():
    """Threads, precision and the CPU's vector extensions each change a run's numbers: the verdict table says how both runs
    trained, once where they agree, each in bold where they do not."""
    amx = {
        "device": "cpu",
        "cpu": "x86_64 amx_bf16 avx512_bf16 avx512f avx2",
        "precision": "torch.bfloat16",
        "threads": 2,
        "engine": "eager",
    }
    assert stop_logs.setup(amx) == "cpu amx_bf16, bf16, 2 threads"
    assert stop_logs.setup({**amx, "cpu": "x86_64 avx2", "precision": "float32", "threads": 1}) == "cpu avx2, fp32, 1 thread"
    assert stop_logs.setup({**amx, "device": "cuda", "engine": "graphed"}) == "cuda, bf16, graphed"
    assert stop_logs.setup({**amx, "cpu": "aarch64"}) == "cpu aarch64, bf16, 2 threads" and stop_logs.setup({}) == "?"

    def log(method, seed, how):
        return pd.DataFrame([{**KEY, "method": method, "seed": seed, "setup": how}])

    a, b = "cpu amx_bf16, bf16, 2 threads", "cpu avx2, fp32, 2 threads"
    rule = pd.concat([log("mv-unet", 0, b), log("mv-unet", 1, b), log("mr-net", 0, a), log("lf-net", 0, a)])
    long = pd.concat([log("mv-unet", 0, b), log("mv-unet", 1, b), log("mr-net", 0, b)])
    got = stop_audit.trained({"rule": rule, "long": long}).set_index("method")["trained"]
    assert got["mv-unet"] == b and got["mr-net"] == f"**rule: {a}; long: {b}**" and got["lf-net"] == f"**rule: {a}; long: not started**"
    assert stop_audit.trained({"rule": rule, "long": long.iloc[:0]}).empty
    assert (
        stop_logs.setup({"starts": [amx, amx, {**amx, "threads": 1}]}) == "cpu amx_bf16, bf16, 2 threads then cpu amx_bf16, bf16, 1 thread"
    )


def test_a_run_resumed_with_other_threads_says_so_and_records_both(tmp_path):
    """A cell resumed from its checkpoints under another setup warns, and its manifest keeps both starts, which the audit
    then shows as two parts."""
    common = ["--methods", "mv-unet", "--seeds", "0", "--train-size", "32", "--test-size", "12", "--backend", "sequential", "--no-progress"]
    assert run_bench("run", *common, "--budget", "long", "--max-steps", "4", "--results", str(tmp_path)).returncode == 0
    (folder,) = store.cell_folders(tmp_path)
    manifest = store.read_manifest(folder)
    assert len(manifest["starts"]) == 1 and manifest["starts"][0]["threads"] == manifest["threads"]
    store.write_manifest(folder, {**manifest, "status": "running", "starts": [{**manifest["starts"][0], "threads": 7}]})
    (folder / store.METRICS).unlink()  # unfinished again; its stage's weights are on disk, so the rerun resumes them
    proc = run_bench("run", *common, "--budget", "long", "--max-steps", "4", "--results", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert f"resumes a run started with threads 7 (now {manifest['threads']})" in proc.stderr
    again = store.read_manifest(folder)
    assert [s["threads"] for s in again["starts"]] == [7, manifest["threads"]] and " then " in stop_logs.setup(again)


def test_the_audit_says_where_a_long_run_still_training_stands(tmp_path):
    """A long run still training (its folder, config and log so far, no metrics) is not audited: the audit lists it with
    the step it reached of its planned length, its lowest validation loss so far and whether it is its rule run's twin so
    far; a LONG folder holding only such runs is audited without error."""
    common = ["--methods", "mv-unet", "--seeds", "0", "--train-size", "32", "--test-size", "12", "--backend", "sequential", "--no-progress"]
    rule, long, done = tmp_path / "rule", tmp_path / "long", tmp_path / "done"
    assert run_bench("run", *common, "--budget", "plateau", "--max-steps", "60", "--results", str(rule)).returncode == 0
    assert run_bench("run", *common, "--budget", "long", "--max-steps", "80", "--results", str(done)).returncode == 0
    src = store.cell_folders(done)[0]
    cell = long / src.relative_to(done)
    cell.mkdir(parents=True)
    (cell / store.CONFIG).write_bytes((src / store.CONFIG).read_bytes())
    log = pd.read_csv(src / store.TRAIN_LOG)
    log[(log["event"] == "eval") & (log["step"] <= 40)].to_csv(cell / store.TRAIN_LOG, index=False)  # killed after step 40
    assert not store.finished(long)
    proc = run_bench("audit-stops", str(rule), str(long))
    assert proc.returncode == 0, proc.stderr
    (row,) = stop_audit.pending(rule, long).to_dict("records")
    evals = log[(log["event"] == "eval") & (log["step"] <= 40)]
    low = evals.loc[evals["val_loss"].idxmin()]
    assert row["long_run"] == f"train: at step 40 of 80, lowest so far {low['val_loss']:.4g} at {low['step']:.0f}"
    assert row["shared"] == 2 and row["twin_diff"] == 0  # steps 20 and 40, logged alike by both runs
    assert row["trained"].startswith("**rule: cpu ") and row["trained"].endswith("; long: ?**")  # no manifest copied yet
    assert "| MV-UNet | 0 | train: 60 (" in proc.stdout and "| train: at step 40 of 80, " in proc.stdout and "| 2, 0 |" in proc.stdout
    (cell / store.TRAIN_LOG).write_bytes(b"\x00\x01")  # a log that cannot be read is said so, not taken as not started
    (row,) = stop_audit.pending(rule, long).to_dict("records")
    assert row["long_run"].startswith("cannot be read now (train_log.csv: ") and row["shared"] == 0


def test_the_kept_audit_evidence_still_gives_its_recorded_verdicts(tmp_path):
    """docs/audit/ holds the cells the findings' audit tables were read from (scripts/stop_audit_keep.sh: no checkpoints
    or predictions); auditing a copy of it again gives the verdicts and figures it holds, so a change to the audit's code
    that would change a recorded verdict is seen here."""
    kept = REPO / "docs" / "audit" / "mnist-5k"
    copy = tmp_path / "kept"
    shutil.copytree(kept, copy, ignore=shutil.ignore_patterns(store.STOP_AUDIT))
    proc = run_bench("audit-stops", str(copy / "rule"), str(copy / "long"))
    assert proc.returncode == 0, proc.stderr
    again = pd.read_csv(copy / "rule" / store.STOP_AUDIT / stop_audit.CSV)
    recorded = pd.read_csv(kept / "rule" / store.STOP_AUDIT / stop_audit.CSV)
    assert len(recorded) and set(recorded["verdict"]) <= {"passes", "fails"}
    pd.testing.assert_frame_equal(again, recorded, check_exact=False, rtol=1e-9)
