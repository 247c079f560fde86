"""`folder:PATH`: your own multi-rater data in one folder, nnU-Net's layout with a folder per rater (docs/datasets.md#your-own-data).

Layout::

    PATH/dataset.json
    PATH/imagesTr/<case>_0000<ending>          one file per channel: _0000, _0001, … (channel_names' order)
    PATH/labelsTr/<rater>/<case><ending>        one folder per rater; labelsTr/gt/ is the ground truth, never a rater
    PATH/imagesTs/, PATH/labelsTs/<rater>/      optional: a test split of its own (else one is cut from imagesTr)

``dataset.json`` keys: ``channel_names`` ({"0": "T1", …}, required), ``labels`` ({"background": 0, "lesion": 1}, required:
classes 0..L-1; a list value names a region of classes, e.g. "disc": [1, 2], and then the regions are what is scored),
``file_ending`` (".nii.gz", ".nii", ".png", ".tif" or ".tiff"; required), ``raters`` (the rater folders, in slot order;
default every folder of labelsTr but gt), ``name`` (default the folder's name), ``axis`` (a volume's slicing axis, default
2), ``splits`` ({"val": [cases], "test": [cases]}, optional), ``groups`` ({case: patient}, optional: splits keep a group
whole), ``spacing`` (the in-plane spacing of PNG/TIFF images, default [1, 1]), ``description`` and ``licence``.

Decisions (the layout is silent on them):

* **Cases and slices.** A 2-D file is one image; a 3-D NIfTI volume becomes its slices along ``axis``, each an image
  ``<case>:<k>`` in the case's group, so no patient spans two splits. Every slice is kept (a split by case, not by content).
* **Inputs.** Each case and channel is scaled to mean 0 and standard deviation 1 over the whole case (a constant
  channel only centred): intensities of different scanners and PNG's 0–255 meet on one scale.
* **Labels.** Values must be the declared class indices; a binary dataset also takes 0/255 and 0/128/255 masks
  (as every adapter). A rater missing for a case is recorded (`rater_valid` False), never filled; a case with no rater
  and no ground truth is a problem.
* **Sizes.** Images of other sizes are centre-cropped or zero-padded to the first training image's size; masks alike.
* **Splits.** ``splits`` where given; else a test split from imagesTs/ or, without one, 20 % of the groups, and a
  validation split of 10 % of the remaining groups (`split_by_group`, seed 0).
* **Raters.** The files' raters (style ``files``, no noise knob). With ground truth on a binary task the simulated
  ``morpho`` raters (datasets/raters/morpho.py) are offered too, at the protocol or at a target Average DSC.

Reading collects every problem it finds (`FolderProblems`), so ``bench check folder:PATH`` lists them all, one a line.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from datasets.contract import DataError, DatasetCard, RaterData, RaterSetting, Splits, centre_fit, read_tif, split_by_group
from datasets.raters.levels import simulate_level
from datasets.raters.morpho import simulate_raters
from datasets.raters.pool import fixed_pool_info
from datasets.settings import STYLE_NOTES

PREFIX = "folder:"  # --dataset folder:PATH
ENDINGS = (".nii.gz", ".nii", ".png", ".tif", ".tiff")
GT = "gt"  # labelsTr/gt/: the ground truth
FRACTIONS = {"test": 0.2, "val": 0.1}  # of the groups, where neither splits nor imagesTs/ say
DATA_SEED = 0  # the split's and the simulated raters' seed
CHANNEL = re.compile(r"^(?P<case>.+)_(?P<channel>\d{4})$")


class FolderProblems(DataError):
    """Every problem found in a folder: the message is the first (with a count), `problems` all of them."""

    def __init__(self, name: str, problems: list[str]) -> None:
        more = f" (and {len(problems) - 1} more: `python -m bench check {name}` lists them)" if len(problems) > 1 else ""
        super().__init__(problems[0] + more)
        self.problems = problems


@dataclass(frozen=True)
class Layout:
    """A folder's checked dataset.json."""

    root: Path
    name: str
    channels: tuple[str, ...]
    classes: tuple[str, ...]
    structures: dict[str, tuple[int, ...]]
    ending: str
    raters: tuple[str, ...]
    axis: int
    splits: dict[str, list[str]]
    groups: dict[str, str]
    spacing: tuple[float, float]
    description: str
    licence: str

    @property
    def has_gt(self) -> bool:
        return (self.root / "labelsTr" / GT).is_dir()

    @property
    def binary(self) -> bool:
        return len(self.classes) == 2


