"""`python -m bench run`: train and evaluate a sweep of cells, then print the table (docs/architecture.md#the-path-of-one-cell)."""

from __future__ import annotations

import argparse
import difflib
import sys
import time
import warnings
from pathlib import Path

from bench.cli.options import (
    UsageError,
    add_run_options,
    check_run_options,
    data_root,
    mark_typed,
    own_folder,
    parse_list,
    parse_sets,
    run_cells,
)

EXAMPLES = """examples:
  python -m bench run                                   every method on mnist-5k, 3 seeds, quick budget
  python -m bench run --methods mv-unet,lf-net --seeds 0
  python -m bench run --dataset lidc --data-root ~/data --budget plateau
  python -m bench run --noise-levels protocol,0.35,0.45 --methods lf-net,mv-unet
  python -m bench run --set lf-net.beta=3,4 --methods lf-net
  python -m bench run --config my_sweep.toml             the flags' keys in a file, e.g. methods = ["mv-unet", "lf-net"]
"""


def add_parser(verbs) -> None:
    p = verbs.add_parser(
        "run",
        allow_abbrev=False,
        help="train and evaluate a sweep of cells (dataset × noise × method × seed)",
        description="Train and evaluate every cell of a sweep (finished cells are skipped; a killed run resumes), then print the table.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    what = p.add_argument_group("what to run")
    what.add_argument(
        "--methods",
        default="all",
        help="a comma list of methods and groups: all (the paper's methods and the oracle), field (the field's sampling methods: "
        "prob-unet, pionono, d-persona), ablation, readings (LF-Net under each declared reading); e.g. all,field (each method once; "
        "default: all)",
    )
    what.add_argument(
        "--dataset",
        default="mnist-5k",
        help="dataset name (default: mnist-5k, embedded; see `python -m bench list datasets`), or "
        "folder:PATH for your own multi-rater folder (README: Your own data)",
    )
    what.add_argument("--seeds", default="0,1,2", help="comma-separated training seeds (default: 0,1,2)")
    what.add_argument(
        "--raters",
        help="rater style of a simulated dataset, e.g. lfnet, cm, cm-fit or morpho on MNIST (default: the dataset's first style)",
    )
    what.add_argument(
        "--input",
        dest="network_input",
        help="network input of a dataset that offers a choice: clean, gaussian or cm-release on MNIST "
        "(default: the rater style's own: clean with lfnet, gaussian with the others)",
    )
    what.add_argument(
        "--noise-levels",
        default="protocol",
        help="protocol (the unscaled rules) or target Average DSCs of the rater pool, e.g. protocol,0.35,0.45 (default: protocol)",
    )
    what.add_argument(
        "--set",
        action="append",
        metavar="METHOD.PARAM=V1,V2",
        help="run one cell per value of a method parameter, e.g. --set lf-net.beta=3,4 (repeatable; several = all combinations)",
    )
    shown = p.add_argument_group("what to show")
    shown.add_argument(
        "--reference",
        choices=["gt", "majority", "staple"],
        help="which reference the printed table shows (every reference is always computed; default: gt where the dataset has it, else majority)",
    )
    shown.add_argument(
        "--dry-run",
        action="store_true",
        help="list the cells that would run (after the run's checks) with an estimate of the time, and stop",
    )
    what.add_argument(
        "--config",
        metavar="FILE.toml",
        help="a sweep in a file: the flags' names as keys (methods, dataset, seeds, noise_levels, raters, input, budget, max_steps, "
        "results, …; `[set]` tables for --set); flags on the command line win; the file is kept in RESULTS/sweeps/",
    )
    add_run_options(p)
    p.add_argument("--force", action="store_true", help="retrain cells that are already done")
    mark_typed(p)  # a flag typed on the command line wins over --config even at its default value
    p.set_defaults(func=cmd_run, run_parser=p)  # the parser itself: --config checks its keys against these flags


def stop_counts(outcomes, key: tuple) -> str:
    """How a row's cells stopped, over seeds ("plateau 3/3", "cap 1/3 · plateau 2/3")."""
    from bench.evaluate.long_table import select

    part = select(outcomes, **dict(zip(("dataset", "raters", "noise", "method"), key)))
    return " · ".join(f"{s} {c}/{len(part)}" for s, c in part["stops"].value_counts().sort_index().items())


def format_table(paper, summary, method_order: list[str], outcomes=None) -> str:
    """Table I as the report builds it (`bench.report.tables.build_table`: DSC (%) ↑ and bAHD ↓, mean ± std over seeds,
    the Average row first), as aligned text, each row with its seeds and, from `outcomes` (store.training_outcomes), how
    its cells stopped and a flag where most validation cases were predicted empty (or full): such a mean is not a method's
    skill. `summary` holds one reference per dataset × raters × noise (filter it first)."""
    import pandas as pd

    from bench.report.table_notes import degenerate_flags
    from bench.report.table_text import markdown_cell
    from bench.report.tables import build_table, table_columns

    outcomes = outcomes if outcomes is not None else pd.DataFrame(columns=["dataset", "raters", "noise", "method", "stops", "flag"])
    lines = []
    for (dataset, raters, noise, structure), part in summary.groupby(["dataset", "raters", "noise", "structure"], sort=False):
        runs = part[part["method"] != "average"]
        reference = runs["reference"].iloc[0] if len(runs) else "gt"
        columns = table_columns("table1", structure)
        table = build_table(
            paper,
            part,
            columns,
            method_order,
            "",
            "method",
            "main",
            compete_all=False,
            flags=degenerate_flags(outcomes, dataset, raters, noise),
        )
        lines.append(f"\n{dataset} (raters {raters}, noise {noise}; scored against {reference}; {structure})")
        lines.append(f"{'method':<16}" + "".join(f"{c.markdown:>18}" for c in columns) + f"{'seeds':>7}  {'stopped by':<24}flag")
        for method, label, row, flag in zip(table.methods, table.labels, table.rows, table.flags):
            stops = stop_counts(outcomes, (dataset, raters, noise, method))
            seeds = table.seeds.get(label, "")
            lines.append(f"{method:<16}" + "".join(f"{markdown_cell(c):>18}" for c in row) + f"{seeds:>7}  {stops:<24}{flag}".rstrip())
    return "\n".join(lines)


def dry_run(cells: list, args: argparse.Namespace, results: Path) -> int:
    """List the cells, after every check the run makes before it trains (the results folder, options, schedules and data
    of finished cells, and the data of the cells to run), with an estimate of the time from this folder's earlier cells,
    else from costs measured here (`bench.run.costs`)."""
    from bench import store
    from bench.cli.options import run_options
    from bench.run import plan

    with warnings.catch_warnings():  # the data a check reads may note its pool's sparseness: the run says it, not the listing
        warnings.simplefilter("ignore")
        opts = run_options(args, results, data_root(args.data_root).absolute(), args.force)
        damaged = plan.preflight(cells, opts)
        todo = [c for c in cells if args.force or not store.is_done(results, c) or c in damaged]
        plan.data_checks(todo, opts)  # a missing dataset, data root or noise level is refused as the run refuses it
    for cell in cells:
        why = f" (its {damaged[cell].path.name} is damaged: {damaged[cell].problem}; it trains again)" if cell in damaged else ""
        print(f"{'to run' if cell in todo else 'done':<7} {cell}{why}")
    print(f"{len(todo)} of {len(cells)} cells would run")
    seconds, known = plan.estimate(todo, results)
    if todo and known:
        print(
            f"estimate: about {duration(seconds)} for {known} of them, one after another (the median of this folder's "
            f"earlier cells of each method; parallel workers share the CPUs){'' if known == len(todo) else '; the others below'}"
        )
    unknown = [c for c in todo if not plan.estimate([c], results)[1]]
    if unknown and (args.device == "cuda" or opts.budget.early_stopping):
        why = "step costs are measured on the CPU" if args.device == "cuda" else "a stopping rule's length is known once it stops"
        print(
            f"estimate: none for {len(unknown)} cell(s) (no earlier cell of their methods here; {why}); on a 2-core CPU with "
            "native bf16 the embedded default took about 11 min and a smoke run (--max-steps 20 --seeds 0, two methods) about 30 s"
        )
    elif unknown:  # a fixed length (paper, long, trajectory): its steps are known, so their cost can be measured
        step_cost_estimate(unknown, opts)
    return 0


def duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def step_cost_estimate(cells: list, opts) -> None:
    """The time of cells no earlier cell here measured, from its steps, evaluations, test curve and read-outs timed now (`bench.run.costs`)."""
    from bench.run import costs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        measured = costs.measured(cells, opts, say=lambda line: print(line, file=sys.stderr, flush=True))
    total = 0.0
    for (dataset, method), cost in measured.items():
        n = sum(1 for c in cells if (c.dataset, c.method) == (dataset, method))
        total += n * cost.seconds
        parts = ", ".join(
            f"{stage} {s.steps:,} steps × {s.step_s:.3f} s + {s.evals:,} evaluations × {s.eval_s:.2f} s" for stage, s in cost.stages.items()
        )
        tests = f"{cost.curve} test-curve point(s) × {cost.curve_s:.2f} s, " if cost.curve else ""
        print(
            f"  {method} on {dataset}: {duration(cost.seconds)} a cell ({parts}; {tests}{cost.reads} read-out(s) × "
            f"{cost.read_s:.1f} s; {cost.evaluation_share:.0%} of it not training steps), {n} cell(s)"
        )
    print(
        f"estimate: about {duration(total)} for {len(cells)} cell(s), one after another at --threads {opts.threads}, from costs "
        f"measured here ({costs.STEPS} steps and one evaluation of each stage, one read-out; parallel workers share the CPUs)"
    )


LISTS = ("methods", "seeds", "noise_levels")  # the flags that take a comma list: a TOML list, or the flag's text


def apply_config(args: argparse.Namespace, parser: argparse.ArgumentParser) -> str:
    """Fill the flags not typed on the command line from `args.config` (a TOML sweep file); returns its text, to keep
    with the results. A flag typed on the command line wins even at its default value (`args.typed`).

    One rule for values: the comma-list flags (`LISTS`) take a TOML list or the flag's own text (`seeds = [0, 1]` or
    `seeds = "0,1"`); every other flag takes one value, never a list; `[set]` (`lf-net = { beta = [3, 4] }`) becomes
    `--set lf-net.beta=3,4`. An empty file, a key that is no flag (with the nearest flag's name), or a value of the wrong
    kind is refused in one line naming the file.
    """
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    path = Path(args.config)
    # The keys: every flag that takes a value, named as spelled (`noise_levels` or `noise-levels`, `input`), but --config.
    actions = {
        a.option_strings[-1][2:].replace("-", "_"): a for a in parser._actions if a.option_strings and a.nargs != 0 and a.dest != "config"
    }
    try:
        text = path.read_text()
        raw = tomllib.loads(text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise UsageError(f"--config {path}: cannot read it as TOML ({e})") from None
    if not raw:  # else an empty file would silently mean the default run of every method
        raise UsageError(
            f'--config {path}: no keys; a sweep file sets the run flags\' names, e.g. methods = ["mv-unet"] and seeds = [0, 1]'
        )
    for key, value in raw.items():
        action = actions.get(key.replace("-", "_"))
        if action is None:
            close = difflib.get_close_matches(key.replace("-", "_"), list(actions), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise UsageError(f"--config {path}: unknown key {key!r}{hint}; keys are the run flags' names: {', '.join(actions)}")
        name = action.dest
        if name in args.typed:
            continue  # the command line wins
        setattr(args, name, config_value(path, key, value, action))
    return text


def config_value(path: Path, key: str, value, action: argparse.Action):
    """A sweep file's value as the flag's own parser would have it (the rule in `apply_config`)."""
    name = action.dest
    if name == "set":
        if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
            raise UsageError(f"--config {path}: [set] holds one table per method, e.g. lf-net = {{ beta = [3, 4] }}")
        return [
            f"{m}.{k}={','.join(map(str, v if isinstance(v, list) else [v]))}" for m, params in value.items() for k, v in params.items()
        ]
    if isinstance(value, dict) or (isinstance(value, list) and (name not in LISTS or any(isinstance(v, (list, dict)) for v in value))):
        what = "a list of values" if name in LISTS else "one value"
        raise UsageError(f"--config {path}: {key} = {value!r}: {key} takes {what}")
    if isinstance(value, list):
        return ",".join(map(str, value))
    if action.type is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise UsageError(f"--config {path}: {key} = {value!r}: expected a whole number")
        return value
    if action.choices and str(value) not in action.choices:
        raise UsageError(f"--config {path}: {key} = {value!r}: expected one of {', '.join(action.choices)}")
    return str(value)


def cmd_run(args: argparse.Namespace) -> int:
    from bench import files, store
    from bench.evaluate import metrics
    from bench.results_folder import ResultsFolder
    from bench.run.plan import SweepSpec
    from datasets import get_dataset

    sweep_file = ""
    if args.config:
        sweep_file = apply_config(args, args.run_parser)
    check_run_options(args)
    own_folder(args)
    seeds = parse_list(args.seeds, int, "--seeds")
    levels = parse_list(args.noise_levels, str, "--noise-levels")
    spec = SweepSpec.build(
        args.dataset,
        args.methods,
        seeds,
        levels,
        parse_sets(args.set),
        args.raters,
        args.network_input,
        data_root(args.data_root).absolute(),
        paper=args.study,
    )
    dataset = get_dataset(args.dataset)
    reference = args.reference or dataset.reference
    if reference == "gt" and dataset.reference != "gt":
        raise UsageError(f"{args.dataset} has no ground truth; --reference majority or staple (default: {dataset.reference})")
    if reference == "staple" and len(dataset.structures) > 1:
        nested = "/".join(dataset.structures)
        raise UsageError(f"{args.dataset}'s labels are nested {nested} classes, which binary STAPLE cannot fuse; --reference majority")
    results = Path(args.results).absolute()  # workers may run elsewhere
    cells = spec.cells()
    if args.data_root and not Path(args.data_root).is_dir() and not dataset.card.layout:
        raise UsageError(
            f"--data-root {args.data_root}: no such folder, and {args.dataset} is embedded (it reads nothing from a data "
            f"root); leave --data-root out"
        )
    if args.dry_run:
        return dry_run(cells, args, results)
    if sweep_file:  # kept with the results it produced
        files.write_text(store.sweep_record(results, Path(args.config).stem), sweep_file)
    start = time.time()
    outcomes = run_cells(cells, args, results, data_root(args.data_root).absolute(), force=args.force)
    folder = ResultsFolder.open(results)  # read once, after training: collected, tabled and checked from this read
    if cells:
        folder.collect()
    summary = folder.read_summary()
    shown = summary[
        (summary["dataset"] == spec.dataset)
        & (summary["raters"] == spec.raters.label)
        & summary["noise"].isin(spec.noise_levels)
        & summary["method"].isin([*spec.methods, "average"])
        & (summary["reference"] == reference)
        & summary["metric"].isin([m.name for m in metrics.in_table("table1")])
    ]
    print(format_table(args.study, shown, list(spec.methods), folder.training_outcomes))
    counts = {s: sum(o["status"] == s for o in outcomes) for s in ("done", "skipped", "failed")}
    print(
        f"\n{len(cells)} cells: {counts['done']} trained, {counts['skipped']} already done, {counts['failed']} failed "
        f"in {time.time() - start:.0f} s; results in {results}/ (metrics.parquet, summary.csv)"
    )
    old = folder.old_layout
    if old:
        print(
            f"note: {len(old)} cell(s) in {results}/runs use the layout before every reference was scored; "
            f"`python -m bench rescore --results {results}` moves and re-scores them without training",
            file=sys.stderr,
        )
    for o in outcomes:
        if o["status"] == "failed":
            print(f"failed: {o['cell']}: {o['reason']}", file=sys.stderr)
    return 1 if counts["failed"] else 0
