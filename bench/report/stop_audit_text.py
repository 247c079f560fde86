"""The stop audit's text (bench/report/stop_audit.py computes it): stop_audit.md's sections and tables, from the audit's
frames, with each verdict's evidence (the stops, twins, spans and per-rater heads) in words."""

from __future__ import annotations

import math

import pandas as pd

from bench.report.rows import display
from bench.report.stop_logs import CHECKED, CLOSE, FIGURE, LONG_FACTOR, SPANS, TWIN_TOLERANCE, span_label
from bench.report.table_text import markdown_table
from bench.study import Study


def twin_text(twin: bool, diff: float) -> str:
    """The verdict table's reading of `twins`."""
    if math.isnan(diff):
        return "— (no evaluation in common)"
    return f"yes ({diff:.1g})" if twin else f"**no** ({diff:.1g}: other code, device or precision; the replay is not exact)"


def close_text(close: str, clear: str) -> str:
    """The verdict table's reading of `close`: a second seed is due only where the verdict could turn on it, not beside a
    fail that another metric makes clear."""
    if not close:
        return "—"
    return f"{close} (the fail stands on {clear})" if clear else f"{close}: a second seed is due"


def pra(r: dict, suffix: str = "") -> str:
    """Precision / recall / area of a record (`areas`' columns with `suffix`), "–" where one is undefined or absent."""
    return " / ".join("–" if pd.isna(r.get(k + suffix, math.nan)) else f"{r[k + suffix]:.2f}" for k in ("precision", "recall", "area"))


def heads_table(paper: Study, evidence: pd.DataFrame) -> list[str]:
    """The Markdown lines of `heads` under both runs, for the methods with per-rater outputs (none: no lines)."""
    rows = [r for r in evidence.to_dict("records") if pd.notna(r.get("dice_between_rule")) or pd.notna(r.get("dice_between_long"))]
    if not rows:
        return []

    def pct(v: float) -> str:
        return "–" if pd.isna(v) else f"{100 * v:.2f}"

    return [
        "\nWhat training longer does to the per-rater outputs (not judged): Dice_personal (each output against its own rater) "
        "and the outputs' spread (mean Dice between them) beside the raters' own.\n",
        markdown_table(
            ["method", "Dice_personal: rule → long", "Dice between outputs: rule → long", "Dice between raters"],
            [
                [
                    display(paper, r["method"]),
                    f"{pct(r['dice_personal_rule'])} → {pct(r['dice_personal_long'])}",
                    f"{pct(r['dice_between_rule'])} → {pct(r['dice_between_long'])}",
                    pct(r["dice_between_raters_rule"]),
                ]
                for r in rows
            ],
        ),
    ]


def spans_table(paper: Study, sp: pd.DataFrame) -> list[str]:
    """The Markdown lines of `spans`: a row per cell and stage, a column per stretch of the long run (no rows: no lines)."""
    if sp.empty:
        return []
    labels = [span_label(a, b) for a, b in zip(SPANS, SPANS[1:])]
    rows = []
    for (method, seed, stage), part in sp.groupby(["method", "seed", "stage"], sort=False):
        said = {
            r["span"]: f"{r['val_loss']:.4g} at {r['step']:.0f}" + ("" if pd.isna(r["gt_dsc"]) else f"; {r['gt_dsc']:.1f}")
            for r in part.to_dict("records")
        }
        rows.append([display(paper, method), seed, stage, f"{part['rule_stop'].iloc[0]:.0f}", *(said.get(k, "–") for k in labels)])
    return [
        "\nWhat each stretch of the long run bought (not judged): in each stretch of steps, as multiples of the rule's stop, "
        "the lowest validation loss at its step; after the semicolon the mean validation DSC against GT logged there (a "
        "diagnostic that never stops or selects anything).\n",
        markdown_table(["method", "seed", "stage", "rule's stop", *labels], rows),
    ]