def slug(text: str) -> str:
    """A dataset name for results paths: lower case letters, digits and hyphens."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "data"


def read_layout(root: Path) -> Layout:
    """`root`/dataset.json, checked: DataError (one line, naming the key) for a missing or wrong field."""
    root = Path(root)
    path = root / "dataset.json"
    if not root.is_dir():
        raise DataError(f"{root}: no such folder; give --dataset folder:PATH with the folder holding dataset.json, imagesTr/ and labelsTr/")
    try:
        meta = json.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"{path}: not found; write a dataset.json (README: Your own data)") from None
    except (OSError, ValueError) as e:
        raise DataError(f"{path}: not readable JSON ({e}); fix or rewrite it") from None

    def need(key: str, kind: type):
        if not isinstance(meta.get(key), kind):
            raise DataError(f"{path}: '{key}' is missing or not a {kind.__name__}; see README: Your own data")
        return meta[key]

    channels = need("channel_names", dict)
    labels, ending = need("labels", dict), need("file_ending", str)
    if ending not in ENDINGS:
        raise DataError(f"{path}: file_ending {ending!r} is not one of {', '.join(ENDINGS)}")
    if sorted(channels, key=int) != [str(k) for k in range(len(channels))]:
        raise DataError(f"{path}: channel_names keys must be 0, 1, … in order, got {', '.join(channels)}")
    classes = {v: k for k, v in labels.items() if isinstance(v, int)}
    if sorted(classes) != list(range(len(classes))) or len(classes) < 2:
        raise DataError(f"{path}: labels must give classes 0..L-1 (L >= 2, 0 the background), got {labels}")
    regions = {k: tuple(v) for k, v in labels.items() if isinstance(v, list)}
    if any(not set(r) <= set(classes) - {0} for r in regions.values()):
        raise DataError(f"{path}: a region in labels names a class that is not declared: {regions}")
    names = tuple(classes[k] for k in range(len(classes)))
    structures = regions or ({"foreground": (1,)} if len(names) == 2 else {n: (k,) for k, n in enumerate(names) if k})
    labels_dir = root / "labelsTr"
    found = sorted(p.name for p in labels_dir.iterdir() if p.is_dir() and p.name != GT) if labels_dir.is_dir() else []
    raters = tuple(meta.get("raters") or found)
    if not raters:
        raise DataError(f"{labels_dir}: no rater folders; put one folder per rater there (labelsTr/<rater>/<case>{ending})")
    missing = [r for r in raters if not (labels_dir / r).is_dir()]
    if missing:
        raise DataError(f"{path}: raters names {', '.join(missing)}, but labelsTr/ has no such folder")
    splits = meta.get("splits") or {}
    if not isinstance(splits, dict) or set(splits) - {"val", "test"}:
        raise DataError(f"{path}: splits must be {{'val': [cases], 'test': [cases]}}, got {splits!r}")
    axis = meta.get("axis", 2)
    if axis not in (0, 1, 2):
        raise DataError(f"{path}: axis must be 0, 1 or 2 (a volume's slicing axis), got {axis!r}")
    spacing = tuple(float(s) for s in meta.get("spacing", (1.0, 1.0)))
    return Layout(
        root,
        slug(str(meta.get("name") or root.name)),
        tuple(channels[str(k)] for k in range(len(channels))),
        names,
        structures,
        ending,
        raters,
        axis,
        {k: list(map(str, v)) for k, v in splits.items()},
        {str(k): str(v) for k, v in (meta.get("groups") or {}).items()},
        spacing,  # type: ignore[arg-type]
        str(meta.get("description", "")),
        str(meta.get("licence", "that of the data you bring")),
    )


def read_file(path: Path) -> tuple[np.ndarray, dict]:
    """One image or mask file -> (array, meta). NIfTI: the data as stored, meta {affine, header, zooms}; PNG/TIFF: meta {}."""
    try:
        if path.name.endswith((".nii", ".nii.gz")):
            import nibabel

            image = nibabel.load(str(path))
            return np.asanyarray(image.dataobj), {"affine": image.affine, "header": image.header, "zooms": image.header.get_zooms()}
        if path.suffix.lower() in (".tif", ".tiff"):
            return read_tif(path), {}
        from PIL import Image

        with Image.open(path) as image:
            return np.asarray(image), {}
    except DataError:
        raise
    except Exception as e:  # nibabel and PIL raise many kinds for a truncated or foreign file
        raise DataError(f"{path}: unreadable ({type(e).__name__}: {e}); copy it again") from None


def slices(array: np.ndarray, axis: int, path: Path, image: bool = False) -> np.ndarray:
    """A file's array -> (S, H, W) slices, or for a 2-D colour image (PNG/TIFF (H, W, C), C <= 4) (1, H, W, C)."""
    array = np.squeeze(array) if array.ndim > 2 and 1 in array.shape[2:] else array
    if array.ndim == 2:
        return array[None]
    if image and array.ndim == 3 and array.shape[2] <= 4 and not path.name.endswith((".nii", ".nii.gz")):
        return array[None]
    if array.ndim == 3:
        return np.moveaxis(array, axis, 0)
    raise DataError(f"{path}: expected a 2-D image or a 3-D volume, got shape {array.shape}")


