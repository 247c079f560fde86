"""The stop audit from one run (docs/decisions.md, "Readings along one trajectory"): `python -m bench audit-stops FOLDER`.

FOLDER holds cells trained to a fixed horizon (`--budget trajectory`) that read themselves along the way
(bench/run/readings.py). Per method: the test metrics at each reading; a signed verdict of the move from the rule's stop
(`rule`) to the horizon (`last`), improves, stable or degrades beyond its tolerance (the larger of the checkpoint-to-
checkpoint spread and the seed sd; GED: 5 % of its value), and the cause it sees (the rule stopped early, or the method's
own loss leaves GT), and where a second seed is due; the ranking under each reading, with Kendall's τ between readings and
every rank reversal; and a figure of each method's test DSC (and a sampler's GED) along its trajectory, its validation DSC
against GT from the first evaluation behind it (the readings before the test curve's first step sit on it). Writes
`FOLDER/stop_audit/trajectory_audit.md`, `.csv` and `test_curves.png`/`.pdf`.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
from scipy.stats import kendalltau

from bench import store
from bench.files import read_table, write_table
from bench.report.plots import save
from bench.report.rows import display, entry, registry_order
from bench.report.stop_logs import GROUP, setup
from bench.report.table_text import markdown_table
from bench.report.views import own_reading
from bench.results_folder import ResultsFolder
from bench.study import Study

MARKDOWN, CSV, FIGURE = "trajectory_audit.md", "trajectory_audit.csv", "test_curves"
CHECKED = {"dsc": None, "ged": "raters", "dice_match": "raters"}  # metric: reference (None: gt, else the majority)
SCALE = {"dsc": 100, "ged": 1, "dice_match": 100}
GED_TOLERANCE = 0.05  # GED's tolerance: this share of its value at the rule's stop
SHOWN = ("rule", "min-val-loss", "selection", "last", "gt-best")  # the held readings, in the tables' order


def cell_readings(record: store.CellRecord) -> pd.DataFrame:
    """One cell's long rows at every reading it holds (its result's rows as its own reading), with `reading` and
    `reading_step`."""
    steps = {k: v.get("step") for k, v in (record.manifest.get("readings") or {}).items()}
    own = own_reading(record)
    frames = [read_table(record.folder / store.METRICS).assign(reading=own, reading_step=steps.get(own, math.nan))]
    if (record.folder / store.READINGS).is_file():
        frames.append(read_table(record.folder / store.READINGS))
    return pd.concat(frames, ignore_index=True)


def reading_values(rows: pd.DataFrame) -> pd.DataFrame:
    """Per cell (GROUP, seed), reading and checked metric: the mean over cases (first structure; DSC against GT where the
    dataset has it, else the majority), the reading's step, and DSC's pooled precision, recall and area."""
    out = []
    structure = rows["structure"].iloc[0]
    for metric, reference in CHECKED.items():
        refs = [reference] if reference else [r for r in ("gt", "majority") if r in set(rows["reference"])][:1]
        part = rows[(rows["metric"] == metric) & rows["reference"].isin(refs) & (rows["structure"] == structure)]
        for key, g in part.groupby([*GROUP, "seed", "reading"], sort=False):
            row = {
                **dict(zip([*GROUP, "seed", "reading"], key)),
                "metric": metric,
                "value": g["value"].mean(),
                "step": g["reading_step"].iloc[0],
            }
            if metric == "dsc":
                tp, fp, fn = g["tp"].sum(), g["fp"].sum(), g["fn"].sum()
                row.update(precision=tp / max(tp + fp, 1), recall=tp / max(tp + fn, 1), area=(tp + fp) / max(tp + fn, 1))
            out.append(row)
    return pd.DataFrame(out)


def spread(record: store.CellRecord) -> float:
    """The checkpoint-to-checkpoint spread of one cell (DSC units, 0–1): the sd of successive differences of the logged
    validation DSC against GT over the second half of the stage that logs it, ÷ √2; NaN without it."""
    evals = diagnostic_evals(record)
    late = evals[evals["step"] > evals["step"].max() / 2]["diagnostic_gt_dsc"] / 100
    return float(late.diff().std() / math.sqrt(2)) if len(late) > 2 else math.nan


def diagnostic_evals(record: store.CellRecord) -> pd.DataFrame:
    """The evaluations of one cell's last stage that logs the validation DSC against GT (`diagnostic_gt_dsc`, in %; the
    stage that predicts), by step; empty where none does."""
    log = read_table(record.folder / store.TRAIN_LOG)
    if "diagnostic_gt_dsc" not in log:
        return pd.DataFrame(columns=["step", "diagnostic_gt_dsc"])
    evals = log[(log["event"] == "eval") & log["diagnostic_gt_dsc"].notna()]
    return evals[evals["stage"] == evals["stage"].iloc[-1]].sort_values("step") if len(evals) else evals


def verdict(rule: float, last: float, tolerance: float, higher: bool) -> str:
    """improves / stable / degrades: the move from the rule's stop to the horizon against its tolerance, signed so that
    "improves" is better whichever way the metric points."""
    if math.isnan(rule) or math.isnan(last):
        return "no rule stop" if math.isnan(rule) else "—"
    gain = (last - rule) if higher else (rule - last)
    return "improves" if gain > tolerance else "degrades" if gain < -tolerance else "stable"


def judge(at: pd.DataFrame, metric: str, spread: float, drifts: bool) -> dict:
    """One method's verdict on one metric: at (seed × reading) its values; `spread` the checkpoint-to-checkpoint spread
    (DSC units); `drifts`: its validation loss still fell after the rule's stop. The move from `rule` to `last` (means over
    seeds) against the larger of the spread (GED: GED_TOLERANCE × its value at the rule) and the seed sd of the `rule`
    reading; `moves` holds each seed's move."""
    rule = at["rule"].mean() if "rule" in at else math.nan
    last = at["last"].mean() if "last" in at else math.nan
    seed_sd = at["rule"].std() if "rule" in at and at["rule"].count() > 1 else 0.0
    base = GED_TOLERANCE * rule if metric == "ged" else spread
    tolerance = max(0.0 if math.isnan(base) else base, 0.0 if math.isnan(seed_sd) else seed_sd)
    said = verdict(rule, last, tolerance, higher=metric != "ged")
    cause = {"improves": "the rule stopped early", "degrades": "its own loss leaves GT" if drifts else "it drifts past its loss minimum"}
    close = said in ("improves", "stable", "degrades") and abs(last - rule) <= 2 * tolerance
    moves = (at["last"] - at["rule"]).dropna() if "rule" in at and "last" in at else pd.Series(dtype=float)
    return {
        "seeds": at.shape[0],
        "rule": rule,
        "last": last,
        "diff": last - rule,
        "moves": tuple(moves),  # each seed's last − rule: the verdict judges their mean, so the page shows where they part
        "tolerance": tolerance,
        "seed_sd": seed_sd,
        "verdict": said,
        "cause": cause.get(said, ""),
        "second_seed_due": bool(close and at.shape[0] == 1),  # one seed, a move within twice its tolerance (docs/decisions.md)
    }


