"""`python -m bench power`: the seed-aware test's false-positive rate and power, by simulation (bench/reproduce/power.py).

From a results folder: the variance components of each (dataset, raters, noise) group's column, the test's rate of
false positives under the null at the folder's seeds and cases, the smallest difference it finds with 80 % power and
the seeds a given difference needs. Without one: the same from the stated defaults (`bench.reproduce.power.DEFAULT`).
"""

from __future__ import annotations

import argparse
import difflib
from pathlib import Path

from bench.cli.options import UsageError, parse_list


def add_parser(verbs) -> None:
    p = verbs.add_parser(
        "power",
        allow_abbrev=False,
        help="false-positive rate and power of the verdicts' paired test, by simulation from a results folder or defaults",
        description="Estimate the variance components (between seeds, between cases, residual) of a results folder, or take "
        "the stated defaults, and print by simulation the seed-aware test's false-positive rate under the null, the "
        "smallest difference it detects with 80 % power, and the seeds per method a given difference needs.",
    )
    p.add_argument("--results", help="results folder to estimate the components from (default: the stated defaults)")
    p.add_argument("--metric", default="dsc", help="metric of the column (default: dsc)")
    p.add_argument("--structure", help="structure (default: the first of each dataset: foreground, disc)")
    p.add_argument("--reference", help="evaluation reference (default: the dataset's, gt where it has one)")
    p.add_argument("--methods", help="comma list of the methods whose components are pooled (default: all but the oracle)")
    p.add_argument("--seeds", type=int, help="seeds per method to simulate (default: the folder's, else 3)")
    p.add_argument("--cases", type=int, help="test cases to simulate (default: the folder's, else 1000)")
    p.add_argument("--differences", default="1,2,5", help="differences, in the metric's printed units, to find seeds for")
    p.add_argument("--sims", type=int, default=4000, help="simulations per estimate (default: 4000)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the simulation (default: 0)")
    p.set_defaults(func=cmd_power)


