"""The report's tables in the paper's layout: columns from the metric descriptors, rows from bench/report/rows.py, Markdown and LaTeX.

A `TableCell` is one cell of a rendered table (a training run is a `bench.store.Cell`). File names
carry the dataset, the rater setting, the noise level and, where it matters, the reference
(`<d>_<raters>_<noise>_<ref>`); `group_tables` decides which tables a group of the summary gets
(see bench/report/render.py for the list). Under its title each table states what it rests on (`run_line`): the budget,
the seeds per method and whether its cells are a pipeline check, so that the caveat travels with a pasted table.
Bold rule (as the paper): the best mean per column, compared
at the printed precision so that equal-looking values are bolded alike, over the method rows only;
Average and Oracle are never bold (Tables I-III); in the ablation table every row competes. A best on one seed (a mean
without a std) is never bold, and a column whose best has one seed has no bold at all. A method whose predictions
were degenerate in any seed (an empty or full mask on most validation cases, manifest.json `degenerate.flag`) is marked
after its name (`[empty 2/3]`) and never bold: its mean measures nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from bench import store
from bench.evaluate import metrics
from bench.evaluate.long_table import ordered_structures
from bench.evaluate.scoring import HEADLINE
from bench.report.rows import AVERAGE, ablation_methods, display, main_methods, oracle, reference_method, registry_order, table_of


@dataclass(frozen=True)
class Column:
    structure: str
    metric: str
    markdown: str  # header text
    latex: str
    scale: float  # 100 for fractions shown in %
    digits: int
    higher_is_better: bool


@dataclass
class TableCell:
    text: str  # mean, or "N/A" / "–" when missing
    std: str | None = None
    bold: bool = False


@dataclass
class Table:
    title: str
    label_header: str
    columns: list[Column]
    labels: list[str] = field(default_factory=list)
    rows: list[list[TableCell]] = field(default_factory=list)
    italic: list[bool] = field(default_factory=list)  # Average and Oracle, as \emph in the paper
    rule_before: set[int] = field(default_factory=set)  # row indices preceded by a light rule
    flags: list[str] = field(default_factory=list)  # per row: "" or the degenerate-prediction flag ("empty 2/3")
    notes: list[str] = field(default_factory=list)  # lines under the table (how many samples its set metrics scored)
    seeds: dict[str, int] = field(default_factory=dict)  # row label -> seeds behind its means (the summary's n_seeds)
    run: str = ""  # under the title: budget, seeds per method, pipeline-check status (`run_line`)


#: The note under a table with a flagged row.
FLAG_NOTE = "[empty k/n], [full k/n]: in k of n seeds the method predicted an empty (full) mask on most validation cases where the raters' majority did not; its mean measures nothing and is never bold. [stop audit: fails]: trained longer (bench audit-stops) a test metric moved by more than its seed sd, so this row is not the method at its best and is never bold"  # fmt: skip


def column(metric: str, structure: str, named: bool = False) -> Column:
    """A table column from the metric's descriptor (bench/evaluate/metrics.py); `named` puts the structure in the header."""
    m = metrics.get(metric)
    shown = structure if named else None
    return Column(structure, metric, m.header(shown), m.header(shown, latex=True), m.scale, m.digits, m.higher_is_better)


def table_columns(table: str, structure: str, named: bool = False) -> list[Column]:
    """The columns of one kind of table ("table1", "table2", "table3"), in the metrics' registration order."""
    return [column(m.name, structure, named) for m in metrics.in_table(table)]


def has_gt(dataset: str) -> bool:
    from datasets import DATASETS

    return dataset not in DATASETS or DATASETS[dataset].reference == "gt"


def soft_metrics(dataset: str) -> bool:
    from datasets import DATASETS

    return dataset in DATASETS and DATASETS[dataset].soft_metrics