def case_images(layout: Layout, folder: Path, case: str) -> tuple[np.ndarray, dict]:
    """A case's channels -> float32 (S, C, H, W), scaled per channel over the case, and the first channel's meta."""
    channels, meta = [], {}
    for k in range(len(layout.channels)):
        path = folder / f"{case}_{k:04d}{layout.ending}"
        if not path.is_file():
            raise DataError(f"{path}: missing (channel {k}, {layout.channels[k]}, of case {case})")
        array, file_meta = read_file(path)
        stack = slices(array, layout.axis, path, image=True).astype(np.float32)
        meta = meta or {**file_meta, "shape": array.shape, "path": path}
        channels += list(np.moveaxis(stack, 3, 0)) if stack.ndim == 4 else [stack]
    shapes = {c.shape for c in channels}
    if len(shapes) > 1:
        raise DataError(f"{folder}/{case}_*: its channels differ in shape ({', '.join(map(str, sorted(shapes)))})")
    images = np.stack(channels, 1)
    if not np.isfinite(images).all():
        raise DataError(f"{meta['path']}: holds NaN or infinite values")
    mean, std = images.mean(axis=(0, 2, 3), keepdims=True), images.std(axis=(0, 2, 3), keepdims=True)
    return ((images - mean) / np.where(std > 0, std, 1)).astype(np.float32), meta


def case_mask(layout: Layout, path: Path, n_slices: int) -> np.ndarray:
    """A rater's or the ground truth's file -> uint8 (S, H, W) class indices, checked against the declared labels."""
    mask = slices(read_file(path)[0], layout.axis, path)
    values = set(np.unique(mask).tolist())
    if layout.binary and values <= {0, 255} | {0, 128, 255}:
        mask = mask >= 128
    elif not values <= set(range(len(layout.classes))):
        shown = ", ".join(f"{v:g}" for v in sorted(values)[:6])
        raise DataError(f"{path}: label values {{{shown}}}, but dataset.json declares classes 0..{len(layout.classes) - 1}")
    if mask.shape[0] != n_slices:
        raise DataError(f"{path}: {mask.shape[0]} slice(s), its image has {n_slices}")
    return mask.astype(np.uint8)


