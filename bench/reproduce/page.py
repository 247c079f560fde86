"""REPRODUCTION.md and a self-contained REPRODUCTION.html from an `Assessment` (bench/reproduce/assessment.py).

The page is a list of blocks (heading, paragraph, list, table, figure, table of contents) written twice: as Markdown
with relative links to the figures, and as one HTML file with the figures embedded (base64), which a browser opens
offline. It is read top-down in a minute: a banner saying what was run where (budget, seeds, split sizes, run options,
rater settings, machine, software, from the cells' config.json and manifest.json), the headline as counts of verdicts,
the contents, the verdict rules, then per paper table the values with their verdicts, the ranking (with its bootstrap
uncertainty, bench/reproduce/ranking.py) and the figures behind them, the claims, the numbers of the text, LF-Net's declared
readings, and the run's configuration per rater setting.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bench import store, study
from bench.evaluate.metrics import higher_is_better
from bench.report import example_figures, plots, render, tables
from bench.report.rows import display
from bench.reproduce import ranking
from bench.reproduce.assessment import Assessment
from bench.reproduce.page_format import Block, to_html, to_markdown, verdict_of
from bench.reproduce.provenance import banner, configuration_blocks, is_stand_in, pipeline_line, provenance
from bench.reproduce.verdicts import (
    CLAIM_RULE,
    VALUE_RULE,
    Entry,
    Group,
    TableReport,
    digits,
    is_paper_setting,
    measured_reference,
    scale,
)
from bench.run import split_cache
from bench.study import Column

Shown = tuple  # a figure on the page: (PNG path, caption)

N_BOOT = 1000  # bootstrap resamples of each column's ranking (bench/reproduce/ranking.py)
TEST = render.TEST_NAME  # the paired test the page and the box plots name: "seed-aware test (docs/methods.md#statistics)"

#: Verdicts in the order the headline counts them.
VALUE_VERDICTS = ("reproduced", "not reproduced", "inconclusive", "pipeline check", "not comparable", "not run")
CLAIM_VERDICTS = ("holds", "does not hold", "inconclusive", "incomplete", "pipeline check", "not run", "not checkable")


def write(assessment: Assessment, out_dir: Path, data_root: Path) -> list[Path]:
    """Render the assessment and its figures into `out_dir`; returns the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    cells = provenance(assessment.results)
    ranks = rank_columns(assessment, cells)
    figs = figure_files(assessment, out_dir / "figures", data_root, cells, ranks)
    blocks = page(assessment, figs, out_dir, cells, ranks)
    md, page_html = out_dir / "REPRODUCTION.md", out_dir / "REPRODUCTION.html"
    with store.atomic(md) as tmp:
        tmp.write_text(to_markdown(blocks))
    with store.atomic(page_html) as tmp:
        tmp.write_text(to_html(blocks, out_dir, assessment.study.title))
    return [md, page_html, *(path for shown in figs.values() for path, _ in shown)]


# --------------------------------------------------------------------------- rankings


@dataclass
class ColumnRanking:
    """One group's ranking of one paper column under the two-level bootstrap (bench/reproduce/ranking.py)."""

    table: str  # the paper table's id
    column: Column
    dataset: str
    raters: str
    reference: str  # what the measurements are scored against
    shares: pd.DataFrame  # method × rank -> share of resamples (`ranking.rank_distribution`)
    tau: tuple[float, float, float]  # Kendall τ with the paper's order and its 95 % interval; NaN with < 3 paper values
    n_tau: int  # methods with a paper value behind τ
    warning: str  # "pipeline check, not a verdict: …" (`pipeline_line`), "" for a verdict-grade group


def column_rows(table: pd.DataFrame, column: Column, dataset: str, raters: str, reference: str) -> pd.DataFrame:
    """The long table's rows of one column of one group at the protocol: method, seed, case, value."""
    rows = table[(table["dataset"] == dataset) & (table["raters"] == raters) & (table["noise"] == "protocol")
                 & (table["reference"] == reference) & (table["metric"] == column.metric) & (table["structure"] == column.structure)]  # fmt: skip
    return rows[["method", "seed", "case", "value"]]


