"""The study file (paper_figures/lfnet_paper.toml, bench/study.py): its numbers are the paper's, and generic code names no method.

The numbers are checked against the paper's LaTeX at the line each entry cites when $BENCH_PAPER_TEX
names the file (`.ci/run` points it at the copy beside the repository); elsewhere that test is skipped.
"""

from __future__ import annotations

import ast
import math
import os
import re
from pathlib import Path

import pytest
from conftest import REPO, run_bench

import methods
from bench import study
from bench.run import resolve
from bench.train.budget import BUDGETS
from datasets import DATASETS, get_dataset

PAPER = study.default()
TEX = os.environ.get("BENCH_PAPER_TEX")


def test_the_study_names_registered_methods_and_datasets():
    known = {*methods.method_names(), PAPER.oracle, "average"}
    assert PAPER.reference_method in methods.method_names() and PAPER.oracle_trains in methods.method_names()
    for table in PAPER.tables:
        assert {r.method for r in table.rows} <= known, table.id
        assert {c.dataset for c in table.columns} <= set(DATASETS), table.id
        assert all(len(r.mean) == len(table.columns) for r in table.rows)
    assert {v.method for v in PAPER.values} <= known and {v.column.dataset for v in PAPER.values} <= set(DATASETS)
    assert [r["method"] for r in PAPER.readings][0] == PAPER.reference_method and {r["method"] for r in PAPER.readings} <= known
    for claim in PAPER.claims:
        pairs = [m for pair in claim.params.get("pairs", []) for m in pair] + list(claim.params.get("versus", {}))
        assert set(pairs) <= known, claim.id
        assert set(claim.params.get("tables", [])) <= {t.id for t in PAPER.tables}, claim.id


def test_generic_code_reads_the_papers_settings_from_the_study():

    mnist, lidc = get_dataset("mnist-5k"), get_dataset("lidc")
    assert resolve.dataset_overrides(mnist, "lf-net-s", PAPER) == PAPER.method_settings("mnist-5k", "lf-net") == {"lam": 0.01}
    assert resolve.dataset_overrides(lidc, "lf-net", PAPER) == {}
    assert resolve.trained(methods.MethodRef.parse(f"{PAPER.oracle}@beta=3"), PAPER) == methods.MethodRef.of(
        PAPER.oracle_trains, {"beta": 3}
    )
    paper, rcl15 = BUDGETS["paper"], BUDGETS["paper-rcl15"]
    assert paper.schedule("lf-net", "segmentation", mnist, 128, PAPER).max_steps == 15  # 15 epochs of one step: the RCN reading
    assert paper.schedule("lf-net", "segmentation", lidc, 2, PAPER).max_steps == 70
    assert (
        rcl15.config_overrides("lf-net-s-tv", mnist, PAPER) == {"rcl_epochs": 15} and paper.config_overrides("lf-net", mnist, PAPER) == {}
    )
    cm = paper.schedule("cm-unet", "train", lidc, 10, PAPER)
    assert (cm.optimiser, cm.lr, cm.batch_size, cm.augment) == ("adamw", 1e-2, 5, "flip")
    assert paper.schedule("staple-unet", "train", lidc, 2, PAPER).source == paper.schedule("mv-unet", "train", lidc, 2, PAPER).source


def generic_modules() -> list[Path]:
    """Code that must not know one method or one dataset: bench/, labels/, and methods/' registry and base."""
    found = [*sorted((REPO / "bench").rglob("*.py")), *sorted((REPO / "labels").glob("*.py"))]
    return found + [REPO / "methods" / name for name in ("__init__.py", "registry.py", "base.py")]


def named(tree: ast.AST) -> list[tuple[int, str]]:
    """Every identifier (names, attributes, definitions, arguments, keywords) and every string key (dict keys,
    subscripts) of a module, with its line."""
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            out.append((n.lineno, n.id))
        elif isinstance(n, ast.Attribute):
            out.append((n.lineno, n.attr))
        elif isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            out.append((n.lineno, n.name))
        elif isinstance(n, ast.arg):
            out.append((n.lineno, n.arg))
        elif isinstance(n, ast.keyword) and n.arg:
            out.append((n.value.lineno, n.arg))
        elif isinstance(n, ast.Dict):
            out += [(k.lineno, k.value) for k in n.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        elif isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str):
            out.append((n.lineno, n.slice.value))
    return out


