"""The report's tables in the paper's layout: columns from the metric descriptors, rows from bench/report/rows.py, Markdown and LaTeX.

A `TableCell` is one cell of a rendered table (a training run is a `bench.store.Cell`). File names
carry the dataset, the rater setting, the noise level and, where it matters, the reference
(`<d>_<raters>_<noise>_<ref>`); `group_tables` decides which tables a group of the summary gets
(see bench/report/render.py for the list). Under its title each table states what it rests on (`run_line`): the budget,
the seeds per method and whether its cells are a pipeline check, so that the caveat travels with a pasted table.
Bold rule: a best mean is bold only where the seed-aware test resolves it (`mark_best`): the row with the best mean of a
column (compared at the printed precision) against every other competing row of the column with a value, each by
`bench.report.stats.compare_models` on the per-case rows (seeds × cases), Holm-adjusted over those comparisons; bold
where every comparison favours it at p_holm < 0.05. Otherwise no row is bold, and the best and every row it is not
resolved from carry the shared mark `SHARED` ("≈", footnote `SHARED_NOTE`). Two rows equal as printed are never
resolved. A best on one seed (a mean without a std) is never bold nor marked, and a table built without its per-case
rows (`cases`) has no bold at all: nothing was tested. Over the method rows only: Average and Oracle never compete
(Tables I-III); in the ablation table every row competes. A method whose predictions were degenerate in any seed (an
empty or full mask on most validation cases, manifest.json `degenerate.flag`) is marked after its name (`[empty 2/3]`)
and never competes: its mean measures nothing.

The set-metrics table (`set_metrics_table`, `set_metrics_<d>_<raters>_<noise>`) shows GED, GED_u, Dice_match, Dice_max,
Dice_soft and Dice_personal against the rater set, each header with the M it was scored at, wherever a method with
samples or per-rater outputs ran.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from bench.evaluate import metrics
from bench.evaluate.long_table import ordered_structures, select
from bench.evaluate.scoring import HEADLINE
from bench.report import stats
from bench.report.rows import AVERAGE, ablation_methods, display, main_methods, table_of
from bench.report.table_notes import (
    row_flags,
    run_line,
    samples_note,
)
from bench.report.table_text import SHARED_NOTE, TableCell, TextColumn, TextTable, latex_text, to_latex, to_markdown
from bench.study import Study


def column(metric: str, structure: str, named: bool = False) -> TextColumn:
    """A table column from the metric's descriptor (bench/evaluate/metrics.py); `named` puts the structure in the header."""
    m = metrics.get(metric)
    shown = structure if named else None
    return TextColumn(structure, metric, m.header(shown), m.header(shown, latex=True), m.scale, m.digits, m.higher_is_better)


def table_columns(table: str, structure: str, named: bool = False) -> list[TextColumn]:
    """The columns of one kind of table ("table1", "table2", "table3"), in the metrics' registration order."""
    return [column(m.name, structure, named) for m in metrics.in_table(table)]


def has_gt(dataset: str) -> bool:
    from datasets import DATASETS

    return dataset not in DATASETS or DATASETS[dataset].reference == "gt"


def soft_metrics(dataset: str) -> bool:
    from datasets import DATASETS

    return dataset in DATASETS and DATASETS[dataset].soft_metrics


