"""ISBI 2015 longitudinal MS lesion challenge: `ms-lesion` (five simulated raters) and `ms-lesion-real`.

The on-disk layout and how it is read: datasets/adapters/ms_lesion/files.py. The test subjects (``testNN``) have no
masks and are skipped.

Decisions (the paper states only "10 scans for training, 11 for testing, 20 % of the training
images as validation" and "five simulated raters as Zhang et al."; docs/datasets.md#ms-lesion-decisions):

* **Input**: FLAIR only (`CONTRASTS`), one channel: the usual choice for white-matter lesions and
  the cheapest. Setting `CONTRASTS = ALL_CONTRASTS` stacks FLAIR, MPRAGE, PD and T2 in that order.
* **Normalisation**: per scan and contrast, a z-score with the mean and standard deviation of the
  brain voxels (non-zero: the preprocessed volumes are skull-stripped). It is one affine map per
  volume, so the background keeps one constant value below the brain's mean.
* **Slicing**: axial, along nibabel's third axis (z). A slice is the (x, y) plane transposed to
  (y, x), so an image is (217, 181) with rows along y, and `spacing` = (dy, dx) from the header's
  zooms. Kept slices (`SLICES`): ``"lesion"`` (default) keeps the slices where either ISBI rater
  (mask1 or mask2) marks a lesion voxel, the same slices for both dataset names, every noise level
  and every `GT_RATER`, so results stay comparable; ``"brain"`` keeps every slice with brain.
  Volumes whose (x, y) size differs from the first scan's are centre-cropped or zero-padded to it.
* **Ground truth** (`GT_RATER`): rater 1's mask (``"mask1"``) by default; ``"mask2"``,
  ``"intersection"`` or ``"union"`` of the two are the alternatives. It is the evaluation reference
  of `ms-lesion` and the mask the raters are simulated from; the card names it.
* **Simulated raters** (`ms-lesion`, R = 5, `RATER_NAMES` order): the rules that reproduce Zhang et al.'s
  released MS data exactly, on the 3-D GT volume and then sliced (datasets/raters/ms.py).
* **Rater style and noise**: the style is `ms` (the only one). The rules are whole passes, so the
  style's knob k scales the number of passes, rounded half up: round(1·k) erosions, round(2·k)
  edge-add passes and round(2·k) deletion passes (`passes_at`). Noise level "protocol" is k = 1,
  the official rules; k = 0 makes every rater but blank equal GT, and the rater noise grows
  monotonically in steps (e.g. k = 1.5 → 2 erosions, 3 edge-add passes, 3 deletions). A target
  Average DSC bisects k on [0, `KNOB_HI`] over the training slices; since the Average moves in
  steps, a target that no step lands within 0.01 of is refused, naming the step it falls in.
  `datasets.raters.simulate_raters` (the continuous 2-D MNIST simulator) is not used: it would
  change the rater family between noise levels.
* **Usability** (datasets/raters/pool.py `pool_info`): a target level whose training pool is degenerate
  is refused. The protocol is recorded and warned about, never refused: one 3-D erosion empties
  the thin ends of most lesions, so "under" (and with it the threshold-voting mask at β = 4) is
  empty on many lesion slices by the released rules themselves.
* **Real raters** (`ms-lesion-real`): mask1 and mask2 as two identity-consistent raters, no GT
  (the evaluation reference is the majority vote); rater style `real`, noise level "protocol" only.
* **Split**: by subject, so no subject's time points fall in two parts (the paper's split is by
  scan). The training subjects are the subset whose scan count is closest to the paper's 10 of
  21 (ties: fewer training scans, then the first subjects by name): on ISBI (4, 4, 5, 4, 4 time
  points) that is training01 + training03, 9 scans, and 12 test scans (training02, 04, 05).
  Validation is by scan: 20 % of the training scans (at least one), drawn with seed 0; it shares
  subjects with train, which only matters if it is used for model selection.
"""

from __future__ import annotations

import functools
import itertools
import warnings
from pathlib import Path

import numpy as np

from datasets.adapters.ms_lesion.files import Scan, find_scans, read_nifti, zscore_brain
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
from datasets.raters import RATER_NAMES
from datasets.raters.levels import simulate_level
from datasets.raters.ms import passes_at, simulate_ms_raters
from datasets.raters.pool import fixed_pool_info
from datasets.settings import REAL, STYLE_NOTES, DatasetSpec

