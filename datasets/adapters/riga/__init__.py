"""RIGA (Almazroa et al. 2018): optic disc and cup drawn by six ophthalmologists on 750 fundus images.

Two on-disk versions are read from `<data-root>/riga/`, found by a recursive walk:

1. **The raw release** (University of Michigan Deep Blue). Per image a clean `imageNprime.<tif|jpg>`
   and six copies `imageN-<k>.<tif|jpg>` on which rater k drew the disc and cup boundaries. No mask
   files exist: each rater's masks are derived by differencing the marked copy against the prime
   image (`derive_masks`, docs/datasets.md#riga-the-raw-release), and a square ROI centred on the
   valid raters' discs is cut (`disc_roi`); both rules are in datasets/adapters/riga/masks.py. A marked copy from
   which no closed disc and cup can be recovered makes that rater invalid for that image
   (`rater_valid` False, with a warning).
2. **MR-Net's preprocessed "RIGA benchmark"** (`DiscRegion/Glaucoma_multirater_<subset>.csv`, used by
   MR-Net and most multi-rater disc/cup papers; docs/datasets.md#riga-mr-nets-discregion-crops). 7 CSV rows per image (rater 0 =
   "FinalLabel", a majority label, ignored; raters 1-6); rater n's mask path = `maskName` with
   `FinalLabel` → `Rater<n>` (MR-Net's rule), paths relative to the CSV's folder with Windows
   backslashes. Masks 0 / ~128 rim / 255 cup → disc = `> 0`, cup = `== 255` (JPEG masks: `> 64`,
   `> 191`; masks valued in {0, 1, 2} are read as class indices). The images are already disc
   crops and are resized to `SIZE`×`SIZE`, as MR-Net does.
   When the CSVs are present they are used and the raw files are not read.

Output: classes (background, rim, cup), structures disc = {rim, cup} and cup = {cup}; six
identity-consistent raters ("rater1".."rater6"); no ground truth (the paper's expert GT is private),
so the evaluation reference is the rater majority (and the rater mean for MR-Net's soft metrics).
Images: RGB, resized bilinearly (Pillow, anti-aliased), divided by 255 → float32 (3, 256, 256) in
[0, 1]; label maps resized with nearest neighbour only (MR-Net's default bicubic shrinks the cup;
docs/methods.md#mr-net-bicubic-resizing-of-label-masks).

Split (MR-Net, the LF-Net paper): train = BinRushed + MESSIDOR, test = Magrabia. MR-Net validates
on the test set (docs/methods.md#mr-net-model-selection-on-the-test-set); here a fixed 10 % of the training images (seed 0, by
group = sub-folder + image number; RIGA has no patient ids) is held out as validation.

Reading seven full-size photos and deriving six raters' masks takes ~0.6-1 s per image (measured
on photos of the real sizes, 2240×1488 to 2743×1936), ≈ 10 min for the 750 images on one core,
so the result per image (the 256×256 image and six label maps) is cached as
`<cache>/riga-masks/<key>.npz`, keyed by the files' paths, sizes, modification times and
`RECIPE`, where `<cache>` is the cache folder the caller passes (bench's decoded-data cache, the same folder as its
splits cache); nothing is ever written into the data folder, and without a cache folder nothing is cached here.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, UnidentifiedImageError

from datasets.adapters.riga.masks import (
    LOSSLESS_THRESHOLD,
    LOSSY_THRESHOLD,
    MAX_INK_FRACTION,
    MIN_CUP_FRACTION,
    ROI_SCALE,
    SIZE,
    crop_square,
    derive_masks,
    disc_roi,
    label_map,
    mrnet_labels,
    resize_image,
    resize_labels,
    to_input,
)
from datasets.contract import DataError, DatasetCard, RaterData, RaterSetting, Splits, atomic, folder_problem, split_by_group
from datasets.raters.pool import fixed_pool_info
from datasets.settings import REAL, STYLE_NOTES, DatasetSpec

log = logging.getLogger(__name__)

DATA_SEED = 0
VAL_FRACTION = 0.1
CLASSES = ("background", "rim", "cup")
STRUCTURES = {"disc": (1, 2), "cup": (2,)}
N_RATERS = 6
RATER_NAMES = tuple(f"rater{k}" for k in range(1, N_RATERS + 1))
SUBSETS = ("BinRushed", "MESSIDOR", "Magrabia")
TRAIN_SUBSETS, TEST_SUBSETS = ("BinRushed", "MESSIDOR"), ("Magrabia",)
EXPECTED = {"BinRushed": 195, "MESSIDOR": 460, "Magrabia": 95}
RECIPE = f"riga-v1 size={SIZE} roi={ROI_SCALE} thr={LOSSLESS_THRESHOLD}/{LOSSY_THRESHOLD} ink<={MAX_INK_FRACTION} cup>={MIN_CUP_FRACTION}"
LOSSY = {".jpg", ".jpeg"}

PRIME_RE = re.compile(r"^image(\d+)prime\.(tiff?|jpe?g)$", re.IGNORECASE)
RATER_RE = re.compile(r"^image(\d+)-([1-6])\.(tiff?|jpe?g)$", re.IGNORECASE)
CSV_RE = re.compile(r"^glaucoma_multirater_(\w+)\.csv$", re.IGNORECASE)

CARD = DatasetCard(
    name="riga",
    title="RIGA: optic disc and cup by six ophthalmologists (BinRushed, MESSIDOR, Magrabia; rater style real)",
    source="Almazroa et al., University of Michigan Deep Blue Data (raw release, marked copies); "
    "or MR-Net's preprocessed DiscRegion crops (links in the README of github.com/jiwei0921/MRNet)",
    licence="see the Deep Blue landing page (not verified); MESSIDOR images are under the MESSIDOR licence",
    citation="Almazroa et al., Proc. SPIE 10579, 2018 (RIGA); Ji et al., CVPR 2021 (MR-Net split)",
    counts="750 images: train 655 (BinRushed 195 + MESSIDOR 460; 10 % of them as val), test 95 Magrabia; "
    "6 raters; no ground truth (reference: majority; rater mean for soft metrics); 3×256×256",
    download="the RIGA zip files (BinRushed, MESSIDOR, Magrabia) from Deep Blue "
    "(https://deepblue.lib.umich.edu/data/concern/data_sets/3b591905z), or MR-Net's DiscRegion folder",
    layout="<data-root>/riga/ (unzipped as is; any nesting), e.g. riga/MESSIDOR/image1prime.tif, "
    "riga/BinRushed/BinRushed2/image1-3.jpg, riga/Magrabia/MagrabiaMale/Image1-1.tif; "
    "or riga/DiscRegion/Glaucoma_multirater_Magrabia.csv with its image and mask folders",
    raters=STYLE_NOTES["real"],
)


# ---------------------------------------------------------------- reading files


def read_image(path: Path, mode: str) -> np.ndarray:
    """A file as uint8: mode "RGB" → (H, W, 3), "L" → (H, W). Any failure is a one-line DataError."""
    try:
        with Image.open(path) as im:
            im.load()  # decode now, so a truncated file fails here
            if im.mode in ("I;16", "I;16B", "I;16L", "I") and mode == "L":
                raise DataError(f"{path}: 16/32-bit mask, expected an 8-bit mask with values 0 / 128 / 255")
            return np.asarray(im.convert(mode))
    except (OSError, UnidentifiedImageError, SyntaxError, ValueError) as e:
        raise DataError(f"{path}: unreadable or truncated image ({e}); copy it again from the download") from None


def subset_of(path: Path) -> str | None:
    """Which RIGA subset a path belongs to, from its folder names (misspellings like `MagrabiFemale` included)."""
    text = str(path).lower()
    for name in SUBSETS:
        if name.lower()[:7] in text:  # "magrabi", "binrush", "messido"
            return name
    return None


# ---------------------------------------------------------------- one case


@dataclass
class Case:
    """One image: where it is, which subset, the prime and up to six marked copies (raw) or mask files (MR-Net)."""

    subset: str
    case_id: str
    image: Path
    raters: dict[int, Path] = field(default_factory=dict)


def masks_folder(cache: Path | None) -> Path | None:
    """Where the derived masks of the raw release are kept under the cache folder `cache` (None: not kept)."""
    return None if cache is None else Path(cache) / "riga-masks"


def cache_key(case: Case) -> str:
    digest = hashlib.sha256(RECIPE.encode())
    for path in [case.image, *(case.raters[k] for k in sorted(case.raters))]:
        stat = path.stat()
        digest.update(f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:24]


def load_raw_case(case: Case) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Prime + six marked copies → (image uint8 (SIZE, SIZE, 3), labels uint8 (6, SIZE, SIZE), valid bool (6,)).

    None (with a warning) when no rater's masks could be derived.
    """
    prime = read_image(case.image, "RGB")
    discs = np.zeros((N_RATERS, *prime.shape[:2]), bool)
    cups = np.zeros_like(discs)
    valid = np.zeros(N_RATERS, bool)
    for k in range(1, N_RATERS + 1):
        path = case.raters[k]
        marked = read_image(path, "RGB")
        if marked.shape != prime.shape:
            raise DataError(
                f"{path}: shape {marked.shape} differs from {case.image.name} {prime.shape}; the marked copy must be the same photo"
            )
        lossy = path.suffix.lower() in LOSSY or case.image.suffix.lower() in LOSSY
        masks = derive_masks(prime, marked, lossy)
        if masks is None:
            warnings.warn(f"riga: {path}: no closed disc and cup contour found; rater {k} marked invalid for this image", stacklevel=3)
            continue
        discs[k - 1], cups[k - 1] = masks
        valid[k - 1] = True
    if not valid.any():
        warnings.warn(f"riga: {case.image}: no rater's contours could be recovered; image skipped", stacklevel=3)
        return None
    top, left, side = disc_roi(discs[valid])
    image = resize_image(crop_square(prime, top, left, side))
    labels = np.stack([resize_labels(crop_square(label_map(d, c), top, left, side)) for d, c in zip(discs, cups)])
    return image, labels, valid


