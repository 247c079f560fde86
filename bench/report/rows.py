"""The rows of every table and figure: which methods, in which order, under which names (from the registry and the study).

The reference method ("ours", `paper.reference_method`), the Oracle (`paper.oracle`) and where the paper shows a row that
is not Table I's or the ablation table's (its text's substitutions, the declared readings, the full model's ablation row)
come from the study (bench/study.py), which every helper here takes as its first argument (`paper`, handed down from the
command); the "average" row is the raters' Average DSC. Order, groups and display names come from the method registry,
so no table keeps a list of its own; a parameter-sweep cell (`lf-net@beta=3`) is drawn in the parameter figures, not in
the tables.
"""

from __future__ import annotations

import methods
from bench.study import Study
from methods.registry import PARAM_SEP

AVERAGE = "average"


def entry(paper: Study, method: str) -> methods.MethodEntry | None:
    """The registry entry behind a row's name; None for the Average/Oracle rows, parameter cells and names no longer registered."""
    if is_param_variant(method) or method in (AVERAGE, paper.oracle):
        return None
    try:
        return methods.get_entry(method)
    except methods.UnknownMethodError:
        return None


def table_of(paper: Study, method: str) -> str | None:
    """Which table a row belongs to: "ablation" (an ablation's row), "ablation-text" (one the study lists in
    `ablation_text`, below that table's rule), "readings" (another of the study's readings), else "main" (Tables I-III,
    a name no longer registered too); parameter cells and Average/Oracle: None."""
    if is_param_variant(method) or method in (AVERAGE, paper.oracle):
        return None
    found = entry(paper, method)
    if found is not None and found.group == "ablation":
        return "ablation-text" if method in paper.ablation_text else "ablation"
    if found is not None and method != paper.reference_method and method in {r["method"] for r in paper.readings}:
        return "readings"
    return "main"


def is_ablation(paper: Study, method: str) -> bool:
    return table_of(paper, method) in ("ablation", "ablation-text")


def is_param_variant(method: str) -> bool:
    """A parameter-sweep cell (`lf-net@beta=3`): drawn in the parameter figures, not in the tables."""
    return PARAM_SEP in method


def registry_order(names) -> list[str]:
    """`names` in registration order (the import list of methods/__init__.py), unregistered names after, alphabetically."""
    names = set(names)
    known = [m for m in methods.method_names() if m in names]
    return known + sorted(names - set(known))


def main_methods(paper: Study, names) -> list[str]:
    """Table I rows present, in registration order; no Oracle, Average, ablations or parameter variants."""
    return registry_order(n for n in names if table_of(paper, n) == "main")


def ablation_methods(paper: Study, names) -> list[str]:
    """The ablation table's rows present, in registration order, with the full model (the reference method) after the row
    the study's `full_model` names (last where it names none)."""
    rows = registry_order(n for n in names if is_ablation(paper, n))
    reference = paper.reference_method
    if reference in set(names) and entry(paper, reference) is not None:
        registered = methods.method_names()
        named = paper.full_model.get("after", "")
        after = registered.index(named) if named in registered else len(registered)
        later = [i for i, r in enumerate(rows) if r not in registered or registered.index(r) > after]
        rows.insert(later[0] if later else len(rows), reference)
    return rows


def display(paper: Study, method: str, table: str = "main") -> str:
    """A row's label: the registry's display name (in the ablation table, the full model's the study's `full_model` label);
    else the name itself."""
    if method in (AVERAGE, paper.oracle):
        return method.capitalize()
    found = entry(paper, method)
    if found is None:
        return method
    label = paper.full_model.get("label", "") if method == paper.reference_method else ""
    return label if table == "ablation" and label else found.display


def figure_methods(paper: Study, names) -> list[str]:
    """The methods a per-method figure shows, in table order: the paper's, the Oracle, then LF-Net's ablations."""
    oracle = [paper.oracle] if paper.oracle in names else []
    return list(dict.fromkeys([*main_methods(paper, names), *oracle, *ablation_methods(paper, names)]))
