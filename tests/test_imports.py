"""The import graph is one-way (docs/architecture.md#architecture): between the packages (labels under datasets and
methods, all three under bench), between bench's wings (the ground floor under train, run, report, reproduce, perf and
the CLI), between datasets' wings (the contract under the settings, the rater simulators, the adapters and the registry)
and inside each, no module imports, even inside a function, one that imports it back or one above it."""

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
# The floors of bench and of datasets, lowest first; a module may import its own floor and those below. A package's own
# name (its __init__) matches only itself. perf times the training loop only.
FLOORS = {
    "bench": (
        ("ground", ("bench", "bench.study", "bench.files", "bench.identity", "bench.store", "bench.results_folder", "bench.evaluate")),
        ("train", ("bench.train",)),
        ("run", ("bench.run", "bench.perf")),
        ("report", ("bench.report",)),
        ("reproduce", ("bench.reproduce",)),
        ("cli", ("bench.cli", "bench.__main__")),
    ),
    "datasets": (
        ("contract", ("datasets.contract",)),
        ("settings", ("datasets.settings",)),  # rater settings, noise levels, DatasetSpec and the checked loader
        ("raters", ("datasets.raters",)),  # the rater simulators, their strength search and pool usability
        ("adapters", ("datasets.adapters",)),  # one module or sub-package per dataset, with its file readers
        ("registry", ("datasets",)),  # datasets/__init__.py: DATASETS, collected from the adapters' SPECS
    ),
}


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
    """The rank of a bench or datasets module's floor (ValueError for a module on none: a new top-level module must be placed)."""
    package = module.split(".")[0]
    for rank, (_, prefixes) in enumerate(FLOORS[package]):
        if any(module == p or (p != package and module.startswith(p + ".")) for p in prefixes):
            return rank
    raise ValueError(f"{module} is on no floor of FLOORS")


def upward(graph: dict[str, set[str]]) -> list[str]:
    """The arrows that point up: to a package not below the importer's, or to a higher floor of bench or datasets."""
    out = []
    for me, deps in sorted(graph.items()):
        mine = me.split(".")[0]
        for dep in sorted(deps):
            theirs = dep.split(".")[0]
            if theirs != mine and theirs not in BELOW[mine]:
                out.append(f"{me} -> {dep}")
            elif mine == theirs and mine in FLOORS and floor(dep) > floor(me):
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
        "datasets.settings",
        "datasets.raters.fsl",
        "datasets.adapters.riga.masks",
        "methods.registry",
    } <= set(graph)
    assert find_cycle(graph) == [], " -> ".join(find_cycle(graph))


def test_no_arrow_points_up_between_packages_or_floors():
    graph = project_graph()
    assert upward(graph) == []
    for module in graph:  # every bench and datasets module is on a floor (ValueError otherwise)
        if module.split(".")[0] in FLOORS:
            floor(module)


def test_each_adapter_stands_alone():
    """An adapter (with its file readers) imports no other dataset's adapter: what two share is in the contract or the
    rater simulators, below both."""
    graph = project_graph()
    wing = "datasets.adapters."
    adapters = {m.split(".")[2] for m in graph if m.startswith(wing)}
    assert {"mnist", "riga", "ms_lesion", "choledoch", "lidc", "cm_folder", "folder"} <= adapters
    crossing = [
        f"{me} -> {dep}"
        for me, deps in sorted(graph.items())
        if me.startswith(wing)
        for dep in sorted(deps)
        if dep.startswith(wing) and dep.split(".")[2] != me.split(".")[2]
    ]
    assert crossing == []


def test_the_rules_catch_a_cycle_and_an_upward_arrow():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) == []
    assert upward(
        {
            "labels.overlap": {"datasets.settings"},
            "bench.train.harness": {"bench.run.cell"},
            "bench.run.cell": {"bench.train.harness"},
            "methods.base": {"labels.fusion"},
        }
    ) == ["bench.train.harness -> bench.run.cell", "labels.overlap -> datasets.settings"]
    assert upward(
        {
            "datasets.raters.cm": {"datasets.adapters.mnist"},
            "datasets.adapters.mnist": {"datasets.raters.cm", "datasets.settings"},
            "datasets.contract": {"datasets"},
        }
    ) == ["datasets.contract -> datasets", "datasets.raters.cm -> datasets.adapters.mnist"]
    with pytest.raises(ValueError, match="bench.extra is on no floor"):
        floor("bench.extra")
    with pytest.raises(ValueError, match="datasets.extra is on no floor"):
        floor("datasets.extra")


ARCHITECTURE = REPO / "docs" / "architecture.md"


