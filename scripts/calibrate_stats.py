"""The figures docs/methods.md#statistics states, remade: `python scripts/calibrate_stats.py` (about 5 minutes on 2 cores).

The seed-aware test's false-positive rate under the null at four levels, with the Welch-Satterthwaite df and with the
test's (`bench.report.stats.seed_df`) on the same draws; the significance map's family-wise error under six identical
methods; and the power at 3 and 5 seeds. Printed as Markdown tables.
"""

import sys
from pathlib import Path

import numpy as np
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.report import stats  # noqa: E402


def null_draws(seeds, cases, sims, sds, rng):
    """Methods identical in mean: (sims, seeds, cases) each, cases shared (paired), each method its own seed sd."""
    case = rng.normal(0, 0.15, (sims, 1, cases))
    return [case + rng.normal(0, sd, (sims, seeds, 1)) + rng.normal(0, 0.05, (sims, seeds, cases)) for sd in sds]


levels = (0.05, 0.01, 0.0033, 0.001)
rng = np.random.default_rng(2026)
print("| seeds | seed sds | test | " + " | ".join(f"{a:g}" for a in levels) + " |")
print("| --- | --- | --- | " + " | ".join("---" for _ in levels) + " |")
for seeds, sds in [
    (2, (0.02, 0.02)),
    (2, (0.02, 0.12)),
    (3, (0.02, 0.02)),
    (3, (0.02, 0.06)),
    (3, (0.02, 0.12)),
    (5, (0.02, 0.02)),
    (5, (0.02, 0.12)),
]:
    old, new = [], []
    for _ in range(8):
        a, b = null_draws(seeds, 200, 5000, sds, rng)
        t = stats.seed_case_test(a, b)
        new.append(t["p"])
        old.append(
            2 * sps.t.sf(np.abs(t["diff"] / t["se"]), stats.welch_df(t["var_ref"], t["var_other"], t["var_case"], seeds, seeds, 200))
        )
    for name, p in (("Welch–Satterthwaite", np.concatenate(old)), ("seed_df", np.concatenate(new))):
        print(
            f"| {seeds} | {sds[0] * 100:g} / {sds[1] * 100:g} | {name} | "
            + " | ".join(f"{np.mean(p < a) * 100:.2f} %" for a in levels)
            + " |",
            flush=True,
        )
print()
print("| seeds | seed sds | map FWER, Welch–Satterthwaite | map FWER, seed_df |")
print("| --- | --- | --- | --- |")
for seeds in (2, 3, 5):
    for unequal in (False, True):
        sds = (0.005, 0.01, 0.02, 0.03, 0.04, 0.06) if unequal else (0.02,) * 6
        old, new = [], []
        for _ in range(4):
            draws = null_draws(seeds, 200, 2500, sds, rng)
            pairs = [(i, j) for i in range(6) for j in range(i + 1, 6)]
            tests = [stats.seed_case_test(draws[i], draws[j]) for i, j in pairs]
            new.append((stats.holm_rows(np.stack([t["p"] for t in tests], 1)) < 0.05).any(1))
            w = [
                2 * sps.t.sf(np.abs(t["diff"] / t["se"]), stats.welch_df(t["var_ref"], t["var_other"], t["var_case"], seeds, seeds, 200))
                for t in tests
            ]
            old.append((stats.holm_rows(np.stack(w, 1)) < 0.05).any(1))
        print(
            f"| {seeds} | {'0.5–6 (six sds)' if unequal else 'all 2'} | {np.mean(np.concatenate(old)) * 100:.1f} % | {np.mean(np.concatenate(new)) * 100:.1f} % |",
            flush=True,
        )
print()
print("| seeds | Δ | power, Welch–Satterthwaite | power, seed_df |")
print("| --- | --- | --- | --- |")
for seeds in (3, 5):
    a, b = null_draws(seeds, 1000, 4000, (0.02, 0.02), rng)
    t = stats.seed_case_test(a, b)
    for delta in (0.02, 0.05):
        wdf = stats.welch_df(t["var_ref"], t["var_other"], t["var_case"], seeds, seeds, 1000)
        pw = [np.mean(np.abs(t["diff"] + delta) > sps.t.ppf(0.975, df) * t["se"]) for df in (wdf, t["df"])]
        print(f"| {seeds} | {delta * 100:g} points | {pw[0] * 100:.0f} % | {pw[1] * 100:.0f} % |", flush=True)