def cmd_power(args: argparse.Namespace) -> int:
    import numpy as np

    from bench.evaluate import metrics
    from bench.report import stats
    from bench.reproduce import power
    from bench.reproduce.verdicts import scale

    differences = parse_list(args.differences, float, "--differences")
    if args.metric not in metrics.METRICS:
        close = difflib.get_close_matches(args.metric, list(metrics.METRICS), n=1)
        raise UsageError(
            f"--metric {args.metric!r}: no such metric; {f'did you mean {close[0]}? ' if close else ''}"
            f"metrics: {', '.join(metrics.METRICS)}"
        )
    if not args.results and args.metric != "dsc":
        raise UsageError(
            f"--metric {args.metric}: the stated defaults are DSC's variance components; give --results FOLDER to estimate {args.metric}'s"
        )
    if args.sims < 100:
        raise UsageError(f"--sims {args.sims}: at least 100 simulations are needed for a rate")
    for flag, value in (("--seeds", args.seeds), ("--cases", args.cases)):
        if value is not None and value < 2:
            raise UsageError(f"{flag} {value}: at least 2 are needed to estimate a variance")
    unit = scale(args.metric)
    rng = np.random.default_rng(args.seed)
    planned = list(groups(args))  # the results are read (and a damaged one refused) before any progress line
    progress = power.Progress()  # minutes of simulation: a bar on a terminal, else a line at most every LINE_SECONDS
    print(
        f"seed-aware paired test (docs/methods.md#statistics), alpha {stats.ALPHA:g}, power {stats.POWER:.0%}, "
        f"{args.sims} simulations; values in {args.metric} units ×{unit:g}"
    )
    for title, comp, per_method, seeds, cases in planned:
        seeds, cases = args.seeds or seeds, args.cases or cases
        print(f"\n{title}: {seeds} seeds × {cases} cases")
        print(
            f"  variance components (sd): seed {comp.sd_seed * unit:.3g}, case {comp.sd_case * unit:.3g}, "
            f"residual {comp.sd_resid * unit:.3g}" + (" (pooled: the mean of the methods' variances)" if len(per_method) else "")
        )
        if len(per_method):
            print("  seed sd per method: " + ", ".join(f"{r.method} {r.sd_seed * unit:.3g}" for r in per_method.itertuples()))
        where = title.split(",")[0]
        with progress.phase(f"{where}: null draws", power.blocks(seeds, cases, args.sims)):
            sim = power.simulate(comp, seeds, cases, args.sims, rng, with_wilcoxon=True, tick=progress.tick)
        rate, margin = power.rejection_rate(sim["p"])
        wilcoxon, _ = power.rejection_rate(sim["p_wilcoxon"])
        verdict = "within" if rate <= stats.ALPHA + margin else "ABOVE"
        print(
            f"  false-positive rate under the null: {rate:.1%} ({verdict} {stats.ALPHA:.0%} + {margin:.1%} Monte Carlo margin); "
            f"the paper's per-case Wilcoxon on the same draws: {wilcoxon:.1%}"
        )
        if len(per_method) > 1:  # every pair under its own seed sds, at 0.05 and at Holm's first step over the map's pairs
            holm = stats.ALPHA / (len(per_method) * (len(per_method) - 1) // 2)
            n_pairs = len(per_method) * (len(per_method) - 1) // 2
            with progress.phase(f"{where}: every pair", n_pairs * power.blocks(seeds, cases, args.sims)):
                rates = power.pair_rates(per_method, comp, seeds, cases, args.sims, rng, (stats.ALPHA, holm), progress.say, progress.tick)
            for level in (stats.ALPHA, holm):
                worst = rates.loc[rates[f"rate_{level:g}"].idxmax()]
                rate, margin = worst[f"rate_{level:g}"], worst[f"margin_{level:g}"]
                print(
                    f"  with each method's own seed sd, the worst of {len(rates)} pairs at {level:.2g}"
                    + (f" (Holm's first step over {len(rates)} pairs)" if level != stats.ALPHA else "")
                    + f": {worst.a} {worst.sd_a * unit:.3g} vs {worst.b} {worst.sd_b * unit:.3g}, false-positive rate {rate:.2%} "
                    f"({'within' if rate <= level + margin else 'ABOVE'} {level:.2g} + {margin:.2%})"
                )
        print(f"  smallest difference found with {stats.POWER:.0%} power: {smallest(sim, args.metric, seeds)}")
        needed = []
        for d in differences:
            with progress.phase(f"{where}: seeds for a difference of {d:g}"):
                needed.append(power.seeds_for(comp, cases, d / unit, max(args.sims // 4, 100), rng, tick=progress.tick))
        print("  seeds per method for a difference of " + ", ".join(f"{d:g}: {n if n else '> 50'}" for d, n in zip(differences, needed)))
    progress.close()
    return 0


def smallest(sim: dict, metric: str, seeds: int) -> str:
    """The smallest difference found with the target power, in printed units; "not reachable" where the simulation finds
    none, or none a metric on [0, 1] can show (a DSC difference beyond 100 points)."""
    import numpy as np

    from bench.evaluate import metrics
    from bench.report import stats
    from bench.reproduce import power

    found = power.detectable(sim)
    bounded = metrics.get(metric).scale == 100  # a fraction shown in %
    if not np.isfinite(found) or power.power_at(sim, found) < stats.POWER or (bounded and found > 1):
        return f"not reachable with {seeds} seeds (the seed-to-seed spread is too large for the test to reach {stats.POWER:.0%} power)"
    return f"{found * metrics.get(metric).scale:.3g}"


def groups(args: argparse.Namespace):
    """(title, Components, per-method estimates, seeds, cases) per comparison group of the folder, or the stated defaults."""
    import pandas as pd

    from bench.reproduce import power

    if not args.results:
        comp = power.DEFAULT
        yield "stated defaults (no --results)", comp, pd.DataFrame(), 3, 1000
        return
    from bench import store
    from bench.evaluate.long_table import select
    from bench.report import stats
    from bench.report.tables import default_reference

    path = Path(args.results) / store.METRICS
    full = store.read_collected(Path(args.results), store.METRICS)  # a damaged table is rebuilt from the cells (a note says so)
    if full.empty:
        raise UsageError(f"{path} not found: run `python -m bench run --results {args.results}` first, or leave out --results")
    table = full[full["metric"] == args.metric]
    if table.empty:
        raise UsageError(
            f"--metric {args.metric}: no {args.metric!r} rows in {path}; metrics there: {', '.join(sorted(set(full['metric'])))}"
        )
    found = False
    for (dataset, raters, noise), part in table.groupby(["dataset", "raters", "noise"], sort=True):
        reference = args.reference or default_reference(dataset)
        structure = args.structure or sorted(set(part["structure"]), key=lambda s: s != "foreground")[0]
        part = select(part, reference=reference, structure=structure)
        if args.methods:
            part = part[part["method"].isin(parse_list(args.methods, str, "--methods"))]
        if part.empty:
            continue
        try:
            comp, per_method = power.components_of(part, exclude=stats.default_exclude(args.study))
        except ValueError as e:
            print(f"\n{dataset}/{raters}/{noise}: {e}")
            continue
        found = True
        yield (
            (f"{dataset} / {raters} / noise {noise}, {args.metric} vs {reference}, {structure} ({len(per_method)} methods pooled)"),
            comp,
            per_method,
            int(per_method["seeds"].min()),
            int(per_method["cases"].min()),
        )
    if not found:
        raise UsageError(f"no group of {path} has a method with 2 or more seeds: the seed variance cannot be estimated")