def build_table(
    summary: pd.DataFrame,
    columns: list[Column],
    methods: list[str],
    title: str,
    label_header: str,
    table_name: str,
    compete_all: bool,
    flags: dict[str, str] | None = None,
) -> Table:
    """Rows = [Average] + methods + [Oracle] (those present), cells mean ± std, the best bolded (see module doc).

    `flags` maps a method to its degenerate-prediction flag (`degenerate_flags`); a flagged row is never bold.
    """
    flags = flags or {}
    lookup = {(r["method"], r["structure"], r["metric"]): (r["mean"], r["std"]) for r in summary.to_dict("records")}
    has = {m for m, s, k in lookup if (s, k) in {(c.structure, c.metric) for c in columns}}
    order = ([AVERAGE] if AVERAGE in has else []) + [m for m in methods if m in has] + ([oracle()] if oracle() in has else [])
    table = Table(title, label_header, columns)
    seeds = summary[summary["method"] != AVERAGE].groupby("method")["n_seeds"].max() if "n_seeds" in summary else pd.Series(dtype=int)
    for method in order:
        table.labels.append(display(method, table_name))
        table.italic.append(method in (AVERAGE, oracle()))
        table.flags.append(flags.get(method, ""))
        table.rows.append([table_cell(lookup.get((method, c.structure, c.metric)), c, method == AVERAGE) for c in columns])
        if method in seeds:
            table.seeds[table.labels[-1]] = int(seeds[method])
    if order and order[0] == AVERAGE and len(order) > 1:
        table.rule_before.add(1)
    if order and order[-1] == oracle() and len(order) > 1:
        table.rule_before.add(len(order) - 1)
    for i, method in enumerate(order):
        if table_of(method) == "ablation-text" and not any(table_of(m) == "ablation-text" for m in order[:i]):
            table.rule_before.add(i)
    competing = [i for i, m in enumerate(order) if (compete_all or m not in (AVERAGE, oracle())) and not flags.get(m)]
    for j, column in enumerate(columns):
        mark_best(table, j, column, competing, [lookup.get((order[i], column.structure, column.metric)) for i in competing])
    return table


def table_cell(value: tuple[float, float] | None, column: Column, is_average: bool) -> TableCell:
    if value is None or pd.isna(value[0]):
        return TableCell("N/A" if is_average else "–")  # the paper writes N/A where Average has no value
    mean, std = value
    std_text = None if pd.isna(std) else f"{std * column.scale:.{column.digits}f}"
    return TableCell(f"{mean * column.scale:.{column.digits}f}", std_text)


def mark_best(table: Table, j: int, column: Column, rows: list[int], values: list) -> None:
    """Bold every competing row whose mean, rounded as printed, equals the best rounded mean of column j and has a std
    (two or more seeds): a best on one seed is never bold, nor is a row that only ties with it."""
    found = {i: v for i, v in zip(rows, values) if v is not None and not pd.isna(v[0])}
    rounded = {i: round(v[0] * column.scale, column.digits) for i, v in found.items()}
    if not rounded:
        return
    best = max(rounded.values()) if column.higher_is_better else min(rounded.values())
    leaders = [i for i, value in rounded.items() if value == best]
    if all(not pd.isna(found[i][1]) for i in leaders):
        for i in leaders:
            table.rows[i][j].bold = True


def to_markdown(table: Table) -> str:
    lines = [
        f"### {table.title}",
        "",
        *([table.run, ""] if table.run else []),
        "| " + " | ".join([table.label_header, *(c.markdown for c in table.columns)]) + " |",
    ]
    lines.append("|:--" + "|--:" * len(table.columns) + "|")
    for label, row, italic, flag in zip(table.labels, table.rows, table.italic, flagged(table)):
        texts = [markdown_cell(c) for c in row]
        label = (f"*{label}*" if italic else label) + (f" [{flag}]" if flag else "")
        lines.append("| " + " | ".join([label, *texts]) + " |")
    if any(table.flags):
        lines += ["", FLAG_NOTE + "."]
    lines += [line for note in table.notes for line in ("", note)]
    return "\n".join(lines) + "\n"


def flagged(table: Table) -> list[str]:
    """Each row's flag ("" where none; a table built without flags has none)."""
    return table.flags or [""] * len(table.labels)


def markdown_cell(c: TableCell) -> str:
    text = c.text if c.std is None else f"{c.text} ± {c.std}"
    return f"**{text}**" if c.bold else text


