"""How far the verdict's test can be trusted on a results folder: its variance components, its false-positive rate
under the null and the differences it can detect, by simulation (`python -m bench power`, docs/methods.md#statistics).

The simulated value of method m, trained with seed s, on test case c is

    y = μ + u_ms + v_c + e_msc,   u ~ N(0, sd_seed²), v ~ N(0, sd_case²), e ~ N(0, sd_resid²)

so two trainings of one method differ by u (seed), cases differ by v, shared by every method (the comparison is
paired), and e is the rest (seed × case). Under the null both methods share μ; a difference δ adds δ to one of
them. Each method may have its own sd_seed (`simulate`'s sd_seed_other): the test's Welch–Satterthwaite degrees of
freedom (`stats.seed_df`) are chosen so that the rate holds at Holm's levels too, and `bench power` checks every pair of
a folder's methods under their own seed sds (`pair_rates`). Each
simulated pair of (seeds × cases) matrices is judged by the very function the reports use,
`bench.report.stats.seed_case_test`, and, for contrast, by the paper's per-case Wilcoxon on seed-averaged values.
"""

from __future__ import annotations

import math
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats
from tqdm.auto import tqdm

from bench.report import stats

CHUNK = 20_000_000  # simulated values held at once (160 MB of float64): one block of `simulate`
LINE_SECONDS = 15.0  # off a terminal, the least time between two progress lines (bench/train/harness.py's pattern)


@dataclass(frozen=True)
class Components:
    """Standard deviations of the simulation model, in the metric's stored units (a DSC of 0.9 is 0.9)."""

    sd_seed: float
    sd_case: float
    sd_resid: float


#: Without a results folder: 2 DSC points between trainings, 15 between cases, 5 for the rest (seed × case).
DEFAULT = Components(sd_seed=0.02, sd_case=0.15, sd_resid=0.05)


def variance_components(values: np.ndarray) -> dict[str, float]:
    """Variance components of one method's (seeds × cases) matrix without NaN, by two-way ANOVA without replication.

    residual = mean square of Y − row mean − column mean + grand mean, over (S − 1)(C − 1) degrees of freedom;
    seed = (C · var(row means) − residual) / C; case = (S · var(column means) − residual) / S; negative estimates are
    set to 0. Returns variances (not sds): seed, case, resid.
    """
    y = np.asarray(values, dtype=float)
    s, c = y.shape
    rows, cols = y.mean(1), y.mean(0)
    resid = ((y - rows[:, None] - cols[None, :] + y.mean()) ** 2).sum() / ((s - 1) * (c - 1))
    seed = max((c * rows.var(ddof=1) - resid) / c, 0.0)
    case = max((s * cols.var(ddof=1) - resid) / s, 0.0)
    return {"seed": float(seed), "case": float(case), "resid": float(resid)}


def components_of(part: pd.DataFrame, exclude: tuple[str, ...] = ()) -> tuple[Components, pd.DataFrame]:
    """Pooled components of one comparison group (long-table rows of one metric, structure and reference).

    Each method with at least 2 seeds is estimated on its cases without NaN; the variances are averaged over methods.
    Returns the pooled Components and one row per method (method, seeds, cases, sd_seed, sd_case, sd_resid).
    """
    rows = []
    for method in sorted(set(part["method"]) - set(exclude)):
        grid = stats.seed_case_matrix(part, method)
        grid = grid.loc[:, grid.notna().all(axis=0)]
        if grid.shape[0] < 2 or grid.shape[1] < 2:
            continue
        var = variance_components(grid.to_numpy())
        rows.append({"method": method, "seeds": grid.shape[0], "cases": grid.shape[1], **{f"sd_{k}": math.sqrt(v) for k, v in var.items()}})
    per_method = pd.DataFrame(rows, columns=["method", "seeds", "cases", "sd_seed", "sd_case", "sd_resid"])
    if per_method.empty:
        raise ValueError("no method has 2 or more seeds and cases with values here: the seed variance cannot be estimated")
    pooled = {k: math.sqrt(float((per_method[f"sd_{k}"] ** 2).mean())) for k in ("seed", "case", "resid")}
    return Components(pooled["seed"], pooled["case"], pooled["resid"]), per_method


