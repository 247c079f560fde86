"""`python -m bench compare A B`: two results folders side by side, with the seed-aware paired test (see `bench.report.compare`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.cli.options import UsageError, check_out


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
    from bench import store
    from bench.evaluate import metrics
    from bench.report import compare

    a, b = Path(args.a), Path(args.b)
    if a.resolve() == b.resolve():
        raise UsageError(f"A and B are the same folder {a}; give two results folders, e.g. the same methods under two budgets")
    tables = []
    for folder in (a, b):
        table = store.read_collected(folder, store.METRICS)  # a damaged table is rebuilt from the cells (a note says so)
        if table.empty:
            raise UsageError(f"no results table {folder / store.METRICS}; give a folder a `python -m bench run --results …` wrote")
        tables.append(table)
    names = (a.name, b.name)
    out = Path(args.out) if args.out else b / f"compare-with-{names[0]}"
    check_out(out, "the comparison folder", "choose another with --out")
    table = compare.compare_tables(*tables, [m.name for m in metrics.in_table("table1")])
    if table.empty:
        raise UsageError(f"{args.a} and {args.b} share no method under one dataset, rater setting, noise level and reference")
    written = compare.write(table, out, *names)
    print(compare.to_markdown(table, *names))
    print(f"{len(table)} comparisons; {written[1]}, {written[0]} and {len(written) - 2} figure files in {out}/")
    return 0
