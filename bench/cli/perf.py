"""`python -m bench perf`: training, evaluation, metric and STAPLE timings on this machine (see `bench.perf.timings`)."""

from __future__ import annotations

import argparse
from pathlib import Path


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def cmd_perf(args: argparse.Namespace) -> int:
    from bench.perf.timings import format_report, run_perf

    result = run_perf(Path(args.out), quick=args.quick, device=args.device, steps=args.steps, verbose=True)
    print(format_report(result))
    print(f"\nwritten to {args.out}")
    return 0


def add_parser(verbs) -> None:
    """Add the `perf` verb to the CLI's subparsers."""
    p = verbs.add_parser(
        "perf",
        allow_abbrev=False,
        help="time U-Net training (harness vs bare loop), one evaluation, metrics and STAPLE on this machine",
        description="Time U-Net training steps (the harness against a bare loop), one evaluation, the metrics and STAPLE on "
        "this machine, set them against the matmul peak and copy bandwidth measured in the same run, and write them to --out "
        "as JSON.",
    )
    p.add_argument("--out", default="results/perf.json", help="JSON output (default: results/perf.json)")
    p.add_argument(
        "--steps",
        type=positive_int,
        help="timed training steps per configuration (default: bench.perf.timings.DEFAULT_STEPS, 10 on CPU and 50 on CUDA; 2 with --quick)",
    )
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--quick", action="store_true", help="tiny sizes and few steps: a smoke run of a few seconds")
    p.set_defaults(func=cmd_perf)