DATA_SEED = 0
ALL_CONTRASTS = ("flair", "mprage", "pd", "t2")
#: Input channels, in this order; FLAIR alone is the usual choice for lesions.
CONTRASTS = ("flair",)
#: Which ISBI mask is the ground truth of `ms-lesion`: "mask1", "mask2", "intersection", "union".
GT_RATER = "mask1"
GT_RATERS = ("mask1", "mask2", "intersection", "union")
#: Which axial slices are kept: "lesion" (either rater marks lesion) or "brain" (any brain voxel).
SLICES = "lesion"
#: The paper's split: 10 of the 21 training scans for training (Zhang et al.).
TRAIN_SCAN_FRACTION = 10 / 21
VAL_FRACTION = 0.2
EXPECTED_SCANS = 21
REAL_RATER_NAMES = ("mask1", "mask2")

#: Top of the knob's bisection bracket for a target level: 4 erosions, 8 edge-add and 8 deletion passes.
KNOB_HI = 4.0

_SOURCE = "https://smart-stats-tools.org/lesion-challenge-2015 (free registration)"
_LICENCE = "ISBI 2015 challenge data: free for research after registration; cite Carass et al. 2017 (terms unconfirmed)"
_CITATION = "Carass et al., Longitudinal multiple sclerosis lesion segmentation: resource and challenge, NeuroImage 148:77-102, 2017"
_DOWNLOAD = "the challenge's training data: training/training01 … training05, each with preprocessed/ and masks/ (the test data have no masks and are not used)"
_LAYOUT = "<data-root>/ms-lesion/ (the unpacked challenge folder, any nesting; .nii or .nii.gz)"
_COUNTS = (
    "21 training scans with two raters' masks (5 subjects × 4-5 time points, 181×217×181 at 1 mm); "
    "by subject: 9 scans train+val (7 train / 2 val) and 12 test; FLAIR axial slices where either rater marks "
    "lesion (tens per scan), each 217×181"
)

CARD = DatasetCard(
    name="ms-lesion",
    title=f"ISBI 2015 MS lesions, FLAIR axial slices, five simulated raters from the GT = {GT_RATER} (the paper; "
    "rater style ms: CM-UNet's released MS rules)",
    source=_SOURCE,
    licence=_LICENCE,
    citation=_CITATION + "; raters after Zhang et al., NeurIPS 2020 (CM-UNet), rules of their released MS data",
    counts=_COUNTS + "; 5 raters (good, over, under, wrong, blank)",
    download=_DOWNLOAD,
    layout=_LAYOUT,
    raters=STYLE_NOTES["ms"],
)
CARD_REAL = DatasetCard(
    name="ms-lesion-real",
    title="ISBI 2015 MS lesions, FLAIR axial slices, the two real raters (mask1, mask2; rater style real), no GT (reference: majority)",
    source=_SOURCE,
    licence=_LICENCE,
    citation=_CITATION,
    counts=_COUNTS + "; 2 real raters",
    download=_DOWNLOAD,
    layout=_LAYOUT,
    raters=STYLE_NOTES["real"],
)


# ---------------------------------------------------------------------------------------
# The GT volume
# ---------------------------------------------------------------------------------------


def gt_volume(mask1: np.ndarray, mask2: np.ndarray, gt_rater: str) -> np.ndarray:
    """The GT volume named by `gt_rater` from the two ISBI masks (bool, same shape)."""
    if gt_rater == "mask1":
        return mask1
    if gt_rater == "mask2":
        return mask2
    if gt_rater == "intersection":
        return mask1 & mask2
    if gt_rater == "union":
        return mask1 | mask2
    raise DataError(f"ms-lesion: unknown GT rater {gt_rater!r}; choose one of {', '.join(GT_RATERS)}")


# ---------------------------------------------------------------------------------------
# Splits
# ---------------------------------------------------------------------------------------