def two_run_seconds(stages: dict) -> float:
    """What the two-run design would have cost a cell, from its stages' stop rows (manifest `stages`): per stage, its
    seconds × 5 × the rule's stop / its horizon (a rule run to the stop and a long run 4 × as long, at this run's cost a
    step); NaN where a stage holds no rule stop."""
    parts = [s.get("seconds", math.nan) * 5 * s.get("rule_stop", math.nan) / s["step"] for s in stages.values()]
    return float(sum(parts)) if parts else math.nan


def audit(results: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(values, verdicts, cells): per cell, reading and metric the values (`reading_values`); per GROUP and metric the
    verdict, its tolerance and cause; per cell its setup, spread, the rule's stop and restored step, the lowest validation
    loss's step, the horizon and seconds."""
    records = ResultsFolder.of(results).records
    if not records:
        raise ValueError(f"no finished cell in {results}")
    values = pd.concat([reading_values(cell_readings(r)) for r in records], ignore_index=True)
    cells = []
    for r in records:
        stage = list(r.manifest.get("stages", {}).values())[-1] if r.manifest.get("stages") else {}
        read = r.manifest.get("readings") or {}
        cells.append(
            {
                **r.keys,
                "setup": setup(r.manifest),
                "spread": spread(r),
                "rule_stop": stage.get("rule_stop", stage.get("step") if stage.get("stop") != "fixed" else math.nan),
                "rule_restored": (read.get("rule") or {}).get("step", math.nan),
                "min_val_step": (read.get("min-val-loss") or {}).get("step", math.nan),
                "horizon": stage.get("step", math.nan),
                "primary": own_reading(r),
                "primary_step": (read.get(own_reading(r)) or {}).get("step", math.nan),
                # every stage's own clock (its stop row's seconds), which a resumed cell carries over; the manifest's
                # train_seconds is its last start's alone
                "seconds": sum(s["seconds"] for s in r.manifest["stages"].values()) if r.manifest.get("stages") else math.nan,
                "two_run_seconds": two_run_seconds(r.manifest.get("stages", {})),
            }
        )
    cells = pd.DataFrame(cells)
    rows = []
    for key, part in values.groupby([*GROUP, "metric"], sort=False):
        group, metric = dict(zip(GROUP, key[:4])), key[4]
        mine = cells.merge(pd.DataFrame([group]), on=GROUP)
        at = part.pivot_table(index="seed", columns="reading", values="value")
        drifts = bool((mine["min_val_step"] > mine["rule_restored"]).all())  # the validation loss still fell after the rule's stop
        rows.append({**group, "metric": metric, **judge(at, metric, mine["spread"].mean(), drifts), "mixed": mine["setup"].nunique() > 1})
    return values, pd.DataFrame(rows), cells


def rankings(paper: Study, values: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The methods' DSC ranks under each held reading (rank 1 best; mean over seeds), Kendall's τ between every pair of
    readings over the methods both rank, and every pair of methods whose order a reading reverses against the rule's."""
    dsc = values[(values["metric"] == "dsc") & values["reading"].isin(SHOWN)]
    means = dsc.groupby(["method", "reading"])["value"].mean().unstack()
    ranks = means.rank(ascending=False, method="min")
    lines = []
    for a, b in itertools.combinations([r for r in SHOWN if r in ranks], 2):
        both = ranks[[a, b]].dropna()
        if len(both) > 2:
            tau = kendalltau(both[a], both[b]).statistic
            lines.append(f"τ({a}, {b}) = {tau:.2f} over {len(both)} methods")
    for reading in [r for r in SHOWN if r in means and r != "rule" and "rule" in means]:
        for m, n in itertools.combinations(means.index, 2):
            before, after = means.loc[m, "rule"] - means.loc[n, "rule"], means.loc[m, reading] - means.loc[n, reading]
            if before * after < 0:
                first, second = (m, n) if after > 0 else (n, m)
                lines.append(f"{reading} reverses the rule's order: {display(paper, first)} ahead of {display(paper, second)}")
    return ranks, lines


def test_curves(results: Path) -> pd.DataFrame:
    """Every finished cell's test curve (`test_curve.parquet`) as mean per-case DSC against its reference per step: columns
    GROUP, seed, step, epoch, dsc (an empty pair reads 1, as the long table's DSC)."""
    frames = []
    for r in ResultsFolder.of(results).records:
        if (r.folder / store.TEST_CURVE).is_file():
            c = read_table(r.folder / store.TEST_CURVE)
            both = 2 * c["tp"] + c["fp"] + c["fn"]
            c = c.assign(dsc=np.where(both > 0, 2 * c["tp"] / both.clip(lower=1), 1.0))
            frames.append(c.groupby("step", as_index=False).agg(epoch=("epoch", "first"), dsc=("dsc", "mean")).assign(**r.keys))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*GROUP, "seed", "step", "epoch", "dsc"])


