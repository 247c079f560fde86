"""What the verbs share: `UsageError`, list parsing, the run options, and `SweepSpec`, the cells one sweep trains.

Only light modules are imported at the top, so `python -m bench --help` answers without loading
torch; the verbs import the run side (sweeps, store, datasets, methods) when they run.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

BUDGET_NAMES = ("quick", "plateau", "paper", "paper-rcl15")  # bench.budget.BUDGETS (a test keeps them equal)


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
    """`all` = the paper's methods plus the oracle (where the dataset has ground truth to train it); `ablation` = LF-Net's
    ablation rows; `readings` = LF-Net under each declared reading of the paper's open points; or a list."""
    import methods
    from bench import study

    paper = study.current()
    if text == "all":
        return [*methods.method_names("main"), *([paper.oracle] if has_gt else [])]
    if text == "ablation":  # Table IV: the full model and its ablation variants
        return [paper.reference_method, *methods.method_names("ablation")]
    if text == "readings":  # the study's declared readings, the one reported as the method first
        return [r["method"] for r in paper.readings]
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UsageError("--methods is empty; give all, ablation or a comma list, e.g. --methods mv-unet,lf-net")
    known = [*methods.method_names(), paper.oracle]
    for name in names:
        if name not in known:
            raise UsageError(f"unknown method {name!r}; known: {', '.join(known)}")
    return names


def parse_sets(values: list[str] | None, names: list[str]) -> dict[str, dict[str, list]]:
    """`--set lf-net.beta=3,4 --set lf-net.lam=0.01` -> {"lf-net": {"beta": [3, 4], "lam": [0.01]}}."""
    import methods

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


def refuse_twice(flag: str, text: str, values: list) -> None:
    twice = sorted({str(v) for v in values if values.count(v) > 1})
    if twice:  # each would plan the same cell twice
        raise UsageError(f"{flag} {text}: {', '.join(twice)} given more than once; list each value once")


@dataclass(frozen=True)
class SweepSpec:
    """The cells of one sweep, from `run`'s flags or a recipe's setting: checked, expanded and without duplicates.

    `methods` holds the expanded names (a `--set` value becomes its own cell, `lf-net@beta=3`);
    `raters` is the dataset's rater setting: its style (the default when none is given), with
    `+<input>` where `--input` names a network input other than the style's own (`cm+clean`);
    `noise_levels` are canonical labels ("protocol", or a target Average DSC such as "0.45").
    """

    dataset: str
    raters: str
    noise_levels: tuple[str, ...]
    methods: tuple[str, ...]
    seeds: tuple[int, ...]

    @classmethod
    def build(
        cls, dataset: str, methods_text: str, seeds: list[int], noise_levels: list[str], sets: list[str] | None = None,
        raters: str | None = None, seeds_text: str = "", noise_text: str = "", network_input: str | None = None,
    ) -> SweepSpec:  # fmt: skip
        from bench import sweep
        from datasets import get_dataset
        from datasets.contract import refuse_noise_level
        from datasets.noise import parse_level

        spec = get_dataset(dataset)
        style = raters or spec.rater_styles[0]
        if style not in spec.rater_styles:
            raise UsageError(f"--raters {style}: {dataset} has rater style(s) {', '.join(spec.rater_styles)}")
        if network_input is not None:
            if not spec.inputs:
                raise UsageError(f"--input {network_input}: {dataset} has one network input; --input applies to "
                                 f"{', '.join(n for n, d in _datasets().items() if d.inputs)}")  # fmt: skip
            if network_input not in spec.inputs:
                raise UsageError(f"--input {network_input}: {dataset} has inputs {', '.join(spec.inputs)}")
            style = spec.setting(f"{style}+{network_input}")
        try:
            levels = [parse_level(str(n)) for n in noise_levels]
        except ValueError as e:
            raise UsageError(f"--noise-levels: {e}") from None
        if spec.fixed_raters:  # one line before any data is read (the loaders refuse too)
            for level in levels:
                refuse_noise_level(dataset, level, spec.fixed_raters)
        if any(s < 0 for s in seeds):
            raise UsageError(f"--seeds must be ≥ 0, got {seeds_text or seeds}")
        refuse_twice("--seeds", seeds_text or str(seeds), list(seeds))
        refuse_twice("--noise-levels", noise_text or str(noise_levels), levels)
        names = parse_methods(methods_text, has_gt=spec.reference == "gt")
        names = sweep.expand_params(names, parse_sets(sets, names), spec)
        if spec.reference != "gt" and any(sweep.is_oracle(n) for n in names):
            raise UsageError(
                f"the oracle trains on ground truth and {dataset} has none (reference: {spec.reference}); drop oracle from --methods"
            )
        return cls(dataset, style, tuple(levels), tuple(names), tuple(seeds))

    def cells(self) -> list:
        from bench import sweep

        return sweep.plan(list(self.methods), self.dataset, self.raters, list(self.noise_levels), list(self.seeds))


