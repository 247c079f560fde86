"""Reports take labels, tables and order from the registry: a new method needs one file and one import."""

import importlib
import sys

import pandas as pd
import pytest

import methods
from bench import study
from bench.evaluate.long_table import SUMMARY
from bench.report import rows, tables
from methods import registry

PAPER = study.default()


@pytest.fixture
def toy():
    """Register the fixture's method for one test, then remove it again (the registry is process-wide)."""
    module = importlib.import_module("fixtures.toy_method")
    yield module
    registry._ENTRIES.pop("toy-net", None)
    sys.modules.pop("fixtures.toy_method", None)


def summary(methods_here: list[str]) -> pd.DataFrame:
    rows = [("toy", "cm", "protocol", "gt", m, "foreground", "dsc", 0.5 + 0.01 * i, 0.01, 3, 10) for i, m in enumerate(methods_here)]
    return pd.DataFrame(rows, columns=SUMMARY)


def test_a_registered_method_appears_in_table1_under_its_display_name(toy, tmp_path):
    part = summary(["lf-net", "toy-net", "mv-unet", "lf-net-s", "oracle"])
    (stem, table), *rest = tables.group_tables(PAPER, part, ("toy", "cm", "protocol", "gt"))
    assert stem == "table1_toy_cm_protocol_gt_foreground"
    assert table.labels == ["MV-UNet", "LF-Net", "Toy-Net", "Oracle"]  # registration order
    assert [(s, t.labels) for s, t in rest if s.startswith("table4_")] == [("table4_toy_cm_protocol_gt", ["S", "S+TV+SLS+RCLS"])]
    assert rows.display(PAPER, "toy-net") == "Toy-Net" and rows.table_of(PAPER, "toy-net") == "main"


def test_rows_of_unknown_or_parameter_cells_keep_their_names():
    assert rows.display(PAPER, "gone-net") == "gone-net" and rows.table_of(PAPER, "gone-net") == "main"
    assert rows.table_of(PAPER, "lf-net@beta=3") is None and rows.display(PAPER, "lf-net@beta=3") == "lf-net@beta=3"
    assert rows.ablation_methods(PAPER, ["lf-net", "lf-net-no-ce", "lf-net-cm", "lf-net-s"]) == [
        "lf-net-s",
        "lf-net",
        "lf-net-no-ce",
        "lf-net-cm",
    ]


def test_the_study_places_the_rows_the_paper_shows_apart():
    """The registry says what a method is (its group); the study where the paper shows it."""
    paper = PAPER
    assert {rows.table_of(paper, m) for m in paper.ablation_text} == {"ablation-text"}
    assert [m for m in methods.method_names() if rows.table_of(paper, m) == "readings"] == [
        r["method"] for r in paper.readings[1:] if methods.get_entry(r["method"]).group == "variant"
    ]
    assert (
        rows.display(paper, paper.reference_method, "ablation") == paper.full_model["label"] != rows.display(paper, paper.reference_method)
    )
    assert not hasattr(registry.get_entry("lf-net"), "ablation_label") and "table" not in registry.MethodEntry.__dataclass_fields__