def rank_columns(a: Assessment, cells: pd.DataFrame) -> dict[tuple, ColumnRanking]:
    """(table id, dataset, raters, column index) -> the column's ranking, for each group column with two or more trained
    methods (not the Average row, not the Oracle)."""
    out = {}
    for t in a.tables:
        for g in t.groups:
            for j, entries in g.entries.items():
                column = t.table.columns[j]
                trained = [e for e in entries if e.measured and e.measured.n and e.method not in ("average", a.study.oracle)]
                if len(trained) < 2:
                    continue
                reference = measured_reference(column, g.dataset)
                rows = column_rows(a.table, column, g.dataset, g.raters, reference)
                methods = [e.method for e in trained]
                shares = ranking.rank_distribution(rows, methods, higher_is_better(column.metric), N_BOOT, seed=0)
                paper = {e.method: e.paper[0] for e in trained if e.paper}
                tau = ranking.kendall_interval(rows, paper, N_BOOT, seed=0) if len(paper) >= 3 else (math.nan,) * 3
                warning = pipeline_line(cells, g.dataset, g.raters, g)
                out[(t.table.id, g.dataset, g.raters, j)] = ColumnRanking(t.table.id, column, g.dataset, g.raters, reference, shares,
                                                                          tau, len(paper), warning)  # fmt: skip
    return out


# --------------------------------------------------------------------------- figures


def figure_files(
    assessment: Assessment, fig_dir: Path, data_root: Path, cells: pd.DataFrame, ranks: dict[tuple, ColumnRanking]
) -> dict[tuple, list[Shown]]:
    """Box plots and learning curves of every protocol group, the fused-label figure of each rater setting and the rank
    plot of each group column, each with its caption.

    Keys: ("boxplot" | "curves" | "fused", dataset, raters) and ("ranks", table id, dataset, raters, column index).
    """
    fig_dir.mkdir(parents=True, exist_ok=True)
    results = assessment.results
    out: dict[tuple, list[Shown]] = {}
    if assessment.table.empty:  # nothing collected: no figure
        return out
    table = assessment.table[assessment.table["noise"] == "protocol"]
    groups = table[["dataset", "raters"]].drop_duplicates().itertuples(index=False)
    checks = {(d, r): pipeline_line(cells, d, r) for d, r in groups}
    for path in render.write_boxplots(table, render.all_tests(table), fig_dir, pipeline_checks=checks):
        if path.suffix == ".png":
            dataset, raters = _group_of(path.stem, table, "boxplot_dsc_")
            out.setdefault(("boxplot", dataset, raters), []).append((path, boxplot_caption(path, table, dataset, raters, checks)))
    logs = pd.read_parquet(results / "train_logs.parquet") if (results / "train_logs.parquet").is_file() else pd.DataFrame()
    if not logs.empty:
        for path in render.write_learning_curves(logs[logs["noise"] == "protocol"], fig_dir):
            if path.suffix == ".png":
                diagnostic = not path.stem.startswith("learning")
                dataset, raters = _group_of(path.stem, table, "diagnostic_gt_dsc_" if diagnostic else "learning_curves_")
                out.setdefault(("curves", dataset, raters), []).append((path, curves_caption(dataset, raters, diagnostic)))
    for dataset, raters in sorted({(g.dataset, g.raters) for t in assessment.tables for g in t.groups}):
        path = fused_figure(results, data_root, dataset, raters, fig_dir)
        if path is not None:
            caption = (f"{dataset}, raters `{raters}`: two training images, each rater's label, then the fused labels "
                       f"{display(assessment.study.reference_method)} (seed 0) is trained with or against: the raters' "
                       "average, STAPLE, the majority vote, its soft label (SLL), the threshold-vote mask (TV) and its "
                       "predicted probability map.")  # fmt: skip
            out[("fused", dataset, raters)] = [(path, caption)]
    for key, r in ranks.items():
        out[("ranks", *key)] = [rank_plot(r, fig_dir)]
    return out


