"""Damaged files of a results folder: every file kind × every damage × every verb that reads it.

One tiny results folder (mv-unet, seeds 0 and 1, 2 steps, 32 training and 8 test images, its sweep file kept) is trained
once for the module; each case copies it, damages one file (cut to half its size, overwritten with random bytes,
emptied or deleted) and runs one verb in this process (`conftest.run_bench`). Every case ends in one of:

- refused: exit 2, the damaged file named on stderr (with its repair), no traceback, and nothing written: the folder
  is as it was, the damaged file included (`rescore` re-scores the healthy cell, and only that);
- repaired: exit 0, a note or line naming the file, and the file readable again (`rescore` rebuilds a cell's scores from
  its predictions; `report`, `compare` and `power` rebuild a damaged collected table from the cells);
- rewritten: exit 0 and the file readable again (`run` and `rescore` collect the tables anew every time);
- listed: exit 0, the file named among the cells to train again (`paper --dry-run`: the damaged cell is one of the
  paper's recipes; a damaged cell outside them is refused as by `run`);
- ok: exit 0 (the verb does not need the file: a deleted training log, reliability bins or predictions).

In every case the other cell's files are unchanged. `MATRIX` is the table of what each verb does; the docstring of
`expected` says why. A campaign with the guarded reader bypassed fails (`test_the_campaign_fails_without_the_guard`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import ROW_KEYS, file_states, run_bench

from bench import files, store

TINY = ["--methods", "mv-unet", "--max-steps", "2", "--train-size", "32", "--test-size", "8", "--no-progress", "--backend", "sequential"]
CELL = ("runs", "mnist-5k", "lfnet", "protocol", "mv-unet")
SWEEP = "tiny"  # the sweep file the folder keeps: sweeps/tiny.toml

CELL_FILES = (store.METRICS, store.MANIFEST, store.CONFIG, store.PREDICTIONS, store.TRAIN_LOG, store.CALIBRATION_BINS)
REQUIRED = (store.METRICS, store.MANIFEST, store.CONFIG)  # a finished cell without one of them is damaged
TABLES = store.COLLECTED
KINDS = [f"cell {name}" for name in CELL_FILES] + [f"table {name}" for name in TABLES]


def damage_file(path: Path, how: str) -> None:
    size = path.stat().st_size
    if how == "truncate":
        path.write_bytes(path.read_bytes()[: size // 2])
    elif how == "random":
        path.write_bytes(np.random.default_rng(size).bytes(max(size, 64)))
    elif how == "empty":
        path.write_bytes(b"")
    else:
        path.unlink()


DAMAGES = ("truncate", "random", "empty", "delete")


def verb_args(verb: str, results: Path, base: Path) -> list[str]:
    """The command of each verb on the damaged copy; `run` trains only the healthy cell (seed 1), which is done."""
    r = str(results)
    return {
        "run": ["run", *TINY, "--seeds", "1", "--results", r],
        "run --dry-run": ["run", *TINY, "--seeds", "1", "--dry-run", "--results", r],
        "report": ["report", "--results", r, "--out", str(results.parent / "report")],
        "compare": ["compare", str(base), r, "--out", str(results.parent / "compare")],
        "power": ["power", "--results", r, "--sims", "100", "--differences", "5"],
        "rescore": ["rescore", "--results", r, "--no-progress"],
        "paper --dry-run": ["paper", "--dry-run", "--only", "table1_mnist", "--results", r],  # its cells include the damaged one
    }[verb]


READERS = {  # the verbs that read each kind of file
    "cell": ("run", "run --dry-run", "report", "rescore", "paper --dry-run"),
    f"table {store.METRICS}": ("run", "report", "compare", "power", "rescore"),
    "table": ("run", "report", "rescore"),
}


def readers(kind: str) -> tuple[str, ...]:
    return READERS.get(kind) or READERS[kind.split()[0]]


def expected(kind: str, how: str, verb: str) -> str:
    """refused, repaired, rewritten, listed or ok (the module docstring).

    A cell's file is damaged when it is there but unreadable, or missing where a finished cell must have it (metrics,
    manifest, config): every verb that reads the folder refuses it, but `rescore`, which rebuilds damaged scores from the
    predictions. Deleted predictions, training log or reliability bins are no damage: only `rescore` needs the
    predictions. A damaged or deleted collected table is rebuilt from the cells by whoever reads it.
    """
    where, name = kind.split()
    if where == "table":
        return "rewritten" if verb in ("run", "rescore") else "repaired"
    if how == "delete" and name not in REQUIRED:
        return "refused" if verb == "rescore" and name == store.PREDICTIONS else "ok"
    if verb == "rescore" and name in (store.METRICS, store.CALIBRATION_BINS):
        return "repaired"
    return "listed" if verb == "paper --dry-run" else "refused"


MATRIX = [(kind, how, verb) for kind in KINDS for how in DAMAGES for verb in readers(kind)]


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """The tiny results folder, trained once; never written into (cases copy it)."""
    root = tmp_path_factory.mktemp("damaged")
    sweep = root / f"{SWEEP}.toml"
    sweep.write_text("seeds = [0, 1]\n")
    results = root / "results"
    out = run_bench("run", *TINY, "--config", str(sweep), "--results", str(results))
    assert out.returncode == 0, out.stderr
    assert "2 cells: 2 trained" in out.stdout
    before = file_states(results)
    yield results
    assert file_states(results) == before, "a case wrote into the shared folder"


@pytest.fixture
def no_figures(monkeypatch):
    """`report` and `compare` read what they always read (the collected tables, the cells' records, the reproduction's
    assessment) but draw no figure: the figures are the same whatever was repaired, and drawing them takes seconds a
    case (`test_a_full_report_rebuilds_a_damaged_table_and_writes_every_file` draws them)."""
    from bench.cli import report
    from bench.report import compare, render
    from bench.reproduce import assessment

    def read_only(paper, results, out, audit=None, extra=()):
        render.read_inputs(results)
        for name in (store.CALIBRATION_BINS, store.TRAIN_LOGS):
            store.read_collected(results, name)
        store.training_outcomes(store.records(results))
        return []

    monkeypatch.setattr(render, "render", read_only)
    monkeypatch.setattr(
        report, "write_reproduction", lambda paper, results, root, out, audit=None: assessment.assess(results, root, paper, audit=audit)
    )
    monkeypatch.setattr(compare, "save", lambda fig, stem: [])


def cell(results: Path, seed: int) -> Path:
    return results.joinpath(*CELL, f"seed-{seed}")


def target(results: Path, kind: str) -> Path:
    where, name = kind.split()
    return cell(results, 0) / name if where == "cell" else results / name


def readable(path: Path) -> bool:
    try:
        if path.suffix == ".json":
            return bool(files.read_json(path))
        if path.suffix == ".npz":
            files.check_zip(path, ("probs", "case_ids"))
            return True
        return path.is_file() and files.read_table(path) is not None
    except files.UnreadableFile:
        return False


RESCORED = (store.METRICS, store.CALIBRATION_BINS, store.MANIFEST)  # what `rescore` rewrites in a healthy cell


def check_case(kind: str, how: str, verb: str, base: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(base, results)
    path = target(results, kind)
    damage_file(path, how)
    before, other = file_states(results), file_states(cell(results, 1))
    out = run_bench(*verb_args(verb, results, base))
    outcome = expected(kind, how, verb)
    said = out.stdout + out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    if outcome == "refused":
        assert out.returncode == 2, said
        assert str(path) in out.stderr, out.stderr
        line = next(x for x in out.stderr.splitlines() if str(path) in x)
        assert line.startswith(("error: ", "failed: ")) and ("python -m bench" in line or "remove" in line), line
        if verb != "rescore":
            assert file_states(results) == before  # nothing written
    else:
        assert out.returncode == 0, said
    if outcome == "listed":
        assert f"to run {store.cell_at(path.parent)}: its {path.name} is damaged" in out.stdout, out.stdout
    if outcome == "repaired":
        assert str(path) in said or (verb == "rescore" and f"rescored {store.cell_at(path.parent)}" in said), said
        assert readable(path)
    if outcome == "rewritten":
        assert readable(path)
    after = file_states(cell(results, 1))
    if verb == "rescore":  # it re-scores the healthy cell too (from its 8-bit predictions): the same rows, its other files untouched
        assert {k: v for k, v in after.items() if k not in RESCORED} == {k: v for k, v in other.items() if k not in RESCORED}
        keys = [k for k in ROW_KEYS if k != "value"]
        pd.testing.assert_frame_equal(
            pd.read_parquet(cell(results, 1) / store.METRICS)[keys], pd.read_parquet(cell(base, 1) / store.METRICS)[keys]
        )
    else:
        assert after == other


@pytest.mark.parametrize("kind,how,verb", MATRIX, ids=[f"{k.split()[1]}-{k.split()[0]}-{h}-{v.replace(' --', '-')}" for k, h, v in MATRIX])
def test_a_damaged_file_is_refused_or_repaired_by_every_verb_that_reads_it(kind, how, verb, base, tmp_path, no_figures):
    check_case(kind, how, verb, base, tmp_path)


def test_the_campaign_fails_without_the_guard(base, tmp_path, no_figures, monkeypatch):
    """With the collected tables read straight through pandas, as before, the campaign's check fails: a traceback."""
    monkeypatch.setattr(store, "read_table", lambda path, columns=None, **kw: pd.read_parquet(path))
    with pytest.raises(AssertionError):
        check_case(f"table {store.METRICS}", "truncate", "report", base, tmp_path)


