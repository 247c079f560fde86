"""`python -m bench compare A B`: two results folders side by side, with the seed-aware paired test (see `bench.report.compare`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.cli.options import UsageError, check_out


def add_parser(verbs) -> None:
    p = verbs.add_parser(
        "compare",
        allow_abbrev=False,
        help="compare two results folders: each method both ran, B − A with the seed-aware test",
        description="Put two results folders side by side (the same methods under two settings, or two versions of a method): "
        "for each method, dataset, rater setting and noise level both ran, B − A per metric of Table I with its 95 % interval "
        "and Holm-adjusted p of the seed-aware paired test, over the test cases both scored, against each dataset's main "
        "reference. Writes compare.md (headed by the options and machine facts that differ between A and B, and each side's "
        "budget, seeds and pipeline-check status), compare.csv and one difference figure per metric into --out; prints a "
        "short summary.",
    )
    p.add_argument("a", metavar="A", help="the first results folder (the baseline)")
    p.add_argument("b", metavar="B", help="the second results folder")
    p.add_argument(
        "--out", help="folder for compare.md, compare.csv and the figures, outside A and B (default: compare_<A>_vs_<B> beside B)"
    )
    p.add_argument(
        "--references",
        choices=("main", "all"),
        default="main",
        help="main (default): each dataset's main reference, gt where it has ground truth, else the majority; "
        "all: every reference both folders scored (the fused labels, each rater)",
    )
    p.set_defaults(func=cmd_compare)


SHOWN = 6  # differences printed on stdout; compare.md lists them all


def default_out(a: Path, b: Path) -> Path:
    """compare_<A>_vs_<B> beside B: a folder of its own, never inside either results folder."""
    return b.resolve().parent / f"compare_{a.resolve().name}_vs_{b.resolve().name}"


def inside(folder: Path, results: Path) -> bool:
    folder, results = folder.resolve(), results.resolve()
    return folder == results or results in folder.parents


def cmd_compare(args: argparse.Namespace) -> int:
    from bench import store
    from bench.evaluate import metrics
    from bench.report import compare
    from bench.results_folder import ResultsFolder

    a, b = Path(args.a), Path(args.b)
    if a.resolve() == b.resolve():
        raise UsageError(f"A and B are the same folder {a}; give two results folders, e.g. the same methods under two budgets")
    tables, opened = [], []
    for folder in (a, b):
        opened.append(ResultsFolder.open(folder))  # every cell read once, and handed down
        table = opened[-1].read_collected(store.METRICS)  # a damaged table is rebuilt from the cells (a note says so)
        if table.empty:
            raise UsageError(f"no results table {folder / store.METRICS}; give a folder a `python -m bench run --results …` wrote")
        tables.append(table)
    names = (a.name, b.name)
    out = Path(args.out) if args.out else default_out(a, b)
    for side, folder in (("A", a), ("B", b)):
        if inside(out, folder):
            raise UsageError(
                f"--out {out} is inside {side} ({folder}); the comparison gets a folder of its own, e.g. --out {default_out(a, b)}"
            )
    check_out(out, "the comparison folder", "choose another with --out")
    table = compare.compare_tables(*tables, [m.name for m in metrics.in_table("table1")], args.references)
    if table.empty:
        raise UsageError(f"{args.a} and {args.b} share no method with values under one dataset, rater setting, noise level and reference")
    runs, diff = compare.run_lines(args.study, *opened, *tables, table), compare.differences(*opened)
    written = compare.write(
        args.study,
        table,
        out,
        *names,
        header=compare.header(*opened, runs, args.references, diff),
        run="\n".join(runs),
        extra=compare.protocols(args.study, *opened, table, *names),
    )
    print(f"{names[1]} (B) against {names[0]} (A)")
    print("\n".join(runs))
    shown = diff[:SHOWN]
    print(
        "differs: "
        + ("; ".join(shown) if shown else "nothing recorded")
        + (f"; … {len(diff) - SHOWN} more in compare.md" if diff[SHOWN:] else "")
    )
    print("\n".join(compare.summary_lines(args.study, table)))
    print(f"{len(table)} comparisons: {written[1]}, {written[0]} and {len(written) - 2} figure files in {out}/")
    return 0