def choose_train_subjects(scan_counts: dict[str, int], fraction: float = TRAIN_SCAN_FRACTION) -> tuple[str, ...]:
    """Training subjects whose scan count is closest to `fraction` of all scans.

    Every proper, non-empty subset of subjects is tried (ties: fewer training scans, then the
    first subjects by name); above 16 subjects, the first subjects by name are taken instead.
    """
    subjects = sorted(scan_counts)
    if len(subjects) < 2:
        raise DataError(
            f"ms-lesion: found scans of {len(subjects)} subject(s) ({', '.join(subjects)}); a subject-level split needs at least 2"
        )
    target = fraction * sum(scan_counts.values())
    if len(subjects) > 16:
        cumulative = np.cumsum([scan_counts[s] for s in subjects])[:-1]
        k = int(np.argmin(np.abs(cumulative - target))) + 1
        return tuple(subjects[:k])
    best = None
    for k in range(1, len(subjects)):
        for combo in itertools.combinations(subjects, k):
            n = sum(scan_counts[s] for s in combo)
            key = (abs(n - target), n, combo)
            best = key if best is None else min(best, key)
    return best[2]


def choose_val_scans(train_scans: list[str], fraction: float = VAL_FRACTION) -> list[str]:
    """`fraction` of the training scans (at least one when there are two or more), seed `DATA_SEED`."""
    if len(train_scans) < 2:
        return []
    n_val = max(1, int(np.floor(fraction * len(train_scans) + 0.5)))
    order = np.random.default_rng(DATA_SEED).permutation(len(train_scans))
    return sorted(train_scans[i] for i in order[:n_val])


# ---------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------


def load_ms_lesion(data_root: Path, setting: RaterSetting, level: str, cache: Path | None, gt_rater: str = GT_RATER) -> Splits:
    """`ms-lesion`: FLAIR slices, the five simulated raters (style `ms`) made from `gt_rater`'s 3-D masks, and GT."""
    del cache  # the splits are cached whole (bench/run/split_cache.py)
    return _load(data_root, level, simulated=True, gt_rater=gt_rater, style=setting.style)


def load_ms_lesion_real(data_root: Path, setting: RaterSetting, level: str, cache: Path | None) -> Splits:
    """`ms-lesion-real`: FLAIR slices and the two real raters (mask1, mask2); no GT; style `real`, level "protocol" only
    (the registry's `fixed_raters`)."""
    del cache  # the splits are cached whole (bench/run/split_cache.py)
    return _load(data_root, level, simulated=False, gt_rater=GT_RATER, style=setting.style)


def _load(
    data_root: Path,
    level: str,
    *,
    simulated: bool,
    gt_rater: str,
    style: str,
    contrasts: tuple[str, ...] | None = None,
    slices: str | None = None,
) -> Splits:
    contrasts = CONTRASTS if contrasts is None else contrasts
    slices = SLICES if slices is None else slices
    if gt_rater not in GT_RATERS:
        raise DataError(f"ms-lesion: unknown GT rater {gt_rater!r}; choose one of {', '.join(GT_RATERS)}")
    if slices not in ("lesion", "brain"):
        raise DataError(f"ms-lesion: unknown slice rule {slices!r}; choose 'lesion' or 'brain'")
    root = Path(data_root) / "ms-lesion"
    if not root.is_dir():
        raise DataError(
            f"ms-lesion: {root}/ {folder_problem(root)}; download the ISBI 2015 training data ({_SOURCE}) and unpack it into {root}/"
        )
    scans = [s for s in find_scans(root) if s.subject.startswith("training")]
    if not scans:
        raise DataError(
            f"ms-lesion: no files named trainingNN_TT_flair_pp.nii[.gz] or trainingNN_TT_mask1.nii[.gz] under {root}/; unpack the challenge's training/ folder there"
        )
    for scan in scans:
        missing = [f"{scan.scan_id}_{c}_pp.nii" for c in contrasts if c not in scan.images]
        missing += [f"{scan.scan_id}_{m}.nii" for m in REAL_RATER_NAMES if m not in scan.masks]
        if missing:
            found = next(iter({**scan.images, **scan.masks}.values()))
            raise DataError(
                f"ms-lesion: {scan.scan_id} has no {' or '.join(missing)}[.gz] (found {found}); every training scan needs {', '.join(contrasts)} and both masks"
            )
    if len(scans) != EXPECTED_SCANS:
        warnings.warn(f"ms-lesion: found {len(scans)} training scans under {root}/, the challenge has {EXPECTED_SCANS}", stacklevel=2)

    parts, target, spacing = [], None, None
    for scan in scans:
        part = _slices_of(scan, contrasts, simulated, gt_rater, slices, target)
        if target is None:
            target, spacing, first = part["xy"], part["spacing"], scan
        elif not np.allclose(part["spacing"], spacing, rtol=1e-3):
            raise DataError(
                f"ms-lesion: {scan.images[contrasts[0]]} has voxel size {part['spacing']} mm, {first.images[contrasts[0]]} has {spacing}; use the preprocessed (1 mm) volumes"
            )
        parts.append(part)
    if sum(len(p["ids"]) for p in parts) == 0:
        raise DataError(
            f"ms-lesion: no axial slice of the {len(scans)} scans under {root}/ is kept (rule {slices!r}): are the masks empty?"
        )
    case_ids = np.concatenate([p["ids"] for p in parts])
    groups = np.concatenate([p["groups"] for p in parts])
    (train, val, test), rule = _split(case_ids, groups, scans, slices)
    if len(train) == 0:
        raise DataError(f"ms-lesion: the train split is empty ({rule}); add data so that every part gets images")

    if simulated:
        gt = np.concatenate([p["gt"] for p in parts])
        raters, info = _simulate(parts, gt, train, style, level)
    else:
        gt, raters = None, np.concatenate([p["raters"] for p in parts])
    data = RaterData(
        images=np.concatenate([p["images"] for p in parts]),
        raters=raters,
        rater_valid=np.ones((len(case_ids), len(RATER_NAMES) if simulated else len(REAL_RATER_NAMES)), dtype=bool),
        gt=gt,
        case_ids=case_ids,
        groups=groups,
        rater_names=RATER_NAMES if simulated else REAL_RATER_NAMES,
        rater_ids_consistent=True,
        raters_simulated=simulated,
        spacing=(spacing[1], spacing[0]),  # rows run along y, columns along x
    )
    train_data = data.subset(train)
    if not simulated:
        info = fixed_pool_info(style, train_data.raters, None)
    return Splits(train=train_data, val=data.subset(val), test=data.subset(test), rule=rule, raters_info=info)