def drawn(text: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """The diagrams of floors in docs/architecture.md: (the words before one that say its order, "top floor first" or
    "lowest first"; its lines as (first word without a trailing "/", the rest)), arrow lines left out."""
    out = []
    for m in re.finditer(r"(top floor first|lowest first)(?:(?!```).)*```\n(.*?)```", text, re.S):
        lines = [line.split(maxsplit=1) + [""] for line in m.group(2).splitlines() if line.strip() and line.strip() != "↓"]
        out.append((m.group(1), [(words[0].rstrip("/"), words[1]) for words in lines]))
    return out


def misdrawn(order: str, lines: list[tuple[str, str]]) -> list[str]:
    """Where a diagram disagrees with BELOW or FLOORS: a package not drawn on a floor under one that imports it, two floors
    drawn out of the order the diagram's words say, a floor left out, a ground-floor module missing from the ground line."""
    names = [name for name, _ in lines]
    top_first = order == "top floor first"
    if set(names) == set(PACKAGES):
        under = {name: set(names[i + 1 :] if top_first else names[:i]) for i, name in enumerate(names)}
        return [f"{p} imports {q}, not drawn on a floor under it" for p in names for q in sorted(BELOW[p] - under[p])]
    package = next(p for p, floors in FLOORS.items() if {n for n, _ in floors} & set(names))
    floor_names = [n for n, _ in FLOORS[package]]
    ranks = [floor_names.index(n) if n in floor_names else floor(package if n == "__init__" else f"{package}.{n}") for n in names]
    pairs = zip(names, ranks, names[1:], ranks[1:])
    out = [f"{package}: {a} and {b} are drawn out of order" for a, r, b, q in pairs if (q > r if top_first else q < r)]
    out += [f"{package}: floor {floor_names[r]} is not drawn" for r in range(len(floor_names)) if r not in ranks]
    if floor_names[0] == "ground":  # bench's: the line names each top-level module and wing of its ground floor
        ground = dict(lines).get("ground", "")
        out += [f"{package}: {m} is not on the ground line" for m in FLOORS[package][0][1][1:] if m.split(".")[1] not in ground]
    return out


def test_the_architecture_page_draws_the_floors_in_this_files_order():
    """docs/architecture.md draws the packages and the floors of bench and datasets in the order its words say (top floor
    first), and that order is BELOW's and FLOORS' above."""
    diagrams = drawn(ARCHITECTURE.read_text())
    assert [(order, lines[0][0]) for order, lines in diagrams] == [
        ("top floor first", "bench"),  # the packages
        ("top floor first", "cli"),  # bench's floors
        ("top floor first", "__init__"),  # datasets' floors
    ]
    assert [problem for order, lines in diagrams for problem in misdrawn(order, lines)] == []
    # what the page once drew: bench's floors top floor first under the words "lowest first"
    assert misdrawn("lowest first", diagrams[1][1])[0] == "bench: cli and reproduce are drawn out of order"
    assert misdrawn("top floor first", [(n, "") for n in ("bench", "labels", "datasets", "methods")]) == [
        "datasets imports labels, not drawn on a floor under it",
        "methods imports labels, not drawn on a floor under it",
    ]
    assert misdrawn("top floor first", [(n, "") for n in ("__init__", "raters", "adapters", "contract")]) == [
        "datasets: raters and adapters are drawn out of order",
        "datasets: floor settings is not drawn",
    ]
    wings = [(n, "") for n in ("cli", "run", "perf", "report", "reproduce", "train")]
    assert misdrawn("top floor first", [*wings, ("ground", "study · files · store")]) == [
        "bench: perf and report are drawn out of order",
        "bench: report and reproduce are drawn out of order",
        "bench: bench.identity is not on the ground line",
        "bench: bench.results_folder is not on the ground line",
        "bench: bench.evaluate is not on the ground line",
    ]


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


# What a method module may import of methods/: the shared pieces, and its own companion modules (`lf_net_*` of lf_net).
METHOD_SHARED = {"methods", "methods.kit", "methods.base", "methods.unet", "methods.latent", "methods.registry"}


def borrowed(graph: dict[str, set[str]]) -> list[str]:
    """The arrows from one method module to another's: a method takes shared pieces from the kit, never from a sibling,
    and the shared modules take nothing from a method (only the package's __init__ lists them all)."""
    out = []
    for me, deps in sorted(graph.items()):
        if not me.startswith("methods."):
            continue
        for dep in sorted(deps):
            if dep.startswith("methods.") and dep not in METHOD_SHARED and not dep.startswith(me + "_"):
                out.append(f"{me} -> {dep}")
    return out


def test_a_method_borrows_nothing_from_another_method():
    graph = project_graph()
    assert {"methods.kit", "methods.lf_net", "methods.cm_unet", "methods.d_persona"} <= set(graph)
    assert borrowed(graph) == []
    assert borrowed(
        {
            "methods.pionono": {"methods.ls_unet", "methods.kit"},
            "methods.mr_net": {"methods.mr_net_blocks"},
            "methods.kit": {"methods.latent", "methods.prob_unet"},
            "methods": {"methods.lf_net"},
        }
    ) == ["methods.kit -> methods.prob_unet", "methods.pionono -> methods.ls_unet"]
