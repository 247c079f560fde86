"""Two results folders side by side (`python -m bench compare A B`): each method both ran, under the same dataset, rater
setting, noise level, reference and structure, compared with the seed-aware paired test (bench/report/stats.py).

A and B are, for example, the same methods under two budgets or two versions of a method's code. Only the test cases
both folders scored are paired; B − A is positive where B does better on a metric where higher is better. The p-values
are Holm-adjusted within each (group, structure, metric), over the methods compared there.

The comparison explains itself: its header names the run options and machine facts that differ between A and B
(`differences`, from the cells' config.json and manifest.json) and each side's run line (budget, seeds per method,
pipeline-check status: `bench.report.table_notes.run_text`), in compare.md and under every figure. By default only the main
reference of each dataset is compared (gt where it has ground truth, else the majority: `MAIN`); a row without a value
on either side (a rater who annotated nothing) is left out.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from bench.evaluate import metrics
from bench.evaluate.long_table import GROUP, mean_sd
from bench.report import stats
from bench.report.intervals import difference_range, estimable, interval
from bench.report.plots import caveat, data_limits, save
from bench.report.rows import display, registry_order
from bench.report.table_notes import run_records, run_text
from bench.report.table_text import markdown_table
from bench.report.tables import default_reference
from bench.results_folder import ResultsFolder
from bench.study import Study

MAIN = "main"  # `--references main`: each dataset's default reference only; "all": every reference both folders scored

COLUMNS = [
    *GROUP,
    "structure",
    "metric",
    "method",
    "n",
    "n_seeds_a",
    "n_seeds_b",
    "mean_a",
    "sd_a",
    "mean_b",
    "sd_b",
    "diff",
    "df",
    "ci_low",
    "ci_high",
    "p",
    "p_holm",
]


def seed_spread(matrix: pd.DataFrame) -> tuple[float, float]:
    """Mean and sd over seeds of each seed's case mean: (seeds × cases) -> (mean, sd; NaN with one seed)."""
    per_seed = matrix.mean(axis=1)
    return float(per_seed.mean()), float(per_seed.std(ddof=1)) if len(per_seed) > 1 else float("nan")