@pytest.mark.parametrize("name,how", [(store.METRICS, "truncate"), (store.MANIFEST, "random")])
def test_run_trains_a_damaged_cell_of_its_own_again_with_a_note(name, how, base, tmp_path):
    """Whichever file is damaged (the matrix finds each), the cell is trained again from scratch: two of them, for time."""
    results = tmp_path / "results"
    shutil.copytree(base, results)
    damage_file(cell(results, 0) / name, how)
    other = file_states(cell(results, 1))
    out = run_bench("run", *TINY, "--seeds", "0,1", "--results", str(results))
    assert out.returncode == 0, out.stderr
    assert (
        f"note: {cell(results, 0) / name}: " in out.stderr
        and "training the cell mnist-5k/lfnet/protocol/mv-unet/seed-0 again" in out.stderr
    )
    assert "2 cells: 1 trained, 1 already done, 0 failed" in out.stdout
    assert store.damage(cell(results, 0)) is None and file_states(cell(results, 1)) == other
    assert sorted(set(pd.read_parquet(results / store.METRICS)["seed"])) == [0, 1]


def test_a_dry_run_lists_a_damaged_cell_of_its_own_to_run(base, tmp_path):
    results = tmp_path / "results"
    shutil.copytree(base, results)
    damage_file(cell(results, 0) / store.MANIFEST, "truncate")
    before = file_states(results)
    out = run_bench("run", *TINY, "--seeds", "0,1", "--dry-run", "--results", str(results))
    assert out.returncode == 0, out.stderr
    assert "to run  mnist-5k/lfnet/protocol/mv-unet/seed-0 (its manifest.json is damaged: not valid JSON" in out.stdout
    assert "done    mnist-5k/lfnet/protocol/mv-unet/seed-1" in out.stdout and "1 of 2 cells would run" in out.stdout
    assert file_states(results) == before