def validation_curves(results: Path) -> pd.DataFrame:
    """Every cell's validation DSC against GT as its training log has it (every evaluation, from the first; the test curve
    starts later and is sparser): columns GROUP, seed, step, dsc (0–1)."""
    frames = [
        e[["step"]].assign(dsc=e["diagnostic_gt_dsc"].astype(float) / 100, **r.keys)
        for r in ResultsFolder.of(results).records
        if len(e := diagnostic_evals(r))
    ]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*GROUP, "seed", "step", "dsc"])


def curves(
    paper: Study,
    data: pd.DataFrame,
    cells: pd.DataFrame | None = None,
    values: pd.DataFrame | None = None,
    by: str = "step",
    validation: pd.DataFrame | None = None,
) -> Figure:
    """One panel per method: its test DSC (`test_curves`, mean over seeds, each seed thin) against `by` (step, log scale, or
    epoch); with `cells` and `values` (`audit`), a grey line where the rule stopped, a dot at the rule's reading and a star
    at the primary reading (each seed's, at its own step and test DSC), and a sampler's GED (`sampler_ged`); with
    `validation` (`validation_curves`, by step), the validation DSC against GT in light grey behind, mean over seeds, so that
    the readings before the test curve's first step sit on a curve too."""
    methods = registry_order(data["method"].unique())
    cols = max(1, min(4, len(methods)))
    rows = max(1, -(-len(methods) // cols))
    fig = Figure(figsize=(max(6.4, 3.2 * cols), 2.6 * rows + 0.8), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax in list(axes.flat)[len(methods) :]:  # the last row's unused panels, as plots.py and stop_audit.py hide them
        ax.set_visible(False)
    for ax, method in zip(axes.flat, methods):
        mine = data[data["method"] == method]
        for _, seed in mine.groupby("seed"):
            ax.plot(seed[by], seed["dsc"] * 100, "-", color="C0", linewidth=0.5, alpha=0.4)
        mean = mine.groupby(by)["dsc"].mean() * 100
        ax.plot(mean.index, mean.values, "-", color="C0", linewidth=1.2)
        if cells is not None and values is not None:
            here = cells[cells["method"] == method]
            for x in here["rule_stop"].dropna():
                ax.axvline(x, color="0.5", linestyle=":", linewidth=1)
            read = values[(values["method"] == method) & (values["metric"] == "dsc")]
            for reading, marker in (("rule", "o"), (here["primary"].iloc[0] if len(here) else "", "*")):
                at = read[read["reading"] == reading]  # each seed's: seeds may read at steps far apart (20 and 820)
                if len(at):
                    ax.plot(
                        at["step"],
                        at["value"] * 100,
                        marker,
                        linestyle="none",
                        color="C3" if marker == "*" else "C1",
                        markersize=7 if marker == "*" else 4,
                    )
            found = entry(paper, method)
            if found is not None and found.group == "field":
                sampler_ged(ax, values[(values["method"] == method) & (values["metric"] == "ged")], here)
        if validation is not None and len(val := validation[validation["method"] == method]):
            # drawn last and kept out of the y autoscale: its first evaluations (DSC near 0 at step 20) would flatten the
            # test curve; its top stays in view (an early peak is what the readings before step 250 sit on)
            bottom, top = ax.get_ylim()
            val = val.groupby("step")["dsc"].mean() * 100
            ax.plot(val.index, val.values, "-", color="0.7", linewidth=0.6, zorder=0, scaley=False)
            ax.set_ylim(bottom, max(top, val.max() + 0.05 * (top - bottom)))
        ax.set_title(display(paper, method), fontsize=9)
        if by == "step":  # 250 to 8,000 steps is little over a decade: label 1, 2.5 and 5 of each; from step 20, the decades
            ax.set_xscale("log")
            low, high = ax.get_xlim()
            ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.5, 5.0) if high < 100 * low else (1.0,)))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1000:g}k" if v >= 1000 else f"{v:g}"))
            ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("epoch of the stage that predicts" if by == "epoch" else by, fontsize=8)
        ax.set_ylabel("test DSC (%)", fontsize=8)
    marks = (
        "\n(dotted: the rule's stop; dot: the rule's reading; star: the primary;\nsamplers: GED at the fixed steps, right axis)"
        if cells is not None
        else ""
    )
    if validation is not None:
        marks += "\nlight grey: validation DSC against GT at every evaluation"
    fig.suptitle(f"Test DSC along each trajectory{marks}\na diagnostic, never a selection", fontsize=8)
    return fig


