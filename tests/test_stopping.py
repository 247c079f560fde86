"""The stopping rule (bench/train/stopping.py::StopState, docs/decisions.md): new lows of the smoothed validation loss,
a patience growing with the stage and a minimum length (`plateau`); the rule it replaced, a fall relative to the current
level (`plateau-1127`); and the budgets that use them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench import study
from bench.train.budget import BUDGETS, LONG, PLATEAU, PLATEAU_1127
from bench.train.stopping import StopState

PAPER = study.default()

OLD = {"min_delta": 0.01, "ratio": 0.0}  # the rule of 2026-11-27 (`plateau-1127`)


def stop_step(
    values: list[float], patience: int = 5, min_evals: int = 10, smooth: int = 3, min_delta: float = 0.0, ratio: float = 0.5
) -> int | None:
    """The evaluation (1-based) at which the rule stops a stage whose validation losses are `values`, or None (default:
    the `plateau` rule)."""
    state = StopState()
    for k, value in enumerate(values, 1):
        state.update(value, 20 * k, min_delta, smooth)
        if state.plateau(patience, min_evals, ratio):
            return k
    return None


def high_floor_loss(n: int, noise: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(values, noiseless curve): a validation loss like LS- or Mean-UNet's, mostly a floor no training removes (0.22, the
    raters' disagreement) with a small learnable part (0.03) falling slowly, under evaluation-to-evaluation noise."""
    k = np.arange(1, n + 1)
    curve = 0.22 + 0.03 * np.exp(-k / 60)
    return curve + noise * np.random.default_rng(seed).standard_normal(n), curve


def new_lows(values: list[float], smooth: int = 3) -> list[int]:
    """The evaluations (1-based) at which the mean of the last `smooth` values is below every earlier such mean: the
    rule's improvements, computed without StopState."""
    means = [float(np.mean(values[max(0, k - smooth) : k])) for k in range(1, len(values) + 1)]
    return [k for k in range(1, len(means) + 1) if k == 1 or means[k - 1] < min(means[: k - 1])]


def transient_loss(n: int) -> list[float]:
    """A validation loss like Prob. U-Net's −ELBO: ~370 at the first evaluation, a fast fall to ~45 by evaluation 12,
    then a slow fall to a floor of 15 over the next ~40 evaluations."""
    k = np.arange(1, n + 1)
    return list(15 + 330 * np.exp(-k / 2.5) + 30 * np.exp(-k / 15))


def test_a_large_early_transient_does_not_stop_a_stage_that_still_falls():
    values = transient_loss(200)
    old_margin = 0.01 * values[0]  # the old rule: 1 % of the first evaluation, ~3.7 nats
    old_stop = next(k for k in range(4, 200) if all(values[j] > min(values[: k - 3]) - old_margin for j in range(k - 3, k)))
    new_stop = stop_step(values, **OLD)
    assert new_stop is not None
    # the old rule stops while the loss is still 25 % above its floor; the new one when it is within a few %
    assert values[old_stop - 1] > 1.25 * 15
    assert new_stop > 2 * old_stop
    assert values[new_stop - 1] < 1.1 * 15


def test_a_flat_noisy_loss_stops_after_the_minimum_length_and_the_patience():
    rng = np.random.default_rng(0)
    values = list(1.0 + 0.003 * rng.standard_normal(100))  # noise well inside the 1 % margin
    assert stop_step(values, **OLD) == 10  # 10 evaluations at least; by then 5 or more without an improvement
    assert stop_step(values, min_evals=0, **OLD) == 6  # the first evaluation sets the reference, 5 more without a fall


def test_one_lucky_evaluation_does_not_reset_the_count():
    values = [1.0] * 8 + [0.975] + [1.0] * 20  # a single 2.5 % dip, then flat
    assert stop_step(values, smooth=3, **OLD) == 10
    assert stop_step(values, smooth=1, **OLD) == 14  # unsmoothed, the dip counts as an improvement and restarts the patience


def test_a_loss_that_keeps_halving_never_plateaus():
    values = [0.4 * 0.5 ** (k / 5) for k in range(300)]  # halves every 5 evaluations (100 steps), without end
    assert stop_step(values) is None and stop_step(values, **OLD) is None


def test_the_margin_has_no_unit():
    values = transient_loss(200)
    for rule in ({}, OLD):
        assert stop_step(values, **rule) == stop_step([v * 1000 for v in values], **rule) == stop_step([v / 1000 for v in values], **rule)
    high, _ = high_floor_loss(300, 0.0003)
    assert stop_step(list(high)) == stop_step(list(high * 1000)) == stop_step(list(high + 5.0))  # no unit, no level