def build_table(
    paper: Study,
    summary: pd.DataFrame,
    columns: list[TextColumn],
    methods: list[str],
    title: str,
    label_header: str,
    table_name: str,
    compete_all: bool,
    flags: dict[str, str] | None = None,
    cases: pd.DataFrame | None = None,
) -> TextTable:
    """Rows = [Average] + methods + [Oracle] (those present; the Oracle and the labels are `paper`'s), cells mean ± std, a
    resolved best bolded (see module doc).

    `flags` maps a method to its degenerate-prediction flag (`degenerate_flags`); a flagged row is never bold. `cases`:
    the per-case long rows (bench.evaluate.long_table.COLUMNS) of the summary's group, which the bold's test reads; a
    column's rows are those of its structure, metric and the summary's reference for it. None: nothing is bold.
    """
    flags, oracle = flags or {}, paper.oracle
    lookup = {(r["method"], r["structure"], r["metric"]): (r["mean"], r["std"]) for r in summary.to_dict("records")}
    has = {m for m, s, k in lookup if (s, k) in {(c.structure, c.metric) for c in columns}}
    order = (
        ([AVERAGE] if AVERAGE in has else [])
        + [m for m in methods if m in has and m not in (AVERAGE, oracle)]
        + ([oracle] if oracle in has else [])
    )
    table = TextTable(title, label_header, columns)
    seeds = summary[summary["method"] != AVERAGE].groupby("method")["n_seeds"].max() if "n_seeds" in summary else pd.Series(dtype=int)
    for method in order:
        table.methods.append(method)
        table.labels.append(display(paper, method, table_name))
        table.italic.append(method in (AVERAGE, oracle))
        table.flags.append(flags.get(method, ""))
        table.rows.append([table_cell(lookup.get((method, c.structure, c.metric)), c, method == AVERAGE) for c in columns])
        if method in seeds:
            table.seeds[table.labels[-1]] = int(seeds[method])
    if order and order[0] == AVERAGE and len(order) > 1:
        table.rule_before.add(1)
    if order and order[-1] == oracle and len(order) > 1:
        table.rule_before.add(len(order) - 1)
    for i, method in enumerate(order):
        if table_of(paper, method) == "ablation-text" and not any(table_of(paper, m) == "ablation-text" for m in order[:i]):
            table.rule_before.add(i)
    competing = [i for i, m in enumerate(order) if (compete_all or m not in (AVERAGE, oracle)) and not flags.get(m)]
    for j, column in enumerate(columns):
        values = [lookup.get((order[i], column.structure, column.metric)) for i in competing]
        mark_best(table, j, column, competing, values, column_cases(summary, cases, column), [order[i] for i in competing])
    if any(c.shared for row in table.rows for c in row):
        table.notes.append(SHARED_NOTE + ".")
    return table


def column_cases(summary: pd.DataFrame, cases: pd.DataFrame | None, column: TextColumn) -> pd.DataFrame | None:
    """The per-case rows behind one column: its structure and metric, against the reference the summary's method rows
    of that column have (the headline reference, the rater set or the rater mean); None without `cases`."""
    if cases is None:
        return None
    rows = select(cases, structure=column.structure, metric=column.metric)
    if "reference" in summary and "reference" in cases:
        shown = summary[(summary["structure"] == column.structure) & (summary["metric"] == column.metric) & (summary["method"] != AVERAGE)]
        rows = rows[rows["reference"].isin(set(shown["reference"]))]
    return rows


def table_cell(value: tuple[float, float] | None, column: TextColumn, is_average: bool) -> TableCell:
    if value is None or pd.isna(value[0]):
        return TableCell("N/A" if is_average else "–")  # the paper writes N/A where Average has no value
    mean, std = value
    std_text = None if pd.isna(std) else f"{std * column.scale:.{column.digits}f}"
    return TableCell(f"{mean * column.scale:.{column.digits}f}", std_text)


def mark_best(
    table: TextTable,
    j: int,
    column: TextColumn,
    rows: list[int],
    values: list,
    cases: pd.DataFrame | None = None,
    names: list[str] | None = None,
) -> None:
    """Bold the best of column j where the seed-aware test resolves it, else mark the unresolved leaders (module doc).

    rows: the competing row indices; values: their (mean, std) or None; cases: the column's per-case rows
    (`column_cases`); names: the method of each competing row. The best is the row with the best mean as printed (the
    best unrounded mean among rows equal as printed); it is tested against every other competing row with a value.
    Nothing is marked where the best has one seed (no std), where fewer than two rows have a value, or without `cases`.
    """
    found = {i: v for i, v in zip(rows, values) if v is not None and not pd.isna(v[0])}
    if len(found) < 2 or cases is None or names is None:
        return
    name = dict(zip(rows, names))
    sign = 1 if column.higher_is_better else -1
    rounded = {i: sign * round(v[0] * column.scale, column.digits) for i, v in found.items()}
    leaders = [i for i, value in rounded.items() if value == max(rounded.values())]
    if any(pd.isna(found[i][1]) for i in leaders):  # a best on one seed: nothing can be resolved
        return
    top = max(leaders, key=lambda i: sign * found[i][0])
    tests = stats.leader_tests(cases, name[top], [name[i] for i in found if i != top], column.higher_is_better)
    apart = [i for i in found if i != top and (i in leaders or not stats.resolved(tests.get(name[i])))]
    if not apart:
        table.rows[top][j].bold = True
        return
    for i in [top, *apart]:
        table.rows[i][j].shared = True


