"""`python -m bench compare A B`: two results folders side by side, with the seed-aware paired test (see `bench.report.compare`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.cli.options import UsageError


def add_parser(verbs) -> None:
    p = verbs.add_parser(
        "compare", allow_abbrev=False, help="compare two results folders: each method both ran, B − A with the seed-aware test",
        description="Put two results folders side by side (the same methods under two settings, or two versions of a method): "
        "for each method, dataset, rater setting and noise level both ran, B − A per metric of Table I with its 95 %% interval "
        "and Holm-adjusted p of the seed-aware paired test, over the test cases both scored. Writes compare.md, compare.csv and "
        "one difference figure per metric into --out.",
    )  # fmt: skip
    p.add_argument("a", metavar="A", help="the first results folder (the baseline)")
    p.add_argument("b", metavar="B", help="the second results folder")
    p.add_argument("--out", help="folder for compare.md, compare.csv and the figures (default: B/compare-with-<A's name>)")
    p.set_defaults(func=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    import pandas as pd

    from bench import store
    from bench.evaluate import metrics
    from bench.report import compare

    tables = []
    for folder in (Path(args.a), Path(args.b)):
        path = folder / store.METRICS
        if not path.is_file():
            raise UsageError(f"no results table {path}; give a folder a `python -m bench run --results …` wrote")
        tables.append(pd.read_parquet(path))
    names = (Path(args.a).name, Path(args.b).name)
    table = compare.compare_tables(*tables, [m.name for m in metrics.in_table("table1")])
    if table.empty:
        raise UsageError(f"{args.a} and {args.b} share no method under one dataset, rater setting, noise level and reference")
    out = Path(args.out) if args.out else Path(args.b) / f"compare-with-{names[0]}"
    written = compare.write(table, out, *names)
    print(compare.to_markdown(table, *names))
    print(f"{len(table)} comparisons; {written[1]}, {written[0]} and {len(written) - 2} figure files in {out}/")
    return 0
