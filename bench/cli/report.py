"""`python -m bench report`: the paper's tables and figures from a collected results folder (see `bench.report.render`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.cli.options import UsageError, check_out, data_root, parse_list
from bench.study import Study


def add_parser(verbs) -> None:
    """Add `python -m bench report [--results DIR] [--out DIR] [--stop-audit RULE] [--metrics NAMES]` to the CLI's subparsers."""
    p = verbs.add_parser(
        "report",
        allow_abbrev=False,
        help="write the paper's tables (Markdown, LaTeX) and figures (PNG, PDF) from collected results",
        description="Write every table (Markdown, LaTeX) and figure (PNG, PDF) of a collected results folder into RESULTS/report/: "
        "the paper's tables, box plots with the seed-aware test's p-values, noise, learning and reliability curves; and, when its "
        "cells measure a number of the paper, RESULTS/paper/REPRODUCTION.md and .html with a verdict for each.",
    )
    p.add_argument("--results", default="results", help="results folder holding metrics.parquet and summary.csv (default: results)")
    p.add_argument("--out", help="folder for the tables and figures (default: RESULTS/report)")
    p.add_argument(
        "--stop-audit",
        metavar="RULE",
        help="results folder whose stop audit (RULE/stop_audit/, from `bench audit-stops RULE LONG`) flags this folder's methods, "
        "for a rerun under the same rule (default: RESULTS itself); a method trained here under another budget is not audited",
    )
    p.add_argument(
        "--data-root",
        help="folder holding the datasets, for the reproduction report's figures and hints (default: $BENCH_DATA, else ./data)",
    )
    p.add_argument(
        "--reading",
        help="report the cells' reading NAME instead of their result (the budget's primary reading): rule, min-val-loss, selection, "
        "gt-best (an upper bound), last or step-N, where the cells scored it; written to RESULTS/views/NAME/ (default: the result)",
    )
    p.add_argument(
        "--metrics",
        metavar="NAMES",
        help="comma-separated hard metrics to add as columns of Tables I and II after their own, e.g. hd95,assd,nsd (HD95 and "
        "ASSD in spacing units, NSD at the tolerance bench/evaluate/boundary.py states; any metric of kind hard in "
        "bench/evaluate/metrics.py); each must be in the results table: `python -m bench rescore` scores cells run before "
        "it existed. paired_tests.csv holds every metric of the table either way (default: the paper's columns only)",
    )
    p.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    from bench import store
    from bench.report import render, stop_audit
    from bench.results_folder import ResultsFolder

    results = Path(args.results)
    out = Path(args.out) if args.out else results / store.REPORT  # beside the results, not in the source tree
    first = f"run cells first, e.g. a smoke run (about 30 s): `python -m bench run --max-steps 20 --seeds 0 --methods mv-unet,lf-net --results {results}`"
    if not (results / store.METRICS).is_file() and not store.cell_folders(results):
        raise UsageError(f"no results table {results / store.METRICS}; {first}")
    audit = Path(args.stop_audit) if args.stop_audit else None
    if audit is not None and not (audit / store.STOP_AUDIT / stop_audit.CSV).is_file():
        raise UsageError(
            f"--stop-audit {audit}: no {audit / store.STOP_AUDIT / stop_audit.CSV}; "
            f"give a folder `python -m bench audit-stops RULE LONG` wrote into (e.g. docs/audit/mnist-5k/rule)"
        )
    extra = hard_metrics(args.metrics) if args.metrics else ()
    folder = ResultsFolder.open(results)  # every cell read once, and handed down
    folder.refuse_damage()  # a damaged cell is refused before anything is written: its file, what is wrong, the repair
    if args.reading:
        results, out = reading_view(folder, args.reading, args.out)
        folder = ResultsFolder.open(results)
    # Every folder the report writes into, checked before anything is written.
    check_out(out, "the report folder", "choose another with --out")
    check_out(results / store.PAPER, "the reproduction report's folder", f"make {results} writable, or report from a writable copy of it")
    # A damaged or missing table is rebuilt from the cells (a note says so), so that every figure is drawn.
    table, *_ = [folder.read_collected(name, rebuild_missing=True) for name in store.COLLECTED]
    if table.empty:
        raise UsageError(f"the results table {results / store.METRICS} is empty; {first}")
    if missing := [m for m in extra if m not in set(table["metric"])]:
        raise UsageError(
            f"--metrics: no {', '.join(missing)} rows in {results / store.METRICS}, scored before these metrics existed; "
            f"score its cells again from their predictions: `python -m bench rescore --results {results}`"
        )
    out.mkdir(parents=True, exist_ok=True)
    written = render.render(args.study, folder, out, audit, extra)
    for path in written:
        print(path)
    print(f"{len(written)} files written to {out}/")
    write_reproduction(args.study, folder, data_root(args.data_root).absolute(), results / store.PAPER, audit)
    return 0


def hard_metrics(text: str) -> tuple[str, ...]:
    """`--metrics NAMES`: the named metrics, each a registered metric of kind "hard" (bench/evaluate/metrics.py), or raise."""
    from bench.evaluate import metrics

    names = tuple(dict.fromkeys(name.strip() for name in parse_list(text, str, "--metrics")))
    hard = [m.name for m in metrics.of_kind("hard")]
    if unknown := [n for n in names if n not in hard]:
        raise UsageError(f"--metrics {','.join(unknown)}: not a hard metric; choose from {', '.join(hard)}")
    return names


def reading_view(results, name: str, out: str | None) -> tuple[Path, Path]:
    """The results folder of reading `name` (`bench.report.views.view`) and its report folder (`--out`, else its report/)."""
    from bench import store
    from bench.report import views

    held = views.readings_of(results)
    if name not in held:
        known = ", ".join(f"{k} ({n} cells)" for k, n in sorted(held.items())) or "none"
        raise UsageError(f"--reading {name}: no finished cell of {results} holds it; its cells hold: {known}")
    folder, kept, left = views.view(results, name)
    print(f"reading {name}: {kept} cells" + (f" ({left} without it left out)" if left else "") + f", in {folder}")
    return folder, Path(out) if out else folder / store.REPORT


def write_reproduction(paper: Study, results, root: Path, out: Path, audit: Path | None = None) -> None:
    """The reproduction report (bench/reproduce/assessment.py) of the study `paper` in OUT/REPRODUCTION.md and .html, when any
    cell measures a paper value; `audit`: the folder whose stop audit flags the methods (default: `results`)."""
    from bench.reproduce import assessment, page

    found = assessment.assess(results, root, paper, audit=audit)
    if not any(t.groups for t in found.tables):
        print(f"no cell of this results folder measures a number of {found.study.citation}: no reproduction report")
        return
    written = page.write(found, out, root)
    print(f"reproduction report: {written[0]} and {written[1]} (self-contained)")
    for line in page.headline(found):
        print(f"  {line}")
