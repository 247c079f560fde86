"""`python -m bench run`: train and evaluate a sweep of cells, then print the table (docs/architecture.md#the-path-of-one-cell)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bench.cli.options import UsageError, add_run_options, check_run_options, data_root, parse_list, parse_sets, run_cells

EXAMPLES = """examples:
  python -m bench run                                   every method on mnist-5k, 3 seeds, quick budget
  python -m bench run --methods mv-unet,lf-net --seeds 0
  python -m bench run --dataset lidc --data-root ~/data --budget plateau
  python -m bench run --noise-levels protocol,0.35,0.45 --methods lf-net,mv-unet
  python -m bench run --set lf-net.beta=3,4 --methods lf-net
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
        help="a comma list of methods and groups: all (the paper's methods and the oracle), ablation, readings (LF-Net under each "
        "declared reading); e.g. all,ablation,readings (each method once; default: all)",
    )
    what.add_argument(
        "--dataset", default="mnist-5k", help="dataset name (default: mnist-5k, embedded; see `python -m bench list datasets`)"
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
    shown.add_argument("--dry-run", action="store_true", help="list the cells that would run, and stop")
    add_run_options(p)
    p.add_argument("--force", action="store_true", help="retrain cells that are already done")
    p.set_defaults(func=cmd_run)


def outcome_notes(outcomes, key: tuple) -> tuple[str, str]:
    """How a row's cells stopped ("plateau 3/3", "cap 1/3 · plateau 2/3") and its degenerate flag ("empty 2/3"), over seeds."""
    part = outcomes[(outcomes["dataset"] == key[0]) & (outcomes["raters"] == key[1]) & (outcomes["noise"] == key[2])
                    & (outcomes["method"] == key[3])]  # fmt: skip
    if part.empty:
        return "", ""
    from bench.report.tables import degenerate_flags

    n = len(part)
    stops = " · ".join(f"{s} {c}/{n}" for s, c in part["stops"].value_counts().sort_index().items())
    return stops, degenerate_flags(part, *key[:3]).get(key[3], "")


def format_table(summary, method_order: list[str], outcomes=None) -> str:
    """Mean ± std over seeds of Table I's metrics (DSC (%) ↑ and bAHD ↓), the Average row first, as in the paper's Table I.

    `summary` holds one reference per dataset × raters × noise (filter it first). With `outcomes`
    (store.training_outcomes): how each stage stopped, over seeds, and a flag where most validation
    cases were predicted empty (or full): such a mean is not a method's skill.
    """
    import pandas as pd

    from bench.evaluate import metrics
    from bench.evaluate.long_table import mean_sd

    shown = metrics.in_table("table1")
    outcomes = outcomes if outcomes is not None else pd.DataFrame(columns=["dataset", "raters", "noise", "method", "stops", "flag"])
    lines = []
    for (dataset, raters, noise, structure), part in summary.groupby(["dataset", "raters", "noise", "structure"], sort=False):
        runs = part[part["method"] != "average"]
        reference = runs["reference"].iloc[0] if len(runs) else "gt"
        lines.append(f"\n{dataset} (raters {raters}, noise {noise}; scored against {reference}; {structure})")
        lines.append(f"{'method':<16}" + "".join(f"{m.header():>18}" for m in shown) + f"{'seeds':>7}  {'stopped by':<24}flag")
        order = ["average", *method_order]
        for method in sorted(part["method"].unique(), key=lambda m: order.index(m) if m in order else len(order)):
            rows = {r["metric"]: r for r in part[part["method"] == method].to_dict("records")}
            cells = []
            for m in shown:
                if m.name not in rows:
                    cells.append("–")
                    continue
                cells.append(mean_sd(rows[m.name]["mean"] * m.scale, rows[m.name]["std"] * m.scale, m.digits))
            seeds = max(int(r["n_seeds"]) for r in rows.values())
            stops, flag = outcome_notes(outcomes, (dataset, raters, noise, method))
            lines.append(f"{method:<16}" + "".join(f"{c:>18}" for c in cells) + f"{seeds if seeds else '':>7}  {stops:<24}{flag}".rstrip())
    return "\n".join(lines)


def cmd_run(args: argparse.Namespace) -> int:
    from bench import store
    from bench.evaluate import metrics
    from bench.run.plan import SweepSpec
    from datasets import get_dataset

    check_run_options(args)
    seeds = parse_list(args.seeds, int, "--seeds")
    levels = parse_list(args.noise_levels, str, "--noise-levels")
    spec = SweepSpec.build(args.dataset, args.methods, seeds, levels, parse_sets(args.set), args.raters, args.network_input)
    dataset = get_dataset(args.dataset)
    reference = args.reference or dataset.reference
    if reference == "gt" and dataset.reference != "gt":
        raise UsageError(f"{args.dataset} has no ground truth; --reference majority or staple (default: {dataset.reference})")
    if reference == "staple" and len(dataset.structures) > 1:
        nested = "/".join(dataset.structures)
        raise UsageError(f"{args.dataset}'s labels are nested {nested} classes, which binary STAPLE cannot fuse; --reference majority")
    results = Path(args.results).absolute()  # workers may run elsewhere
    cells = spec.cells()
    if args.dry_run:
        for cell in cells:
            state = "done" if store.is_done(results, cell) and not args.force else "to run"
            print(f"{state:<7} {cell}")
        print(f"{sum(not store.is_done(results, c) or args.force for c in cells)} of {len(cells)} cells would run")
        return 0
    start = time.time()
    outcomes = run_cells(cells, args, results, data_root(args.data_root).absolute(), force=args.force)
    summary = store.read_summary(results)
    shown = summary[
        (summary["dataset"] == spec.dataset) & (summary["raters"] == spec.raters) & summary["noise"].isin(spec.noise_levels)
        & summary["method"].isin([*spec.methods, "average"]) & ((summary["reference"] == reference) | (summary["method"] == "average"))
        & summary["metric"].isin([m.name for m in metrics.in_table("table1")])
    ]  # fmt: skip
    print(format_table(shown, list(spec.methods), store.training_outcomes(results)))
    counts = {s: sum(o["status"] == s for o in outcomes) for s in ("done", "skipped", "failed")}
    print(f"\n{len(cells)} cells: {counts['done']} trained, {counts['skipped']} already done, {counts['failed']} failed "
          f"in {time.time() - start:.0f} s; results in {results}/ (metrics.parquet, summary.csv)")  # fmt: skip
    old = store.old_layout_cells(results)
    if old:
        print(f"note: {len(old)} cell(s) in {results}/runs use the layout before every reference was scored; "
              f"`python -m bench rescore --results {results}` moves and re-scores them without training", file=sys.stderr)  # fmt: skip
    for o in outcomes:
        if o["status"] == "failed":
            print(f"failed: {o['cell']}: {o['reason']}", file=sys.stderr)
    return 1 if counts["failed"] else 0