def _group_of(stem: str, table: pd.DataFrame, prefix: str) -> tuple[str, str]:
    """The (dataset, raters) a figure's file stem belongs to (stems are `prefix` + tables.slug(dataset, raters, ...))."""
    for dataset, raters in table[["dataset", "raters"]].drop_duplicates().itertuples(index=False):
        if stem.startswith(prefix + tables.slug(dataset, raters, "protocol")):
            return dataset, raters
    return "", ""


def boxplot_caption(path: Path, table: pd.DataFrame, dataset: str, raters: str, checks: dict) -> str:
    reference = tables.default_reference(dataset)
    structure = path.stem.removeprefix("boxplot_dsc_" + tables.slug(dataset, raters, "protocol", reference) + "_")
    rows = table[
        (table["dataset"] == dataset) & (table["raters"] == raters) & (table["reference"] == reference) & (table["metric"] == "dsc")
    ]
    warning = checks.get((dataset, raters), "")
    return (f"{dataset}, raters `{raters}`, at the protocol: DSC (%) of each of the {rows['case'].nunique()} test cases against "
            f"{reference} ({structure}), averaged over each method's seeds; box: quartiles, whiskers: 1.5 × IQR, triangle: "
            f"mean. Above each box: the Holm-adjusted p of the {TEST} against {display(study.current().reference_method)}."
            + (f" **{_sentence(warning)}**" if warning else ""))  # fmt: skip


def _sentence(text: str) -> str:
    return text[0].upper() + text[1:] + "."


def curves_caption(dataset: str, raters: str, diagnostic: bool) -> str:
    if diagnostic:
        return (f"{dataset}, raters `{raters}`: validation DSC against ground truth during training, mean ± sd over seeds; a "
                "diagnostic only, never used to stop or to select a checkpoint.")  # fmt: skip
    return (f"{dataset}, raters `{raters}`: each method's validation loss (its own objective, against the raters) per stage, "
            "mean ± sd over seeds; dotted: the restored step.")  # fmt: skip


def rank_plot(r: ColumnRanking, fig_dir: Path) -> Shown:
    """The blob plot of one column's ranking, saved; its caption says what the circles and crosses are."""
    methods = list(r.shares.index)
    every = sorted(set(methods))
    where = f"{r.dataset}, raters `{r.raters}`: {column_name(r.column)} against {r.reference}"
    fig = plots.rank_figure(r.shares, f"{where.replace('`', '')}\nrank over {N_BOOT} bootstrap resamples (seeds, then cases)",
                                     {m: plots.method_color(m, every) for m in methods}, {m: display(m) for m in methods},
                                     r.warning)  # fmt: skip
    stem = f"ranks_{tables.slug(r.dataset, r.raters, r.table, r.column.metric, r.column.structure)}"
    path = plots.save(fig, fig_dir / stem)[0]
    caption = (f"{where} ({r.table}): each method's rank (1 = best) over {N_BOOT} two-level bootstrap resamples: each "
               "method's seeds drawn with replacement, then the test cases, the same cases for every method. Circle area: "
               "the share of resamples at that rank; cross: the median rank; line: the central 95 % of ranks; methods "
               "ordered by mean rank." + (f" {tau_text(r)}." if r.n_tau >= 3 else "") + (f" **{_sentence(r.warning)}**" if r.warning else ""))  # fmt: skip
    return path, caption


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
        train = split_cache.load_splits(dataset, data_root, raters, "protocol", store.cache_dir(results)).train
    if train.gt is None:
        return None
    idx = example_figures.example_indices(train, 2)
    title = f"{dataset}, raters {raters}: fused labels of two training images ({display(cell.method)}, seed 0)"
    fig = example_figures.fused_label_figure(train.images, train.raters, train.rater_valid, method, idx, title, list(train.rater_names))
    return plots.save(fig, fig_dir / f"fused_labels_{tables.slug(dataset, raters)}")[0]


# --------------------------------------------------------------------------- the page