def _simulate(parts: list[dict], gt: np.ndarray, train: np.ndarray, style: str, level: str) -> tuple[np.ndarray, dict]:
    """The five raters of every kept slice at the level's knob value -> (raters (K, 5, Y, X), raters_info).

    parts: one dict per scan with its 3-D GT volume "gt3d" and kept slices "keep"; gt: the GT
    slices of all scans (K, Y, X); train: the indices of the training slices, whole scans.
    The Average of the training slices at a knob value depends only on the pass counts, so it
    is measured once per distinct `passes_at` during the bisection (`simulate_level`'s `same_pool`).
    """
    starts = np.cumsum([0] + [len(p["ids"]) for p in parts])[:-1]
    in_train = set(train.tolist())
    is_train = [bool(len(p["ids"])) and int(start) in in_train for p, start in zip(parts, starts)]

    def raters_of(training: bool, knob: float) -> np.ndarray:
        # The training scans' (or the others') raters, (5, X, Y, Z) -> (K, 5, Y, X): one image per kept z, rows along y.
        scans = [p for p, t in zip(parts, is_train) if t == training]
        return np.concatenate([np.transpose(simulate_ms_raters(p["gt3d"], knob)[..., p["keep"]], (3, 0, 2, 1)) for p in scans])

    simulate = {"train": functools.partial(raters_of, True), "rest": functools.partial(raters_of, False)}
    by_part, info = simulate_level(
        "ms-lesion", style, level, gt[train], simulate, hi=KNOB_HI, searched_on="the training slices", same_pool=passes_at
    )
    raters = np.empty((len(gt), *by_part["train"].shape[1:]), dtype=by_part["train"].dtype)
    raters[train], raters[np.setdiff1d(np.arange(len(gt)), train)] = by_part["train"], by_part["rest"]
    return raters, info


