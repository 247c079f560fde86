"""On-disk cache of decoded splits, so a second run starts in a second instead of re-decoding and re-simulating.

A cache file is keyed by dataset, rater style, noise level, data root and a hash of the
`datasets/` sources (a change to an adapter or to the rater simulation invalidates it). It holds
only numpy arrays and a JSON header (the split rule, each part's metadata and
`Splits.raters_info`), loaded with `allow_pickle=False`, so a cache file cannot run code.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from functools import cache
from pathlib import Path

import numpy as np

import labels
from datasets.contract import DataError, RaterData, RaterSetting, Splits
from datasets.noise import PROTOCOL, parse_level

ARRAYS = ("images", "raters", "rater_valid", "gt", "case_ids", "groups")
PARTS = ("train", "val", "test")


@cache
def code_version() -> str:
    """A hash of the code that makes the splits: the adapters (datasets/) and the label arithmetic they use (labels/)."""
    digest = hashlib.sha256()
    for folder in (Path(__file__).parent, Path(labels.__file__).parent):
        for path in sorted(folder.glob("*.py")):
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def cache_path(cache_dir: Path, dataset: str, raters: RaterSetting, noise: str, data_root: Path) -> Path:
    """The cache file of a dataset under a checked rater setting (`DatasetSpec.setting`) and a noise level.

    The setting is named by its label and the level in its canonical form (`parse_level`: "0.450" and "0.45" share a
    file); e.g. `mnist-5k-cm-protocol-1a2b3c4d-<code>.npz`, `mnist-5k-morpho-noise0.45-…`.
    """
    level = parse_level(noise)
    label = level if level == PROTOCOL else f"noise{level}"
    root = hashlib.sha256(str(Path(data_root).resolve()).encode()).hexdigest()[:8]
    return Path(cache_dir) / f"{dataset}-{raters.label}-{label}-{root}-{code_version()}.npz"


def save(path: Path, splits: Splits) -> None:
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
    """An .npz of `arrays` written through a temporary file and one rename: a killed writer never leaves a torn file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.npz")
    try:
        np.savez(tmp, **arrays)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def load(path: Path) -> Splits | None:
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