def to_latex(table: Table) -> str:
    """A booktabs tabular (\\input it inside a table environment); the caption is the leading comment."""
    lines = [
        f"% {latex_text(table.title)}",
        *([f"% {latex_text(table.run)}"] if table.run else []),
        r"\begin{tabular}{l" + "c" * len(table.columns) + "}",
        r"\toprule",
        " & ".join([latex_text(table.label_header), *(c.latex for c in table.columns)]) + r" \\",
        r"\midrule",
    ]
    for i, (label, row, italic, flag) in enumerate(zip(table.labels, table.rows, table.italic, flagged(table))):
        if i in table.rule_before:
            lines.append(r"\midrule")
        label = latex_text(label)
        label = (rf"\emph{{{label}}}" if italic else label) + (f" [{latex_text(flag)}]" if flag else "")
        lines.append(" & ".join([label, *(latex_cell(c) for c in row)]) + r" \\")
    lines.append(r"\bottomrule")
    if any(table.flags):
        lines.append(rf"\multicolumn{{{len(table.columns) + 1}}}{{p{{0.9\linewidth}}}}{{\footnotesize {latex_text(FLAG_NOTE)}.}} \\")
    for note in [n for n in (table.run, *table.notes) if n]:
        lines.append(rf"\multicolumn{{{len(table.columns) + 1}}}{{p{{0.9\linewidth}}}}{{\footnotesize {latex_text(note)}}} \\")
    lines.append(r"\end{tabular}")
    return "\n".join(lines) + "\n"


def latex_cell(c: TableCell) -> str:
    def b(text: str) -> str:
        return rf"\textbf{{{text}}}" if c.bold else text

    text = latex_text(c.text)
    return b(text) if c.std is None else rf"{b(text)} $\pm$ {b(c.std)}"  # bold like the paper: mean and std


LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\~{}", "^": r"\^{}"}  # fmt: skip


LATEX_UNICODE = {"†": r"$\dagger$", "‡": r"$\ddagger$", "→": r"$\rightarrow$", "±": r"$\pm$", "↑": r"$\uparrow$", "↓": r"$\downarrow$", "–": "--", "×": r"$\times$"}  # fmt: skip


def latex_text(text: str) -> str:
    """Escape TeX specials and map the few Unicode symbols the tables use to math-mode commands."""
    return "".join(LATEX_UNICODE.get(ch, LATEX_SPECIAL.get(ch, ch)) for ch in str(text))


def group_title(kind: str, group: tuple, structure: str | None = None) -> str:
    dataset, raters, noise, reference = group
    where = f", {structure}" if structure else ""
    return f"{kind}: {dataset} (raters {raters}, noise {noise}; against {reference}{where}); mean ± std over seeds"


def slug(*parts) -> str:
    """File-name part: anything outside [A-Za-z0-9.-] replaced by '-'."""
    return "_".join(re.sub(r"[^A-Za-z0-9.-]+", "-", str(p)) for p in parts)


def degenerate_flags(outcomes: pd.DataFrame | None, dataset: str, raters: str, noise: str) -> dict[str, str]:
    """Method -> its degenerate-prediction flag over seeds ("empty 2/3", "empty 1/3 · full 1/3"), for the methods that have one.

    `outcomes` is `bench.store.training_outcomes` (one row per finished cell, its `flag` "empty", "full" or ""); None or
    empty: no flags (a summary without its cells' manifests).
    """
    if outcomes is None or outcomes.empty:
        return {}
    part = outcomes[(outcomes["dataset"] == dataset) & (outcomes["raters"] == raters) & (outcomes["noise"] == noise)]
    out = {}
    for method, cells in part.groupby("method"):
        counts = cells.loc[cells["flag"] != "", "flag"].value_counts()
        if len(counts):
            out[method] = " · ".join(f"{flag} {n}/{len(cells)}" for flag, n in counts.items())
    return out