def _datasets() -> dict:
    from datasets import DATASETS

    return DATASETS


def execute(cells: list, args: argparse.Namespace, results: Path, root: Path, force: bool = False) -> list[dict]:
    """Run `cells` (finished ones are skipped unless `force`) with the run options in `args`, then collect the results folder.

    Checks first, in one line each, before anything trains: the results folder is writable, the
    device exists, finished cells ran with the same options, the data loads and every method can
    run on it. Returns one outcome per cell (see `bench.sweep.run_sweep`).
    """
    from bench import data, harness, store, sweep

    check_writable(results)
    harness.resolve_device(args.device)  # --device cuda without a GPU fails here, not in every cell
    opts = run_options(args, results, root, force=force)
    check_options(cells, opts)
    check_data(cells, opts)
    # Adapters with their own per-file caches (RIGA's derived masks) use the same folder.
    os.environ.setdefault("BENCH_CACHE", str(store.cache_dir(results).absolute()))
    pending = [c for c in cells if force or not store.is_done(results, c)]
    backend, n_jobs = sweep.resolve_backend(args.backend, args.n_jobs, len(pending), args.device)
    groups = list(dict.fromkeys((c.dataset, c.raters, c.noise) for c in pending))
    # A missing dataset fails here, once; parallel workers then read the decoded splits from the cache. The adapters'
    # warnings (an incomplete download) are shown only if the run goes ahead, so a refusal stays one line.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for dataset, raters, noise in groups if backend != "sequential" else groups[:1]:  # sequential: the others load in turn
            started = time.time()
            splits = data.load_splits(dataset, root, raters, noise, store.cache_dir(results))
            if time.time() - started > 30:
                print(f"decoded {dataset}/{raters}/{noise} in {time.time() - started:.0f} s (cached for the next run)", file=sys.stderr)
            check_compatible({c.method for c in pending if c.dataset == dataset}, dataset, splits.train, opts.budget)
            sparse = (splits.raters_info or {}).get("warning")
            if sparse and not any(str(w.message) == sparse for w in caught):  # loaded from the cache: the loader did not warn
                print(f"warning: {sparse}", file=sys.stderr)
    for message in dict.fromkeys(str(w.message) for w in caught):
        print(f"warning: {message}", file=sys.stderr)
    outcomes = sweep.run_sweep(cells, opts, backend, n_jobs, args.scheduler) if cells else []
    if cells:
        store.collect(results)
    return outcomes


def check_compatible(names: set[str], dataset: str, train, budget) -> None:
    """Build each method once on the data's shape, so a method that cannot run on it fails here, not in every cell."""
    from bench import sweep
    from datasets import get_dataset

    for name in sorted(names):
        try:
            sweep.build_method(name, 0, get_dataset(dataset), train, budget)
        except (ValueError, TypeError) as e:
            raise UsageError(f"{name} cannot run on {dataset}: {e}") from None


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


def check_data(cells, opts) -> None:
    """Refuse to reuse finished cells that were trained on other data than their rater setting gives now.

    A setting's name can outlive its rules (a simulation made exact, an adapter fixed): each cell
    records the fingerprint of the splits it saw (manifest `data_fingerprint`), and a results
    folder never mixes two versions of one setting silently. Cells without a record are kept.
    """
    from bench import data, store

    done = [c for c in cells if not opts.force and store.is_done(opts.results, c)]
    for group in dict.fromkeys((c.dataset, c.raters, c.noise) for c in done):
        now = data.data_fingerprint(*group[:1], opts.data_root, *group[1:], store.cache_dir(opts.results))
        stale = [c for c in done if (c.dataset, c.raters, c.noise) == group
                 and store.read_json(store.cell_dir(opts.results, c) / "manifest.json").get("data_fingerprint", now) != now]  # fmt: skip
        if stale:
            raise UsageError(
                f"{len(stale)} finished cell(s) in {opts.results} were trained on other data than {'/'.join(group)} gives now, e.g. "
                f"{stale[0]} (its rater rules, inputs or files changed since); use another --results folder, or --force to retrain"
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
        choices=BUDGET_NAMES,
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
    """The numeric run options are ≥ 1 and --scheduler goes with --backend dask."""
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
    from bench.budget import BUDGETS

    return sweep.RunOptions(
        results=results, data_root=root, budget=BUDGETS[args.budget], max_steps=args.max_steps, device=args.device,
        precision=args.precision, train_size=args.train_size, test_size=args.test_size, force=force,
        progress=not args.no_progress, threads=args.threads,
    )  # fmt: skip
