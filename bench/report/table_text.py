"""A rendered table (`TextTable` of `TableCell`s under `TextColumn`s; a paper's table is `bench.study.Table`) and its
text, one writer each: `markdown_table` for every Markdown table of the project (the report's, the reproduction page's,
the stop audit's, `compare`'s), `to_markdown` and `to_latex` (booktabs) for a `TextTable`. `bench/report/tables.py`
builds the tables; a "|" inside a Markdown cell is written "/"."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from bench.report import stats


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]], align: Sequence[str] = ()) -> str:
    """A Markdown table: `header` (k texts), `rows` (each k texts), `align` per column ("l", "r" or "" for the default)."""
    rule = {"l": ":--", "r": "--:", "": "---"}
    lines = [header, [rule[a] for a in (align or [""] * len(header))], *rows]
    return "\n".join("| " + " | ".join(str(c).replace("|", "/") for c in line) + " |" for line in lines)


@dataclass(frozen=True)
class TextColumn:
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
    shared: bool = False  # the best or a row it is not resolved from (`SHARED`): no row of the column is bold


@dataclass
class TextTable:
    title: str
    label_header: str
    columns: list[TextColumn]
    labels: list[str] = field(default_factory=list)
    rows: list[list[TableCell]] = field(default_factory=list)
    italic: list[bool] = field(default_factory=list)  # Average and Oracle, as \emph in the paper
    rule_before: set[int] = field(default_factory=set)  # row indices preceded by a light rule
    flags: list[str] = field(default_factory=list)  # per row: "" or the degenerate-prediction flag ("empty 2/3")
    notes: list[str] = field(default_factory=list)  # lines under the table (how many samples its set metrics scored)
    seeds: dict[str, int] = field(default_factory=dict)  # row label -> seeds behind its means (the summary's n_seeds)
    methods: list[str] = field(default_factory=list)  # each row's method (registry name, "average" for the Average row)
    run: str = ""  # under the title: budget, seeds per method, pipeline-check status (`run_line`)


#: The mark of a column's unresolved leaders (`mark_best`) and the note under a table that has one.
SHARED = "≈"
SHARED_NOTE = (
    f"{SHARED}: the best mean of the column and every row the seed-aware test (Holm-adjusted, α = {stats.ALPHA}) does "
    "not tell apart from it; no row of that column is bold. Bold: a best resolved from every other row"
)

#: The note under a table with a flagged row.
FLAG_NOTE = "[empty k/n], [full k/n]: in k of n seeds the method predicted an empty (full) mask on most validation cases where the raters' majority did not; its mean measures nothing and is never bold. [stop audit: fails]: trained longer (bench audit-stops) a test metric moved by more than its seed sd, so this row is not the method at its best and is never bold. [stop not audited]: no finished audit of this method's stop, so whether it reached its best is not known; never bold"


def markdown_rows(table: TextTable) -> tuple[list[str], list[list[str]]]:
    """The header and the rows of a table as Markdown cell texts (a row's label in italics for Average and Oracle, with its
    flag), for `to_markdown` and the reproduction page."""
    labels = [
        (f"*{label}*" if italic else label) + (f" [{flag}]" if flag else "")
        for label, italic, flag in zip(table.labels, table.italic, flagged(table))
    ]
    rows = [[label, *(markdown_cell(c) for c in row)] for label, row in zip(labels, table.rows)]
    return [table.label_header, *(c.markdown for c in table.columns)], rows


def to_markdown(table: TextTable) -> str:
    lines = [f"### {table.title}", "", *([table.run, ""] if table.run else [])]
    lines.append(markdown_table(*markdown_rows(table), ["l", *"r" * len(table.columns)]))
    if any(table.flags):
        lines += ["", FLAG_NOTE + "."]
    lines += [line for note in table.notes for line in ("", note)]
    return "\n".join(lines) + "\n"


def flagged(table: TextTable) -> list[str]:
    """Each row's flag ("" where none; a table built without flags has none)."""
    return table.flags or [""] * len(table.labels)


def markdown_cell(c: TableCell) -> str:
    text = c.text if c.std is None else f"{c.text} ± {c.std}"
    return f"**{text}**" if c.bold else f"{text} {SHARED}" if c.shared else text


def to_latex(table: TextTable) -> str:
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
    mark = rf"$^{{{LATEX_UNICODE[SHARED].strip('$')}}}$" if c.shared else ""
    return (b(text) if c.std is None else rf"{b(text)} $\pm$ {b(c.std)}") + mark  # bold like the paper: mean and std


LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\~{}",
    "^": r"\^{}",
}


LATEX_UNICODE = {
    "≈": r"$\approx$",
    "α": r"$\alpha$",
    "†": r"$\dagger$",
    "‡": r"$\ddagger$",
    "→": r"$\rightarrow$",
    "±": r"$\pm$",
    "↑": r"$\uparrow$",
    "↓": r"$\downarrow$",
    "–": "--",
    "×": r"$\times$",
}


def latex_text(text: str) -> str:
    """Escape TeX specials and map the few Unicode symbols the tables use to math-mode commands."""
    return "".join(LATEX_UNICODE.get(ch, LATEX_SPECIAL.get(ch, ch)) for ch in str(text))