def cases_in(folder: Path, ending: str) -> list[str]:
    """The case ids of an images folder (its `_0000` files), sorted."""
    if not folder.is_dir():
        return []
    out = {m["case"] for p in folder.iterdir() if p.name.endswith(ending) and (m := CHANNEL.match(p.name[: -len(ending)]))}
    return sorted(out)


def read_cases(layout: Layout, cases: list[str], test: bool, problems: list[str]) -> dict:
    """Every slice of `cases` (from imagesTs/labelsTs where `test`): images, raters, validity, gt, ids, groups and per-case meta."""
    images_dir, labels_dir = (layout.root / ("imagesTs" if test else "imagesTr"), layout.root / ("labelsTs" if test else "labelsTr"))
    out = {"images": [], "raters": [], "valid": [], "gt": [], "ids": [], "groups": [], "spacing": []}
    for case in cases:
        try:
            images, meta = case_images(layout, images_dir, case)
            n, shape = images.shape[0], images.shape[2:]
            masks = {}
            for rater in (*layout.raters, GT):
                path = labels_dir / rater / f"{case}{layout.ending}"
                masks[rater] = case_mask(layout, path, n) if path.is_file() else None
                if masks[rater] is not None and masks[rater].shape[1:] != shape:
                    raise DataError(f"{path}: {masks[rater].shape[1]}×{masks[rater].shape[2]}, its image is {shape[0]}×{shape[1]}")
            gt, valid = masks.pop(GT), [m is not None for m in masks.values()]
            if not any(valid) and gt is None:
                raise DataError(f"{labels_dir}: case {case} has no rater mask and no ground truth; add its masks or remove it")
        except DataError as e:
            problems.append(str(e))
            continue
        zooms, volume = meta.get("zooms"), n > 1  # a volume's in-plane axes are those but `axis`
        plane = [a for a in range(3) if a != layout.axis] if volume else [0, 1]
        out["spacing"].append(tuple(float(zooms[a]) for a in plane) if zooms is not None else layout.spacing)
        out["gt"].append(gt)
        masks = [np.zeros((n, *shape), np.uint8) if m is None else m for m in masks.values()]
        out["images"] += list(images)
        out["raters"] += list(np.stack(masks, 1))
        out["valid"] += [valid] * n
        out["ids"] += [case if n == 1 else f"{case}:{k}" for k in range(n)]
        out["groups"] += [layout.groups.get(case, case)] * n
    return out


def split_cases(layout: Layout, train_cases: list[str], test_cases: list[str]) -> tuple[list[str], list[str], list[str], str]:
    """(train, val, test) case lists and the rule that made them: dataset.json's splits, else imagesTs/ for test, else a
    share of the groups (`FRACTIONS`) cut off what is left."""
    named = {part: list(layout.splits.get(part, [])) for part in ("val", "test")}
    pool = [c for c in train_cases if c not in named["val"] and c not in named["test"]]

    def cut(part: str) -> tuple[list[str], list[str]]:
        groups = np.array([layout.groups.get(c, c) for c in pool])
        rest, taken = split_by_group(groups, (1 - FRACTIONS[part], FRACTIONS[part]), DATA_SEED)
        return [pool[i] for i in rest], [pool[i] for i in taken]

    rule, test = [], named["test"] or test_cases
    if test:
        rule.append("test = dataset.json's splits.test" if named["test"] else "test = imagesTs/")
    else:
        pool, test = cut("test")
        rule.append(f"test = {FRACTIONS['test']:.0%} of the groups")
    val = named["val"]
    if val:
        rule.append("val = dataset.json's splits.val")
    else:
        pool, val = cut("val")
        rule.append(f"val = {FRACTIONS['val']:.0%} of the other groups")
    return pool, val, test, ", ".join(rule) + f" (split_by_group, seed {DATA_SEED}; by case id, a volume's slices kept together)"


