"""REPRODUCTION.md and a self-contained REPRODUCTION.html from an `Assessment` (bench/reproduce/assessment.py).

The page is a list of blocks (bench/reproduce/page_format.py) written twice: as Markdown with relative links to the
figures, and as one HTML file with the figures embedded (base64), which a browser opens offline. It is read top-down in
a minute, its first screen enough to stop after: a red banner where any rater setting is a pipeline check (which, and
why); the headline, one line of numbers per paper table (LF-Net's measured value and interval against the paper's, its
verdict, the best method measured here, the table's verdict counts) and the claims' verdicts; what was run where (budget,
seeds, split sizes, run options, rater settings, machine, software, from the cells' config.json and manifest.json); the
contents; the verdict rules, folded. Then per paper table its values not run in one line, and per rater setting the
measured values with their verdicts, the ranking (with its bootstrap uncertainty, bench/report/ranking.py), every pair
compared (bench/report/significance.py) with the ranks under three schemes, and the figures behind them side by side;
each missing dataset's instructions once; the claims, the numbers of the text, LF-Net's declared readings, the selection
reading, and the run's configuration per rater setting where there are several.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pandas as pd

from bench import files
from bench.evaluate.long_table import mean_sd, select
from bench.report import table_notes
from bench.report.intervals import interval, value_range
from bench.report.ranking import SCHEMES
from bench.report.rows import display
from bench.report.table_notes import MIN_SEEDS
from bench.report.table_text import FLAG_NOTE
from bench.reproduce.assessment import Assessment
from bench.reproduce.page_figures import N_BOOT, TEST, ColumnRanking, column_name, figure_files, rank_columns, tau_text
from bench.reproduce.page_format import Block, plural, to_html, to_markdown, verdict_of
from bench.reproduce.page_sections import (
    claims_blocks,
    datasets_blocks,
    delta_cell,
    measured_text,
    numbers_blocks,
    readings_blocks,
    selection_blocks,
    set_metrics_blocks,
    versus,
)
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
    pipeline_reasons,
)
from bench.study import Study

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
    cells = provenance(assessment.folder or assessment.results)
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
        (
            "p",
            f"*{paper.title}*. Every paper number below cites the line of the paper's LaTeX it comes from (`{paper.source}`, "
            "study file paper_figures/lfnet_paper.toml).",
        ),
        *banner_blocks(cells),
        ("h", 2, "Headline"),
        ("list", headline(a)),
        ("table", ["run", "as the cells recorded it", "run", "as the cells recorded it"], side_by_side(banner(a, cells))),
        ("h", 2, "Contents"),
        ("toc",),
        (
            "details",
            "**How verdicts are given**: the rules, stated before any number, for values, claims, paired comparisons and rankings",
            [
                ("p", VALUE_RULE),
                ("p", CLAIM_RULE),
                (
                    "p",
                    f"Paired comparisons on this page are the {TEST}: Δ is the difference of two methods' means with its 95 % "
                    "interval and its p, Holm-adjusted once per column over the column's registered comparisons (the same p in "
                    "every table, box plot and claim; the measured best method against the reference method reads it too, so "
                    "choosing the best after the fact is covered); where p ≥ 0.05 the page gives the seeds per method at which a "
                    "true gap of that size would be found with 80 % power. Every interval names its seeds (n) and degrees of "
                    "freedom (df); one wider than the metric's range is not estimable with so few seeds and is not printed. "
                    "A column's ranking is shown with its uncertainty: each method's rank over "
                    f"{N_BOOT} two-level bootstrap resamples (test cases, the same draw for every method, then each method's "
                    "seed level from Student's t on its seeds, as the paired test's seed term: for two identical methods at 3 "
                    "seeds one is at rank 1 in ≥ 95 % of resamples in under 5 % of columns), and Kendall's τ with the paper's "
                    "order with its 95 % bootstrap interval. Every pair of the methods with two or more seeds is compared too "
                    "(the significance map, Holm over all the column's pairs, a family of its own), and their ranks are given "
                    f"under three schemes ({', '.join(SCHEMES)}: the last counts each method's significant wins in the map).",
                ),
            ],
        ),
    ]
    shown: set[Path] = set()  # a figure is embedded once, under the first table that shows its group
    for t in a.tables:
        if any(g.entries for g in t.groups):  # a table with no cells at all is named in the headline and under Datasets
            blocks += table_blocks(paper, t, figs, out_dir, shown, cells, ranks, a.logs, a.stops)
    blocks += set_metrics_blocks(a, cells)
    blocks += datasets_blocks(a)
    blocks += claims_blocks(a)
    blocks += numbers_blocks(a)
    blocks += readings_blocks(a)
    blocks += selection_blocks(a)
    blocks += configuration_blocks(cells)
    return blocks


def side_by_side(rows: list[list[str]]) -> list[list[str]]:
    """Two-column rows folded into four columns, two rows side by side (the run table at half the height)."""
    rows = rows + [["", ""]] * (len(rows) % 2)
    return [rows[i] + rows[i + 1] for i in range(0, len(rows), 2)]


def banner_blocks(cells: pd.DataFrame) -> list[Block]:
    """The red line across the top of the page where any rater setting's cells are a pipeline check (`pipeline_reasons`),
    naming each such setting and why; none where every setting is verdict grade."""
    checks = {(d, r): reasons for (d, r), part in cells.groupby(["dataset", "raters"], sort=True) if (reasons := pipeline_reasons(part))}
    if not checks:
        return []
    where = "; ".join(f"{d} `{r}`: {', '.join(reasons)}" for (d, r), reasons in checks.items())
    settings = cells[["dataset", "raters"]].drop_duplicates()
    scope = (
        "every value and claim below"
        if len(checks) == len(settings)
        else "the values and claims of these settings (the others are verdict grade)"
    )
    return [
        (
            "banner",
            f"Pipeline check, not a verdict: {where}. It tests that {scope} can be computed, not whether the paper "
            f"reproduces; verdicts need a budget other than `quick`, at least {MIN_SEEDS} seeds per method and no "
            "`--max-steps`, `--train-size` or `--test-size`.",
        )
    ]


def headline(a: Assessment) -> list[str]:
    """The headline as sentences (the page's list at its top; `bench report` prints them): the protocol, one line of
    numbers per paper table that was measured (`table_line`), the tables not run, the claims' verdicts."""
    lines = [f"Every verdict stands {a.protocol}"] if a.protocol else []
    lines += [line for t in a.tables if (line := table_line(a.study, t, a.stops))]
    flagged = {f"{display(a.study, m)} [{flag}]" for group in a.stops.values() for m, flag in group.items()}
    if flagged:
        lines.append(f"Not shown to be at their best by the stop audit of {a.audit}: {', '.join(sorted(flagged))} (bench audit-stops)")
    absent = [t for t in a.tables if not any(g.entries for g in t.groups)]
    if absent:
        datasets = list(dict.fromkeys(d for t in absent for d in t.not_run))
        lines.append(
            f"Not run: {', '.join(f'{t.table.label} ({t.table.title})' for t in absent)}: no cells of {', '.join(datasets)} (see Datasets)"
        )
    by: dict[str, list[str]] = {}
    for c in a.claims:
        by.setdefault(verdict_of(c.verdict), []).append(f"`{c.claim.id}`")
    order = [*CLAIM_VERDICTS, *(v for v in by if v not in CLAIM_VERDICTS)]
    counted = ("not run", "not checkable")  # named in the claims' section
    parts = [f"{v} {len(by[v])}" + ("" if v in counted else f" ({', '.join(by[v])})") for v in order if v in by]
    if parts:
        lines.append(f"Claims of the text: {'; '.join(parts)}")
    return lines


def table_line(paper: Study, t: TableReport, stops: dict | None = None) -> str:
    """One paper table's headline, "" where nothing of it was measured: its first measured column under the setting
    identified as the paper's, the reference method's value (the best measured one's where it did not run) with its
    interval, the paper's value and the Δ interval the verdict reads (none beside a stand-in's: another dataset's), its
    verdict, the best method measured here (among two or more); then the table's verdict counts. A value
    whose method's stop audit does not pass (`stops`, `Assessment.stops`) carries its flag."""
    for g in t.groups:
        if not is_paper_setting(paper, g):
            continue
        for j, entries in sorted(g.entries.items()):
            trained = [e for e in entries if e.measured and e.measured.n and e.method != "average"]
            if not trained:
                continue
            column, r = t.table.columns[j], g.ranking.get(j, {})
            reference = paper.reference_method
            e = next((e for e in trained if e.method == reference), None) or next(
                (e for e in trained if e.method == r.get("winner")), trained[0]
            )
            if is_stand_in(g):  # another dataset's paper value beside this one would read as a comparison
                against = f": **{e.verdict}** (a stand-in for {column.dataset}: no comparison with the paper's value)"
            elif e.paper:
                against = f" vs paper {mean_sd(*e.paper, digits(column.metric))}: Δ {delta_text(e, column.metric)}: **{e.verdict}**"
            else:
                against = ", not a row of the paper's table: no verdict"
            flag = f" [{g.degenerate[e.method]}: its mean measures nothing]" if e.method in g.degenerate else ""
            stopped = (stops or {}).get((g.dataset, g.raters, "protocol"), {})  # {method: stop-audit flag}
            flag += f" [{stopped[e.method]}]" if e.method in stopped else ""
            text = (
                f"**{t.table.label}** ({column.dataset} {column_name(column)}, on {g.dataset} `{g.raters}`): "
                f"{value_text(paper, e, column.metric)}{flag}{against}"
            )
            best = next((x for x in trained if x.method == r.get("winner")), None)
            if best is not None and best is not e:
                test = r.get("test") or {}
                p = test.get("p_holm", math.nan)
                best_flag = f" [{stopped[best.method]}]" if best.method in stopped else ""
                text += f"; best here {display(paper, best.method)}{best_flag} {best.measured.mean:.{digits(column.metric)}f}"
                text += "" if math.isnan(p) else f" (Holm p {p:.2g} against {display(paper, test['reference_method'])})"
            elif best is e and len(trained) > 1:
                text += "; the best measured here"
            counts = table_counts(paper, t)
            return text + ". Values: " + ", ".join(f"{counts[v]} {v}" for v in VALUE_VERDICTS if counts[v]) + "."
    return ""


def delta_text(e: Entry, metric: str) -> str:
    """ "−14.31 [−17.06, −11.56]": measured − paper with the 95 % interval the verdict reads (`Entry.delta`), or the
    difference alone where there is none (one seed)."""
    d = digits(metric)
    diff, low, high = e.delta if e.delta else (e.measured.mean - e.paper[0], math.nan, math.nan)
    if math.isnan(low):
        return f"{diff:+.{d}f} (no interval with 1 seed)"
    return f"{diff:+.{d}f} [{low:+.{d}f}, {high:+.{d}f}]"


def value_text(paper: Study, e: Entry, metric: str) -> str:
    """ "LF-Net 89.20 [88.10, 90.30] (n 3, df 2)", or "LF-Net 92.93 (no interval with 1 seed)": a measured value with its
    interval (`interval`, in the range of `metric`)."""
    m, d = e.measured, digits(metric)
    shown = interval(m.ci[0], m.ci[1], m.n, m.n - 1, d, value_range(metric))
    return f"{display(paper, e.method)} {m.mean:.{d}f} " + (shown if shown.startswith("[") else f"({shown})")


def table_counts(paper: Study, t: TableReport) -> Counter:
    """How many of a paper table's values (trained methods, not the Average row) got each verdict under the setting
    identified as the paper's; a column without such a group counts its values as not run."""
    counts: Counter = Counter()
    for j, _ in enumerate(t.table.columns):
        groups = [g for g in t.groups if j in g.entries and is_paper_setting(paper, g)]
        if not groups:
            counts["not run"] += sum(1 for r in t.table.rows if r.method != "average" and t.table.value(r.method, j))
        for g in groups:
            counts.update(verdict_of(e.verdict) for e in g.entries[j] if e.paper and e.method != "average")
    return counts


def not_run_line(paper: Study, t: TableReport) -> str:
    """The values of a paper table that were not run, folded into one line: how many, the methods of its rows not trained
    here, the columns whose dataset has no cells (their instructions are in the Datasets section, once)."""
    n = table_counts(paper, t)["not run"]
    if not n:
        return ""
    methods = list(
        dict.fromkeys(
            e.method
            for g in t.groups
            if is_paper_setting(paper, g)
            for rows in g.entries.values()
            for e in rows
            if e.paper and not e.measured and e.method != "average"
        )
    )
    parts = [f"{', '.join(display(paper, m) for m in methods)} not trained here"] if methods else []
    absent = list(t.not_run)
    if absent:
        parts.append(f"no cells of {', '.join(absent)} (see [Datasets](#datasets))")
    return f"**{plural(n, 'value')} not run**: {'; '.join(parts)}."


def has_curves(logs: pd.DataFrame, dataset: str, raters: str) -> bool:
    """Whether a rater setting's training logs (at the protocol) have two or more evaluations of some stage: a learning
    curve to draw. A smoke run's step cap often leaves one."""
    if logs.empty:
        return False
    evals = select(logs, dataset=dataset, raters=raters, noise="protocol", event="eval")
    return bool(len(evals)) and evals.groupby(["method", "seed", "stage"])["step"].nunique().max() >= 2


def table_blocks(
    paper: Study,
    t: TableReport,
    figs: dict,
    out_dir: Path,
    shown: set[Path],
    cells: pd.DataFrame,
    ranks: dict,
    logs: pd.DataFrame | None = None,
    stops: dict | None = None,
) -> list[Block]:
    """A paper table's section: its not-run values in one line, then per rater setting its group line and per column the
    measured rows (flagged as the report's tables flag them: `table_notes.row_flags`, `stops` the stop audit's flags), the ranking line,
    the significance map's summary and the ranking schemes; the setting's figures in one row of figures at its end (the
    learning curves only where `logs`, the training logs, hold a curve)."""
    logs = pd.DataFrame() if logs is None else logs
    blocks: list[Block] = [("h", 2, f"{t.table.label}: {t.table.title} (line {t.table.line})")]
    if line := not_run_line(paper, t):
        blocks.append(("p", line))
    for g in t.groups:
        blocks += [("h", 3, f"{g.dataset}, raters `{g.raters}`: {g.kind}"), ("p", group_line(g))]
        flags = table_notes.row_flags(cells, stops, g.dataset, g.raters, "protocol")
        gallery: list[tuple[Path, str]] = []
        for j, rows in sorted(g.entries.items()):
            column = t.table.columns[j]
            blocks.append(
                ("p", f"**{column.dataset} {column_name(column)}**, paper units" + (" (%)" if column.metric != "bahd" else " (pixels)"))
            )
            extra = g.extra.get(j, pd.DataFrame()) if column.metric == "dsc" else pd.DataFrame()
            measured = [e for e in rows if e.measured]  # the rows not run are counted in the table's line
            if not measured:
                blocks.append(("p", "No method of this column was measured here."))
                continue
            blocks.append(
                (
                    "table",
                    [
                        "method",
                        "paper",
                        "measured (n seeds)",
                        "95 % CI (n seeds, df)",
                        "Δ measured − paper [95 % CI]",
                        "verdict",
                        "precision / recall / area",
                    ],
                    [entry_row(paper, e, extra, column.metric, stand_in=is_stand_in(g), flag=flags.get(e.method, "")) for e in measured],
                )
            )
            key = (t.table.id, g.dataset, g.raters, j)
            r = ranks.get(key)
            pairs = pairs_blocks(paper, r) if r is not None else []
            if pairs and len(pairs) == 1:  # one line: after the ranking's, in its paragraph
                blocks.append(("p", f"{ranking_line(paper, g.ranking.get(j, {}), r)}. {pairs[0][1]}"))
            else:
                blocks += [("p", ranking_line(paper, g.ranking.get(j, {}), r)), *pairs]
            gallery += [*figs.get(("ranks", *key), []), *figs.get(("significance", *key), [])]
        if flags:
            blocks.append(("p", FLAG_NOTE + "."))
        kinds = ("boxplot", "curves", "fused") if has_curves(logs, g.dataset, g.raters) else ("boxplot", "fused")
        paths = [shown_ for kind in kinds for shown_ in figs.get((kind, g.dataset, g.raters), [])]
        if any(path in shown for path, _ in paths):
            blocks.append(("p", f"The box plots, learning curves and fused labels of {g.dataset} `{g.raters}` are shown above."))
        elif "curves" not in kinds and figs.get(("curves", g.dataset, g.raters)):
            files_ = ", ".join(path.relative_to(out_dir).as_posix() for path, _ in figs[("curves", g.dataset, g.raters)])
            blocks.append(("p", f"Learning curves: one evaluation per training stage, no curve to draw ({files_})."))
        gallery += [(path, caption) for path, caption in paths if path not in shown]
        shown.update(path for path, _ in paths)
        if gallery:
            blocks.append(("figures", [(path.relative_to(out_dir), caption) for path, caption in gallery]))
    return blocks


def pairs_blocks(paper: Study, r: ColumnRanking) -> list[Block]:
    """Every pair of a column (its significance map) in one line, and its ranks under the three schemes: one line where
    they agree, a table where they do not; a note where fewer than two methods have two seeds."""
    sig = r.significance
    if sig is None:
        seeds = ", ".join(f"{display(paper, m)} {n}" for m, n in r.seeds.items())
        return [("p", f"Every pair: no significance map, it needs two methods with 2 or more seeds each (seeds here: {seeds}).")]
    resolved = [f"{display(paper, a)} > {display(paper, b)}" for a in sig.methods for b in sig.methods if sig.better.loc[a, b]]
    n_pairs = len(sig.tests)
    test = TEST.split(" (")[0]
    family = f"the one pair, {test}" if n_pairs == 1 else f"{plural(n_pairs, 'pair')}, {test}, Holm over the {n_pairs} pairs"
    text = (
        f"Every pair ({family}): "
        + (f"resolved {', '.join(resolved)}" if resolved else "none resolved")
        + (f"; {n_pairs - len(resolved)} not resolved" if resolved and len(resolved) < n_pairs else "")
        + "."
    )
    schemes = r.schemes
    if (schemes.nunique(axis=1) == 1).all():
        order = schemes["mean-then-rank"].sort_values(kind="stable")
        return [
            (
                "p",
                text
                + " Ranks agree under the three schemes ("
                + ", ".join(SCHEMES)
                + "): "
                + ", ".join(f"{rank} {display(paper, m)}" for m, rank in order.items())
                + ".",
            )
        ]
    rows = [
        [display(paper, m), *(str(schemes.loc[m, s]) for s in SCHEMES)] for m in schemes.sort_values("mean-then-rank", kind="stable").index
    ]
    return [("p", text + " Ranks differ by scheme:"), ("table", ["method", *SCHEMES], rows)]


def group_line(g: Group) -> str:
    quick = " (a pipeline check)" if "quick" in g.budget else ""  # the note names the other reasons (bench.reproduce.verdicts.group_for)
    parts = [g.note or "—", f"budget {g.budget}{quick}", f"stopped by: {g.stops or '—'}"]
    labels = g.labels
    if labels:
        parts.append(
            f"pool (no training): Average {100 * labels['average']:.2f}, majority-vote label {100 * labels['majority']:.2f} "
            f"({labels['majority_area_ratio']:.2f}× GT area), STAPLE label {100 * labels['staple']:.2f} "
            f"({labels['staple_area_ratio']:.2f}×)"
        )
    return "; ".join(parts)


def entry_row(paper: Study, e: Entry, extra: pd.DataFrame, metric: str = "dsc", stand_in: bool = False, flag: str = "") -> list[str]:
    """One method's row: paper value, measured mean ± sd (n), its CI, Δ to the paper (blank on a stand-in dataset), verdict,
    precision / recall / area; a degenerate-prediction flag follows the method's name. Intervals by `interval`, in the
    range of `metric`."""
    m, p, d = e.measured, e.paper, digits(metric)
    delta = "" if stand_in else delta_cell(e, d, metric)
    ci = interval(m.ci[0], m.ci[1], m.n, m.n - 1, d, value_range(metric)) if m else "–"
    pra = "–"
    if e.method in extra.index:
        r = extra.loc[e.method]
        pra = " / ".join("–" if pd.isna(r[k]) else f"{r[k]:.2f}" for k in ("precision", "recall", "area"))  # precision: none predicted
    label = (display(paper, e.method) if e.method != "average" else "*Average*") + (f" [{flag}]" if flag else "")
    return [label, mean_sd(*p, d) if p else "–", measured_text(e, d) if m else "–", ci, delta, e.verdict, pra]


def ranking_line(paper: Study, r: dict, ranks: ColumnRanking | None = None) -> str:
    """τ with its interval, the winners, and the measured best method against the reference method (`versus`)."""
    parts = []
    if ranks is not None and ranks.n_tau >= 3:
        parts.append(tau_text(ranks))
    elif "tau" in r:
        parts.append(f"Kendall τ with the paper's order {r['tau']:.2f} ({r['n']} methods)")
    if r.get("winner"):
        parts.append(
            f"best measured: {display(paper, r['winner'])} (paper: {display(paper, r['paper_winner']) if r.get('paper_winner') else '–'})"
        )
    test = r.get("test")
    if test:
        other, reference = display(paper, test["method"]), display(paper, test["reference_method"])
        parts.append(f"{other} vs {reference} by the {TEST}: {versus(paper, test, r['scale'], test['method'])}")
    return "; ".join(parts) or "no ranking: fewer than three methods with a paper value"