def to_markdown(
    paper: Study,
    metrics: pd.DataFrame,
    st: pd.DataFrame,
    verdict: pd.DataFrame,
    command: str,
    replay_name: str,
    evidence: pd.DataFrame,
    waiting: pd.DataFrame,
    stretches: pd.DataFrame,
) -> str:
    """stop_audit.md: the verdicts, the stages and what each stretch of the long runs bought (`spans`), the test metrics,
    their `areas` and `heads` (`evidence`, columns `<name>_rule` and `<name>_long`) and the cells not yet audited
    (`unpaired`), methods named as `paper` names them."""
    verdicts = [
        [
            r.dataset,
            display(paper, r.method),
            r.verdict,
            r.moved or "—",
            close_text(r.close, r.clear),
            f"{r.min_factor:.1f}×" + ("" if r.long_enough else f" (below {LONG_FACTOR}×)"),
            twin_text(r.twins, r.twin_diff),
            r.trained,
        ]
        for r in verdict.itertuples()
    ]
    stages = [
        [
            display(paper, r.method),
            r.stage,
            f"{r.step_rule:.0f} ({r.how_rule})",
            f"{r.restored_step_rule:.0f}, {r.val_loss_rule:.4g}",
            f"{r.step_long:.0f}",
            f"{r.restored_step_long:.0f}, {r.val_loss_long:.4g}",
            f"{r.replay_step:.0f} ({r.replay_how}), {r.replay_restored:.0f}" + (" = long" if r.replay_same else ""),
            f"{r.shared:.0f}, {r.twin_diff:.1g}" if r.shared else "0",
        ]
        for r in st.itertuples()
    ]
    moved, mixed = [], {r.method for r in verdict.itertuples() if " / " in r.trained}  # seeds trained on other CPUs or precisions
    for r in metrics.itertuples():
        k = CHECKED[r.metric][2]
        sd = "–" if math.isnan(r.sd_rule) else f"{r.sd_rule * k:.2f}" + (" ‡" if r.method in mixed else "")
        moved.append(
            [
                display(paper, r.method),
                r.metric,
                f"{r.mean_rule * k:.3f} ({sd}, {r.n_seeds_rule:.0f})",
                f"{r.mean_long * k:.3f} ({r.n_seeds_long:.0f})",
                f"{r.diff * k:+.3f}",
                f"{r.tolerance * k:.3f}",
                "yes" if r.within else "**no**",
                "–" if pd.isna(getattr(r, "spread", math.nan)) else f"{r.spread * k:.2f}",
            ]
        )
    return (
        "\n".join(
            [
                f"# Stop audit\n\nMade by `{command}`. The rule's run beside a fixed long run restored by the same criterion (lowest validation "
                "loss). A method passes when no test metric moves by more than the larger of its seed sd and 1 DSC point / 0.01 GED / "
                "1 Dice_match point. A verdict on one seed is close where a metric moved more than "
                f"{CLOSE[0]:g} and at most {CLOSE[1]:g} times its tolerance: it wants a second seed.\n",
                "## Verdicts\n",
                "Twins: whether the two runs' first stages logged the same validation losses wherever both evaluated "
                f"(largest relative difference; at most {TWIN_TOLERANCE:g}), as one run does up to the rule's stop when both were trained "
                "by the same code on the same device. Trained: device (the CPU's strongest vector extension), precision, threads.\n",
                markdown_table(["dataset", "method", "verdict", "moved", "close on one seed", "long ÷ stop", "twins", "trained"], verdicts),
                "\n## Stages\n",
                f"The replay: the rule ({replay_name}) on the long run's own validation curves (its stop, how, and the step it "
                'restores; "= long" where that is the long run\'s restored step in every seed, so both hold the same weights).\n',
                markdown_table(
                    [
                        "method",
                        "stage",
                        "rule: stop (how)",
                        "rule: restored step, val loss",
                        "long: steps",
                        "long: restored step, val loss",
                        "replay: stop (how), restored",
                        "evaluations in common, largest rel. difference",
                    ],
                    stages,
                ),
                f"\n![validation curves of both runs]({FIGURE}.png)\n" if len(st) else "",
                *spans_table(paper, stretches),
                "\n## Test metrics\n",
                "Spread (not judged): how far one evaluation's validation DSC against GT sits from the next in the long run, "
                "from the step the rule's run restored on (the sd of their difference ÷ √2, mean over seeds). Each run restored one "
                "checkpoint, so a DSC move within about twice the spread can be which checkpoint each restored, not how long it trained; "
                "the seed sd a second seed measures includes it. ‡: a seed sd pooled over seeds trained on other CPUs or precisions.\n",
                markdown_table(
                    ["method", "metric", "rule (sd, seeds)", "long (seeds)", "long − rule", "tolerance", "within", "spread"], moved
                ),
                "\nWhat a move in DSC is made of (not judged): the consensus's precision, recall and predicted ÷ reference area, against "
                "DSC's reference, pooled over cases and seeds.\n",
                markdown_table(
                    ["method", "precision / recall / area: rule", "long"],
                    [[display(paper, r["method"]), pra(r, "_rule"), pra(r, "_long")] for r in evidence.to_dict("records")],
                ),
                *heads_table(paper, evidence),
                "\n## Not yet audited\n",
                "Cells without a finished pair of runs: what each run has done, whether the two are twins so far "
                "(evaluations in common, largest relative difference) and, where the rule's run finished, its test metrics. A method "
                "with no finished pair is flagged `[stop not audited]` in every table of the rule's folder.\n",
                markdown_table(
                    [
                        "method",
                        "seed",
                        "rule's run",
                        "long run",
                        "twins so far",
                        "trained",
                        "rule: DSC / GED / Dice_match",
                        "rule: precision / recall / area",
                    ],
                    [
                        [
                            display(paper, r["method"]),
                            r["seed"],
                            r["rule_run"],
                            r["long_run"],
                            f"{r['shared']}, {r['twin_diff']:.1g}" if r["shared"] else "0",
                            r["trained"],
                            " / ".join("–" if pd.isna(r.get(k, math.nan)) else f"{r[k] * CHECKED[k][2]:.3f}" for k in CHECKED),
                            pra(r),
                        ]
                        for r in waiting.to_dict("records")
                    ],
                )
                if len(waiting)
                else "Every cell of both folders is a finished pair.",
            ]
        )
        + "\n"
    )
