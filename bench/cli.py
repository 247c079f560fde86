"""Command line: `python -m bench list|run` (DESIGN §8). Bad input ends with one line on stderr and exit 2."""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings
from pathlib import Path

import pandas as pd

import methods
from bench import harness, paper, perf, report, store
from bench.harness import DeviceError
from bench.options import (
    UsageError,
    add_run_options,
    check_options,
    check_run_options,
    check_writable,
    data_root,
    parse_list,
    parse_methods,
    parse_sets,
    run_options,
)
from datasets import DATASETS, DataError, get_dataset
from datasets.contract import refuse_noise_level


def check_compatible(names: set[str], dataset, train, budget) -> None:
    """Build each method once on the data's shape, so a method that cannot run on it fails here, not in every cell."""
    from bench import sweep

    for name in sorted(names):
        try:
            sweep.build_method(name, 0, dataset, train, budget)
        except (ValueError, TypeError) as e:
            raise UsageError(f"{name} cannot run on {dataset.card.name}: {e}") from None


def cmd_list(args: argparse.Namespace) -> int:
    if args.what in (None, "methods"):
        print("methods:")
        for name in methods.method_names():
            entry = methods.get_entry(name)
            print(f"  {name:<22} {entry.group:<9} {entry.summary}")
        print(f"  {methods.ORACLE:<22} {'main':<9} {methods.ORACLE_TRAINS} trained on the ground truth as the only rater (upper bound)")
    if args.what in (None, "datasets"):
        print("datasets:")
        for name, spec in DATASETS.items():
            c = spec.card
            print(
                f"  {name:<14} {c.title}\n                 source: {c.source}\n                 licence: {c.licence}\n                 cite: {c.citation}\n                 counts: {c.counts}"
            )
            if c.layout:
                print(f"                 put {c.download} in {c.layout}")
    return 0


def outcome_notes(outcomes: pd.DataFrame, key: tuple) -> tuple[str, str]:
    """How a row's cells stopped ("plateau 3/3", "cap 1/3 · plateau 2/3") and its degenerate flag ("empty 2/3"), over seeds."""
    part = outcomes[
        (outcomes[["dataset", "reference", "noise", "method"]] == pd.Series(key, index=["dataset", "reference", "noise", "method"])).all(
            axis=1
        )
    ]
    if part.empty:
        return "", ""
    n = len(part)
    stops = " · ".join(f"{s} {c}/{n}" for s, c in part["stops"].value_counts().sort_index().items())
    flags = part["flag"][part["flag"] != ""]
    flag = " · ".join(f"{f} {c}/{n}" for f, c in flags.value_counts().items())
    return stops, flag


def format_table(summary: pd.DataFrame, method_order: list[str], outcomes: pd.DataFrame | None = None) -> str:
    """Mean ± std over seeds: DSC (%) ↑ and bAHD ↓, the Average row first, as in the paper's Table I.

    With `outcomes` (store.training_outcomes): how each stage stopped, over seeds, and a flag where
    most validation cases were predicted empty (or full): such a mean is not a method's skill.
    """
    outcomes = outcomes if outcomes is not None else pd.DataFrame(columns=["dataset", "reference", "noise", "method", "stops", "flag"])
    lines = []
    for (dataset, reference, noise, structure), part in summary.groupby(["dataset", "reference", "noise", "structure"], sort=False):
        lines.append(f"\n{dataset} (reference: {reference}, rater noise {noise:g}, {structure})")
        lines.append(f"{'method':<16}{'DSC (%) ↑':>18}{'bAHD ↓':>18}{'seeds':>7}  {'stopped by':<24}flag")
        order = ["average", *method_order]
        for method in sorted(part["method"].unique(), key=lambda m: order.index(m) if m in order else len(order)):
            rows = {r["metric"]: r for r in part[part["method"] == method].to_dict("records")}
            cells = []
            for metric, scale, digits in (("dsc", 100, 2), ("bahd", 1, 3)):
                if metric not in rows:
                    cells.append("–")
                    continue
                mean, std = rows[metric]["mean"] * scale, rows[metric]["std"] * scale
                cells.append(f"{mean:.{digits}f}" + ("" if pd.isna(std) else f" ± {std:.{digits}f}"))
            seeds = max(int(r["n_seeds"]) for r in rows.values())
            stops, flag = outcome_notes(outcomes, (dataset, reference, noise, method))
            lines.append(f"{method:<16}{cells[0]:>18}{cells[1]:>18}{seeds if seeds else '':>7}  {stops:<24}{flag}".rstrip())
    return "\n".join(lines)


