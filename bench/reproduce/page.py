"""REPRODUCTION.md and a self-contained REPRODUCTION.html from an `Assessment` (bench/reproduce/assessment.py).

The page is a list of blocks (heading, paragraph, list, table, figure, table of contents) written twice: as Markdown
with relative links to the figures, and as one HTML file with the figures embedded (base64), which a browser opens
offline. It is read top-down in a minute: a banner saying what was run where (budget, seeds, split sizes, run options,
rater settings, machine, software, from the cells' config.json and manifest.json), the headline as counts of verdicts,
the contents, the verdict rules, then per paper table the values with their verdicts, the ranking (with its bootstrap
uncertainty, bench/report/ranking.py) and the figures behind them, the claims, the numbers of the text, LF-Net's declared
readings, and the run's configuration per rater setting.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pandas as pd

from bench import files
from bench.evaluate.long_table import mean_sd
from bench.report import tables
from bench.report.intervals import difference_range, interval, value_range
from bench.report.rows import display
from bench.reproduce.assessment import Assessment
from bench.reproduce.page_figures import N_BOOT, TEST, ColumnRanking, column_name, figure_files, rank_columns, tau_text
from bench.reproduce.page_format import Block, to_html, to_markdown, verdict_of
from bench.reproduce.provenance import banner, configuration_blocks, is_stand_in, provenance
from bench.reproduce.verdicts import (
    CLAIM_RULE,
    UNATTAINABLE,
    VALUE_RULE,
    Entry,
    Group,
    TableReport,
    digits,
    is_paper_setting,
    scale,
)

#: Verdicts in the order the headline counts them.
VALUE_VERDICTS = ("reproduced", "not reproduced", "inconclusive", UNATTAINABLE, "pipeline check", "not comparable", "not run")
CLAIM_VERDICTS = (
    "holds",
    "does not hold",
    "no material difference",
    "inconclusive",
    "incomplete",
    "pipeline check",
    "not run",
    "not checkable",
)


def write(assessment: Assessment, out_dir: Path, data_root: Path) -> list[Path]:
    """Render the assessment and its figures into `out_dir`; returns the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    cells = provenance(assessment.results)
    ranks = rank_columns(assessment, cells)
    figs = figure_files(assessment, out_dir / "figures", data_root, cells, ranks)
    blocks = page(assessment, figs, out_dir, cells, ranks)
    md, page_html = out_dir / "REPRODUCTION.md", out_dir / "REPRODUCTION.html"
    files.write_text(md, to_markdown(blocks))
    files.write_text(page_html, to_html(blocks, out_dir, assessment.study.title))
    return [md, page_html, *(path for shown in figs.values() for path, _ in shown)]


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
              "interval and its p, Holm-adjusted once per column over the column's registered comparisons (the same p in "
              "every table, box plot and claim; the measured best method against the reference method reads it too, so "
              "choosing the best after the fact is covered); where p ≥ 0.05 the page gives the seeds per method at which a "
              "true gap of that size would be found with 80 % power. "
              "A column's ranking is shown with its uncertainty: each method's rank over "
              f"{N_BOOT} two-level bootstrap resamples (test cases, the same draw for every method, then each method's "
              "seed level from Student's t on its seeds, as the paired test's seed term: for two identical methods at 3 "
              "seeds one is at rank 1 in ≥ 95 % of resamples in under 5 % of columns), and Kendall's τ with the paper's "
              "order with its 95 % bootstrap interval."),
    ]  # fmt: skip
    shown: set[Path] = set()  # a figure is embedded once, under the first table that shows its group
    for t in a.tables:
        blocks += table_blocks(t, figs, out_dir, shown, cells, ranks)
    blocks += [("h", 2, "Claims of the text")]
    for c in a.claims:
        blocks += [("p", f"**{c.verdict}** — {c.claim.text} (`{c.claim.id}`, line {c.claim.line})"), ("list", c.evidence or ["—"])]
    blocks += [("h", 2, "Numbers of the text"), ("table", ["line", "what", "paper", "measured", "verdict"], [
        [str(v.line), v.text, mean_sd(v.mean, v.sd), _measured(e) if e and e.measured else "–", (e.verdict if e else "not run") + (f" ({g.note})" if g else "")]
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
            blocks.append(("table", ["method", "paper", "measured (n seeds)", "95 % CI (n seeds, df)", "Δ measured − paper [95 % CI]",
                                     "verdict", "precision / recall / area"],
                           [entry_row(e, extra, column.metric, stand_in=is_stand_in(g), flag=flags.get(e.method, "")) for e in rows]))  # fmt: skip
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


def entry_row(e: Entry, extra: pd.DataFrame, metric: str = "dsc", stand_in: bool = False, flag: str = "") -> list[str]:
    """One method's row: paper value, measured mean ± sd (n), its CI, Δ to the paper (blank on a stand-in dataset), verdict,
    precision / recall / area; a degenerate-prediction flag follows the method's name. Intervals by `interval`, in the
    range of `metric`."""
    m, p, d = e.measured, e.paper, digits(metric)
    delta = "" if stand_in else _delta(e, d, metric)
    ci = interval(m.ci[0], m.ci[1], m.n, m.n - 1, d, value_range(metric)) if m else "–"
    pra = "–"
    if e.method in extra.index:
        r = extra.loc[e.method]
        pra = " / ".join("–" if pd.isna(r[k]) else f"{r[k]:.2f}" for k in ("precision", "recall", "area"))  # precision: none predicted
    label = (display(e.method) if e.method != "average" else "*Average*") + (f" [{flag}]" if flag else "")
    return [label, mean_sd(*p, d) if p else "–", _measured(e, d) if m else "–", ci, delta, e.verdict, pra]


def _delta(e: Entry, d: int, metric: str) -> str:
    """Measured − paper with its 95 % interval where the verdict computed one (`Entry.delta`; df those of the measured
    side), else the difference alone."""
    if not (e.measured and e.paper):
        return "–"
    delta = getattr(e, "delta", None)
    if delta is None:
        return f"{e.measured.mean - e.paper[0]:+.{d}f}"
    diff, low, high = delta
    n = e.measured.n
    return f"{diff:+.{d}f} " + interval(low, high, n, n - 1, d, difference_range(metric), signed=True)


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
    seeds per method at which a true gap of that size would be found with 80 % power where p ≥ 0.05. Which test it is
    (`TEST`) the caller says once.

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
    p = test["p_holm"]
    if math.isnan(p):  # one seed of either method: the seed-to-seed spread is unknown
        return f"Δ {diff:+.{places}f}{unit}{side}, no p-value (it needs two seeds of each method)"
    low, high = sorted(sign * factor * test[k] for k in ("ci_low", "ci_high"))
    seeds = (int(test["n_seeds_ref"]), int(test["n_seeds"]))
    shown = interval(low, high, seeds, test["df"], places, difference_range(test["metric"]), signed=True)
    text = f"Δ {diff:+.{places}f}{unit} {shown}{side}, p {p:.2g}"
    needed = test.get("seeds_needed", math.nan)
    if p >= 0.05 and needed is not None and not math.isnan(needed):
        text += (
            ", more test cases needed to find a gap of this size"
            if math.isinf(needed)
            else f", a true gap of this size found with 80 % power at about {int(needed)} seeds per method"
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
              f"(Δ of the means with its 95 % interval, {TEST}, Holm over the column's comparisons); precision / recall / predicted "
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
             mean_sd(r.test_dsc, r.test_sd), f"{mean_sd(r.rule_dsc, r.rule_sd)} (step {r.rule_step})", f"{mean_sd(r.gt_dsc, r.gt_sd)} (step {r.gt_step})",
             f"{r.gain:+.2f} " + interval(r.gain_low, r.gain_high, r.seeds, r.seeds - 1, 2, difference_range("dsc"), signed=True),
             f"{mean_sd(r.gt_test_dsc, r.gt_test_sd)} ({r.gt_test_seeds})" if r.gt_test_seeds else "not kept"] for r in a.selection.itertuples()]  # fmt: skip
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
                   "GT-best step", "gain [95 % CI] (n seeds, df)", "test DSC at the GT-best step (seeds)"], rows),
    ]  # fmt: skip


def _measured(e: Entry, d: int = 2) -> str:
    m = e.measured
    return f"{m.mean:.{d}f}" if m.n == 0 else f"{mean_sd(m.mean, m.sd, d)} ({m.n})"