def page(a: Assessment, figs: dict, out_dir: Path, cells: pd.DataFrame, ranks: dict[tuple, ColumnRanking]) -> list[Block]:
    paper = a.study
    blocks: list[Block] = [
        ("h", 1, f"Does the paper reproduce? {paper.citation}"),
        ("p", f"*{paper.title}*. Every paper number below cites the line of the paper's LaTeX it comes from (`{paper.source}`, "
              "study file paper_figures/lfnet_paper.toml)."),
        ("table", ["run", "as the cells recorded it"], banner(a, cells)),
        ("h", 2, "Headline"),
        ("list", headline(a)),
        ("table", ["paper values", *VALUE_VERDICTS], value_counts(a)),
        ("table", ["claims of the text", "count", "claims"], claim_counts(a)),
        ("h", 2, "Contents"),
        ("toc",),
        ("h", 2, "How verdicts are given"),
        ("p", VALUE_RULE),
        ("p", CLAIM_RULE),
        ("p", f"Paired comparisons on this page are the {TEST}: Δ is the difference of two methods' means with its 95 % "
              "interval and Holm-adjusted p; where p ≥ 0.05 the page says how many seeds per method would resolve the gap. "
              "A column's ranking is shown with its uncertainty: each method's rank over "
              f"{N_BOOT} two-level bootstrap resamples (seeds within each method, then test cases, the same for every "
              "method), and Kendall's τ with the paper's order with its 95 % bootstrap interval."),
    ]  # fmt: skip
    shown: set[Path] = set()  # a figure is embedded once, under the first table that shows its group
    for t in a.tables:
        blocks += table_blocks(t, figs, out_dir, shown, cells, ranks)
    blocks += [("h", 2, "Claims of the text")]
    for c in a.claims:
        blocks += [("p", f"**{c.verdict}** — {c.claim.text} (`{c.claim.id}`, line {c.claim.line})"), ("list", c.evidence or ["—"])]
    blocks += [("h", 2, "Numbers of the text"), ("table", ["line", "what", "paper", "measured", "verdict"], [
        [str(v.line), v.text, _pm(v.mean, v.sd), _measured(e) if e and e.measured else "–", (e.verdict if e else "not run") + (f" ({g.note})" if g else "")]
        for v, g, e in a.values
    ])]  # fmt: skip
    blocks += readings_blocks(a)
    blocks += selection_blocks(a)
    blocks += configuration_blocks(cells)
    return blocks


def headline(a: Assessment) -> list[str]:
    """The headline as sentences (the page's list above the counts; `bench report` prints them)."""
    counts: Counter = Counter()
    for t in a.tables:
        for g in t.groups:
            if is_paper_setting(g):
                counts.update(e.verdict for rows in g.entries.values() for e in rows if e.paper and e.measured and e.method != "average")
    found = ", ".join(f"{counts[v]} {v}" for v in VALUE_VERDICTS if counts[v]) or "none"
    lines = [f"Every verdict stands {a.protocol}"] if a.protocol else []
    lines.append(f"Paper values measured under the setting identified as the paper's: {found}")
    by: dict[str, list[str]] = {}
    for c in a.claims:
        by.setdefault(c.verdict, []).append(f"`{c.claim.id}`")
    verbs = {"holds": "that hold", "does not hold": "that do not hold"}
    lines += [f"Claims {verbs.get(v, v)}: {', '.join(ids)}" for v, ids in by.items()]
    not_run = list(dict.fromkeys(line.split(":")[0] for t in a.tables for line in t.not_run))
    if not_run:
        lines.append(f"Not run: {', '.join(not_run)} (each table says why and where the files go)")
    return lines


def value_counts(a: Assessment) -> list[list[str]]:
    """Per paper table and in total: how many of its values (trained methods, not the Average row) got each verdict under
    the setting identified as the paper's; a column without such a group counts its values as not run."""
    rows, total = [], Counter()
    for t in a.tables:
        counts: Counter = Counter()
        for j, _ in enumerate(t.table.columns):
            groups = [g for g in t.groups if j in g.entries and is_paper_setting(g)]
            if not groups:
                counts["not run"] += sum(1 for r in t.table.rows if r.method != "average" and t.table.value(r.method, j))
            for g in groups:
                counts.update(verdict_of(e.verdict) for e in g.entries[j] if e.paper and e.method != "average")
        total += counts
        rows.append([f"{t.table.label} (line {t.table.line})", *(str(counts[v]) for v in VALUE_VERDICTS)])
    return [*rows, ["**all**", *(f"**{total[v]}**" for v in VALUE_VERDICTS)]]


