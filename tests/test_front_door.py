"""The first hour of a new user (issue: the front door): commands say what they will do, nothing is silently ignored.

Each test is one friction point of a first try: a bare command, a flag without a verb, the name a table prints, a flag
that would be ignored or clamped, a dry run that promises what the run then refuses, which datasets the data root holds.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, run_bench, run_cli

from bench import files, store, study
from bench.run import plan

CELL = store.Cell("mnist-5k", "lfnet", "protocol", "mv-unet", 0)


def test_bare_command_prints_help_and_runs_nothing(capsys):
    from bench import cli

    assert cli.main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m bench") and "--max-steps 20 --seeds 0" in out  # the smoke command is in the help


def test_a_flag_without_a_verb_names_the_verb():
    out = run_bench("--seeds", "0", "--dry-run")
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "error: --seeds needs a verb first: `python -m bench run --seeds 0 --dry-run` "
        "(verbs: list, run, raters, report, compare, export, predict, paper, rescore, perf, power, audit-stops, check)"
    )


def test_the_names_tables_print_are_taken_and_a_typo_gets_a_hint():
    assert plan.resolve_methods("MV-UNet,LF-Net,cm-UNET", study.default()) == ["mv-unet", "lf-net", "cm-unet"]
    with pytest.raises(plan.PlanError, match=r"unknown method 'mvunet'; did you mean mv-unet\? known: "):
        plan.resolve_methods("mvunet", study.default())
    with pytest.raises(plan.PlanError, match=r"unknown method 'feild'; did you mean field\? "):
        plan.resolve_methods("all,feild", study.default())
    assert plan.resolve_methods("field,lf-net", study.default()) == ["prob-unet", "pionono", "d-persona", "lf-net"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--backend", "sequential", "--n-jobs", "4"], "--n-jobs 4 has no effect with --backend sequential"),
        (["--data-root", "{tmp}/nowhere"], "no such folder, and mnist-5k is embedded (it reads nothing from a data root)"),
    ],
)
def test_a_flag_that_would_be_ignored_or_clamped_is_refused(tmp_path, args, message):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    results = tmp_path / "results"
    backend = [] if "--backend" in args else ["--backend", "sequential"]
    out = run_bench("run", "--methods", "mv-unet", "--seeds", "0", "--max-steps", "1", *backend, *args, "--results", str(results))
    assert out.returncode == 2, out.stderr
    assert message in out.stderr and len(out.stderr.strip().splitlines()) <= 3, out.stderr
    assert not (results / "runs").exists()  # nothing trained


def test_a_size_beyond_the_split_is_reported_and_recorded_as_used(tmp_path):
    """Before: --test-size 99999 scored 1,000 images without a word. Now a note says so, and the cell records what it used."""
    results = tmp_path / "results"
    out = run_bench(
        "run",
        "--methods",
        "mv-unet",
        "--seeds",
        "0",
        "--max-steps",
        "1",
        "--backend",
        "sequential",
        "--test-size",
        "99999",
        "--results",
        str(results),
    )
    assert out.returncode == 0, out.stderr
    assert "note: --test-size 99999: mnist-5k's test split has 1,000 images; all 1,000 are used" in out.stderr
    config = store.read_config(store.cell_dir(results, CELL))
    assert config["test_images"] == 1000 and config["options"]["test_size"] == 99999


def finished(results, options: dict, seconds: float) -> None:
    """A finished cell as a run leaves it: config (its options), manifest (done, its seconds) and metrics (the done mark)."""
    folder = store.open_cell(results, CELL)
    store.write_config(folder, {"options": options})
    store.write_manifest(
        folder,
        {
            "cell": {"dataset": CELL.dataset, "raters": CELL.raters, "noise": CELL.noise, "method": CELL.method, "seed": CELL.seed},
            "status": "done",
            "seconds": seconds,
        },
    )
    files.write_table(folder / store.METRICS, pd.DataFrame({"value": [0.5]}))


def test_a_dry_run_refuses_what_the_run_would_refuse(tmp_path):
    """Before: "0 of 1 cells would run", then the run refused the folder. Now the dry run makes the same checks."""
    results = tmp_path / "results"
    finished(
        results,
        {"budget": "quick", "max_steps": 20, "train_size": None, "test_size": None, "threads": 1, "samples": 16, "empty_pair": "one"},
        30.0,
    )
    out = run_bench("run", "--methods", "mv-unet", "--seeds", "0", "--dry-run", "--results", str(results))
    assert out.returncode == 2 and "ran with other options" in out.stderr and "max_steps 20 (now None)" in out.stderr


def test_a_dry_run_estimates_the_time_from_earlier_cells(tmp_path):
    results = tmp_path / "results"
    finished(
        results,
        {"budget": "quick", "max_steps": 20, "train_size": None, "test_size": None, "threads": 1, "samples": 16, "empty_pair": "one"},
        30.0,
    )
    out = run_bench("run", "--methods", "mv-unet,lf-net", "--seeds", "0,1", "--max-steps", "20", "--dry-run", "--results", str(results))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[:2] == ["done    mnist-5k/lfnet/protocol/mv-unet/seed-0", "to run  mnist-5k/lfnet/protocol/mv-unet/seed-1"]
    assert "3 of 4 cells would run" in lines
    assert lines[-2].startswith("estimate: about 30 s for 1 of them") and lines[-2].endswith("; the others below")
    assert lines[-1].startswith("estimate: none for 2 cell(s) (no earlier cell of their methods here; a stopping rule's length")
    assert plan.estimate([CELL], results) == (30.0, 1) and plan.estimate([], results) == (0, 0)


def test_a_dry_run_of_the_paper_recipe_estimates_each_cell_from_step_costs_measured_here(tmp_path):
    """A paper-budget sweep with no earlier cell: each method's stages, their fixed steps and the seconds a step measured
    now, and the sweep's time (issue: it printed "estimate: none")."""
    out = run_bench(
        "run",
        "--budget",
        "paper",
        "--methods",
        "mv-unet",
        "--seeds",
        "0,1",
        "--train-size",
        "16",
        "--dry-run",
        "--results",
        str(tmp_path / "r"),
    )
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if x.startswith("  mv-unet on mnist-5k: "))
    assert "a cell (train 150 steps × " in line and line.endswith("s), 2 cell(s)")  # 150 epochs of one batch of 16
    assert out.stdout.splitlines()[-1].startswith("estimate: about ") and "measuring step costs 1/1: mv-unet on mnist-5k" in out.stderr