def group_tables(part: pd.DataFrame, group: tuple, flags: dict[str, str] | None = None) -> list[tuple[str, Table]]:
    """(file stem, table) for one dataset × raters × noise × headline reference of the summary.

    `part` holds that reference's rows, the Average rows, and the rows against the rater set
    (GED, Dice_match) and the rater mean (soft DSC / IoU), which do not depend on the headline reference.
    Datasets without ground truth (real raters: LIDC, RIGA) get Table II's columns, DSC, bAHD, GED
    and Dice_match; a dataset scored with soft metrics (RIGA) gets Table III, soft DSC / IoU per structure. `flags`:
    `degenerate_flags` of the group.
    """
    dataset, raters, noise, reference = group
    out = []
    pairs = set(zip(part["structure"], part["metric"]))
    methods_here = set(part["method"])
    main = main_methods(methods_here)
    base = slug(dataset, raters, noise, reference)
    real = not has_gt(dataset)
    if main or oracle() in methods_here:
        for structure in ordered_structures({s for s, k in pairs if k in ("dsc", "bahd")}):
            columns = table_columns("table2" if real else "table1", structure)
            kind = "DSC (%) ↑, bAHD ↓, GED ↓ and Dice_match (%) ↑" if real else "DSC (%) ↑ and bAHD ↓"
            table = build_table(part, columns, main, group_title(kind, group, structure), "Methods", "main", compete_all=False,
                                flags=flags)  # fmt: skip
            out.append((f"{'table2' if real else 'table1'}_{base}_{slug(structure)}", table))
        soft = [
            c for s in ordered_structures({s for s, _ in pairs}) for c in table_columns("table3", s, named=True) if (s, c.metric) in pairs
        ]
        if soft and soft_metrics(dataset):
            title = group_title("soft DSC and soft IoU (%) ↑", (dataset, raters, noise, "the rater mean"))
            out.append(
                (
                    f"table3_{slug(dataset, raters, noise)}",
                    build_table(part, soft, main, title, "Methods", "main", compete_all=False, flags=flags),
                )
            )
    ablation = ablation_methods(methods_here)
    if any(m != reference_method() for m in ablation):
        rows = part[part["method"].isin(ablation)]
        row_pairs = set(zip(rows["structure"], rows["metric"]))
        ablation_metrics = [m.name for m in metrics.in_table("ablation")]  # per structure the last it has: soft DSC on RIGA, else DSC
        columns = [
            column(next(k for k in reversed(ablation_metrics) if (s, k) in row_pairs), s, named=True)
            for s in ordered_structures({s for s, k in row_pairs if k in ablation_metrics})
        ]
        title = group_title("ablation, DSC (%) ↑", group)
        out.append((f"table4_{base}", build_table(rows, columns, ablation, title, "Variant", "ablation", compete_all=True, flags=flags)))
    return out


SET_METRICS_SHOWN = "GED, GED_u, Dice_match, Dice_max, Dice_soft"


def samples_note(table: pd.DataFrame) -> dict[tuple, tuple[str, set[str]]]:
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
        line = (f"{SET_METRICS_SHOWN} at M = {common} draws per test image for every method shown (a method with one "
                f"prediction: {common} identical draws, the same values as one)")  # fmt: skip
        floors = sets[(sets["metric"] == "ged_floor") & (sets["n_samples"] == common)]
        floors = floors[(floors["dataset"] == group[0]) & (floors["raters"] == group[1]) & (floors["noise"] == group[2])]
        if len(floors):
            per = floors.groupby("structure")["value"].mean()
            shown = ", ".join(f"{k} {v:.3f}" for k, v in per.items()) if len(per) > 1 else f"{per.iloc[0]:.3f}"
            line += f"; a perfect sampler of the raters scores GED {shown} at this M (GED_u 0)"
        if apart:
            names = ", ".join(f"{display(method)} (M = {int(m[method])})" for method in registry_order(apart))
            line += f". Left out of these columns, scored at another M: {names}"
        out[group] = (line + ".", apart)
    return out


#: The run options that cut a run short (config.json), and the seeds per method below which a value is a pipeline check:
#: one rule for the tables and the reproduction page (bench.reproduce.verdicts.pipeline_reasons reads both from here).
OPTIONS = ("max_steps", "train_size", "test_size")
MIN_SEEDS = 3