def cmd_run(args: argparse.Namespace) -> int:
    from bench import sweep

    dataset = get_dataset(args.dataset)
    names = parse_methods(args.methods, has_gt=dataset.reference == "gt")
    seeds = parse_list(args.seeds, int, "--seeds")
    noise_levels = parse_list(args.noise_levels, float, "--noise-levels")
    if any(not math.isfinite(n) or n < 0 for n in noise_levels):
        raise UsageError(f"--noise-levels must be finite and ≥ 0, got {args.noise_levels}")
    if dataset.fixed_raters:  # before any data is read (the loaders refuse too)
        for level in noise_levels:
            refuse_noise_level(args.dataset, level, dataset.fixed_raters)
    if any(s < 0 for s in seeds):
        raise UsageError(f"--seeds must be ≥ 0, got {args.seeds}")
    for flag, text, values in (("--seeds", args.seeds, seeds), ("--noise-levels", args.noise_levels, noise_levels)):
        twice = sorted({v for v in values if values.count(v) > 1})
        if twice:  # each would plan the same cell twice
            raise UsageError(f"{flag} {text}: {', '.join(f'{v:g}' for v in twice)} given more than once; list each value once")
    check_run_options(args)
    names = sweep.expand_params(names, parse_sets(args.set, names), dataset)
    if dataset.reference != "gt" and any(methods.split_name(n)[0] == methods.ORACLE for n in names):
        raise UsageError(
            f"the oracle trains on ground truth and {args.dataset} has none (reference: {dataset.reference}); drop oracle from --methods"
        )
    results = Path(args.results).absolute()  # workers may run elsewhere
    reference = args.reference or dataset.reference
    if reference == "gt" and dataset.reference != "gt":
        raise UsageError(f"{args.dataset} has no ground truth; --reference majority or staple (default: {dataset.reference})")
    cells = sweep.plan(names, args.dataset, seeds, noise_levels, reference)
    if args.dry_run:
        for cell in cells:
            state = "done" if sweep.is_done(results, cell) and not args.force else "to run"
            print(f"{state:<7} {cell}")
        print(f"{sum(not sweep.is_done(results, c) or args.force for c in cells)} of {len(cells)} cells would run")
        return 0
    check_writable(results)
    harness.resolve_device(args.device)  # --device cuda without a GPU fails here, not in every cell
    root = data_root(args.data_root).absolute()
    opts = run_options(args, results, root, force=args.force)
    check_options(cells, opts)
    # Adapters with their own per-file caches (RIGA's derived masks) use the same folder.
    os.environ.setdefault("BENCH_CACHE", str(sweep.cache_dir(results).absolute()))
    pending = [c for c in cells if args.force or not sweep.is_done(results, c)]
    levels = sorted({c.noise for c in pending})
    # A missing dataset fails here, once; parallel workers then read the decoded splits from the cache.
    # The adapters' warnings (an incomplete download) are shown only if the run goes ahead, so a refusal stays one line.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for noise in levels if args.backend != "sequential" else levels[:1]:  # workers read the other levels from the cache
            splits = sweep.load_splits(args.dataset, root, noise, sweep.cache_dir(results))
        if pending:
            check_compatible({c.method for c in pending}, dataset, splits.train, opts.budget)
    for w in caught:
        warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    start = time.time()
    backend, n_jobs = sweep.resolve_backend(args.backend, args.n_jobs, len(pending), args.device)
    outcomes = sweep.run_sweep(cells, opts, backend, n_jobs, args.scheduler)
    _, summary = store.collect(results)
    shown = summary[
        (summary["dataset"] == args.dataset) & summary["noise"].isin(noise_levels) & summary["method"].isin([*names, "average"])
    ]
    print(format_table(shown, names, store.training_outcomes(results)))
    counts = {s: sum(o["status"] == s for o in outcomes) for s in ("done", "skipped", "failed")}
    print(f"\n{len(cells)} cells: {counts['done']} trained, {counts['skipped']} already done, {counts['failed']} failed "
          f"in {time.time() - start:.0f} s; results in {results}/ (metrics.parquet, summary.csv)")  # fmt: skip
    for o in outcomes:
        if o["status"] == "failed":
            print(f"failed: {o['cell']}: {o['reason']}", file=sys.stderr)
    return 1 if counts["failed"] else 0


class Parser(argparse.ArgumentParser):
    """argparse with the project's one-line errors (`error: …`, exit 2) instead of a usage block, and no abbreviated flags
    (`--seed 0` is an error, not `--seeds 0`)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="python -m bench",
        allow_abbrev=False,
        description="Benchmark of segmentation from noisy multi-rater labels (LF-Net and baselines).",
    )
    verbs = parser.add_subparsers(dest="verb")
    p = verbs.add_parser("list", allow_abbrev=False, help="list registered methods and datasets")
    p.add_argument("what", nargs="?", choices=["methods", "datasets"])
    p.set_defaults(func=cmd_list)
    p = verbs.add_parser("run", allow_abbrev=False, help="train and evaluate a sweep of cells (dataset × noise × method × seed)")
    p.add_argument("--methods", default="all", help="all (the paper's methods and the oracle), ablation, or a comma list (default: all)")
    p.add_argument("--dataset", default="mnist-5k", help="dataset name (default: mnist-5k, embedded)")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated training seeds (default: 0,1,2)")
    p.add_argument("--noise-levels", default="1.0", help="simulated-rater noise levels; 1.0 is the paper's protocol (default: 1.0)")
    p.add_argument(
        "--reference",
        choices=["gt", "majority", "staple"],
        help="what predictions are scored against (default: the dataset's: gt where it has one, else majority)",
    )
    p.add_argument("--force", action="store_true", help="retrain cells that are already done")
    p.add_argument("--dry-run", action="store_true", help="list the cells that would run, and stop")
    p.add_argument(
        "--set",
        action="append",
        metavar="METHOD.PARAM=V1,V2",
        help="run one cell per value of a method parameter, e.g. --set lf-net.beta=3,4 (repeatable; several = all combinations)",
    )
    add_run_options(p)
    p.set_defaults(func=cmd_run)
    report.add_parser(verbs)
    paper.add_parser(verbs)
    perf.add_parser(verbs)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verb is None:  # `python -m bench` alone runs the embedded default
        args = parser.parse_args(["run", *(argv or [])])
    try:
        return args.func(args)
    except (UsageError, DataError, methods.UnknownMethodError, DeviceError, store.PlatformError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # the results folder became unwritable (full, read-only) outside a cell
        print(f"error: {e}; finished cells are kept, rerun the same command once it is fixed", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: finished cells are kept; rerun the same command to resume", file=sys.stderr)
        return 130
