"""The import graph inside bench/ is one-way (docs/architecture.md#architecture): no module imports, even inside a function, one that imports it back."""

import ast
import re
import subprocess
import sys
from pathlib import Path

from conftest import REPO


def bench_graph() -> dict[str, set[str]]:
    files = {p: ast.parse(p.read_text()) for p in (REPO / "bench").rglob("*.py")}

    def name(p: Path) -> str:
        return ".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")

    modules = {name(p) for p in files}
    graph = {}
    for path, tree in files.items():
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bench"):
                deps |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name.startswith("bench")}
        me = name(path)
        graph[me] = {d for d in deps if d in modules and d != me and not me.startswith(d + ".")}
    return graph


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


def test_no_import_circle_inside_bench():
    graph = bench_graph()
    assert {"bench.cli", "bench.cli.options", "bench.train.harness", "bench.run.sweep", "bench.store", "bench.evaluate.scoring"} <= set(
        graph
    )
    assert find_cycle(graph) == [], " -> ".join(find_cycle(graph))


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) == []


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


def test_the_cli_budget_names_are_the_budgets():
    from bench.cli.options import BUDGET_NAMES
    from bench.train.budget import BUDGETS

    assert tuple(BUDGETS) == BUDGET_NAMES