def _slices_of(
    scan: Scan,
    contrasts: tuple[str, ...],
    simulated: bool,
    gt_rater: str,
    slices: str,
    target: tuple[int, int] | None,
) -> dict:
    """Decode one scan and cut its kept axial slices: images (K, C, Y, X), gt (K, Y, X) and, for the
    simulated raters, the 3-D GT volume "gt3d" (X, Y, Z) and the kept z "keep"; for the real raters,
    raters (K, 2, Y, X)."""
    volumes, spacing, shape, shape_from = [], None, None, None
    for contrast in contrasts:
        volume, zooms = read_nifti(scan.images[contrast])
        check_not_constant(volume, scan.images[contrast], "volume")
        if shape is None:
            shape, shape_from, spacing = volume.shape, scan.images[contrast], zooms
        elif volume.shape != shape:
            raise DataError(
                f"ms-lesion: {scan.images[contrast]} is {volume.shape}, {shape_from} is {shape}; the contrasts of one scan must match"
            )
        volumes.append(volume)
    masks = {}
    for name in REAL_RATER_NAMES:
        mask, _ = read_nifti(scan.masks[name])
        check_mask_values(mask, scan.masks[name])
        if mask.shape != shape:
            raise DataError(f"ms-lesion: mask {scan.masks[name]} is {mask.shape}, image {shape_from} is {shape}; download the scan again")
        masks[name] = mask > 0

    target = target or shape[:2]
    volumes = [centre_fit(v, target, axes=(0, 1)) for v in volumes]
    mask1, mask2 = (centre_fit(masks[name], target, axes=(0, 1)) for name in REAL_RATER_NAMES)
    if slices == "lesion":
        keep = np.flatnonzero((mask1 | mask2).any(axis=(0, 1)))
    else:
        keep = np.flatnonzero(np.any([(v != 0).any(axis=(0, 1)) for v in volumes], axis=0))
    image = np.stack([zscore_brain(v) for v in volumes])  # (C, X, Y, Z)

    # (…, X, Y, Z) -> (K, …, Y, X): one image per kept z, rows along y.
    out = {
        "images": np.ascontiguousarray(np.transpose(image[..., keep], (3, 0, 2, 1))),
        "ids": np.array([f"{scan.scan_id}_z{z:03d}" for z in keep]),
        "groups": np.array([scan.subject] * len(keep)),
        "xy": tuple(target),
        "spacing": spacing,
        "keep": keep,
    }
    if simulated:
        # The raters are simulated on the 3-D volume and then sliced, as the official data (`_simulate`).
        gt = gt_volume(mask1, mask2, gt_rater)
        out["gt3d"] = gt
        out["gt"] = np.ascontiguousarray(np.transpose(gt[..., keep], (2, 1, 0))).astype(np.uint8)
    else:
        out["raters"] = np.ascontiguousarray(np.transpose(np.stack([mask1, mask2]).astype(np.uint8)[..., keep], (3, 0, 2, 1)))
    return out


def _split(case_ids: np.ndarray, groups: np.ndarray, scans: list[Scan], slices: str) -> tuple[list[np.ndarray], str]:
    """Slice indices of train, val and test (each part whole scans) and the rule that made them."""
    counts: dict[str, int] = {}
    for scan in scans:
        counts[scan.subject] = counts.get(scan.subject, 0) + 1
    train_subjects = choose_train_subjects(counts)
    train_scans = [s.scan_id for s in scans if s.subject in train_subjects]
    val_scans = choose_val_scans(train_scans)
    scan_of = np.array([c.rsplit("_z", 1)[0] for c in case_ids])
    in_train = np.isin(groups, train_subjects)
    in_val = np.isin(scan_of, val_scans)
    test_subjects = sorted(set(counts) - set(train_subjects))
    n_test = sum(counts[s] for s in test_subjects)
    kept = "slices where mask1 or mask2 marks lesion" if slices == "lesion" else "slices with brain"
    for part, subjects, index in (("train", train_subjects, in_train), ("test", test_subjects, ~in_train)):
        if not index.any():
            raise DataError(f"ms-lesion: the {part} subjects ({', '.join(subjects)}) have no axial {kept}; check their masks")
    rule = (
        f"by subject: train+val {', '.join(train_subjects)} ({len(train_scans)} scans), test {', '.join(test_subjects)} ({n_test} scans), "
        f"the subject-level split closest to the paper's 10/11 scans; val = scans {', '.join(val_scans) or 'none'} "
        f"({VAL_FRACTION:.0%} of the training scans, seed {DATA_SEED}); axial {kept}"
    )
    index = [np.flatnonzero(in_train & ~in_val), np.flatnonzero(in_train & in_val), np.flatnonzero(~in_train)]
    return index, rule


#: This module's registration: the datasets it adds to the registry (datasets/__init__.py `collect`).
SPECS = (
    DatasetSpec(CARD, load_ms_lesion, 2, 2, 128, 32, rater_styles=("ms",), order=20),
    DatasetSpec(CARD_REAL, load_ms_lesion_real, 2, 2, 128, 32, reference="majority", order=20, **REAL),
)
