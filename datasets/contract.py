"""The data contract every adapter returns (docs/datasets.md#the-data-contract): `RaterData` and its `Splits`."""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np


class DataError(Exception):
    """Bad or missing input data; the message names the file or value and what to do.

    The message is kept to one line (the CLI prints it as one `error:` line), even where it
    quotes a library's multi-line reason (pandas, PIL).
    """

    def __init__(self, message: object = "") -> None:
        super().__init__(re.sub(r"\s*\n\s*", " ", str(message)).strip())


def folder_problem(folder: Path, missing: str = "not found") -> str:
    """Why `folder` cannot be read as a dataset folder: it "is a file, not a folder", or `missing`."""
    return "is a file, not a folder" if folder.exists() else missing


@dataclass(frozen=True)
class DatasetCard:
    """What a user needs to know about a dataset before trusting a number computed on it."""

    name: str
    title: str
    source: str
    licence: str
    citation: str
    counts: str
    download: str = ""  # where to get the files; empty for embedded data
    layout: str = ""  # where to put them under the data root
    raters: str = ""  # the rater style(s) it offers, default first, and what each is (datasets/settings.py STYLE_NOTES)


class Note(UserWarning):
    """A fact a run reports once, after its checks passed, and not a fault: a published pool's sparseness, a first decode's
    time, a flag that asked for more than a split holds. The command line prints it as `note:`."""


@dataclass(frozen=True)
class RaterSetting:
    """A checked rater setting: the raters' style and the network input, under its canonical label.

    `input` is the network input the images are (None where the dataset offers one only); `label` names the setting
    in results paths, cache files and tables: the style alone where the input is the style's own ("lfnet"), else
    "style+input" ("cm+clean"). Only `datasets.settings.check_setting` makes one (through `DatasetSpec.setting`), so a
    setting is defaulted and validated once; the adapters read its fields.
    """

    style: str
    input: str | None
    label: str

    def __str__(self) -> str:
        return self.label


@dataclass(frozen=True)
class RaterData:
    """Images with several raters' label maps; ground truth only for evaluation.

    Shapes: images float32 (N, C, H, W); raters uint8 class indices (N, R, H, W); rater_valid
    bool (N, R), False only where a rater is missing (an all-zero mask is a real vote); gt uint8
    (N, H, W) or None; case_ids and groups str (N,).
    """

    images: np.ndarray
    raters: np.ndarray
    rater_valid: np.ndarray
    gt: np.ndarray | None
    case_ids: np.ndarray
    groups: np.ndarray
    classes: tuple[str, ...] = ("background", "foreground")
    structures: dict[str, tuple[int, ...]] = field(default_factory=lambda: {"foreground": (1,)})
    rater_names: tuple[str, ...] = ()
    rater_ids_consistent: bool = True
    raters_simulated: bool = False
    spacing: tuple[float, float] = (1.0, 1.0)

    def __post_init__(self) -> None:
        n, r = self.raters.shape[:2]
        checks = [
            (self.images.ndim == 4 and self.images.dtype == np.float32, "images must be float32 (N, C, H, W)"),
            (self.raters.ndim == 4 and self.raters.dtype == np.uint8, "raters must be uint8 (N, R, H, W)"),
            (self.images.shape[0] == n and self.images.shape[2:] == self.raters.shape[2:], "images and raters disagree in N, H or W"),
            (self.rater_valid.shape == (n, r) and self.rater_valid.dtype == bool, "rater_valid must be bool (N, R)"),
            (self.gt is None or (self.gt.shape == (n, *self.raters.shape[2:]) and self.gt.dtype == np.uint8), "gt must be uint8 (N, H, W)"),
            (len(self.case_ids) == n and len(self.groups) == n, "case_ids and groups need one entry per image"),
            (len(self.rater_names) in (0, r), "rater_names needs one name per rater"),
            (int(self.raters.max(initial=0)) < len(self.classes), "rater labels exceed the number of classes"),
        ]
        for ok, message in checks:
            if not ok:
                raise DataError(f"invalid RaterData: {message}")

    @property
    def n(self) -> int:
        return self.images.shape[0]

    @property
    def n_raters(self) -> int:
        return self.raters.shape[1]

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def in_channels(self) -> int:
        return self.images.shape[1]

    def subset(self, index: np.ndarray) -> RaterData:
        """The images at `index` (any int array), every per-image field sliced alike."""
        return replace(
            self,
            images=self.images[index],
            raters=self.raters[index],
            rater_valid=self.rater_valid[index],
            gt=None if self.gt is None else self.gt[index],
            case_ids=self.case_ids[index],
            groups=self.groups[index],
        )


