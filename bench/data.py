"""A dataset's splits for a cell: decoded once, cached on disk, fingerprinted, subset by the budget."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

import numpy as np

from datasets import RaterData, Splits, get_dataset
from datasets import cache as data_cache


@lru_cache(maxsize=4)
def data_fingerprint(dataset: str, data_root: Path, raters: str, noise: str, cache_folder: Path | None = None) -> str:
    """The fingerprint of the dataset's splits under a rater style and noise level (computed once per process)."""
    return fingerprint(load_splits(dataset, data_root, raters, noise, cache_folder))


def fingerprint(splits: Splits) -> str:
    """BLAKE2b of every split's arrays and case ids: two runs with the same fingerprint saw the same data."""
    digest = hashlib.blake2b(digest_size=16)
    for name in ("train", "val", "test"):
        part = getattr(splits, name)
        if part is None:
            continue
        for array in (part.images, part.raters, part.rater_valid, part.gt, part.case_ids.astype(str)):
            if array is not None:
                digest.update(f"{name}{array.dtype}{array.shape}".encode())
                digest.update(np.ascontiguousarray(array).data)
    return digest.hexdigest()


@lru_cache(maxsize=4)
def load_splits(dataset: str, data_root: Path, raters: str, noise: str, cache_folder: Path | None = None) -> Splits:
    """The dataset's splits under a rater style and noise level, from the on-disk cache when it is there."""
    path = data_cache.cache_path(cache_folder, dataset, raters, noise, data_root) if cache_folder is not None else None
    splits = data_cache.load(path) if path is not None and path.is_file() else None
    if splits is None:
        splits = get_dataset(dataset).load(data_root, raters, noise)
        if path is not None:
            data_cache.save(path, splits)
    return splits


def training_subset(train: RaterData, size: int | None) -> RaterData:
    """A fixed random subset (seed 0, independent of the training seed) when the budget caps the training (or validation) set."""
    if size is None or size >= train.n:
        return train
    return train.subset(np.sort(np.random.default_rng(0).permutation(train.n)[:size]))
