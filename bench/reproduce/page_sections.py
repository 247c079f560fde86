"""The sections of the reproduction page after its paper tables (bench/reproduce/page.py): the set metrics of the methods
with samples or per-rater outputs, the missing datasets (each once), the claims, the numbers of the text, LF-Net's
declared readings and the selection reading; and `versus` and `delta_cell`, the texts of one paired test and of a table's difference to the paper."""

from __future__ import annotations

import math

import pandas as pd

from bench.evaluate import long_table
from bench.evaluate.long_table import mean_sd, select
from bench.report import table_notes, tables
from bench.report.intervals import difference_range, interval
from bench.report.rows import display
from bench.report.table_text import markdown_rows
from bench.reproduce.assessment import Assessment
from bench.reproduce.page_figures import TEST
from bench.reproduce.page_format import Block, plural
from bench.reproduce.verdicts import Entry, scale
from bench.study import Study


def set_metrics_blocks(a: Assessment, cells: pd.DataFrame) -> list[Block]:
    """The field's metrics (GED, its unbiased form, Dice_match, Dice_max, Dice_soft, Dice_personal against the rater set,
    each with its M) of every rater setting where a method with samples or per-rater outputs ran: the report's set-metrics
    table (bench/report/tables.py `set_metrics_table`, bold only on a best the seed-aware test resolves), its run line and
    notes; nothing where no such method ran."""
    if a.table.empty or "n_samples" not in a.table:
        return []
    protocol = a.table[(a.table["noise"] == "protocol")]
    summary = long_table.summarise(protocol)
    blocks: list[Block] = []
    for dataset, raters in protocol[["dataset", "raters"]].drop_duplicates().sort_values(["dataset", "raters"]).itertuples(index=False):
        here = select(cells, dataset=dataset, raters=raters, noise="protocol")
        flags = table_notes.row_flags(cells, a.stops, dataset, raters, "protocol")
        table = tables.set_metrics_table(a.study, summary, protocol, dataset, raters, "protocol", flags, here)
        if table is None:
            continue
        run = [("p", table.run)] if table.run else []
        blocks += [("h", 3, f"{dataset}, raters `{raters}`"), *run, ("table", *markdown_rows(table)), *(("p", n) for n in table.notes)]
    if not blocks:
        return []
    return [
        ("h", 2, "Set metrics against the rater set"),
        (
            "p",
            "Where a method drew samples or gave one output per rater: how its set of segmentations matches the raters' "
            "set (GED ↓ and its unbiased form, Dice_match, Dice_max, Dice_soft, Dice_personal ↑, mean ± std over seeds, "
            "M the segmentations scored per test image; docs/methods.md). Not numbers of the paper: no verdict.",
        ),
        *blocks,
    ]


def datasets_blocks(a: Assessment) -> list[Block]:
    """Each dataset a paper table needs that has no cells here, once, with the tables that need it and why: not found
    under the data root (where its files go) or not run."""
    why: dict[str, tuple[str, list[str]]] = {}
    for t in a.tables:
        for dataset, reason in t.not_run.items():
            why.setdefault(dataset, (reason.removeprefix("not run: "), []))[1].append(t.table.label)
    if not why:
        return []
    items = [f"**{dataset}** (needed by {', '.join(dict.fromkeys(labels))}): {reason}" for dataset, (reason, labels) in why.items()]
    return [
        ("h", 2, "Datasets"),
        ("p", "The datasets of the paper's tables that have no cells in this results folder, each once:"),
        ("list", items),
    ]


