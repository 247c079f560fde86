"""The stopping rule's memory within a stage, and the rule replayed on a logged validation curve
(docs/decisions.md#the-stopping-rule-revised-after-its-audit-declared-before-it-was-measured-2026-11-28).

The harness updates a `StopState` at every evaluation and asks it whether the stage is on a plateau; `bench
audit-stops` replays the same decision on a long run's logged curve (`replay_stage`), which is exact because a rule
run is its long twin up to its stop.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass


@dataclass
class StopState:
    """The stopping rule's memory within a stage (saved in mid-stage checkpoints, so a resumed stage stops where it would have).

    The rule (docs/decisions.md#the-stopping-rule-revised-after-its-audit-declared-before-it-was-measured-2026-11-28): the
    decision reads the mean of the last `smooth` evaluations; an evaluation improves when that mean falls below the mean
    at the last improvement by more than `min_delta` × |that mean| (0: any new low, so no unit and no level); `bad`
    counts the evaluations since, and `improved_at` is the evaluation that improved last, which a patience growing with
    the stage reads. The lowest raw evaluation is the one restored.
    """

    best: float = math.inf  # lowest validation loss so far
    best_step: int = 0
    reference: float = math.inf  # smoothed value at the last improvement
    bad: int = 0  # evaluations since then
    evaluations: int = 0  # evaluations so far in this stage
    improved_at: int = 0  # the evaluation (1-based) of the last improvement
    recent: list[float] = dataclasses.field(default_factory=list)  # the last `smooth` evaluations

    def update(self, value: float, step: int, min_delta: float, smooth: int = 1) -> bool:
        """Record one evaluation; returns True when it is the best so far."""
        self.evaluations += 1
        self.recent = [*self.recent, value][-smooth:]
        smoothed = sum(self.recent) / len(self.recent)
        is_best = value < self.best
        if is_best:
            self.best, self.best_step = value, step
        if math.isinf(self.reference) or smoothed < self.reference - min_delta * abs(self.reference):
            self.reference, self.bad, self.improved_at = smoothed, 0, self.evaluations
        else:
            self.bad += 1
        return is_best

    def plateau(self, patience: int, min_evals: int, patience_ratio: float = 0.0) -> bool:
        """No improvement for `patience` evaluations in a row and for `patience_ratio` × the evaluations up to the last
        improvement, after at least `min_evals` evaluations."""
        wait = max(patience, math.ceil(patience_ratio * self.improved_at - 1e-9))
        return self.bad >= wait and self.evaluations >= min_evals

    def ends(self, step: int, max_steps: int, patience: int, min_evals: int, patience_ratio: float = 0.0) -> str:
        """How an early-stopping stage ends at this evaluation: "plateau" (`plateau`), "cap" (`step` reached `max_steps`),
        or "" (it goes on). The harness and the audit's replay both decide here."""
        return "plateau" if self.plateau(patience, min_evals, patience_ratio) else "cap" if step >= max_steps else ""

    @classmethod
    def restore(cls, saved: dict) -> StopState:
        """The state a mid-stage checkpoint saved (fields of an older rule are ignored; one saved before `improved_at`
        existed has it read back from its count of evaluations without an improvement)."""
        names = {f.name for f in dataclasses.fields(cls)}
        state = cls(**{k: v for k, v in saved.items() if k in names})
        if "improved_at" not in saved:
            state.improved_at = max(state.evaluations - state.bad, 0)
        return state


def replay_stage(steps: list[int], values: list[float], rule: dict) -> dict:
    """Where `rule` (a budget's record: patience, min_delta, patience_ratio, smooth, min_evals, max_steps) stops a stage
    whose evaluations at `steps` gave the validation losses `values`, as the harness decides it: {"step", "restored_step",
    "val_loss", "how"}, `how` "plateau" or "cap", or "beyond" where the rule would go on past the last evaluation."""
    state = StopState()
    for step, value in zip(steps, values):
        state.update(value, step, rule["min_delta"], rule["smooth"])
        how = state.ends(step, rule["max_steps"], rule["patience"], rule["min_evals"], rule.get("patience_ratio", 0.0))
        if how:
            return {"step": step, "restored_step": state.best_step, "val_loss": state.best, "how": how}
    return {"step": steps[-1] if steps else 0, "restored_step": state.best_step, "val_loss": state.best, "how": "beyond"}