# One method's parts (LF-Net's soft-label network, rater networks, losses) and the datasets by name.
METHOD_WORDS = re.compile(r"(?<![a-z])(lf_?net|sll|rcn|rcl)(?![a-z])", re.I)
DATASET_WORDS = re.compile(r"(?<![a-z])(riga|lidc|choledoch|ms[-_]lesion|mnist(-5k)?)(?![a-z])", re.I)


def test_no_generic_module_names_the_studys_methods():
    """`lf-net` and `oracle` are the study's words: no code outside methods/<method>.py and the study file uses them as values."""
    generic = [*generic_modules(), *sorted((REPO / "datasets").rglob("*.py"))]  # the wings (raters/, adapters/) too
    found = []
    for path in generic:
        tree = ast.parse(path.read_text())
        docstrings = {
            id(n.body[0].value)
            for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef))
            and n.body
            and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)
        }
        docstrings |= {id(n.slice) for n in ast.walk(tree) if isinstance(n, ast.Subscript)}  # a key of the study file's format
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                if re.fullmatch(r"lf-net(-[\w-]+)?|oracle", node.value):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value!r}")
    assert found == []


def test_no_generic_identifier_or_key_names_one_method_or_dataset():
    """Generic code asks a method's hook or a dataset's card: no identifier or key of bench/, labels/ or the registry names
    LF-Net's parts, and none of bench/ names a dataset (string values included, except the CLI's stated default)."""
    found = []
    for path in generic_modules():
        tree = ast.parse(path.read_text())
        where = str(path.relative_to(REPO))
        found += [f"{where}:{line}: {word}" for line, word in named(tree) if METHOD_WORDS.search(word)]
        # a part named as a string value: an attribute asked for by name (`hasattr(method, "sll")`) or a key
        strings = [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        found += [f"{where}:{n.lineno}: {n.value!r}" for n in strings if METHOD_WORDS.fullmatch(n.value)]
        if where.startswith("bench/") and not where.startswith("bench/cli/"):
            values = [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
            found += [
                f"{where}:{line}: {text!r}"
                for line, text in named(tree) + values
                if DATASET_WORDS.fullmatch(text) or (len(text) < 30 and DATASET_WORDS.search(text) and " " not in text)
            ]
    assert found == []
    assert METHOD_WORDS.search("sll_logits") and METHOD_WORDS.search("lfnet") and not METHOD_WORDS.search("scroll")
    assert DATASET_WORDS.fullmatch("riga") and DATASET_WORDS.fullmatch("ms-lesion") and not DATASET_WORDS.search("original")


def paper_lines() -> list[str]:
    if not TEX:
        pytest.skip("set BENCH_PAPER_TEX to the paper's LaTeX source (lfnet-paper.tex) to check the study's numbers against it")
    path = Path(TEX)
    assert path.is_file(), f"BENCH_PAPER_TEX={TEX}: no such file"
    return path.read_text().splitlines()


def numbers(line: str) -> list[float]:
    """The decimal numbers of a LaTeX line, in order, outside \\cite{...} and colour commands."""
    line = re.sub(r"\\cite\{[^}]*\}|\\color\{[^}]*\}|\\rowcolor\{[^}]*\}|gray!\d+", "", line)
    return [float(x) for x in re.findall(r"\d+\.\d+", line)]


def test_every_table_number_is_the_papers_at_the_line_it_cites():
    lines = paper_lines()
    for table in PAPER.tables:
        assert "\\caption{" in lines[table.line - 1], (table.id, table.line)
        for row in table.rows:
            expected = [x for m, s in zip(row.mean, row.sd) if not math.isnan(m) for x in ((m,) if math.isnan(s) else (m, s))]
            assert numbers(lines[row.line - 1]) == expected, (table.id, row.method, row.line, lines[row.line - 1])


def test_every_text_number_and_claim_cites_a_line_that_holds_it():
    lines = paper_lines()
    for value in PAPER.values:
        found = numbers(lines[value.line - 1])
        assert value.mean in found and (math.isnan(value.sd) or value.sd in found), (value.id, value.line)
    for claim in PAPER.claims:
        assert 1 <= claim.line <= len(lines) and lines[claim.line - 1].strip(), claim.id
    for (method, stage), line in PAPER.stages.items():
        if line.line:  # a paper line; line 0 is a recipe from outside the paper, which its source names
            assert "epoch" in lines[line.line - 1].lower(), (method, stage, line.line)
        else:
            assert method not in {row.method for table in PAPER.tables for row in table.rows}
            assert re.search(r"\.(py|yaml):\d", line.source), (method, stage, line.source)
    assert "Oracle" in lines[PAPER.oracle_line - 1] and "\\caption{" in lines[PAPER.oracle_line - 1]


def test_a_malformed_study_is_refused_in_one_line(tmp_path):
    bad = tmp_path / "study.toml"
    bad.write_text('[study]\nname = "x"\n')
    with pytest.raises(ValueError, match=r"^study .*study.toml: KeyError: 'title'$"):
        study.load(bad)
    bad.write_text(
        STUDY_HEAD + '[[tables]]\nid = "t"\nlabel = "T"\nline = 1\ntitle = "t"\ncolumns = [{ dataset = "mnist", metric = "dsc" }]\n'
        'rows = [{ method = "lf-net", line = 2, mean = [1.0, 2.0] }]\n'
    )
    with pytest.raises(ValueError, match="table t: every row needs one mean"):
        study.load(bad)


STUDY_HEAD = """[study]
name = "x"
title = "x"
citation = "x"
source = "x.tex"
reference_method = "lf-net"
oracle = "oracle"
oracle_trains = "lf-net"
"""


def test_a_second_study_file_is_handed_down_from_where_the_command_starts(tmp_path, monkeypatch):
    """A second study is a second file: handed to the code, it changes "ours", the groups and the stage reading; only the
    command's start (`bench.cli.main`) reads $BENCH_STUDY, once, and hands the study down."""
    from bench.run import plan
    from bench.train import budget

    text = study.STUDY_FILE.read_text().replace('reference_method = "lf-net"', 'reference_method = "mv-unet"')
    text = text.replace("\nstage_reading = {", "\n# no stage reading in this study\nunused_reading = {")
    assert 'reference_method = "mv-unet"' in text
    second = tmp_path / "second.toml"
    second.write_text(text)
    other, mnist = study.load(second), get_dataset("mnist-5k")
    assert (other.reference_method, other.file) == ("mv-unet", str(second))
    assert budget.stage_reading("lf-net", mnist, PAPER) and budget.stage_reading("lf-net", mnist, other) == {}
    assert BUDGETS["paper"].schedule("lf-net", "segmentation", mnist, 128, other).max_steps == 70
    assert plan.resolve_methods("ablation", other)[0] == "mv-unet" and plan.resolve_methods("ablation", PAPER)[0] == "lf-net"
    monkeypatch.setenv("BENCH_STUDY", str(second))
    out = run_bench("run", "--methods", "ablation", "--seeds", "0", "--dry-run", "--results", str(tmp_path / "r"))
    assert out.returncode == 0, out.stderr
    assert "protocol/mv-unet/seed-0" in out.stdout and "protocol/lf-net/seed-0" not in out.stdout
    (tmp_path / "bad.toml").write_text("[study]\n")
    monkeypatch.setenv("BENCH_STUDY", str(tmp_path / "bad.toml"))
    out = run_bench("run", "--methods", "mv-unet", "--dry-run", "--results", str(tmp_path / "r"))
    assert out.returncode == 2 and out.stderr.startswith(f"error: study {tmp_path / 'bad.toml'}: KeyError") and "BENCH_STUDY" in out.stderr


def test_only_the_command_reads_the_study_from_the_environment():
    """The study is never an ambient global: no module of bench/ but the command line's entry asks the environment."""
    asked = sorted(
        str(p.relative_to(REPO)) for p in (REPO / "bench").rglob("*.py") if re.search(r"from_environment\(|study_file\(", p.read_text())
    )
    assert asked == ["bench/cli/__init__.py", "bench/study.py"]
    assert not hasattr(study, "current")
