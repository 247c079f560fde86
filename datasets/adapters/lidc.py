"""LIDC-IDRI lung nodules: CT crops with the masks of the four real readers who annotated each scan.

Two layouts are read (docs/datasets.md#lidc-on-disk-layouts (a) and (b)), found by a recursive walk
under `<data-root>/lidc/`:

(a) Kohl et al.'s crops (the LF-Net paper's preprocessing; DeepMind's `lidc_crops` archives,
    extracted): `<split>/images/<patient>/z-<z>_c<k>.png`, 180×180 8-bit CT at 0.5 mm, and
    `<split>/gt/<patient>/z-<z>_c<k>_l{0..3}.png` (the README's `_l1.._l4` is accepted too).
    `<split>` is train / val / test at any depth; the crops' own split is used.
(b) Knegt's `data_lidc.pickle` (any `*.pickle` / `*.pkl`; several files are merged): a dict
    `key → {'image': 128×128 float in [0, 1], 'masks': 4 × 128×128 {0, 1}, 'series_uid': str}`,
    keys `<patient>_<rest>`. Pickles can run code when loaded, so they are read only through
    `RestrictedUnpickler`, which admits dicts, lists, strings and numpy arrays and refuses every
    other global with a `DataError`.

Decisions:

- Both layouts present: `PREFER` (the crops, which are the paper's preprocessing); the rule string
  says that the pickle was ignored.
- Raters: the four readers per image, in file order (`_l0.._l3`, or the pickle's list order).
  They are four *slots*, not four people (readers come from a pool of about 12 radiologists), so
  `rater_ids_consistent=False`. Every slot is valid: an empty mask is a reader's "no lesion here".
- No ground truth (the paper's expert masks are private): evaluation reference "majority".
  Supplying expert masks from a user folder is future work.
- Images: the crops' uint8 / 255, the pickle's [0, 1] floats as shipped; no further normalisation.
  A crop or slice of another size is centre-cropped / zero-padded to 180×180 (crops) or the
  pickle's common size (128×128), which keeps the lesion centred and the spacing unchanged.
- Spacing: 0.5 mm for the crops (Kohl's resampling); the pickle does not record it, so 1 pixel.
- Split: the crops' train / val / test folders (patient-level by construction; a patient in two
  folders is an error). The pickle (or crops without split folders): patients shuffled with
  `DATA_SEED` and cut in the paper's 722 / 144 / 144 proportion, never by slice.
- Rater style "real" only, noise level "protocol" only (the raters are real; another level is refused rather than
  trained again unchanged). `raters_info` records the style and level, no strength, no Average (no GT).
"""

from __future__ import annotations

import codecs
import os
import pickle
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from datasets.contract import (
    DataError,
    DatasetCard,
    RaterData,
    RaterSetting,
    Splits,
    centre_fit,
    check_mask_values,
    check_not_constant,
    folder_problem,
)
from datasets.raters.pool import fixed_pool_info
from datasets.settings import REAL, STYLE_NOTES, DatasetSpec

try:  # numpy >= 2 moved numpy.core to numpy._core; pickles name either
    from numpy._core import multiarray as _multiarray
    from numpy._core import numeric as _numeric
except ImportError:  # pragma: no cover - numpy 1.x
    from numpy.core import multiarray as _multiarray
    from numpy.core import numeric as _numeric

DATA_SEED = 0
N_READERS = 4
RATER_NAMES = ("slot-0", "slot-1", "slot-2", "slot-3")  # reader slots, not identities
CROP_SIZE = (180, 180)
CROP_SPACING = (0.5, 0.5)  # mm: Kohl et al. resample in-plane to 0.5 mm
PAPER_PATIENTS = (722, 144, 144)  # train / val / test patients in the LF-Net paper
EXPECTED = {"crops": 8843 + 1993 + 1980, "pickle": 15096}  # images in the full releases (card)
PREFER = "crops"  # layout used when both are present: "crops" or "pickle"
SPLIT_FOLDERS = {"train": "train", "val": "val", "validation": "val", "test": "test"}

CROP = re.compile(r"^z-(?P<z>[^_]+)_c(?P<k>\d+)$")  # z-105.0_c0, z--52.5_c1
PICKLE_SUFFIXES = (".pickle", ".pkl")

