"""What the verbs share: `UsageError`, list and `--set` parsing, and the run options (the plan itself is `bench.run.plan`).

Only light modules are imported at the top, so `python -m bench --help` answers without loading
torch; the verbs import the run side (sweeps, store, datasets, methods) when they run.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
from pathlib import Path

BUDGET_NAMES = (
    "quick",
    "plateau",
    "plateau-1127",
    "long",
    "trajectory",
    "paper",
    "paper-rcl15",
)  # bench.train.budget.BUDGETS (a test keeps them equal)
DEFAULT_SAMPLES = 16  # bench.evaluate.scoring.DEFAULT_SAMPLES (the same test keeps them equal)


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


def parse_sets(values: list[str] | None) -> dict[str, dict[str, list]]:
    """`--set lf-net.beta=3,4 --set lf-net.lam=0.01` -> {"lf-net": {"beta": [3, 4], "lam": [0.01]}} (checked by `bench.run.plan`)."""
    import methods

    grid: dict[str, dict[str, list]] = {}
    for text in values or []:
        target, sep, raw = text.partition("=")
        method, dot, param = target.rpartition(".")
        if not sep or not dot or not method or not param or not raw.strip():
            raise UsageError(f"--set {text!r}: expected METHOD.PARAM=V1,V2,..., e.g. --set lf-net.beta=3,4")
        if param in grid.get(method, {}):
            raise UsageError(f"--set {text!r}: {method}.{param} is set twice; give all its values in one --set")
        grid.setdefault(method, {})[param] = [methods.parse_value(v) for v in raw.split(",") if v.strip()]
    return grid


def check_out(folder: Path, what: str, fix: str) -> None:
    """Refuse, before anything is written, an output folder that cannot be written: `what` names it, `fix` says what to do."""
    from bench.files import unwritable

    why = unwritable(folder)
    if why:
        raise UsageError(f"cannot write {what} {folder} ({why}); {fix}")


def data_root(arg: str | None) -> Path:
    return Path(arg or os.environ.get("BENCH_DATA") or "data")


def own_folder(args: argparse.Namespace) -> None:
    """`--dataset folder:PATH` (your own data, README: Your own data) -> its registered name "folder-<name>", with PATH as
    the data root every cell reads; other datasets are left as they are."""
    from datasets import register_folder

    if not args.dataset.startswith("folder:"):
        return
    if args.data_root:
        raise UsageError(f"--dataset {args.dataset} is its own data root; leave --data-root {args.data_root} out")
    card = register_folder(Path(args.dataset.removeprefix("folder:"))).card
    args.dataset, args.data_root = card.name, card.source


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The options `run` and `paper` share: how cells train, on what, where results go, and which backend runs them."""
    p.add_argument(
        "--budget",
        default="quick",
        choices=BUDGET_NAMES,
        help="quick (laptop CPU, early stopping), plateau (early stopping, cap 5,000 steps a stage: the recommended comparison), "
        "plateau-1127 (the stopping rule plateau replaced on 2026-11-28, for its audit's folders), long (every stage 4,000 steps or --max-steps, lowest validation loss restored: the stop audit, bench audit-stops), "
        "trajectory (every stage 8,000 steps or --max-steps, read many ways: the rule's stop, fixed steps, the lowest validation loss, "
        "the GT-free selection (the result) and the GT-best), paper (the paper's fixed epochs), paper-rcl15 (paper, other reading of MNIST's 'RCN epoch 15')",
    )
    p.add_argument(
        "--max-steps",
        type=int,
        help="cap every stage at N steps (smoke runs; the budget's stopping rule still applies); "
        "with --budget long or trajectory, every stage's length, above its own too",
    )
    p.add_argument("--threads", type=int, default=1, help="torch threads per cell on CPU (default 1; results depend on it)")
    p.add_argument("--train-size", type=int, help="use N training images (overrides the budget's cap)")
    p.add_argument("--test-size", type=int, help="score only the first N test images (smoke runs)")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"], help="auto: bf16 where the hardware runs it natively")
    p.add_argument(
        "--engine",
        default="auto",
        choices=["auto", "eager", "graphed"],
        help="eager: each training step op by op; graphed: each step captured once as a CUDA graph and replayed (CUDA only); "
        "auto (default): graphed only on a card where it was measured faster and equal (bench.train.steps.MEASURED), else eager",
    )
    p.add_argument(
        "--samples",
        type=int,
        metavar="M",
        help=f"test-time draws per image of a method that samples (Prob. U-Net, Pionono, D-Persona), scored by GED, Dice_match, "
        f"Dice_max and Dice_soft (default {DEFAULT_SAMPLES})",
    )
    p.add_argument(
        "--empty-pair",
        choices=["one", "zero"],
        help="two empty masks in the set metrics: one (default; Dice 1, distance 0, as PHiSeg) or zero (Dice 0, distance 1, "
        "as D-Persona's published numbers)",
    )
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