def claims_blocks(a: Assessment) -> list[Block]:
    """Each claim that was checked with its verdict, its evidence folded under it; the claims not run and those the text
    gives nothing to check for, one line each."""
    blocks: list[Block] = [("h", 2, "Claims of the text")]
    folded = {"not run": [], "not checkable": []}
    for c in a.claims:
        if c.verdict in folded:
            folded[c.verdict].append(c)
            continue
        blocks.append(
            (
                "details",
                f"**{c.verdict}** — {c.claim.text} (`{c.claim.id}`, line {c.claim.line})",
                [("list", fold_evidence(c.evidence) or ["—"])],
            )
        )
    if folded["not run"]:
        blocks.append(
            (
                "p",
                f"**not run** ({plural(len(folded['not run']), 'claim')}: no cell measures them): "
                + ", ".join(f"`{c.claim.id}` (line {c.claim.line})" for c in folded["not run"]),
            )
        )
    if folded["not checkable"]:
        blocks.append(
            (
                "details",
                f"**not checkable** ({plural(len(folded['not checkable']), 'claim')}): "
                + ", ".join(f"`{c.claim.id}`" for c in folded["not checkable"]),
                [
                    (
                        "list",
                        [
                            f"`{c.claim.id}` (line {c.claim.line}): {c.claim.text} — {'; '.join(c.evidence)}"
                            for c in folded["not checkable"]
                        ],
                    )
                ],
            )
        )
    return blocks


def fold_evidence(lines: list[str]) -> list[str]:
    """A claim's evidence with its parts that were not run ("Table I ms-lesion dsc: not run") folded into one line."""
    missing = [line.removesuffix(": not run") for line in lines if line.endswith(": not run")]
    kept = [line for line in lines if not line.endswith(": not run")]
    return kept + ([f"not run: {', '.join(missing)}"] if missing else [])


def numbers_blocks(a: Assessment) -> list[Block]:
    """The numbers of the text beside what was measured; those with no measurement folded into one line per verdict
    ("not run", "not comparable: …")."""
    rows = [
        [str(v.line), v.text, mean_sd(v.mean, v.sd), measured_text(e), e.verdict + (f" ({g.note})" if g else "")]
        for v, g, e in a.values
        if e is not None and e.measured
    ]
    unmeasured: dict[str, list] = {}
    for v, _, e in a.values:
        if e is None or not e.measured:
            unmeasured.setdefault(e.verdict if e is not None else "not run", []).append(v)
    blocks: list[Block] = [("h", 2, "Numbers of the text")]
    if rows:
        blocks.append(("table", ["line", "what", "paper", "measured", "verdict"], rows))
    for verdict, values in unmeasured.items():
        head, _, why = verdict.partition(": ")
        blocks.append(
            (
                "p",
                f"**{plural(len(values), 'number')} {head}**{f' ({why})' if why else ''}: "
                + "; ".join(f"{v.text} {mean_sd(v.mean, v.sd)} (line {v.line})" for v in values)
                + ".",
            )
        )
    return blocks


def versus(paper: Study, test: dict, factor: float, favoured: str, named: bool = True) -> str:
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
    side = f" in {display(paper, favoured)}'s favour" if named else ""
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
    head = [
        ("h", 2, "LF-Net's declared readings"),
        (
            "details",
            f"{plural(len(a.study.readings), 'reading')} declared before any was run (docs/decisions.md): "
            + ", ".join(f"`{r['method']}`" for r in a.study.readings),
            [("list", [f"`{r['method']}` (line {r['line']}): {r['text']}" for r in a.study.readings])],
        ),
    ]
    if not a.readings:
        return [
            *head,
            ("p", "No cells of these readings in this results folder (python -m bench run --methods readings --budget plateau)."),
        ]
    first = a.study.readings[0]["method"]
    rows = []
    for r in a.readings:
        test, ar = r["test"], r["areas"]
        against = versus(a.study, test, scale("dsc"), r["method"], named=False) if test else "–"
        prf = " / ".join(f"{ar[k]:.2f}" for k in ("precision", "recall", "area")) if ar else "–"
        teacher = f"{r['teacher_fg']:.3f} / {r['teacher_bg']:.3f} ({r['teacher_cells']})" if r["teacher_cells"] else "–"
        rows.append(
            [
                f"{r['dataset']} `{r['raters']}`",
                f"`{r['method']}`",
                measured_text(Entry(r["method"], None, r["measured"], "")),
                against,
                prf,
                teacher,
            ]
        )
    return [
        *head,
        (
            "details",
            "What the columns are",
            [
                (
                    "p",
                    f"DSC (%) against each dataset's reference at the protocol; the difference from `{first}` in the reading's favour "
                    f"(Δ of the means with its 95 % interval, {TEST}, Holm over the column's comparisons); precision / recall / predicted "
                    "area ÷ reference area pooled over cases and seeds; the teacher's mean p(fg) on the validation pixels outside the "
                    "threshold-vote mask where GT is foreground / background (GT read after training, a diagnostic). Readings that "
                    "differ only in the segmentation stage train the same soft-label network from the same seed, so their teacher "
                    "columns agree.",
                )
            ],
        ),
        (
            "table",
            [
                "setting",
                "method",
                "DSC (n seeds)",
                f"vs `{first}`: Δ in the reading's favour [95 % CI], Holm p",
                "precision / recall / area",
                "teacher p(fg) outside TV: GT fg / bg (cells)",
            ],
            rows,
        ),
    ]


