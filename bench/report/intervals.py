"""One way to print a 95 % interval: the report, the reproduction page and `bench compare` all call `interval`.

An interval is printed with the seeds (n) and degrees of freedom (df) behind it: "[45.10, 52.30] (n 3, df 2)". It is
not printed as numbers where the numbers would mislead:

- no seeds (a pool statistic such as the Average row): "no interval: a pool statistic, no seeds";
- NaN bounds (one seed: no seed-to-seed spread): "no interval with 1 seed";
- zero width at the printed precision (seeds that all agree): "no interval: no spread over 3 seeds";
- wider than the metric's range (DSC with 2 seeds: [-213, 310] points): "not estimable with 2 seeds (df 1)".

Otherwise the bounds are clipped to the metric's range (a mean DSC of 99.8 % does not have an upper bound of 100.3 %).
"""

from __future__ import annotations

import math

from bench.evaluate import metrics

#: The values of the metrics not shown in %, in the units they are printed in (a metric shown in % spans 0–100).
RANGES = {"bahd": (0.0, math.inf), "ece": (0.0, 1.0), "ged": (0.0, 2.0), "ged_floor": (0.0, 2.0), "ged_unbiased": (-1.0, 2.0)}


def value_range(metric: str) -> tuple[float, float]:
    """The values `metric` can take as printed (scaled: 0–100 for a fraction shown in %); unbounded for an unknown metric."""
    if metric in RANGES:
        return RANGES[metric]
    if metric in metrics.METRICS and metrics.get(metric).scale == 100:
        return 0.0, 100.0
    return -math.inf, math.inf


def difference_range(metric: str) -> tuple[float, float]:
    """The values a difference of two values of `metric` can take: ± the width of its range."""
    low, high = value_range(metric)
    return -(high - low), high - low


def count(n: int | tuple[int, int]) -> str:
    """ "3", or "3/2" for two methods' seeds."""
    return f"{n[0]}/{n[1]}" if isinstance(n, tuple) else str(n)


def seeds_text(n: int | tuple[int, int]) -> str:
    """ "1 seed", "3 seeds", "3/2 seeds"."""
    return f"{count(n)} seed{'' if n == 1 else 's'}"


def df_text(df: float) -> str:
    return f"df {df:.3g}"


def estimable(low: float, high: float, bounds: tuple[float, float]) -> bool:
    """An interval that can be printed as numbers: finite bounds, no wider than the range `bounds`."""
    return not (math.isnan(low) or math.isnan(high)) and high - low <= bounds[1] - bounds[0]


def interval(
    low: float,
    high: float,
    n: int | tuple[int, int],
    df: float,
    digits: int = 2,
    bounds: tuple[float, float] = (-math.inf, math.inf),
    signed: bool = False,
) -> str:
    """The interval [low, high] as the module docstring prints it; `n` seeds (or each method's, for a difference of two),
    `df` its degrees of freedom, `bounds` the range of the quantity (`value_range`, `difference_range`), `signed` to
    print "+" on positive bounds (a difference)."""
    sign = "+" if signed else ""
    if n == 0:
        return "no interval: a pool statistic, no seeds"
    if math.isnan(low) or math.isnan(high):
        return f"no interval with {seeds_text(n)}"
    if round(high, digits) == round(low, digits):
        return f"no interval: no spread over {seeds_text(n)}"
    if not estimable(low, high, bounds):
        return f"not estimable with {seeds_text(n)} ({df_text(df)})"
    low, high = max(low, bounds[0]) + 0.0, min(high, bounds[1]) + 0.0  # + 0.0: no "-0.00"
    return f"[{low:{sign}.{digits}f}, {high:{sign}.{digits}f}] (n {count(n)}, {df_text(df)})"
