"""The stopping rule (bench/train/harness.py::StopState, docs/decisions.md): relative to the current level, smoothed,
with patience and a minimum length; and the budgets that use it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.train.budget import BUDGETS, LONG, PLATEAU
from bench.train.harness import StopState


def stop_step(values: list[float], patience: int = 5, min_evals: int = 10, smooth: int = 3, min_delta: float = 0.01) -> int | None:
    """The evaluation (1-based) at which the rule stops a stage whose validation losses are `values`, or None."""
    state = StopState()
    for k, value in enumerate(values, 1):
        state.update(value, 20 * k, min_delta, smooth)
        if state.plateau(patience, min_evals):
            return k
    return None


def transient_loss(n: int) -> list[float]:
    """A validation loss like Prob. U-Net's −ELBO: ~370 at the first evaluation, a fast fall to ~45 by evaluation 12,
    then a slow fall to a floor of 15 over the next ~40 evaluations."""
    k = np.arange(1, n + 1)
    return list(15 + 330 * np.exp(-k / 2.5) + 30 * np.exp(-k / 15))


def test_a_large_early_transient_does_not_stop_a_stage_that_still_falls():
    values = transient_loss(200)
    old_margin = 0.01 * values[0]  # the old rule: 1 % of the first evaluation, ~3.7 nats
    old_stop = next(k for k in range(4, 200) if all(values[j] > min(values[: k - 3]) - old_margin for j in range(k - 3, k)))
    new_stop = stop_step(values)
    assert new_stop is not None
    # the old rule stops while the loss is still 25 % above its floor; the new one when it is within a few %
    assert values[old_stop - 1] > 1.25 * 15
    assert new_stop > 2 * old_stop
    assert values[new_stop - 1] < 1.1 * 15


def test_a_flat_noisy_loss_stops_after_the_minimum_length_and_the_patience():
    rng = np.random.default_rng(0)
    values = list(1.0 + 0.003 * rng.standard_normal(100))  # noise well inside the 1 % margin
    assert stop_step(values) == 10  # 10 evaluations at least; by then 5 or more without an improvement
    assert stop_step(values, min_evals=0) == 6  # the first evaluation sets the reference, 5 more without a fall


def test_one_lucky_evaluation_does_not_reset_the_count():
    values = [1.0] * 8 + [0.975] + [1.0] * 20  # a single 2.5 % dip, then flat
    assert stop_step(values, smooth=3) == 10
    assert stop_step(values, smooth=1) == 14  # unsmoothed, the dip counts as an improvement and restarts the patience


def test_a_loss_that_keeps_halving_never_plateaus():
    values = [0.4 * 0.5 ** (k / 5) for k in range(300)]  # halves every 5 evaluations (100 steps), without end
    assert stop_step(values) is None


def test_the_margin_has_no_unit():
    values = transient_loss(200)
    assert stop_step(values) == stop_step([v * 1000 for v in values]) == stop_step([v / 1000 for v in values])


def test_best_is_the_lowest_raw_evaluation_and_an_older_checkpoint_state_resumes():
    state = StopState()
    for k, v in enumerate([3.0, 2.0, 2.5, 1.9, 2.2], 1):
        state.update(v, 20 * k, 0.01, 3)
    assert (state.best, state.best_step) == (1.9, 80)
    old = {"best": 1.0, "best_step": 40, "reference": 1.0, "bad": 2, "scale": 3.7}  # the rule before 2026-11-27
    resumed = StopState.restore(old)
    assert (resumed.best, resumed.bad, resumed.evaluations) == (1.0, 2, 0) and not math.isinf(resumed.reference)


def test_budgets_declare_the_rule_and_the_long_audit():
    assert PLATEAU.patience == 5 and PLATEAU.min_evals == 10 and PLATEAU.smooth == 3 and PLATEAU.min_delta == 0.01
    assert LONG.fixed_length and not LONG.early_stopping and LONG.max_steps >= 4 * 1000
    assert {"quick", "plateau", "long", "paper"} <= set(BUDGETS)


@pytest.mark.parametrize("budget", ["plateau", "long"])
def test_schedules_restore_the_lowest_validation_loss(budget):
    from datasets import get_dataset

    sched = BUDGETS[budget].schedule("mv-unet", "train", get_dataset("mnist-5k"), 4000)
    assert sched.restore_best
    assert sched.early_stopping == (budget == "plateau")
    assert sched.max_steps == BUDGETS[budget].max_steps and sched.batch_size == 32
