"""Command-line options shared by the verbs (`run`, `paper`, `report`): parsing, checks and the run options.

Kept apart from `bench.cli` so that the verbs' modules can use them without importing the CLI
(the import graph inside `bench/` stays one-way).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import methods
from bench.budget import BUDGETS


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
