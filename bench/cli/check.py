"""`python -m bench check DATASET`: decode a dataset from its files and check it before anything trains on it, as
nnU-Net's `--verify_dataset_integrity` does.

The adapter's own checks run as it decodes (file patterns, shapes, labels, `datasets.checked_loader`: no NaN or
constant image); then the checks a benchmark needs of any dataset: every image has a valid rater, case ids are unique,
no patient (group) is in two splits, ground truth is there where the dataset's reference is ground truth. It prints
the counts, image sizes and rater validity of each split and every problem found, and exits 2 on any problem.
"""

from __future__ import annotations

import argparse
import sys

from bench.cli.options import data_root, own_folder


def add_parser(verbs) -> None:
    p = verbs.add_parser(
        "check",
        allow_abbrev=False,
        help="decode a dataset and check it (counts, image sizes, rater validity, every problem found), without training",
        description="Decode DATASET from its files under the data root (not from the cache) with its adapter's checks, then "
        "check what every cell needs of it. Prints counts, image sizes and rater validity per split and each problem; "
        "exit 2 on any problem.",
    )
    p.add_argument("dataset", metavar="DATASET", help="dataset name (see `python -m bench list datasets`), or folder:PATH (your own data)")
    p.add_argument("--data-root", help="folder holding the datasets (default: $BENCH_DATA, else ./data)")
    p.add_argument("--raters", help="rater setting of a simulated dataset, e.g. lfnet or cm (default: the dataset's first)")
    p.set_defaults(func=cmd_check)


def cmd_check(args: argparse.Namespace) -> int:
    import warnings

    from bench import store
    from datasets import DataError, get_dataset
    from datasets.contract import Note

    own_folder(args)
    spec = get_dataset(args.dataset)  # an unknown name is refused in one line (exit 2)
    root = data_root(args.data_root)
    print(f"{spec.card.name}: {spec.card.title}")
    print(f"data root {root.absolute()}" + ("" if spec.card.layout else " (embedded: nothing is read from it)"))
    problems, notes = [], []
    with warnings.catch_warnings(record=True) as held:
        warnings.simplefilter("always")
        try:
            splits = spec.load(root, args.raters, cache=store.cache_dir())  # per-file caches (RIGA's masks); the splits afresh
        except DataError as e:
            splits = None
            problems += getattr(e, "problems", [str(e)])  # a folder:PATH dataset names every problem it found
    for w in held:  # the adapter's warnings (an incomplete download) are problems; its notes (a sparse pool) are not
        (notes if issubclass(w.category, Note) else problems).append(str(w.message))
    if splits is not None:
        for line in describe(splits):
            print(line)
        problems += dataset_problems(splits, spec.reference)
    for note in dict.fromkeys(notes):
        print(f"note: {note}")
    for problem in dict.fromkeys(problems):
        print(f"problem: {problem}", file=sys.stderr)
    print(f"{len(problems)} problem(s) found in {spec.card.name}" + ("" if problems else "; it is ready for `python -m bench run`"))
    return 2 if problems else 0


def describe(splits) -> list[str]:
    """One line per split: images, their size and channels, raters and their validity, ground truth; then the split rule."""
    lines = []
    for part in ("train", "val", "test"):
        data = getattr(splits, part)
        n, r = data.raters.shape[:2]
        valid = data.rater_valid
        missing = int((~valid).any(axis=1).sum())
        per_rater = ", ".join(f"{name} {share:.0%}" for name, share in zip(data.rater_names, valid.mean(axis=0) if n else [0] * r))
        lines.append(
            f"{part:<5} {n:>6} images, {data.images.shape[1]} channel(s) of {data.images.shape[2]}×{data.images.shape[3]}, "
            f"{r} raters (valid: {per_rater}; {missing} image(s) with a missing rater), "
            f"{'ground truth' if data.gt is not None else 'no ground truth'}, {len(data.classes)} classes"
        )
    lines.append(f"split rule: {splits.rule}")
    return lines


def dataset_problems(splits, reference: str) -> list[str]:
    """What every cell needs of a dataset beyond its adapter's checks, as one line per problem."""
    import numpy as np

    problems = []
    parts = {p: getattr(splits, p) for p in ("train", "val", "test")}
    for part, data in parts.items():
        if data.n and not data.rater_valid.any(axis=1).all():
            bad = data.case_ids[~data.rater_valid.any(axis=1)]
            problems.append(f"{part}: {len(bad)} image(s) have no valid rater, e.g. {bad[0]}; every image needs one to train or score on")
        if reference == "gt" and data.n and data.gt is None:
            problems.append(f"{part}: no ground truth, but this dataset is scored against ground truth")
        ids, counts = np.unique(data.case_ids, return_counts=True)
        if (counts > 1).any():
            problems.append(f"{part}: case id {ids[counts > 1][0]} appears {counts.max()} times; case ids must be unique")
    for a, b in (("train", "test"), ("train", "val"), ("val", "test")):
        shared = np.intersect1d(parts[a].groups, parts[b].groups)
        if len(shared):
            problems.append(f"{a} and {b} share {len(shared)} group(s) (patients), e.g. {shared[0]}: the split leaks between them")
    return problems
