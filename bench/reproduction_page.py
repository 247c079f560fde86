"""REPRODUCTION.md and a self-contained REPRODUCTION.html from an `Assessment` (bench/reproduction.py).

The page is a list of blocks (heading, paragraph, list, table, figure) written twice: as Markdown
with relative links to the figures, and as one HTML file with the figures embedded (base64), which
a browser opens offline. The verdict rules come first, then the headline, then the tables, the
claims, the numbers of the text, LF-Net's declared readings and the figures behind each verdict.
"""

from __future__ import annotations

import base64
import html
import math
import warnings
from collections import Counter
from pathlib import Path

import pandas as pd

from bench import data, figures, report, report_tables, result_figures, store, study
from bench.reproduction import Assessment
from bench.rows import display
from bench.verdicts import CLAIM_RULE, VALUE_RULE, Entry, Group, TableReport, digits, is_paper_setting, scale

Block = tuple  # ("h", level, text) | ("p", text) | ("list", items) | ("table", header, rows) | ("img", path, caption)


def write(assessment: Assessment, out_dir: Path, data_root: Path) -> list[Path]:
    """Render the assessment and its figures into `out_dir`; returns the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    figs = figure_files(assessment, out_dir / "figures", data_root)
    blocks = page(assessment, figs, out_dir)
    md, page_html = out_dir / "REPRODUCTION.md", out_dir / "REPRODUCTION.html"
    with store.atomic(md) as tmp:
        tmp.write_text(to_markdown(blocks))
    with store.atomic(page_html) as tmp:
        tmp.write_text(to_html(blocks, out_dir, assessment.study.title))
    return [md, page_html, *(p for ps in figs.values() for p in ps)]


# --------------------------------------------------------------------------- figures


def figure_files(assessment: Assessment, fig_dir: Path, data_root: Path) -> dict[tuple, list[Path]]:
    """Box plots and learning curves of every protocol group, and the fused-label figure of each rater setting.

    Keys: ("boxplot" | "curves" | "fused", dataset, raters) -> PNG paths.
    """
    fig_dir.mkdir(parents=True, exist_ok=True)
    results = assessment.results
    out: dict[tuple, list[Path]] = {}
    if assessment.table.empty:  # nothing collected: no figure
        return out
    table = assessment.table[assessment.table["noise"] == "protocol"]
    for path in report.write_boxplots(table, report.all_tests(table), fig_dir):
        if path.suffix == ".png":
            dataset, raters = _group_of(path.stem, table, "boxplot_dsc_")
            out.setdefault(("boxplot", dataset, raters), []).append(path)
    logs = pd.read_parquet(results / "train_logs.parquet") if (results / "train_logs.parquet").is_file() else pd.DataFrame()
    if not logs.empty:
        for path in report.write_learning_curves(logs[logs["noise"] == "protocol"], fig_dir):
            if path.suffix == ".png":
                prefix = "learning_curves_" if path.stem.startswith("learning") else "diagnostic_gt_dsc_"
                out.setdefault(("curves", *_group_of(path.stem, table, prefix)), []).append(path)
    for dataset, raters in sorted({(g.dataset, g.raters) for t in assessment.tables for g in t.groups}):
        path = fused_figure(results, data_root, dataset, raters, fig_dir)
        if path is not None:
            out[("fused", dataset, raters)] = [path]
    return out


def _group_of(stem: str, table: pd.DataFrame, prefix: str) -> tuple[str, str]:
    """The (dataset, raters) a figure's file stem belongs to (stems are `prefix` + report_tables.slug(dataset, raters, ...))."""
    for dataset, raters in table[["dataset", "raters"]].drop_duplicates().itertuples(index=False):
        if stem.startswith(prefix + report_tables.slug(dataset, raters, "protocol")):
            return dataset, raters
    return "", ""


