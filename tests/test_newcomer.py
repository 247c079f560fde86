"""The newcomer's failing cases of issue 76, each as it was met: a finished cell whose config.json records no options,
a dry run that listed cells the run refuses, `--backend dask` without dask.distributed, and an empty `--results`."""

from __future__ import annotations

import importlib.util

import pandas as pd
import pytest

from bench import files, store, study
from bench.cli import main
from bench.identity import Cell

CELL = Cell("mnist-5k", "lfnet", "protocol", "mv-unet", 0)


def run(capsys, *argv) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


def test_a_cell_whose_config_records_no_options_is_not_taken_as_done(tmp_path, capsys):
    """A `config.json` of `{}` (emptied by hand) passed as any run's cell: a 20-step quick cell was shown as a plateau
    result. Its options are now "not recorded", a mismatch the run and the dry run refuse."""
    folder = store.open_cell(tmp_path, CELL)
    files.write_json(folder / store.CONFIG, {})
    store.write_manifest(folder, {"cell": CELL.record(), "status": "done"})
    files.write_table(folder / store.METRICS, pd.DataFrame({"value": [0.5]}))
    code, err = run(capsys, "run", "--budget", "plateau", "--methods", "mv-unet", "--seeds", "0", "--dry-run", "--results", str(tmp_path))
    assert code == 2 and "ran with other options" in err and "budget not recorded (now plateau)" in err, err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--dataset", "lidc"], "lidc: "),  # the dataset's files are not under the data root
        (["--data-root", "/nonexistent/data", "--dataset", "ms-lesion"], "/nonexistent/data"),
        (["--noise-levels", "0.95"], "0.95"),  # beyond what the lfnet pool reaches
    ],
    ids=["missing-dataset", "missing-data-root", "unreachable-noise-level"],
)
def test_a_dry_run_refuses_the_data_the_run_refuses(tmp_path, capsys, argv, said):
    """ "33 of 33 cells would run", exit 0, where the real run refused: the dry run now loads the data it lists."""
    code, err = run(capsys, "run", "--methods", "mv-unet", "--seeds", "0", "--dry-run", "--results", str(tmp_path / "r"), *argv)
    assert code == 2 and said in err and err.startswith("error: ") and err.count("\n") == 1, err
    assert not (tmp_path / "r").exists()


def test_dask_without_distributed_is_refused_before_anything_is_written(tmp_path, capsys, monkeypatch):
    """It exited 1 with "worker lost … rerun to resume" and wrote empty tables; now exit 2 naming the extra."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "distributed" else real(name, *a))
    code, err = run(
        capsys, "run", "--methods", "mv-unet", "--seeds", "0", "--max-steps", "2", "--backend", "dask", "--results", str(tmp_path / "r")
    )
    assert code == 2 and "pip install -e '.[dask]'" in err and not (tmp_path / "r").exists(), err


def test_an_empty_results_folder_name_is_refused(tmp_path, capsys, monkeypatch):
    """`--results ''` wrote into the current folder (the repository root)."""
    monkeypatch.chdir(tmp_path)
    code, err = run(capsys, "run", "--methods", "mv-unet", "--seeds", "0", "--max-steps", "2", "--results", "")
    assert code == 2 and "--results ''" in err and list(tmp_path.iterdir()) == [], err


def test_the_help_texts_the_newcomer_read(capsys):
    """`bench power --help` printed "80 %% power"; `bench paper --help` had no description."""
    for verb in ("power", "paper"):
        with pytest.raises(SystemExit):
            main([verb, "--help"])
    out = capsys.readouterr().out
    assert "%%" not in out and "80 % power" in out.replace("\n", " ")
    assert "Run each recipe of paper_figures/recipes/" in out.replace("\n", " ")


def test_every_verbs_help_has_a_description_and_prints_no_argparse_escape():
    """The same two defects on every verb (issue 76, item 6): `compare --help` printed "95 %% interval" (a description is
    not %-formatted, so its "%%" stays doubled), and `list`, `rescore` and `perf --help` said nothing of what they do."""
    import argparse

    from bench.cli import build_parser

    verbs = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    for name, parser in verbs.items():
        text = parser.format_help()
        assert parser.description and parser.description.split()[0] in text, f"`{name} --help` has no description"
        assert "%%" not in text and "%(" not in text, f"`{name} --help` prints an argparse escape"


def test_results_readme_names_the_folder_compare_writes(tmp_path):
    """results/README.md names compare's folder as `bench compare A B` makes it: compare_<A>_vs_<B>/ beside B."""
    from conftest import REPO

    from bench.cli.compare import default_out

    a, b = tmp_path / "runs" / "base", tmp_path / "runs" / "bf16"
    assert default_out(a, b) == tmp_path / "runs" / "compare_base_vs_bf16"  # beside B, named after both
    assert "`compare_<A>_vs_<B>/` beside B (`bench compare A B`)" in (REPO / "results" / "README.md").read_text()


