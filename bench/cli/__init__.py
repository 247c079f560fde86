"""Command line: `python -m bench list|run|raters|report|compare|export|predict|paper|rescore|perf|power|audit-stops|check` (docs/architecture.md#who-owns-what).

One module per verb (`add_parser` + its command); `options` holds what the verbs share. Bad input
ends with one line on stderr and exit 2. Only argparse is loaded to parse, so `--help` is instant;
each verb imports the run side when it runs.
"""

from __future__ import annotations

import argparse
import sys

from bench.cli import audit, check, compare, export, listing, paper, perf, power, predict, raters, report, rescore, run
from bench.cli.options import UsageError


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
        description="Benchmark of segmentation from noisy multi-rater labels (LF-Net and baselines). "
        "Start with `python -m bench run --max-steps 20 --seeds 0 --methods mv-unet,lf-net` (a smoke run, about 30 s), "
        "then `python -m bench run` (every method on the embedded mnist-5k, three seeds). `python -m bench VERB --help` for a verb.",
    )
    verbs = parser.add_subparsers(dest="verb", parser_class=Parser)
    for verb in (listing, run, raters, report, compare, export, predict, paper, rescore, perf, power, audit, check):
        verb.add_parser(verbs)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:  # nothing runs without a verb: an 11-minute run is not what a first try should start
        parser.print_help()
        return 0
    if argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        verbs = next(a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        print(f"error: {argv[0]} needs a verb first: `python -m bench run {' '.join(argv)}` (verbs: {', '.join(verbs)})", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    import methods
    from bench import files, study
    from bench.run.plan import PlanError
    from bench.train.hardware import DeviceError
    from datasets import DataError

    try:
        args.study = study.from_environment()  # the environment is read here, once; every verb hands the study down
    except ValueError as e:
        print(f"error: {e}; fix the file or unset BENCH_STUDY", file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except (UsageError, PlanError, DataError, methods.UnknownMethodError, DeviceError, files.PlatformError, files.UnreadableFile) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # the results folder became unwritable (full, read-only) outside a cell
        print(f"error: {e}; finished cells are kept, rerun the same command once it is fixed", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: finished cells are kept; rerun the same command to resume", file=sys.stderr)
        return 130
