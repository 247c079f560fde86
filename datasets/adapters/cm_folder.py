"""`cm-folder`: data in CM-UNet's folder layout, the form CM-UNet users already have.

Layout (docs/datasets.md#cm-folder; CM-UNet's ``MNIST_examples/`` and what its
``preprocessing/Prepare_MNIST.py`` writes), under ``<data-root>/cm-folder/`` at any depth::

    {train,validate,test}/{GT,Gaussian,Over,Under,Wrong}/<id>_<Kind>.tif

``Gaussian`` (or ``Image``, CM's BraTS name) holds the network input, ``GT`` the ground truth, and
``Over``, ``Under``, ``Wrong`` (and, where present, ``Good`` and ``Blank``) one rater each. Files
are found by regex over a recursive walk; the split is the nearest folder named ``train``,
``validate`` (or ``val``, ``validation``) or ``test``; the kind comes from the file name. Files are
matched by id across folders, not by sorted position as CM's loader does, so a missing file is
an error naming it instead of a silent shift. TIFFs are read with tifffile (a dependency of
scikit-image), or Pillow where tifffile is missing.

Decisions:

* **Ground truth**: the GT files hold raw intensities (MNIST: float 0–255), so GT = value ≥ half
  the range: ≥ 127.5 for 0–255 data, ≥ 0.5 where the file's maximum is ≤ 1. This is the paper's
  "pixel ≥ 0.5" rule, not CM's loader (> 10), which gives fatter digits. Rater masks use the same
  rule, so {0, 1}, {0, 255} and {0, 128, 255} encodings all work.
* **Raters**: those whose folders exist, in the order good, over, under, wrong, blank. Without a
  ``Good`` folder, "good" is the GT itself (`GOOD_FROM_GT`), as in CM's loader, which trains on
  four raters (good = GT, over, under, wrong); the paper's fifth, "blank", is used only where a
  ``Blank`` folder exists (no rater is invented). Every split must have the same rater folders.
* **Input**: float images as stored (CM's are in [0, 1]); integer images divided by their dtype's
  maximum. (H, W, C) with C ≤ 4 last (CM's 28×28×3) and (C, H, W) are both read. When every
  image's channels are identical (CM's three copies of one grey image) one channel is kept,
  otherwise all. A 3-D mask (H, W, C) contributes its middle channel, as ``Prepare_MNIST.py``.
* **Sizes**: all images must share one (H, W): others are centre-cropped or zero-padded to the
  first training image's size (masks alike, never interpolated).
* **Splits**: the folders' own train / validate / test. Each id is its own group (the layout
  carries no patient ids).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from datasets.contract import (
    DataError,
    DatasetCard,
    RaterData,
    RaterSetting,
    Splits,
    centre_fit,
    check_mask_values,
    folder_problem,
    read_tif,
)
from datasets.raters import RATER_NAMES
from datasets.raters.pool import fixed_pool_info
from datasets.settings import STYLE_NOTES, DatasetSpec

#: Without a Good/ folder, the "good" rater is the GT itself (CM-UNet's loader does this).
GOOD_FROM_GT = True
SPLIT_FOLDERS = {"train": "train", "validate": "val", "val": "val", "validation": "val", "test": "test"}
PART_FOLDER = {"train": "train", "val": "validate", "test": "test"}  # for messages
IMAGE_KINDS = ("Gaussian", "Image")  # the first present is the input
RATER_KINDS = {"good": "Good", "over": "Over", "under": "Under", "wrong": "Wrong", "blank": "Blank"}
KINDS = {k.lower(): k for k in ("GT", *IMAGE_KINDS, *RATER_KINDS.values())}
FILE_RE = re.compile(r"^(?P<id>.+)_(?P<kind>[A-Za-z]+)\.tiff?$", re.IGNORECASE)

CARD = DatasetCard(
    name="cm-folder",
    title="Your images and raters in CM-UNet's folder layout, e.g. CM-UNet's simulated MNIST examples (rater style files)",
    source="the layout of github.com/moucheng2017/Med-Noisy-Labels (MNIST_examples/, preprocessing/Prepare_MNIST.py)",
    licence="that of the data you bring (MNIST: LeCun, Cortes, Burges)",
    citation="Zhang et al., Disentangling human error from the ground truth in segmentation of medical images, NeurIPS 2020",
    counts="the images the folders hold, split as train / validate / test; raters good (= GT unless a Good/ folder exists), over, under, wrong (+ blank with a Blank/ folder)",
    download="CM-UNet's MNIST_examples/ folder, or your own data written in this layout",
    layout="<data-root>/cm-folder/ holding train/, validate/ and test/ (any nesting), each with GT/, Gaussian/ and one folder per rater (Over/, Under/, Wrong/, optional Good/, Blank/) of <id>_<Kind>.tif",
    raters=STYLE_NOTES["files"],
)


def natural_key(case_id: str) -> tuple:
    """Numeric ids in numeric order, then the others by name."""
    return (0, int(case_id), "") if case_id.isdigit() else (1, 0, case_id)


def find_files(root: Path) -> dict[str, dict[str, dict[str, Path]]]:
    """{part: {kind: {id: path}}} for every `<id>_<Kind>.tif` below a train/validate/test folder."""
    found: dict[str, dict[str, dict[str, Path]]] = {}
    for folder, _, files in sorted(os.walk(root, followlinks=True)):
        relative = Path(folder).relative_to(root).parts
        parts = [SPLIT_FOLDERS[p.lower()] for p in relative if p.lower() in SPLIT_FOLDERS]
        if not parts:
            continue
        for name in sorted(files):
            m = FILE_RE.match(name)
            if not m or m["kind"].lower() not in KINDS:
                continue
            kind, case_id, path = KINDS[m["kind"].lower()], m["id"], Path(folder) / name
            slot = found.setdefault(parts[-1], {}).setdefault(kind, {})
            if case_id in slot:
                raise DataError(f"cm-folder: two {kind} files for id {case_id}: {slot[case_id]} and {path}; keep one")
            slot[case_id] = path
    return found


def as_chw(array: np.ndarray, path: Path) -> np.ndarray:
    """An input image (H, W), (H, W, C) or (C, H, W) with C ≤ 4 -> float32 (C, H, W)."""
    if np.issubdtype(array.dtype, np.integer):
        image = array.astype(np.float32) / np.float32(np.iinfo(array.dtype).max)
    else:
        image = array.astype(np.float32)
    if not np.isfinite(image).all():
        raise DataError(f"{path}: contains NaN or infinite values")
    if image.ndim == 2:
        return image[None]
    if image.ndim == 3 and image.shape[2] <= 4 and image.shape[2] < image.shape[0]:
        return np.moveaxis(image, 2, 0)
    if image.ndim == 3 and image.shape[0] <= 4:
        return image
    raise DataError(f"{path}: expected an image (H, W), (H, W, C) or (C, H, W) with at most 4 channels, got shape {array.shape}")


def binarise(array: np.ndarray, path: Path, raw: bool = False) -> np.ndarray:
    """A mask or raw GT (H, W) or (H, W, C) -> bool (H, W): value ≥ half of its range (1 or 255).

    raw: the file holds raw intensities (GT: any value in 0–255); otherwise a rater mask, which
    must be 0/1, 0/255 or 0/128/255 (a label map {0, 1, 2, 4} would otherwise become all background).
    """
    mask = array.astype(np.float32)
    if mask.ndim == 3 and mask.shape[2] < mask.shape[0]:
        mask = mask[:, :, mask.shape[2] // 2]  # a slice stack: its middle slice, as Prepare_MNIST.py
    if mask.ndim != 2:
        raise DataError(f"{path}: expected a 2-D mask, got shape {array.shape}")
    if not np.isfinite(mask).all():
        raise DataError(f"{path}: contains NaN or infinite values")
    if not raw:
        check_mask_values(mask, path)
    elif mask.min(initial=0) < 0 or mask.max(initial=0) > 255:
        raise DataError(f"{path}: GT values in [{mask.min():g}, {mask.max():g}], expected raw intensities in 0–255 or a 0/1 mask")
    scale = 1.0 if mask.max(initial=0) <= 1 else 255.0
    return mask >= scale / 2


def load_cm_folder(data_root: Path, setting: RaterSetting, level: str, cache: Path | None) -> Splits:
    """The train / validate / test folders of `<data-root>/cm-folder/` as `Splits`.

    Rater style "files" and noise level "protocol" only (the raters are what the files hold).
    `raters_info` records the training raters' Average DSC against the files' GT.
    """
    root = Path(data_root) / "cm-folder"
    del level, cache  # "protocol" only (`checked_loader` lets nothing else through); cached whole by bench
    if not root.is_dir():
        raise DataError(
            f"cm-folder: {root}/ {folder_problem(root)}; put your train/, validate/ and test/ folders (CM-UNet layout) in {root}/"
        )
    files = find_files(root)
    if not files:
        raise DataError(
            f"cm-folder: no <id>_<Kind>.tif files in train/, validate/ or test/ folders under {root}/; expected e.g. train/GT/0_GT.tif"
        )
    for part, folder in PART_FOLDER.items():
        if part not in files:
            raise DataError(
                f"cm-folder: no {folder}/ folder with <id>_<Kind>.tif files under {root}/; the layout needs train/, validate/ and test/"
            )

    train_kinds = set(files["train"])
    rater_kinds = [RATER_KINDS[name] for name in RATER_NAMES if RATER_KINDS[name] in train_kinds]
    if not rater_kinds:
        raise DataError(f"cm-folder: train/ under {root}/ has no rater folder ({', '.join(RATER_KINDS.values())})")
    names = tuple(name for name in RATER_NAMES if RATER_KINDS[name] in rater_kinds or (name == "good" and GOOD_FROM_GT))

    decoded = {}
    for part, folder in PART_FOLDER.items():
        kinds = files[part]
        image_kind = next((k for k in IMAGE_KINDS if k in kinds), None)
        for kind in (image_kind, "GT", *rater_kinds):
            if kind is None or kind not in kinds:
                raise DataError(
                    f"cm-folder: {folder}/ has no {kind or 'Gaussian'}/ files under {root}/; every split needs Gaussian/, GT/ and the rater folders of train/ ({', '.join(rater_kinds)})"
                )
        decoded[part] = _decode_part(kinds, image_kind, rater_kinds, names)

    first = decoded["train"]["images"][0]
    shape = first.shape[1:]
    # One channel where every image repeats one grey image (CM's Gaussian), otherwise all of them.
    all_images = [im for part in decoded.values() for im in part["images"]]
    n_channels = {im.shape[0] for im in all_images}
    if len(n_channels) > 1:
        raise DataError(f"cm-folder: input images have {sorted(n_channels)} channels; all must have the same number")
    grey = all(np.array_equal(im, np.broadcast_to(im[:1], im.shape)) for im in all_images)

    parts = {}
    for part, d in decoded.items():
        images = np.stack([centre_fit(im[:1] if grey else im, shape) for im in d["images"]]).astype(np.float32)
        ids = np.array(d["ids"])
        parts[part] = RaterData(
            images=images,
            raters=np.stack([centre_fit(r, shape) for r in d["raters"]]).astype(np.uint8),
            rater_valid=np.ones((len(ids), len(names)), dtype=bool),
            gt=np.stack([centre_fit(g, shape) for g in d["gt"]]).astype(np.uint8),
            case_ids=ids,
            groups=ids,
            rater_names=names,
            raters_simulated=True,
        )
    rule = "the folders' own train/ validate/ test/"
    info = fixed_pool_info(setting.style, parts["train"].raters, parts["train"].gt)
    return Splits(parts["train"], parts["val"], parts["test"], rule, raters_info=info)


def _decode_part(kinds: dict[str, dict[str, Path]], image_kind: str, rater_kinds: list[str], names: tuple[str, ...]) -> dict:
    """Read one split: images [(C, H, W)], gt [(H, W) bool], raters [(R, H, W) bool], ids, matched by id."""
    images_by_id = kinds[image_kind]
    for kind in ("GT", *rater_kinds):
        for case_id, path in kinds[kind].items():
            if case_id not in images_by_id:
                expected = path.parent.parent / image_kind / f"{case_id}_{image_kind}{path.suffix}"
                raise DataError(f"cm-folder: {path} has no input image {expected}; files are matched by id")
        for case_id, image_path in images_by_id.items():
            if case_id not in kinds[kind]:
                expected = image_path.parent.parent / kind / f"{case_id}_{kind}{image_path.suffix}"
                raise DataError(f"cm-folder: {expected} is missing (the {kind} mask of {image_path.name}); files are matched by id")
    out = {"images": [], "gt": [], "raters": [], "ids": []}
    for case_id in sorted(images_by_id, key=natural_key):
        image_path = images_by_id[case_id]
        image = as_chw(read_tif(image_path), image_path)
        masks = {}
        for kind in ("GT", *rater_kinds):
            path = kinds[kind][case_id]
            mask = binarise(read_tif(path), path, raw=kind == "GT")
            if mask.shape != image.shape[1:]:
                raise DataError(
                    f"cm-folder: {path} is {mask.shape[0]}×{mask.shape[1]}, its image {image_path} is {image.shape[1]}×{image.shape[2]}"
                )
            masks[kind] = mask
        masks.setdefault("Good", masks["GT"])  # GOOD_FROM_GT: only used when "good" is in names
        out["images"].append(image)
        out["gt"].append(masks["GT"])
        out["raters"].append(np.stack([masks[RATER_KINDS[name]] for name in names]))
        out["ids"].append(case_id)
    return out


#: This module's registration: the datasets it adds to the registry (datasets/__init__.py `collect`).
SPECS = (DatasetSpec(CARD, load_cm_folder, 128, 32, 600, fixed_raters="reads its raters from files", rater_styles=("files",), order=60),)