def read_folder(root: Path) -> tuple[Layout, dict[str, dict], str, list[str]]:
    """Every split of the folder, decoded: (layout, {part: read_cases output}, split rule, problems found)."""
    layout = read_layout(root)
    train_cases, test_cases = cases_in(root / "imagesTr", layout.ending), cases_in(root / "imagesTs", layout.ending)
    problems = [] if train_cases else [f"{root / 'imagesTr'}: no <case>_0000{layout.ending} files; put the training images there"]
    known = set(train_cases) | set(test_cases)
    for part, listed in layout.splits.items():
        problems += [f"{root / 'dataset.json'}: splits.{part} names case {c}, which has no image" for c in listed if c not in known]
    problems += [
        f"case {c} is in both imagesTr/ and imagesTs/; case ids must be unique" for c in sorted(set(train_cases) & set(test_cases))
    ]
    both = set(layout.splits.get("val", [])) & set(layout.splits.get("test", []))
    problems += [f"{root / 'dataset.json'}: case {c} is in both splits.val and splits.test" for c in sorted(both)]
    if problems:
        return layout, {}, "", problems
    train, val, test, rule = split_cases(layout, train_cases, test_cases)
    parts = {}
    for part, cases in (("train", train), ("val", val), ("test", test)):
        in_ts = [c for c in cases if c in test_cases]
        parts[part] = read_cases(layout, [c for c in cases if c not in in_ts], False, problems)
        if in_ts:
            extra = read_cases(layout, in_ts, True, problems)
            parts[part] = {k: parts[part][k] + extra[k] for k in parts[part]}
    for part, p in parts.items():
        has = [g is not None for g in p["gt"]]
        if any(has) and not all(has):
            problems.append(
                f"{part}: {has.count(False)} of {len(has)} cases have no ground truth (labels*/gt/); give every case one, or none"
            )
        if not p["ids"] and part != "val":
            problems.append(f"the {part} split is empty ({rule}); add cases")
    return layout, parts, rule, problems


def rater_data(layout: Layout, part: dict, raters: np.ndarray | None = None, names: tuple[str, ...] = ()) -> RaterData:
    """One split's decoded slices, centre-fitted to `part`'s first size, as RaterData (simulated `raters` where given)."""
    shape = part["shape"]
    fit = lambda arrays: np.stack([centre_fit(a, shape) for a in arrays]) if arrays else np.zeros((0, *shape))  # noqa: E731
    n_raters = len(names or layout.raters)
    has_gt = bool(part["gt"]) and part["gt"][0] is not None
    return RaterData(
        images=fit(part["images"]).reshape(-1, len(layout.channels), *shape).astype(np.float32),
        raters=(raters if raters is not None else fit(part["raters"]).reshape(-1, n_raters, *shape)).astype(np.uint8),
        rater_valid=np.ones((len(part["ids"]), n_raters), bool)
        if raters is not None
        else np.array(part["valid"], bool).reshape(-1, n_raters),
        gt=fit([g for case in part["gt"] for g in case]).astype(np.uint8) if has_gt else None,
        case_ids=np.array(part["ids"], dtype=str),
        groups=np.array(part["groups"], dtype=str),
        classes=layout.classes,
        structures=layout.structures,
        rater_names=names or layout.raters,
        raters_simulated=raters is not None,
        spacing=part["spacing"][0] if part["spacing"] else layout.spacing,
    )


