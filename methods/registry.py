"""Method registry in the spirit of timm: a decorator, one explicit import list, variants as config overrides."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from methods.base import DataSpec, Method


@dataclass(frozen=True)
class MethodEntry:
    """A registered name: a Method class plus config overrides (a variant is one such line)."""

    name: str
    cls: type[Method]
    summary: str
    group: str = "main"  # "main" rows of the paper's tables, or "ablation"
    overrides: dict = field(default_factory=dict)


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


def register_method(name: str, summary: str, group: str = "main", **overrides):
    """Class decorator: register `cls` under `name`, optionally with config overrides."""

    def decorate(cls: type[Method]) -> type[Method]:
        _add(MethodEntry(name, cls, summary, group, overrides))
        return cls

    return decorate


def register_variant(name: str, base: str, summary: str, group: str = "ablation", **overrides) -> None:
    """Register `name` as `base` with some config fields changed (one line per variant)."""
    entry = get_entry(base)
    _add(MethodEntry(name, entry.cls, summary, group, {**entry.overrides, **overrides}))


def get_entry(name: str) -> MethodEntry:
    if name not in _ENTRIES:
        raise UnknownMethodError(f"unknown method {name!r}; known: {', '.join(_ENTRIES)}")
    return _ENTRIES[name]


def method_names(group: str | None = None) -> list[str]:
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