def load_mrnet_case(case: Case) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A DiscRegion crop and its six rater masks → (image (SIZE, SIZE, 3), labels (6, SIZE, SIZE), valid (6,))."""
    rgb = read_image(case.image, "RGB")
    labels = []
    for k in range(1, N_RATERS + 1):
        path = case.raters[k]
        mask = read_image(path, "L")
        if mask.shape != rgb.shape[:2]:
            raise DataError(f"{path}: mask shape {mask.shape} differs from image {case.image.name} {rgb.shape[:2]}")
        labels.append(resize_labels(mrnet_labels(mask, path.suffix.lower() in LOSSY)))
    return resize_image(rgb), np.stack(labels), np.ones(N_RATERS, bool)


def load_case(case: Case, raw: bool, folder: Path | None = None):
    """One case through the per-image cache in `folder` (`masks_folder`; None: none), which survives code edits elsewhere."""
    if not raw:
        return load_mrnet_case(case)
    path = folder / f"{cache_key(case)}.npz" if folder is not None else None
    if path is not None and path.is_file():
        try:
            with np.load(path, allow_pickle=False) as f:
                return f["image"], f["labels"], f["valid"]
        except (OSError, ValueError, KeyError, EOFError):
            pass  # a damaged cache file is rebuilt
    result = load_raw_case(case)
    if result is not None and path is not None:
        with atomic(path) as tmp:
            np.savez_compressed(tmp, image=result[0], labels=result[1], valid=result[2])
    return result


# ---------------------------------------------------------------- finding the files


def walk_files(root: Path) -> list[Path]:
    return sorted(Path(folder) / name for folder, _, names in os.walk(root) for name in names)


def find_raw_cases(root: Path, files: list[Path]) -> list[Case]:
    """Primes and their six marked copies, by folder. Folders without any prime (the uncorrected
    `BinRushed1`) are ignored; an image with marked copies but no prime (`MagrabiFemale/image48`) is
    skipped with a warning; a prime missing a rater file is an error."""
    primes: dict[Path, dict[int, Path]] = {}
    marked: dict[Path, dict[int, dict[int, list[Path]]]] = {}
    for path in files:
        if m := PRIME_RE.match(path.name):
            primes.setdefault(path.parent, {})[int(m.group(1))] = path
        elif m := RATER_RE.match(path.name):
            marked.setdefault(path.parent, {}).setdefault(int(m.group(1)), {}).setdefault(int(m.group(2)), []).append(path)
    for folder in sorted(set(marked) - set(primes)):
        log.info("riga: ignoring %s: marked copies but no prime images (the uncorrected BinRushed1 copy)", folder)
    cases, seen = [], {}
    for folder in sorted(primes):
        subset = subset_of(folder.relative_to(root))
        if subset is None:
            warnings.warn(f"riga: {folder}: prime images outside BinRushed / MESSIDOR / Magrabia folders; ignored", stacklevel=3)
            continue
        by_number = marked.get(folder, {})
        for number in sorted(set(by_number) - set(primes[folder])):
            warnings.warn(f"riga: {folder / f'image{number}'}: marked copies but no image{number}prime file; image skipped", stacklevel=3)
        for number, prime in sorted(primes[folder].items()):
            case_id = f"{subset}/{folder.name}/image{number}"
            if case_id in seen:
                warnings.warn(f"riga: {prime}: duplicate of {seen[case_id]}; the first copy is used", stacklevel=3)
                continue
            seen[case_id] = prime
            raters = {}
            for k in range(1, N_RATERS + 1):
                options = by_number.get(number, {}).get(k, [])
                if not options:
                    raise DataError(
                        f"riga: {folder / f'image{number}-{k}'}.(tif|jpg) is missing (rater {k} of {prime.name}); copy it again from the download"
                    )
                # Two copies of one rater (known for MagrabiFemale/image48): prefer lossless TIFF.
                raters[k] = sorted(options, key=lambda p: (p.suffix.lower() in LOSSY, p.name))[0]
            cases.append(Case(subset, case_id, prime, raters))
    return cases


def read_mrnet_csv(path: Path) -> list[Case]:
    """One `Glaucoma_multirater_<subset>.csv` → its cases (rater 0 rows; raters 1-6 by `FinalLabel` → `Rater<n>`)."""
    subset = subset_of(Path(path.name))
    if subset is None:
        raise DataError(f"{path}: unknown RIGA subset in the file name; expected Glaucoma_multirater_<BinRushed|MESSIDOR|Magrabia>.csv")
    try:
        try:
            table = pd.read_csv(path)
        except UnicodeDecodeError:
            table = pd.read_csv(path, encoding="gbk")  # MR-Net reads its CSVs as GBK
    except (OSError, ValueError, pd.errors.ParserError) as e:
        raise DataError(f"{path}: unreadable CSV ({e}); copy it again from MR-Net's DiscRegion download") from None
    missing = {"imgName", "maskName", "rater"} - set(table.columns)
    if missing:
        raise DataError(f"{path}: missing column(s) {', '.join(sorted(missing))}; expected MR-Net's imgName, maskName, ..., rater")
    cases = []
    for row in table[table["rater"] == 0].itertuples():
        image = path.parent / str(row.imgName).replace("\\", "/")
        raters = {}
        for k in range(1, N_RATERS + 1):
            name = str(row.maskName).replace("FinalLabel", f"Rater{k}").replace("\\", "/")
            raters[k] = path.parent / name
        for file in (image, *raters.values()):
            if not file.is_file():
                raise DataError(f"riga: {file} (listed in {path.name}) is missing; copy the whole DiscRegion folder")
        stem = str(row.imgName).replace("\\", "/").rsplit(".", 1)[0]
        case_id = stem if stem.lower().startswith(subset.lower() + "/") else f"{subset}/{stem}"
        cases.append(Case(subset, case_id, image, raters))
    return cases


# ---------------------------------------------------------------- the loader


PROGRESS_AFTER = 10.0  # seconds: a decode that takes longer says how far it is (the raw release takes ~10 min once)


def build(cases: list[Case], raw: bool, part: str = "", folder: Path | None = None) -> RaterData:
    """The cases' images and raters as RaterData; the raw release's derived masks are kept in `folder` (None: not kept)."""
    images, raters, valid, ids = [], [], [], []
    started, said = time.time(), time.time()
    for i, case in enumerate(cases):
        if time.time() - said > PROGRESS_AFTER:
            said = time.time()
            print(
                f"riga: {part} {i}/{len(cases)} images decoded in {said - started:.0f} s (cached after this run)",
                file=sys.stderr,
                flush=True,
            )
        result = load_case(case, raw, folder)
        if result is None:
            continue
        images.append(to_input(result[0]))
        raters.append(result[1])
        valid.append(result[2])
        ids.append(case.case_id)
    if not ids:
        raise DataError(
            f"riga: none of the {len(cases)} {part} image(s) (first {cases[0].image if cases else '-'}) has a rater contour "
            "that could be recovered; check the marked copies"
        )
    ids = np.array(ids)
    return RaterData(
        images=np.stack(images),
        raters=np.stack(raters).astype(np.uint8),
        rater_valid=np.stack(valid),
        gt=None,
        case_ids=ids,
        groups=ids,  # one image per group: sub-folder + image number (RIGA has no patient ids)
        classes=CLASSES,
        structures=dict(STRUCTURES),
        rater_names=RATER_NAMES,
        rater_ids_consistent=True,
        raters_simulated=False,
    )


def load_riga(data_root: Path, setting: RaterSetting, level: str, cache: Path | None) -> Splits:
    """RIGA splits: train/val from BinRushed + MESSIDOR (90/10 by image, seed 0), test Magrabia.

    Rater style "real" and noise level "protocol" only: the six raters are real (another level is
    refused rather than trained again unchanged: the registry's `fixed_raters`, before this runs).
    """
    del level  # "protocol": the only level `checked_loader` lets through for real raters
    root = Path(data_root) / "riga"
    if not root.is_dir():
        raise DataError(f"riga: {root}/ {folder_problem(root)}; download RIGA ({CARD.download}) and unzip it into {root}/")
    files = walk_files(root)
    csvs = [p for p in files if CSV_RE.match(p.name)]
    raw = not csvs
    if csvs:
        cases = [case for path in csvs for case in read_mrnet_csv(path)]
        version = "MR-Net DiscRegion crops"
    else:
        cases = find_raw_cases(root, files)
        version = f"raw release, masks from marked copies, ROI {ROI_SCALE:g}× the raters' disc box"
    if not cases:
        raise DataError(
            f"riga: no imageNprime.<tif|jpg> or Glaucoma_multirater_*.csv under {root}/; unzip the RIGA download there (layout: {CARD.layout})"
        )
    counts = {name: sum(c.subset == name for c in cases) for name in SUBSETS}
    for name, n in counts.items():
        if n < EXPECTED[name] // 2:
            warnings.warn(
                f"riga: {n} {name} images found under {root}/, the release has about {EXPECTED[name]}; incomplete download?", stacklevel=2
            )
    for part, names in (("training", TRAIN_SUBSETS), ("test", TEST_SUBSETS)):
        if not any(counts[n] for n in names):
            raise DataError(f"riga: no {' or '.join(names)} images under {root}/ (the {part} set); unzip them there")
    folder = masks_folder(cache)
    train_all = build([c for c in cases if c.subset in TRAIN_SUBSETS], raw, "training (BinRushed, MESSIDOR)", folder)
    test = build([c for c in cases if c.subset in TEST_SUBSETS], raw, "test (Magrabia)", folder)
    # At least one validation image, so a tiny copy still has a validation set.
    fraction = max(VAL_FRACTION, 1 / train_all.n) if train_all.n > 1 else 0.0
    train, val = split_by_group(train_all.groups, (1 - fraction, fraction), seed=DATA_SEED)
    if len(val) == 0 or len(train) == 0:
        raise DataError(f"riga: {train_all.n} training image(s) under {root}/ cannot give both a train and a val part")
    rule = f"MR-Net: train BinRushed+MESSIDOR, test Magrabia; val = {fraction:.0%} of the training images by image (seed {DATA_SEED}); {version}"
    train_part = train_all.subset(train)
    return Splits(train_part, train_all.subset(val), test, rule, raters_info=fixed_pool_info(setting.style, train_part.raters, None))


#: This module's registration: the datasets it adds to the registry (datasets/__init__.py `collect`).
SPECS = (
    DatasetSpec(CARD, load_riga, 2, 2, 80, 32, reference="majority", soft_metrics=True, structures=tuple(STRUCTURES), order=50, **REAL),
)
