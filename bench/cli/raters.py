"""`python -m bench raters`: what a rater pool teaches before any training (label-level statistics, bench/run/split_cache.py)."""

from __future__ import annotations

import argparse
import sys
import warnings

from bench.cli.options import UsageError, data_root, parse_list

EXAMPLES = """examples:
  python -m bench raters                                    mnist-5k under each of its rater styles
  python -m bench raters --raters lfnet,cm --markdown       the same as a Markdown table
  python -m bench raters --dataset mnist --data-root ~/data --noise-levels protocol,0.6
"""

ROWS = (  # (label, key in the statistics, how to show it)
    ("Average", "average", "dsc"),
    ("majority-vote label", "majority", "fused"),
    ("mean ≥ 0.5 label", "mean_05", "fused"),
    ("STAPLE label", "staple", "fused"),
    ("GT inside the TV foreground", "tv_gt_share", "share"),
    ("TV foreground empty", "tv_empty_share", "share"),
)


def add_parser(verbs) -> None:
    p = verbs.add_parser(
        "raters",
        allow_abbrev=False,
        help="label-level statistics of a dataset's rater pools: each rater and each fused label against GT, no training",
        description="Label-level statistics of the training split's rater pool under each rater setting: each rater's DSC vs GT "
        "and area, the pool's Average, the DSC (and area ÷ GT) of its majority-vote, mean ≥ 0.5 and STAPLE labels, and how much "
        "of GT the threshold-vote foreground (β = R − 1) holds. Measured once when the splits are first loaded, then cached.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--dataset", default="mnist-5k", help="dataset name (default: mnist-5k)")
    p.add_argument("--raters", help="comma list of rater settings, e.g. lfnet,cm,cm+clean (default: every style of the dataset)")
    p.add_argument("--noise-levels", default="protocol", help="comma list of noise levels (default: protocol)")
    p.add_argument("--data-root", help="folder holding the datasets (default: $BENCH_DATA, else ./data)")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    p.set_defaults(func=cmd_raters)


def cmd_raters(args: argparse.Namespace) -> int:
    from bench import store
    from bench.run import split_cache
    from datasets import get_dataset
    from datasets.settings import parse_level

    spec = get_dataset(args.dataset)
    settings = parse_list(args.raters, str, "--raters") if args.raters else list(spec.rater_styles)
    settings = [spec.setting(s) for s in settings]
    try:
        levels = [parse_level(v) for v in parse_list(args.noise_levels, str, "--noise-levels")]
    except ValueError as e:
        raise UsageError(f"--noise-levels: {e}") from None
    root = data_root(args.data_root).absolute()
    for level in levels:
        stats, sparse = {}, []
        for setting in settings:
            with warnings.catch_warnings():  # a sparse pool's line is printed below, once
                warnings.simplefilter("ignore")
                splits = split_cache.load_splits(split_cache.DataKey.of(args.dataset, root, setting, level, store.cache_dir()))
            stats[setting.label] = splits.raters_info.get("labels") or split_cache.label_statistics(splits.train)
            if splits.raters_info.get("warning"):
                sparse.append(splits.raters_info["warning"])
        if not any(stats.values()):
            raise UsageError(f"{args.dataset} has no ground truth: its raters cannot be scored against it")
        n = splits.train.n
        print(
            f"\n{args.dataset}, noise {level}: training split ({n:,} images); DSC vs GT, area in pixels (GT "
            f"{next(iter(stats.values()))['gt_area']:.1f}); fused labels: DSC (area ÷ GT)"
        )
        print(render(stats, args.markdown))
        for line in dict.fromkeys(sparse):
            print(f"note: {line}", file=sys.stderr)
    return 0


def render(stats: dict[str, dict], markdown: bool = False) -> str:
    """One column per rater setting: each rater's DSC / area, then the pool's rows (`ROWS`)."""
    names = list(dict.fromkeys(r for s in stats.values() for r in s["raters"]))
    rows = [(name, [_rater(s["raters"].get(name)) for s in stats.values()]) for name in names]
    for label, key, kind in ROWS:
        rows.append((label, [_cell(s, key, kind) for s in stats.values()]))
    header = ["", *stats]
    if markdown:
        from bench.report.table_text import markdown_table

        return markdown_table(header, [[label, *cells] for label, cells in rows])
    width = max(len(label) for label, _ in rows) + 2
    out = [f"{'':<{width}}" + "".join(f"{h:>18}" for h in header[1:])]
    return "\n".join(out + [f"{label:<{width}}" + "".join(f"{c:>18}" for c in cells) for label, cells in rows])


def _rater(values: dict | None) -> str:
    return "–" if values is None else f"{values['dsc']:.3f} / {values['area']:.1f}"


def _cell(stats: dict, key: str, kind: str) -> str:
    if kind == "dsc":
        return f"{stats[key]:.3f}"
    if kind == "fused":
        return f"{stats[key]:.3f} ({stats[key + '_area_ratio']:.2f}×)"
    return f"{100 * stats[key]:.1f} %"
