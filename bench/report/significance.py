"""Every pair of methods compared: the significance map of one column, as challengeR draws it.

One column of the long table (one dataset × raters × noise × reference × metric × structure) is compared pair by pair:
each of the K (K − 1) / 2 pairs of methods by the seed-aware paired test (bench/report/stats.py `compare_models`, the
same test as everywhere in the report), the p-values Holm-adjusted once over all the pairs of the column (`holm`). A
cell [a, b] of the map is a against b: the difference of their means signed so that a positive value favours a (a
lower-is-better metric such as bAHD is negated, as `compare_models` does), its interval and Holm p; it is **resolved**
where p < alpha, in a's favour (a better) or against it. A method with one seed has no seed-to-seed spread: its pairs
have no p and are never resolved.

`significance_figure` draws the map: green where the row's method is significantly better than the column's, red where
it is significantly worse, grey "n.s." where the test does not resolve the pair.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from bench.report.plots import WARNING_COLOR
from bench.report.stats import ALPHA, compare_models, holm, seed_case_matrix

#: Cell colours: the row's method better (resolved), worse (resolved), unresolved, no test, the diagonal.
COLORS = ("#8fd19e", "#f4a3a3", "#e6e6e6", "#ffffff", "#9e9e9e")
BETTER, WORSE, UNRESOLVED, NO_TEST, SELF = range(5)


@dataclass
class SignificanceMap:
    """The pairwise tests of one column: methods × methods frames, [a, b] = a against b (positive diff favours a)."""

    methods: list[str]
    diff: pd.DataFrame  # mean of a − mean of b in stored units, signed by the metric's direction; NaN on the diagonal
    ci_low: pd.DataFrame  # its 95 % interval (the seed-aware test's), NaN with one seed
    ci_high: pd.DataFrame
    p_holm: pd.DataFrame  # Holm-adjusted over the column's K (K − 1) / 2 pairs; NaN on the diagonal and without a test
    tests: list[dict]  # one `compare_models` row per pair (a before b in `methods`), with reference_method a, method b, p_holm
    alpha: float = ALPHA

    @property
    def resolved(self) -> pd.DataFrame:
        """[a, b] True where the pair's Holm p is below alpha (either direction)."""
        return self.p_holm.lt(self.alpha)

    @property
    def better(self) -> pd.DataFrame:
        """[a, b] True where a is significantly better than b."""
        return self.resolved & self.diff.gt(0)

    def code(self, a: str, b: str) -> int:
        """The colour code of cell [a, b]: BETTER, WORSE, UNRESOLVED, NO_TEST or SELF."""
        if a == b:
            return SELF
        if math.isnan(self.p_holm.loc[a, b]):
            return NO_TEST
        if not self.resolved.loc[a, b]:
            return UNRESOLVED
        return BETTER if self.diff.loc[a, b] > 0 else WORSE


def significance_map(part: pd.DataFrame, methods: list[str], higher_is_better: bool, alpha: float = ALPHA) -> SignificanceMap:
    """The map of one column: `part` its long rows (columns method, seed, case, value), `methods` the methods to compare
    (in the order shown; those without rows in `part` are left out), `higher_is_better` the metric's direction."""
    present = [m for m in methods if m in set(part["method"])]
    if len(present) < 2:
        raise ValueError(f"a significance map needs two methods with rows in the column; got {present or 'none'}")
    matrices = {m: seed_case_matrix(part, m) for m in present}
    tests = [
        {"reference_method": a, "method": b, **compare_models(matrices[a], matrices[b], higher_is_better)}
        for i, a in enumerate(present)
        for b in present[i + 1 :]
    ]
    for row, p in zip(tests, holm([t["p"] for t in tests])):
        row["p_holm"] = float(p)
    frames = {k: pd.DataFrame(np.nan, index=present, columns=present) for k in ("diff", "ci_low", "ci_high", "p_holm")}
    for t in tests:
        a, b = t["reference_method"], t["method"]
        frames["diff"].loc[a, b], frames["diff"].loc[b, a] = t["diff"], -t["diff"]
        frames["ci_low"].loc[a, b], frames["ci_high"].loc[a, b] = t["ci_low"], t["ci_high"]
        frames["ci_low"].loc[b, a], frames["ci_high"].loc[b, a] = -t["ci_high"], -t["ci_low"]
        frames["p_holm"].loc[a, b] = frames["p_holm"].loc[b, a] = t["p_holm"]
    return SignificanceMap(present, tests=tests, alpha=alpha, **frames)


def significance_figure(
    sig: SignificanceMap, title: str, labels: dict[str, str] | None = None, scale: float = 1.0, digits: int = 2, warning: str = ""
) -> Figure:
    """The map as a K × K grid: cell [row, column] coloured by `SignificanceMap.code`, with the difference row − column in
    the row's favour (stored units × `scale`, e.g. 100 for DSC points) and its Holm p, or "n.s." where unresolved and
    "no test" without one. `labels[method]` names it; `warning` is drawn in red above everything, as on the other
    figures."""
    labels = labels or {}
    k = len(sig.methods)
    codes = np.array([[sig.code(a, b) for b in sig.methods] for a in sig.methods])
    width = max(4.8, 1.6 + 1.05 * k)  # inches: room for the warning line above a map of two methods
    fig = Figure(figsize=(width, 1.3 + 0.8 * k), layout="constrained")
    ax = fig.subplots()
    ax.imshow(codes, cmap=ListedColormap(COLORS), vmin=-0.5, vmax=len(COLORS) - 0.5)
    for i, a in enumerate(sig.methods):
        for j, b in enumerate(sig.methods):
            if i == j:
                continue
            diff, p = scale * sig.diff.loc[a, b] + 0.0, sig.p_holm.loc[a, b]
            verdict = "no test" if math.isnan(p) else f"p {p:.2g}" if sig.resolved.loc[a, b] else "n.s."
            ax.text(j, i, f"{diff:+.{digits}f}\n{verdict}", ha="center", va="center", fontsize=7, gid=f"cell:{a}:{b}")
    names = [labels.get(m, m) for m in sig.methods]
    ax.set_xticks(range(k), labels=names, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(k), labels=names, fontsize=8)
    ax.set_xlabel("against", fontsize=8)
    ax.set_ylabel("method (row): Δ in its favour", fontsize=8)
    ax.set_title(title, fontsize=9)
    if warning:
        fig.suptitle(textwrap.fill(warning, int(13 * width)), fontsize=9, color=WARNING_COLOR, fontweight="bold")
    return fig
