"""`python -m bench rescore`: score finished cells again from their saved predictions, without training.

Fills in metrics added since a cell ran, and moves cells of results folders written before every
reference was scored (`runs/<dataset>/<reference>/noise-<x>/<method>/seed-<s>`) to the current
layout first (see `bench.run.rescore`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.cli.options import UsageError, data_root


def add_parser(verbs) -> None:
    p = verbs.add_parser(
        "rescore",
        allow_abbrev=False,
        help="score finished cells again from their predictions (new metrics, old results folders), without training",
        description="Score every finished cell of a results folder again from its saved predictions, without training: "
        "fills in metrics added since the cell ran, moves cells of an older folder layout to the current one first, and "
        "collects the folder's tables again.",
    )
    p.add_argument("--results", default="results", help="results folder (default: results)")
    p.add_argument("--data-root", help="folder holding the datasets (default: $BENCH_DATA, else ./data)")
    p.add_argument(
        "--reread",
        action="store_true",
        help="first read a sampler's consensus again from its weights where the read-out its method gives now "
        "(prior draws, estimator: methods/latent.py) differs from the one it was read with (needs the "
        "cell's checkpoints; as slow as the cell's own read-out)",
    )
    p.add_argument("--no-progress", action="store_true", help="print one line per cell instead of a progress bar")
    p.set_defaults(func=cmd_rescore)


def cmd_rescore(args: argparse.Namespace) -> int:
    from bench import store
    from bench.run import rescore
    from bench.run.plan import check_writable

    results = Path(args.results).absolute()
    if not (results / store.RUNS).is_dir():
        raise UsageError(f"no cells in {results}/runs; run `python -m bench run --results {results}` first")
    check_writable(results)
    moved, left = rescore.migrate(results)
    for old, new in moved:
        print(f"moved {old.relative_to(results)} -> {new.relative_to(results)}")
    for old, why in left:
        print(f"left {old.relative_to(results)}: {why}", file=sys.stderr)
    outcomes = rescore.rescore_all(results, data_root(args.data_root).absolute(), progress=not args.no_progress, reread=args.reread)
    failed = [(cell, why, damaged) for cell, why, damaged in outcomes if why]
    for cell, why, _ in failed:
        print(f"failed: {cell}: {why}", file=sys.stderr)
    counts = (
        f"{len(outcomes) - len(failed)} of {len(outcomes)} cells re-scored, {len(moved)} moved from the old layout, "
        f"{len(left)} left in place"
    )
    damaged = sum(d for _, _, d in failed)
    if damaged:  # collecting now would drop those cells from the tables: they stay as they were until the cells are repaired
        print(f"{counts}; the tables in {results}/ are left as they were: {damaged} cell(s) have damaged files (above)", file=sys.stderr)
        return 2
    store.collect(results)
    print(f"{counts}; tables in {results}/ (metrics.parquet, summary.csv)")
    return 1 if failed else 0