class Progress:
    """`bench power`'s progress on `stream` (stderr): a tqdm bar per `phase` on a terminal; off one (a log, a pipe) a plain
    line as it starts, at most every LINE_SECONDS while it simulates (`tick`: one block of `simulate` done) and when done
    (`close`), as bench/train/harness.py does off a terminal, so that a run of minutes is never silent."""

    def __init__(self, stream=None):
        self.stream = sys.stderr if stream is None else stream
        self.bars = self.stream.isatty()
        self.started = self.said = time.perf_counter()
        self.name, self.detail, self.blocks, self.bar = "", "", 0, None
        if not self.bars:
            self.line(f"simulating; a progress line at most every {LINE_SECONDS:g} s")

    def line(self, text: str) -> None:
        print(f"power: {text}", file=self.stream, flush=True)
        self.said = time.perf_counter()

    @contextmanager
    def phase(self, name: str, total: int | None = None):
        """What is simulated until the block ends; `total`: its blocks where known (the bar's length)."""
        self.name, self.detail = name, ""
        self.bar = tqdm(total=total, desc=name, unit="block", leave=False, disable=not self.bars, file=self.stream)
        try:
            yield self
        finally:
            self.bar.close()
            self.bar = None

    def say(self, detail: str) -> None:
        """Where the phase is (`pair_rates`: "pair 2/3: a vs c")."""
        self.detail = detail
        if self.bar is not None:
            self.bar.set_postfix_str(detail, refresh=False)

    def tick(self) -> None:
        self.blocks += 1
        if self.bar is not None:
            self.bar.update()
        if not self.bars and time.perf_counter() - self.said >= LINE_SECONDS:
            where = f"{self.name}{f', {self.detail}' if self.detail else ''}"
            self.line(f"{where}: {self.blocks} blocks simulated, {time.perf_counter() - self.started:.0f} s so far")

    def close(self) -> None:
        if not self.bars:
            self.line(f"done: {self.blocks} blocks simulated in {time.perf_counter() - self.started:.0f} s")


