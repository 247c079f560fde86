"""A dataset's splits for a cell: decoded once, cached on disk, fingerprinted, subset by the budget; the label-level
statistics of its training pool, measured once and kept with them."""

from __future__ import annotations

import hashlib
import sys
import time
import warnings
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from bench.evaluate import scoring as scoring_module
from bench.evaluate.scoring import fused_references
from datasets import RaterData, RaterSetting, Splits, get_dataset
from datasets import cache as data_cache
from datasets.contract import Note
from labels import fusion as fusion_module
from labels import overlap as overlap_module
from labels import staple as staple_module
from labels.fusion import majority_vote, threshold_vote_foreground
from labels.overlap import dice, rater_dice
from labels.staple import staple


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


NOTE_SECONDS = 5  # a decode shorter than this is not worth a line


@lru_cache(maxsize=4)
def load_splits(dataset: str, data_root: Path, raters: RaterSetting | str | None, noise: str, cache_folder: Path | None = None) -> Splits:
    """The dataset's splits under a rater setting (a label or a checked one) and noise level, from the on-disk cache when
    it is there."""
    spec = get_dataset(dataset)
    raters = spec.setting(raters)
    path = data_cache.cache_path(cache_folder, dataset, raters, noise, data_root) if cache_folder is not None else None
    splits = data_cache.load(path) if path is not None and path.is_file() else None
    fresh = splits is None
    if fresh:
        if path is not None and sys.stderr.isatty():  # a first decode can take minutes: say so while it runs (a refusal stays one line)
            print(f"note: decoding {dataset}/{raters.label}/{noise} once for this machine …", file=sys.stderr)
        started = time.time()
        splits = spec.load(data_root, raters, noise)
        if path is not None and time.time() - started >= NOTE_SECONDS:
            warnings.warn(Note(f"decoded {dataset}/{raters.label}/{noise} in {time.time() - started:.0f} s; every results folder reads "
                               f"it from {path.parent} from now on"), stacklevel=2)  # fmt: skip
    if splits.raters_info.get("labels_version") != fusion_version():  # new splits, or statistics of an older rule
        splits.raters_info.update(labels=label_statistics(splits.train), labels_version=fusion_version())
        fresh = True
    if fresh and path is not None:
        data_cache.save(path, splits)
    return splits


@lru_cache(maxsize=1)
def fusion_version() -> str:
    """A hash of the code behind the label statistics and the fused references (this module, STAPLE, the vote fusion, the
    references): the splits cache is keyed by the adapters' code only, so these are recomputed when this changes."""
    digest = hashlib.sha256()
    for path in (
        Path(__file__),
        Path(fusion_module.__file__),
        Path(staple_module.__file__),
        Path(overlap_module.__file__),
        Path(scoring_module.__file__),
    ):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


@lru_cache(maxsize=4)
def fused_test_references(
    dataset: str, data_root: Path, raters: str, noise: str, cache_folder: Path | None = None
) -> dict[str, np.ndarray]:
    """The test split's majority and STAPLE references (bench/evaluate/scoring.py `fused_references`), the same for every
    cell of a data setting: computed once and kept beside the cached splits (`<splits>-references.npz`)."""
    setting = get_dataset(dataset).setting(raters)
    splits_path = data_cache.cache_path(cache_folder, dataset, setting, noise, data_root) if cache_folder is not None else None
    path = splits_path.with_name(f"{splits_path.stem}-references-{fusion_version()}.npz") if splits_path is not None else None
    if path is not None and path.is_file():
        try:
            with np.load(path, allow_pickle=False) as f:
                return {k: f[k] for k in f.files}
        except Exception:  # a torn or foreign file: computed again below
            pass
    fused = fused_references(load_splits(dataset, data_root, raters, noise, cache_folder).test)
    if path is not None:
        data_cache.save_arrays(path, fused)
    return fused


def label_statistics(data: RaterData) -> dict:
    """What a rater pool teaches before any training: its labels against GT, on one split (foreground = class > 0).

    Returns {} without GT, else (JSON-ready): "raters": {name: {"dsc": mean Dice vs GT per image,
    "area": mean foreground pixels}} over the images where the rater is valid; "gt_area"; "average"
    (the mean of the raters' DSCs, the paper's Average row); "majority", "mean_05", "staple": the
    mean DSC vs GT of three fused labels, the majority vote (ties to background), the rater mean
    >= 0.5 and per-image binary STAPLE >= 0.5, each with its area ÷ GT area ("*_area_ratio");
    "tv_gt_share": the share of GT pixels inside the threshold-vote foreground (β = R − 1);
    "tv_empty_share": the share of images whose threshold-vote foreground is empty.
    """
    if data.gt is None:
        return {}
    gt = data.gt > 0
    fg, valid = data.raters > 0, data.rater_valid
    gt_area = float(gt.sum((1, 2)).mean())
    per_rater = rater_dice(fg, gt, valid)
    raters = {
        name: {"dsc": float(per_rater[r]), "area": float(fg[valid[:, r], r].sum((1, 2)).mean())}
        for r, name in enumerate(data.rater_names)
        if valid[:, r].any()
    }
    votes = (fg & valid[:, :, None, None]).sum(1)
    n_valid = valid.sum(1)[:, None, None]
    fused = {
        "majority": majority_vote(torch.from_numpy(fg.astype(np.int64)), torch.from_numpy(valid), 2).numpy() > 0,
        "mean_05": votes >= 0.5 * n_valid,
        "staple": staple(fg, valid) >= 0.5,
    }
    tv = threshold_vote_foreground(fg.astype(np.uint8), valid)
    out = {"raters": raters, "gt_area": gt_area, "average": float(np.mean([v["dsc"] for v in raters.values()]))}
    for name, mask in fused.items():
        out[name] = float(dice(mask, gt).mean())
        out[f"{name}_area_ratio"] = float(mask.sum() / max(gt.sum(), 1))
    out["tv_gt_share"] = float((tv & gt).sum() / max(gt.sum(), 1))
    out["tv_empty_share"] = float((~tv.any((1, 2))).mean())
    return out


def training_subset(train: RaterData, size: int | None) -> RaterData:
    """A fixed random subset (seed 0, independent of the training seed) when the budget caps the training (or validation) set."""
    if size is None or size >= train.n:
        return train
    return train.subset(np.sort(np.random.default_rng(0).permutation(train.n)[:size]))