CARD = DatasetCard(
    name="lidc",
    title="LIDC-IDRI lung nodule CT crops with four real readers (no consistent reader identities; rater style real)",
    source="Kohl et al. crops: gs://hpunet-data/lidc_crops/{train,val,test}.tar.gz (DeepMind hierarchical_probabilistic_unet "
    "README); or Knegt's data_lidc.pickle (stefanknegt/Probabilistic-Unet-Pytorch README)",
    licence="CC BY 3.0 (LIDC-IDRI, TCIA)",
    citation="Armato et al., Med. Phys. 38, 2011 (LIDC-IDRI); Kohl et al., NeurIPS 2018 (crops, Probabilistic U-Net)",
    counts="crops: 8,843 train / 1,993 val / 1,980 test images from 530 / 111 / 103 patients, 180×180 at 0.5 mm; "
    "pickle: ≈15,096 slices from 875 patients, 128×128, split by patient 722:144:144; 4 readers each, no GT (reference: majority)",
    download="the three crop archives train.tar.gz, val.tar.gz, test.tar.gz (extract them), or data_lidc.pickle",
    layout="<data-root>/lidc/ (any nesting), e.g. lidc/train/images/LIDC-IDRI-0001/z-105.0_c0.png and "
    "lidc/train/gt/LIDC-IDRI-0001/z-105.0_c0_l0.png; or lidc/data_lidc.pickle",
    raters=STYLE_NOTES["real"],
)


# ---------------------------------------------------------------------------------------
# Restricted unpickling
# ---------------------------------------------------------------------------------------


def _latin1_encode(text: str, encoding: str = "utf-8") -> bytes:
    """`_codecs.encode` as protocol-2 pickles of bytes use it, limited to the latin-1 codec."""
    if codecs.lookup(encoding).name != "iso8859-1":
        raise pickle.UnpicklingError(f"_codecs.encode with codec {encoding!r}")
    return text.encode("latin-1")


