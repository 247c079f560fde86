"""RIGA (Almazroa et al. 2018): optic disc and cup drawn by six ophthalmologists on 750 fundus images.

Two on-disk versions are read from `<data-root>/riga/`, found by a recursive walk:

1. **The raw release** (University of Michigan Deep Blue). Per image a clean `imageNprime.<tif|jpg>`
   and six copies `imageN-<k>.<tif|jpg>` on which rater k drew the disc and cup boundaries. No mask
   files exist: each rater's masks are derived by differencing the marked copy against the prime
   image (`derive_masks`, docs/datasets.md#riga-the-raw-release):
   `max over RGB |marked - prime| > 0` (lossless TIFF) or `> 40` (either file JPEG, whose
   compression noise is suppressed; also used when a TIFF copy differs in more than 5 % of its
   pixels, i.e. was re-encoded) → 3×3 closing (bridges 1-px gaps in the drawn curve) → the
   largest connected outline, holes filled, is the disc; the second largest, filled and lying inside
   the disc, is the cup. Where the two contours touch (one outline component) the cup is the most
   convex hole inside the disc outline. A contour that stays open is retried with 2 and 3 closing
   iterations. A marked copy from which no closed disc and cup can be recovered makes that rater
   invalid for that image (`rater_valid` False, with a warning).
   Then a square, disc-centred ROI is cut: centre = centre of the bounding box of the union of the
   valid raters' discs, side = `ROI_SCALE` × the larger box side (pixels outside the photo are
   black / background), resized to `SIZE`×`SIZE`. Centring on the raters' discs uses the
   annotations, as every disc/cup benchmark crop does (MR-Net's `DiscRegion` crops too).
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

JPEG limit: a 1-px line in a colour of about the same luminance as the fundus under it (green on
orange) is smeared by JPEG's 2×2 chroma subsampling below the threshold and cannot be recovered
(the rater is then marked invalid, with a warning); blue, black or 2-px lines are recovered with
Dice ≥ 0.93 on the fixtures. The real BinRushed ink colour has not been checked.

Reading seven full-size photos and deriving six raters' masks takes ~0.6-1 s per image (measured
on photos of the real sizes, 2240×1488 to 2743×1936), ≈ 10 min for the 750 images on one core,
so the result per image (the 256×256 image and six label maps) is cached as
`$BENCH_CACHE/riga-masks/<key>.npz`, keyed by the files' paths, sizes, modification times and
`RECIPE`; nothing is ever written into the data folder, and without `BENCH_CACHE` nothing is cached
here (the caller's whole-`Splits` cache still applies).
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
from scipy import ndimage as ndi

from datasets.contract import DataError, DatasetCard, RaterData, Splits, folder_problem, split_by_group
from datasets.noise import PROTOCOL, STYLE_NOTES, check_fixed, fixed_pool_info

log = logging.getLogger(__name__)

DATA_SEED = 0
SIZE = 256  # MR-Net's input size; one size for every image of the dataset
ROI_SCALE = 2.0  # ROI side / larger side of the raters' union disc box: the disc fills the central half
LOSSLESS_THRESHOLD = 0  # any change in a TIFF copy is ink
LOSSY_THRESHOLD = 40  # JPEG: compression noise near the ink stays below this (0-255 scale, max over RGB)
MAX_INK_FRACTION = 0.05  # drawn contours cover far less of a photo than this
MIN_CUP_FRACTION = 0.01  # a cup candidate smaller than this share of the disc is noise, not a contour
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


# ---------------------------------------------------------------- masks from marked copies


def outline_components(outline: np.ndarray, closing: int) -> tuple[np.ndarray, np.ndarray]:
    """Close the drawn curve, then label its 8-connected parts. Returns labels and sizes, largest first."""
    closed = ndi.binary_closing(outline, structure=np.ones((3, 3), bool), iterations=closing, border_value=0)
    labels, n = ndi.label(closed, structure=np.ones((3, 3), bool))
    sizes = np.bincount(labels.ravel(), minlength=n + 1)[1:]
    return labels, np.argsort(-sizes, kind="stable") + 1


def most_convex_hole(ring: np.ndarray, disc: np.ndarray) -> np.ndarray | None:
    """Touching contours: the holes inside the disc outline are the rim annulus (C-shaped) and the cup.

    The cup is the hole closest to convex (area / convex-hull area); it is grown back over the drawn
    line that bounds it (the ring width) so that it includes its own contour, like a filled outline.
    """
    from skimage.measure import regionprops  # scikit-image is a dependency; imported here because it is slow

    holes, n = ndi.label(disc & ~ring)
    props = [p for p in regionprops(holes) if p.area >= MIN_CUP_FRACTION * disc.sum()]
    if len(props) < 2:
        return None
    best = max(props, key=lambda p: p.solidity)
    width = max(1, int(round(2 * ndi.distance_transform_edt(ring).max())))
    cup = ndi.binary_dilation(holes == best.label, iterations=width, mask=ring | (holes == best.label))
    return ndi.binary_fill_holes(cup)


def derive_masks(prime: np.ndarray, marked: np.ndarray, lossy: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """Disc and cup of one rater from a clean image and the rater's marked copy.

    Args:
        prime, marked: uint8 (H, W, 3) (or (H, W)), the same shape.
        lossy: True where either file is JPEG (a higher difference threshold).
    Returns:
        (disc, cup) bool (H, W) with cup ⊂ disc, or None when no closed disc and cup contour is found.
    """
    diff = np.maximum(marked, prime) - np.minimum(marked, prime)  # |marked - prime| without overflow
    if diff.ndim == 3:
        diff = np.maximum(np.maximum(diff[..., 0], diff[..., 1]), diff[..., 2])
    ink = diff > (LOSSY_THRESHOLD if lossy else LOSSLESS_THRESHOLD)
    if not lossy and ink.mean() > MAX_INK_FRACTION:
        ink = diff > LOSSY_THRESHOLD  # a "lossless" copy changed everywhere (re-encoded): treat it as lossy
    rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
    if len(rows) == 0:
        return None
    # Work inside the bounding box of the ink (plus a margin for the closing): the photos are large.
    pad = 4
    r0, r1 = max(rows[0] - pad, 0), min(rows[-1] + pad + 1, ink.shape[0])
    c0, c1 = max(cols[0] - pad, 0), min(cols[-1] + pad + 1, ink.shape[1])
    box = ink[r0:r1, c0:c1]
    for closing in (1, 2, 3):
        labels, order = outline_components(box, closing)
        if len(order) == 0:
            return None
        ring = labels == order[0]
        disc = ndi.binary_fill_holes(ring)
        if disc.sum() < 1.5 * ring.sum():
            continue  # the disc contour is still open: close harder
        cup = None
        if len(order) >= 2:
            filled = ndi.binary_fill_holes(labels == order[1])
            inside = (filled & disc).sum()
            if inside >= 0.9 * filled.sum() and filled.sum() >= MIN_CUP_FRACTION * disc.sum():
                cup = filled & disc
        if cup is None:
            cup = most_convex_hole(ring, disc)
        if cup is None or cup.sum() > 0.98 * disc.sum():
            continue
        full_disc = np.zeros(ink.shape, bool)
        full_cup = np.zeros(ink.shape, bool)
        full_disc[r0:r1, c0:c1] = disc
        full_cup[r0:r1, c0:c1] = cup
        return full_disc, full_cup
    return None


def label_map(disc: np.ndarray, cup: np.ndarray) -> np.ndarray:
    """bool disc, cup (H, W) → uint8 class indices: 0 background, 1 rim (disc minus cup), 2 cup (inside the disc)."""
    out = disc.astype(np.uint8)
    out[cup & disc] = 2
    return out


# ---------------------------------------------------------------- ROI and resizing


def disc_roi(discs: np.ndarray) -> tuple[int, int, int]:
    """Square ROI around the union of the raters' discs (R, H, W) bool → (top, left, side), may leave the image."""
    union = discs.any(axis=0)
    rows, cols = np.nonzero(union)
    height, width = rows.max() - rows.min() + 1, cols.max() - cols.min() + 1
    side = int(np.ceil(ROI_SCALE * max(height, width)))
    top = int(np.floor((rows.min() + rows.max() + 1) / 2 - side / 2))
    left = int(np.floor((cols.min() + cols.max() + 1) / 2 - side / 2))
    return top, left, side


