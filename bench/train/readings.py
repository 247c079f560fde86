"""Readings along one trajectory (docs/decisions.md, "Readings along one trajectory"): the weights a stage keeps at declared
points while it trains, which the cell then scores on the test split, and the hook that scores the test split at declared
steps as it goes (`Curve`).

Held in the stage whose weights predict (name → {"step", "score", "state"}; `Held`):

- ``rule``: the weights the stopping rule restores when it stops. An early-stopping stage holds what it restores; a
  fixed-length stage replays the rule on its own evaluations as it trains (`Schedule.rule_cap`) and holds the weights
  the rule would have restored at the evaluation where it would have stopped: a rule run is a prefix of the longer one.
- ``min-val-loss``: the lowest validation loss of the whole stage.
- ``selection``: the GT-free selection shared by every method: the highest mean, over SELECTION_SMOOTH consecutive
  evaluations (fewer at the stage's first evaluations, as the rule's smoothing), of the consensus's mean per-image
  foreground DSC against the validation raters' fused label; the weights of the newest evaluation of that window.
- ``gt-best``: the highest validation DSC against GT: an upper bound, labelled as such, never a result.
- ``last``: the weights at the stage's last step.

None of them changes the trajectory: each is a copy of the weights, and the stage restores only what its budget says.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from labels.overlap import dice
from methods.base import Method

READINGS = ("rule", "min-val-loss", "selection", "gt-best", "last")  # and "step-N", the weights at step N
SELECTION_SMOOTH = 3  # evaluations averaged by the selection (the rule's own smoothing)


@dataclass(frozen=True)
class Curve:
    """Declared steps of one stage at which the cell is called, `score(method, stage, step, epoch)` (epoch: the epochs
    completed), in eval mode, without touching the training generators: it scores the test split as the trajectory goes.
    A diagnostic: the harness selects and restores nothing by it. `held`: steps whose weights the stage holds as the
    readings `step-N` instead, for the cell to score after training (a method whose later stages train what a read-out
    needs: D-Persona's heads)."""

    stage: str
    steps: frozenset[int]
    score: Callable[[Method, str, int, int], None]
    held: frozenset[int] = frozenset()


def snapshot(method: Method) -> dict:
    return {key: t.detach().clone() for key, t in method.state_dict().items()}


def agreement(probs: np.ndarray, fused: np.ndarray) -> float:
    """Mean per-image foreground DSC (%) of a consensus (N, L, H, W) against a fused label (N, H, W) of class indices."""
    return float(np.mean(dice(probs.argmax(1) > 0, fused > 0)) * 100)


@dataclass
class Held:
    """The readings one stage holds while it trains, and the selection's window; saved in mid-stage checkpoints."""

    readings: dict[str, dict] = field(default_factory=dict)
    window: list[float] = field(default_factory=list)  # the last SELECTION_SMOOTH evaluations' agreement

    def keep(self, name: str, step: int, score: float, state: dict) -> None:
        self.readings[name] = {"step": int(step), "score": float(score), "state": state}

    def offer(self, name: str, step: int, score: float, method: Method) -> bool:
        """Hold the method's weights as `name` where `score` is higher than what it holds (ties keep the earlier)."""
        if score > self.readings.get(name, {}).get("score", -math.inf):
            self.keep(name, step, score, snapshot(method))
            return True
        return False

    def select(self, value: float, step: int, method: Method) -> None:
        """One evaluation's agreement with the validation raters: the selection reads its window's mean."""
        self.window = [*self.window, value][-SELECTION_SMOOTH:]
        self.offer("selection", step, sum(self.window) / len(self.window), method)

    def record(self) -> dict[str, dict]:
        """The manifest's `readings`: each held reading's step and score, without its weights."""
        return {name: {k: v for k, v in r.items() if k != "state"} for name, r in self.readings.items()}

    def saved(self) -> dict:
        return {"readings": self.readings, "window": self.window}

    @classmethod
    def restore(cls, partial: dict) -> Held:
        """What a mid-stage checkpoint saved (one saved before readings existed held its GT-best as `gt_best`)."""
        if "held" in partial:
            return cls(**partial["held"])
        old = partial.get("gt_best") or {}
        return cls({"gt-best": {"step": old["step"], "score": old["dsc"], "state": old["state"]}} if old else {})
