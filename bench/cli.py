"""Command line: `python -m bench list|run` (DESIGN §8). Bad input ends with one line on stderr and exit 2."""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import pandas as pd

import methods
from bench import harness, paper, perf, report, store
from bench.budget import BUDGETS
from bench.harness import DeviceError
from datasets import DATASETS, DataError, get_dataset
from datasets.contract import refuse_noise_level


class UsageError(Exception):
    """Bad command-line input; the message says what is wrong and what to do."""


def parse_list(text: str, kind: type, flag: str) -> list:
    try:
        values = [kind(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UsageError(
            f"{flag} {text!r}: expected comma-separated {kind.__name__}s, e.g. {flag} {'0,1,2' if kind is int else '0.5,1.0'}"
        ) from None
    if not values:
        raise UsageError(f"{flag} is empty")
    return values


def parse_methods(text: str, has_gt: bool = True) -> list[str]:
    """`all` = the paper's methods plus the oracle (where the dataset has ground truth to train it); `ablation` = LF-Net's ablation rows; or a list."""
    if text == "all":
        return [*methods.method_names("main"), *([methods.ORACLE] if has_gt else [])]
    if text == "ablation":  # Table IV: the full model and its ablation variants
        return ["lf-net", *methods.method_names("ablation")]
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UsageError("--methods is empty; give all, ablation or a comma list, e.g. --methods mv-unet,lf-net")
    known = [*methods.method_names(), methods.ORACLE]
    for name in names:
        if name not in known:
            raise UsageError(f"unknown method {name!r}; known: {', '.join(known)}")
    return names


def parse_sets(values: list[str] | None, names: list[str]) -> dict[str, dict[str, list]]:
    """`--set lf-net.beta=3,4 --set lf-net.lam=0.01` -> {"lf-net": {"beta": [3, 4], "lam": [0.01]}}."""
    grid: dict[str, dict[str, list]] = {}
    for text in values or []:
        target, sep, raw = text.partition("=")
        method, dot, param = target.rpartition(".")
        if not sep or not dot or not method or not param or not raw.strip():
            raise UsageError(f"--set {text!r}: expected METHOD.PARAM=V1,V2,..., e.g. --set lf-net.beta=3,4")
        if method not in names:
            raise UsageError(f"--set {text!r}: method {method!r} is not in --methods ({', '.join(names)})")
        if param in grid.get(method, {}):
            raise UsageError(f"--set {text!r}: {method}.{param} is set twice; give all its values in one --set")
        grid.setdefault(method, {})[param] = [methods.parse_value(v) for v in raw.split(",") if v.strip()]
    return grid


def check_compatible(names: set[str], dataset, train, budget) -> None:
    """Build each method once on the data's shape, so a method that cannot run on it fails here, not in every cell."""
    from bench import sweep

    for name in sorted(names):
        try:
            sweep.build_method(name, 0, dataset, train, budget)
        except (ValueError, TypeError) as e:
            raise UsageError(f"{name} cannot run on {dataset.card.name}: {e}") from None


def check_options(cells, opts) -> None:
    """Refuse to mix budgets in one results folder: a finished cell is reused only under the options it ran with."""
    from bench import sweep

    stale = sweep.mismatched(cells, opts)
    if stale:
        cell, had = stale[0]
        want = sweep.option_record(opts)
        diff = ", ".join(f"{k} {had.get(k)} (now {want[k]})" for k in want if had.get(k) != want[k])
        raise UsageError(
            f"{len(stale)} finished cell(s) in {opts.results} ran with other options, e.g. {cell}: {diff}; "
            "use another --results folder, the same options, or --force to retrain"
        )


def data_root(arg: str | None) -> Path:
    return Path(arg or os.environ.get("BENCH_DATA") or "data")


def check_writable(folder: Path) -> None:
    """Fail before any training if results cannot be written, without creating anything yet."""
    existing = folder.absolute()
    while not existing.exists():
        existing = existing.parent
    try:
        if not existing.is_dir():
            raise NotADirectoryError(f"{existing} is a file")
        tempfile.TemporaryFile(dir=existing).close()
    except OSError as e:
        raise UsageError(f"cannot write the results folder {folder} ({e.strerror or e}); choose another with --results") from None


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


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The options `run` and `paper` share: how cells train, on what, where results go, and which backend runs them."""
    p.add_argument(
        "--budget",
        default="quick",
        choices=list(BUDGETS),
        help="quick (laptop CPU, early stopping), plateau (early stopping, no practical cap: the recommended comparison), "
        "paper (the paper's fixed epochs), paper-rcl15 (paper, other reading of MNIST's 'RCN epoch 15')",
    )
    p.add_argument("--max-steps", type=int, help="cap every stage at N steps (smoke runs; the budget's stopping rule still applies)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per cell on CPU (default 1; results depend on it)")
    p.add_argument("--train-size", type=int, help="use N training images (overrides the budget's cap)")
    p.add_argument("--test-size", type=int, help="score only the first N test images (smoke runs)")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"], help="auto: bf16 where the hardware runs it natively")
    p.add_argument("--data-root", help="folder holding the datasets (default: $BENCH_DATA, else ./data)")
    p.add_argument("--results", default="results", help="results folder (default: results)")
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="hide the progress bars (shown only when stderr is a terminal) and print one line per finished cell instead, as in a log",
    )
    p.add_argument(
        "--backend",
        default="auto",
        choices=["auto", "sequential", "loky", "dask"],
        help="run cells in this process, in --n-jobs local processes (loky), or on a dask cluster; "
        "auto (default): loky with one worker per CPU when several cells run on the CPU, else sequential",
    )
    p.add_argument("--n-jobs", type=int, help="worker processes for loky, or workers of a local dask cluster (default: one per usable CPU)")
    p.add_argument("--scheduler", help="address of a running dask.distributed scheduler, e.g. tcp://10.0.0.1:8786 (with --backend dask)")


def check_run_options(args: argparse.Namespace) -> None:
    for flag, value in (
        ("--max-steps", args.max_steps),
        ("--threads", args.threads),
        ("--train-size", args.train_size),
        ("--test-size", args.test_size),
        ("--n-jobs", args.n_jobs),
    ):
        if value is not None and value < 1:
            raise UsageError(f"{flag} must be ≥ 1, got {value}")
    if args.scheduler and args.backend != "dask":
        raise UsageError("--scheduler needs --backend dask")


def run_options(args: argparse.Namespace, results: Path, root: Path, force: bool = False):
    from bench import sweep

    return sweep.RunOptions(
        results=results, data_root=root, budget=BUDGETS[args.budget], max_steps=args.max_steps, device=args.device,
        precision=args.precision, train_size=args.train_size, test_size=args.test_size, force=force,
        progress=not args.no_progress, threads=args.threads,
    )  # fmt: skip


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
