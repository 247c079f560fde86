"""bench.reproduce.power and `python -m bench power`: the seed-aware test's error rate under the null, proven by simulation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.cli import main
from bench.evaluate.long_table import COLUMNS
from bench.report import stats
from bench.reproduce import power


@pytest.mark.parametrize(
    ("sd_seed", "cases", "seeds"),
    [(0.02, 1000, 3), (0.01, 100, 3), (0.02, 1000, 5)],
    ids=["seed-sd-2-1000-cases", "seed-sd-1-100-cases", "5-seeds"],
)
def test_false_positive_rate_under_the_null_is_at_most_alpha(sd_seed, cases, seeds):
    """Two methods identical in distribution: the claim procedure says "A differs from B" in at most α of the runs (plus
    the Monte Carlo margin), where the paper's per-case Wilcoxon on seed-averaged values says so far more often."""
    comp = power.Components(sd_seed=sd_seed, sd_case=0.15, sd_resid=0.05)
    sim = power.simulate(comp, seeds, cases, 3000, np.random.default_rng(7), with_wilcoxon=True)
    rate, margin = power.rejection_rate(sim["p"])
    assert rate <= stats.ALPHA + margin, rate
    assert power.rejection_rate(sim["p_wilcoxon"])[0] > 0.25  # what the seed-blind test did: the simulation sees it


def test_power_grows_with_seeds_and_the_detectable_difference_is_found_with_its_power():
    comp = power.Components(sd_seed=0.02, sd_case=0.15, sd_resid=0.05)
    rng = np.random.default_rng(1)
    three, ten = (power.simulate(comp, s, 200, 2000, rng) for s in (3, 10))
    d3, d10 = power.detectable(three), power.detectable(ten)
    assert d10 < d3 / 2  # 3 → 10 seeds: about √(10/3) narrower, and t's tails shrink too
    assert power.power_at(three, d3) == pytest.approx(stats.POWER, abs=0.01)
    assert power.power_at(three, 0.0) < 0.06
    assert power.seeds_for(comp, 200, d3, 1000, rng) in (3, 4)  # the difference found at 3 seeds needs about 3
    one = power.simulate(comp, 1, 200, 100, rng)
    assert np.isnan(power.detectable(one))  # one seed: no p-value, nothing detectable


def test_components_are_recovered_from_a_long_table():
    rng = np.random.default_rng(2)
    cases = rng.normal(0.7, 0.15, 400)
    rows = []
    for method in ("a", "b"):
        for seed in range(6):
            values = cases + rng.normal(0, 0.03) + rng.normal(0, 0.05, 400)
            rows += [
                ("toy", "cm", "protocol", method, seed, "gt", f"c{c}", "foreground", "dsc", v, 0, 0, 0, 0, 0, np.nan, np.nan, 1)
                for c, v in enumerate(values)
            ]
    comp, per_method = power.components_of(pd.DataFrame(rows, columns=COLUMNS))
    assert list(per_method["method"]) == ["a", "b"] and (per_method["seeds"] == 6).all()
    assert comp.sd_resid == pytest.approx(0.05, rel=0.05) and comp.sd_case == pytest.approx(0.15, rel=0.1)
    assert 0.01 < comp.sd_seed < 0.06  # 12 seeds in all: a rough estimate, but the right order


def test_power_command_on_a_results_folder_and_on_defaults(tmp_path, capsys):
    rng = np.random.default_rng(4)
    cases = rng.uniform(0.5, 0.9, 50)
    rows = [
        ("toy", "cm", "protocol", m, s, "gt", f"c{c}", "foreground", "dsc", v, 0, 0, 0, 0, 0, np.nan, np.nan, 1)
        for m in ("mv-unet", "lf-net")
        for s in range(3)
        for c, v in enumerate(cases + rng.normal(0, 0.02) + rng.normal(0, 0.03, 50))
    ]
    pd.DataFrame(rows, columns=COLUMNS).to_parquet(tmp_path / "metrics.parquet")
    assert main(["power", "--results", str(tmp_path), "--reference", "gt", "--sims", "400", "--differences", "5"]) == 0
    out = capsys.readouterr().out
    assert "toy / cm / noise protocol, dsc vs gt, foreground (2 methods pooled): 3 seeds × 50 cases" in out
    assert "false-positive rate under the null" in out and "within 5%" in out and "smallest difference found with 80% power" in out
    assert main(["power", "--results", str(tmp_path), "--reference", "gt", "--sims", "200", "--methods", "lf-net"]) == 0
    assert "(1 methods pooled)" in capsys.readouterr().out
    assert main(["power", "--sims", "200", "--differences", "5"]) == 0
    assert "stated defaults (no --results): 3 seeds × 1000 cases" in capsys.readouterr().out
    assert main(["power", "--results", str(tmp_path / "nowhere")]) == 2
    assert "metrics.parquet not found" in capsys.readouterr().err