#: The only globals a LIDC pickle needs: numpy array and dtype reconstruction under both numpy
#: module names (numpy.core before 2.0, numpy._core after), protocol 5's `_frombuffer`, numpy
#: scalars, and latin-1 `_codecs.encode` for protocol-2 bytes. Dicts, lists, tuples, strings and
#: numbers have their own opcodes and need no global.
ALLOWED_GLOBALS = {
    **{(f"{core}.multiarray", "_reconstruct"): _multiarray._reconstruct for core in ("numpy.core", "numpy._core")},
    **{(f"{core}.multiarray", "scalar"): _multiarray.scalar for core in ("numpy.core", "numpy._core")},
    **{(f"{core}.numeric", "_frombuffer"): _numeric._frombuffer for core in ("numpy.core", "numpy._core")},
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("_codecs", "encode"): _latin1_encode,
}


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that builds only dicts, lists, strings, numbers and numpy arrays.

    Every global the stream asks for goes through `find_class` (GLOBAL, STACK_GLOBAL, INST, OBJ
    and the copyreg extension opcodes alike), so refusing there refuses any callable a crafted
    pickle could use to run code.
    """

    def __init__(self, file, path: Path):
        super().__init__(file, encoding="latin1")  # latin1: Python 2 pickles of numpy arrays
        self.path = path

    def find_class(self, module: str, name: str):
        allowed = ALLOWED_GLOBALS.get((module, name))
        if allowed is None:
            raise DataError(
                f"{self.path}: refused to unpickle the global {module}.{name}; a LIDC pickle holds only dicts, lists, strings "
                "and numpy arrays, so this file is not one (or was tampered with): do not load it"
            )
        return allowed

    def persistent_load(self, pid):
        raise DataError(f"{self.path}: refused a persistent id in the pickle; this is not a LIDC data pickle")


def read_pickle(path: Path) -> object:
    """Unpickle `path` with `RestrictedUnpickler`; unreadable or truncated files raise DataError."""
    try:
        with open(path, "rb") as f:
            return RestrictedUnpickler(f, path).load()
    except DataError:
        raise
    except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError, AttributeError, IndexError, KeyError) as e:
        raise DataError(f"{path}: unreadable or truncated pickle ({type(e).__name__}: {e}); copy it again") from None


# ---------------------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------------------


def walk(folder: Path) -> list[Path]:
    """Every file under `folder`, following symlinked folders, sorted."""
    return sorted(Path(d) / f for d, _, files in os.walk(folder, followlinks=True) for f in files)


def split_patients(groups: np.ndarray, seed: int) -> list[np.ndarray]:
    """Image indices of train / val / test: patients shuffled with `seed`, cut 722:144:144.

    The cut is by patient count, as the paper states its split; val and test get at least one
    patient each.
    """
    patients = np.unique(groups)
    if len(patients) < 3:
        raise DataError(f"lidc: {len(patients)} patient(s) are too few for a train/val/test split by patient")
    share = np.array(PAPER_PATIENTS[1:]) / sum(PAPER_PATIENTS)
    n_val, n_test = np.maximum(1, np.round(share * len(patients)).astype(int))
    n_train = len(patients) - n_val - n_test
    shuffled = patients[np.random.default_rng(seed).permutation(len(patients))]
    part = {p: 0 if i < n_train else 1 if i < n_train + n_val else 2 for i, p in enumerate(shuffled)}
    which = np.array([part[g] for g in groups])
    return [np.flatnonzero(which == k) for k in range(3)]


def build(images: np.ndarray, raters: np.ndarray, case_ids: list[str], groups: list[str], spacing: tuple[float, float]) -> RaterData:
    """images (N, H, W) float32, raters (N, 4, H, W) uint8 → RaterData with four valid reader slots and no GT."""
    return RaterData(
        images=images[:, None],
        raters=raters,
        rater_valid=np.ones(raters.shape[:2], dtype=bool),
        gt=None,
        case_ids=np.array(case_ids),
        groups=np.array(groups),
        rater_names=RATER_NAMES,
        rater_ids_consistent=False,
        raters_simulated=False,
        spacing=spacing,
    )


def contiguous_splits(data: RaterData, sizes: list[int], rule: str) -> Splits:
    """`data` ordered train, val, test with `sizes` images each → Splits whose parts are views, not copies."""
    for part, size in zip(("train", "val", "test"), sizes):
        if size == 0:
            raise DataError(f"lidc: the {part} split is empty ({rule})")
    a, b = sizes[0], sizes[0] + sizes[1]
    train = data.subset(slice(0, a))
    info = fixed_pool_info("real", train.raters, train.gt)
    return Splits(train, data.subset(slice(a, b)), data.subset(slice(b, data.n)), rule, raters_info=info)


# ---------------------------------------------------------------------------------------
# (a) Kohl crops
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Crop:
    image: Path
    masks: tuple[Path, ...]  # the four readers' PNGs, in slot order
    patient: str
    split: str | None  # train / val / test from the folders, None outside them

    @property
    def case_id(self) -> str:
        return f"{self.patient}/{self.image.stem}"

    def sort_key(self) -> tuple:
        match = CROP.match(self.image.stem)
        try:
            z = float(match["z"])
        except ValueError:
            z = float("inf")
        return self.patient, z, int(match["k"]), str(self.image)


def read_png(path: Path) -> np.ndarray:
    """A PNG as a 2-D array in its stored integer type (colour → grey)."""
    try:
        with Image.open(path) as image:
            image.load()
            array = np.asarray(image.convert("L") if image.mode in ("RGB", "RGBA", "LA", "P") else image)
    except (OSError, ValueError) as e:
        raise DataError(f"{path}: unreadable PNG ({e}); extract it again") from None
    return array


def crop_split(image: Path) -> str | None:
    """train / val / test from the nearest ancestor above `images/` with such a name, else None."""
    for folder in image.parents[2:]:
        if folder.name.lower() in SPLIT_FOLDERS:
            return SPLIT_FOLDERS[folder.name.lower()]
    return None


def find_crops(files: list[Path]) -> list[Crop]:
    """Every crop `<…>/images/<patient>/z-<z>_c<k>.png` in `files` with its four reader masks, sorted."""
    present = set(files)
    crops = []
    for path in files:
        if path.suffix.lower() != ".png" or path.parent.parent.name != "images" or not CROP.match(path.stem):
            continue
        patient = path.parent.name
        gt_dir = path.parent.parent.parent / "gt" / patient
        for first in (0, 1):  # every public loader uses _l0.._l3; the README says labeller ids 1-4
            masks = tuple(gt_dir / f"{path.stem}_l{first + r}.png" for r in range(N_READERS))
            if all(m in present for m in masks):
                break
        else:
            masks = tuple(gt_dir / f"{path.stem}_l{r}.png" for r in range(N_READERS))
            missing = next(m for m in masks if m not in present)
            raise DataError(
                f"lidc: {path} lacks the reader mask {missing} (expected {path.stem}_l0..l3.png or _l1..l4.png); extract it again"
            )
        crops.append(Crop(path, masks, patient, crop_split(path)))
    return sorted(crops, key=Crop.sort_key)


def read_crops(crops: list[Crop]) -> RaterData:
    """Crops, in the given order → RaterData: images uint8/255 (N, 1, 180, 180), readers > 0 (N, 4, 180, 180)."""
    images = np.empty((len(crops), *CROP_SIZE), dtype=np.float32)
    raters = np.empty((len(crops), N_READERS, *CROP_SIZE), dtype=np.uint8)
    for i, crop in enumerate(crops):
        image = read_png(crop.image)
        if image.dtype not in (np.uint8, np.uint16):
            raise DataError(f"{crop.image}: {image.dtype} pixels, expected an 8-bit grey CT crop")
        check_not_constant(image, crop.image, "CT crop")
        images[i] = centre_fit(image.astype(np.float32) / np.iinfo(image.dtype).max, CROP_SIZE)
        for r, mask_path in enumerate(crop.masks):
            mask = read_png(mask_path)
            if mask.shape != image.shape:
                raise DataError(
                    f"{mask_path}: mask is {mask.shape[0]}×{mask.shape[1]} but {crop.image.name} is {image.shape[0]}×{image.shape[1]}"
                )
            if len(np.unique(mask)) > 3:  # binarised with > 0 (any label value); a grey image is no mask
                raise DataError(f"{mask_path}: not a reader mask ({len(np.unique(mask))} distinct values; expected 0/1 or 0/255)")
            raters[i, r] = centre_fit((mask > 0).astype(np.uint8), CROP_SIZE)
    return build(images, raters, [c.case_id for c in crops], [c.patient for c in crops], CROP_SPACING)


def split_crops(crops: list[Crop]) -> tuple[list[np.ndarray], str]:
    """Indices into `crops` of train, val and test: the crops' own split folders, else a patient split."""
    splits = np.array([c.split for c in crops], dtype=object)
    patients = np.array([c.patient for c in crops])
    if all(s is None for s in splits):
        rule = f"crops without split folders: random by patient (seed {DATA_SEED}) in the paper's 722:144:144 proportion"
        return split_patients(patients, DATA_SEED), rule
    if any(s is None for s in splits):
        stray = next(c.image for c in crops if c.split is None)
        raise DataError(f"lidc: {stray} is not under a train/, val/ or test/ folder, but other crops are; keep the archives' folders")
    for part in ("train", "val", "test"):
        if part not in splits:
            raise DataError(f"lidc: crops found, but none under a {part}/ folder; download and extract {part}.tar.gz")
    for patient in np.unique(patients):
        where = sorted(set(splits[patients == patient]), key=("train", "val", "test").index)
        if len(where) > 1:
            raise DataError(f"lidc: patient {patient} has crops in both {where[0]}/ and {where[1]}/; the crops' split must be by patient")
    index = [np.flatnonzero(splits == part) for part in ("train", "val", "test")]
    counts = "/".join(str(len(set(patients[i]))) for i in index)
    return index, f"Kohl crops' own train/val/test folders (by patient: {counts} patients)"


