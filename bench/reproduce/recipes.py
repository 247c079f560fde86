"""`python -m bench paper`: run the sweeps behind the paper's tables and figures and render them (docs/architecture.md#a-recipe-a-table-or-figure-of-the-paper, docs/architecture.md#who-owns-what).

Each table or figure has a recipe, `paper_figures/recipes/<name>.toml`:

    title = "…"                      # what it shows
    render = ["table", "boxplot"]    # renderings: table, boxplot, noise, param, fused, qualitative, raters
    param = "beta"                   # (param) the swept parameter; examples = N for the image figures
    [paper]                          # the paper's setting, run with --budget paper
    dataset = "…"; methods = "all"; seeds = [0, 1, 2]; noise_levels = ["protocol"]
    raters = "cm"                    # (optional) the rater style; default: the dataset's
    input = "clean"                  # (optional) the network input; default: the style's own
    set = { "lf-net.beta" = [1, 2] } # (optional) parameter sweep, as `run --set`
    [quick]                          # (optional) the stand-in run with --budget quick
    …; stand_in = "why it differs"

With `--budget quick` a recipe uses its [quick] section when it has one, else its [paper] section
at the quick budget; either way every output is labelled as a quick stand-in, never as the
paper's setting. A recipe whose dataset is not on disk is skipped with a one-line reason. The
cells of all chosen recipes run as one sweep (shared cells once, finished cells reused), then each
recipe renders from its own cells only into `<out>/<budget>/<name>/`, with a README.md that says
what was run.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import methods
from bench import store
from bench.evaluate import predictions
from bench.evaluate.long_table import KEYS, select, summarise
from bench.evaluate.scoring import reference_mask
from bench.report import example_figures, plots, render, rows, table_notes, tables
from bench.results_folder import ResultsFolder
from bench.run import plan, resolve, split_cache
from bench.study import Study
from datasets import get_dataset

RECIPES = Path(__file__).resolve().parents[2] / "paper_figures" / "recipes"
RENDERINGS = ("table", "boxplot", "noise", "param", "fused", "qualitative", "raters")


@dataclass(frozen=True)
class Setting:
    dataset: str
    methods: str  # as `run --methods`: all, ablation, or a comma list ("" = no training)
    seeds: tuple[int, ...]
    noise_levels: tuple[str, ...]  # as `run --noise-levels`: "protocol" or target Average DSCs
    sets: dict = field(default_factory=dict)  # "method.param" -> values
    stand_in: str = ""
    raters: str | None = None  # rater style (None: the dataset's default)
    input: str | None = None  # network input (None: the style's own)


@dataclass(frozen=True)
class Recipe:
    name: str
    title: str
    render: tuple[str, ...]
    paper: Setting
    quick: Setting | None
    param: str = ""
    examples: int = 2

    def setting(self, budget: str) -> Setting:
        return self.quick if budget == "quick" and self.quick is not None else self.paper


def read_recipe(path: Path) -> Recipe:
    """One recipe file; a malformed one raises ValueError naming the file and the problem."""
    try:
        raw = tomllib.loads(path.read_text())
        sections = {k: raw[k] for k in ("paper", "quick") if k in raw}
        settings = {
            k: Setting(
                v["dataset"],
                v["methods"],
                tuple(v["seeds"]),
                tuple(str(n) for n in v["noise_levels"]),
                v.get("set", {}),
                v.get("stand_in", ""),
                v.get("raters"),
                v.get("input"),
            )
            for k, v in sections.items()
        }
        recipe = Recipe(
            path.stem,
            raw["title"],
            tuple(raw["render"]),
            settings["paper"],
            settings.get("quick"),
            raw.get("param", ""),
            int(raw.get("examples", 2)),
        )
    except (tomllib.TOMLDecodeError, KeyError, TypeError, ValueError) as e:
        raise ValueError(f"recipe {path}: {type(e).__name__}: {e}") from None
    unknown = set(recipe.render) - set(RENDERINGS)
    if unknown:
        raise ValueError(f"recipe {path}: unknown rendering(s) {sorted(unknown)}; known: {', '.join(RENDERINGS)}")
    return recipe


def load_recipes(folder: Path = RECIPES) -> dict[str, Recipe]:
    return {p.stem: read_recipe(p) for p in sorted(folder.glob("*.toml"))}


def note_for(recipe: Recipe, budget: str, smoke: str = "") -> str:
    """The label every output of a recipe carries unless it ran in the paper's setting."""
    setting = recipe.setting(budget)
    notes = []
    if budget == "quick":
        why = setting.stand_in or f"{setting.dataset} at the quick budget instead of the paper's schedule"
        notes.append(f"Quick stand-in, not the paper's setting: {why}.")
    if smoke:
        notes.append(f"Smoke run ({smoke}): the numbers mean nothing.")
    return " ".join(notes)


