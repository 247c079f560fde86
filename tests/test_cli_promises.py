"""The command line does exactly what it says: flags over sweep files, `--set` values checked and resolved, `power` and
`compare` refusing nonsense, output folders checked before anything is written, an unreachable dask scheduler failing
fast, and `bench check` (a dataset checked without training)."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pandas as pd
import pytest
from conftest import run_bench

import methods
from bench import store, study
from bench.evaluate.long_table import COLUMNS
from bench.run import plan
from datasets import DATASETS, DatasetCard, DatasetSpec, RaterData, Splits, get_dataset

PAPER = study.default()

DRY = ["--dry-run", "--methods", "mv-unet", "--train-size", "32", "--test-size", "8"]


def listed(out) -> list[str]:
    return [line.split()[-1] for line in out.stdout.splitlines() if line.startswith(("to run", "done"))]


# --------------------------------------------------------------------------- flags and sweep files


def test_a_flag_typed_at_its_default_wins_over_the_sweep_file(tmp_path):
    """Before: `--budget quick --seeds 0,1,2` lost to the file's plateau and [0], being the flags' defaults."""
    sweep = tmp_path / "s.toml"
    sweep.write_text('budget = "plateau"\nseeds = [0]\n')
    results = tmp_path / "results"
    out = run_bench("run", *DRY, "--config", str(sweep), "--budget", "quick", "--seeds", "0,1,2", "--results", str(results))
    assert out.returncode == 0, out.stderr
    assert listed(out) == [f"mnist-5k/lfnet/protocol/mv-unet/seed-{s}" for s in (0, 1, 2)]
    untyped = run_bench("run", *DRY, "--config", str(sweep), "--results", str(results))  # the file fills what was not typed
    assert listed(untyped) == ["mnist-5k/lfnet/protocol/mv-unet/seed-0"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no keys; a sweep file sets the run flags' names"),
        ("# only a comment\n", "no keys; a sweep file sets the run flags' names"),
        ("sedes = [0]", "unknown key 'sedes' (did you mean seeds?); keys are the run flags' names"),
        ("max_steps = [2]", "max_steps = [2]: max_steps takes one value"),
        ('budget = ["quick"]', "budget takes one value"),
        ("seeds = [[0]]", "seeds takes a list of values"),
    ],
)
def test_a_sweep_file_that_says_nothing_or_misspells_is_refused(tmp_path, text, message):
    sweep = tmp_path / "bad.toml"
    sweep.write_text(text)
    out = run_bench("run", "--config", str(sweep), "--dry-run", "--results", str(tmp_path / "r"))
    assert out.returncode == 2 and out.stderr.startswith(f"error: --config {sweep}: ") and message in out.stderr, out.stderr
    assert len(out.stderr.splitlines()) == 1 and not (tmp_path / "r").exists()


def test_a_comma_list_key_takes_a_list_or_the_flags_text(tmp_path):
    for text in ('seeds = [0, 1]\nmethods = ["mv-unet"]\n', 'seeds = "0,1"\nmethods = "mv-unet"\n'):
        (tmp_path / "s.toml").write_text(text)
        out = run_bench("run", *DRY, "--config", str(tmp_path / "s.toml"), "--results", str(tmp_path / "r"))
        assert listed(out) == ["mnist-5k/lfnet/protocol/mv-unet/seed-0", "mnist-5k/lfnet/protocol/mv-unet/seed-1"], out.stderr


# --------------------------------------------------------------------------- --set: resolved defaults and declared domains


def test_a_set_value_equal_to_the_resolved_default_is_the_plain_methods_cell(tmp_path):
    """LF-Net's β = None resolves to R − 1 = 4 on mnist-5k's five raters: `beta=4` is plain lf-net, not a second cell."""
    out = run_bench("run", "--dry-run", "--methods", "lf-net", "--seeds", "0", "--set", "lf-net.beta=4,3", "--results", str(tmp_path / "r"))
    assert out.returncode == 0, out.stderr
    assert listed(out) == ["mnist-5k/lfnet/protocol/lf-net/seed-0", "mnist-5k/lfnet/protocol/lf-net@beta=3/seed-0"]
    data = methods.DataSpec(1, 2, 5)
    assert plan.resolved_config("lf-net", get_dataset("mnist-5k"), data, PAPER)["beta"] == 4
    refs = plan.expand_params(["lf-net"], {"lf-net": {"beta": [4, 3]}}, get_dataset("mnist-5k"), PAPER, data)
    assert [r.label for r in refs] == ["lf-net", "lf-net@beta=3"]


@pytest.fixture
def ranged_method(monkeypatch):
    """A registered method (for this test only) whose `votes` declares its domain 1..R, as a parameter counting raters does."""
    from methods import registry

    monkeypatch.setattr(registry, "_ENTRIES", dict(registry._ENTRIES))
    base = methods.get_entry("mv-unet").cls

    @dataclasses.dataclass(frozen=True)
    class Config(base.Config):
        votes: int | None = dataclasses.field(default=None, metadata={"domain": (1, "raters")})
        scale: float = dataclasses.field(default=1.0, metadata={"domain": (0.0, 10.0)})

    class Ranged(base):
        pass

    Ranged.Config = Config
    methods.register_method("ranged-net", "a test method with declared domains")(Ranged)
    return "ranged-net"


@pytest.mark.parametrize(("value", "message"), [(-2, "outside its range 1..5 (it counts raters: 5 here)"), (99, "1..5"), (0, "1..5")])
def test_a_set_value_outside_the_declared_domain_is_refused(ranged_method, value, message):
    data = methods.DataSpec(1, 2, 5)
    with pytest.raises(methods.UnknownMethodError, match=f"ranged-net.votes={value}: .*{message.replace('(', '.').replace(')', '.')}"):
        plan.expand_params([ranged_method], {ranged_method: {"votes": [value]}}, get_dataset("mnist-5k"), PAPER, data)
    with pytest.raises(methods.UnknownMethodError, match="outside its range 0.0..10.0"):
        plan.expand_params([ranged_method], {ranged_method: {"scale": [11.0]}}, get_dataset("mnist-5k"), PAPER, data)
    names = plan.expand_params([ranged_method], {ranged_method: {"votes": [1, 5], "scale": [0.5]}}, get_dataset("mnist-5k"), PAPER, data)
    assert [n.label for n in names] == ["ranged-net@scale=0.5@votes=1", "ranged-net@scale=0.5@votes=5"]


def test_a_set_value_outside_the_domain_is_one_line_before_any_cell(ranged_method, tmp_path):
    out = run_bench("run", "--methods", ranged_method, "--set", f"{ranged_method}.votes=-2,99", "--results", str(tmp_path / "r"))
    assert out.returncode == 2 and out.stderr.startswith("error: ranged-net.votes=-2: outside its range 1..5"), out.stderr
    assert not (tmp_path / "r").exists()


# --------------------------------------------------------------------------- power and compare


def long_table(seeds: int, spread: float = 0.01) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    cases = rng.uniform(0.5, 0.9, 30)
    rows = [
        ("toy", "cm", "protocol", m, s, "gt", f"c{c}", "foreground", "dsc", v, 0, 0, 0, 0, 0, np.nan, np.nan, 1)
        for m in ("mv-unet", "lf-net")
        for s in range(seeds)
        for c, v in enumerate(np.clip(cases + rng.normal(0, spread) + rng.normal(0, 0.02, 30), 0, 1))
    ]
    return pd.DataFrame(rows, columns=COLUMNS)


def test_power_takes_only_a_metric_the_table_holds(tmp_path):
    long_table(3).to_parquet(tmp_path / store.METRICS)
    out = run_bench("power", "--results", str(tmp_path), "--metric", "foo", "--sims", "100")
    assert out.returncode == 2 and "--metric 'foo': no such metric" in out.stderr and out.stdout == ""
    out = run_bench("power", "--results", str(tmp_path), "--metric", "bahd", "--sims", "100")
    assert out.returncode == 2 and "--metric bahd: no 'bahd' rows in" in out.stderr and "metrics there: dsc" in out.stderr
    out = run_bench("power", "--metric", "bahd", "--sims", "100")
    assert out.returncode == 2 and "the stated defaults are DSC's" in out.stderr


def test_power_that_cannot_be_reached_says_so(tmp_path):
    """Before: a 2-seed folder with a large seed spread printed "smallest difference found with 80 % power: 216" DSC points."""
    long_table(2, spread=0.3).to_parquet(tmp_path / store.METRICS)
    out = run_bench("power", "--results", str(tmp_path), "--reference", "gt", "--sims", "200", "--differences", "5")
    assert out.returncode == 0, out.stderr
    assert "smallest difference found with 80% power: not reachable with 2 seeds" in out.stdout


def test_compare_refuses_a_folder_with_itself(tmp_path):
    long_table(3).to_parquet(tmp_path / store.METRICS)
    for b in (str(tmp_path), str(tmp_path / "." / "")):
        out = run_bench("compare", str(tmp_path), b)
        assert out.returncode == 2 and "A and B are the same folder" in out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [store.METRICS]


# --------------------------------------------------------------------------- checks before writing


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """One tiny finished cell."""
    results = tmp_path_factory.mktemp("promises") / "results"
    out = run_bench(
        "run",
        "--methods",
        "mv-unet",
        "--seeds",
        "0",
        "--max-steps",
        "2",
        "--train-size",
        "32",
        "--test-size",
        "8",
        "--backend",
        "sequential",
        "--no-progress",
        "--results",
        str(results),
    )
    assert out.returncode == 0, out.stderr
    return results


def test_report_checks_every_output_folder_before_writing_anything(smoke, tmp_path):
    """Before: on a results folder it could not write, `report --out W` wrote 5 files into W, then failed with exit 1."""
    import shutil

    results = shutil.copytree(smoke, tmp_path / "results")
    blocker = tmp_path / "file.txt"
    blocker.write_text("")
    out = run_bench("report", "--results", str(results), "--out", str(blocker / "report"))
    assert out.returncode == 2 and f"cannot write the report folder {blocker / 'report'}" in out.stderr and "--out" in out.stderr
    (results / "paper").write_text("")  # where the reproduction report goes, unwritable
    before = sorted(p for p in results.rglob("*"))
    out = run_bench("report", "--results", str(results), "--out", str(tmp_path / "out"))
    assert out.returncode == 2 and f"cannot write the reproduction report's folder {results / 'paper'}" in out.stderr, out.stderr
    assert not (tmp_path / "out").exists() and sorted(p for p in results.rglob("*")) == before


def test_an_unreachable_scheduler_fails_in_one_line_within_seconds_writing_nothing(tmp_path):
    """Before: a wrong address waited 30 s, said "worker lost … resume" and left empty tables."""
    started = time.monotonic()
    out = run_bench(
        "run",
        "--methods",
        "mv-unet",
        "--seeds",
        "0",
        "--backend",
        "dask",
        "--scheduler",
        "tcp://127.0.0.1:1",
        "--results",
        str(tmp_path / "r"),
    )
    assert time.monotonic() - started < 10
    assert out.returncode == 2 and out.stderr.startswith("error: cannot reach the dask scheduler at tcp://127.0.0.1:1 within 3 s")
    assert len(out.stderr.splitlines()) == 1 and not (tmp_path / "r").exists()


# --------------------------------------------------------------------------- bench check


def test_check_decodes_the_embedded_dataset_and_finds_no_problem():
    out = run_bench("check", "mnist-5k")
    assert out.returncode == 0, out.stderr
    assert "train   3200 images, 1 channel(s) of 28×28, 5 raters (valid: good 100%" in out.stdout
    assert "test    1000 images" in out.stdout and "0 problem(s) found in mnist-5k" in out.stdout


def broken_splits(root, setting, level, cache) -> Splits:
    """Two parts sharing a patient, a test image without a valid rater and a case id twice."""
    rng = np.random.default_rng(0)

    def part(ids, groups, valid):
        n = len(ids)
        return RaterData(
            rng.random((n, 1, 8, 8), dtype=np.float32),
            np.zeros((n, 2, 8, 8), np.uint8),
            np.array(valid),
            np.zeros((n, 8, 8), np.uint8),
            np.array(ids),
            np.array(groups),
            rater_names=("a", "b"),
        )

    train = part(["a", "b", "b"], ["p1", "p2", "p2"], [[True, True]] * 3)
    test = part(["c", "d"], ["p2", "p3"], [[True, False], [False, False]])
    return Splits(train, train.subset(np.array([], dtype=int)), test, "by hand")


def test_check_lists_every_problem_and_exits_2(monkeypatch):
    card = DatasetCard("broken", "a broken dataset", "here", "none", "none", "5 images")
    monkeypatch.setitem(DATASETS, "broken", DatasetSpec(card, broken_splits, 2, 2, None, rater_styles=("real",), fixed_raters="real"))
    out = run_bench("check", "broken")
    assert out.returncode == 2
    problems = [line for line in out.stderr.splitlines() if line.startswith("problem: ")]
    assert any("test: 1 image(s) have no valid rater, e.g. d" in p for p in problems)
    assert any("train: case id b appears 2 times" in p for p in problems)
    assert any("train and test share 1 group(s) (patients), e.g. p2" in p for p in problems)
    assert "train      3 images, 1 channel(s) of 8×8, 2 raters" in out.stdout and "3 problem(s) found in broken" in out.stdout


def test_check_names_a_missing_dataset_as_its_problem(tmp_path):
    out = run_bench("check", "lidc", "--data-root", str(tmp_path))
    assert out.returncode == 2 and f"problem: lidc: {tmp_path}/lidc/ does not exist" in out.stderr
