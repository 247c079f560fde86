"""A results folder is opened once per verb (`bench.results_folder.ResultsFolder`): each finished cell's manifest.json is read
once, and its config.json at most once, by `report`, `compare`, `paper` and the part of `run` after training."""

import shutil
from collections import Counter

import pytest
from conftest import run_bench

from bench import files, store
from bench.run import sweep

TINY = ["--max-steps", "2", "--train-size", "32", "--test-size", "12", "--no-progress", "--backend", "sequential"]
SWEEP = ["--methods", "mv-unet,lf-net", "--seeds", "0"]
RECIPE = """title = "tiny table"
render = ["table"]

[paper]
dataset = "mnist-5k"
methods = "mv-unet,lf-net"
seeds = [0]
noise_levels = ["protocol"]

[quick]
dataset = "mnist-5k"
methods = "mv-unet,lf-net"
seeds = [0]
noise_levels = ["protocol"]
stand_in = "a tiny test sweep"
"""


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    """A results folder of two finished cells, and a copy of it (for `compare`)."""
    folder = tmp_path_factory.mktemp("counts") / "a"
    ran = run_bench("run", *SWEEP, *TINY, "--results", str(folder))
    assert ran.returncode == 0, ran.stderr
    shutil.copytree(folder, folder.with_name("b"))
    return folder


@pytest.fixture
def reads(monkeypatch):
    """Every read_json of a cell's manifest.json or config.json, counted per file; from the end of training where a
    verb trains (`sweep.run_sweep` clears the count as it returns)."""
    counts: Counter = Counter()
    real = files.read_json

    def counting(path):
        if path.name in (store.MANIFEST, store.CONFIG):
            counts[str(path)] += 1
        return real(path)

    for module in (files, store):  # every read of a cell file goes through store
        monkeypatch.setattr(module, "read_json", counting)
    train = sweep.run_sweep

    def trained(*args, **kwargs):
        out = train(*args, **kwargs)
        counts.clear()
        return out

    monkeypatch.setattr(sweep, "run_sweep", trained)
    return counts


def per_cell(counts: Counter, name: str, folders) -> list[int]:
    return [counts[str(f / name)] for folder in folders for f in store.cell_folders(folder)]


def check(counts, *folders, reloaded=0):
    """One manifest a cell, at most one config; `reloaded`: cells whose weights a figure reloads (the fused-label figure's
    reference cell, through `bench.run.resolve.load_trained`, which reads its config.json again)."""
    assert per_cell(counts, store.MANIFEST, folders) == [1] * 2 * len(folders), counts
    configs = sorted(per_cell(counts, store.CONFIG, folders))
    assert configs[-1 - reloaded] <= 1 and configs[-1] <= 1 + (reloaded > 0), counts


def test_report_reads_each_cell_once(done, reads, tmp_path):
    ran = run_bench("report", "--results", str(done), "--out", str(tmp_path / "report"))
    assert ran.returncode == 0, ran.stderr
    check(reads, done, reloaded=1)


def test_compare_reads_each_cell_once(done, reads, tmp_path):
    ran = run_bench("compare", str(done), str(done.with_name("b")), "--out", str(tmp_path / "compare"))
    assert ran.returncode == 0, ran.stderr
    check(reads, done, done.with_name("b"))


def test_run_reads_each_cell_once_after_training(done, reads):
    ran = run_bench("run", *SWEEP, *TINY, "--results", str(done))
    assert ran.returncode == 0, ran.stderr
    assert "2 already done" in ran.stdout
    check(reads, done)


def test_paper_reads_each_cell_once_after_training(done, reads, tmp_path):
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "table.toml").write_text(RECIPE)
    ran = run_bench("paper", "--recipes", str(tmp_path / "recipes"), "--results", str(done), "--out", str(tmp_path / "paper"), *TINY)
    assert ran.returncode == 0, ran.stderr
    check(reads, done, reloaded=1)
