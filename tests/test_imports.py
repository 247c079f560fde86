"""The import graph is one-way (docs/architecture.md#architecture): between the packages (labels under datasets and
methods, all three under bench), between bench's wings (the ground floor under train, run, report, reproduce, perf and
the CLI) and inside each, no module imports, even inside a function, one that imports it back or one above it."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

PACKAGES = ("labels", "datasets", "methods", "bench")
# What each package may import of the others.
BELOW = {"labels": set(), "datasets": {"labels"}, "methods": {"labels"}, "bench": {"labels", "datasets", "methods"}}
# bench's floors, lowest first; a module may import its own floor and those below. perf times the training loop only.
FLOORS = (
    ("ground", ("bench.study", "bench.files", "bench.store", "bench.evaluate")),
    ("train", ("bench.train",)),
    ("run", ("bench.run", "bench.perf")),
    ("report", ("bench.report",)),
    ("reproduce", ("bench.reproduce",)),
    ("cli", ("bench.cli", "bench.__main__")),
)


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")


def project_graph() -> dict[str, set[str]]:
    """Every module of the four packages -> the project modules it imports (a package counts as its __init__)."""
    files = {p: ast.parse(p.read_text()) for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py")}
    modules = {module_name(p) for p in files}
    graph = {}
    for path, tree in files.items():
        me = module_name(path)
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                deps |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
        graph[me] = {d for d in deps if d in modules and d != me and not me.startswith(d + ".")}
    return graph


def floor(module: str) -> int:
    """The rank of a bench module's floor (ValueError for a module on none: a new top-level module must be placed)."""
    for rank, (_, prefixes) in enumerate(FLOORS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank
    if module == "bench":
        return 0
    raise ValueError(f"{module} is on no floor of FLOORS")


def upward(graph: dict[str, set[str]]) -> list[str]:
    """The arrows that point up: to a package not below the importer's, or to a higher floor of bench."""
    out = []
    for me, deps in sorted(graph.items()):
        mine = me.split(".")[0]
        for dep in sorted(deps):
            theirs = dep.split(".")[0]
            if theirs != mine and theirs not in BELOW[mine]:
                out.append(f"{me} -> {dep}")
            elif mine == theirs == "bench" and floor(dep) > floor(me):
                out.append(f"{me} -> {dep}")
    return out


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    done, stack = set(), []

    def visit(u: str) -> list[str]:
        if u in stack:
            return stack[stack.index(u) :] + [u]
        if u in done:
            return []
        stack.append(u)
        for v in sorted(graph.get(u, ())):
            if cycle := visit(v):
                return cycle
        stack.pop()
        done.add(u)
        return []

    for u in sorted(graph):
        if cycle := visit(u):
            return cycle
    return []


def test_no_import_circle_in_any_package():
    graph = project_graph()
    assert {
        "bench.cli",
        "bench.train.harness",
        "bench.run.sweep",
        "bench.store",
        "labels.overlap",
        "datasets.noise",
        "methods.registry",
    } <= set(graph)
    assert find_cycle(graph) == [], " -> ".join(find_cycle(graph))


def test_no_arrow_points_up_between_packages_or_floors():
    graph = project_graph()
    assert upward(graph) == []
    for module in graph:  # every bench module is on a floor (ValueError otherwise)
        if module.startswith("bench"):
            floor(module)


def test_the_rules_catch_a_cycle_and_an_upward_arrow():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) == []
    assert upward({"labels.overlap": {"datasets.noise"}, "bench.train.harness": {"bench.run.cell"}, "bench.run.cell": {"bench.train.harness"},
                   "methods.base": {"labels.fusion"}}) == ["bench.train.harness -> bench.run.cell", "labels.overlap -> datasets.noise"]  # fmt: skip
    with pytest.raises(ValueError, match="bench.extra is on no floor"):
        floor("bench.extra")


def test_bench_is_a_few_floors_of_small_modules():
    """At most eight top-level modules beside the wings, and no module of the project over 460 lines."""
    top = sorted(p.name for p in (REPO / "bench").glob("*.py"))
    assert len(top) <= 8, top
    long = {
        str(p.relative_to(REPO)): n for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py") if (n := len(p.read_text().splitlines())) > 460
    }
    assert long == {}


def test_the_cli_parses_without_the_run_side_and_only_it_uses_argparse():
    """`--help` stays instant: parsing imports neither torch, pandas nor the verbs' run side; argparse stays inside bench/cli/."""
    code = "import sys; from bench.cli import build_parser; build_parser(); print(sorted(m for m in ('torch', 'pandas', 'methods', 'datasets', 'bench.run.sweep') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert out.strip() == "[]"
    users = sorted(
        str(p.relative_to(REPO))
        for p in (REPO / "bench").rglob("*.py")
        if re.search(r"^import argparse|^from argparse", p.read_text(), re.M)
    )
    assert users and all(u.startswith("bench/cli/") for u in users), users


def test_the_cli_budget_names_and_samples_are_the_run_sides():
    from bench.cli.options import BUDGET_NAMES, DEFAULT_SAMPLES
    from bench.evaluate import scoring
    from bench.run.resolve import RunOptions
    from bench.train.budget import BUDGETS

    assert tuple(BUDGETS) == BUDGET_NAMES
    assert DEFAULT_SAMPLES == scoring.DEFAULT_SAMPLES == RunOptions(Path("r"), Path("d"), BUDGETS["quick"]).samples