def fused_figure(results: Path, data_root: Path, dataset: str, raters: str, fig_dir: Path) -> Path | None:
    """The paper's fused-label figure (averaging, STAPLE, MV, SLL, TV, probability map) from the reference method's seed-0 cell."""
    cell = store.Cell(dataset, raters, "protocol", study.current().reference_method, 0)
    try:
        method = store.load_trained(store.cell_dir(results, cell))
    except (FileNotFoundError, ValueError):  # not run, or not finished: no figure
        return None
    if not hasattr(method, "sll"):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a sparse pool's warning was printed when the cells ran
        train = data.load_splits(dataset, data_root, raters, "protocol", store.cache_dir(results)).train
    if train.gt is None:
        return None
    idx = figures.example_indices(train, 2)
    title = f"{dataset}, raters {raters}: fused labels of two training images ({display(cell.method)}, seed 0)"
    fig = figures.fused_label_figure(train.images, train.raters, train.rater_valid, method, idx, title, list(train.rater_names))
    return result_figures.save(fig, fig_dir / f"fused_labels_{report_tables.slug(dataset, raters)}")[0]


# --------------------------------------------------------------------------- the page


def page(a: Assessment, figs: dict, out_dir: Path) -> list[Block]:
    paper = a.study
    blocks: list[Block] = [
        ("h", 1, f"Does the paper reproduce? {paper.citation}"),
        (
            "p",
            f"*{paper.title}*. Results folder `{a.results}`, budget `{a.budget}`. Every paper number below cites the line of "
            f"the paper's LaTeX it comes from (`{paper.source}`, study file paper_figures/lfnet_paper.toml).",
        ),  # fmt: skip
        ("h", 2, "How verdicts are given"),
        ("p", VALUE_RULE),
        ("p", CLAIM_RULE),
        ("h", 2, "Headline"),
        ("list", headline(a)),
    ]
    shown: set[Path] = set()  # a figure is embedded once, under the first table that shows its group
    for t in a.tables:
        blocks += table_blocks(t, figs, out_dir, shown)
    blocks += [("h", 2, "Claims of the text")]
    for c in a.claims:
        blocks += [("p", f"**{c.verdict}** — {c.claim.text} (`{c.claim.id}`, line {c.claim.line})"), ("list", c.evidence or ["—"])]
    blocks += [("h", 2, "Numbers of the text"), ("table", ["line", "what", "paper", "measured", "verdict"], [
        [str(v.line), v.text, _pm(v.mean, v.sd), _measured(e) if e and e.measured else "–", (e.verdict if e else "not run") + (f" ({g.note})" if g else "")]
        for v, g, e in a.values
    ])]  # fmt: skip
    blocks += readings_blocks(a)
    return blocks


def headline(a: Assessment) -> list[str]:
    counts: Counter = Counter()
    for t in a.tables:
        for g in t.groups:
            if is_paper_setting(g):
                counts.update(e.verdict for rows in g.entries.values() for e in rows if e.paper and e.measured and e.method != "average")
    order = ("reproduced", "not reproduced", "not comparable", "pipeline check")
    found = ", ".join(f"{counts[v]} {v}" for v in order if counts[v]) or "none"
    lines = [f"Paper values measured under the setting identified as the paper's: {found}"]
    by: dict[str, list[str]] = {}
    for c in a.claims:
        by.setdefault(c.verdict, []).append(f"`{c.claim.id}`")
    verbs = {"holds": "that hold", "does not hold": "that do not hold"}
    lines += [f"Claims {verbs.get(v, v)}: {', '.join(ids)}" for v, ids in by.items()]
    not_run = list(dict.fromkeys(line.split(":")[0] for t in a.tables for line in t.not_run))
    if not_run:
        lines.append(f"Not run: {', '.join(not_run)} (each table says why and where the files go)")
    return lines