def selection_blocks(a: Assessment) -> list[Block]:
    """The selection reading (docs/decisions.md): validation GT DSC at the rule's step and at the GT-best evaluation, beside
    the fair row's test DSC; never in place of it."""
    if a.selection.empty:
        return []
    rows = [
        [
            f"{r.dataset} `{r.raters}`" + ("" if r.noise == "protocol" else f" noise {r.noise}"),
            display(a.study, r.method),
            str(r.seeds),
            mean_sd(r.test_dsc, r.test_sd),
            f"{mean_sd(r.rule_dsc, r.rule_sd)} (step {r.rule_step})",
            f"{mean_sd(r.gt_dsc, r.gt_sd)} (step {r.gt_step})",
            f"{r.gain:+.2f} " + interval(r.gain_low, r.gain_high, r.seeds, r.seeds - 1, 2, difference_range("dsc"), signed=True),
            f"{mean_sd(r.gt_test_dsc, r.gt_test_sd)} ({r.gt_test_seeds})" if r.gt_test_seeds else "not kept",
        ]
        for r in a.selection.itertuples()
    ]
    return [
        ("h", 2, "Selection reading: checkpoints chosen on the validation split's ground truth"),
        (
            "details",
            "What this reading is, declared before it was read",
            [
                (
                    "p",
                    "Declared before it was read (docs/decisions.md): the paper holds out 20 % of the training images for validation "
                    "and does not say what it selects on; where that split has ground truth, a method's validation DSC against it "
                    "can peak early and fall while its own loss keeps falling. Per method: the fair row (the stopping rule's "
                    "weights, test DSC against GT, the result), the validation DSC against GT at the step the rule restored, and at "
                    "the evaluation where it was highest, with the gain (95 % t interval over seeds); the validation figures are "
                    "chosen and measured on the same images, so they flatter the reading. Last, the test DSC against GT of the "
                    "weights at that evaluation (seeds that kept them; cells run before the harness kept them have none): the "
                    "paper's likely practice, shown beside the fair row, never in its place.",
                )
            ],
        ),
        (
            "table",
            [
                "setting",
                "method",
                "seeds",
                "fair row: test DSC",
                "validation DSC at the rule's step",
                "validation DSC at the GT-best step",
                "gain [95 % CI] (n seeds, df)",
                "test DSC at the GT-best step (seeds)",
            ],
            rows,
        ),
    ]


def measured_text(e: Entry, d: int = 2) -> str:
    m = e.measured
    return f"{m.mean:.{d}f}" if m.n == 0 else f"{mean_sd(m.mean, m.sd, d)} ({m.n})"


def delta_cell(e: Entry, d: int, metric: str) -> str:
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
