"""`python -m bench paper`: recipes parse and plan, a tiny run renders every kind of output, labelled."""

import re
from pathlib import Path

import matplotlib.image
import pandas as pd
import pytest
from conftest import run_bench

from bench import cli, store, study
from bench.cli.paper import recipe_cells
from bench.reproduce import recipes
from datasets import DATASETS
from datasets.settings import parse_level

TINY_RECIPES = {
    "table_main": ("table", "boxplot"),
    "table_ablation": ("table",),
    "noise": ("noise",),
    "beta": ("param",),
    "lambda": ("param",),
    "fused": ("fused",),
    "qualitative": ("qualitative",),
    "raters": ("raters",),
    "absent": ("table",),
}


def recipe(render, methods="mv-unet,qmv-unet,lf-net,oracle", seeds="[0]", noise='["protocol"]', extra="", dataset="mnist-5k", param=""):
    kinds = ", ".join(f'"{k}"' for k in render)
    head = f'title = "tiny {render[0]}"\nrender = [{kinds}]\n' + (f'param = "{param}"\n' if param else "")
    section = f'dataset = "{dataset}"\nmethods = "{methods}"\nseeds = {seeds}\nnoise_levels = {noise}\n{extra}'
    return f'{head}\n[paper]\n{section}\n[quick]\n{section}stand_in = "a tiny test sweep"\n'


def write_tiny_recipes(folder: Path) -> None:
    folder.mkdir()
    texts = {
        "table_main": recipe(TINY_RECIPES["table_main"]),
        "table_ablation": recipe(("table",), methods="lf-net,lf-net-s"),
        "noise": recipe(("noise",), methods="mv-unet,lf-net", seeds="[0]", noise='["0.6", "protocol"]'),  # a target Average DSC
        "beta": recipe(("param",), methods="lf-net", seeds="[0]", extra='set = { "lf-net.beta" = [2, 4] }\n', param="beta"),
        "lambda": recipe(("param",), methods="lf-net", seeds="[0]", extra='set = { "lf-net.lam" = [0.001, 0.01] }\n', param="lam"),
        "fused": recipe(("fused",), methods="lf-net", seeds="[0]"),
        "qualitative": recipe(("qualitative",), seeds="[0]"),
        "raters": recipe(("raters",), methods="", seeds="[]"),
        "absent": recipe(("table",), methods="mv-unet,lf-net", dataset="lidc"),  # no oracle: lidc has no GT to train it
    }
    for name, text in texts.items():
        (folder / f"{name}.toml").write_text(text)


@pytest.mark.parametrize("budget", ["quick", "paper"])
def test_every_shipped_recipe_parses_and_plans_known_cells(budget):
    shipped = recipes.load_recipes()
    assert {"table1_mnist", "table4_ablation", "fig_noise_levels", "fig_beta", "fig_lambda", "fig_fused_labels"} <= set(shipped)
    for recipe in shipped.values():
        setting = recipe.setting(budget)
        assert setting.dataset in DATASETS, recipe.name
        cells = recipe_cells(study.default(), setting)
        assert len(cells) == len(set(cells)), recipe.name
        assert {c.seed for c in cells} <= set(setting.seeds), recipe.name
        assert {c.noise for c in cells} <= {parse_level(n) for n in setting.noise_levels}, recipe.name  # canonical labels
        label = setting.raters if setting.input is None else f"{setting.raters}+{setting.input}"
        assert {c.raters.label for c in cells} <= {DATASETS[setting.dataset].setting(label).label}, recipe.name
        assert all(c.dataset == setting.dataset for c in cells), recipe.name
        if budget == "quick" and recipe.quick is not None:
            assert recipe.quick.stand_in, f"{recipe.name}: a quick stand-in must say what it stands in for"
    beta = recipe_cells(study.default(), shipped["fig_beta"].setting(budget))
    assert {c.method for c in beta} >= {"lf-net@beta=1", "lf-net@beta=5"}