# --------------------------------------------------------------------------- rendering


def cell_rows(table: pd.DataFrame, cells: list[store.Cell]) -> pd.DataFrame:
    keys = pd.DataFrame([c.record() for c in cells]).drop_duplicates()
    return table.merge(keys, on=KEYS, how="inner")[table.columns]


def render_recipe(
    paper: Study, recipe: Recipe, budget: str, cells: list[store.Cell], results: Path, data_root: Path, out: Path, smoke: str = ""
) -> list[Path]:
    """Render one recipe from its own cells (and its dataset for the image figures) into `out`, its rows those of the study
    `paper`."""
    setting, note = recipe.setting(budget), note_for(recipe, budget, smoke)
    results = ResultsFolder.of(results)  # read once for the recipe's tables and notes
    fig_note = textwrap.fill(note, 75)  # figure titles are not wider than a 7-inch figure
    table = results.read_collected(store.METRICS) if cells else pd.DataFrame()
    rows = cell_rows(table, cells) if cells else table
    averages = ResultsFolder.of(results).rater_averages
    if cells:
        averages = averages.merge(pd.DataFrame([c.record() for c in cells])[["dataset", "raters", "noise"]].drop_duplicates())
    summary = summarise(rows, averages) if len(rows) else pd.DataFrame()
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    tests = render.all_tests(paper, rows) if len(rows) else pd.DataFrame()
    for kind in recipe.render:
        if kind == "table":
            written += tables.write_tables(
                paper,
                summary,
                out,
                note,
                outcomes=ResultsFolder.of(results).training_outcomes,
                cells=table_notes.run_records(results),
                cases=rows,
            )
            written.append(render.write_tests(tests, out))
        elif kind == "boxplot":
            written += render.write_boxplots(paper, rows, tests, out, fig_note, cells=table_notes.run_records(results))
        elif kind == "noise":
            written += render.write_noise_figures(paper, summary, out, fig_note, cells=table_notes.run_records(results))
        elif kind == "param":
            written += param_figures(paper, recipe, setting, summary, out, fig_note, cells, data_root)
        else:
            written += image_figure(paper, kind, recipe, setting, cells, results.path, data_root, out, fig_note)
    return written


def titled(recipe: Recipe, note: str, extra: str = "") -> str:
    return "\n".join(t for t in (note, textwrap.fill(recipe.title, 75) + extra) if t)


def param_figures(
    paper: Study,
    recipe: Recipe,
    setting: Setting,
    summary: pd.DataFrame,
    out: Path,
    note: str,
    cells: list[store.Cell],
    data_root: Path,
) -> list[Path]:
    """One figure per swept method: test DSC against the parameter's values (plain cell = the default value, as the method
    resolves it on the data: LF-Net's β = R − 1)."""
    written = []
    for target in setting.sets:
        base, _, param = target.rpartition(".")
        dataset = get_dataset(setting.dataset)
        default = plan.effective_config(base, dataset, paper)[param]
        if default is None and cells:
            data = plan.data_spec(setting.dataset, data_root, cells[0].raters, [cells[0].noise])
            default = plan.resolved_config(base, dataset, data, paper)[param]
        points = []
        for method in sorted(set(summary["method"])):
            ref = methods.MethodRef.parse(method)
            name, params = ref.name, ref.kwargs
            if name != base or set(params) - {param}:
                continue
            value = params.get(param, default)
            if value is None:  # a default resolved at run time (β = R − 1): the explicit cell carries it
                continue
            metric = "soft_dice" if "soft_dice" in set(summary["metric"]) else "dsc"
            part = select(summary, method=method, metric=metric)
            points += [{"value": float(value), **r} for r in part[["structure", "mean", "std", "n_seeds"]].to_dict("records")]
        if not points:
            continue
        points = pd.DataFrame(points).drop_duplicates(["structure", "value"])
        fig = plots.param_figure(points, param, titled(recipe, note, f"\n{setting.dataset}, {base}"), default)
        written += plots.save(fig, out / f"param_{tables.slug(base, param)}")
    return written


