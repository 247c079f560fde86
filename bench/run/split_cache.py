"""A dataset's splits for a cell, named by its `DataKey`: decoded once, cached on disk, fingerprinted, subset by the
budget; the label-level statistics of its training pool, measured once and kept with them.

A cache file holds only numpy arrays and a JSON header (the split rule, each part's metadata and `Splits.raters_info`),
loaded with `allow_pickle=False`, so a cache file cannot run code. Its name carries every part of the key and
`code_version` of the code that makes splits (datasets/ and labels/, sub-packages included), so an edit there
invalidates it.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
import warnings
import zipfile
from dataclasses import dataclass
from functools import cache, cached_property, lru_cache
from pathlib import Path

import numpy as np

import datasets
import labels
from bench import store
from bench.evaluate import scoring as scoring_module
from bench.evaluate.scoring import fused_references
from bench.files import atomic
from bench.store import Cell
from datasets import DataError, RaterData, RaterSetting, Splits, get_dataset
from datasets.contract import Note
from datasets.settings import PROTOCOL, check_level
from labels import fusion as fusion_module
from labels import overlap as overlap_module
from labels import staple as staple_module
from labels.fusion import threshold_vote_foreground, vote_targets
from labels.overlap import dice, rater_dice
from labels.staple import staple_mask

ARRAYS = ("images", "raters", "rater_valid", "gt", "case_ids", "groups")
PARTS = ("train", "val", "test")


def code_version(*sources: Path) -> str:
    """A hash of the Python code in `sources` (files, or folders searched recursively, so sub-packages count): 12 hex
    digits that change with any edit, addition, removal or move of one of those files."""
    digest = hashlib.sha256()
    for source in sources:
        for path in sorted(Path(source).rglob("*.py")) if Path(source).is_dir() else [Path(source)]:
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


@cache
def splits_version() -> str:
    """`code_version` of the code that makes the splits: the adapters and rater simulators (datasets/) and the label
    arithmetic they use (labels/)."""
    return code_version(Path(datasets.__file__).parent, Path(labels.__file__).parent)


@cache
def fusion_version() -> str:
    """`code_version` of the code behind the label statistics and the fused references (this module, STAPLE, the vote
    fusion, the references): the splits cache is keyed by the adapters' code only, so these are recomputed when this
    changes."""
    return code_version(Path(__file__), *(Path(m.__file__) for m in (fusion_module, staple_module, overlap_module, scoring_module)))


@dataclass(frozen=True)
class DataKey:
    """What a cell's data is: a dataset under a checked rater setting and a canonical noise level, read from a data root,
    and the cache folder its decoded splits are kept in (None: not kept).

    Made once (`of`, `of_cell`), where the setting and level are checked; everything after reads its fields. The
    cache folder is handed to the adapter as an argument (RIGA keeps its derived masks there), never through the
    environment.
    """

    dataset: str
    data_root: Path
    setting: RaterSetting
    level: str
    cache: Path | None = None

    @classmethod
    def of(cls, dataset: str, data_root: Path, raters: RaterSetting | str | None, level: str, cache: Path | None = None) -> DataKey:
        """The key of `dataset`'s data; `raters` a checked `RaterSetting` (taken as it is) or a label checked here, and
        `level` as given (checked into its canonical form: "0.450" and "0.45" are one key)."""
        setting = get_dataset(dataset, data_root).setting(raters)  # a folder:PATH dataset registers from its root
        return cls(dataset, Path(data_root), setting, check_level(dataset, level), None if cache is None else Path(cache))

    @classmethod
    def of_cell(cls, cell: Cell, data_root: Path) -> DataKey:
        """The key of a cell's data, cached in the machine's cache folder (`store.cache_dir`)."""
        return cls.of(cell.dataset, data_root, cell.raters, cell.noise, store.cache_dir())

    def __str__(self) -> str:
        return f"{self.dataset}/{self.setting.label}/{self.level}"

    @cached_property
    def path(self) -> Path | None:
        """The cache file of the decoded splits, None without a cache folder; e.g. `mnist-5k-cm-protocol-1a2b3c4d-<code>.npz`,
        `mnist-5k-morpho-noise0.45-…`: the setting by its label, the level in its canonical form, the data root by a hash
        of its absolute path, the code by `splits_version`."""
        if self.cache is None:
            return None
        level = self.level if self.level == PROTOCOL else f"noise{self.level}"
        root = hashlib.sha256(str(self.data_root.resolve()).encode()).hexdigest()[:8]
        return self.cache / f"{self.dataset}-{self.setting.label}-{level}-{root}-{splits_version()}.npz"

    @property
    def references_path(self) -> Path | None:
        """Where the test split's fused references are kept beside the splits (None without a cache folder)."""
        return None if self.path is None else self.path.with_name(f"{self.path.stem}-references-{fusion_version()}.npz")


