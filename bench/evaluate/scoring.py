"""Score one cell's test predictions against every reference at once.

References (the `reference` column of the long table):

- `gt`: the dataset's ground truth, where it has one;
- `majority`: the valid raters' per-pixel majority vote (ties to the lower class, as MV-UNet's targets);
- `staple`: per-image binary STAPLE of the valid raters, hard at 0.5 (`labels.staple.staple_mask`; binary datasets only;
  RIGA's nested disc/cup labels have no binary STAPLE, so it is left out there);
- `rater:<name>`: each rater alone, on the cases that rater annotated (per-rater, "personalised" Dice);
- `rater-mean`: the mean of the valid raters' structure masks, a soft target (soft DSC / IoU, ECE);
- `raters`: the whole rater set, for the set metrics GED, Dice_match and Dice_max.

Metrics per reference, by their kind (bench/evaluate/metrics.py): the `hard` ones (`dsc`, `bahd`, `hd95`, `assd`, `nsd`, with
counts and directed sums) against every hard reference; the `soft` ones (`soft_dice` / `soft_iou`,
MR-Net's thresholds) against `rater-mean`; the `set` ones (`ged`, `dice_match`, `dice_max`, `dice_soft`, `dice_personal`) against
`raters`; the `calibration` one (`ece`) against `gt` and `rater-mean`. Training never reads any of this.

The set metrics score a method's samples: M draws from a method that models a distribution of
segmentations (Prob. U-Net, Pionono, D-Persona; M = `bench run --samples`, default 16), else its
per-rater outputs (MH-UNet's heads, CM-UNet's A_r·p: M = R), else its one prediction (M = 1: its GED
uses that one sample, its Dice_match and Dice_max pair each rater with it, so both equal the mean
per-rater Dice). `dice_personal` scores the output for rater r against rater r where a method has
per-rater outputs (the one prediction otherwise). Each row's `n_samples` says how many segmentations
it scored; every other metric scores the method's one consensus prediction (n_samples 1).
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from bench.evaluate import calibration, metrics
from datasets import RaterData
from labels.fusion import vote_targets
from labels.staple import staple_mask

EMPTY_RULE = "one"  # both masks empty: Dice = IoU = 1 (multirater.EMPTY_RULES names the others)
HEADLINE = ("gt", "majority", "staple")  # the references a printed table may show
# M: test draws per image of a method that samples (`bench run --samples`). The field reports 4 to 100 (D-Persona and
# Pionono use 10 to 100, docs/methods.md#samples); 16 keeps GED's sample term's spread small at a sixteenth of 100's cost.
DEFAULT_SAMPLES = 16


def reference_mask(test: RaterData, reference: str) -> np.ndarray:
    """A hard reference (N, H, W) of class indices: "gt", "majority" or "staple"."""
    if reference == "gt":
        if test.gt is None:
            raise ValueError("reference 'gt' requested but the dataset has no ground truth; use majority or staple")
        return test.gt
    if reference == "staple":
        if test.n_classes != 2:
            raise ValueError("reference 'staple' fuses binary labels only; use majority")
        return staple_mask(test.raters, test.rater_valid)
    if reference == "majority":
        return vote_targets(test.raters, test.rater_valid, test.n_classes)["mv"]
    raise ValueError(f"unknown evaluation reference {reference!r}; choose gt, majority or staple")


def fused_references(test: RaterData) -> dict[str, np.ndarray]:
    """The raters' fused references of a test split, "majority" and (binary) "staple": (N, H, W) class indices.

    They are the same for every cell of one data setting: bench/run/split_cache.py computes them once and caches them.
    """
    return {name: reference_mask(test, name) for name in ("majority", "staple") if name != "staple" or test.n_classes == 2}


def hard_references(test: RaterData, fused: dict[str, np.ndarray] | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """name -> (mask (N, H, W) class indices, cases (N,) bool where it exists), for every hard reference of `test`.

    fused: the test split's `fused_references` when already computed (else they are computed here).
    """
    every = np.ones(test.n, dtype=bool)
    fused = fused_references(test) if fused is None else fused
    out = {}
    for name in HEADLINE:
        if name == "gt" and test.gt is not None:
            out[name] = (test.gt, every)
        elif name in fused:
            out[name] = (fused[name], every)
    for k, rater in enumerate(test.rater_names or [f"rater{k}" for k in range(test.n_raters)]):
        out[f"rater:{rater}"] = (test.raters[:, k], test.rater_valid[:, k].astype(bool))
    return out


def score_predictions(
    probs: np.ndarray,
    test: RaterData,
    empty: str = EMPTY_RULE,
    fused: dict[str, np.ndarray] | None = None,
    outputs: dict[str, np.ndarray] | None = None,
    progress: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Long rows for one cell (without its KEYS) and its reliability bins: every metric of `metrics.METRICS` against the
    references of its kind.

    probs (N, L, H, W) class probabilities of the test cases (the consensus prediction); outputs: the method's other
    outputs as `inference.predict_outputs` returns them ("samples" (N, M, H, W), "rater_outputs" (N, R, H, W), class
    indices; either may be absent). Returns (rows: reference, case, structure, metric, value, counts, sums, n_samples;
    bins: reference, structure, bin, count, confidence, observed).

    `progress`: with samples or per-rater outputs to score (their set metrics take up to a minute a cell), one line on
    stderr before them (`scoring_line`), so that a run does not sit silent; a log gets the same plain line.
    """
    outputs = outputs or {}
    for key, stack in outputs.items():
        if stack.shape[0] != len(probs) or stack.shape[2:] != probs.shape[2:]:
            raise ValueError(f"{key} {stack.shape} does not match the predictions {probs.shape}: expected (N, M, H, W)")
    if progress and outputs:
        print(scoring_line(outputs, test), file=sys.stderr, flush=True)
    pred = probs.argmax(1)
    refs = hard_references(test, fused)
    valid = test.rater_valid.astype(bool)
    frames, bins = [], []

    def add(reference, structure, kind, inputs, cases=None, extra=None):
        ids = test.case_ids if cases is None else test.case_ids[cases]
        for metric in metrics.of_kind(kind):
            n_samples = getattr(inputs, metric.outputs).shape[1] if metric.outputs else 1
            frames.append(
                pd.DataFrame(
                    {
                        "reference": reference,
                        "case": ids,
                        "structure": structure,
                        "metric": metric.name,
                        "value": metric.fn(inputs),
                        **(extra or {}),
                        "n_samples": n_samples,
                    }
                )
            )

    for structure, classes in test.structures.items():
        mask = np.isin(pred, classes)  # (N, H, W)
        prob = probs[:, list(classes)].sum(1).clip(0, 1)
        for name, (ref, cases) in refs.items():
            if not cases.any():
                continue
            pair = metrics.HardPair(mask[cases], np.isin(ref[cases], classes), test.spacing)
            extra = {k: pair.counts[k] for k in ("tp", "fp", "fn", "n_gt", "n_pred", "gt_to_pred_sum", "pred_to_gt_sum")}
            add(name, structure, "hard", pair, cases, extra)
        votes = np.isin(test.raters, classes)  # (N, R, H, W)
        per_rater = np.isin(outputs["rater_outputs"], classes) if "rater_outputs" in outputs else mask[:, None]
        samples = np.isin(outputs["samples"], classes) if "samples" in outputs else per_rater
        # Outputs for other rater slots than the test split's (a method trained on another rater setting) are samples only.
        own = per_rater if per_rater.shape[1] == votes.shape[1] else mask[:, None]
        rater_set = metrics.RaterSet(samples, own, votes, valid, empty)
        rater_mean = rater_set.rater_mean
        add("rater-mean", structure, "soft", metrics.SoftPair(prob, rater_mean))
        add("raters", structure, "set", rater_set)
        targets = {"rater-mean": rater_mean}
        if test.gt is not None:
            targets = {"gt": np.isin(test.gt, classes), **targets}
        for name, target in targets.items():
            add(name, structure, "calibration", metrics.Calibrated(prob, target))
            count, confidence, observed = calibration.reliability(prob, target, metrics.N_BINS)
            bins.append(
                pd.DataFrame(
                    {
                        "reference": name,
                        "structure": structure,
                        "bin": np.arange(metrics.N_BINS),
                        "count": count,
                        "confidence": confidence,
                        "observed": observed,
                    }
                )
            )
    return pd.concat(frames, ignore_index=True), pd.concat(bins, ignore_index=True)


def scoring_line(outputs: dict[str, np.ndarray], test: RaterData) -> str:
    """ "scoring 16 samples and 4 per-rater outputs × 1000 test images against 4 raters (set metrics)…": what is about to
    be scored, from the stacks' shapes ((N, M, H, W) each)."""
    parts = [f"{outputs['samples'].shape[1]} samples"] if "samples" in outputs else []
    parts += [f"{outputs['rater_outputs'].shape[1]} per-rater outputs"] if "rater_outputs" in outputs else []
    return f"scoring {' and '.join(parts)} × {test.n} test images against {test.n_raters} raters (set metrics)…"