def group_title(kind: str, group: tuple, structure: str | None = None) -> str:
    dataset, raters, noise, reference = group
    where = f", {structure}" if structure else ""
    return f"{kind}: {dataset} (raters {raters}, noise {noise}; against {reference}{where}); mean ± std over seeds"


def slug(*parts) -> str:
    """File-name part: anything outside [A-Za-z0-9.-] replaced by '-'."""
    return "_".join(re.sub(r"[^A-Za-z0-9.-]+", "-", str(p)) for p in parts)


def group_tables(
    paper: Study,
    part: pd.DataFrame,
    group: tuple,
    flags: dict[str, str] | None = None,
    cases: pd.DataFrame | None = None,
    extra: tuple[str, ...] = (),
) -> list[tuple[str, TextTable]]:
    """(file stem, table) for one dataset × raters × noise × headline reference of the summary.

    `part` holds that reference's rows (the Average row among them where it is gt: the raters' DSC against GT, which
    no cell records against the majority or STAPLE), and the rows against the rater set
    (GED, Dice_match) and the rater mean (soft DSC / IoU), which do not depend on the headline reference.
    Datasets without ground truth (real raters: LIDC, RIGA) get Table II's columns, DSC, bAHD, GED
    and Dice_match; a dataset scored with soft metrics (RIGA) gets Table III, soft DSC / IoU per structure. `flags`:
    `degenerate_flags` of the group; `cases`: the group's per-case long rows, for the bold's test (`build_table`).
    `extra`: hard metrics (`bench report --metrics`) added as columns of Table I / II after its own, where scored.
    """
    dataset, raters, noise, reference = group
    out = []
    pairs = set(zip(part["structure"], part["metric"]))
    methods_here = set(part["method"])
    main = main_methods(paper, methods_here)
    base = slug(dataset, raters, noise, reference)
    real = not has_gt(dataset)
    if main or paper.oracle in methods_here:
        for structure in ordered_structures({s for s, k in pairs if k in ("dsc", "bahd")}):
            columns = table_columns("table2" if real else "table1", structure)
            columns += [column(k, structure) for k in extra if (structure, k) in pairs and k not in {c.metric for c in columns}]
            kind = "DSC (%) ↑, bAHD ↓, GED ↓ and Dice_match (%) ↑" if real else "DSC (%) ↑ and bAHD ↓"
            kind += "".join(f", {c.markdown}" for c in columns if c.metric in extra)
            title = group_title(kind, group, structure)
            table = build_table(paper, part, columns, main, title, "Methods", "main", compete_all=False, flags=flags, cases=cases)
            out.append((f"{'table2' if real else 'table1'}_{base}_{slug(structure)}", table))
        soft = [
            c for s in ordered_structures({s for s, _ in pairs}) for c in table_columns("table3", s, named=True) if (s, c.metric) in pairs
        ]
        if soft and soft_metrics(dataset):
            title = group_title("soft DSC and soft IoU (%) ↑", (dataset, raters, noise, "the rater mean"))
            out.append(
                (
                    f"table3_{slug(dataset, raters, noise)}",
                    build_table(paper, part, soft, main, title, "Methods", "main", compete_all=False, flags=flags, cases=cases),
                )
            )
    ablation = ablation_methods(paper, methods_here)
    if any(m != paper.reference_method for m in ablation):
        rows = part[part["method"].isin(ablation)]
        row_pairs = set(zip(rows["structure"], rows["metric"]))
        ablation_metrics = [m.name for m in metrics.in_table("ablation")]  # per structure the last it has: soft DSC on RIGA, else DSC
        columns = [
            column(next(k for k in reversed(ablation_metrics) if (s, k) in row_pairs), s, named=True)
            for s in ordered_structures({s for s, k in row_pairs if k in ablation_metrics})
        ]
        title = group_title("ablation, DSC (%) ↑", group)
        table = build_table(paper, rows, columns, ablation, title, "Variant", "ablation", compete_all=True, flags=flags, cases=cases)
        out.append((f"table4_{base}", table))
    return out


