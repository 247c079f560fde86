"""A cell's identity (docs/architecture.md#who-owns-what): what one training run is, as a typed value read once.

`Cell` holds the checked `RaterSetting`, never its label alone; a label read back from a results folder (a folder's
name, a manifest's field) is checked into a setting once, as the cell is made (`rater_setting`). Where a cell lives in a
results folder is `bench.store`'s business.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from bench.evaluate.long_table import KEYS
from datasets import DataError, RaterSetting, get_dataset
from methods.registry import MethodRef


@dataclass(frozen=True)
class Cell:
    """One training run: a dataset, its rater setting and noise level ("protocol" or a target Average DSC), a method, a seed.

    `raters` is the checked `RaterSetting` (`DatasetSpec.setting`); a label given instead (a folder's name, a manifest's
    field) is checked into one as the cell is made (`rater_setting`). What predictions are scored against is not part
    of it: every cell is scored against every reference.

    `method` is the method's label (`lf-net@beta=3`, its folder's name) and `ref` the typed `MethodRef`: a cell the plan
    makes is given the reference (`method` is then its label); a label read back (a folder, a manifest) is parsed once,
    where its reference is first asked for.
    """

    dataset: str
    raters: RaterSetting
    noise: str
    method: str
    seed: int

    def __post_init__(self) -> None:
        if not isinstance(self.raters, RaterSetting):
            object.__setattr__(self, "raters", rater_setting(self.dataset, self.raters))
        if isinstance(self.method, MethodRef):
            self.__dict__["ref"] = self.method
            object.__setattr__(self, "method", self.method.label)

    @cached_property
    def ref(self) -> MethodRef:
        """The cell's method and its parameters (`MethodRef.parse` of a label read back, at most once a cell)."""
        return MethodRef.parse(self.method)

    @property
    def parts(self) -> tuple[str, ...]:
        return (self.dataset, self.raters.label, self.noise, self.method, f"seed-{self.seed}")

    def record(self) -> dict:
        """The cell's KEYS as plain values, the setting by its label: a manifest's "cell", a long table's key columns."""
        return {"dataset": self.dataset, "raters": self.raters.label, "noise": self.noise, "method": self.method, "seed": self.seed}

    def __str__(self) -> str:
        return "/".join(self.parts)


def rater_setting(dataset: str, label: str) -> RaterSetting:
    """The rater setting a results folder names by its label: checked against the dataset (`DatasetSpec.setting`); a
    dataset or label this version does not know (an old or foreign folder, listed and collected but not trained again
    as it is) is taken as recorded, its style and input read from the label."""
    try:
        return get_dataset(dataset).setting(label)
    except DataError:
        style, _, network_input = str(label).partition("+")
        return RaterSetting(style, network_input or None, str(label))


def cell_of(info: dict) -> Cell:
    return Cell(**{k: info["cell"][k] for k in KEYS})


def retrain_command(results: Path, cell: Cell, force: bool = False) -> str:
    """The `bench run` that trains exactly this cell again (add the options it ran with: --budget, --max-steps, …)."""
    setting = cell.raters
    own = setting.label == setting.style  # the style's own input: --raters alone names it
    flags = [
        f"--results {results}",
        f"--dataset {cell.dataset}",
        f"--raters {setting.style}",
        *([] if own else [f"--input {setting.input}"]),
        f"--noise-levels {cell.noise}",
        f"--methods {cell.method}",
        f"--seeds {cell.seed}",
        *(["--force"] if force else []),
    ]
    return "python -m bench run " + " ".join(flags)