def table_blocks(t: TableReport, figs: dict, out_dir: Path, shown: set[Path]) -> list[Block]:
    blocks: list[Block] = [("h", 2, f"{t.table.label}: {t.table.title} (line {t.table.line})")]
    if t.not_run:
        blocks.append(("list", t.not_run))
    for g in t.groups:
        blocks += [("h", 3, f"{g.dataset}, raters `{g.raters}`: {g.kind}"), ("p", group_line(g))]
        for j, rows in sorted(g.entries.items()):
            column = t.table.columns[j]
            name = f"{column.metric}" + ("" if column.structure == "foreground" else f" ({column.structure})")
            blocks.append(("p", f"**{column.dataset} {name}**, paper units" + (" (%)" if column.metric != "bahd" else " (pixels)")))
            extra = g.extra.get(j, pd.DataFrame()) if column.metric == "dsc" else pd.DataFrame()
            places = digits(column.metric)
            blocks.append(("table", ["method", "paper", "measured (n seeds)", "95 % CI", "Δ", "verdict", "precision / recall / area"],
                           [entry_row(e, extra, places) for e in rows]))  # fmt: skip
            blocks.append(("p", ranking_line(g.ranking.get(j, {}))))
        paths = [path for kind in ("boxplot", "curves", "fused") for path in figs.get((kind, g.dataset, g.raters), [])]
        if any(path in shown for path in paths):
            blocks.append(("p", f"The box plots, learning curves and fused labels of {g.dataset} `{g.raters}` are shown above."))
        for path in paths:
            if path not in shown:
                blocks.append(("img", path.relative_to(out_dir), path.stem))
                shown.add(path)
    return blocks


def group_line(g: Group) -> str:
    quick = " (a pipeline check)" if "quick" in g.budget else ""
    parts = [g.note or "—", f"budget {g.budget}{quick}", f"stopped by: {g.stops or '—'}"]
    labels = g.labels
    if labels:
        parts.append(f"pool (no training): Average {100 * labels['average']:.2f}, majority-vote label {100 * labels['majority']:.2f} "
                     f"({labels['majority_area_ratio']:.2f}× GT area), STAPLE label {100 * labels['staple']:.2f} "
                     f"({labels['staple_area_ratio']:.2f}×)")  # fmt: skip
    return "; ".join(parts)


def entry_row(e: Entry, extra: pd.DataFrame, d: int = 2) -> list[str]:
    m, p = e.measured, e.paper
    delta = f"{m.mean - p[0]:+.{d}f}" if m and p else "–"
    ci = f"[{m.ci[0]:.{d}f}, {m.ci[1]:.{d}f}]" if m and m.n > 1 else "–"
    pra = "–"
    if e.method in extra.index:
        r = extra.loc[e.method]
        pra = f"{r['precision']:.2f} / {r['recall']:.2f} / {r['area']:.2f}"
    label = display(e.method) if e.method != "average" else "*Average*"
    return [label, _pm(*p, d) if p else "–", _measured(e, d) if m else "–", ci, delta, e.verdict, pra]


def ranking_line(r: dict) -> str:
    parts = []
    if "tau" in r:
        parts.append(f"Kendall τ with the paper's order {r['tau']:.2f} (p {r['p']:.2g}, {r['n']} methods)")
    if r.get("winner"):
        parts.append(f"best measured: {display(r['winner'])} (paper: {display(r['paper_winner']) if r.get('paper_winner') else '–'})")
    test = r.get("test")
    if test:
        diff = r["scale"] * -test["median_diff"]
        diff = f"{diff:+.2f} points" if r["scale"] == 100 else f"{diff:+.3f}"  # DSC-like in points of %, bAHD in pixels
        parts.append(f"{display(test['method'])} vs {display(test['reference_method'])}: median difference {diff} per case in "
                     f"{display(test['method'])}'s favour, Wilcoxon p {test['p']:.2g}")  # fmt: skip
    return "; ".join(parts) or "no ranking: fewer than three methods with a paper value"