def crop_square(array: np.ndarray, top: int, left: int, side: int) -> np.ndarray:
    """array (H, W[, C]) → (side, side[, C]); zeros (black, background) where the square leaves the array."""
    out = np.zeros((side, side, *array.shape[2:]), dtype=array.dtype)
    r0, c0 = max(top, 0), max(left, 0)
    r1, c1 = min(top + side, array.shape[0]), min(left + side, array.shape[1])
    if r1 > r0 and c1 > c0:
        out[r0 - top : r1 - top, c0 - left : c1 - left] = array[r0:r1, c0:c1]
    return out


def resize_image(rgb: np.ndarray) -> np.ndarray:
    """uint8 (H, W, 3) → uint8 (SIZE, SIZE, 3), bilinear with Pillow's anti-aliasing when shrinking."""
    return np.asarray(Image.fromarray(rgb).resize((SIZE, SIZE), Image.Resampling.BILINEAR))


def resize_labels(labels: np.ndarray) -> np.ndarray:
    """uint8 class indices (H, W) → (SIZE, SIZE), nearest neighbour (no invented labels at edges)."""
    return np.asarray(Image.fromarray(labels).resize((SIZE, SIZE), Image.Resampling.NEAREST))


def to_input(rgb: np.ndarray) -> np.ndarray:
    """uint8 (H, W, 3) → float32 (3, H, W) in [0, 1]: a fixed scale keeps colour comparable across images."""
    return (rgb.astype(np.float32) / np.float32(255)).transpose(2, 0, 1)


