"""`python -m bench export`: a results folder's per-case numbers as one tidy table, for analyses outside the benchmark.

One row per case × method × seed × reference × structure × metric (the long table: docs/architecture.md, the long table
and its conventions), with the run options and the reading of the cell it comes from. Columns, in order:

- dataset, raters, noise, method, seed: the cell;
- reference, case, structure, metric, value: what was scored, against what, and its value (stored units: a DSC of 0.9 is
  0.9, bAHD in spacing units);
- tp, fp, fn, n_gt, n_pred, gt_to_pred_sum, pred_to_gt_sum, n_samples: the raw counts behind it (NaN where a metric has
  none), so another convention is a computation on this table;
- reading: which weights of the cell's trajectory were scored (its result, the budget's primary reading, or `--reading`);
- budget, max_steps, train_size, test_size, threads, samples, empty_pair: the cell's run options (config.json);
- precision, device: how it trained (manifest.json).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.cli.options import UsageError, check_out

OPTIONS = ("budget", "max_steps", "train_size", "test_size", "threads", "samples", "empty_pair")
FORMATS = ("csv", "parquet")


def add_parser(verbs) -> None:
    p = verbs.add_parser(
        "export",
        allow_abbrev=False,
        help="every per-case number of a results folder as one tidy CSV (or Parquet) table, with each cell's options",
        description="Write one row per case × method × seed × reference × structure × metric of a results folder, with the "
        "raw counts behind each value, the reading scored and the cell's run options (columns: bench/cli/export.py).",
    )
    p.add_argument("--results", default="results", help="results folder (default: results)")
    p.add_argument("--format", choices=FORMATS, default="csv", help="csv (default) or parquet")
    p.add_argument("--out", help="the file to write (default: RESULTS/export.csv or .parquet)")
    p.add_argument("--reading", help="export the cells' reading NAME instead of their result (see `bench report --reading`)")
    p.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    import pandas as pd

    from bench import files, store
    from bench.evaluate.long_table import COLUMNS, KEYS
    from bench.report.views import own_reading

    results = Path(args.results)
    records = store.records(results) if (results / store.RUNS).is_dir() else []
    if not records:
        raise UsageError(f"no finished cell in {results}; run `python -m bench run --results {results}` first")
    out = Path(args.out) if args.out else results / f"export.{args.format}"
    if out.suffix != f".{args.format}":
        raise UsageError(
            f"--out {out}: a {args.format} file ends in .{args.format}; name it so, or give --format {out.suffix[1:] or 'csv'}"
        )
    check_out(out.parent, "the export's folder", "choose another with --out")
    frames = []
    for r in records:
        own = own_reading(r)
        reading = args.reading or own
        if reading == own:
            rows = files.read_table(r.folder / store.METRICS)
        elif (r.folder / store.READINGS).is_file():
            kept = files.read_table(r.folder / store.READINGS)
            rows = kept[kept["reading"] == reading][COLUMNS]
        else:
            continue
        options = r.config.get("options") or {}
        cell = {**{k: options.get(k) for k in OPTIONS}, "precision": r.manifest.get("precision"), "device": r.manifest.get("device")}
        frames.append(rows[COLUMNS].assign(reading=reading, **cell))
    if not frames or all(f.empty for f in frames):
        raise UsageError(f"--reading {args.reading}: no finished cell of {results} holds it (`bench report --reading` lists those held)")
    table = pd.concat(frames, ignore_index=True).sort_values([*KEYS, "reference", "structure", "metric", "case"], kind="stable")
    files.write_table(out, table.reset_index(drop=True))
    print(f"{len(table):,} rows ({table[KEYS].drop_duplicates().shape[0]} cells) written to {out}")
    return 0
