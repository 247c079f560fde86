"""Rater settings and noise levels: what a dataset's raters are and how noisy, checked and defaulted once.

**Styles.** A dataset's raters come in one or more styles (``DatasetSpec.rater_styles``, the
first is the default; ``STYLE_NOTES`` says what each is):

* ``lfnet``: the LF-Net paper's MNIST pool, CM-UNet's rules without the thickened wrong
  (datasets/raters/cm.py), knob ``strength``;
* ``cm``: CM-UNet's released MNIST rules, exactly (datasets/raters/cm.py), knob ``strength``;
* ``cm-fit``: this project's earlier calibrated approximation of ``cm`` (datasets/raters/cm_fit.py);
* ``morpho``: this project's own Morpho-MNIST-style disk morphology (datasets/raters/morpho.py),
  knob ``noise``;
* ``ms``: CM-UNet's released MS lesion rules in 3-D (datasets/raters/ms.py), knob = a
  multiplier of the number of passes;
* ``choledoch``: the ``morpho`` rules with radii × 4 (datasets/adapters/choledoch), knob ``noise``;
* ``real`` / ``files``: real raters, or rater masks read from files: no knob.

Every knob is 1 at the protocol (the unscaled rules) and 0 where every non-blank rater
equals GT.

**Settings.** A rater setting is a style, optionally with a network input other than the
style's own (``"cm+clean"``). ``check_setting`` makes the checked `RaterSetting`; it runs once,
in ``DatasetSpec.setting``, and everything after it (the registry's checked loader, the
adapters, bench's cells and cache keys) reads the setting's fields.

**Levels.** A noise level is a string: ``"protocol"`` (knob 1) or a target **Average DSC**
of the rater pool, a decimal in (0, 1) such as ``"0.45"`` (``parse_level``). How a target
becomes a knob value is datasets/raters/strength.py; when a pool is too degenerate to
train on is datasets/raters/pool.py; the flow from a level to a dataset's raters is
datasets/raters/levels.py.

**The spec.** ``DatasetSpec`` is what an adapter registers (its module's ``SPECS``; the registry,
datasets/__init__.py, collects them): card, loader, rater styles and inputs, batch sizes. Its
loader is always ``checked_loader``'s, the one place a setting and a level are checked before an
adapter reads anything (re-exported by the registry, ``datasets.checked_loader``).
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from datasets.contract import DataError, DatasetCard, RaterData, RaterSetting, Splits

__all__ = ["NO_KNOB", "PROTOCOL", "REAL", "STYLE_NOTES", "DatasetSpec", "Loader", "check_images", "check_level", "check_setting"]
__all__ += ["checked_loader", "level_target", "parse_level", "refuse_noise_level"]

#: The level of the unscaled rules (every knob = 1).
PROTOCOL = "protocol"
#: What each rater style is, for the dataset cards and messages.
STYLE_NOTES = {
    "lfnet": "lfnet = the LF-Net paper's pool: CM-UNet's rules (under = one cross erosion of GT, over = FSL edge passes on the grey "
    "digit, then its mask) with wrong = the support raw > 0 minus every second block of 100 pixels, unthickened",
    "cm": "cm = CM-UNet's released MNIST rules exactly (lfnet's under and over; wrong = block deletion on a 3-slice stack, "
    "then two FSL edge passes)",
    "cm-fit": "cm-fit = this project's earlier approximation of cm (wrong = a thickened digit with calibrated cuts)",
    "morpho": "morpho = this project's own Morpho-MNIST-style disk morphology (4x supersampled, per-image jitter)",
    "ms": "ms = CM-UNet's released MS lesion rules in 3-D (one 6-connected erosion, two edge-add passes, "
    "alternating 100-voxel deletions twice)",
    "choledoch": "choledoch = this project's morpho rules with radii x4 (the MNIST radii barely touch 256x320 cancer regions)",
    "real": "real = the dataset's own human raters (no noise knob)",
    "files": "files = rater masks read from your files (no noise knob)",
}
NO_KNOB = ("real", "files")  # rater styles read from files: no noise level but the protocol


def check_setting(
    name: str,
    label: RaterSetting | str | None,
    styles: Sequence[str],
    inputs: Sequence[str] = (),
    style_inputs: dict[str, str] | None = None,
    network_input: str | None = None,
) -> RaterSetting:
    """A rater setting as given -> the checked `RaterSetting`; DataError (one line) for an unknown style or input.

    A setting is a rater style, optionally with a network input other than the style's own: ``"cm+clean"``, or the
    style with `network_input` ("cm", "clean"). None is the first style with its own input. The canonical label drops an
    input equal to the style's own (``"lfnet+clean"`` -> ``"lfnet"``), so one setting has one name (results path, cache
    file, table). Datasets without input choices (``inputs`` empty) refuse any input. A `RaterSetting` is returned as
    it is (it was checked when made).
    """
    if isinstance(label, RaterSetting):
        return label
    style, plus, kind = (label or "").partition("+")
    if network_input is not None:
        if plus:
            raise DataError(f"{name}: {label!r} already names a network input; give the rater style alone with an input")
        plus, kind, label = "+", network_input, f"{style or styles[0]}+{network_input}"
    style = style or styles[0]
    if style not in styles:
        raise DataError(f"{name}: unknown rater style {style!r}; this dataset has {', '.join(styles)}")
    own = (style_inputs or {}).get(style)
    if not plus:
        return RaterSetting(style, own, style)
    if not inputs:
        raise DataError(f"{name}: {label!r} names a network input, but this dataset has one input; give the rater style alone ({style})")
    if kind not in inputs:
        raise DataError(f"{name}: unknown input {kind!r} in {label!r}; this dataset has {', '.join(inputs)}")
    return RaterSetting(style, kind, style if kind == own else f"{style}+{kind}")


def parse_level(text: str | float) -> str:
    """A noise level as given on the command line -> its canonical label: "protocol" or f"{target:g}".

    Accepted: "protocol" (any case, spaces ignored) or a target Average DSC strictly between 0
    and 1 ("0.45", ".45", "4.5e-1" -> "0.45"). Raises ValueError (one line) for anything else:
    not a number, NaN, infinite, or outside (0, 1); "1" too, the old spelling of the protocol.
    """
    raw = str(text).strip()
    if raw.lower() == PROTOCOL:
        return PROTOCOL
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(
            f"noise level {raw!r} is neither 'protocol' nor a number; give 'protocol' or a target Average DSC in (0, 1), e.g. 0.45"
        ) from None
    if not (math.isfinite(value) and 0 < value < 1):
        hint = " ('protocol' is the unscaled rules, the old level 1)" if value == 1 else ""
        raise ValueError(f"noise level {raw} is not 'protocol' or a target Average DSC strictly between 0 and 1{hint}; e.g. 0.45")
    return f"{value:g}"


def check_level(name: str, level: str | float) -> str:
    """``parse_level`` for a dataset: its ValueError becomes a DataError naming the dataset."""
    try:
        return parse_level(level)
    except ValueError as e:
        raise DataError(f"{name}: {e}") from None


def refuse_noise_level(name: str, level: str, why: str = "has real raters") -> None:
    """A dataset whose raters are not simulated has no noise knob: any level but "protocol" is refused in one line.

    level: the noise level as given (a label such as "protocol" or "0.45"; anything else is shown as is).
    """
    if str(level).strip().lower() != PROTOCOL:
        raise DataError(f"{name} {why}, so there is no noise level to set (got {level}); use --noise-levels protocol")


def level_target(level: str) -> float | None:
    """The target Average DSC of a canonical level, or None for the protocol."""
    return None if level == PROTOCOL else float(level)


#: An adapter's signature: (data_root, the checked rater setting, the canonical noise level, the cache folder or None)
#: -> Splits. It reads the setting's fields and never checks them again: `checked_loader` did, before calling it.
Loader = Callable[[Path, RaterSetting, str, Path | None], Splits]


@dataclass(frozen=True)
class DatasetSpec:
    """A registered dataset: its card, loader, rater styles and the batch sizes of the two budgets.

    An adapter module registers its datasets by declaring them: a module-level ``SPECS = (DatasetSpec(...), ...)``,
    which the registry (datasets/__init__.py) collects from every module of datasets/adapters/.

    ``load(data_root, raters=None, noise="protocol", cache=None) -> Splits``: ``raters`` is a rater setting
    (`setting`: one of ``rater_styles``, None the first, with ``+<input>`` for one of ``inputs`` other than the
    style's own, ``style_inputs``), handed to the adapter as a checked `RaterSetting`; ``noise`` is "protocol" (the unscaled rules)
    or a target Average DSC of the training pool as a decimal string in (0, 1), e.g. "0.45"
    (`parse_level`); ``cache`` is the folder an adapter may keep per-file caches in (RIGA's derived masks), None
    for none. The loader is always the checked one (`checked_loader`).
    """

    card: DatasetCard
    load: Loader
    paper_batch_size: int  # the paper: 128 on MNIST, 2 elsewhere
    quick_batch_size: int
    quick_train_size: int | None  # training images used by the quick budget (None: all)
    # Validation images the quick budget's stopping rule evaluates on. The large-image datasets take 32 (and the paper's
    # batch of 2), so that the user's `--methods all --dataset lidc` (one seed) fits in 15 minutes on 2 CPU cores (README#budgets).
    quick_val_size: int = 128
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
    order: int = 100  # where the registry lists it (`bench list datasets`, "known: ..."): lowest first, ties by module name

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


#: The registration of a dataset with real raters: `DatasetSpec(..., **REAL)`.
REAL = {"fixed_raters": "has real raters", "rater_styles": ("real",)}