def due_line(paper: Study, verdicts: pd.DataFrame) -> str:
    """The methods whose verdict rests on one seed with a move within twice its tolerance: the declared evidence runs a
    second seed for them (docs/decisions.md, "Readings along one trajectory")."""
    due = verdicts[verdicts["second_seed_due"]]
    if due.empty:
        return ""
    named = ", ".join(f"{display(paper, m)} ({', '.join(g['metric'])})" for m, g in due.groupby("method", sort=False))
    return f"\nSecond seed due (one seed, a move within twice its tolerance): {named}.\n"


def sampler_ged(ax, ged: pd.DataFrame, here: pd.DataFrame) -> None:
    """A sampler's test GED against its raters (`ged`: its rows of `reading_values`), on a right axis of its panel: at the
    fixed steps (`step-N`, the readings scored with every metric; the test curve holds DSC's counts only), mean over seeds,
    and a star at each seed's primary reading, beside its DSC curve."""
    fixed = ged[ged["reading"].str.startswith("step-")].groupby("step")["value"].mean().sort_index()
    primary = ged[ged["reading"] == (here["primary"].iloc[0] if len(here) else "")]
    if fixed.empty and primary.empty:
        return
    twin = ax.twinx()
    twin.plot(fixed.index, fixed.values, "s-", color="C2", markersize=3, linewidth=0.8)
    if not primary.empty:
        twin.plot(primary["step"], primary["value"], "*", linestyle="none", color="C2", markersize=7)
    twin.set_ylabel("test GED ↓", fontsize=8, color="C2")
    twin.tick_params(axis="y", labelsize=7, colors="C2")


