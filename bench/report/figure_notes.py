"""What a figure of bench/report/plots.py draws where a chart would say nothing or too little: a note in place of a
learning curve with one evaluation, and the pixels behind each point of a reliability diagram."""

from __future__ import annotations

import textwrap

import pandas as pd

FONT = 8  # as plots.py's


def no_curve(ax, evals: pd.DataFrame) -> bool:
    """Where `evals` (rows with a `step`) has fewer than two steps, a note in place of the chart: the axes hidden, the
    note in their middle (gid "note"); True where the note was drawn, False where there is a curve to draw."""
    if evals["step"].nunique() >= 2:
        return False
    text = f"one evaluation only (step {int(evals['step'].iloc[0])}): no curve to draw" if len(evals) else "no evaluation logged"
    ax.set_axis_off()
    ax.text(0.5, 0.5, textwrap.fill(text, 34), ha="center", va="center", transform=ax.transAxes, fontsize=FONT, gid="note")
    return True


def bin_counts(ax, bins: pd.DataFrame, methods: list[str], colors: dict[str, object]) -> None:
    """Under a reliability panel `ax`, a strip sharing its x axis with each method's pixels per non-empty bin (log scale,
    gid "counts:<method>"): a point of the diagram over few pixels says little. The strip is an inset of the panel (the
    constrained layout makes room for it), so `Figure.axes` still holds one axes per reference."""
    strip = ax.inset_axes((0.0, -0.46, 1.0, 0.2), sharex=ax, label="counts")
    strip.tick_params(labelbottom=False, labelsize=FONT - 1)
    strip.set_yscale("log")
    strip.set_ylabel("pixels\nper bin", fontsize=FONT)
    strip.grid(alpha=0.3)
    for method in methods:
        rows = bins[(bins["method"] == method) & (bins["count"] > 0)].sort_values("bin")
        strip.plot(
            rows["confidence"].to_numpy(),
            rows["count"].to_numpy(),
            marker="o",
            ms=2.5,
            lw=1,
            color=colors[method],
            gid=f"counts:{method}",
            drawstyle="steps-mid",
        )