def mark_typed(parser: argparse.ArgumentParser) -> None:
    """Record in `args.typed` the destination of every flag typed on the command line, whatever its value: a flag typed
    at its default (`--budget quick`) still wins over `--config`, which fills only the flags not typed."""
    for action in parser._actions:
        if action.option_strings and not isinstance(action, argparse._HelpAction):
            action.__class__ = typed_action(action.__class__)
    parser.set_defaults(typed=frozenset())


@functools.cache
def typed_action(cls: type) -> type:
    class Typed(cls):
        def __call__(self, parser, namespace, values, option_string=None):
            namespace.typed = getattr(namespace, "typed", frozenset()) | {self.dest}
            super().__call__(parser, namespace, values, option_string)

    return Typed


def check_run_options(args: argparse.Namespace) -> None:
    """The numeric run options are ≥ 1, --scheduler goes with --backend dask, dask is installed where it is asked for,
    and --results names a folder: each refused before anything is written."""
    for flag, value in (
        ("--max-steps", args.max_steps),
        ("--threads", args.threads),
        ("--train-size", args.train_size),
        ("--test-size", args.test_size),
        ("--n-jobs", args.n_jobs),
        ("--samples", args.samples),
    ):
        if value is not None and value < 1:
            raise UsageError(f"{flag} must be ≥ 1, got {value}")
    if args.scheduler and args.backend != "dask":
        raise UsageError("--scheduler needs --backend dask")
    if args.backend == "dask" and importlib.util.find_spec("distributed") is None:
        raise UsageError("--backend dask needs dask.distributed, which is not installed here: pip install -e '.[dask]'")
    if not str(args.results).strip():
        raise UsageError(
            "--results '': give the results folder a name, e.g. --results results (an empty one would write into the current folder)"
        )
    if args.n_jobs is not None and args.backend == "sequential":
        raise UsageError(
            f"--n-jobs {args.n_jobs} has no effect with --backend sequential (one cell at a time in this process); "
            "drop --n-jobs, or use --backend loky"
        )


def run_options(args: argparse.Namespace, results: Path, root: Path, force: bool = False):
    """The `bench.run.resolve.RunOptions` of the flags `add_run_options` added."""
    from bench.run.resolve import RunOptions
    from bench.train.budget import BUDGETS

    return RunOptions(
        results=results,
        data_root=root,
        budget=BUDGETS[args.budget],
        max_steps=args.max_steps,
        device=args.device,
        precision=args.precision,
        engine=args.engine,
        train_size=args.train_size,
        test_size=args.test_size,
        force=force,
        progress=not args.no_progress,
        threads=args.threads,
        samples=args.samples or DEFAULT_SAMPLES,
        empty_pair=args.empty_pair or "one",
        study=args.study,
    )


def run_cells(cells: list, args: argparse.Namespace, results: Path, root: Path, force: bool = False) -> list[dict]:
    """`bench.run.plan.execute` with the run options and backend of the flags; the caller collects the results folder
    (`bench.results_folder.ResultsFolder.collect`, opened after training)."""
    from bench.run import plan

    return plan.execute(cells, run_options(args, results, root, force), args.backend, args.n_jobs, args.scheduler, collect=False)
