"""The rows of every table and figure: which methods, in which order, under which names (from the registry and the study).

The reference method ("ours"), the Oracle and where the paper shows a row that is not Table I's or the ablation
table's (its text's substitutions, the declared readings, the full model's ablation row) come from the study
(bench/study.py); the "average" row is the raters' Average DSC. Order, groups and display names come from the method
registry, so no table keeps a list of its own; a parameter-sweep cell (`lf-net@beta=3`) is drawn in the parameter
figures, not in the tables.
"""

from __future__ import annotations

import methods
from bench import study
from methods.registry import PARAM_SEP

AVERAGE = "average"


def reference_method() -> str:
    """The study's "ours": the reference of every paired test (read when asked, so another study file can be chosen)."""
    return study.current().reference_method


def oracle() -> str:
    """The study's Oracle row (trained on ground truth: an upper bound, never ranked)."""
    return study.current().oracle


def entry(method: str) -> methods.MethodEntry | None:
    """The registry entry behind a row's name; None for the Average/Oracle rows, parameter cells and names no longer registered."""
    if is_param_variant(method) or method in (AVERAGE, oracle()):
        return None
    try:
        return methods.get_entry(method)
    except methods.UnknownMethodError:
        return None


def table_of(method: str) -> str | None:
    """Which table a row belongs to: "ablation" (an ablation's row), "ablation-text" (one the study lists in
    `ablation_text`, below that table's rule), "readings" (another of the study's readings), else "main" (Tables I-III,
    a name no longer registered too); parameter cells and Average/Oracle: None."""
    if is_param_variant(method) or method in (AVERAGE, oracle()):
        return None
    paper, found = study.current(), entry(method)
    if found is not None and found.group == "ablation":
        return "ablation-text" if method in paper.ablation_text else "ablation"
    if found is not None and method != paper.reference_method and method in {r["method"] for r in paper.readings}:
        return "readings"
    return "main"


def is_ablation(method: str) -> bool:
    return table_of(method) in ("ablation", "ablation-text")


def is_param_variant(method: str) -> bool:
    """A parameter-sweep cell (`lf-net@beta=3`): drawn in the parameter figures, not in the tables."""
    return PARAM_SEP in method


def registry_order(names) -> list[str]:
    """`names` in registration order (the import list of methods/__init__.py), unregistered names after, alphabetically."""
    names = set(names)
    known = [m for m in methods.method_names() if m in names]
    return known + sorted(names - set(known))


def main_methods(names) -> list[str]:
    """Table I rows present, in registration order; no Oracle, Average, ablations or parameter variants."""
    return registry_order(n for n in names if table_of(n) == "main")


def ablation_methods(names) -> list[str]:
    """The ablation table's rows present, in registration order, with the full model (the reference method) after the row
    the study's `full_model` names (last where it names none)."""
    rows = registry_order(n for n in names if is_ablation(n))
    reference = reference_method()
    if reference in set(names) and entry(reference) is not None:
        registered = methods.method_names()
        named = study.current().full_model.get("after", "")
        after = registered.index(named) if named in registered else len(registered)
        later = [i for i, r in enumerate(rows) if r not in registered or registered.index(r) > after]
        rows.insert(later[0] if later else len(rows), reference)
    return rows


def display(method: str, table: str = "main") -> str:
    """A row's label: the registry's display name (in the ablation table, the full model's the study's `full_model` label);
    else the name itself."""
    if method in (AVERAGE, oracle()):
        return method.capitalize()
    found = entry(method)
    if found is None:
        return method
    label = study.current().full_model.get("label", "") if method == reference_method() else ""
    return label if table == "ablation" and label else found.display


def figure_methods(names) -> list[str]:
    """The methods a per-method figure shows, in table order: the paper's, the Oracle, then LF-Net's ablations."""
    return list(dict.fromkeys([*main_methods(names), *([oracle()] if oracle() in names else []), *ablation_methods(names)]))
