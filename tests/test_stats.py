"""bench.stats: per-case averaging and paired Wilcoxon + Holm, checked against SciPy / statsmodels called directly."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from bench import stats
from bench.evaluate import long_table as schema
from bench.evaluate.long_table import COLUMNS


def long_table(
    values: dict[str, np.ndarray], dataset="toy", noise="protocol", metric="dsc", structure="foreground", raters="cm", reference="gt"
) -> pd.DataFrame:
    """Long rows from {method: (n_seeds, n_cases) array}; counts and distance sums are irrelevant here (0 and NaN)."""
    rows = []
    for method, grid in values.items():
        for seed, per_case in enumerate(np.atleast_2d(grid)):
            for case, value in enumerate(per_case):
                rows.append((dataset, raters, noise, method, seed, reference, f"c{case:02d}", structure, metric, value,
                             0, 0, 0, 0, 0, np.nan, np.nan))  # fmt: skip
    return pd.DataFrame(rows, columns=COLUMNS)


def fixed_table() -> pd.DataFrame:
    """Three seeds × 20 cases; lf-net clearly above mv-unet, slightly above cm-unet, equal in law to mh-unet."""
    rng = np.random.default_rng(42)
    base = rng.uniform(0.4, 0.8, 20)
    noise = lambda: rng.normal(0, 0.03, (3, 20))  # noqa: E731
    return long_table(
        {
            "lf-net": base + 0.10 + noise(),
            "mv-unet": base - 0.05 + noise(),
            "cm-unet": base + 0.08 + noise(),
            "mh-unet": base + 0.10 + noise(),
            "oracle": base + 0.15 + noise(),
        }
    )


def test_per_case_averages_seeds_and_skips_nan():
    table = long_table({"a": np.array([[0.2, 0.4], [0.4, np.nan], [0.6, np.nan]])})
    other_reference = long_table({"a": np.array([[0.9, 0.9]])}, reference="majority")  # the same cell scored against another reference
    out = schema.per_case(pd.concat([table, other_reference]), "dsc", "foreground")
    assert list(out.columns) == ["dataset", "raters", "noise", "reference", "method", "case", "value", "n_seeds"]
    gt = out[out["reference"] == "gt"].set_index("case")
    assert gt.loc["c00", "value"] == pytest.approx(0.4)
    assert gt.loc["c01", "value"] == pytest.approx(0.4)  # the two NaN seeds are skipped
    assert list(gt["n_seeds"]) == [3, 1]
    majority = out[out["reference"] == "majority"].set_index("case")
    assert list(majority["value"]) == pytest.approx([0.9, 0.9]) and list(majority["n_seeds"]) == [1, 1]  # references never mixed
    assert schema.per_case(table, "bahd", "foreground").empty
    assert stats.per_case is schema.per_case and stats.GROUP == schema.GROUP  # stats tests on the same per-case view


def test_p_values_match_scipy_and_statsmodels():
    table = fixed_table()
    out = stats.paired_tests(table, "dsc", "foreground").set_index("method")
    assert sorted(out.index) == ["cm-unet", "mh-unet", "mv-unet"]  # the oracle is not a competitor by default

    wide = table.groupby(["method", "case"])["value"].mean().unstack("method")
    expected = {m: sps.wilcoxon(wide["lf-net"], wide[m], zero_method="wilcox", alternative="two-sided") for m in out.index}
    raw = [expected[m].pvalue for m in out.index]
    adjusted = multipletests(raw, method="holm")[1]
    for method, p_adj in zip(out.index, adjusted):
        assert out.loc[method, "p"] == pytest.approx(expected[method].pvalue, rel=1e-12)
        assert out.loc[method, "statistic"] == pytest.approx(expected[method].statistic)
        assert out.loc[method, "p_holm"] == pytest.approx(p_adj, rel=1e-12)
        assert out.loc[method, "n"] == 20
        assert out.loc[method, "n_nan"] == 0
    assert out.loc["mv-unet", "p_holm"] < 0.001
    assert out.loc["mv-unet", "effect_size"] == pytest.approx(1.0)  # every case favours lf-net
    assert out.loc["mv-unet", "median_diff"] > 0.1


def test_oracle_and_explicit_others():
    table = fixed_table()
    out = stats.paired_tests(table, "dsc", "foreground", others=["oracle", "mv-unet"])
    assert list(out["method"]) == ["oracle", "mv-unet"]
    assert out.set_index("method").loc["oracle", "effect_size"] < 0  # the oracle beats lf-net


def test_effect_size_by_hand():
    # d = ref − other = [3, -1, 2, 0]: zero dropped; |d| ranks 1→1, 2→2, 3→3; R+ = 3 + 2 = 5, R− = 1; r = (5 − 1) / 6.
    table = long_table({"lf-net": np.array([[4.0, 1.0, 3.0, 5.0]]), "mv-unet": np.array([[1.0, 2.0, 1.0, 5.0]])})
    row = stats.paired_tests(table, "dsc", "foreground").iloc[0]
    assert row["effect_size"] == pytest.approx(4 / 6)
    assert row["median_diff"] == pytest.approx(1.0)  # median of [-1, 0, 2, 3], zeros kept
    assert row["n"] == 4 and row["n_zero"] == 1
    assert row["statistic"] == pytest.approx(1.0)  # the smaller signed-rank sum
    assert stats.rank_biserial(np.array([1.0, 1.0, -2.0])) == pytest.approx((1.5 + 1.5 - 3) / 6)  # tied ranks averaged


def test_lower_is_better_flips_the_sign():
    table = long_table({"lf-net": np.array([[1.0, 2.0, 3.0]]), "mv-unet": np.array([[2.0, 4.0, 6.0]])}, metric="bahd")
    row = stats.paired_tests(table, "bahd", "foreground", higher_is_better=False).iloc[0]
    assert row["effect_size"] == pytest.approx(1.0)  # lf-net has the smaller distance on every case
    assert row["median_diff"] == pytest.approx(2.0)
    assert row["p"] == pytest.approx(sps.wilcoxon([1.0, 2.0, 3.0], [2.0, 4.0, 6.0]).pvalue)


def test_nan_pairs_dropped_and_counted():
    ref = np.array([[0.9, 0.8, np.nan, 0.7, 0.95, 0.85, 0.6, 0.75]])
    other = np.array([[0.5, np.nan, 0.4, 0.6, 0.7, 0.65, 0.55, 0.5]])
    table = long_table({"lf-net": ref, "mv-unet": other})
    row = stats.paired_tests(table, "dsc", "foreground").iloc[0]
    keep = ~(np.isnan(ref[0]) | np.isnan(other[0]))
    assert row["n"] == 6 and row["n_nan"] == 2
    assert row["p"] == pytest.approx(sps.wilcoxon(ref[0][keep], other[0][keep]).pvalue)


def test_only_shared_cases_are_paired():
    table = long_table({"lf-net": np.arange(10.0)[None] / 10, "mv-unet": np.arange(10.0)[None] / 20})
    table = table[~((table["method"] == "mv-unet") & table["case"].isin(["c08", "c09"]))]  # mv-unet scored on 8 cases only
    row = stats.paired_tests(table, "dsc", "foreground").iloc[0]
    assert row["n"] == 8 and row["n_nan"] == 0


def test_groups_are_separate_holm_families_and_degenerate_cases():
    rng = np.random.default_rng(0)
    lf, mv = rng.uniform(size=(1, 12)), rng.uniform(size=(1, 12))
    a = long_table({"lf-net": lf, "mv-unet": mv}, noise="0.45")
    a_majority = long_table({"lf-net": lf, "mv-unet": mv + 0.01}, noise="0.45", reference="majority")  # another reference
    same = np.full((1, 5), 0.5)
    b = long_table({"lf-net": same, "mv-unet": same})  # noise "protocol"; all differences zero: test undefined
    c = long_table({"mv-unet": same}, dataset="other")  # no reference method: no rows
    out = stats.paired_tests(pd.concat([a, a_majority, b, c]), "dsc", "foreground")
    assert list(zip(out["dataset"], out["raters"], out["noise"], out["reference"])) == [
        ("toy", "cm", "0.45", "gt"),
        ("toy", "cm", "0.45", "majority"),
        ("toy", "cm", "protocol", "gt"),
    ]
    first, majority, second = out.iloc[0], out.iloc[1], out.iloc[2]
    assert first["p_holm"] == pytest.approx(first["p"])  # a family of one: Holm leaves p unchanged
    assert majority["p_holm"] == pytest.approx(majority["p"])  # each reference is its own family
    assert majority["p"] == pytest.approx(sps.wilcoxon(lf[0], mv[0] + 0.01).pvalue) and majority["p"] != first["p"]
    assert np.isnan(second["p"]) and np.isnan(second["p_holm"]) and np.isnan(second["effect_size"])
    assert second["n"] == 5 and second["n_zero"] == 5 and second["median_diff"] == 0
    assert list(out.columns) == stats.TEST_COLUMNS


def test_holm_ignores_nan():
    adjusted = stats.holm([0.01, np.nan, 0.04])
    assert np.isnan(adjusted[1])
    np.testing.assert_allclose(adjusted[[0, 2]], multipletests([0.01, 0.04], method="holm")[1])
