"""One interval formatter (bench/report/intervals.py) for the report, the reproduction page and `bench compare`: n and df
beside each interval, nothing outside the metric's range, no NaN or zero-width interval as numbers."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from bench import study
from bench.report import compare
from bench.report.intervals import difference_range, interval, value_range

NAN = math.nan


def test_an_interval_names_its_seeds_and_df_and_stays_in_the_metrics_range():
    assert interval(40.0, 60.0, 3, 2, 2, value_range("dsc")) == "[40.00, 60.00] (n 3, df 2)"
    assert interval(98.0, 101.3, 3, 2, 2, value_range("dsc")) == "[98.00, 100.00] (n 3, df 2)"  # clipped at 100 %
    assert interval(-213.0, 310.0, 2, 1, 2, value_range("dsc")) == "not estimable with 2 seeds (df 1)"
    assert interval(-1.5, 2.25, (3, 2), 3.456, 2, difference_range("dsc"), signed=True) == "[-1.50, +2.25] (n 3/2, df 3.46)"
    assert interval(-150.0, 60.0, (2, 2), 1.2, 2, difference_range("dsc"), signed=True) == "not estimable with 2/2 seeds (df 1.2)"
    assert interval(NAN, NAN, 1, NAN, 2, difference_range("dsc"), signed=True) == "no interval with 1 seed"
    assert interval(1.0, 1.0, 0, NAN) == "no interval: a pool statistic, no seeds"
    assert interval(0.5, 0.501, 3, NAN) == "no interval: no spread over 3 seeds"  # zero width as printed
    assert interval(-0.2, 3.0, 3, 2, 3, value_range("bahd")) == "[0.000, 3.000] (n 3, df 2)"  # bAHD: from 0, unbounded above
    assert value_range("dice_match") == (0.0, 100.0) and difference_range("dsc") == (-100.0, 100.0)


def long_table(seed_means: dict[str, list[float]]) -> pd.DataFrame:
    rows = [
        {
            "dataset": "toy",
            "raters": "cm",
            "noise": "protocol",
            "reference": "gt",
            "structure": "foreground",
            "metric": "dsc",
            "method": method,
            "seed": seed,
            "case": f"c{case}",
            "value": mean + 0.01 * case,
        }
        for method, means in seed_means.items()
        for seed, mean in enumerate(means)
        for case in range(6)
    ]
    return pd.DataFrame(rows)


def test_compare_prints_n_and_df_and_no_interval_wider_than_dsc(tmp_path):
    """LF-Net's seeds in B are far apart (2 seeds, df about 1): its B − A interval spans hundreds of points and is not printed
    as numbers, nor drawn; MV-UNet's is, with its seeds and df; MH-UNet has one seed in A: no interval."""
    a = long_table({"lf-net": [0.80, 0.81], "mv-unet": [0.60, 0.61], "mh-unet": [0.5]})
    b = long_table({"lf-net": [0.20, 0.95], "mv-unet": [0.62, 0.63], "mh-unet": [0.5, 0.52]})
    table = compare.compare_tables(a, b, ["dsc"])
    text = compare.to_markdown(study.default(), table, "a", "b")
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ") and "±" in line}
    assert "not estimable with 2/2 seeds (df 1" in rows["LF-Net"]
    assert "no interval with 1/2 seeds" in rows["MH-UNet"]
    assert "| +2.00 [-6.74, +10.74] (n 2/2, df 1.01) |" in rows["MV-UNet"]  # 2 seeds: the df of one seed term (stats.seed_df)
    for low, high in re.findall(r"\[([-+\d.]+), ([-+\d.]+)\]", text):
        assert -100 <= float(low) < float(high) <= 100
    fig = compare.difference_figure(study.default(), table, "t", "a", "b")
    (ax,) = fig.axes
    assert ax.get_xlim()[1] - ax.get_xlim()[0] < 100  # the unestimable interval is not drawn
    assert "LF-Net\n(not estimable, 2/2 seeds)" in [t.get_text() for t in ax.get_yticklabels()]
    assert np.isfinite(table.set_index("method").loc["mv-unet", "df"])