# ---------------------------------------------------------------- one case


@dataclass
class Case:
    """One image: where it is, which subset, the prime and up to six marked copies (raw) or mask files (MR-Net)."""

    subset: str
    case_id: str
    image: Path
    raters: dict[int, Path] = field(default_factory=dict)


def cache_folder() -> Path | None:
    value = os.environ.get("BENCH_CACHE")
    return Path(value) / "riga-masks" if value else None


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


def mrnet_labels(mask: np.ndarray, lossy: bool) -> np.ndarray:
    """An MR-Net mask (H, W) uint8 → class indices: 0 / ~128 rim / 255 cup; {0, 1, 2} masks are class indices already."""
    if mask.max() <= 2:
        return mask.astype(np.uint8)
    disc = mask > (64 if lossy else 0)
    cup = mask > 191 if lossy else mask == 255
    return label_map(disc, cup)


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


def load_case(case: Case, raw: bool):
    """One case through the per-image cache ($BENCH_CACHE/riga-masks), which survives code edits elsewhere."""
    if not raw:
        return load_mrnet_case(case)
    folder = cache_folder()
    path = folder / f"{cache_key(case)}.npz" if folder is not None else None
    if path is not None and path.is_file():
        try:
            with np.load(path, allow_pickle=False) as f:
                return f["image"], f["labels"], f["valid"]
        except (OSError, ValueError, KeyError, EOFError):
            pass  # a damaged cache file is rebuilt
    result = load_raw_case(case)
    if result is not None and path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.npz")
        try:
            np.savez_compressed(tmp, image=result[0], labels=result[1], valid=result[2])
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
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


def build(cases: list[Case], raw: bool, part: str = "") -> RaterData:
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
        result = load_case(case, raw)
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


def load_riga(data_root: Path, raters: str | None = None, noise: str = PROTOCOL) -> Splits:
    """RIGA splits: train/val from BinRushed + MESSIDOR (90/10 by image, seed 0), test Magrabia.

    Rater style "real" and noise level "protocol" only: the six raters are real (another level is
    refused rather than trained again unchanged).
    """
    check_fixed("riga", raters, noise)
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
    train_all = build([c for c in cases if c.subset in TRAIN_SUBSETS], raw, "training (BinRushed, MESSIDOR)")
    test = build([c for c in cases if c.subset in TEST_SUBSETS], raw, "test (Magrabia)")
    # At least one validation image, so a tiny copy still has a validation set.
    fraction = max(VAL_FRACTION, 1 / train_all.n) if train_all.n > 1 else 0.0
    train, val = split_by_group(train_all.groups, (1 - fraction, fraction), seed=DATA_SEED)
    if len(val) == 0 or len(train) == 0:
        raise DataError(f"riga: {train_all.n} training image(s) under {root}/ cannot give both a train and a val part")
    rule = f"MR-Net: train BinRushed+MESSIDOR, test Magrabia; val = {fraction:.0%} of the training images by image (seed {DATA_SEED}); {version}"
    train_part = train_all.subset(train)
    return Splits(train_part, train_all.subset(val), test, rule, raters_info=fixed_pool_info("real", train_part.raters, None))
