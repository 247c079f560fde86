"""The dataset registry: each dataset's card, adapter and settings (`DATASETS`), and the checks every load goes through.

datasets/ has two wings under this registry: the adapters (datasets/adapters/, one module or sub-package per dataset
with its file readers), which turn files a user already has into `RaterData` splits
(docs/datasets.md#the-data-contract), and the rater simulators (datasets/raters/), which make the simulated raters; both
stand on the data contract (datasets/contract.py) and the rater settings and noise levels (datasets/settings.py).
Adding a dataset is one adapter plus one entry in `DATASETS`.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from datasets.adapters import choledoch, cm_folder, folder, lidc, mnist, ms_lesion, riga
from datasets.contract import DataError, DatasetCard, RaterData, RaterSetting, Splits, oracle_view
from datasets.settings import PROTOCOL, check_level, check_setting, refuse_noise_level

#: An adapter's signature: (data_root, the checked rater setting, the canonical noise level, the cache folder or None)
#: -> Splits. It reads the setting's fields and never checks them again: `checked_loader` did, before calling it.
Loader = Callable[[Path, RaterSetting, str, Path | None], Splits]


@dataclass(frozen=True)
class DatasetSpec:
    """A registered dataset: its card, loader, rater styles and the batch sizes of the two budgets.

    ``load(data_root, raters=None, noise="protocol", cache=None) -> Splits``: ``raters`` is a rater setting
    (`setting`: one of ``rater_styles``, None the first, with ``+<input>`` for one of ``inputs`` other than the
    style's own, ``style_inputs``), handed to the adapter as a checked `RaterSetting`; ``noise`` is "protocol" (the unscaled rules)
    or a target Average DSC of the training pool as a decimal string in (0, 1), e.g. "0.45"
    (datasets/settings.py); ``cache`` is the folder an adapter may keep per-file caches in (RIGA's derived masks), None
    for none. The loader is always the checked one (`checked_loader`).
    """

    card: DatasetCard
    load: Loader
    paper_batch_size: int  # the paper: 128 on MNIST, 2 elsewhere
    quick_batch_size: int
    quick_train_size: int | None  # training images used by the quick budget (None: all)
    quick_val_size: int = 128  # validation images the quick budget's stopping rule evaluates on
    reference: str = "gt"  # evaluation reference: "gt" where the dataset has ground truth, else "majority"
    soft_metrics: bool = False  # also score soft DSC / IoU against the rater mean; the paper's DSC here is the soft one (RIGA)
    structures: tuple[str, ...] = ("foreground",)  # what its tables score: nested classes (RIGA's disc, cup) or the foreground
    fixed_raters: str = ""  # why the raters cannot be re-simulated ("has real raters"); set: any level but "protocol" is refused
    # Rater styles (datasets/settings.py STYLE_NOTES), the default first; every dataset names its own.
    rater_styles: tuple[str, ...] = ()
    # Network inputs a user may choose (empty: the dataset has one), and each style's own (its default).
    inputs: tuple[str, ...] = ()
    style_inputs: dict = field(default_factory=dict)
    first_style: str = ""  # the style its cells had before styles were named in results paths (MNIST's disk morphology)
    subset_of: str = ""  # a sample of another dataset's images (mnist-5k of mnist): a paper's number for that dataset applies

    def __post_init__(self) -> None:
        if not self.rater_styles:
            raise ValueError(f"{self.card.name}: DatasetSpec needs rater_styles (the default first)")
        # Every caller (the CLI, sweeps, workers) gets the checked loader, not the bare adapter.
        if not getattr(self.load, "checked", False):
            object.__setattr__(self, "load", checked_loader(self, self.load))

    def setting(self, label: RaterSetting | str | None = None, network_input: str | None = None) -> RaterSetting:
        """The one place a rater setting is defaulted and checked (DataError for an unknown style or input): a label
        ("cm+clean"), or a style with `network_input`; None -> the default style with its own input."""
        return check_setting(self.card.name, label, self.rater_styles, self.inputs, self.style_inputs, network_input)


def checked_loader(spec: DatasetSpec, load: Loader) -> Loader:
    """`load` with the checks every adapter needs, so that bad input ends in one DataError and nothing else.

    Before reading anything (the one check of what the adapter is given: the adapters do not check again): the rater
    setting is one of `spec.rater_styles` (None: the first),
    with an input the dataset offers (`spec.inputs`; passed on in its canonical form), the
    noise level is "protocol" or a target Average DSC in (0, 1) (passed on in its canonical
    form, e.g. "0.450" -> "0.45"), a dataset with `fixed_raters` gets no level but "protocol",
    and the data root is not a file. During: the adapter's warnings (e.g. "found 6 of 21
    scans") are held back and shown only if the load succeeds, so a failing load prints its one
    error line alone. After: no image holds NaN or infinite values and the training images are
    not all one constant (a backstop for what the adapters check file by file). `options` are an adapter's own keyword
    options, passed on (choledoch's `size` and `test_fold`, ms-lesion's `gt_rater`: tests and studies of the adapter).
    """

    @functools.wraps(load)
    def checked(
        data_root: Path, raters: RaterSetting | str | None = None, noise: str = PROTOCOL, cache: Path | None = None, **options
    ) -> Splits:
        card = spec.card
        setting = spec.setting(raters)
        level = check_level(card.name, noise)
        if spec.fixed_raters:
            refuse_noise_level(card.name, level, spec.fixed_raters)
        elif setting.style in NO_KNOB:  # a dataset's raters from files beside simulated ones (a folder:PATH with GT)
            others = ", ".join(s for s in spec.rater_styles if s not in NO_KNOB)
            refuse_noise_level(card.name, level, f"reads {setting.style} raters from files (--raters {others} simulates raters instead)")
        if card.layout and Path(data_root).is_file():
            raise DataError(f"{card.name}: the data root {data_root} is a file; point --data-root at the folder that holds {card.layout}")
        with warnings.catch_warnings(record=True) as held:
            splits = load(data_root, setting, level, cache, **options)
        check_images(card.name, splits)
        for w in held:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
        return splits

    checked.checked = True
    return checked


def check_images(name: str, splits: Splits, chunk: int = 64) -> None:
    """Raise DataError if an image holds NaN / inf, or if every training image is one constant value.

    Reads the images in chunks of `chunk` so that a 10 GB split needs no second 10 GB for a mask.
    """
    train_range = [np.inf, -np.inf]
    for part in ("train", "val", "test"):
        data: RaterData = getattr(splits, part)
        for start in range(0, data.n, chunk):
            block = data.images[start : start + chunk]
            lo, hi = float(block.min()), float(block.max())  # NaN propagates through min and max
            if not (math.isfinite(lo) and math.isfinite(hi)):
                bad = start + next(i for i, image in enumerate(block) if not np.isfinite(image).all())
                raise DataError(f"{name}: image {data.case_ids[bad]} ({part}) holds NaN or infinite values; check its file")
            if part == "train":
                train_range = [min(train_range[0], lo), max(train_range[1], hi)]
    if splits.train.n and train_range[0] == train_range[1]:
        raise DataError(f"{name}: every training image is {train_range[0]:g} everywhere; the input files hold no images")


REAL = {"fixed_raters": "has real raters", "rater_styles": ("real",)}
NO_KNOB = ("real", "files")  # rater styles read from files: no noise level but the protocol

DATASETS: dict[str, DatasetSpec] = {
    "mnist-5k": DatasetSpec(
        mnist.CARD_5K,
        mnist.load_mnist_5k,
        128,
        32,
        None,
        rater_styles=mnist.RATER_STYLES,
        inputs=mnist.INPUTS,
        style_inputs=mnist.STYLE_INPUTS,
        first_style="morpho",
        subset_of="mnist",
    ),
    "mnist": DatasetSpec(
        mnist.CARD_MNIST,
        mnist.load_mnist,
        128,
        32,
        600,
        rater_styles=mnist.RATER_STYLES,
        inputs=mnist.INPUTS,
        style_inputs=mnist.STYLE_INPUTS,
        first_style="morpho",
    ),
    # The large-image datasets' quick budget: the paper's batch of 2 and a 32-image validation subset, so that the
    # user's `--methods all --dataset lidc` (one seed) fits in 15 minutes on 2 CPU cores with native bf16 (README#budgets).
    "ms-lesion": DatasetSpec(ms_lesion.CARD, ms_lesion.load_ms_lesion, 2, 2, 128, 32, rater_styles=("ms",)),
    "ms-lesion-real": DatasetSpec(ms_lesion.CARD_REAL, ms_lesion.load_ms_lesion_real, 2, 2, 128, 32, reference="majority", **REAL),
    "choledoch": DatasetSpec(choledoch.CARD, choledoch.load_choledoch, 2, 2, 48, 32, rater_styles=("choledoch",)),
    "lidc": DatasetSpec(lidc.CARD, lidc.load_lidc, 2, 2, 160, 32, reference="majority", **REAL),
    "riga": DatasetSpec(
        riga.CARD, riga.load_riga, 2, 2, 80, 32, reference="majority", soft_metrics=True, structures=tuple(riga.STRUCTURES), **REAL
    ),
    "cm-folder": DatasetSpec(
        cm_folder.CARD,
        cm_folder.load_cm_folder,
        128,
        32,
        600,
        fixed_raters="reads its raters from files",
        rater_styles=("files",),
    ),  # fmt: skip
}


def get_dataset(name: str, data_root: Path | None = None) -> DatasetSpec:
    """The registered dataset `name`; "folder:PATH" registers your own folder first (`register_folder`), as does a
    "folder-<name>" with the `data_root` it was registered from (a worker process's cell)."""
    if name.startswith(folder.PREFIX):
        return register_folder(Path(name[len(folder.PREFIX) :]))
    if name not in DATASETS and name.startswith(FOLDER) and data_root is not None and (Path(data_root) / "dataset.json").is_file():
        register_folder(Path(data_root))
    if name not in DATASETS:
        hint = "; give your own folder as folder:PATH" if name.startswith(FOLDER) else ""
        raise DataError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}, folder:PATH{hint}")
    return DATASETS[name]


FOLDER = "folder-"  # the registered name of a folder:PATH dataset: folder-<its dataset.json name>
SMALL = 64 * 64  # images up to this many pixels train in MNIST's batches (128 paper, 32 quick), larger ones in 2s


def register_folder(path: Path) -> DatasetSpec:
    """Register the multi-rater folder at `path` (datasets/adapters/folder.py) as "folder-<name>" and return its spec.

    Its card, rater styles and reference come from its dataset.json and folders: ground truth (labelsTr/gt/, and
    labelsTs/gt/ where imagesTs/ exists) makes it scored against GT and offers simulated morpho raters on a binary task;
    without it the reference is the raters' majority. Its data root is `path` itself.
    """
    layout = folder.read_layout(Path(path).absolute())
    first = next(iter(sorted((layout.root / "imagesTr").glob(f"*_0000{layout.ending}"))), None)
    size = folder.slices(folder.read_file(first)[0], layout.axis, first, image=True).shape[1:3] if first else (0, 0)
    batches = (128, 32) if size[0] * size[1] <= SMALL else (2, 2)
    test_gt = layout.has_gt and (not (layout.root / "imagesTs").is_dir() or (layout.root / "labelsTs" / folder.GT).is_dir())
    styles = folder.styles(layout)
    spec = DatasetSpec(
        folder.card(layout),
        folder.load_folder,
        *batches,
        None,
        32,
        reference="gt" if test_gt else "majority",
        structures=tuple(layout.structures),
        rater_styles=styles,
        fixed_raters="" if len(styles) > 1 else "reads its raters from files",
    )
    DATASETS[spec.card.name] = spec  # the folder last given under this name (a results folder records each cell's root)
    return spec


def dataset_root(name: str, data_root: Path) -> tuple[str, Path]:
    """A --dataset as given and the data root -> (the registered name, the data root its cells read): "folder:PATH" -> its
    "folder-<name>" and PATH; any other name as it is."""
    if not name.startswith(folder.PREFIX):
        return name, data_root
    spec = register_folder(Path(name[len(folder.PREFIX) :]))
    return spec.card.name, Path(spec.card.source)


__all__ = ["DATASETS", "DataError", "DatasetCard", "DatasetSpec", "RaterData", "RaterSetting", "Splits", "dataset_root"]
__all__ += ["get_dataset", "oracle_view", "register_folder"]
