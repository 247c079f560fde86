"""User-facing CLI defects, one fast test each: parameter types from annotations, duplicate seeds, abbreviated
flags, progress output in logs, the report's default folder, declared dependencies, flock on non-POSIX
systems and the README's install note."""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pandas as pd
import pytest
import torch
from test_protocol import Scripted, rule, tiny

import methods
from bench import cli, files, store, study
from bench.cli import report as report_verb
from bench.cli import run as run_verb
from bench.report import render
from bench.run import cell, plan, resolve, sweep
from bench.train import harness
from bench.train.budget import BUDGETS
from datasets import get_dataset

PAPER = study.default()

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent


def run_main(argv: list[str], capsys) -> tuple[int, str, str]:
    """`python -m bench ARGV` in this process: (exit status, stdout, stderr); argparse's exits count as their status."""
    try:
        code = cli.main(argv)
    except SystemExit as e:
        code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err


# --------------------------------------------------------------------------- 1. --set types for fields whose default is None


@pytest.mark.parametrize(
    ("method", "key", "value", "expected"),
    [
        ("lf-net", "beta", "x", "lf-net.beta='x': expected int or None"),
        ("lf-net", "rcl_epochs", 1.5, "lf-net.rcl_epochs=1.5: expected int or None"),
        ("lf-net", "beta", True, "lf-net.beta=True: expected int or None"),
        ("mr-net", "mpm_width", "wide", "mr-net.mpm_width='wide': expected int or None"),
        ("oracle", "beta", "x", "oracle.beta='x': expected int or None"),
    ],
)
def test_set_refuses_a_wrong_type_where_the_default_is_none(method, key, value, expected):
    with pytest.raises(methods.UnknownMethodError, match=re.escape(expected)):
        plan.expand_params([method], {method: {key: [value]}}, get_dataset("mnist-5k"), PAPER)


def test_set_accepts_the_annotated_types_where_the_default_is_none():
    names = plan.expand_params(["lf-net"], {"lf-net": {"beta": [3, None], "rcl_epochs": [2]}}, get_dataset("mnist-5k"), PAPER)
    assert [n.label for n in names] == ["lf-net@beta=3@rcl_epochs=2", "lf-net@rcl_epochs=2"]


def test_set_with_a_wrong_type_is_one_line_before_any_cell(tmp_path, capsys):
    code, out, err = run_main(["run", "--methods", "lf-net", "--set", "lf-net.beta=x", "--results", str(tmp_path / "r")], capsys)
    assert code == 2 and err == "error: lf-net.beta='x': expected int or None (its default is None)\n", err
    assert not (tmp_path / "r").exists()


# --------------------------------------------------------------------------- 2. duplicate seeds and noise levels


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--seeds", "0,0"], "error: --seeds 0,0: 0 given more than once; list each value once\n"),
        (["--seeds", "2,1,2,1"], "error: --seeds 2,1,2,1: 1, 2 given more than once; list each value once\n"),
        (
            ["--noise-levels", "0.5,protocol,0.50"],
            "error: --noise-levels 0.5,protocol,0.50: 0.5 given more than once; list each value once\n",
        ),
    ],
)
def test_duplicate_seeds_or_noise_levels_are_refused(flags, expected, tmp_path, capsys):
    code, out, err = run_main(["run", "--methods", "mv-unet", *flags, "--dry-run", "--results", str(tmp_path / "r")], capsys)
    assert (code, err) == (2, expected)


def test_method_groups_combine_and_each_method_runs_once(capsys, tmp_path):
    paper = study.default()
    names = plan.resolve_methods("all,ablation,readings", paper)
    assert len(names) == len(set(names)) and names[: len(plan.resolve_methods("all", paper))] == plan.resolve_methods("all", paper)
    assert set(plan.resolve_methods("ablation", paper)) | {r["method"] for r in paper.readings} <= set(names)
    assert plan.resolve_methods("readings,mv-unet", paper) == [*(r["method"] for r in paper.readings), "mv-unet"]
    code, out, err = run_main(["run", "--methods", "mv-unet,all,mv-unet", "--dry-run", "--results", str(tmp_path / "r")], capsys)
    assert (code, err) == (2, "error: --methods mv-unet,all,mv-unet: mv-unet given more than once; list each value once\n")


# --------------------------------------------------------------------------- 3. no abbreviated flags


def subparsers(parser):
    actions = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    return {name: p for a in actions for name, p in a.choices.items()}


def test_every_parser_refuses_abbreviations():
    parser = cli.build_parser()
    verbs = subparsers(parser)
    assert set(verbs) == {
        "list",
        "run",
        "raters",
        "report",
        "compare",
        "export",
        "predict",
        "paper",
        "rescore",
        "perf",
        "power",
        "audit-stops",
        "check",
    }
    assert not parser.allow_abbrev and not any(p.allow_abbrev for p in verbs.values())


@pytest.mark.parametrize("argv", [["run", "--seed", "0"], ["run", "--noise", "1"], ["report", "--res", "x"], ["perf", "--qui"]])
def test_an_abbreviated_flag_is_an_error_not_a_guess(argv, capsys):
    code, out, err = run_main(argv, capsys)
    assert code == 2 and err.startswith(f"error: unrecognized arguments: {argv[1]}") and err.count("\n") == 1, err


