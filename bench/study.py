"""The study a benchmark reruns, read from its data file (`paper_figures/lfnet_paper.toml`, or the file `$BENCH_STUDY` names).

Everything the code needs to know about one paper lives in that file, each entry with the line of
the paper's LaTeX it comes from: which method is "ours" (`reference_method`), what the Oracle row
trains, the paper budget's schedules, settings that differ by dataset, the numbers of its tables
and text, and the claims of its text. A second paper is a second file
(`BENCH_STUDY=path/to/study.toml python -m bench …`), not edits across the package.

The study is a value handed down, never an ambient global: a command reads the environment once,
where it starts (`from_environment`, in `bench.cli.main`), and passes the `Study` to the code that
needs it (the run's `RunOptions.study`, the report's `paper` arguments); library callers that do
not choose get `default()`, the packaged LF-Net study.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

STUDY_FILE = Path(__file__).resolve().parent.parent / "paper_figures" / "lfnet_paper.toml"


@dataclass(frozen=True)
class Column:
    """One column of a paper table: a metric of a structure on a dataset, scored against `reference`.

    reference: "gt", "majority", "rater-mean", or "expert" (a ground truth drawn for the paper and
    not released: no measurement can be scored against it).
    """

    dataset: str
    metric: str
    reference: str = "gt"
    structure: str = "foreground"


@dataclass(frozen=True)
class Row:
    method: str
    line: int
    mean: tuple[float, ...]
    sd: tuple[float, ...]


@dataclass(frozen=True)
class Table:
    id: str
    label: str
    line: int
    title: str
    columns: tuple[Column, ...]
    rows: tuple[Row, ...]
    stand_in: str = ""  # a dataset that stands in for the table's own at the quick budget (its cells: pipeline checks)

    def value(self, method: str, column: int) -> tuple[float, float] | None:
        """(mean, sd) the paper gives for a method in a column, or None (not in the table, or N/A)."""
        for row in self.rows:
            if row.method == method and not math.isnan(row.mean[column]):
                return row.mean[column], row.sd[column]
        return None


@dataclass(frozen=True)
class Value:
    """A number of the paper's text outside its tables."""

    id: str
    line: int
    column: Column
    method: str
    mean: float
    sd: float
    text: str


@dataclass(frozen=True)
class Claim:
    """A statement of the text, checkable by its `kind` (bench/reproduce/assessment.py says how); `params` holds the rest."""

    id: str
    line: int
    kind: str
    text: str
    params: dict = field(default_factory=dict)


@dataclass(frozen=True)
class PaperStage:
    """One line of the paper budget: a method's stage as the paper or its official code trained it."""

    epochs: int
    source: str
    line: int = 0
    optimiser: str = "adam"
    lr: float = 1e-4
    weight_decay: float = 0.0
    batch_size: int | None = None  # None: the dataset's paper batch size
    augment: str = "none"
    steps: int | None = None  # a recipe given in iterations: this many steps, whatever the dataset's size (`epochs` unused)


@dataclass(frozen=True)
class Study:
    name: str
    title: str
    citation: str
    source: str
    reference_method: str
    oracle: str
    oracle_trains: str
    oracle_line: int
    paper_raters: dict  # dataset -> the rater setting identified as the paper's
    readings: tuple[dict, ...]
    settings: tuple[dict, ...]
    stages: dict  # (method, stage) -> PaperStage
    same_as: dict  # method -> the method whose paper lines it shares
    stage_reading: dict  # a stage length the paper states apart from its schedule: datasets, method, stage, epochs, config
    tables: tuple[Table, ...]
    values: tuple[Value, ...]
    claims: tuple[Claim, ...]
    file: str = ""  # the file it was read from (errors name it)
    ablation_text: tuple[str, ...] = ()  # rows the text reports below the ablation table's rule
    full_model: dict = field(default_factory=dict)  # the reference method's row in the ablation table: label, after

    def method_settings(self, dataset: str, method: str) -> dict:
        """The paper's config values for `method` (a registered base name) on `dataset`, e.g. {"lam": 0.01}."""
        out = {}
        for entry in self.settings:
            if dataset in entry["datasets"] and entry["method"] == method:
                out.update(entry["config"])
        return out

    def table(self, table_id: str) -> Table:
        return next(t for t in self.tables if t.id == table_id)


def _column(raw: dict) -> Column:
    return Column(raw["dataset"], raw["metric"], raw.get("reference", "gt"), raw.get("structure", "foreground"))


def load(path: Path = STUDY_FILE) -> Study:
    """Read a study file; a malformed one raises ValueError naming the file and the problem."""
    try:
        raw = tomllib.loads(Path(path).read_text())
        head = raw["study"]
        tables = []
        for t in raw.get("tables", []):
            columns = tuple(_column(c) for c in t["columns"])
            rows = tuple(
                Row(r["method"], r["line"], tuple(map(float, r["mean"])), tuple(map(float, r.get("sd", [math.nan] * len(columns)))))
                for r in t["rows"]
            )
            if any(len(r.mean) != len(columns) or len(r.sd) != len(columns) for r in rows):
                raise ValueError(f"table {t['id']}: every row needs one mean (and sd) per column")
            tables.append(Table(t["id"], t["label"], t["line"], t["title"], columns, rows, t.get("stand_in", "")))
        values = tuple(
            Value(v["id"], v["line"], _column(v), v["method"], float(v["mean"]), float(v.get("sd", math.nan)), v["text"])
            for v in raw.get("values", [])
        )
        known = {"id", "line", "kind", "text"}
        claims = tuple(
            Claim(c["id"], c["line"], c["kind"], c["text"], {k: v for k, v in c.items() if k not in known}) for c in raw.get("claims", [])
        )
        budget, shown = raw.get("budget", {}), raw.get("presentation", {})
        stages = {}
        for s in budget.get("stage", []):
            extra = {k: s[k] for k in ("optimiser", "lr", "weight_decay", "batch_size", "augment", "steps") if k in s}
            stages[(s["method"], s["stage"])] = PaperStage(s["epochs"], s["source"], s.get("line", 0), **extra)
        return Study(
            head["name"],
            head["title"],
            head["citation"],
            head["source"],
            head["reference_method"],
            head["oracle"],
            head["oracle_trains"],
            head.get("oracle_line", 0),
            dict(head.get("paper_raters", {})),
            tuple(head.get("readings", [])),
            tuple(raw.get("settings", [])),
            stages,
            dict(budget.get("same_as", {})),
            dict(budget.get("stage_reading", {})),
            tuple(tables),
            values,
            claims,
            str(path),
            tuple(shown.get("ablation_text", [])),
            dict(shown.get("full_model", {})),
        )
    except (tomllib.TOMLDecodeError, KeyError, TypeError, ValueError) as e:
        raise ValueError(f"study {path}: {type(e).__name__}: {e}") from None


def study_file() -> Path:
    """The study file `$BENCH_STUDY` names (a second paper's study is a second file), else the LF-Net paper's
    (`STUDY_FILE`)."""
    return Path(os.environ.get("BENCH_STUDY") or STUDY_FILE)


def from_environment() -> Study:
    """The study a command reruns: the file `$BENCH_STUDY` names, else the packaged one. Read once, where the command
    starts (`bench.cli.main`), and handed down from there."""
    return load(study_file())


@cache
def default() -> Study:
    """The packaged LF-Net study (`STUDY_FILE`), for callers outside a command that choose no other."""
    return load(STUDY_FILE)