def test_unequal_seed_sds_are_simulated_and_held_within_alpha():
    """One method's trainings 6× as spread as the other's: at 3 seeds the Welch–Satterthwaite df ran liberal (6.4 % in
    20,000 simulations); the test's df (`stats.seed_df`) holds α at 3 and at 5 seeds."""
    rng = np.random.default_rng(8)
    comp = power.Components(sd_seed=0.005, sd_case=0.15, sd_resid=0.05)
    for seeds in (3, 5):
        rate, margin = power.rejection_rate(power.simulate(comp, seeds, 1000, 3000, rng, sd_seed_other=0.03)["p"])
        assert rate <= stats.ALPHA + margin, (seeds, rate)


def test_power_command_checks_every_pair_at_005_and_at_holms_first_step(tmp_path, capsys):
    """Every pair of the folder's methods is simulated under its own seed sds (not only the most unequal, which need not be
    the worst); the worst pair's rate is printed at 0.05 and at Holm's first step over the map's pairs."""
    rng = np.random.default_rng(9)
    cases = rng.uniform(0.5, 0.9, 60)
    rows = [
        ("toy", "cm", "protocol", m, s, "gt", f"c{c}", "foreground", "dsc", v, 0, 0, 0, 0, 0, np.nan, np.nan, 1)
        for m, sd in (("mv-unet", 0.005), ("lf-net", 0.03), ("cm-unet", 0.015))
        for s in range(3)
        for c, v in enumerate(cases + rng.normal(0, sd) + rng.normal(0, 0.03, 60))
    ]
    pd.DataFrame(rows, columns=COLUMNS).to_parquet(tmp_path / "metrics.parquet")
    assert main(["power", "--results", str(tmp_path), "--reference", "gt", "--sims", "400", "--differences", "5"]) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if "with each method's own seed sd" in x]
    assert len(lines) == 2 and "the worst of 3 pairs at 0.05:" in lines[0] and "at 0.017 (Holm's first step over 3 pairs)" in lines[1]
    assert all("false-positive rate" in x and ("(within " in x or "(ABOVE " in x) for x in lines), lines
    comp = power.Components(0.01, 0.15, 0.05)
    per_method = pd.DataFrame({"method": ["a", "b", "c"], "sd_seed": [0.005, 0.02, 0.06]})
    rates = power.pair_rates(per_method, comp, 3, 100, 300, np.random.default_rng(0), (0.05, 0.001))
    assert [tuple(r) for r in rates[["a", "b"]].to_numpy()] == [("a", "b"), ("a", "c"), ("b", "c")]
    assert {"rate_0.05", "margin_0.05", "rate_0.001", "margin_0.001"} <= set(rates)


def test_power_off_a_terminal_writes_progress_lines_to_stderr(capsys, monkeypatch):
    """`bench power` simulates for minutes (issue 76): off a terminal (a log, a pipe) it writes plain progress lines to
    stderr, one as it starts, one at most every LINE_SECONDS while it simulates and one when done, never a bar; the
    results stay alone on stdout."""
    assert main(["power", "--sims", "200", "--differences", "5"]) == 0
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert len(lines) >= 2 and lines[0].startswith("power: simulating") and lines[-1].startswith("power: done"), err
    assert "\r" not in err and "power: simulating" not in out and "stated defaults" in out
    monkeypatch.setattr(power, "LINE_SECONDS", 0.0, raising=False)  # a line at every simulated block
    assert main(["power", "--sims", "200", "--differences", "5"]) == 0
    out, err = capsys.readouterr()
    ticks = [line for line in err.splitlines() if "blocks simulated" in line and not line.startswith("power: done")]
    assert any("null" in line for line in ticks) and any("difference of 5" in line for line in ticks), err


def test_power_on_a_terminal_draws_a_bar_not_lines(capsys, monkeypatch):
    import io

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    assert main(["power", "--sims", "200", "--differences", "5"]) == 0
    assert "\r" in terminal.getvalue() and "power: " not in terminal.getvalue()  # a tqdm bar, cleared when each step ends
    assert "stated defaults" in capsys.readouterr().out
