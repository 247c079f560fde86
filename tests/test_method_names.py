"""One method-name grammar: `MethodRef` (methods/registry.py) is the one reader and the one writer of a method's label
(`lf-net@beta=3@lam=0.1`), the plan makes the references once, and a cell carries its own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import REPO

import methods
from bench import study
from bench.identity import Cell, cell_of
from bench.run import cell as cell_module
from bench.run import plan
from methods import MethodRef, UnknownMethodError

LABELS = ["mv-unet", "oracle", "lf-net@beta=3", "lf-net@beta=3@lam=0.1", "lf-net@soft_label=sll@use_ce=false", "lf-net@beta=none"]


@pytest.mark.parametrize("label", LABELS)
def test_a_label_round_trips(label):
    ref = MethodRef.parse(label)
    assert ref.label == str(ref) == label
    assert MethodRef.of(ref.name, ref.kwargs) == ref and MethodRef.parse(ref.label) == ref


def test_keys_are_sorted_and_values_typed():
    ref = MethodRef.parse("lf-net@lam=0.1@beta=3")
    assert ref.label == "lf-net@beta=3@lam=0.1" and ref.params == (("beta", 3), ("lam", 0.1))
    assert MethodRef.of("lf-net", {"lam": 0.1, "beta": 3}) == ref
    assert methods.param_name("lf-net", {"use_ce": False, "beta": None}) == "lf-net@beta=none@use_ce=false"
    assert MethodRef.parse("lf-net@use_ce=true").kwargs == {"use_ce": True}
    assert MethodRef("mv-unet").label == "mv-unet" and MethodRef("mv-unet").params == ()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: MethodRef.parse("lf-net@beta"), "'lf-net@beta': expected lf-net@PARAM=VALUE, e.g. lf-net@beta=3"),
        (lambda: MethodRef.parse("lf-net@=3"), "expected lf-net@PARAM=VALUE"),
        (lambda: MethodRef.parse("lf-net@beta=3@beta=4"), "parameter 'beta' given twice"),
        (lambda: MethodRef.of("lf-net", {"soft_label": "../../etc"}), "may hold only letters, digits and . _ + -"),
        (lambda: MethodRef.parse("lf-net@soft_label=a/b"), "may hold only letters, digits and . _ + -"),
        (lambda: MethodRef("lf-net@beta=3"), "a method name holds no '@'"),
        (lambda: methods.get_entry("lf-nett"), "unknown method 'lf-nett'; known: mv-unet"),
        (lambda: plan.resolve_methods("lf-nett", study.default()), "unknown method 'lf-nett'; did you mean lf-net?"),
    ],
)
def test_bad_names_and_values_are_refused_in_one_line(make, message):
    with pytest.raises((UnknownMethodError, plan.PlanError)) as caught:
        make()
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_the_plan_makes_references_once_and_the_cell_carries_them(monkeypatch):
    spec = plan.SweepSpec.build("mnist-5k", "mv-unet,lf-net", [0], ["protocol"], {"lf-net": {"beta": [3]}}, paper=study.default())
    assert spec.methods == ("mv-unet", "lf-net@beta=3") and all(isinstance(r, MethodRef) for r in spec.refs)
    monkeypatch.setattr(MethodRef, "parse", classmethod(lambda cls, label: pytest.fail(f"{label} parsed again")))
    cells = spec.cells()
    assert [c.method for c in cells] == ["mv-unet", "lf-net@beta=3"]  # the label: folder names and tables as before
    assert [c.ref for c in cells] == list(spec.refs) and cells[1].ref is spec.refs[1]
    assert cells[1].parts[-2] == "lf-net@beta=3" and cells[1] == Cell("mnist-5k", spec.raters, "protocol", "lf-net@beta=3", 0)


def test_a_cell_read_back_is_its_manifests_record():
    planned = Cell("mnist-5k", "cm", "protocol", MethodRef.of("lf-net", {"beta": 3}), 0)
    back = cell_of({"cell": planned.record()})
    assert back == planned and back.record() == planned.record() == {**planned.record(), "method": "lf-net@beta=3"}
    assert back.ref == planned.ref and back.ref is back.ref  # parsed once, where first asked for
    assert Cell("mnist-5k", "cm", "protocol", "some@thing", 0).method == "some@thing"  # a foreign folder is listed as it is


def sources() -> list[tuple[str, ast.AST]]:
    return [
        (str(p.relative_to(REPO)), ast.parse(p.read_text()))
        for pkg in ("bench", "methods", "datasets", "labels")
        for p in sorted((REPO / pkg).rglob("*.py"))
    ]


def is_separator(node: ast.AST) -> bool:
    return (isinstance(node, ast.Constant) and node.value == "@") or (getattr(node, "id", getattr(node, "attr", None)) == "PARAM_SEP")


def test_only_the_one_parser_splits_a_method_name():
    """Splitting on the separator happens in `MethodRef.parse` alone, and nothing spells a second parser."""
    splits, pair_users = set(), set()
    for path, tree in sources():
        for fn in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
            for node in ast.walk(fn):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                name = getattr(func, "attr", getattr(func, "id", None))
                if name in ("split", "rsplit", "partition", "rpartition") and node.args and is_separator(node.args[0]):
                    splits.add(f"{path}:{fn.name}")
                if name == "split_name":
                    pair_users.add(path)
    assert splits == {"methods/registry.py:parse"}
    assert pair_users == set()


def test_a_cell_makes_its_data_key_once():
    """`DataKey` is made once a cell (`cell_data`) and passed down in `CellData.key`."""
    tree = ast.parse(Path(cell_module.__file__).read_text())
    made = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "DataKey"]
    assert len(made) == 1