def readings_blocks(a: Assessment) -> list[Block]:
    if not a.study.readings:
        return []
    head = [("h", 2, "LF-Net's declared readings"),
            ("p", "Declared before any was run (docs/decisions.md): " + "; ".join(
                f"`{r['method']}` (line {r['line']}): {r['text']}" for r in a.study.readings) + ".")]  # fmt: skip
    if not a.readings:
        return [
            *head,
            ("p", "No cells of these readings in this results folder (python -m bench run --methods readings --budget plateau)."),
        ]
    first = a.study.readings[0]["method"]
    rows = []
    for r in a.readings:
        test, ar = r["test"], r["areas"]
        versus = f"{-test['median_diff'] * scale('dsc'):+.2f}, Holm p {test['p_holm']:.2g}" if test else "–"
        prf = " / ".join(f"{ar[k]:.2f}" for k in ("precision", "recall", "area")) if ar else "–"
        teacher = f"{r['teacher_fg']:.3f} / {r['teacher_bg']:.3f} ({r['teacher_cells']})" if r["teacher_cells"] else "–"
        rows.append([f"{r['dataset']} `{r['raters']}`", f"`{r['method']}`", _measured(Entry(r["method"], None, r["measured"], "")),
                     versus, prf, teacher])  # fmt: skip
    return [
        *head,
        ("p", f"DSC (%) against each dataset's reference at the protocol; the median per-case difference from `{first}` "
              "(paired Wilcoxon, Holm within the readings); precision / recall / predicted area ÷ reference area pooled over "
              "cases and seeds; the teacher's mean p(fg) on the validation pixels outside the threshold-vote mask where GT is "
              "foreground / background (GT read after training, a diagnostic). Readings that differ only in the segmentation "
              "stage train the same soft-label network from the same seed, so their teacher columns agree."),
        ("table", ["setting", "method", "DSC (n seeds)", f"vs `{first}`", "precision / recall / area", "teacher p(fg) outside TV: GT fg / bg (cells)"], rows),
    ]  # fmt: skip


def _pm(mean: float, sd: float, d: int = 2) -> str:
    return f"{mean:.{d}f}" if math.isnan(sd) else f"{mean:.{d}f} ± {sd:.{d}f}"


def _measured(e: Entry, d: int = 2) -> str:
    m = e.measured
    return f"{m.mean:.{d}f}" if m.n == 0 else f"{_pm(m.mean, m.sd, d)} ({m.n})"


# --------------------------------------------------------------------------- Markdown and HTML


def to_markdown(blocks: list[Block]) -> str:
    out = []
    for b in blocks:
        if b[0] == "h":
            out.append(f"{'#' * b[1]} {b[2]}")
        elif b[0] == "p":
            out.append(b[1])
        elif b[0] == "list":
            out.append("\n".join(f"- {item}" for item in b[1]))
        elif b[0] == "table":
            lines = ["| " + " | ".join(h.replace("|", "/") for h in b[1]) + " |", "|" + " --- |" * len(b[1])]
            out.append("\n".join(lines + ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in b[2]]))
        elif b[0] == "img":
            out.append(f"![{b[2]}]({b[1].as_posix()})")
    return "\n\n".join(out) + "\n"


def _inline(text: str) -> str:
    """Markdown's **bold**, *italic* and `code` as HTML, after escaping."""
    import re

    text = html.escape(text)
    text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
    text = re.sub(r"\*(.+?)\*", r"<i>\1</i>", text)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", text)


def to_html(blocks: list[Block], out_dir: Path, title: str) -> str:
    body = []
    for b in blocks:
        if b[0] == "h":
            body.append(f"<h{b[1]}>{_inline(b[2])}</h{b[1]}>")
        elif b[0] == "p":
            body.append(f"<p>{_inline(b[1])}</p>")
        elif b[0] == "list":
            body.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b[1]) + "</ul>")
        elif b[0] == "table":
            head = "".join(f"<th>{_inline(h)}</th>" for h in b[1])
            rows = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in b[2])
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif b[0] == "img":
            encoded = base64.b64encode((out_dir / b[1]).read_bytes()).decode()
            body.append(f'<figure><img alt="{html.escape(b[2])}" src="data:image/png;base64,{encoded}"><figcaption>'
                        f"{html.escape(b[2])} ({html.escape(b[1].as_posix())})</figcaption></figure>")  # fmt: skip
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;line-height:1.45}table{border-collapse:collapse;"
             "margin:.5em 0 1em}td,th{border:1px solid #ccc;padding:3px 7px;font-size:90%;text-align:left}"
             "img{max-width:100%}figcaption{font-size:80%;color:#555}code{background:#f4f4f4}")  # fmt: skip
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title><style>{style}</style></head>"
            f"<body>{''.join(body)}</body></html>\n")  # fmt: skip