# ---------------------------------------------------------------------------------------
# (b) Knegt pickle
# ---------------------------------------------------------------------------------------


def pickle_entries(path: Path) -> dict[str, dict]:
    """One pickle file → {key: {'image', 'masks', 'series_uid'}} with its structure checked."""
    content = read_pickle(path)
    if not isinstance(content, dict):
        raise DataError(f"{path}: holds a {type(content).__name__}, expected Knegt's dict key → {{'image', 'masks', 'series_uid'}}")
    for key, entry in content.items():
        if not isinstance(key, str) or not isinstance(entry, dict) or "image" not in entry or "masks" not in entry:
            raise DataError(f"{path}: entry {key!r} is not {{'image': array, 'masks': [4 arrays], 'series_uid': str}}")
    return content


def check_entry(key: str, entry: dict, path: Path) -> None:
    """Knegt's format: a finite 2-D image in [0, 1] and four masks of its shape."""
    image = np.asarray(entry["image"])
    masks = entry["masks"]
    if image.ndim != 2 or image.dtype.kind not in "fiu" or not np.isfinite(image).all():
        raise DataError(f"{path}: entry {key!r} has no finite 2-D numeric 'image'")
    if image.min() < 0 or image.max() > 1:
        raise DataError(f"{path}: entry {key!r} has image values in [{image.min():g}, {image.max():g}], expected [0, 1]")
    if len(masks) != N_READERS:
        raise DataError(f"{path}: entry {key!r} has {len(masks)} masks, expected {N_READERS}")
    for r, mask in enumerate(masks):
        mask = np.asarray(mask)
        if mask.shape != image.shape or mask.dtype.kind not in "biuf":
            raise DataError(f"{path}: entry {key!r} mask {r} is {mask.shape} {mask.dtype}, the image {image.shape}")
        check_mask_values(mask, f"{path}: entry {key!r} mask {r}")