def write(paper: Study, results: Path, command: str) -> list[Path]:
    """trajectory_audit.md, .csv and the test-curve figure in `<results>/stop_audit/`, methods named as `paper` names them."""
    values, verdicts, cells = audit(results)
    out = results / store.STOP_AUDIT
    out.mkdir(parents=True, exist_ok=True)
    write_table(out / CSV, verdicts.drop(columns="moves"))
    written = [out / CSV, *save(curves(paper, test_curves(results), cells, values, validation=validation_curves(results)), out / FIGURE)]
    ranks, lines = rankings(paper, values)
    table = []
    for r in verdicts.itertuples():
        k = SCALE[r.metric]
        num = lambda v, k=k, sign="": "—" if math.isnan(v) else f"{v * k:{sign}.3f}"  # noqa: E731
        sd = num(r.seed_sd) + (" ‡" if r.mixed else "") if r.seeds > 1 else "—"  # one seed has no seed sd
        table.append(
            [
                display(paper, r.method),
                r.metric,
                r.seeds,
                num(r.rule),
                num(r.last),
                num(r.diff, sign="+") + (f" ({', '.join(num(v, sign='+') for v in r.moves)})" if len(r.moves) > 1 else ""),
                num(r.tolerance),
                sd,
                f"**{r.verdict}**" if r.verdict != "stable" else r.verdict,
                r.cause or "—",
            ]
        )
    dsc = (
        values[values["metric"] == "dsc"]
        .groupby(["method", "reading"])
        .agg(
            value=("value", "mean"),
            step=("step", "mean"),
            precision=("precision", "mean"),
            recall=("recall", "mean"),
            area=("area", "mean"),
        )
        .reset_index()
        .sort_values(["method", "step", "reading"], na_position="last")  # each method's readings in step order
    )
    read = [
        [
            display(paper, g.method),
            g.reading,
            f"{g.step:.0f}" if not math.isnan(g.step) else "—",
            f"{g.value * 100:.2f}",
            f"{g.precision:.2f} / {g.recall:.2f} / {g.area:.2f}",
        ]
        for g in dsc.itertuples()
    ]
    stages = [
        [
            display(paper, c.method),
            c.seed,
            c.setup,
            f"{c.horizon:.0f}",
            "—" if math.isnan(c.rule_stop) else f"{c.rule_stop:.0f}",
            "—" if math.isnan(c.rule_restored) else f"{c.rule_restored:.0f}",
            "—" if math.isnan(c.min_val_step) else f"{c.min_val_step:.0f}",
            f"{c.primary} at {c.primary_step:.0f}" if not math.isnan(c.primary_step) else c.primary,
            f"{c.seconds / 3600:.2f}",
            "—" if math.isnan(c.two_run_seconds) else f"{c.two_run_seconds / 3600:.2f}",
        ]
        for c in cells.itertuples()
    ]
    text = "\n".join(
        [
            f"# Stop audit from one run\n\nMade by `{command}`. Each cell trained once to its horizon and was read along the way "
            "(docs/decisions.md, \"Readings along one trajectory\"). A metric's verdict is the move from the rule's stop (`rule`) to "
            "the horizon (`last`): improves, stable or degrades beyond the larger of the checkpoint-to-checkpoint spread and the "
            f"rule reading's seed sd (GED: {GED_TOLERANCE:.0%} of its value); with two seeds or more, each seed's move in brackets. ‡: a seed sd "
            "over seeds trained on other CPUs or precisions.\n",
            markdown_table(["method", "metric", "seeds", "rule", "last", "last − rule", "tolerance", "seed sd", "verdict", "cause"], table),
            due_line(paper, verdicts),
            "\n## Each reading\n",
            "Test DSC, its step (mean over seeds) and the consensus's precision / recall / area.\n",
            markdown_table(["method", "reading", "step", "DSC", "precision / recall / area"], read),
            "\n## Rankings\n",
            markdown_table(["method", *ranks.columns], [[display(paper, m), *(f"{v:.0f}" for v in row)] for m, row in ranks.iterrows()]),
            "",
            *[f"- {line}" for line in lines],
            "\n## Cells\n",
            "Where the rule stopped and what it restored, the lowest validation loss, the primary reading; hours of this "
            "run and of the two-run design it replaces (per stage, a rule run and a long run 4 × its stop, at this run's cost a step).\n",
            markdown_table(
                ["method", "seed", "trained", "horizon", "rule stop", "rule restored", "min val loss", "primary", "hours", "two-run hours"],
                stages,
            ),
            f"\n![test DSC along each trajectory]({FIGURE}.png)\n",
        ]
    )
    (out / MARKDOWN).write_text(text)
    return [out / MARKDOWN, *written]