def image_figure(paper: Study, kind, recipe, setting, cells, results, data_root, out, note) -> list[Path]:
    """The figures drawn from images: rater examples, fused labels (a trained LF-Net), qualitative grid (predictions)."""
    noise = setting.noise_levels[0]
    raters = cells[0].raters if cells else setting.raters or get_dataset(setting.dataset).rater_styles[0]
    splits = split_cache.load_splits(split_cache.DataKey.of(setting.dataset, data_root, raters, noise, store.cache_dir()))
    title = titled(recipe, note, f"\n{setting.dataset}, raters {raters}, noise {noise}")
    stem = tables.slug(setting.dataset, raters)
    train = splits.train
    if kind == "raters":
        idx = example_figures.example_indices(train, recipe.examples)
        fig = example_figures.rater_examples_figure(
            train.images, train.raters, train.gt, list(train.rater_names), idx, title, train.rater_valid
        )
        return plots.save(fig, out / f"raters_{stem}")
    done = [c for c in cells if store.is_done(results, c)]
    if kind == "fused":
        cell = next((c for c in done if c.ref.name == paper.reference_method), None)
        if cell is None:
            return []
        method = resolve.load_trained(store.cell_dir(results, cell))
        idx = example_figures.example_indices(train, recipe.examples)
        fig = example_figures.fused_label_figure(train.images, train.raters, train.rater_valid, method, idx, title, list(train.rater_names))
        return plots.save(fig, out / f"fused_labels_{stem}")
    if kind == "qualitative":
        seed = setting.seeds[0]
        probs, test = {}, None
        order = [*rows.main_methods(paper, {c.method for c in done}), paper.oracle]
        for method in order:
            cell = next((c for c in done if c.method == method and c.seed == seed), None)
            if cell is None:
                continue
            probs[method], case_ids, _ = predictions.read_predictions(store.cell_dir(results, cell))
            test = splits.test.subset(np.flatnonzero(np.isin(splits.test.case_ids, case_ids)))
        if test is None:
            return []
        reference = get_dataset(setting.dataset).reference
        mask = reference_mask(test, reference)
        idx = example_figures.pick_indices(mask, recipe.examples)
        fig = example_figures.qualitative_figure(
            test.images, mask, probs, idx, title, {m: rows.display(paper, m) for m in order}, reference
        )
        return plots.save(fig, out / f"qualitative_{stem}")
    raise ValueError(f"unknown rendering {kind!r}")


def write_readme(recipe: Recipe, budget: str, out: Path, written: list[Path], skipped: str = "", smoke: str = "") -> None:
    setting = recipe.setting(budget)
    lines = [f"# {recipe.name}", "", recipe.title, ""]
    note = note_for(recipe, budget, smoke)
    lines += [f"**{note}**", ""] if note else ["The paper's setting.", ""]
    lines += [
        f"- dataset: {setting.dataset}",
        f"- methods: {setting.methods or '(none: no training)'}",
        f"- seeds: {', '.join(map(str, setting.seeds)) or '–'}",
        f"- raters: {setting.raters or 'the dataset default'}",
        f"- noise levels: {', '.join(setting.noise_levels)}",
        f"- budget: {budget}",
    ]
    if setting.sets:
        lines.append(f"- parameter sweep: {', '.join(f'{k} = {v}' for k, v in setting.sets.items())}")
    lines.append(f"- recipe: paper_figures/recipes/{recipe.name}.toml")
    lines += ["", f"Skipped: {skipped}"] if skipped else ["", "Files:", *(f"- {p.name}" for p in written)]
    (out / "README.md").write_text("\n".join(lines) + "\n")
