"""`python -m bench predict CELL --images DIR --out DIR`: run a finished cell of your own folder on new images (bench/run/predict.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.cli.options import UsageError, check_out


def add_parser(verbs) -> None:
    p = verbs.add_parser(
        "predict",
        allow_abbrev=False,
        help="run a finished cell (of a folder:PATH dataset) on new images: label maps, probabilities, per-rater outputs, samples",
        description="Run a finished cell's result weights on every <case>_0000<ending> image of --images (the layout of the "
        "cell's own folder, README: Your own data) and write, per case, the label map <case><ending>, the probabilities "
        "<case>_prob-<class><ending>, a per-rater method's <case>_rater-<name><ending> and a sampler's <case>_sample-<m><ending> "
        "into --out, in the input's format (NIfTI keeps its affine and header; PNG probabilities are uint16, × 65535).",
    )
    p.add_argument("cell", metavar="CELL", help="a finished cell's folder: RESULTS/runs/<dataset>/<raters>/<noise>/<method>/seed-<s>")
    p.add_argument("--images", required=True, help="folder of images named as the dataset's imagesTr/ (<case>_0000<ending>, …)")
    p.add_argument("--out", required=True, help="folder to write the outputs into (made if missing)")
    p.add_argument("--samples", type=int, help="samples per image of a sampling method (default: the cell's --samples)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="auto (default): CUDA where present")
    p.set_defaults(func=cmd_predict)


def cmd_predict(args: argparse.Namespace) -> int:
    from bench.run.predict import predict_images
    from bench.train.hardware import resolve_device

    cell, images, out = Path(args.cell), Path(args.images), Path(args.out)
    if not cell.is_dir():
        raise UsageError(f"{cell}: no such cell folder; give RESULTS/runs/<dataset>/<raters>/<noise>/<method>/seed-<s>")
    if not images.is_dir():
        raise UsageError(f"--images {images}: no such folder")
    if args.samples is not None and args.samples < 1:
        raise UsageError(f"--samples {args.samples}: give at least 1")
    out.mkdir(parents=True, exist_ok=True)
    check_out(out, "the output folder", "choose another with --out")
    written = predict_images(cell, images, out, resolve_device(args.device), args.samples)
    print(f"{len(written)} files written to {out}")
    return 0