def test_best_is_the_lowest_raw_evaluation_and_an_older_checkpoint_state_resumes():
    state = StopState()
    for k, v in enumerate([3.0, 2.0, 2.5, 1.9, 2.2], 1):
        state.update(v, 20 * k, 0.01, 3)
    assert (state.best, state.best_step) == (1.9, 80)
    old = {"best": 1.0, "best_step": 40, "reference": 1.0, "bad": 2, "scale": 3.7}  # the rule before 2026-11-27
    resumed = StopState.restore(old)
    assert (resumed.best, resumed.bad, resumed.evaluations) == (1.0, 2, 0) and not math.isinf(resumed.reference)
    before = {"best": 1.0, "best_step": 400, "reference": 1.0, "bad": 3, "evaluations": 30, "recent": [1.0]}  # no improved_at
    assert StopState.restore(before).improved_at == 27


def test_budgets_declare_the_rule_and_the_long_audit():
    assert (PLATEAU.patience, PLATEAU.min_evals, PLATEAU.smooth, PLATEAU.min_delta, PLATEAU.patience_ratio) == (5, 10, 3, 0.0, 0.5)
    assert (PLATEAU_1127.min_delta, PLATEAU_1127.patience_ratio, PLATEAU_1127.max_steps) == (0.01, 0.0, PLATEAU.max_steps)
    assert BUDGETS["quick"].record()["patience_ratio"] == 0.5  # one rule for quick and plateau
    assert LONG.fixed_length and not LONG.early_stopping and LONG.max_steps >= 4 * 1000
    assert {"quick", "plateau", "plateau-1127", "long", "paper"} <= set(BUDGETS)


def test_a_slow_fall_under_a_high_floor_stops_the_old_rule_early_and_not_the_new_one():
    values, curve = high_floor_loss(600, noise=0.0003)
    old = stop_step(list(values), **OLD)
    assert old is not None and curve[old - 1] - 0.22 > 0.5 * 0.03  # the old rule: over half the learnable part still to go
    new = stop_step(list(values))
    assert new is None or curve[new - 1] - 0.22 < 0.0003  # the new one: not while the fall exceeds the noise


def test_the_patience_grows_with_the_stage():
    values = list(np.linspace(1.0, 0.5, 40)) + [0.6] * 100  # new lows until evaluation 40, then flat above them
    assert stop_step(values) == 60  # 20 evaluations (half of 40) without a new low, not 5
    assert stop_step(values, ratio=0.0) == 45
    # early on the patience is 5: the smoothed mean's last new low is evaluation 6 (the drop fills its window of 3), +5
    assert stop_step([1.0] * 3 + [0.5] + [0.6] * 30) == 11


@pytest.mark.parametrize("seed", range(6))
def test_a_noisy_flat_loss_stops_where_the_rule_says(seed):
    values = list(1.0 + 0.003 * np.random.default_rng(seed).standard_normal(400))
    lows = new_lows(values)
    expected = next(
        k
        for k in range(1, 401)
        if k >= 10 and k - max(i for i in lows if i <= k) >= max(5, math.ceil(0.5 * max(i for i in lows if i <= k)))
    )
    assert stop_step(values) == expected < 60  # a flat loss stops within a few multiples of the minimum length


@pytest.mark.parametrize("budget", ["plateau", "long"])
def test_schedules_restore_the_lowest_validation_loss(budget):
    from datasets import get_dataset

    sched = BUDGETS[budget].schedule("mv-unet", "train", get_dataset("mnist-5k"), 4000, PAPER)
    assert sched.restore_best
    assert sched.early_stopping == (budget == "plateau")
    assert sched.max_steps == BUDGETS[budget].max_steps and sched.batch_size == 32


def test_max_steps_caps_a_rule_and_sets_the_long_runs_length():
    from pathlib import Path

    from bench.run.resolve import RunOptions, stage_schedules
    from datasets import get_dataset

    def length(budget: str, max_steps: int) -> int:
        opts = RunOptions(Path("r"), Path("d"), BUDGETS[budget], max_steps=max_steps)
        return stage_schedules(["train"], "mv-unet", get_dataset("mnist-5k"), 3200, opts)["train"].max_steps

    assert length("plateau", 6000) == 5000 and length("plateau", 300) == 300  # a cap never raises a rule's cap
    assert length("long", 4480) == 4480 and length("long", 300) == 300  # the audit's long run: 4 × the stop, past 4,000