def load_folder(data_root: Path, setting: RaterSetting, level: str, cache: Path | None) -> Splits:
    """The folder at `data_root` (folder:PATH) as Splits: its own raters (style files, level protocol: `checked_loader`
    refuses others) or morpho raters simulated from its GT."""
    del cache  # the splits are cached whole (bench/run/split_cache.py)
    layout, parts, rule, problems = read_folder(Path(data_root))
    name = f"{PREFIX}{data_root}"
    if problems:
        raise FolderProblems(name, problems)
    first = parts["train"]["images"][0]
    for part in parts.values():
        part["shape"] = first.shape[1:]
    if setting.style == "files":
        splits = {k: rater_data(layout, p) for k, p in parts.items()}
        info = fixed_pool_info("files", splits["train"].raters, splits["train"].gt)
        return Splits(splits["train"], splits["val"], splits["test"], rule, raters_info=info)
    plain = {k: rater_data(layout, p) for k, p in parts.items()}  # style morpho: simulated from the GT (binary tasks only)
    lacking = [k for k, d in plain.items() if d.n and d.gt is None]
    if lacking:
        raise DataError(
            f"{name}: the {', '.join(lacking)} split(s) have no ground truth (labelsTs/gt/), which morpho raters are made from; use --raters files"
        )
    keys = {k: np.arange(d.n) + offset for (k, d), offset in zip(plain.items(), (0, 10**6, 2 * 10**6))}
    gt = plain["train"].gt

    def simulate(part: str, strength: float) -> np.ndarray:
        data = plain[part]
        if not data.n:
            return np.zeros((0, 5, *data.images.shape[2:]), np.uint8)
        return simulate_raters(data.gt, seed=DATA_SEED, noise=strength, keys=keys[part])

    raters, info = simulate_level(name, "morpho", level, gt, {k: functools.partial(simulate, k) for k in plain})
    names = ("good", "over", "under", "wrong", "blank")
    splits = {k: rater_data(layout, p, raters[k], names) for k, p in parts.items()}
    return Splits(splits["train"], splits["val"], splits["test"], rule, raters_info=info)


def write_like(array: np.ndarray, meta: dict, path: Path, axis: int) -> Path:
    """Write (S, H, W) slices in the format of the file `meta` was read from: NIfTI with its affine and header (a volume
    stacked back along `axis`); PNG as uint8 (class indices) or uint16 (probabilities × 65535); TIFF as stored."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if "affine" in meta:
        import nibabel

        data = np.moveaxis(array, 0, axis) if array.shape[0] > 1 else array.reshape(meta["shape"][:2] + (1,) * (len(meta["shape"]) - 2))
        header = meta["header"].copy()
        header.set_data_dtype(data.dtype)
        nibabel.save(nibabel.Nifti1Image(data, meta["affine"], header), str(path))
    elif path.suffix.lower() in (".tif", ".tiff"):
        import tifffile

        tifffile.imwrite(path, array[0])
    else:
        from PIL import Image

        image = array[0] if array.dtype == np.uint8 else np.round(array[0] * 65535).astype(np.uint16)
        Image.fromarray(image).save(path)
    return path


def card(layout: Layout) -> DatasetCard:
    return DatasetCard(
        name=f"folder-{layout.name}",
        title=layout.description or f"your multi-rater data in {layout.root}",
        source=str(layout.root),
        licence=layout.licence,
        citation="",
        counts=f"{len(layout.raters)} raters ({', '.join(layout.raters)}), {len(layout.channels)} channel(s), classes {', '.join(layout.classes)}",
        layout="dataset.json, imagesTr/<case>_0000<ending>, labelsTr/<rater>/<case><ending> (README: Your own data)",
        raters=STYLE_NOTES["files"] + ("; " + STYLE_NOTES["morpho"] if layout.has_gt and layout.binary else ""),
    )


def styles(layout: Layout) -> tuple[str, ...]:
    """The rater styles a folder offers: its files, and morpho raters simulated from its GT on a binary task."""
    return ("files", "morpho") if layout.has_gt and layout.binary else ("files",)


__all__ = [
    "GT",
    "PREFIX",
    "FolderProblems",
    "Layout",
    "card",
    "case_images",
    "cases_in",
    "load_folder",
    "read_folder",
    "read_layout",
    "styles",
    "write_like",
]