def test_a_cells_estimated_time_is_its_steps_evaluations_curve_points_and_read_outs():
    """The dry run's cell time adds what a cell does beside its steps (a trajectory cell's evaluations were half of a
    sampler's time, and the estimate once left them out)."""
    from bench.run.costs import CellCost, StageCost

    cost = CellCost({"a": StageCost(10, 0.5, 2, 3.0), "b": StageCost(4, 1.0, 1, 2.0)}, curve=4, curve_s=1.0, reads=2, read_s=5.0)
    assert cost.seconds == (5 + 6) + (4 + 2) + 4 + 10
    assert cost.evaluation_share == pytest.approx(1 - 9 / 31)


def test_the_dry_run_says_when_its_step_costs_were_measured_beside_other_work():
    """Two training processes on a 2-core CPU made a measured MV-UNet step (batch 32) cost 15 s, not about 0.5: the estimate then
    says the CPU was shared; the measurement's own threads and a quiet CPU say nothing."""
    from bench.run.costs import busy_note

    note = busy_note(2.9, 2, 1)
    assert note.startswith("note: the CPU was busy") and "load average 2.9 on 2 cores, about 1.9 of it other work" in note
    assert busy_note(1.0, 2, 1) is None and busy_note(1.4, 2, 1) is None and busy_note(2.3, 16, 2) is None
    assert busy_note(2.6, 16, 2) is not None


def test_list_datasets_says_which_are_found_under_the_data_root(tmp_path):
    (tmp_path / "mnist").mkdir()
    (tmp_path / "mnist" / "train-images-idx3-ubyte.gz").write_bytes(b"x")
    (tmp_path / "lidc").mkdir()
    out = run_bench("list", "datasets", "--data-root", str(tmp_path))
    assert out.returncode == 0
    found = {
        line.split()[0]: out.stdout.splitlines()[i + 6].strip()
        for i, line in enumerate(out.stdout.splitlines())
        if line.startswith("  ") and not line.startswith("   ")
    }
    assert found["mnist-5k"].startswith("found: embedded")
    assert found["mnist"] == f"found: {tmp_path / 'mnist'}/ (1 files; checked when a run loads them)"
    assert found["lidc"] == f"not found: {tmp_path / 'lidc'}/ is empty" and found["riga"] == f"not found: no folder {tmp_path / 'riga'}/"


