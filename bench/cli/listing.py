"""`python -m bench list [methods|datasets]`: registered methods, and dataset cards with whether each is found."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from bench.cli.options import data_root


def add_parser(verbs) -> None:
    p = verbs.add_parser(
        "list",
        allow_abbrev=False,
        help="list registered methods and datasets",
        description="List the registered methods (name, group, summary; the group decides `--methods all`, `field` and "
        "`ablation`) and the dataset cards, each with whether its files are found under the data root.",
    )
    p.add_argument("what", nargs="?", choices=["methods", "datasets"])
    p.add_argument("--data-root", help="folder holding the datasets, to say which are found there (default: $BENCH_DATA, else ./data)")
    p.set_defaults(func=cmd_list)


def found(layout: str, root: Path) -> str:
    """Whether a dataset's folder is under the data root: a line for its card (its files are checked when a run loads it)."""
    if not layout:
        return "found: embedded in an installed package, nothing to download"
    under = re.match(r"<data-root>/([^/ ]+)/", layout)
    if under is None:  # a folder:PATH dataset, registered in this process: it is its own root
        return "found: your own folder (folder:PATH), checked by `python -m bench check`"
    folder = root / under.group(1)
    if not folder.is_dir():
        return f"not found: no folder {folder}/"
    n = sum(1 for p in folder.rglob("*") if p.is_file())
    return f"found: {folder}/ ({n:,} files; checked when a run loads them)" if n else f"not found: {folder}/ is empty"


def cmd_list(args: argparse.Namespace) -> int:
    import methods
    from datasets import DATASETS

    if args.what in (None, "methods"):
        print("methods:")
        for name in methods.method_names():
            entry = methods.get_entry(name)
            print(f"  {name:<22} {entry.group:<9} {entry.summary}")
        paper = args.study
        print(f"  {paper.oracle:<22} {'main':<9} {paper.oracle_trains} trained on the ground truth as the only rater (upper bound)")
    if args.what in (None, "datasets"):
        root = data_root(args.data_root).absolute()
        print(f"datasets (data root {root}):")
        for name, spec in DATASETS.items():
            c = spec.card
            pad = " " * 17
            print(
                f"  {name:<14} {c.title}\n{pad}source: {c.source}\n{pad}licence: {c.licence}\n{pad}cite: {c.citation}\n{pad}counts: {c.counts}"
            )
            print(f"{pad}raters: {c.raters or ', '.join(spec.rater_styles)}")
            print(f"{pad}{found(c.layout, root)}")
            if c.layout:
                print(f"{pad}put {c.download} in {c.layout}")
    return 0
