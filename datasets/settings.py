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
in ``DatasetSpec.setting`` (datasets/__init__.py), and everything after it (the registry's
checked loader, the adapters, bench's cells and cache keys) reads the setting's fields.

**Levels.** A noise level is a string: ``"protocol"`` (knob 1) or a target **Average DSC**
of the rater pool, a decimal in (0, 1) such as ``"0.45"`` (``parse_level``). How a target
becomes a knob value is datasets/raters/strength.py; when a pool is too degenerate to
train on is datasets/raters/pool.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from datasets.contract import DataError, RaterSetting

__all__ = ["PROTOCOL", "STYLE_NOTES", "check_level", "check_setting", "level_target", "parse_level", "refuse_noise_level"]

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