@dataclass(frozen=True)
class Splits:
    """Train / validation / test parts of one dataset and the rule that made them."""

    train: RaterData
    val: RaterData
    test: RaterData
    rule: str
    # How the raters were made (every loader fills it; datasets/raters/pool.py `pool_info` / `fixed_pool_info`):
    # {"style", "level", "target" (float or None), "strength" (float or None for real raters),
    #  "realised_average" (the training split's Average DSC vs GT, or None without GT),
    #  "usable" (`check_usable` of the training split, or None for real raters), "warning" (a sparse
    #  protocol's one line, simulated pools), "input" (the network input, datasets that offer a choice)};
    #  bench/run/split_cache.py adds "labels" (its label-level statistics) when it first loads the splits.
    raters_info: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        # An empty validation part is allowed (nothing selects on it by default); an empty train or
        # test part would train on nothing or score nothing, after minutes of work.
        for part in ("train", "test"):
            if getattr(self, part).n == 0:
                raise DataError(f"the {part} split is empty ({self.rule}); add data so that every part gets images")


def split_by_group(groups: np.ndarray, fractions: tuple[float, ...], seed: int) -> list[np.ndarray]:
    """Deterministic split of image indices by group (patient, subject, slide).

    Groups are shuffled with `seed` and cut by cumulative image fraction, so no group spans two
    parts. Returns one sorted index array per fraction (the last takes the remainder).
    """
    unique = np.unique(groups)
    order = np.random.default_rng(seed).permutation(len(unique))
    position = {g: i for i, g in enumerate(unique[order])}
    rank = np.array([position[g] for g in groups])
    by_rank = np.argsort(rank, kind="stable")
    bounds = np.round(np.cumsum(fractions[:-1]) * len(groups)).astype(int)
    out, start = [], 0
    for cut in [*bounds, len(groups)]:
        # Move the cut forward to a group boundary so no group spans two parts.
        while 0 < cut < len(groups) and rank[by_rank[cut]] == rank[by_rank[cut - 1]]:
            cut += 1
        out.append(np.sort(by_rank[start:cut]))
        start = max(start, cut)
    return out


def check_mask_values(mask: np.ndarray, path) -> None:
    """Refuse a rater mask that is not in an accepted binary encoding: 0/1, 0/255 or 0/128/255 (docs/datasets.md#rules-every-adapter-follows).

    A probability map, a multi-class label map or a grey image put where a mask belongs would
    otherwise be thresholded into a plausible-looking but wrong mask.
    """
    if ((mask == 0) | (mask == 1)).all() or ((mask == 0) | (mask == 128) | (mask == 255)).all():
        return
    values = np.unique(mask)
    shown = ", ".join(f"{v:g}" for v in values[:6]) + (", …" if len(values) > 6 else "")
    raise DataError(f"{path}: mask values {{{shown}}}, expected 0/1, 0/255 or 0/128/255; is this a rater mask?")


def read_tif(path: Path) -> np.ndarray:
    """One TIFF as an array, with tifffile (or Pillow where tifffile is not installed): the readers of cm-folder and folder:PATH."""
    try:
        import tifffile
    except ImportError:  # pragma: no cover - tifffile comes with scikit-image
        tifffile = None
    try:
        if tifffile is not None:
            return np.asarray(tifffile.imread(path))
        from PIL import Image

        with Image.open(path) as image:
            return np.asarray(image)
    except (OSError, ValueError, EOFError, IndexError) as e:
        reason = (str(e).splitlines() or [type(e).__name__])[0] or type(e).__name__
        raise DataError(f"{path}: unreadable or truncated TIFF ({reason}); copy it again") from None


def check_not_constant(array: np.ndarray, path, what: str = "image") -> None:
    """Refuse an input whose every value is the same: a zero-filled or blanked file, not an image."""
    if array.size and array.min() == array.max():
        raise DataError(f"{path}: every value of the {what} is {float(array.flat[0]):g}; the file holds no image, copy it again")


def centre_fit(array: np.ndarray, size: tuple[int, ...], axes: tuple[int, ...] = (-2, -1)) -> np.ndarray:
    """Centre-crop and/or zero-pad `axes` of `array` to `size` (the object stays centred, spacing is kept)."""
    out_shape, src, dst = list(array.shape), [slice(None)] * array.ndim, [slice(None)] * array.ndim
    for axis, n_out in zip(axes, size):
        n_in = array.shape[axis]
        start_in, start_out, n = max(0, (n_in - n_out) // 2), max(0, (n_out - n_in) // 2), min(n_in, n_out)
        out_shape[axis], src[axis], dst[axis] = n_out, slice(start_in, start_in + n), slice(start_out, start_out + n)
    out = np.zeros(out_shape, dtype=array.dtype)
    out[tuple(dst)] = array[tuple(src)]
    return out


def oracle_view(data: RaterData) -> RaterData:
    """The ground truth as the only rater: what the Oracle row trains on (docs/methods.md#oracle)."""
    if data.gt is None:
        raise DataError("the oracle needs ground truth, and this dataset has none")
    return replace(
        data,
        raters=data.gt[:, None].copy(),
        rater_valid=np.ones((data.n, 1), dtype=bool),
        rater_names=("gt",),
        raters_simulated=False,
    )


@contextmanager
def atomic(path: Path):
    """Yield a temporary path beside `path`; on success it replaces `path` in one step, on failure it is removed: the project's
    one atomic writer (results, caches), here so that the adapters' caches below bench/ use it too."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:  # e.g. a read-only file system: keep the error that got us here
            pass
