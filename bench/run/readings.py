"""A cell's readings on its test split (docs/decisions.md, "Readings along one trajectory"; bench/train/readings.py).

Along the stage whose weights predict, the cell keeps its test curve (per case, the foreground counts against GT, else
the raters' majority vote, at `budget.curve_steps`) and scores in full the weights at the fixed steps
(`budget.reading_steps`, the readings `step-N`) as it trains; after training, it scores in full the readings the stage
held (`rule`, `min-val-loss`, `selection`, `gt-best`, `last`; and `step-N` where later stages train what a read-out
needs, D-Persona's heads). Full rows are the long table's against every reference but
the single raters (`KEPT`), with the reading's name and step; the cell's result (its budget's primary reading) stays in
metrics.parquet.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

import methods
from bench import store
from bench.evaluate.long_table import CALIBRATION, COLUMNS, with_keys
from bench.evaluate.scoring import reference_mask, score_predictions
from bench.identity import Cell
from bench.train import inference
from bench.train.readings import Curve
from datasets import RaterData


def score_cell(
    cell: Cell,
    probs: np.ndarray,
    test: RaterData,
    fused: dict | None = None,
    outputs: dict | None = None,
    empty: str = "one",
    progress: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The cell's long rows and reliability bins against every reference (bench.evaluate.scoring), with its KEYS.

    fused: the test split's cached majority and STAPLE references (`bench.run.split_cache.fused_test_references`), cut to its
    cases; outputs: the method's samples and per-rater outputs (`inference.predict_outputs`); empty: the empty-pair rule;
    progress: `score_predictions`' line before scoring samples or per-rater outputs.
    """
    rows, bins = score_predictions(probs, test, empty=empty, fused=fused, outputs=outputs, progress=progress)
    keys = cell.record()
    return with_keys(rows, keys, COLUMNS), with_keys(bins, keys, CALIBRATION)


def kept(rows: pd.DataFrame) -> pd.DataFrame:
    """A reading's rows without those against each single rater (the set metrics against all of them stay)."""
    return rows[~rows["reference"].str.startswith("rater:")]


@dataclass(frozen=True)
class Scorer:
    """How one cell reads a set of weights on its test split: its consensus, its samples and per-rater outputs, and their
    long rows against every reference (`bench.evaluate.scoring`), as the cell's own result is read."""

    cell: Cell
    test: RaterData
    fused: dict[str, np.ndarray]  # the test split's cached majority and STAPLE references
    device: torch.device
    precision: str
    samples: int
    empty: str
    progress: bool = True  # the scoring line before a long read-out (a dry run's timed one says nothing)

    def probs(self, method: methods.Method) -> np.ndarray:
        return inference.predict_proba(method, self.test.images, device=self.device, precision=self.precision, seed=self.cell.seed)

    def read(self, method: methods.Method) -> tuple[np.ndarray, dict, pd.DataFrame, pd.DataFrame]:
        """(probs, outputs, long rows, reliability bins) of the method's current weights."""
        probs = self.probs(method)
        outputs = inference.predict_outputs(
            method, self.test.images, n_samples=self.samples, seed=self.cell.seed, device=self.device, precision=self.precision
        )
        return probs, outputs, *score_cell(self.cell, probs, self.test, self.fused, outputs, self.empty, self.progress)

    def reading(self, method: methods.Method, name: str, step: int) -> pd.DataFrame:
        """The long rows of one reading of the method's current weights (`kept`), named and stepped."""
        return kept(self.read(method)[2]).assign(reading=name, reading_step=int(step))

    def counts(self, method: methods.Method, stage: str, step: int, epoch: int) -> pd.DataFrame:
        """One point of the test curve: per case, tp, fp and fn of the foreground against GT, else the majority vote."""
        reference = "gt" if self.test.gt is not None else "majority"
        truth = reference_mask(self.test, reference) > 0
        pred = self.probs(method).argmax(1) > 0
        counts = {k: (a & b).sum((1, 2)) for k, a, b in (("tp", pred, truth), ("fp", pred, ~truth), ("fn", ~pred, truth))}
        return pd.DataFrame({"stage": stage, "step": step, "epoch": epoch, "reference": reference, "case_id": self.test.case_ids, **counts})


def trajectory(scorer: Scorer, folder: Path, stage: str, curve: frozenset[int], fixed: frozenset[int], hold: bool) -> Curve | None:
    """The hook that keeps a cell's test curve at the steps `curve` and scores its fixed-step readings at `fixed`, in
    `stage`, as the cell trains (None where there is neither). `hold`: later stages train what a read-out needs
    (D-Persona's heads), so the stage holds the weights at `fixed` and the cell scores them after training instead."""
    if not curve and not fixed:
        return None
    scored = frozenset() if hold else fixed

    def score(method: methods.Method, stage: str, step: int, epoch: int) -> None:
        if step in curve:
            store.write_part(folder, f"curve-{step}", scorer.counts(method, stage, step, epoch))
        if step in scored:
            store.write_part(folder, f"step-{step}", scorer.reading(method, f"step-{step}", step))

    return Curve(stage, curve | scored, score, fixed - scored)


def held_readings(scorer: Scorer, folder: Path, method: methods.Method, held: dict[str, dict], own: str) -> dict[str, dict]:
    """Score each reading the stage held but the cell's own (`own`, its rows are metrics.parquet's) on the test split, in
    its reading file; returns the manifest's `readings` (name → step and score; the held weights are not kept). The
    method ends on the last reading's weights: call this last."""
    record = {}
    for name, r in held.items():
        record[name] = {"step": r["step"], "score": None if np.isnan(r["score"]) else round(r["score"], 6)}
        if name != own:
            method.load_state_dict(r["state"])
            store.write_part(folder, name, scorer.reading(method, name, r["step"]))
    return record