def main_reference(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of `table` against each dataset's default reference (`bench.report.tables.default_reference`)."""
    return table[table["reference"] == table["dataset"].map(default_reference)]


def compare_tables(a: pd.DataFrame, b: pd.DataFrame, shown: list[str], references: str = MAIN) -> pd.DataFrame:
    """One row (`COLUMNS`) per method, group, structure and metric in `shown` that both long tables hold; in the
    metrics' units (scaled as the tables print them): diff = B − A with its 95 % interval, p and Holm's p.

    references: `MAIN` (each dataset's default reference) or "all". A method without a value on either side (no case
    scored, every value NaN) has no row."""
    if references == MAIN:
        a, b = main_reference(a), main_reference(b)
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
            if test["n"] == 0 or np.isnan(mean_a) or np.isnan(mean_b):  # nothing scored on one side: no row of NaN
                continue
            found.append(
                {
                    **dict(zip(key, group)),
                    "method": method,
                    "n": test["n"],
                    "n_seeds_a": len(ma),
                    "n_seeds_b": len(mb),
                    "mean_a": mean_a,
                    "sd_a": sd_a,
                    "mean_b": mean_b,
                    "sd_b": sd_b,
                    **{k: test[k] for k in ("diff", "df", "ci_low", "ci_high", "p")},
                }
            )
        adjusted = stats.holm([r["p"] for r in found])
        rows += [{**r, "p_holm": float(h)} for r, h in zip(found, adjusted)]
    return pd.DataFrame(rows, columns=COLUMNS)


def to_markdown(paper: Study, table: pd.DataFrame, name_a: str, name_b: str) -> str:
    """One Markdown table per group, structure and metric, methods named as `paper` names them."""
    out = []
    key = [*GROUP, "structure", "metric"]
    for group, part in table.groupby(key, sort=False):
        metric = metrics.get(group[-1])
        d = metric.digits
        rows = []
        for r in part.itertuples():
            shown = interval(r.ci_low, r.ci_high, (r.n_seeds_a, r.n_seeds_b), r.df, d, difference_range(metric.name), signed=True)
            p = "–" if np.isnan(r.p_holm) else f"{r.p_holm:.3g}"
            rows.append(
                [
                    display(paper, r.method),
                    mean_sd(r.mean_a, r.sd_a, d),
                    mean_sd(r.mean_b, r.sd_b, d),
                    f"{r.diff:+.{d}f} {shown}",
                    p,
                    f"{r.n}, {r.n_seeds_a}/{r.n_seeds_b}",
                ]
            )
        header = ["method", f"A: {name_a}", f"B: {name_b}", "B − A [95 % CI] (n seeds A/B, df)", "p (Holm)", "cases, seeds A/B"]
        out += [
            f"### {group[0]} (raters {group[1]}, noise {group[2]}; against {group[3]}; {group[4]}): {metric.short}",
            "",
            markdown_table(header, rows, ["l", *"r" * 5]),
        ]
        out.append("")
    return "\n".join(out)


def difference_figure(paper: Study, part: pd.DataFrame, title: str, name_a: str, name_b: str) -> Figure:
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
    drawn = [0.0, *part["diff"], *part["ci_low"].where(shown), *part["ci_high"].where(shown)]
    ax.set_xlim(*data_limits(drawn, bounds, least=0.02))  # the data's span (and 0), not the metric's ± its range
    names = [
        display(paper, m) if ok else f"{display(paper, m)}\n(not estimable, {n_a}/{n_b} seeds)"
        for m, ok, n_a, n_b in zip(part["method"], shown, part["n_seeds_a"], part["n_seeds_b"])
    ]
    ax.set_yticks(y, names)
    ax.set_xlabel(f"B − A ({name_b} − {name_a}); 95 % interval of the seed-aware test")
    ax.set_title(title, fontsize=9, wrap=True)
    return fig


def ranked(value: float, rank: float) -> str:
    """A protocol table's entry: "93.79 (3)", "97.82" where unranked (the Oracle), "–" where not measured."""
    if np.isnan(value):
        return "–"
    return f"{value:.2f}" if np.isnan(rank) else f"{value:.2f} ({rank:.0f})"


def protocols(paper: Study, a: Path, b: Path, table: pd.DataFrame, name_a: str, name_b: str) -> str:
    """How the ordering of the methods moves with the protocol: per group and method both folders ran, DSC against the
    main reference (first structure, mean over seeds) under A and under B, and the test DSC of each side's GT-selected
    weights (`manifest.json` → `selection`, an upper bound; where the cells kept it), each column's ranks (1 best) and
    Kendall's τ between every two columns over the methods both rank. The Oracle is shown, never ranked: it would top
    every column and add a concordant pair per method to each τ. Markdown; "" without DSC rows."""
    from scipy.stats import kendalltau

    rows = table[(table["metric"] == "dsc") & (table["structure"] == table.groupby(GROUP)["structure"].transform("first"))]
    if rows.empty:
        return ""
    if name_a == name_b:  # two folders of one name: the columns need two
        name_a, name_b = f"A ({name_a})", f"B ({name_b})"
    selected = {}
    for side, folder in (("a", a), ("b", b)):
        for r in ResultsFolder.of(folder).records:
            if (r.manifest.get("selection") or {}).get("test_gt_dsc") is not None:
                selected.setdefault((side, *(r.keys[k] for k in GROUP[:3]), r.keys["method"]), []).append(
                    r.manifest["selection"]["test_gt_dsc"]
                )
    out = []
    for group, part in rows.groupby(GROUP, sort=False):
        frame = part.set_index("method")[["mean_a", "mean_b"]].rename(columns={"mean_a": name_a, "mean_b": name_b})
        for side, name in (("a", name_a), ("b", name_b)):
            frame[f"{name}, GT-selected"] = [np.mean(selected.get((side, *group[:3], m), [np.nan])) for m in frame.index]
        frame = frame.dropna(axis=1, how="all").loc[registry_order(frame.index)]
        ranks = frame.drop(index=paper.oracle, errors="ignore").rank(ascending=False, method="min").reindex(frame.index)
        cells = [[display(paper, m), *(ranked(v, ranks.loc[m, c]) for c, v in row.items())] for m, row in frame.iterrows()]
        taus = []
        for x, y in ((x, y) for i, x in enumerate(frame.columns) for y in frame.columns[i + 1 :]):
            both = ranks[[x, y]].dropna()
            if len(both) > 2:
                taus.append(f"τ({x}, {y}) = {kendalltau(both[x], both[y]).statistic:.2f} over {len(both)} methods")
        out += [
            f"\n## Protocols: {group[0]} {group[1]} noise {group[2]}, DSC (%) against {group[3]} (rank)\n",
            markdown_table(["method", *frame.columns], cells),
            "",
            *(f"- {t}" for t in taus),
        ]
    return "\n".join(out) + "\n"


def write(
    paper: Study,
    table: pd.DataFrame,
    out: Path,
    name_a: str,
    name_b: str,
    header: list[str] | None = None,
    run: str = "",
    extra: str = "",
) -> list[Path]:
    """compare.csv, compare.md (`header` lines first, `extra` last) and one difference figure per group, structure and
    metric into `out`; `run` (both sides' run lines, `run_lines`) is each figure's footer."""
    from bench import files

    out.mkdir(parents=True, exist_ok=True)
    written = [out / "compare.csv", out / "compare.md"]
    files.write_table(written[0], table)
    head = "".join(f"{line}\n" for line in header or [])
    files.write_text(written[1], f"# {name_b} (B) against {name_a} (A)\n\n{head}\n" + to_markdown(paper, table, name_a, name_b) + extra)
    for group, part in table.groupby([*GROUP, "structure", "metric"], sort=False):
        title = f"{group[0]} {group[1]} noise {group[2]}, {group[4]}, {metrics.get(group[-1]).short} against {group[3]}"
        stem = "diff_" + "_".join(str(g).replace("/", "-") for g in group)
        written += save(caveat(difference_figure(paper, part, title, name_a, name_b), run), out / stem)
    return written


# --------------------------------------------------------------------------- what differs between A and B

#: config.json's entries that decide a result beside the method (bench/run/cell.py `cell_config`), and manifest.json's
#: facts of the machine and code a cell ran on; `differences` names each leaf whose values differ between A and B.
CONFIG_FACTS = ("options", "budget", "schedules", "train_images", "val_images", "test_images", "split_rule", "precision", "threads")
MACHINE_FACTS = ("git_commit", "versions", "host", "device", "cpu", "precision", "engine", "threads", "data_fingerprint")


def flatten(value, prefix: str, out: dict[str, set[str]]) -> None:
    """Every leaf of a JSON value under its dotted path (`options.max_steps`), its value as text, into `out`."""
    if isinstance(value, dict):
        for key, inner in value.items():
            flatten(inner, f"{prefix}.{key}", out)
    elif value is not None:
        out[prefix].add(str(value))


def facts(folder: Path, keys: set[tuple] | None = None) -> dict[str, set[str]]:
    """Dotted path -> the values it takes over the finished cells of `folder` (those whose dataset, raters, noise and
    method are in `keys`, where given): config.json's `CONFIG_FACTS` and the method's config, manifest.json's
    `MACHINE_FACTS` under `machine.`."""
    out: dict[str, set[str]] = defaultdict(set)
    for r in ResultsFolder.of(folder).records:
        cell, info, config = r.keys, r.manifest, r.config
        if keys is not None and (cell["dataset"], cell["raters"], cell["noise"], cell["method"]) not in keys:
            continue
        for key in CONFIG_FACTS:
            flatten(config.get(key), key, out)
        flatten(config.get("method_config"), f"method_config.{cell['method']}", out)
        for key in MACHINE_FACTS:
            flatten(info.get(key), f"machine.{key}", out)
    return dict(out)


def cell_keys(folder: Path) -> set[tuple]:
    return {(r.keys["dataset"], r.keys["raters"], r.keys["noise"], r.keys["method"]) for r in ResultsFolder.of(folder).records}


def differences(a: Path, b: Path) -> list[str]:
    """ "options.max_steps: 20 (A) vs 40 (B)", one line per option or machine fact that differs between the cells both
    folders ran (all their cells where they share none); a folder without cell records says so instead."""
    missing = [f"{side} ({folder})" for side, folder in (("A", a), ("B", b)) if not cell_keys(folder)]
    if missing:
        return [f"no cell records (config.json, manifest.json) in {' and '.join(missing)}: options and machines not compared"]
    shared = cell_keys(a) & cell_keys(b) or None
    fa, fb = facts(a, shared), facts(b, shared)
    order = {name: i for i, name in enumerate(("options", "budget", "schedules", "method_config", "machine"))}

    def shown(values: set[str] | None) -> str:
        text = ", ".join(sorted(values)) if values else "–"
        return text if len(text) <= 60 else text[:57] + "…"

    keys = sorted(set(fa) | set(fb), key=lambda k: (order.get(k.split(".")[0], 4), k))
    return [f"{k}: {shown(fa.get(k))} (A) vs {shown(fb.get(k))} (B)" for k in keys if fa.get(k) != fb.get(k)]


def seeds_of(paper: Study, table: pd.DataFrame, methods: set[str]) -> dict[str, int]:
    """Display name -> seeds, for the compared `methods` of one long table (registry order)."""
    counts = table[table["method"].isin(methods)].groupby("method")["seed"].nunique()
    return {display(paper, m): int(counts[m]) for m in registry_order(counts.index)}


def run_lines(paper: Study, a: Path, b: Path, table_a: pd.DataFrame, table_b: pd.DataFrame, compared: pd.DataFrame) -> tuple[str, str]:
    """Each side's run line (`bench.report.table_notes.run_text`: budget, seeds per method, pipeline-check status) over the
    compared methods."""
    methods = set(compared["method"])
    return tuple(
        f"{side}: {run_text(seeds_of(paper, t, methods), run_records(folder))}"
        for side, folder, t in (("A", a, table_a), ("B", b, table_b))
    )


def header(a: Path, b: Path, runs: tuple[str, str], references: str, diff: list[str]) -> list[str]:
    """compare.md's lines above the tables: the two folders and their run lines, what differs (`differences`), which
    references."""
    which = (
        "each dataset's main reference (gt where it has ground truth, else the majority); `--references all` for the others"
        if references == MAIN
        else "every reference both folders scored"
    )
    return [
        f"- A: `{a}`",
        f"- B: `{b}`",
        *(f"- {r}" for r in runs),
        "",
        "What differs between A and B (config.json, manifest.json):",
        "",
        *(f"- {line}" for line in diff or ["nothing recorded differs"]),
        "",
        f"References: {which}.",
    ]


def summary_lines(paper: Study, table: pd.DataFrame) -> list[str]:
    """stdout's short summary: per group and structure, each metric's B − A per method with its interval and Holm p."""
    out = []
    for group, part in table.groupby([*GROUP, "structure"], sort=False):
        out.append(f"{group[0]} (raters {group[1]}, noise {group[2]}; against {group[3]}; {group[4]}):")
        for name, rows in part.groupby("metric", sort=False):
            metric = metrics.get(name)
            d = metric.digits
            for r in rows.itertuples():
                shown = interval(r.ci_low, r.ci_high, (r.n_seeds_a, r.n_seeds_b), r.df, d, difference_range(name), signed=True)
                p = "–" if np.isnan(r.p_holm) else f"{r.p_holm:.3g}"
                out.append(
                    f"  {metric.short} {display(paper, r.method)}: {mean_sd(r.mean_a, r.sd_a, d)} (A) → {mean_sd(r.mean_b, r.sd_b, d)} (B), "
                    f"B − A {r.diff:+.{d}f} {shown}, p (Holm) {p}"
                )
    return out
