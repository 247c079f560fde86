"""Multidimensional Choledoch Database (MDC): 60-band microscopic hyperspectral scenes of bile-duct
tissue, one pathologist's cancer mask per scene, and the paper's five simulated raters.

Layouts (found by a recursive walk under `<data-root>/choledoch/`, docs/datasets.md#choledoch-on-disk-layouts):

- SpecTr's preprocessed copy: `MDC/MHSI/<name>.hdr` + its ENVI data file, `MDC/Mask/<name>.png`
  (0/255), `MDC/four_fold.json` (`{"fold1": ["<name>.hdr", ...], ...}`, 538 scenes).
- Swin-Spectral's copy: `hdr_dir/<name>-L.hdr` + `<name>-L.raw`, `ann_dir/<name>-L.png` (0/1).

A scene is an ENVI header whose name matches `NAME`; its data file is the header's name with
`.raw`, `.img`, `.dat` or no extension (or the header is `<data file>.hdr`); its mask is the PNG
with the header's stem. Flat-field references (`…-20x-blank.hdr`) do not match `NAME` and are
ignored. When a `four_fold.json` is present, exactly its scenes are loaded.

Decisions (the paper states none of them beyond "538 images with 60 spectral bands; random 438
train / 100 test"; docs/datasets.md#choledoch-decisions-and-split):

- Input: the 60 bands as a 60-channel 2-D image (the paper's 2-D U-Net).
- Working size `SIZE` = 256×320, SpecTr's preprocessed size. Other sizes are resized: bands by
  block mean for integer shrink factors (the 1024×1280 raw scenes: ×4), else by linear
  interpolation (pixel centres aligned, Gaussian anti-aliasing when shrinking); masks by nearest
  neighbour only. The simulated raters' radii are in pixels of this grid.
- Normalisation: z-score of each band over the image (float64 statistics, float32 result; a
  constant band becomes 0). It does not depend on the stored data type (uint16 counts or float32
  reflectance), and it removes the illumination spectrum that uncalibrated scenes carry.
- Split: the paper's random 438 / 100, but by **slide** (the leading 6 digits of the name), since
  scenes of one slide are near-duplicates; the paper split by image. 100/538 of the images (cut
  forward to a slide boundary) are test; 20 % of the remaining images (by slide) are validation,
  as the paper does for MNIST and MS (it has no validation split for Choledoch), so about 350
  scenes train instead of the paper's 438. `test_fold=k` instead takes SpecTr's fold k as test.
- Raters (rater style `choledoch`, the only one): the paper's five simulated raters from the single
  pathologist mask, made with this project's `morpho` rules (datasets/raters/morpho.py), seeded per scene
  by a hash of its name (`DATA_SEED`), so they do not depend on which other scenes are present.
  Their radii are pixels of the 256×320 grid, so at morpho noise 1 they are mild on these large
  cancer regions (over / under / wrong Dice ≈ 0.96 / 0.98 / 0.95 on the test fixture's ellipses,
  ≈ 0.81 / 0.91 / 0.85 on irregular stain-derived masks); the paper's "Average" of 51.97 % needs
  radii ≈ 4-5× larger on the irregular masks (≈ 20× on smooth ones), so the style's knob is morpho
  noise / `NOISE_SCALE` (= 4): knob 1 is noise level "protocol". A target Average DSC bisects the
  knob (`load_choledoch`).
- Spacing: 1 pixel of the working grid (the headers do not give the microscope's pixel size).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import ndimage as ndi

from datasets.adapters.choledoch.files import DATA_EXTENSIONS, read_envi, read_mask
from datasets.contract import DataError, DatasetCard, RaterData, RaterSetting, Splits, folder_problem, split_by_group
from datasets.raters import RATER_NAMES
from datasets.raters.levels import simulate_level
from datasets.raters.morpho import simulate_raters
from datasets.settings import STYLE_NOTES, DatasetSpec

# The simulated raters' radii are in pixels; on 256×320 cancer regions the MNIST-calibrated radii
# barely perturb the mask. Scaling them by 4 brings the 5-rater average DSC near the paper's
# "Average" (51.97 %) on irregular stain-derived masks (54.6 % measured on the scikit-image IHC
# image); the realised average of a run is stored in raters.json — compare it with the paper.
NOISE_SCALE = 4.0
#: Top of the bisection bracket of a target level (knob units; morpho radii × 4 × KNOB_HI). Smooth
#: masks need it: the fixture's ellipses still have Average 0.55 at knob 4 and 0.40 at 8, where a
#: 256×320 scene costs about 0.2 s.
KNOB_HI = 8.0
#: A target level is bisected on the first SEARCH_SCENES training scenes (in split order).
SEARCH_SCENES = 64

DATA_SEED = 0
BANDS = 60
SIZE = (256, 320)  # (H, W): SpecTr's preprocessed cubes are 256×320×60
PAPER_TEST, PAPER_TOTAL = 100, 538
VAL_FRACTION = 0.2

#: `<6-digit slide><variant>-20x-roi<k>[-L]`, e.g. 050625-20x-roi4, 042145_2-20x-roi5,
#: 032414c-20x-roi3, 031541vtc-20x-roi1, 033908-2-20x-roi5, 034004a2-20x-roi1, 030406C_2-20x-roi1-L.
NAME = re.compile(r"^(?P<slide>\d{6})(?P<variant>[a-z0-9_-]*?)-20x-roi(?P<roi>\d+)(?P<swin>-L)?$", re.IGNORECASE)

CARD = DatasetCard(
    name="choledoch",
    title="Multidimensional Choledoch Database (MDC): 60-band hyperspectral pathology, five simulated raters "
    "(style choledoch: this project's morpho rules with radii x4)",
    source="Zhang et al., IEEE Access 2019 (bio-hsi.ecnu.edu.cn, registration); SpecTr's preprocessed copy on Kaggle "
    "(hfutybx/mhsi-choledoch-dataset-preprocessed-dataset)",
    licence="research use after registration with the MDC authors (no open licence stated)",
    citation="Q. Zhang et al., A Multidimensional Choledoch Database and Benchmarks for Cholangiocarcinoma Diagnosis, "
    "IEEE Access 7, 2019; raters after Zhang et al., NeurIPS 2020 (CM-UNet)",
    counts="538 labelled scenes from 71 slides (SpecTr four_fold.json), 60 bands 550-1000 nm, one pathologist mask each; "
    "resized to 256×320; ≈100 test / ≈350 train / ≈88 val scenes by slide; 5 simulated raters",
    download="SpecTr's preprocessed MDC (MHSI/*.hdr + data files, Mask/*.png, four_fold.json) from Kaggle "
    "hfutybx/mhsi-choledoch-dataset-preprocessed-dataset, or Swin-Spectral's hdr_dir/ + ann_dir/",
    layout="<data-root>/choledoch/ (any nesting), e.g. choledoch/MDC/MHSI/<name>.hdr, choledoch/MDC/Mask/<name>.png",
    raters=STYLE_NOTES["choledoch"],
)


# ---------------------------------------------------------------------------------------
# Resizing, normalisation
# ---------------------------------------------------------------------------------------


def resize_nearest(mask: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """(H, W) → size, nearest neighbour with pixel centres aligned (labels stay labels)."""
    rows = np.minimum(((np.arange(size[0]) + 0.5) * mask.shape[0] / size[0]).astype(np.intp), mask.shape[0] - 1)
    cols = np.minimum(((np.arange(size[1]) + 0.5) * mask.shape[1] / size[1]).astype(np.intp), mask.shape[1] - 1)
    return mask[rows[:, None], cols[None, :]]


def resize_bands(cube: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """(C, H, W) → (C, *size) float32, each band alike.

    Integer shrink factors (the raw 1024×1280 scenes → 256×320): block mean, i.e. the area average
    that anti-aliased linear downsampling approximates, exact and fast. Otherwise: linear
    interpolation with pixel centres aligned and edges clamped, after a Gaussian blur of sigma
    (factor - 1) / 2 along an axis that shrinks (scikit-image's anti-aliasing rule).
    """
    cube = cube.astype(np.float32, copy=False)
    (c, h, w), (nh, nw) = cube.shape, size
    if (h, w) == (nh, nw):
        return cube
    if h % nh == 0 and w % nw == 0:
        return cube.reshape(c, nh, h // nh, nw, w // nw).mean(axis=(2, 4), dtype=np.float64).astype(np.float32)
    sigma = (0, max(0.0, (h / nh - 1) / 2), max(0.0, (w / nw - 1) / 2))
    if any(sigma):
        cube = ndi.gaussian_filter(cube, sigma, mode="nearest")
    for axis, (n_in, n_out) in ((1, (h, nh)), (2, (w, nw))):
        pos = np.clip((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0, n_in - 1)
        lo = np.floor(pos).astype(np.intp)
        hi = np.minimum(lo + 1, n_in - 1)
        frac = (pos - lo).astype(np.float32)
        shape = [1, 1, 1]
        shape[axis] = n_out
        cube = np.take(cube, lo, axis=axis) * (1 - frac).reshape(shape) + np.take(cube, hi, axis=axis) * frac.reshape(shape)
    return cube


def normalise_bands(cube: np.ndarray) -> np.ndarray:
    """(C, H, W) → float32 z-score of each band over the image; a constant band becomes 0.

    The statistics accumulate in float64 (uint16 sums overflow float32 precision); the
    arithmetic on the pixels stays float32 to keep a 60-band scene cheap.
    """
    x = cube.astype(np.float32, copy=False)
    mean = x.mean(axis=(1, 2), keepdims=True, dtype=np.float64)
    std = x.std(axis=(1, 2), keepdims=True, dtype=np.float64)
    return (x - mean.astype(np.float32)) / np.where(std > 0, std, 1.0).astype(np.float32)


# ---------------------------------------------------------------------------------------
# Discovery
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scene:
    name: str  # scene name without `-L` and extension, e.g. 042145_2-20x-roi5
    slide: str  # leading 6 digits
    hdr: Path
    mask: Path
    fold: int  # SpecTr fold (1-4), 0 where no four_fold.json lists it


def scene_name(hdr: Path) -> re.Match | None:
    stem = hdr.name[: -len(hdr.suffix)]
    if Path(stem).suffix.lower() in DATA_EXTENSIONS[:-1]:
        stem = stem[: -len(Path(stem).suffix)]  # `scene.raw.hdr`
    return NAME.match(stem)


def walk(folder: Path) -> list[Path]:
    """Every file under `folder`, following symlinked folders, sorted."""
    return sorted(Path(d) / f for d, _, files in os.walk(folder, followlinks=True) for f in files)


def read_folds(path: Path) -> dict[str, int]:
    """SpecTr's `four_fold.json` → {scene name: fold number}."""
    try:
        folds = json.loads(path.read_text())
        out = {}
        for key, names in folds.items():
            number = int(re.fullmatch(r"fold(\d+)", key)[1])
            for name in names:
                out[re.sub(r"(-L)?\.hdr$", "", name, flags=re.IGNORECASE)] = number
        return out
    except (OSError, ValueError, TypeError, AttributeError) as e:
        raise DataError(f"{path}: not SpecTr's fold file ({{'fold1': ['<name>.hdr', ...], ...}}): {e}") from None


def find_scenes(folder: Path) -> list[Scene]:
    """The labelled scenes under `folder`, sorted by name (see the module docstring for the rules)."""
    if not folder.is_dir():
        raise DataError(
            f"choledoch: {folder}/ {folder_problem(folder, 'does not exist')}; download {CARD.download} and put it in {folder}/"
        )
    files = walk(folder)
    fold_files = [p for p in files if p.name.lower() == "four_fold.json"]
    if len(fold_files) > 1:
        raise DataError(f"choledoch: several fold files ({', '.join(map(str, fold_files))}); keep one copy of the dataset")
    folds = read_folds(fold_files[0]) if fold_files else {}
    masks: dict[str, list[Path]] = {}
    for path in files:
        if path.suffix.lower() == ".png":
            masks.setdefault(path.stem, []).append(path)
    scenes: dict[str, Scene] = {}
    unlabelled = []
    for hdr in files:
        match = scene_name(hdr) if hdr.suffix.lower() == ".hdr" else None
        if match is None:
            continue
        name = match.group(0)[: match.start("swin")] if match["swin"] else match.group(0)
        if folds and name not in folds:
            continue
        if name in scenes:
            raise DataError(f"choledoch: scene {name} twice ({scenes[name].hdr} and {hdr}); keep one copy of the dataset")
        candidates = masks.get(match.group(0), [])  # the mask shares the header's stem
        if len(candidates) > 1:
            # A colour rendering may share the stem: prefer a PNG in a mask / annotation folder.
            candidates = [p for p in candidates if re.search("mask|ann", p.parent.name, re.IGNORECASE)] or candidates
        if len(candidates) != 1:
            if candidates:
                raise DataError(f"choledoch: {hdr} has several masks ({', '.join(map(str, candidates))}); keep one")
            unlabelled.append(hdr)
            continue
        scenes[name] = Scene(name, match["slide"], hdr, candidates[0], folds.get(name, 0))
    if unlabelled:
        raise DataError(
            f"choledoch: {unlabelled[0]} has no mask PNG with the same name ({len(unlabelled)} scenes lack one); "
            "the raw release's XML polygons are not read: use SpecTr's preprocessed copy with Mask/*.png"
        )
    missing = sorted(set(folds) - set(scenes))
    if missing:
        raise DataError(f"choledoch: {missing[0]}.hdr, listed in {fold_files[0]}, is not under {folder}/ ({len(missing)} missing); copy it")
    if not scenes:
        raise DataError(
            f"choledoch: no scene headers (<slide>-20x-roi<k>.hdr) under {folder}/; download {CARD.download} and put it in {folder}/"
        )
    return [scenes[k] for k in sorted(scenes)]


def scene_key(name: str) -> int:
    """A stable non-negative integer per scene name: the simulated raters' per-image seed key."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:7], "big")


# ---------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------


def read_scene(scene: Scene, size: tuple[int, int] | None) -> tuple[np.ndarray, np.ndarray]:
    """One scene → (image float32 (60, H, W) z-scored per band, mask uint8 (H, W)) at `size` (None: as stored)."""
    cube = read_envi(scene.hdr)
    if cube.shape[0] != BANDS:
        raise DataError(f"{scene.hdr}: {cube.shape[0]} bands, expected {BANDS}; is this an MDC scene?")
    if not np.isfinite(cube).all():
        raise DataError(f"{scene.hdr}: the cube holds NaN or infinite values; copy it again")
    mask = read_mask(scene.mask)
    if mask.shape != cube.shape[1:]:
        raise DataError(f"{scene.mask}: mask is {mask.shape[0]}×{mask.shape[1]} but {scene.hdr.name} is {cube.shape[1]}×{cube.shape[2]}")
    if size is not None:
        cube, mask = resize_bands(cube, size), resize_nearest(mask, size)
    return normalise_bands(cube), mask


def check_has_image(image: np.ndarray, scene: Scene) -> None:
    """A normalised scene that is all zeros had every band constant over the image: a blank or zero-filled cube."""
    if not image.any():
        raise DataError(f"{scene.hdr}: every band is constant over the whole scene; the cube holds no image, copy it again")


def read_scenes(scenes: list[Scene], size: tuple[int, int] | None = SIZE) -> tuple[np.ndarray, np.ndarray]:
    """`scenes`, in the given order → (images float32 (N, 60, H, W), gt uint8 (N, H, W)).

    size: working (H, W); None keeps the stored size, which must then be the same for every scene.
    """
    first, first_mask = read_scene(scenes[0], size)
    check_has_image(first, scenes[0])
    images = np.empty((len(scenes), *first.shape), dtype=np.float32)
    gt = np.empty((len(scenes), *first_mask.shape), dtype=np.uint8)
    images[0], gt[0] = first, first_mask
    for i, scene in enumerate(scenes[1:], start=1):
        image, mask = read_scene(scene, size)
        if image.shape != first.shape:
            raise DataError(
                f"{scene.hdr}: {image.shape[1]}×{image.shape[2]}, but {scenes[0].hdr.name} is {first.shape[1]}×{first.shape[2]}"
            )
        check_has_image(image, scene)
        images[i], gt[i] = image, mask
    return images, gt


def simulate(gt: np.ndarray, keys: np.ndarray, strength: float = 1.0) -> np.ndarray:
    """The five raters of the `choledoch` style: gt (N, H, W), keys (N,) → (N, 5, H, W) uint8.

    The morpho rules (datasets/raters/morpho.py) at noise `strength` × `NOISE_SCALE`; strength 1 is the protocol.
    """
    return simulate_raters(gt, seed=DATA_SEED, noise=strength * NOISE_SCALE, keys=keys)


def rater_data(scenes: list[Scene], images: np.ndarray, gt: np.ndarray, raters: np.ndarray) -> RaterData:
    return RaterData(
        images=images,
        raters=raters,
        rater_valid=np.ones((len(scenes), len(RATER_NAMES)), dtype=bool),
        gt=gt,
        case_ids=np.array([s.name for s in scenes]),
        groups=np.array([s.slide for s in scenes]),
        rater_names=RATER_NAMES,
        raters_simulated=True,
    )


def read_choledoch(scenes: list[Scene], strength: float = 1.0, size: tuple[int, int] | None = SIZE) -> RaterData:
    """`scenes`, in the given order → RaterData with the five simulated raters at knob value `strength` (1: the protocol)."""
    images, gt = read_scenes(scenes, size)
    return rater_data(scenes, images, gt, simulate(gt, scene_keys(scenes), strength))


def scene_keys(scenes: list[Scene]) -> np.ndarray:
    return np.array([scene_key(s.name) for s in scenes], dtype=np.int64)


def split_scenes(scenes: list[Scene], test_fold: int | None) -> tuple[list[np.ndarray], str]:
    """Indices into `scenes` of train, val and test, and the rule that made them."""
    groups = np.array([s.slide for s in scenes])
    folds = np.array([s.fold for s in scenes])
    if test_fold is None:
        test_share = PAPER_TEST / PAPER_TOTAL
        train_share = (1 - test_share) * (1 - VAL_FRACTION)
        test, val, train = split_by_group(groups, (test_share, 1 - test_share - train_share, train_share), seed=DATA_SEED)
        rule = f"random by slide (leading 6 digits; seed {DATA_SEED}): {PAPER_TEST}/{PAPER_TOTAL} of the images test, 20 % of the rest val"
    else:
        if not (folds == test_fold).any():
            raise DataError(f"choledoch: no scene of fold {test_fold}; the fold file has folds {sorted(set(folds) - {0}) or 'none'}")
        test = np.flatnonzero(folds == test_fold)
        rest = np.flatnonzero(folds != test_fold)
        train, val = (rest[i] for i in split_by_group(groups[rest], (1 - VAL_FRACTION, VAL_FRACTION), seed=DATA_SEED))
        rule = f"SpecTr four_fold.json: fold {test_fold} test; other folds by slide 80/20 train/val (seed {DATA_SEED})"
    for part, index in (("train", train), ("val", val), ("test", test)):
        if len(index) == 0:
            raise DataError(f"choledoch: {len(set(groups))} slides are too few for a train/val/test split by slide ({part} is empty)")
    return [train, val, test], rule


def load_choledoch(
    data_root: Path,
    setting: RaterSetting,
    level: str,
    cache: Path | None,
    *,
    size: tuple[int, int] | None = SIZE,
    test_fold: int | None = None,
) -> Splits:
    """`<data-root>/choledoch/` → Splits by slide: the paper's 438/100 proportion, or SpecTr fold `test_fold` as test.

    The split is decided from the names before any cube is decoded, and the scenes are read in
    train, val, test order into one array whose parts are views: the 538 scenes at 256×320×60
    take 10.6 GB as float32, and a copy per part would double that.

    Rater style "choledoch" only. Level "protocol" is knob (`noise` of the morpho rules / 4) 1;
    a target Average DSC bisects the knob on [0, `KNOB_HI`] over the first `SEARCH_SCENES`
    training scenes (a 256×320 scene costs the morpho rules far more than a digit), then
    simulates every scene at that value; the realised Average and the usability check are
    measured on the whole training split.
    """
    del cache  # the splits are cached whole (bench/run/split_cache.py)
    folder = Path(data_root) / "choledoch"
    scenes = find_scenes(folder)
    if len(scenes) != PAPER_TOTAL:
        warnings.warn(
            f"choledoch: found {len(scenes)} labelled scenes under {folder}/; the paper's (SpecTr's) set has {PAPER_TOTAL}", stacklevel=2
        )
    parts, rule = split_scenes(scenes, test_fold)
    ordered = [scenes[i] for part in parts for i in part]
    images, gt = read_scenes(ordered, size)
    keys = scene_keys(ordered)
    a, b = len(parts[0]), len(parts[0]) + len(parts[1])
    first = slice(0, min(a, SEARCH_SCENES))
    raters, info = simulate_level(
        "choledoch",
        setting.style,
        level,
        gt[:a],
        {"train": functools.partial(simulate, gt[:a], keys[:a]), "rest": functools.partial(simulate, gt[a:], keys[a:])},
        hi=KNOB_HI,
        subset=(functools.partial(simulate, gt[first], keys[first]), gt[first]),
        unit="scenes",
    )
    data = rater_data(ordered, images, gt, np.concatenate([raters["train"], raters["rest"]]))
    return Splits(data.subset(slice(0, a)), data.subset(slice(a, b)), data.subset(slice(b, data.n)), rule, raters_info=info)


#: This module's registration: the datasets it adds to the registry (datasets/__init__.py `collect`).
SPECS = (DatasetSpec(CARD, load_choledoch, 2, 2, 48, 32, rater_styles=("choledoch",), order=30),)
