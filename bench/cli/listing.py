"""`python -m bench list [methods|datasets]`: registered methods and dataset cards."""

from __future__ import annotations

import argparse


def add_parser(verbs) -> None:
    p = verbs.add_parser("list", allow_abbrev=False, help="list registered methods and datasets")
    p.add_argument("what", nargs="?", choices=["methods", "datasets"])
    p.set_defaults(func=cmd_list)


def cmd_list(args: argparse.Namespace) -> int:
    import methods
    from bench import study
    from datasets import DATASETS

    if args.what in (None, "methods"):
        print("methods:")
        for name in methods.method_names():
            entry = methods.get_entry(name)
            print(f"  {name:<22} {entry.group:<9} {entry.summary}")
        paper = study.current()
        print(f"  {paper.oracle:<22} {'main':<9} {paper.oracle_trains} trained on the ground truth as the only rater (upper bound)")
    if args.what in (None, "datasets"):
        print("datasets:")
        for name, spec in DATASETS.items():
            c = spec.card
            pad = " " * 17
            print(
                f"  {name:<14} {c.title}\n{pad}source: {c.source}\n{pad}licence: {c.licence}\n{pad}cite: {c.citation}\n{pad}counts: {c.counts}"
            )
            print(f"{pad}raters: {c.raters or ', '.join(spec.rater_styles)}")
            if c.layout:
                print(f"{pad}put {c.download} in {c.layout}")
    return 0