@lru_cache(maxsize=4)
def data_fingerprint(key: DataKey) -> str:
    """The fingerprint of the key's splits (computed once per process)."""
    return fingerprint(load_splits(key))


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
def load_splits(key: DataKey) -> Splits:
    """The key's splits, from the on-disk cache when it is there; decoded by the dataset's checked loader otherwise (and
    then kept in the cache)."""
    spec, path = get_dataset(key.dataset), key.path
    splits = read_splits(path) if path is not None and path.is_file() else None
    fresh = splits is None
    if fresh:
        if path is not None and sys.stderr.isatty():  # a first decode can take minutes: say so while it runs (a refusal stays one line)
            print(f"note: decoding {key} once for this machine …", file=sys.stderr)
        started = time.time()
        splits = spec.load(key.data_root, key.setting, key.level, key.cache)
        if path is not None and time.time() - started >= NOTE_SECONDS:
            warnings.warn(
                Note(f"decoded {key} in {time.time() - started:.0f} s; every results folder reads it from {path.parent} from now on"),
                stacklevel=2,
            )
    if splits.raters_info.get("labels_version") != fusion_version():  # new splits, or statistics of an older rule
        splits.raters_info.update(labels=label_statistics(splits.train), labels_version=fusion_version())
        fresh = True
    if fresh and path is not None:
        write_splits(path, splits)
    return splits


@lru_cache(maxsize=4)
def fused_test_references(key: DataKey) -> dict[str, np.ndarray]:
    """The test split's majority and STAPLE references (bench/evaluate/scoring.py `fused_references`), the same for every
    cell of a data setting: computed once and kept beside the cached splits (`DataKey.references_path`)."""
    path = key.references_path
    if path is not None and path.is_file():
        try:
            with np.load(path, allow_pickle=False) as f:
                return {k: f[k] for k in f.files}
        except Exception:  # a torn or foreign file: computed again below
            pass
    fused = fused_references(load_splits(key).test)
    if path is not None:
        save_arrays(path, fused)
    return fused


def write_splits(path: Path, splits: Splits) -> None:
    """The splits as one .npz: each part's arrays, and a JSON header with the rule, each part's metadata and raters_info."""
    arrays, header = {}, {"rule": splits.rule, "raters_info": splits.raters_info}
    for part in PARTS:
        data: RaterData = getattr(splits, part)
        for name in ARRAYS:
            value = getattr(data, name)
            if value is not None:
                arrays[f"{part}.{name}"] = value.astype(str) if name in ("case_ids", "groups") else value
        header[part] = {
            "classes": data.classes,
            "structures": data.structures,
            "rater_names": data.rater_names,
            "rater_ids_consistent": data.rater_ids_consistent,
            "raters_simulated": data.raters_simulated,
            "spacing": data.spacing,
        }
    arrays["header"] = np.array(json.dumps(header))
    save_arrays(path, arrays)


def save_arrays(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """An .npz of `arrays`, written atomically (`bench.files.atomic`): a killed writer never leaves a torn file."""
    with atomic(path) as tmp:
        np.savez(tmp, **arrays)


def read_splits(path: Path) -> Splits | None:
    """The cached splits, or None when the file is missing or unreadable (then it is rebuilt)."""
    try:
        with np.load(path, allow_pickle=False) as f:
            header = json.loads(str(f["header"]))
            parts = {}
            for part in PARTS:
                meta = header[part]
                arrays = {name: f[f"{part}.{name}"] if f"{part}.{name}" in f else None for name in ARRAYS}
                parts[part] = RaterData(
                    **arrays,
                    classes=tuple(meta["classes"]),
                    structures={k: tuple(v) for k, v in meta["structures"].items()},
                    rater_names=tuple(meta["rater_names"]),
                    rater_ids_consistent=meta["rater_ids_consistent"],
                    raters_simulated=meta["raters_simulated"],
                    spacing=tuple(meta["spacing"]),
                )
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, DataError):  # DataError: it fails today's checks
        return None
    return Splits(**parts, rule=header["rule"], raters_info=header["raters_info"])


def label_statistics(data: RaterData) -> dict:
    """What a rater pool teaches before any training: its labels against GT, on one split (foreground = class > 0).

    Returns {} without GT, else (JSON-ready): "raters": {name: {"dsc": mean Dice vs GT per image,
    "area": mean foreground pixels}} over the images where the rater is valid; "gt_area"; "average"
    (the mean of the raters' DSCs, the paper's Average row); "majority", "mean_05", "staple": the
    mean DSC vs GT of three fused labels, the majority vote (ties to background), the rater mean
    >= 0.5 and per-image binary STAPLE >= 0.5 (`staple_mask`), each with its area ÷ GT area ("*_area_ratio");
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
        "majority": vote_targets(fg.astype(np.uint8), valid, 2)["mv"] > 0,
        "mean_05": votes >= 0.5 * n_valid,
        "staple": staple_mask(fg, valid) > 0,
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
