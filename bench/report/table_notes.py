"""What a report table says about the cells under it: its run line (budget, seeds per method, whether the cells are a
pipeline check, from each cell's config.json), the flags of rows whose cells predicted empty or full masks or whose
stopping rule an audit did not pass, and the note of how many samples the set metrics read."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bench import store
from bench.evaluate.long_table import select
from bench.report.rows import display, registry_order
from bench.report.stop_logs import setup
from bench.report.table_text import TextTable
from bench.results_folder import ResultsFolder
from bench.study import Study


def degenerate_flags(outcomes: pd.DataFrame | None, dataset: str, raters: str, noise: str) -> dict[str, str]:
    """Method -> its degenerate-prediction flag over seeds ("empty 2/3", "empty 1/3 · full 1/3"), for the methods that have one.

    `outcomes` is `bench.store.training_outcomes` (one row per finished cell, its `flag` "empty", "full" or ""); None or
    empty: no flags (a summary without its cells' manifests).
    """
    if outcomes is None or outcomes.empty:
        return {}
    return method_flags(select(outcomes, dataset=dataset, raters=raters, noise=noise))


def method_flags(cells: pd.DataFrame) -> dict[str, str]:
    """Method -> its degenerate-prediction flag over the given cells (rows with `method` and `flag`), where it has one."""
    out = {}
    for method, mine in cells.groupby("method"):
        counts = mine.loc[mine["flag"] != "", "flag"].value_counts()
        if len(counts):
            out[method] = " · ".join(f"{flag} {n}/{len(mine)}" for flag, n in counts.items())
    return out


SET_METRICS_SHOWN = "GED, GED_u, Dice_match, Dice_max, Dice_soft"


def samples_note(paper: Study, table: pd.DataFrame) -> dict[tuple, tuple[str, set[str]]]:
    """Per (dataset, raters, noise) of a long table: the line under each table with a set metric, and the methods left
    out of its set-metric columns because they were scored at another M than the others (set metrics are compared only
    at one M: a perfect sampler's GED falls as 1/M, docs/methods.md#samples).

    The line states M, that a method with one prediction has the same values at any M, and the perfect sampler's GED at
    that M (the mean `ged_floor` of the group's rows at M).
    """
    sets = table[table["reference"] == "raters"]
    rows = sets[sets["metric"] == "ged"]
    if "n_samples" not in rows:
        return {}
    out = {}
    for group, part in rows.groupby(["dataset", "raters", "noise"], sort=True):
        m = part.groupby("method")["n_samples"].max()
        drawn = m[m > 1]
        common = int(drawn.value_counts().sort_index().idxmax()) if len(drawn) else 1
        apart = set(drawn.index[drawn != common])
        line = (
            f"{SET_METRICS_SHOWN} at M = {common} draws per test image for every method shown (a method with one "
            f"prediction: {common} identical draws, the same values as one)"
        )
        floors = select(sets, metric="ged_floor", n_samples=common)
        floors = floors[(floors["dataset"] == group[0]) & (floors["raters"] == group[1]) & (floors["noise"] == group[2])]
        if len(floors):
            per = floors.groupby("structure")["value"].mean()
            shown = ", ".join(f"{k} {v:.3f}" for k, v in per.items()) if len(per) > 1 else f"{per.iloc[0]:.3f}"
            line += f"; a perfect sampler of the raters scores GED {shown} at this M (GED_u 0)"
        if apart:
            names = ", ".join(f"{display(paper, method)} (M = {int(m[method])})" for method in registry_order(apart))
            line += f". Left out of these columns, scored at another M: {names}"
        out[group] = (line + ".", apart)
    return out


#: The run options that cut a run short (config.json), and the seeds per method below which a value is a pipeline check:
#: one rule for the tables and the reproduction page (bench.reproduce.verdicts.pipeline_reasons reads both from here).
OPTIONS = ("max_steps", "train_size", "test_size")
MIN_SEEDS = 3


def run_records(results: Path | ResultsFolder) -> pd.DataFrame:
    """One row per finished cell of `results`: its keys, budget, reading (`views.own_reading`), how it trained
    (`stop_logs.setup`: device, precision, threads) and `OPTIONS` (None where not set), from config.json and the manifest;
    derived once per opened folder."""
    return ResultsFolder.of(results).derive(cell_rows)


def cell_rows(results: ResultsFolder) -> pd.DataFrame:
    from bench.report.views import own_reading

    rows = []
    for r in ResultsFolder.of(results).records:
        options = r.config.get("options") or {}
        budget = r.config.get("budget", {}).get("name", "")
        rows.append(
            {**r.keys, "budget": budget, "reading": own_reading(r), "setup": setup(r.manifest), **{k: options.get(k) for k in OPTIONS}}
        )
    return pd.DataFrame(rows, columns=[*store.KEYS, "budget", "reading", "setup", *OPTIONS])


def run_line(table: TextTable, cells: pd.DataFrame | None) -> str:
    """ "Run: budget plateau; seeds per method: 3; not a pipeline check": what one table's values rest on (`run_text` of
    its rows' seeds, `TextTable.seeds`)."""
    return run_text(table.seeds, cells)


def run_text(seeds_of: dict[str, int], cells: pd.DataFrame | None) -> str:
    """ "Run: budget plateau; seeds per method: 3; not a pipeline check": what a table's or a figure's values rest on.

    `seeds_of`: row label (or method) -> the seeds behind its values; `cells`: the `run_records` of the dataset × raters
    × noise shown; None or empty: budget and options not recorded. A pipeline check: the quick budget, a run option set,
    or fewer than MIN_SEEDS seeds of a row.
    """
    counts = set(seeds_of.values())
    seeds = str(counts.pop()) if len(counts) == 1 else ", ".join(f"{label} {n}" for label, n in seeds_of.items()) or "–"
    few = [f"{label} {n}" for label, n in seeds_of.items() if n < MIN_SEEDS]
    reasons = [f"fewer than {MIN_SEEDS} seeds ({', '.join(few)})"] if few else []
    if cells is None or cells.empty:
        check = f"pipeline check, not a verdict: {reasons[0]}" if reasons else "pipeline check: not known (no cell records)"
        return f"Run: budget not recorded; seeds per method: {seeds}; {check}"
    budgets = sorted(set(cells["budget"]) - {""})
    options = [
        f"--{k.replace('_', '-')} {', '.join(sorted({str(int(v)) for v in cells[k].dropna()}))}" for k in OPTIONS if cells[k].notna().any()
    ]
    quick = ["budget quick"] if "quick" in budgets else []
    reasons = quick + options + reasons
    check = f"pipeline check, not a verdict: {', '.join(reasons)}" if reasons else "not a pipeline check"
    readings = sorted(set(cells["reading"].dropna()) - {""}) if "reading" in cells else []
    read = f"; reading {', '.join(readings)}" if readings else ""
    # a row's seed sd pools over its seeds: say where they trained on other CPUs or precisions (other kernels, other numbers)
    setups = cells.groupby("method", sort=False)["setup"].agg(lambda v: " / ".join(dict.fromkeys(v))) if "setup" in cells else pd.Series()
    mixed = [", ".join(setups.index[setups == how]) + f" ({how})" for how in dict.fromkeys(setups) if " / " in how]
    mix = f"; seeds trained on other CPUs or precisions: {'; '.join(mixed)}" if mixed else ""
    return f"Run: budget {', '.join(budgets) or 'not recorded'}; seeds per method: {seeds}; {check}{read}{mix}"


def row_flags(outcomes: pd.DataFrame | None, audit: dict | None, dataset: str, raters: str, noise: str) -> dict[str, str]:
    """{method: flag} of a group's rows, put after a method's name: its degenerate predictions (`degenerate_flags` of
    `outcomes`) and its stop audit's verdict where it does not pass (`audit`: `stop_audit.failures`)."""
    flags = degenerate_flags(outcomes, dataset, raters, noise)
    for method, flag in (audit or {}).get((dataset, raters, noise), {}).items():
        flags[method] = " · ".join(f for f in (flags.get(method), flag) if f)
    return flags
