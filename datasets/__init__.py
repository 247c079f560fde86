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

from datasets.adapters import choledoch, cm_folder, lidc, mnist, ms_lesion, riga
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


def get_dataset(name: str) -> DatasetSpec:
    if name not in DATASETS:
        raise DataError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    return DATASETS[name]


__all__ = ["DATASETS", "DataError", "DatasetCard", "DatasetSpec", "RaterData", "RaterSetting", "Splits", "get_dataset", "oracle_view"]
