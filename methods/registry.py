"""Method registry in the spirit of timm: a decorator, one explicit import list, variants as config overrides."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from methods.base import DataSpec, Method


@dataclass(frozen=True)
class MethodEntry:
    """A registered name: a Method class plus config overrides (a variant is one such line), its group and label.

    `group` decides `--methods all` ("main"), `--methods field` (the field's sampling methods) and `--methods ablation`;
    a method registered without one joins none ("variant": it runs only where named); `display` is the label in
    tables and figures; rows follow registration order. Where a paper shows a row apart (its text's
    substitutions, its readings, the full model's ablation row) is the study's business (bench/report/rows.py).
    """

    name: str
    cls: type[Method]
    summary: str
    group: str = "variant"  # "main" (--methods all), "field" (--methods field), "variant" (run by name only) or "ablation"
    overrides: dict = field(default_factory=dict)
    display: str = ""


_ENTRIES: dict[str, MethodEntry] = {}


class UnknownMethodError(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


def _add(entry: MethodEntry) -> None:
    if entry.name in _ENTRIES:
        raise ValueError(f"method {entry.name!r} is registered twice ({_ENTRIES[entry.name].cls.__name__} and {entry.cls.__name__})")
    unknown = set(entry.overrides) - {f.name for f in dataclasses.fields(entry.cls.Config)}
    if unknown:
        raise ValueError(f"method {entry.name!r}: {entry.cls.__name__}.Config has no field(s) {sorted(unknown)}")
    _ENTRIES[entry.name] = entry


def register_method(name: str, summary: str, group: str = "variant", *, display: str = "", **overrides):
    """Class decorator: register `cls` under `name` (shown as `display`), optionally with config overrides; in no group
    unless given one ("variant": run only by name; the paper's methods say group="main" to join `--methods all`)."""

    def decorate(cls: type[Method]) -> type[Method]:
        _add(MethodEntry(name, cls, summary, group, overrides, display or name))
        return cls

    return decorate


def register_variant(name: str, base: str, summary: str, group: str = "ablation", *, display: str = "", **overrides) -> None:
    """Register `name` as `base` with some config fields changed (one line per variant), an ablation by default."""
    entry = get_entry(base)
    _add(MethodEntry(name, entry.cls, summary, group, {**entry.overrides, **overrides}, display or name))


def get_entry(name: str) -> MethodEntry:
    if name not in _ENTRIES:
        raise UnknownMethodError(f"unknown method {name!r}; known: {', '.join(_ENTRIES)}")
    return _ENTRIES[name]


def method_names(group: str | None = None) -> list[str]:
    """Registered names, in registration order, of one `group` (None: any)."""
    return [n for n, e in _ENTRIES.items() if group is None or e.group == group]


def resolve_config(name: str, overrides: dict | None = None):
    """The method's Config with the entry's and the user's overrides applied (user last)."""
    entry = get_entry(name)
    values = {**entry.overrides, **(overrides or {})}
    unknown = set(values) - {f.name for f in dataclasses.fields(entry.cls.Config)}
    if unknown:
        raise UnknownMethodError(f"{name}: unknown parameter(s) {sorted(unknown)}")
    return entry.cls.Config(**values)


def build_method(name: str, spec: DataSpec, overrides: dict | None = None) -> Method:
    """Instantiate a registered method for data described by `spec`."""
    return get_entry(name).cls(resolve_config(name, overrides), spec)


# A parameter variant run from the command line (`--set lf-net.beta=3`) is its own cell, named
# `lf-net@beta=3` (several parameters: `lf-net@beta=3@lam=0.1`, keys sorted), so each value lands
# in its own results folder and its own rows of the table.
PARAM_SEP = "@"


def parse_value(text: str):
    """A parameter value from the command line: int, float, true/false, none, else the string itself."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered == "none":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text.strip()


def format_value(value) -> str:
    return "none" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


SAFE_VALUE = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9._+-]*")  # the name is a folder name: no '/', no '..'


@dataclass(frozen=True, eq=False)
class MethodRef:
    """A cell's method as a typed value: the registered name (or the study's Oracle) and its parameters, keys sorted.

    `label` is its one spelling (`lf-net@beta=3@lam=0.1`): the cell's folder name and the tables' "method"; `parse` is
    the one reader of a label (a folder's name, a manifest's field). Two references are one when their labels are.
    The plan (bench/run/plan.py) makes them once; the cell (`bench.identity.Cell.ref`) carries one.
    """

    name: str
    params: tuple[tuple[str, object], ...] = ()

    def __post_init__(self) -> None:
        if not self.name or PARAM_SEP in self.name:
            raise UnknownMethodError(f"{self.name!r}: a method name holds no {PARAM_SEP!r}; its parameters follow it, e.g. lf-net@beta=3")
        object.__setattr__(self, "params", tuple(sorted(dict(self.params).items())))
        for key, value in self.params:
            text = format_value(value)
            if not SAFE_VALUE.fullmatch(text) or ".." in text:
                raise UnknownMethodError(f"{self.name}.{key}={text!r}: a parameter value may hold only letters, digits and . _ + -")

    @classmethod
    def of(cls, name: str, params: dict | None = None) -> MethodRef:
        """`lf-net`, {"beta": 3} -> the reference labelled `lf-net@beta=3`."""
        return cls(name, tuple((params or {}).items()))

    @classmethod
    def parse(cls, label: str) -> MethodRef:
        """`lf-net@beta=3@lam=0.1` -> MethodRef("lf-net", (("beta", 3), ("lam", 0.1))); a plain name -> no parameters."""
        name, *parts = label.split(PARAM_SEP)
        params = {}
        for part in parts:
            key, sep, value = part.partition("=")
            if not sep or not key:
                raise UnknownMethodError(f"{label!r}: expected {name}@PARAM=VALUE, e.g. lf-net@beta=3")
            if key in params:
                raise UnknownMethodError(f"{label!r}: parameter {key!r} given twice")
            params[key] = parse_value(value)
        return cls.of(name, params)

    @property
    def label(self) -> str:
        return PARAM_SEP.join([self.name, *(f"{key}={format_value(value)}" for key, value in self.params)])

    @property
    def kwargs(self) -> dict:
        """The parameters as config overrides."""
        return dict(self.params)

    def __eq__(self, other) -> bool:
        return isinstance(other, MethodRef) and self.label == other.label

    def __hash__(self) -> int:
        return hash(self.label)

    def __str__(self) -> str:
        return self.label


def param_name(base: str, params: dict) -> str:
    """`lf-net`, {"beta": 3} -> `lf-net@beta=3`; no parameters -> `base` (`MethodRef.of(...).label`)."""
    return MethodRef.of(base, params).label