def test_a_full_report_rebuilds_a_damaged_table_and_writes_every_file(base, tmp_path):
    results = tmp_path / "results"
    shutil.copytree(base, results)
    damage_file(results / store.METRICS, "truncate")
    out = run_bench("report", "--results", str(results))
    assert out.returncode == 0, out.stderr
    assert f"note: {results / store.METRICS} was damaged; rebuilt from the 2 finished cell(s)" in out.stderr
    pd.testing.assert_frame_equal(pd.read_parquet(results / store.METRICS), pd.read_parquet(base / store.METRICS))
    assert (results / "report" / "paired_tests.csv").is_file()


@pytest.mark.parametrize("how", DAMAGES)
def test_a_damaged_sweep_file_is_read_by_no_verb_and_written_anew(how, base, tmp_path):
    """The kept sweep file is a record: no verb reads it, and the next `run --config` of that name writes it again."""
    results = tmp_path / "results"
    shutil.copytree(base, results)
    kept = store.sweep_record(results, SWEEP)
    damage_file(kept, how)
    out = run_bench("run", *TINY, "--seeds", "0,1", "--dry-run", "--results", str(results))
    assert out.returncode == 0 and "0 of 2 cells would run" in out.stdout, out.stderr
    sweep = tmp_path / f"{SWEEP}.toml"
    sweep.write_text("seeds = [0, 1]\n")
    out = run_bench("run", *TINY, "--config", str(sweep), "--results", str(results))
    assert out.returncode == 0, out.stderr
    assert kept.read_text() == sweep.read_text()


def test_rescore_names_the_run_that_retrains_a_cell_it_cannot_score(base, tmp_path):
    results = tmp_path / "results"
    shutil.copytree(base, results)
    (cell(results, 0) / store.PREDICTIONS).unlink()
    out = run_bench("rescore", "--results", str(results), "--no-progress")
    assert out.returncode == 2
    assert "failed mnist-5k/lfnet/protocol/mv-unet/seed-0" in out.stdout and "rescored mnist-5k/lfnet/protocol/mv-unet/seed-1" in out.stdout
    line = next(x for x in out.stderr.splitlines() if x.startswith("failed: "))
    assert f"{cell(results, 0) / store.PREDICTIONS}: missing" in line
    assert (
        f"python -m bench run --results {results} --dataset mnist-5k --raters lfnet --noise-levels protocol --methods mv-unet --seeds 0"
        in line
    )
    assert "the tables in" in out.stderr and "are left as they were" in out.stderr
    assert json.loads((cell(results, 0) / store.MANIFEST).read_text())["status"] == "done"  # nothing of the cell was touched


@pytest.mark.parametrize("verb", ["compare", "power", "report"])
def test_a_table_is_not_rebuilt_without_a_damaged_cell(verb, base, tmp_path, no_figures):
    """A damaged table beside a cell whose manifest is gone: rebuilding would leave that cell out, so the cell is named."""
    results = tmp_path / "results"
    shutil.copytree(base, results)
    damage_file(results / store.METRICS, "truncate")
    damage_file(cell(results, 0) / store.MANIFEST, "delete")
    before = file_states(results)
    out = run_bench(*verb_args(verb, results, base))
    assert out.returncode == 2 and out.stderr.startswith(f"error: {cell(results, 0) / store.MANIFEST}: missing from a finished cell; ")
    assert file_states(results) == before