def test_the_options_a_dry_run_checks_are_the_recorded_ones(tmp_path):
    """The dry run's check reads what the run records (config.json's options), so the two cannot disagree."""
    results = tmp_path / "results"
    finished(
        results,
        {"budget": "quick", "max_steps": None, "train_size": None, "test_size": None, "threads": 1, "samples": 16, "empty_pair": "one"},
        12.0,
    )
    config = json.loads((store.cell_dir(results, CELL) / store.CONFIG).read_text())
    out = run_bench("run", "--methods", "mv-unet", "--seeds", "0", "--dry-run", "--results", str(results))
    assert out.returncode == 0 and out.stdout.startswith("done    ") and config["options"]["max_steps"] is None


def test_a_sweep_file_takes_the_flags_keys_and_is_kept_with_its_results(tmp_path):
    sweep = tmp_path / "my_sweep.toml"
    results = tmp_path / "results"
    sweep.write_text(
        'methods = ["MV-UNet"]\nseeds = [0, 1]\nmax_steps = 1\ntest_size = 8\nbackend = "sequential"\n'
        f'results = "{results}"\n[set]\nmv-unet = {{ lr_scale = [1] }}\n'
    )
    assert "mv-unet has no parameter 'lr_scale'" in run_bench("run", "--config", str(sweep), "--dry-run").stderr  # [set] reaches the checks
    sweep.write_text(sweep.read_text().split("[set]")[0])
    listed = run_bench("run", "--config", str(sweep), "--seeds", "1", "--dry-run")  # the command line wins over the file
    assert listed.returncode == 0 and listed.stdout.splitlines()[0] == "to run  mnist-5k/lfnet/protocol/mv-unet/seed-1", listed.stderr
    out = run_bench("run", "--config", str(sweep), "--seeds", "1")
    assert out.returncode == 0, out.stderr
    assert store.is_done(results, store.Cell("mnist-5k", "lfnet", "protocol", "mv-unet", 1))
    assert (results / "sweeps" / "my_sweep.toml").read_text() == sweep.read_text()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('budget = "fast"', "budget = 'fast': expected one of quick, plateau, plateau-1127, long, trajectory, paper, paper-rcl15"),
        ("sedes = [0]", "unknown key 'sedes' (did you mean seeds?); keys are the run flags' names: methods, dataset, seeds"),
        ('max_steps = "ten"', "max_steps = 'ten': expected a whole number"),
        ("seeds = [0", "cannot read it as TOML"),
    ],
)
def test_a_bad_sweep_file_is_refused_in_one_line_naming_it(tmp_path, text, message):
    sweep = tmp_path / "bad.toml"
    sweep.write_text(text + "\n")
    out = run_bench("run", "--config", str(sweep), "--dry-run")
    assert out.returncode == 2 and out.stderr.startswith(f"error: --config {sweep}: ") and message in out.stderr, out.stderr


def long_table(shift: dict[str, float], seed: int) -> pd.DataFrame:
    """mv-unet and lf-net on 20 cases × 3 seeds, DSC (fraction) and bAHD (pixels), each moved by `shift[metric]`."""
    rng = np.random.default_rng(seed)
    rows = []
    for method, base in (("mv-unet", 0.6), ("lf-net", 0.8)):
        for s in range(3):
            level = base + rng.normal(0, 0.005)
            for c in range(20):
                dsc = level + 0.05 * np.sin(c) + rng.normal(0, 0.002)
                rows.append(("mnist-5k", "lfnet", "protocol", method, s, "gt", f"c{c:02d}", "foreground", "dsc", dsc + shift["dsc"]))
                rows.append(("mnist-5k", "lfnet", "protocol", method, s, "gt", f"c{c:02d}", "foreground", "bahd", 2 - dsc + shift["bahd"]))
    return pd.DataFrame(rows, columns=["dataset", "raters", "noise", "method", "seed", "reference", "case", "structure", "metric", "value"])


