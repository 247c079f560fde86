"""`python -m bench paper`: run the sweeps behind the paper's tables and figures, then render them (see `bench.reproduce.recipes`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.cli.options import UsageError, add_run_options, check_out, check_run_options, data_root, run_cells
from bench.cli.report import write_reproduction
from bench.study import Study


def add_parser(verbs) -> None:
    p = verbs.add_parser(
        "paper",
        allow_abbrev=False,
        help="run the sweeps behind the paper's tables and figures (resuming) and render them",
        description="Run each recipe of paper_figures/recipes/ (the sweep behind one of the paper's tables or figures), "
        "skipping finished cells, render it into OUT/BUDGET/RECIPE/ with a README saying what was run, then write "
        "RESULTS/paper/REPRODUCTION.md and .html with a verdict for each number of the paper the results measure.",
    )
    p.add_argument("--only", help="comma list of recipe names (default: every recipe)")
    p.add_argument("--recipes", help="folder of recipe files (default: paper_figures/recipes)")
    p.add_argument("--out", help="output folder; files go to OUT/BUDGET/RECIPE/ (default: RESULTS/paper)")
    p.add_argument("--dry-run", action="store_true", help="list each recipe's cells and whether they are done, and stop")
    add_run_options(p)  # --budget quick runs the recipes' labelled stand-ins; --max-steps etc. label outputs as smoke runs
    p.set_defaults(func=cmd_paper)


def recipe_cells(paper: Study, setting, root: Path | None = None) -> list:
    """The cells a recipe's setting needs under the study `paper`: the plan `run` makes of the same methods, seeds, raters,
    input, noise levels and set (with `root`, the data's: a value equal to the default the method resolves on it is the
    plain method's cell)."""
    from bench.run.plan import SweepSpec

    if not setting.methods:
        return []
    grid: dict[str, dict[str, list]] = {}
    for key, values in setting.sets.items():  # "lf-net.beta" = [1, 2]
        method, _, param = key.rpartition(".")
        grid.setdefault(method, {})[param] = list(values)
    spec = SweepSpec.build(
        setting.dataset,
        setting.methods,
        list(setting.seeds),
        list(setting.noise_levels),
        grid,
        setting.raters,
        setting.input,
        root,
        paper=paper,
    )
    return spec.cells()


def cmd_paper(args: argparse.Namespace) -> int:
    from bench import store
    from bench.reproduce import recipes
    from bench.results_folder import ResultsFolder
    from bench.run import split_cache
    from datasets import DataError

    check_run_options(args)
    folder = Path(args.recipes) if args.recipes else recipes.RECIPES
    if not folder.is_dir():
        raise UsageError(f"no recipe folder {folder}")
    try:
        loaded = recipes.load_recipes(folder)
    except ValueError as e:
        raise UsageError(str(e)) from None
    chosen = list(loaded) if not args.only else [n.strip() for n in args.only.split(",") if n.strip()]
    for name in chosen:
        if name not in loaded:
            raise UsageError(f"unknown recipe {name!r}; known: {', '.join(loaded)}")
    results, root = Path(args.results).absolute(), data_root(args.data_root).absolute()
    out_root = (Path(args.out) if args.out else results / store.PAPER) / args.budget
    plans, skipped = {}, {}
    for name in chosen:
        setting = loaded[name].setting(args.budget)
        try:
            plans[name] = recipe_cells(args.study, setting, root)
            if plans[name] and not all(store.is_done(results, c) for c in plans[name]):  # an absent dataset is skipped, dry run too
                c = plans[name][0]
                split_cache.load_splits(split_cache.DataKey.of_cell(c, root))
        except DataError as e:
            plans.pop(name, None)
            skipped[name] = str(e)
            print(f"skipped {name}: {e}", file=sys.stderr)
    cells = list(dict.fromkeys(c for name in plans for c in plans[name]))
    damaged = ResultsFolder.open(results).refuse_damage(cells)  # the recipes' own damaged cells train again; another one is refused here
    if args.dry_run:
        for name, plan in plans.items():
            todo = sum(not store.is_done(results, c) or c in damaged for c in plan)
            print(f"{name}: {len(plan)} cells, {todo} to run ({loaded[name].setting(args.budget).dataset})")
        for cell, found in damaged.items():
            print(f"to run {cell}: its {found.path.name} is damaged ({found.problem}); it trains again")
        print(f"{sum(not store.is_done(results, c) or c in damaged for c in cells)} of {len(cells)} distinct cells would run")
        return 0
    check_out(out_root, "the output folder", "choose another with --out")  # before anything trains or is written
    outcomes = run_cells(cells, args, results, root)
    opened = ResultsFolder.open(results)  # read once, after training: collected, rendered and assessed from this read
    if cells:
        opened.collect()
    failed = [o for o in outcomes if o["status"] == "failed"]
    smoke = ", ".join(
        f"{flag} {v}"
        for flag, v in (("--max-steps", args.max_steps), ("--train-size", args.train_size), ("--test-size", args.test_size))
        if v is not None
    )
    for name in chosen:
        out = out_root / name
        out.mkdir(parents=True, exist_ok=True)
        if name in skipped:
            recipes.write_readme(loaded[name], args.budget, out, [], skipped[name], smoke)
            continue
        written = recipes.render_recipe(args.study, loaded[name], args.budget, plans[name], opened, root, out, smoke)
        recipes.write_readme(loaded[name], args.budget, out, written, smoke=smoke)
        label = "quick stand-in" if args.budget == "quick" else "paper setting"
        print(f"{name} ({label}): {len(written)} files in {out}/")
    for o in failed:
        print(f"failed: {o['cell']}: {o['reason']}", file=sys.stderr)
    print(
        f"{len(chosen) - len(skipped)} of {len(chosen)} recipes rendered, {len(skipped)} skipped (dataset absent), "
        f"{len(failed)} cells failed; outputs in {out_root}/"
    )
    if (results / store.METRICS).is_file():
        write_reproduction(args.study, opened, root, out_root.parent)
    return 1 if failed else 0
