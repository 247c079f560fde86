"""Two results folders side by side (`python -m bench compare A B`): each method both ran, under the same dataset, rater
setting, noise level, reference and structure, compared with the seed-aware paired test (bench/report/stats.py).

A and B are, for example, the same methods under two budgets or two versions of a method's code. Only the test cases
both folders scored are paired; B − A is positive where B does better on a metric where higher is better. The p-values
are Holm-adjusted within each (group, structure, metric), over the methods compared there.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from bench.evaluate import metrics
from bench.evaluate.long_table import GROUP, mean_sd
from bench.report import stats
from bench.report.intervals import difference_range, estimable, interval
from bench.report.plots import save
from bench.report.rows import display, registry_order

COLUMNS = [*GROUP, "structure", "metric", "method", "n", "n_seeds_a", "n_seeds_b", "mean_a", "sd_a", "mean_b", "sd_b",
           "diff", "df", "ci_low", "ci_high", "p", "p_holm"]  # fmt: skip


def seed_spread(matrix: pd.DataFrame) -> tuple[float, float]:
    """Mean and sd over seeds of each seed's case mean: (seeds × cases) -> (mean, sd; NaN with one seed)."""
    per_seed = matrix.mean(axis=1)
    return float(per_seed.mean()), float(per_seed.std(ddof=1)) if len(per_seed) > 1 else float("nan")


def compare_tables(a: pd.DataFrame, b: pd.DataFrame, shown: list[str]) -> pd.DataFrame:
    """One row (`COLUMNS`) per method, group, structure and metric in `shown` that both long tables hold; in the
    metrics' units (scaled as the tables print them): diff = B − A with its 95 % interval, p and Holm's p."""
    key = [*GROUP, "structure", "metric"]
    rows = []
    in_b = dict(tuple(b[b["metric"].isin(shown)].groupby(key, sort=True)))
    for group, part_a in a[a["metric"].isin(shown)].groupby(key, sort=True):
        part_b = in_b.get(group)
        if part_b is None:
            continue
        metric = metrics.get(group[-1])
        found = []
        for method in registry_order(set(part_a["method"]) & set(part_b["method"])):
            ma, mb = stats.seed_case_matrix(part_a, method) * metric.scale, stats.seed_case_matrix(part_b, method) * metric.scale
            test = stats.compare_models(mb, ma)  # B − A as measured: the test is two-sided, its p the same either way
            (mean_a, sd_a), (mean_b, sd_b) = seed_spread(ma), seed_spread(mb)
            found.append({**dict(zip(key, group)), "method": method, "n": test["n"], "n_seeds_a": len(ma), "n_seeds_b": len(mb),
                          "mean_a": mean_a, "sd_a": sd_a, "mean_b": mean_b, "sd_b": sd_b,
                          **{k: test[k] for k in ("diff", "df", "ci_low", "ci_high", "p")}})  # fmt: skip
        adjusted = stats.holm([r["p"] for r in found])
        rows += [{**r, "p_holm": float(h)} for r, h in zip(found, adjusted)]
    return pd.DataFrame(rows, columns=COLUMNS)


def to_markdown(table: pd.DataFrame, name_a: str, name_b: str) -> str:
    """One Markdown table per group, structure and metric."""
    out = []
    key = [*GROUP, "structure", "metric"]
    for group, part in table.groupby(key, sort=False):
        metric = metrics.get(group[-1])
        d = metric.digits
        out += [f"### {group[0]} (raters {group[1]}, noise {group[2]}; against {group[3]}; {group[4]}): {metric.short}", "",
                f"| method | A: {name_a} | B: {name_b} | B − A [95 % CI] (n seeds A/B, df) | p (Holm) | cases, seeds A/B |",
                "|:--|--:|--:|--:|--:|--:|"]  # fmt: skip
        for r in part.itertuples():
            shown = interval(r.ci_low, r.ci_high, (r.n_seeds_a, r.n_seeds_b), r.df, d, difference_range(metric.name), signed=True)
            p = "–" if np.isnan(r.p_holm) else f"{r.p_holm:.3g}"
            out.append(f"| {display(r.method)} | {mean_sd(r.mean_a, r.sd_a, d)} | {mean_sd(r.mean_b, r.sd_b, d)} | {r.diff:+.{d}f} {shown} "
                       f"| {p} | {r.n}, {r.n_seeds_a}/{r.n_seeds_b} |")  # fmt: skip
        out.append("")
    return "\n".join(out)


def difference_figure(part: pd.DataFrame, title: str, name_a: str, name_b: str) -> Figure:
    """B − A per method with its 95 % interval; a method whose interval is not estimable (one seed on either side, or
    wider than the metric's range: `bench.report.intervals`) is the point alone, named so beside the method."""
    fig = Figure(figsize=(6.4, 1.2 + 0.42 * len(part)), layout="constrained")
    ax = fig.add_subplot()
    y = np.arange(len(part))[::-1]
    bounds = difference_range(part["metric"].iloc[0])
    shown = np.array([estimable(lo, hi, bounds) for lo, hi in zip(part["ci_low"], part["ci_high"])], dtype=bool)
    low, high = (part["diff"] - part["ci_low"]).where(shown, 0.0), (part["ci_high"] - part["diff"]).where(shown, 0.0)
    ax.errorbar(part["diff"], y, xerr=np.vstack([low, high]), fmt="o", color="0.2", capsize=3)
    ax.axvline(0, color="0.6", lw=1, ls="--")
    names = [display(m) if ok else f"{display(m)}\n(not estimable, {n_a}/{n_b} seeds)"
             for m, ok, n_a, n_b in zip(part["method"], shown, part["n_seeds_a"], part["n_seeds_b"])]  # fmt: skip
    ax.set_yticks(y, names)
    ax.set_xlabel(f"B − A ({name_b} − {name_a}); 95 % interval of the seed-aware test")
    ax.set_title(title, fontsize=9, wrap=True)
    return fig


def write(table: pd.DataFrame, out: Path, name_a: str, name_b: str) -> list[Path]:
    """compare.csv, compare.md and one difference figure per group, structure and metric into `out`."""
    from bench import files

    out.mkdir(parents=True, exist_ok=True)
    written = [out / "compare.csv", out / "compare.md"]
    files.write_table(written[0], table)
    files.write_text(written[1], f"# {name_b} (B) against {name_a} (A)\n\n" + to_markdown(table, name_a, name_b))
    for group, part in table.groupby([*GROUP, "structure", "metric"], sort=False):
        title = f"{group[0]} {group[1]} noise {group[2]}, {group[4]}, {metrics.get(group[-1]).short} against {group[3]}"
        stem = "diff_" + "_".join(str(g).replace("/", "-") for g in group)
        written += save(difference_figure(part, title, name_a, name_b), out / stem)
    return written
