"""Parameter sweeps: `--set METHOD.PARAM=V1,V2` names one cell per value (`lf-net@beta=3`)."""

import dataclasses

import numpy as np
import pytest
from conftest import run_bench

import methods
from bench import cli, study
from bench.evaluate.scoring import reference_mask
from bench.run import plan, resolve
from datasets import get_dataset

PAPER = study.default()


def test_parse_and_format_values_round_trip():
    assert [methods.parse_value(v) for v in ("3", "0.05", "1e-3", "true", "None", "sll")] == [3, 0.05, 0.001, True, None, "sll"]
    name = methods.param_name("lf-net", {"lam": 0.1, "beta": 3, "use_ce": False})
    assert name == "lf-net@beta=3@lam=0.1@use_ce=false"  # keys sorted: one name per combination
    ref = methods.MethodRef.parse(name)
    assert (ref.name, ref.kwargs) == ("lf-net", {"beta": 3, "lam": 0.1, "use_ce": False})
    assert methods.MethodRef.parse("mv-unet").kwargs == {}
    with pytest.raises(methods.UnknownMethodError, match="expected lf-net@PARAM=VALUE"):
        methods.MethodRef.parse("lf-net@beta")


def labels(refs: list[methods.MethodRef]) -> list[str]:
    return [ref.label for ref in refs]


def test_expand_drops_the_effective_default_so_the_default_point_is_the_plain_cell():
    mnist = get_dataset("mnist-5k")  # LF-Net's λ is 0.01 on MNIST (dataset entry), 0.05 elsewhere
    names = labels(plan.expand_params(["mv-unet", "lf-net"], {"lf-net": {"lam": [0.001, 0.01], "tau": [2.5, 1.0]}}, mnist, PAPER))
    assert names == ["mv-unet", "lf-net@lam=0.001", "lf-net@lam=0.001@tau=1.0", "lf-net", "lf-net@tau=1.0"]
    riga = get_dataset("riga")
    assert labels(plan.expand_params(["lf-net"], {"lf-net": {"lam": [0.01, 0.05]}}, riga, PAPER)) == ["lf-net@lam=0.01", "lf-net"]
    assert labels(plan.expand_params(["oracle"], {"oracle": {"beta": [2]}}, mnist, PAPER)) == ["oracle@beta=2"]


def test_expand_rejects_unknown_parameters_and_wrong_types():
    mnist = get_dataset("mnist-5k")
    with pytest.raises(methods.UnknownMethodError, match="lf-net has no parameter 'gamma'"):
        plan.expand_params(["lf-net"], {"lf-net": {"gamma": [1]}}, mnist, PAPER)
    with pytest.raises(methods.UnknownMethodError, match="lf-net.lam='high': expected a float"):
        plan.expand_params(["lf-net"], {"lf-net": {"lam": ["high"]}}, mnist, PAPER)
    with pytest.raises(methods.UnknownMethodError, match="lf-net.use_ce=1: expected a bool"):
        plan.expand_params(["lf-net"], {"lf-net": {"use_ce": [1]}}, mnist, PAPER)


def test_cell_trains_the_named_parameters():
    trains = resolve.trained(methods.MethodRef.parse("oracle@beta=2"), PAPER)
    assert trains == methods.MethodRef.of(PAPER.oracle_trains, {"beta": 2})
    trains, params = trains.name, trains.kwargs
    spec = methods.DataSpec(1, 2, 5, True)
    built = methods.build_method(trains, spec, params)
    assert built.cfg.beta == 2 and dataclasses.asdict(built.cfg)["lam"] == 0.05


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--methods", "lf-net", "--set", "lf-net.beta"], "--set 'lf-net.beta': expected METHOD.PARAM=V1,V2"),
        (["--methods", "mv-unet", "--set", "lf-net.beta=3"], "method 'lf-net' is not in --methods (mv-unet)"),
        (["--methods", "lf-net", "--set", "lf-net.gamma=3"], "lf-net has no parameter 'gamma'"),
        (["--methods", "lf-net", "--set", "lf-net.beta=3", "--set", "lf-net.beta=4"], "lf-net.beta is set twice"),
        (["--methods", "lf-net", "--scheduler", "tcp://x:1"], "--scheduler needs --backend dask"),
        (["--methods", "lf-net", "--n-jobs", "0"], "--n-jobs must be ≥ 1"),
    ],
)
def test_bad_set_and_backend_flags_get_one_line(tmp_path, capsys, args, message):
    assert cli.main(["run", *args, "--dry-run", "--results", str(tmp_path / "r")]) == 2  # in-process: no interpreter start-up
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines
    assert not (tmp_path / "r").exists()


def test_dry_run_lists_one_cell_per_value(tmp_path):
    out = run_bench(
        "run", "--methods", "mv-unet,lf-net", "--set", "lf-net.beta=2,3", "--seeds", "0", "--dry-run", "--results", str(tmp_path)
    )
    assert out.returncode == 0, out.stderr
    assert "mnist-5k/lfnet/protocol/lf-net@beta=2/seed-0" in out.stdout and "lf-net@beta=3/seed-0" in out.stdout
    assert "3 of 3 cells would run" in out.stdout


def test_staple_reference_of_agreeing_raters_is_their_mask_and_gt_needs_ground_truth(tiny_data, tmp_path, capsys):
    agreeing = dataclasses.replace(tiny_data, raters=np.repeat(tiny_data.gt[:, None], 3, axis=1), rater_valid=np.ones((8, 3), bool))
    np.testing.assert_array_equal(reference_mask(agreeing, "staple"), tiny_data.gt)
    assert reference_mask(tiny_data, "staple").shape == tiny_data.gt.shape
    assert (
        cli.main(["run", "--dataset", "lidc", "--methods", "all", "--reference", "gt", "--dry-run", "--results", str(tmp_path / "r")]) == 2
    )
    assert "lidc has no ground truth; --reference majority or staple" in capsys.readouterr().err
    assert cli.main(["run", "--methods", "mv-unet", "--reference", "staple", "--seeds", "0", "--dry-run", "--results", str(tmp_path)]) == 0
    assert "mnist-5k/lfnet/protocol/mv-unet/seed-0" in capsys.readouterr().out  # the reference is not part of a cell


def test_all_methods_on_a_dataset_without_ground_truth_leaves_out_the_oracle(tmp_path, capsys):
    from fixtures.make_lidc import make_lidc_crops

    make_lidc_crops(tmp_path / "data")  # the dry run loads the data it lists, as the run does
    argv = [
        "run",
        "--dataset",
        "lidc",
        "--seeds",
        "0",
        "--dry-run",
        "--data-root",
        str(tmp_path / "data"),
        "--results",
        str(tmp_path / "r"),
    ]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "lidc/real/protocol/lf-net/seed-0" in out and "oracle" not in out and "9 of 9 cells would run" in out