def blocks(seeds: int, cases: int, sims: int) -> int:
    """How many blocks (calls of its `tick`) `simulate` draws `sims` simulations in."""
    return -(-sims // _block_sims(seeds, cases))


def _block_sims(seeds: int, cases: int) -> int:
    return max(1, CHUNK // (2 * seeds * cases))


def simulate(
    comp: Components,
    seeds: int,
    cases: int,
    sims: int,
    rng: np.random.Generator,
    with_wilcoxon: bool = False,
    sd_seed_other: float | None = None,
    tick=None,
) -> dict[str, np.ndarray]:
    """`sims` null draws of two methods × `seeds` seeds × `cases` cases, each judged by `stats.seed_case_test`; the first
    method's seed sd is comp.sd_seed, the second's `sd_seed_other` (default: the same).

    Returns (sims,) arrays diff, se, df, p and, with `with_wilcoxon`, p_wilcoxon (the paper's test on the same draws).
    A difference δ is judged with the same draws by shifting diff (`power_at`): the test's variance terms do not
    depend on the means, so the power curve comes from one simulation (common random numbers). `tick` (progress) is
    called once a block of at most CHUNK values (`blocks`).
    """
    out: dict[str, list] = {"diff": [], "se": [], "df": [], "p": [], "p_wilcoxon": []}
    step = _block_sims(seeds, cases)
    for start in range(0, sims, step):
        n = min(step, sims - start)
        case = rng.normal(0, comp.sd_case, (n, 1, cases))  # the same test cases for both methods: paired
        a = case + rng.normal(0, comp.sd_seed, (n, seeds, 1)) + rng.normal(0, comp.sd_resid, (n, seeds, cases))
        sd_b = comp.sd_seed if sd_seed_other is None else sd_seed_other
        b = case + rng.normal(0, sd_b, (n, seeds, 1)) + rng.normal(0, comp.sd_resid, (n, seeds, cases))
        test = stats.seed_case_test(a, b)
        for key in ("diff", "se", "df", "p"):
            out[key].append(test[key])
        if with_wilcoxon:
            out["p_wilcoxon"].append(scipy_stats.wilcoxon(a.mean(1), b.mean(1), axis=-1).pvalue)
        if tick is not None:
            tick()
    return {k: np.concatenate(v) for k, v in out.items() if v}


def pair_rates(
    per_method: pd.DataFrame,
    comp: Components,
    seeds: int,
    cases: int,
    sims: int,
    rng: np.random.Generator,
    levels: tuple[float, ...],
    say=lambda line: None,
    tick=None,
) -> pd.DataFrame:
    """The test's false-positive rate under the null for every pair of methods, each simulated with its own seed sd
    (`per_method`: method, sd_seed; the case and residual sds pooled in `comp`): one row a pair, a column `rate_<level>`
    and `margin_<level>` per level (`rejection_rate`). `say` is called once a pair, `tick` once a block (progress)."""
    rows, pairs = [], [(a, b) for i, a in enumerate(per_method.itertuples()) for b in list(per_method.itertuples())[i + 1 :]]
    for k, (a, b) in enumerate(pairs):
        say(f"pair {k + 1}/{len(pairs)}: {a.method} vs {b.method}")
        sim = simulate(Components(a.sd_seed, comp.sd_case, comp.sd_resid), seeds, cases, sims, rng, sd_seed_other=b.sd_seed, tick=tick)
        row = {"a": a.method, "b": b.method, "sd_a": a.sd_seed, "sd_b": b.sd_seed}
        for level in levels:
            row[f"rate_{level:g}"], row[f"margin_{level:g}"] = rejection_rate(sim["p"], level)
        rows.append(row)
    return pd.DataFrame(rows)


def rejection_rate(p: np.ndarray, alpha: float = stats.ALPHA) -> tuple[float, float]:
    """Share of p < alpha and its Monte Carlo margin (99 % one-sided, binomial normal approximation at alpha)."""
    return float(np.mean(p < alpha)), float(scipy_stats.norm.ppf(0.99) * math.sqrt(alpha * (1 - alpha) / len(p)))


def power_at(sim: dict[str, np.ndarray], delta: float, alpha: float = stats.ALPHA) -> float:
    """Share of the simulated comparisons that find a true difference `delta` (two-sided test at alpha)."""
    critical = scipy_stats.t.ppf(1 - alpha / 2, sim["df"]) * sim["se"]
    return float(np.mean(np.abs(sim["diff"] + delta) > critical))


def detectable(sim: dict[str, np.ndarray], power: float = stats.POWER, alpha: float = stats.ALPHA) -> float:
    """The smallest difference found with at least `power` in the simulation (bisection on `power_at`); NaN where the
    test has no p-value (fewer than 2 seeds)."""
    if np.isnan(sim["se"]).all():
        return math.nan
    low, high = 0.0, float(np.nanmax(sim["se"])) * 50
    for _ in range(40):
        mid = (low + high) / 2
        low, high = (mid, high) if power_at(sim, mid, alpha) < power else (low, mid)
    return high


SEED_STEPS = (2, 3, 4, 5, 6, 7, 8, 10, 12, 15, 20, 25, 30, 40, 50)
#: The fewest simulations behind a seed count: the Monte Carlo sd of a power near 80 % is then under 1 point, so the
#: count it lands on moves by at most one step between runs (with a few hundred it could land on 4 or 5 by chance).
MIN_SEED_SIMS = 2000


def seeds_for(
    comp: Components, cases: int, delta: float, sims: int, rng: np.random.Generator, power: float = stats.POWER, tick=None
) -> int | None:
    """The fewest seeds per method (from SEED_STEPS) at which a true difference `delta` is found with `power`, by
    simulation (at least MIN_SEED_SIMS draws each); None if 50 seeds do not suffice. `tick`: `simulate`'s progress."""
    for seeds in SEED_STEPS:
        if power_at(simulate(comp, seeds, cases, max(sims, MIN_SEED_SIMS), rng, tick=tick), delta) >= power:
            return seeds
    return None