def test_compare_puts_two_results_folders_side_by_side_with_the_seed_aware_test(tmp_path):
    """B is A with every DSC 2 points higher and every bAHD 0.3 pixels lower: the comparison finds both, in the tables' units."""
    a, b = tmp_path / "before", tmp_path / "after"
    files.write_table(a / store.METRICS, long_table({"dsc": 0.0, "bahd": 0.0}, seed=1))
    files.write_table(b / store.METRICS, long_table({"dsc": 0.02, "bahd": -0.3}, seed=1))
    out = run_bench("compare", str(a), str(b))
    assert out.returncode == 0, out.stderr
    table = pd.read_csv(tmp_path / "compare_before_vs_after" / "compare.csv").set_index(["method", "metric"])
    assert list(table.index) == [("mv-unet", "bahd"), ("lf-net", "bahd"), ("mv-unet", "dsc"), ("lf-net", "dsc")]
    assert table.loc[("lf-net", "dsc"), "diff"] == pytest.approx(2.0) and table.loc[("mv-unet", "bahd"), "diff"] == pytest.approx(-0.3)
    assert (table["ci_low"] < table["diff"]).all() and (table["diff"] < table["ci_high"]).all() and (table["p_holm"] < 0.05).all()
    assert "DSC LF-Net: 80." in out.stdout and "B − A +2.00 [" in out.stdout
    assert len(list((tmp_path / "compare_before_vs_after").glob("diff_*.png"))) == 2 and sorted(b.iterdir()) == [b / store.METRICS]
    missing = run_bench("compare", str(a), str(tmp_path / "nothing"))
    assert missing.returncode == 2 and "no results table" in missing.stderr


def test_one_evaluation_draws_a_note_and_a_long_title_fits():
    """Before: a run evaluated once drew empty axes and a clipped title; then a lone dot on fractional ticks. Now a note."""
    from bench.report import plots

    logs = pd.DataFrame(
        {
            "method": ["mv-unet"] * 2,
            "seed": [0, 1],
            "stage": ["train"] * 2,
            "event": ["eval"] * 2,
            "step": [20, 20],
            "val_loss": [0.5, 0.6],
            "diagnostic_gt_dsc": [40.0, 45.0],
            "restored_step": [np.nan] * 2,
        }
    )
    title = "pipeline check: every stage was capped by --max-steps, so these curves show a smoke run and not a training\nmnist-5k"
    curves = plots.learning_curve_figure(study.default(), logs, ["mv-unet"], title)
    (ax,) = [a for a in curves.axes if a.get_visible()]
    assert not ax.lines and [t.get_text().replace("\n", " ") for t in ax.texts] == ["one evaluation only (step 20): no curve to draw"]
    assert all(len(line) <= 42 for line in curves._suptitle.get_text().split("\n"))
    diagnostic = plots.diagnostic_figure(study.default(), logs, ["mv-unet"], ["mv-unet"], "gt")
    assert not diagnostic.axes[0].lines and diagnostic.axes[0].texts[0].get_gid() == "note"


def test_parallel_workers_show_each_cell_start_and_each_stage_stop(tmp_path):
    """Before: with workers, only the sweep's count moved, at 0 % for half a minute. Now each worker says what it runs."""
    out = run_cli(
        "run",
        "--methods",
        "mv-unet,lf-net",
        "--seeds",
        "0",
        "--max-steps",
        "2",
        "--test-size",
        "8",
        "--backend",
        "loky",
        "--n-jobs",
        "2",
        "--results",
        str(tmp_path / "results"),
    )  # a subprocess: the workers write to its stderr
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    assert sorted(line.split(" (process")[0] for line in lines if line.startswith("started ")) == [
        "started mnist-5k/lfnet/protocol/lf-net/seed-0",
        "started mnist-5k/lfnet/protocol/mv-unet/seed-0",
    ]
    stages = sorted(line.split(" (")[0] for line in lines if ": cap at step" in line)
    assert stages == [
        "lf-net seed 0 segmentation: cap at step 2",
        "lf-net seed 0 soft_label: cap at step 2",
        "mv-unet seed 0 train: cap at step 2",
    ]