def claim_counts(a: Assessment) -> list[list[str]]:
    by: dict[str, list[str]] = {}
    for c in a.claims:
        by.setdefault(verdict_of(c.verdict), []).append(f"`{c.claim.id}`")
    order = [*CLAIM_VERDICTS, *(v for v in by if v not in CLAIM_VERDICTS)]
    return [[v, str(len(by.get(v, []))), ", ".join(by.get(v, [])) or "–"] for v in order]


def column_name(column: Column) -> str:
    return column.metric + ("" if column.structure == "foreground" else f" ({column.structure})")


def table_blocks(t: TableReport, figs: dict, out_dir: Path, shown: set[Path], cells: pd.DataFrame, ranks: dict) -> list[Block]:
    blocks: list[Block] = [("h", 2, f"{t.table.label}: {t.table.title} (line {t.table.line})")]
    if t.not_run:
        blocks.append(("list", t.not_run))
    for g in t.groups:
        blocks += [("h", 3, f"{g.dataset}, raters `{g.raters}`: {g.kind}"), ("p", group_line(g))]
        flags = tables.degenerate_flags(cells, g.dataset, g.raters, "protocol")
        for j, rows in sorted(g.entries.items()):
            column = t.table.columns[j]
            blocks.append(
                ("p", f"**{column.dataset} {column_name(column)}**, paper units" + (" (%)" if column.metric != "bahd" else " (pixels)"))
            )
            extra = g.extra.get(j, pd.DataFrame()) if column.metric == "dsc" else pd.DataFrame()
            places = digits(column.metric)
            blocks.append(("table", ["method", "paper", "measured (n seeds)", "95 % CI", "Δ measured − paper [95 % CI]", "verdict",
                                     "precision / recall / area"],
                           [entry_row(e, extra, places, stand_in=is_stand_in(g), flag=flags.get(e.method, "")) for e in rows]))  # fmt: skip
            r = ranks.get((t.table.id, g.dataset, g.raters, j))
            blocks.append(("p", ranking_line(g.ranking.get(j, {}), r)))
            for path, caption in figs.get(("ranks", t.table.id, g.dataset, g.raters, j), []):
                blocks.append(("img", path.relative_to(out_dir), caption))
        paths = [shown_ for kind in ("boxplot", "curves", "fused") for shown_ in figs.get((kind, g.dataset, g.raters), [])]
        if any(path in shown for path, _ in paths):
            blocks.append(("p", f"The box plots, learning curves and fused labels of {g.dataset} `{g.raters}` are shown above."))
        for path, caption in paths:
            if path not in shown:
                blocks.append(("img", path.relative_to(out_dir), caption))
                shown.add(path)
    return blocks


def group_line(g: Group) -> str:
    quick = " (a pipeline check)" if "quick" in g.budget else ""  # the note names the other reasons (bench.reproduce.verdicts.group_for)
    parts = [g.note or "—", f"budget {g.budget}{quick}", f"stopped by: {g.stops or '—'}"]
    labels = g.labels
    if labels:
        parts.append(f"pool (no training): Average {100 * labels['average']:.2f}, majority-vote label {100 * labels['majority']:.2f} "
                     f"({labels['majority_area_ratio']:.2f}× GT area), STAPLE label {100 * labels['staple']:.2f} "
                     f"({labels['staple_area_ratio']:.2f}×)")  # fmt: skip
    return "; ".join(parts)