def run_records(results: Path) -> pd.DataFrame:
    """One row per finished cell of `results`: its keys, budget and `OPTIONS` (None where not set), from config.json."""
    rows = []
    for folder, info in store.manifests(results):
        config = store.read_config(folder)
        options = config.get("options") or {}
        rows.append({**info["cell"], "budget": config.get("budget", {}).get("name", ""), **{k: options.get(k) for k in OPTIONS}})
    return pd.DataFrame(rows, columns=[*store.KEYS, "budget", *OPTIONS])


def run_line(table: Table, cells: pd.DataFrame | None) -> str:
    """ "Run: budget plateau; seeds per method: 3; not a pipeline check": what one table's values rest on.

    `cells`: the `run_records` of the table's dataset × raters × noise; None or empty: budget and options not recorded.
    A pipeline check: the quick budget, a run option set, or fewer than MIN_SEEDS seeds of a row (`Table.seeds`).
    """
    counts = set(table.seeds.values())
    seeds = str(counts.pop()) if len(counts) == 1 else ", ".join(f"{label} {n}" for label, n in table.seeds.items()) or "–"
    few = [f"{label} {n}" for label, n in table.seeds.items() if n < MIN_SEEDS]
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
    return f"Run: budget {', '.join(budgets) or 'not recorded'}; seeds per method: {seeds}; {check}"


def write_tables(summary: pd.DataFrame, out_dir: Path, note: str = "", outcomes: pd.DataFrame | None = None,
                 samples: dict[tuple, tuple[str, set[str]]] | None = None, audit: dict[tuple, dict[str, str]] | None = None,
                 cells: pd.DataFrame | None = None) -> list[Path]:  # fmt: skip
    """Every table of the summary as Markdown and LaTeX, per headline reference; `note` (e.g. "quick stand-in: …") heads each file.

    `outcomes` (`bench.store.training_outcomes` of the same results folder) marks the degenerate rows (`degenerate_flags`);
    `samples` (`samples_note` of the long table) goes under each table with a set metric, and its methods at another M
    are left out of the set-metric columns. `audit` (`stop_audit.failures`) flags the methods that fail the stop audit.
    `cells` (`run_records` of the same results folder) gives each table's `run_line`.
    """
    written, markdown = [], []
    for (dataset, raters, noise), part in summary.groupby(["dataset", "raters", "noise"], sort=True):
        here = None if cells is None else cells[(cells["dataset"] == dataset) & (cells["raters"] == raters) & (cells["noise"] == noise)]
        flags = degenerate_flags(outcomes, dataset, raters, noise)
        for method, flag in (audit or {}).get((dataset, raters, noise), {}).items():
            flags[method] = " · ".join(f for f in (flags.get(method), flag) if f)
        line, apart = (samples or {}).get((dataset, raters, noise), ("", set()))
        set_names = [m.name for m in metrics.of_kind("set")]
        part = part[~(part["method"].isin(apart) & part["metric"].isin(set_names))]  # compared only at one M
        shared = part[part["reference"].isin(["raters", "rater-mean"]) | (part["method"] == AVERAGE)]
        for reference in [r for r in HEADLINE if r in set(part.loc[part["method"] != AVERAGE, "reference"])]:
            rows = pd.concat([part[(part["reference"] == reference) & (part["method"] != AVERAGE)], shared])
            for stem, table in group_tables(rows, (dataset, raters, noise, reference), flags):
                if (out_dir / f"{stem}.md") in written:  # Table III does not depend on the headline reference
                    continue
                if line and any(metrics.get(c.metric).kind == "set" for c in table.columns if c.metric in metrics.METRICS):
                    table.notes.append(line)
                table.run = run_line(table, here)
                md, tex = to_markdown(table), to_latex(table)
                if note:
                    md, tex = f"> {note}\n\n{md}", f"% {note}\n{tex}"
                (out_dir / f"{stem}.md").write_text(md)
                (out_dir / f"{stem}.tex").write_text(tex)
                written += [out_dir / f"{stem}.md", out_dir / f"{stem}.tex"]
                markdown.append(md)
    if markdown:
        (out_dir / "tables.md").write_text("\n".join(markdown))
        written.append(out_dir / "tables.md")
    return written


def default_reference(dataset: str) -> str:
    return "gt" if has_gt(dataset) else "majority"