def test_report_parser_refuses_abbreviations_under_a_plain_argparse_parent():
    import argparse

    parser = argparse.ArgumentParser()
    report_verb.add_parser(parser.add_subparsers(dest="verb"))
    with pytest.raises(SystemExit):
        parser.parse_args(["report", "--res", "x"])


# --------------------------------------------------------------------------- 4. progress: bars on a terminal, one line per cell otherwise

CELLS = [cell.Cell("mnist-5k", "cm", "protocol", "mv-unet", s) for s in (0, 1)]
OUTCOMES = [
    {"cell": str(CELLS[1]), "status": "done", "reason": "", "seconds": 24.2},
    {"cell": str(CELLS[0]), "status": "failed", "reason": "ValueError: bad", "seconds": 3.0},
]


def fake_sweep(tmp_path, monkeypatch, progress: bool) -> list[dict]:
    monkeypatch.setattr(sweep, "dispatch", lambda cells, *a, **k: iter(OUTCOMES))
    opts = resolve.RunOptions(results=tmp_path, data_root=tmp_path, budget=BUDGETS["quick"], progress=progress)
    return sweep.run_sweep(CELLS, opts)


@pytest.mark.parametrize("tidy_fails", [None, "write_manifest", "claim"], ids=["tidied", "disk-refuses-the-tidy", "disk-refuses-the-lock"])
def test_a_stopped_sweep_fails_its_cells_with_the_resume_line_and_tidies_them(tmp_path, monkeypatch, tidy_fails):
    """The disk fails mid-sweep: every cell fails with the cause and the rerun line; a cell left running with a
    half-written file is tidied, and where the disk refuses that too (the manifest's write, or the claim's lock file)
    the outcomes still say what happened."""

    def broken(cells, *a, **k):
        raise OSError(28, "No space left on device")
        yield

    folder = store.open_cell(tmp_path, CELLS[0])
    store.write_manifest(folder, {"cell": {}, "status": "running"})
    (folder / ".metrics.9.tmp.parquet").write_bytes(b"half")
    monkeypatch.setattr(sweep, "dispatch", broken)
    if tidy_fails:

        def full(*a):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(store, tidy_fails, full)
    opts = resolve.RunOptions(results=tmp_path, data_root=tmp_path, budget=BUDGETS["quick"], progress=False)
    outcomes = sweep.run_sweep(CELLS, opts)
    assert [o["status"] for o in outcomes] == ["failed", "failed"]
    assert all(o["reason"].startswith("sweep stopped (OSError") and "rerun the same command" in o["reason"] for o in outcomes)
    assert bool(list(folder.glob(".*.tmp*"))) == (tidy_fails == "claim")  # removed under the claim, before the manifest
    assert store.read_manifest(folder)["status"] == ("running" if tidy_fails else "interrupted")


@pytest.mark.parametrize("progress", [True, False], ids=["progress", "no-progress"])
def test_without_a_terminal_each_finished_cell_prints_one_plain_line_and_no_bar(tmp_path, monkeypatch, capsys, progress):
    outcomes = fake_sweep(tmp_path, monkeypatch, progress)
    out, err = capsys.readouterr()
    assert [o["status"] for o in outcomes] == ["failed", "done"]
    assert out.splitlines() == [
        "cell 1/2 done: mnist-5k/cm/protocol/mv-unet/seed-1 (done, 24 s)",
        "cell 2/2 done: mnist-5k/cm/protocol/mv-unet/seed-0 (failed: ValueError: bad, 3 s)",
    ]
    assert err == ""  # no bar, no cursor escapes


