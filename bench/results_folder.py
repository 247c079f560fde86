"""A results folder opened once per command (docs/architecture.md#who-owns-what): its path and every finished cell's
record, each cell's manifest.json read once and its config.json at most once, and what the verbs derive from them
(training outcomes, rater averages, training logs, and any other derivation through `derive`), computed once.

`bench run` (after training), `report`, `compare` and `paper` open one (`ResultsFolder.open`) and hand it down instead
of the path; a function that takes either accepts it through `ResultsFolder.of`. The folder's layout, file names and
the checks of a damaged cell stay in `bench.store`; this is a read of it, taken once. A verb that writes cells (a
training run, `rescore`) opens the folder again after writing.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import pandas as pd

from bench import store
from bench.files import UnreadableFile
from bench.identity import Cell

MISSING = "missing from a finished cell"  # the problem `store.damage` names for a required file that is not there


def own_folder(manifest: dict | None) -> None:
    """Register a folder:PATH dataset a cell was trained on (its manifest's data root), so that a report in a fresh process
    knows its reference and structures; a folder that moved is left unregistered (the tables then read the rows alone)."""
    from datasets import FOLDER, DataError, get_dataset

    dataset, root = str((manifest or {}).get("cell", {}).get("dataset", "")), (manifest or {}).get("data_root")
    if dataset.startswith(FOLDER) and root:
        try:
            get_dataset(dataset, Path(root))
        except DataError:
            pass


class ResultsFolder:
    """A results folder read once: `path`, `finished` ((folder, manifest, damage) as `store.finished` gives them) and
    `records` (`store.CellRecord`s, their configs already read where the damage check read them)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.manifests: dict[Path, dict | None] = {}  # every cell folder's manifest (None: unreadable), read once
        self.configs: dict[Path, dict] = {}  # the configs the damage checks read
        self.finished: list[tuple[Path, dict, UnreadableFile | None]] = []
        self._derived: dict = {}
        self.finished = store.finished(self.path, manifests=self.manifests, configs=self.configs)
        for info in self.manifests.values():
            own_folder(info)

    @classmethod
    def open(cls, path: Path) -> ResultsFolder:
        return cls(path)

    @classmethod
    def of(cls, results: Path | ResultsFolder) -> ResultsFolder:
        """`results` itself where it is open, else the folder at that path opened (for callers that hold a path)."""
        return results if isinstance(results, ResultsFolder) else cls(results)

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"ResultsFolder({str(self.path)!r})"

    @property
    def damaged(self) -> dict[Cell, UnreadableFile]:
        """Finished cells with a damaged or missing file (`store.damage`)."""
        return {store.cell_at(folder): found for folder, _, found in self.finished if found is not None}

    def refuse_damage(self, cells: list[Cell] = ()) -> dict[Cell, UnreadableFile]:
        """The damaged cells among `cells` (a run trains them again); another damaged cell is raised, naming its file and
        repair (what `bench run` checks before it trains, `bench.run.plan.check_damage`)."""
        damaged = self.damaged
        others = [found for cell, found in damaged.items() if cell not in cells]
        if others:
            raise others[0] if len(others) == 1 else others[0].with_repair(f"{others[0].repair} ({len(others)} damaged cells in all)")
        return {cell: found for cell, found in damaged.items() if cell in cells}

    @cached_property
    def records(self) -> list[store.CellRecord]:
        """Every finished cell (`store.records`), from this read: UnreadableFile for one with a damaged file."""
        rows = [
            (folder, info, store.damage(folder, strict=False, manifest=info) if found is not None and found.problem == MISSING else found)
            for folder, info, found in self.finished
        ]  # a missing file is left to the strict verbs
        return store.records(self.path, rows, self.configs)

    @property
    def old_layout(self) -> list[Path]:
        """Cell folders written with the reference in the path (`runs/<dataset>/<reference>/noise-<x>/<method>/seed-<s>`),
        from this read; `bench rescore` moves them."""
        return [folder for folder, info in self.manifests.items() if "reference" in (info or {}).get("cell", {})]

    def is_done(self, cell: Cell) -> bool:
        return store.is_done(self.path, cell)

    def derive(self, how):
        """`how(self)`, computed once for this folder (e.g. `bench.report.table_notes.run_records`)."""
        if how not in self._derived:
            self._derived[how] = how(self)
        return self._derived[how]

    @cached_property
    def training_outcomes(self) -> pd.DataFrame:
        return store.training_outcomes(self.records)

    @cached_property
    def rater_averages(self) -> pd.DataFrame:
        return store.rater_averages(self.records)

    def collect(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """`store.collect` from this read (its cells are finished: a verb that trains opens the folder after training)."""
        return store.collect(self.path, self.records)

    def read_collected(self, name: str, rebuild_missing: bool = False) -> pd.DataFrame:
        """`store.read_collected`, rebuilding from this read."""
        return store.read_collected(self.path, name, rebuild_missing, opened=self)

    def read_summary(self) -> pd.DataFrame:
        return self.read_collected(store.SUMMARY)