def entry_row(e: Entry, extra: pd.DataFrame, d: int = 2, stand_in: bool = False, flag: str = "") -> list[str]:
    """One method's row: paper value, measured mean ± sd (n), its CI, Δ to the paper (blank on a stand-in dataset), verdict,
    precision / recall / area; a degenerate-prediction flag follows the method's name."""
    m, p = e.measured, e.paper
    delta = "" if stand_in else _delta(e, d)
    ci = f"[{m.ci[0]:.{d}f}, {m.ci[1]:.{d}f}]" if m and m.n > 1 else "–"
    pra = "–"
    if e.method in extra.index:
        r = extra.loc[e.method]
        pra = " / ".join("–" if pd.isna(r[k]) else f"{r[k]:.2f}" for k in ("precision", "recall", "area"))  # precision: none predicted
    label = (display(e.method) if e.method != "average" else "*Average*") + (f" [{flag}]" if flag else "")
    return [label, _pm(*p, d) if p else "–", _measured(e, d) if m else "–", ci, delta, e.verdict, pra]


def _delta(e: Entry, d: int) -> str:
    """Measured − paper with its 95 % interval where the verdict computed one (`Entry.delta`), else the difference alone."""
    if not (e.measured and e.paper):
        return "–"
    delta = getattr(e, "delta", None)
    if delta is None:
        return f"{e.measured.mean - e.paper[0]:+.{d}f}"
    diff, low, high = delta
    return f"{diff:+.{d}f}" + ("" if math.isnan(low) else f" [{low:+.{d}f}, {high:+.{d}f}]")


def tau_text(r: ColumnRanking) -> str:
    tau, low, high = r.tau
    return f"Kendall τ with the paper's order {tau:.2f} [95 % bootstrap interval {low:.2f}, {high:.2f}] over {r.n_tau} methods"


def ranking_line(r: dict, ranks: ColumnRanking | None = None) -> str:
    """τ with its interval, the winners, and the measured best method against the reference method (`versus`)."""
    parts = []
    if ranks is not None and ranks.n_tau >= 3:
        parts.append(tau_text(ranks))
    elif "tau" in r:
        parts.append(f"Kendall τ with the paper's order {r['tau']:.2f} ({r['n']} methods)")
    if r.get("winner"):
        parts.append(f"best measured: {display(r['winner'])} (paper: {display(r['paper_winner']) if r.get('paper_winner') else '–'})")
    test = r.get("test")
    if test:
        other, reference = display(test["method"]), display(test["reference_method"])
        parts.append(f"{other} vs {reference} by the {TEST}: {versus(test, r['scale'], test['method'])}")
    return "; ".join(parts) or "no ranking: fewer than three methods with a paper value"


def versus(test: dict, factor: float, favoured: str, named: bool = True) -> str:
    """A paired test's row (bench.report.stats.paired_tests) as "Δ +3.20 [+2.90, +3.50] points in X's favour, p 2e-89", and the
    seeds per method that would resolve the gap where p ≥ 0.05. Which test it is (`TEST`) the caller says once.

    `diff` (and its interval) is reference − other, positive favouring the reference method; the text turns it to
    `favoured`'s side (the other method when `favoured` is not the reference), in paper units (`factor`: 100 for DSC);
    `named` False leaves out "in X's favour" where the table's header says it. A row from before the seed-aware test
    (no `diff`) shows its median per-case difference and Wilcoxon p.
    """
    sign = -1.0 if favoured != test["reference_method"] else 1.0
    unit = " points" if factor == 100 else ""
    places = 2 if factor == 100 else 3
    side = f" in {display(favoured)}'s favour" if named else ""
    if "diff" not in test:  # transition: only the Wilcoxon columns
        diff = sign * factor * test["median_diff"] + 0.0  # + 0.0: no "-0.00"
        return f"median Δ {diff:+.{places}f}{unit} per case{side}, Wilcoxon p {test['p_holm']:.2g}"
    diff = sign * factor * test["diff"] + 0.0
    low, high = sorted(sign * factor * test.get(k, math.nan) + 0.0 for k in ("ci_low", "ci_high"))
    interval = "" if math.isnan(low) else f" [{low:+.{places}f}, {high:+.{places}f}]"
    p = test["p_holm"]
    if math.isnan(p):  # one seed of either method: the seed-to-seed spread is unknown
        return f"Δ {diff:+.{places}f}{unit}{side}, no p-value (it needs two seeds of each method)"
    text = f"Δ {diff:+.{places}f}{interval}{unit}{side}, p {p:.2g}"
    needed = test.get("seeds_needed", math.nan)
    if p >= 0.05 and needed is not None and not math.isnan(needed):
        text += (
            ", more test cases needed to resolve it" if math.isinf(needed) else f", about {int(needed)} seeds per method would resolve it"
        )
    return text


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
        against = versus(test, scale("dsc"), r["method"], named=False) if test else "–"
        prf = " / ".join(f"{ar[k]:.2f}" for k in ("precision", "recall", "area")) if ar else "–"
        teacher = f"{r['teacher_fg']:.3f} / {r['teacher_bg']:.3f} ({r['teacher_cells']})" if r["teacher_cells"] else "–"
        rows.append([f"{r['dataset']} `{r['raters']}`", f"`{r['method']}`", _measured(Entry(r["method"], None, r["measured"], "")),
                     against, prf, teacher])  # fmt: skip
    return [
        *head,
        ("p", f"DSC (%) against each dataset's reference at the protocol; the difference from `{first}` in the reading's favour "
              f"(Δ of the means with its 95 % interval, {TEST}, Holm within the readings); precision / recall / predicted "
              "area ÷ reference area pooled over cases and seeds; the teacher's mean p(fg) on the validation pixels outside the "
              "threshold-vote mask where GT is foreground / background (GT read after training, a diagnostic). Readings that "
              "differ only in the segmentation stage train the same soft-label network from the same seed, so their teacher "
              "columns agree."),
        ("table", ["setting", "method", "DSC (n seeds)", f"vs `{first}`: Δ in the reading's favour [95 % CI], Holm p", "precision / recall / area",
                   "teacher p(fg) outside TV: GT fg / bg (cells)"], rows),
    ]  # fmt: skip