def test_on_a_terminal_the_sweep_shows_a_bar_and_no_per_cell_lines(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    fake_sweep(tmp_path, monkeypatch, progress=True)
    out, err = capsys.readouterr()
    assert "sweep" in err and "2/2" in err
    assert out.splitlines() == ["cell mnist-5k/cm/protocol/mv-unet/seed-0 failed: ValueError: bad"]


def test_on_a_terminal_no_progress_hides_the_bar(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    fake_sweep(tmp_path, monkeypatch, progress=False)
    out, err = capsys.readouterr()
    assert err == "" and out.count("cell ") == 2


def test_run_cell_reports_its_seconds(tmp_path):
    opts = resolve.RunOptions(results=tmp_path, data_root=tmp_path, budget=BUDGETS["quick"])
    (store.cell_dir(tmp_path, CELLS[0]) / "metrics.parquet").parent.mkdir(parents=True)
    (store.cell_dir(tmp_path, CELLS[0]) / "metrics.parquet").touch()
    outcome = cell.run_cell(CELLS[0], opts)
    assert outcome["status"] == "skipped" and outcome["seconds"] >= 0


@pytest.mark.parametrize("tty", [False, True])
def test_stage_bar_is_labelled_and_shown_only_on_a_terminal(tty, monkeypatch, capsys):
    seen = []

    class Recorder(harness.tqdm):
        def __init__(self, *args, **kwargs):
            seen.append(kwargs)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(harness, "tqdm", Recorder)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: tty)
    data = tiny()
    split = harness.Split(*data)
    harness.fit(
        Scripted([1.0]),
        split,
        rule(max_steps=2),
        harness.Runtime(0, torch.device("cpu")),
        val=split,
        out=harness.Output(desc="mv-unet seed 2"),
    )
    assert [(k["desc"], k["disable"]) for k in seen] == [("mv-unet seed 2 train", not tty)]
    assert ("train" in capsys.readouterr().err) == tty


def test_no_progress_help_says_it_hides_only_the_bars(capsys):
    code, out, _ = run_main(["run", "--help"], capsys)
    assert code == 0
    text = " ".join(out.split())
    assert (
        "--no-progress hide the progress bars (shown only when stderr is a terminal) and print one line per finished cell instead" in text
    )


# --------------------------------------------------------------------------- 5. report writes beside the results by default


def test_report_defaults_to_results_report(tmp_path, monkeypatch, capsys):
    results = tmp_path / "results"
    files.write_table(results / "metrics.parquet", pd.DataFrame({"value": [0.5]}))
    files.write_table(results / "summary.csv", pd.DataFrame({"dataset": ["toy"]}))
    drawn = []
    monkeypatch.setattr(render, "render", lambda paper, res, out, audit, *_: drawn.append((Path(res.path), out)) or [])  # the opened folder
    assert run_main(["report", "--results", str(results)], capsys)[0] == 0
    assert drawn == [(results, results / "report")] and (results / "report").is_dir()
    assert run_main(["report", "--results", str(results), "--out", str(tmp_path / "figs")], capsys)[0] == 0
    assert drawn[-1] == (results, tmp_path / "figs")


# --------------------------------------------------------------------------- 6. every imported package is declared


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_third_party_import_is_a_declared_dependency():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    requirements = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra)]
    declared = {normal(re.match(r"[A-Za-z0-9_.-]+", r).group()) for r in requirements}
    modules = set()
    for path in [p for pkg in ("bench", "methods", "datasets", "labels") for p in (REPO / pkg).rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                modules.add(node.module.split(".")[0])
    third_party = modules - set(sys.stdlib_module_names) - {"bench", "methods", "datasets", "labels"}
    dists = packages_distributions()
    missing = {m for m in third_party if not {normal(d) for d in dists.get(m, [m])} & declared}
    assert not missing, f"imported but not declared in pyproject.toml: {sorted(missing)}"
    assert {"matplotlib", "pillow", "tifffile"} <= {normal(re.match(r"[A-Za-z0-9_.-]+", r).group()) for r in project["dependencies"]}


# --------------------------------------------------------------------------- 7. flock only where claims are taken, and a clear error without it


def test_store_imports_without_fcntl_and_claims_say_what_system_they_need(tmp_path, monkeypatch, capsys):
    assert "import fcntl" not in (REPO / "bench" / "store.py").read_text().split("def flock_module")[0]
    monkeypatch.setitem(sys.modules, "fcntl", None)  # `import fcntl` now raises ImportError, as on Windows
    with pytest.raises(files.PlatformError, match=r"POSIX system \(Linux, macOS\).*WSL"), files.locked(tmp_path / "x.lock"):
        pass
    assert not (tmp_path / "x.lock").exists()
    opts = resolve.RunOptions(results=tmp_path / "r", data_root=tmp_path, budget=BUDGETS["quick"])
    monkeypatch.setattr(run_verb, "cmd_run", lambda args: len(sweep.run_sweep(CELLS, opts)))
    code, out, err = run_main(["run"], capsys)
    assert code == 2 and err.startswith("error: claiming cells needs a POSIX system (Linux, macOS)") and err.count("\n") == 1, err
    assert not (tmp_path / "r").exists()  # refused before any cell


# --------------------------------------------------------------------------- 8. the README's install note


def test_readme_install_note_names_the_cpu_index_and_keeps_the_quickstart():
    text = (REPO / "README.md").read_text()
    assert "pip install torch==2.13.0 && pip install -e . && python -m bench run" in text
    assert "pip install torch==2.13.0 && pip install -e '.[test]' && python -m pytest" in text
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu && pip install -e ." in text
    assert "avoids pip pulling" not in text


def test_an_interrupted_cell_says_so_in_its_manifest(tmp_path, monkeypatch):
    """Ctrl-C inside training: the interrupt goes on up, and the cell's manifest reads "interrupted", not "running"."""

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(harness, "fit", interrupted)
    opts = resolve.RunOptions(results=tmp_path, data_root=tmp_path, budget=BUDGETS["quick"], max_steps=1, test_size=8, progress=False)
    with pytest.raises(KeyboardInterrupt):
        cell.run_cell(CELLS[0], opts)
    manifest = store.read_manifest(store.cell_dir(tmp_path, CELLS[0]))
    assert manifest["status"] == "interrupted" and "rerun the same command" in manifest["reason"]
    assert not store.is_done(tmp_path, CELLS[0])