def merge_pickles(paths: list[Path]) -> dict[str, tuple[dict, Path]]:
    """Every entry of every pickle, checked → {key: (entry, its file)}; a key in two files is an error."""
    entries: dict[str, tuple[dict, Path]] = {}
    for path in paths:
        for key, entry in pickle_entries(path).items():
            check_entry(key, entry, path)
            if key in entries:
                raise DataError(f"lidc: key {key!r} is in both {entries[key][1]} and {path}; keep one copy")
            entries[key] = (entry, path)
    if not entries:
        raise DataError(f"lidc: {', '.join(map(str, paths))} hold no slices; download data_lidc.pickle again")
    return entries


def pickle_patient(key: str, entry: dict, path: Path) -> str:
    """The patient of a pickle entry: the key before its first `_`, else the series UID."""
    if "_" in key:
        return key.split("_", 1)[0]
    if isinstance(entry.get("series_uid"), str) and entry["series_uid"]:
        return entry["series_uid"]
    raise DataError(f"{path}: key {key!r} has no '<patient>_' prefix and the entry no series_uid; cannot split by patient")


def read_pickle_slices(entries: dict[str, tuple[dict, Path]], keys: list[str]) -> RaterData:
    """The entries at `keys`, in that order → RaterData: images as stored in [0, 1] (N, 1, H, W), readers > 0 (N, 4, H, W)."""
    shapes = [np.shape(entries[k][0]["image"]) for k in keys]
    size = max(sorted(set(shapes)), key=shapes.count)  # the most common size (128×128 in Knegt's file)
    images = np.empty((len(keys), *size), dtype=np.float32)
    raters = np.empty((len(keys), N_READERS, *size), dtype=np.uint8)
    for i, key in enumerate(keys):
        entry = entries[key][0]
        images[i] = centre_fit(np.asarray(entry["image"], dtype=np.float32), size)
        for r, mask in enumerate(entry["masks"]):
            raters[i, r] = centre_fit((np.asarray(mask) > 0).astype(np.uint8), size)
    groups = [pickle_patient(k, entries[k][0], entries[k][1]) for k in keys]
    return build(images, raters, keys, groups, (1.0, 1.0))


# ---------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------


def load_lidc(data_root: Path, setting: RaterSetting, level: str, cache: Path | None) -> Splits:
    """`<data-root>/lidc/` → Splits: Kohl crops by their split folders, or Knegt's pickle by patient 722:144:144.

    The split is decided before any pixel is decoded and the images are read in train, val, test
    order into one array whose parts are views (the crops take 3.3 GB; copies would double it).
    """
    del setting, level, cache  # real raters at "protocol" (`checked_loader` lets nothing else through); cached whole by bench
    folder = Path(data_root) / "lidc"
    if not folder.is_dir():
        raise DataError(f"lidc: {folder}/ {folder_problem(folder, 'does not exist')}; download {CARD.download} and put them in {folder}/")
    files = walk(folder)
    crops = find_crops(files)
    pickles = [p for p in files if p.suffix.lower() in PICKLE_SUFFIXES]
    if not crops and not pickles:
        archives = [p.name for p in files if p.name.endswith((".tar.gz", ".tgz", ".tar"))]
        hint = f"extract {', '.join(archives)} there (tar xzf)" if archives else f"download {CARD.download} and put them there"
        raise DataError(f"lidc: no crops (<split>/images/<patient>/z-<z>_c<k>.png) or *.pickle under {folder}/; {hint}")
    layout = "crops" if crops and (PREFER == "crops" or not pickles) else "pickle"
    if layout == "crops":
        parts, rule = split_crops(crops)
        if pickles:
            rule += f"; {', '.join(p.name for p in pickles)} ignored (PREFER = 'crops')"
        data = read_crops([crops[i] for part in parts for i in part])
    else:
        entries = merge_pickles(pickles)
        keys = sorted(entries)
        patients = np.array([pickle_patient(k, *entries[k]) for k in keys])
        parts = split_patients(patients, DATA_SEED)
        rule = f"Knegt pickle: random by patient (key prefix; seed {DATA_SEED}) in the paper's 722:144:144 proportion"
        if crops:
            rule += "; crops ignored (PREFER = 'pickle')"
        data = read_pickle_slices(entries, [keys[i] for part in parts for i in part])
    if data.n != EXPECTED[layout]:
        warnings.warn(f"lidc: found {data.n} images ({layout}) under {folder}/; the full release has {EXPECTED[layout]}", stacklevel=2)
    return contiguous_splits(data, [len(p) for p in parts], rule)


#: This module's registration: the datasets it adds to the registry (datasets/__init__.py `collect`).
SPECS = (DatasetSpec(CARD, load_lidc, 2, 2, 160, 32, reference="majority", order=40, **REAL),)