def test_bad_recipe_and_unknown_name_get_one_line(tmp_path, capsys):
    folder = tmp_path / "recipes"
    folder.mkdir()
    (folder / "broken.toml").write_text(
        'title = "x"\nrender = ["table", "sculpture"]\n[paper]\ndataset = "mnist-5k"\nmethods = "all"\nseeds = [0]\nnoise_levels = ["protocol"]\n'
    )
    assert cli.main(["paper", "--recipes", str(folder), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "broken.toml" in err[0] and "unknown rendering(s) ['sculpture']" in err[0]
    assert cli.main(["paper", "--only", "table9", "--dry-run"]) == 2
    assert "unknown recipe 'table9'; known: " in capsys.readouterr().err


def test_tiny_paper_run_renders_every_output_labelled(tmp_path):
    recipes, results, out = tmp_path / "recipes", tmp_path / "results", tmp_path / "figures"
    write_tiny_recipes(recipes)
    tiny = ["--recipes", str(recipes), "--results", str(results), "--out", str(out)]
    tiny += ["--max-steps", "2", "--train-size", "64", "--test-size", "16"]  # a pipeline check's sizes
    run = run_bench("paper", *tiny, "--no-progress", "--backend", "sequential")
    assert run.returncode == 0, run.stderr
    assert re.search(r"^skipped absent: lidc: .*lidc", run.stderr, re.M), run.stderr
    assert "8 of 9 recipes rendered, 1 skipped" in run.stdout
    quick = out / "quick"
    both = lambda stem: [f"{stem}.md", f"{stem}.tex"]  # noqa: E731
    expected = {
        "table_main": [
            *(f for r in ("gt", "majority", "staple") for f in both(f"table1_mnist-5k_lfnet_protocol_{r}_foreground")),
            "paired_tests.csv",
            "boxplot_dsc_mnist-5k_lfnet_protocol_gt_foreground.png",
            "boxplot_dsc_mnist-5k_lfnet_protocol_gt_foreground.pdf",
        ],
        "table_ablation": both("table4_mnist-5k_lfnet_protocol_gt"),
        "noise": ["noise_dsc_mnist-5k_lfnet_gt_foreground.png", "noise_dsc_mnist-5k_lfnet_gt_foreground.pdf"],
        "beta": ["param_lf-net_beta.png", "param_lf-net_beta.pdf"],
        "lambda": ["param_lf-net_lam.png", "param_lf-net_lam.pdf"],
        "fused": ["fused_labels_mnist-5k_lfnet.png"],
        "qualitative": ["qualitative_mnist-5k_lfnet.png"],
        "raters": ["raters_mnist-5k_lfnet.png"],
    }
    for name, files in expected.items():
        for file in files:
            path = quick / name / file
            assert path.is_file() and path.stat().st_size > 0, path
            if path.suffix == ".png":
                assert matplotlib.image.imread(path).ndim == 3
            if path.suffix == ".pdf":
                assert path.read_bytes()[:5] == b"%PDF-"
        readme = (quick / name / "README.md").read_text()
        assert "Quick stand-in, not the paper's setting: a tiny test sweep." in readme and "Smoke run" in readme
    assert "Skipped: lidc:" in (quick / "absent" / "README.md").read_text()

    table1 = (quick / "table_main" / "table1_mnist-5k_lfnet_protocol_gt_foreground.md").read_text()
    assert table1.startswith("> Quick stand-in")
    rows = [line.split("|")[1].strip() for line in table1.splitlines() if line.startswith("| ") and "--" not in line]
    assert [r.split(" [")[0] for r in rows] == ["Methods", "*Average*", "MV-UNet", "QMV-UNet", "LF-Net", "*Oracle*"]
    assert all(re.fullmatch(r".+ \[(empty|full) \d/\d\]", r) for r in rows if "[" in r)  # tiny cells may flag; the flag has its form
    assert "DSC (%) ↑" in table1 and "bAHD ↓" in table1
    table4 = (quick / "table_ablation" / "table4_mnist-5k_lfnet_protocol_gt.md").read_text()
    rows = [line.split("|")[1].strip() for line in table4.splitlines() if line.startswith("| ") and "--" not in line]
    assert [r.split(" [")[0] for r in rows] == ["Variant", "S", "S+TV+SLS+RCLS"]
    tests = pd.read_csv(quick / "table_main" / "paired_tests.csv")
    assert set(tests.loc[tests["metric"] == "dsc", "method"]) == {"mv-unet", "qmv-unet"}  # LF-Net vs the others, not the oracle

    # The parameter sweeps are their own cells; λ = 0.01 on MNIST and β = R − 1 = 4 (five raters) are the plain lf-net
    # cell, shared with the other recipes.
    methods_run = {p.name for p in (results / "runs" / "mnist-5k" / "lfnet" / "protocol").iterdir() if p.is_dir()}
    assert {"lf-net@beta=2", "lf-net@lam=0.001", "lf-net"} <= methods_run
    assert not any("lam=0.01" in m or "beta=4" in m for m in methods_run)
    assert {p.name for p in (results / "runs" / "mnist-5k" / "lfnet" / "0.6").iterdir() if p.is_dir()} == {"mv-unet", "lf-net"}
    summary = store.read_summary(results)
    averages = summary[summary["method"] == "average"].set_index("noise")["mean"]
    assert averages["0.6"] == pytest.approx(0.6, abs=0.01) and averages["protocol"] < averages["0.6"]  # the target level was hit

    default_out = run_bench("paper", "--recipes", str(recipes), "--results", str(results), "--only", "raters", "--no-progress")
    assert default_out.returncode == 0, default_out.stderr
    assert (results / "paper" / "quick" / "raters" / "raters_mnist-5k_lfnet.png").is_file()  # --out defaults to RESULTS/paper

    again = run_bench("paper", *tiny, "--dry-run")
    assert "0 of 9 distinct cells would run" in again.stdout, again.stdout  # the absent lidc recipe's cells are not counted
    assert re.search(r"^skipped absent: lidc: .*lidc", again.stderr, re.M), again.stderr
