"""A finished cell read once (bench/store.py `CellRecord`, `records`): manifests read once per `collect`, how each stage
stopped as a field, a stand-in dataset as a field of its group."""

from __future__ import annotations

import numpy as np

from bench import files, store, study
from bench.reproduce import assessment
from tests.test_reproduction import make_results, write_cell


def test_collect_reads_each_manifest_once(tmp_path, monkeypatch):
    results = tmp_path / "results"
    make_results(results, {"mv-unet": 0.6, "lf-net": 0.9}, seeds=2)
    reads: list[str] = []
    real = files.read_json

    def counted(path, *args, **kwargs):
        reads.append(path.name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(store, "read_json", counted)
    store.collect(results)
    assert reads.count(store.MANIFEST) == len(store.cell_folders(results)) == 4


def test_stop_kinds_read_from_the_field_and_from_an_older_reason(tmp_path):
    assert store.stop_kind({"stop": "cap", "reason": "plateau: a reason that says otherwise"}) == "cap"
    assert store.stop_kind({"reason": "plateau: 5 evaluations without a fall"}) == "plateau"  # a manifest without the field
    assert store.stop_kind({"reason": "interrupted"}) == ""
    results = tmp_path / "results"
    write_cell(results, "mv-unet", 0, np.full(4, 0.5))
    folder = store.cell_dir(results, store.Cell("mnist-5k", "lfnet", "protocol", "mv-unet", 0))
    manifest = files.read_json(folder / store.MANIFEST)
    manifest["stages"] = {
        "soft_label": {"stop": "fixed", "reason": "fixed: 10 epochs"},
        "segmentation": {"stop": "cap", "reason": "cap: x"},
    }
    files.write_json(folder / store.MANIFEST, manifest)
    (record,) = store.records(results)
    assert record.stops == ("fixed", "cap") and record.cell.method == "mv-unet" and record.config["budget"]["name"] == "plateau"
    assert store.training_outcomes(store.records(results))["stops"].tolist() == ["fixed+cap"]


def test_a_stand_in_is_a_field_of_its_group(tmp_path):
    results = tmp_path / "results"
    make_results(results, {"lf-net": 0.9, "lf-net-s": 0.85})
    found = assessment.assess(results, tmp_path / "data", study.default())
    ablation = next(t for t in found.tables if t.table.id == "table4")  # the Choledoch ablation, measured on mnist-5k
    assert ablation.groups and all(g.stands_in_for == "choledoch" for g in ablation.groups)
    main = next(t for t in found.tables if t.table.id == "table1")
    assert all(g.stands_in_for == "" for g in main.groups)


def test_a_results_folders_file_names_are_spelled_only_in_store():
    """docs/architecture.md: bench/store.py is the only code that knows a results folder's layout: no other module of bench/
    spells a cell's file names, a collected table's, or joins a path with a results folder's sub-folder names ("paper" and
    "report" are also verbs and a budget, so only their use in a path counts)."""
    import ast
    from pathlib import Path

    files_ = {store.CONFIG, store.MANIFEST, store.TRAIN_LOG, store.CHECKPOINTS, store.PREDICTIONS, *store.COLLECTED, store.STOP_AUDIT}
    folders = {store.RUNS, store.REPORT, store.PAPER, store.STOP_AUDIT}
    root = Path(store.__file__).parents[1]
    spelled = []
    for path in sorted((root / "bench").rglob("*.py")):
        if path == root / "bench" / "store.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            joined = isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant)
            if (isinstance(node, ast.Constant) and node.value in files_) or (joined and node.right.value in folders):
                spelled.append(f"{path.relative_to(root)}:{node.lineno}")
    assert not spelled, spelled