def write_tables(
    paper: Study,
    summary: pd.DataFrame,
    out_dir: Path,
    note: str = "",
    outcomes: pd.DataFrame | None = None,
    samples: dict[tuple, tuple[str, set[str]]] | None = None,
    audit: dict[tuple, dict[str, str]] | None = None,
    cells: pd.DataFrame | None = None,
    cases: pd.DataFrame | None = None,
    extra: tuple[str, ...] = (),
) -> list[Path]:
    """Every table of the summary as Markdown and LaTeX, per headline reference, and the set-metrics table of each group
    where a method with samples or per-rater outputs ran (`set_metrics_table`); `note` (e.g. "quick stand-in: …") heads
    each file.

    `outcomes` (`bench.store.training_outcomes` of the same results folder) marks the degenerate rows (`degenerate_flags`);
    `samples` (`samples_note` of the long table) goes under each table with a set metric, and its methods at another M
    are left out of the set-metric columns. `audit` (`stop_audit.failures`) flags the methods whose stop a `plateau` folder's audit does not pass.
    `cells` (`run_records` of the same results folder) gives each table's `run_line`. `cases`: the long table
    (metrics.parquet) of the same results, which the bold's test reads (`mark_best`) and the set-metrics table needs;
    None: no bold and no set-metrics table. `extra`: hard metrics added as columns of Tables I and II (`group_tables`).
    """
    written, markdown = [], []

    def write(stem: str, table: TextTable) -> None:
        md, tex = to_markdown(table), to_latex(table)
        if note:
            md, tex = f"> {note}\n\n{md}", f"% {note}\n{tex}"
        (out_dir / f"{stem}.md").write_text(md)
        (out_dir / f"{stem}.tex").write_text(tex)
        written.extend([out_dir / f"{stem}.md", out_dir / f"{stem}.tex"])
        markdown.append(md)

    by_group = {} if cases is None else dict(tuple(cases.groupby(["dataset", "raters", "noise"], sort=False)))
    for (dataset, raters, noise), part in summary.groupby(["dataset", "raters", "noise"], sort=True):
        here = None if cells is None else select(cells, dataset=dataset, raters=raters, noise=noise)
        group_cases = None if cases is None else by_group.get((dataset, raters, noise), cases.iloc[:0])
        flags = row_flags(outcomes, audit, dataset, raters, noise)
        line, apart = (samples or {}).get((dataset, raters, noise), ("", set()))
        set_names = [m.name for m in metrics.of_kind("set")]
        part = part[~(part["method"].isin(apart) & part["metric"].isin(set_names))]  # compared only at one M
        shared = part[part["reference"].isin(["raters", "rater-mean"]) & (part["method"] != AVERAGE)]
        for reference in [r for r in HEADLINE if r in set(part.loc[part["method"] != AVERAGE, "reference"])]:
            rows = pd.concat([part[part["reference"] == reference], shared])  # the Average row only where its reference (gt) is
            for stem, table in group_tables(paper, rows, (dataset, raters, noise, reference), flags, group_cases, extra):
                if (out_dir / f"{stem}.md") in written:  # Table III does not depend on the headline reference
                    continue
                if line and any(metrics.get(c.metric).kind == "set" for c in table.columns if c.metric in metrics.METRICS):
                    table.notes.append(line)
                table.run = run_line(table, here)
                write(stem, table)
        if group_cases is not None:
            table = set_metrics_table(paper, summary, group_cases, dataset, raters, noise, flags, here)
            if table is not None:
                write(f"set_metrics_{slug(dataset, raters, noise)}", table)
    if markdown:
        (out_dir / "tables.md").write_text("\n".join(markdown))
        written.append(out_dir / "tables.md")
    return written