def selection_blocks(a: Assessment) -> list[Block]:
    """The selection reading (docs/decisions.md): validation GT DSC at the rule's step and at the GT-best evaluation, beside
    the fair row's test DSC; never in place of it."""
    if a.selection.empty:
        return []
    rows = [[f"{r.dataset} `{r.raters}`" + ("" if r.noise == "protocol" else f" noise {r.noise}"), display(r.method), str(r.seeds),
             _pm(r.test_dsc, r.test_sd), f"{_pm(r.rule_dsc, r.rule_sd)} (step {r.rule_step})", f"{_pm(r.gt_dsc, r.gt_sd)} (step {r.gt_step})",
             f"{r.gain:+.2f} [{r.gain_low:+.2f}, {r.gain_high:+.2f}]",
             f"{_pm(r.gt_test_dsc, r.gt_test_sd)} ({r.gt_test_seeds})" if r.gt_test_seeds else "not kept"] for r in a.selection.itertuples()]  # fmt: skip
    return [
        ("h", 2, "Selection reading: checkpoints chosen on the validation split's ground truth"),
        ("p", "Declared before it was read (docs/decisions.md): the paper holds out 20 % of the training images for validation "
              "and does not say what it selects on; where that split has ground truth, a method's validation DSC against it "
              "can peak early and fall while its own loss keeps falling. Per method: the fair row (the stopping rule's "
              "weights, test DSC against GT, the result), the validation DSC against GT at the step the rule restored, and at "
              "the evaluation where it was highest, with the gain (95 % t interval over seeds); the validation figures are "
              "chosen and measured on the same images, so they flatter the reading. Last, the test DSC against GT of the "
              "weights at that evaluation (seeds that kept them; cells run before the harness kept them have none): the "
              "paper's likely practice, shown beside the fair row, never in its place."),
        ("table", ["setting", "method", "seeds", "fair row: test DSC", "validation DSC at the rule's step", "validation DSC at the "
                   "GT-best step", "gain [95 % CI]", "test DSC at the GT-best step (seeds)"], rows),
    ]  # fmt: skip


def _pm(mean: float, sd: float, d: int = 2) -> str:
    return f"{mean:.{d}f}" if math.isnan(sd) else f"{mean:.{d}f} ± {sd:.{d}f}"


def _measured(e: Entry, d: int = 2) -> str:
    m = e.measured
    return f"{m.mean:.{d}f}" if m.n == 0 else f"{_pm(m.mean, m.sd, d)} ({m.n})"