def test_the_readmes_method_example_registers_and_trains(tmp_path, monkeypatch):
    """The Adding-a-method example of the README is complete: run as it stands, it registers, builds and trains."""
    import importlib
    import re

    import torch

    import methods
    from bench.train import harness
    from methods import registry

    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Adding a method") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.setattr(registry, "_ENTRIES", dict(registry._ENTRIES))  # registered for this test only
    (tmp_path / "readme_my_net.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("readme_my_net")
    method = methods.build_method("my-net", methods.DataSpec(1, 2, 3), {"smoothing": 0.1})
    rng = np.random.default_rng(0)
    images = rng.random((8, 1, 16, 16), dtype=np.float32)
    raters = (rng.random((8, 3, 16, 16)) > 0.5).astype(np.uint8)
    valid = np.ones((8, 3), dtype=bool)
    records = harness.fit(
        method,
        harness.Split(images, raters, valid),
        harness.fixed_schedules(method, 2, 4),
        harness.Runtime(0, torch.device("cpu")),
        out=harness.Output(progress=False),
    ).stages
    assert list(records) == ["train"] and methods.get_entry("my-net").display == "My-Net"
    assert method.predict_proba(torch.from_numpy(images)).shape == (8, 2, 16, 16)
    # Issue 76: its Config declares the smoothing's range, so `--set` refuses a value outside it in one line, before any
    # cell; and a method registered without a group runs only by name: not in `--methods all` (group main).
    out = run_bench("run", "--methods", "my-net", "--set", "my-net.smoothing=5", "--results", str(tmp_path / "r"))
    assert out.returncode == 2 and out.stderr.strip() == "error: my-net.smoothing=5: outside its range 0.0..1.0", out.stderr
    assert not (tmp_path / "r").exists()
    assert "my-net" in methods.method_names() and "my-net" not in methods.method_names("main")
    assert "my-net" not in plan.resolve_methods("all", study.default())
    assert "from methods import my_net  # noqa: F401" in section and "`methods/__init__.py`" in section


def test_cells_left_running_by_a_stopped_sweep_are_tidied_unless_still_claimed(tmp_path):
    """Ctrl-C or a lost worker: a worker killed before it could write its manifest left "running", one killed mid-write left
    a half-written file; the sweep marks the first and removes the second, in cells nobody claims any more."""
    from bench.run import sweep

    other = store.Cell("mnist-5k", "lfnet", "protocol", "lf-net", 0)
    for cell in (CELL, other):
        folder = store.open_cell(tmp_path, cell)
        store.write_manifest(folder, {"cell": {}, "status": "running"})
        (folder / ".metrics.123.tmp.parquet").write_bytes(b"half")
    with store.claim(tmp_path, other) as held:  # still trained by a live process: left alone
        assert held
        sweep.mark_stopped([CELL, other], tmp_path, "worker lost; rerun the same command to resume")
    stopped = store.read_manifest(store.cell_dir(tmp_path, CELL))
    assert stopped["status"] == "interrupted" and stopped["reason"].startswith("worker lost")
    assert not list(store.cell_dir(tmp_path, CELL).glob(".*.tmp*"))
    assert store.read_manifest(store.cell_dir(tmp_path, other))["status"] == "running"
    assert list(store.cell_dir(tmp_path, other).glob(".*.tmp*"))


def test_opening_a_cell_under_its_claim_removes_what_a_killed_writer_left(tmp_path):
    """A process killed mid-write leaves the atomic writer's `.<name>.<pid>.tmp<suffix>`, at any depth of the cell's
    folder; the next run opens the cell under its claim and removes it, and nothing else."""
    folder = store.open_cell(tmp_path, CELL)
    (folder / "checkpoints").mkdir()
    half = [folder / ".manifest.77.tmp.json", folder / "checkpoints" / ".last.77.tmp.pt"]
    for path in half:
        path.write_bytes(b"half")
    (folder / "train_log.csv").write_text("stage\n")
    store.open_cell(tmp_path, CELL)
    assert not any(path.exists() for path in half) and (folder / "train_log.csv").exists()