def default_reference(dataset: str) -> str:
    return "gt" if has_gt(dataset) else "majority"


#: The set-metrics table's columns, in this order (bench/evaluate/metrics.py describes each).
SET_TABLE = ("ged", "ged_unbiased", "dice_match", "dice_max", "dice_soft", "dice_personal")


def set_metrics_table(
    paper: Study,
    summary: pd.DataFrame,
    cases: pd.DataFrame,
    dataset: str,
    raters: str,
    noise: str,
    flags: dict[str, str] | None = None,
    cells: pd.DataFrame | None = None,
) -> TextTable | None:
    """The field's table of one dataset × raters × noise: `SET_TABLE` against the rater set, per structure, mean ± std over
    seeds, each header with the M its values were scored at; under it the samples line (`samples_note`: M and the
    perfect sampler's GED floor) and the run line (`run_text`), bold only on a resolved best (`mark_best`).

    summary: `bench.evaluate.long_table.summarise`'s rows; cases: the long rows (with `n_samples`) of the same results.
    None where no method of the group scored more than one segmentation (no samples, no per-rater outputs): its set
    metrics would repeat its one prediction's Dice. Methods scored at another M than the others are left out of the
    sample columns (`samples_note`); Dice_personal, which scores each rater's own output, keeps them.
    """
    where = (cases["dataset"] == dataset) & (cases["raters"] == raters) & (cases["noise"] == noise) & (cases["reference"] == "raters")
    rows = cases[where]
    if "n_samples" not in rows or not (rows.loc[rows["metric"].isin(SET_TABLE), "n_samples"] > 1).any():
        return None
    line, apart = samples_note(paper, rows).get((dataset, raters, noise), ("", set()))
    drawn = [k for k in SET_TABLE if metrics.get(k).outputs == "samples"]  # compared at one M; Dice_personal scores own outputs
    rows = rows[rows["metric"].isin(SET_TABLE) & ~(rows["method"].isin(apart) & rows["metric"].isin(drawn))]
    part = summary[
        (summary["dataset"] == dataset)
        & (summary["raters"] == raters)
        & (summary["noise"] == noise)
        & (summary["reference"] == "raters")
        & summary["metric"].isin(SET_TABLE)
    ]
    part = part[~(part["method"].isin(apart) & part["metric"].isin(drawn))]
    pairs = set(zip(part["structure"], part["metric"]))
    structures = ordered_structures({s for s, _ in pairs})
    columns = []
    for structure in structures:
        for name in [k for k in SET_TABLE if (structure, k) in pairs]:
            m = select(rows, structure=structure, metric=name)["n_samples"]
            base = column(name, structure, named=len(structures) > 1)
            at = (
                f"M = {' or '.join(str(int(v)) for v in sorted(m.unique()))}"
                if metrics.get(name).outputs == "own"
                else (f"M = {int(m.max())}" if len(m) else "M –")
            )  # the samples' columns: one M (`apart`), one prediction counts as M copies
            columns.append(
                TextColumn(
                    structure,
                    name,
                    f"{base.markdown} ({at})",
                    f"{base.latex} ({latex_text(at)})",
                    base.scale,
                    base.digits,
                    base.higher_is_better,
                )
            )
    methods_here = main_methods(paper, set(part["method"]))
    if not columns or not methods_here:
        return None
    title = group_title("set metrics against the rater set (GED ↓, Dice (%) ↑)", (dataset, raters, noise, "the rater set"))
    table = build_table(paper, part, columns, methods_here, title, "Methods", "main", compete_all=False, flags=flags, cases=rows)
    if line:
        table.notes.append(line)
    table.notes.append(
        "Dice_personal scores each rater's own output against that rater (M = R where a method has per-rater "
        "outputs); a method with one prediction offers it to every rater (M = 1)."
    )
    table.run = run_line(table, cells)
    return table