def test_export_writes_one_tidy_row_per_case_with_the_cells_options(tmp_path, capsys):
    """`bench export`: the per-case numbers sat in parquet files; now one table with each cell's options, documented."""
    from bench.cli import export

    results = tmp_path / "r"
    assert (
        main(
            [
                "run",
                "--methods",
                "mv-unet",
                "--seeds",
                "0",
                "--max-steps",
                "2",
                "--test-size",
                "8",
                "--no-progress",
                "--results",
                str(results),
            ]
        )
        == 0
    )
    assert main(["export", "--results", str(results)]) == 0
    table = pd.read_csv(results / "export.csv")
    long = pd.read_parquet(next(results.glob("runs/**/seed-0")) / store.METRICS)
    assert len(table) == len(long) and table["case"].nunique() == 8 and set(table["reading"]) == {"rule"}
    assert (table["budget"] == "quick").all() and (table["max_steps"] == 2).all() and (table["samples"] == 16).all()
    for column in ("dataset", "reference", "case", "structure", "metric", "value", "tp", "n_samples", "reading", "budget", "precision"):
        assert column in table and f"{column}" in export.__doc__, column
    assert main(["export", "--results", str(results), "--format", "parquet", "--out", str(tmp_path / "x.csv")]) == 2
    assert "a parquet file ends in .parquet" in capsys.readouterr().err


def test_a_cell_without_a_bar_says_how_far_it_is_and_where_it_resumes(tmp_path, monkeypatch, capsys):
    """A plateau cell in a log (no terminal) was silent for an hour, and a resume never said where it resumed: a line at an
    evaluation (at most every minute; here every one) gives the step, the losses and the time left, and a resumed run
    says where it starts."""
    from test_protocol import Killed, dies_at_step, tiny, train_mv

    from bench.train import harness

    monkeypatch.setattr(harness, "LINE_SECONDS", 0.0)
    data, val = tiny(16, seed=0), tiny(8, seed=1)
    revive = dies_at_step(monkeypatch, 7)
    with pytest.raises(Killed):
        train_mv(data, val, None, patience=100, checkpoint_dir=tmp_path, checkpoint_seconds=0, desc="mv-unet seed 1", announce=True)
    err = capsys.readouterr().err
    assert "mv-unet seed 1 train: step 2/16 (epoch 0), loss " in err and "validation loss" in err and "min to the cap" in err, err
    revive()
    train_mv(data, val, None, patience=100, checkpoint_dir=tmp_path, checkpoint_seconds=0, desc="mv-unet seed 1", announce=True)
    assert "mv-unet seed 1: resuming train at step 7 from its checkpoint" in capsys.readouterr().err  # saved after every step


def test_the_printed_table_shows_the_oracle_once_when_it_is_asked_for_by_name():
    from bench.cli.run import format_table

    rows = [
        {
            "dataset": "d",
            "raters": "r",
            "noise": "protocol",
            "structure": "foreground",
            "reference": "gt",
            "method": m,
            "metric": k,
            "mean": 0.9,
            "std": 0.01,
            "n_seeds": 1,
        }
        for m in ("mv-unet", "oracle")
        for k in ("dsc", "bahd")
    ]
    lines = format_table(study.default(), pd.DataFrame(rows), ["mv-unet", "oracle"]).splitlines()
    assert [line.split()[0] for line in lines[3:]] == ["mv-unet", "oracle"]
