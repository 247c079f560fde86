"""Score one cell's test predictions against every reference at once.

References (the `reference` column of the long table):

- `gt`: the dataset's ground truth, where it has one;
- `majority`: the valid raters' per-pixel majority vote (ties to the lower class, as MV-UNet's targets);
- `staple`: per-image binary STAPLE of the valid raters, hard at 0.5 (binary datasets only; RIGA's
  nested disc/cup labels have no binary STAPLE, so it is left out there);
- `rater:<name>`: each rater alone, on the cases that rater annotated (per-rater, "personalised" Dice);
- `rater-mean`: the mean of the valid raters' structure masks, a soft target (soft DSC / IoU, ECE);
- `raters`: the whole rater set, for the set metrics GED, Dice_match and Dice_max.

Metrics per reference, by their kind (bench/evaluate/metrics.py): the `hard` ones (`dsc`, `bahd`, with
counts and directed sums) against every hard reference; the `soft` ones (`soft_dice` / `soft_iou`,
MR-Net's thresholds) against `rater-mean`; the `set` ones (`ged`, `dice_match`, `dice_max`) against
`raters`; the `calibration` one (`ece`) against `gt` and `rater-mean`. Training never reads any of this.

A method with one output offers the same mask for every rater: its GED uses that one sample
(M = 1), and its Dice_match and Dice_max pair each rater with it (the prediction repeated R times),
so both equal the mean per-rater Dice; a multi-output method (one head per rater) is scored the
same way today, through its fused prediction.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from bench.evaluate import calibration, metrics
from datasets import RaterData
from labels.fusion import majority_vote
from labels.staple import staple

EMPTY_RULE = "one"  # both masks empty: Dice = IoU = 1 (multirater.EMPTY_RULES names the others)
HEADLINE = ("gt", "majority", "staple")  # the references a printed table may show


def reference_mask(test: RaterData, reference: str) -> np.ndarray:
    """A hard reference (N, H, W) of class indices: "gt", "majority" or "staple"."""
    if reference == "gt":
        if test.gt is None:
            raise ValueError("reference 'gt' requested but the dataset has no ground truth; use majority or staple")
        return test.gt
    if reference == "staple":
        if test.n_classes != 2:
            raise ValueError("reference 'staple' fuses binary labels only; use majority")
        return (staple(test.raters, test.rater_valid) >= 0.5).astype(np.uint8)
    if reference == "majority":
        raters = torch.from_numpy(test.raters).long()
        return majority_vote(raters, torch.from_numpy(test.rater_valid), test.n_classes).numpy().astype(np.uint8)
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
    probs: np.ndarray, test: RaterData, empty: str = EMPTY_RULE, fused: dict[str, np.ndarray] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Long rows for one cell (without its KEYS) and its reliability bins: every metric of `metrics.METRICS` against the
    references of its kind.

    probs (N, L, H, W) class probabilities of the test cases. Returns (rows: reference, case,
    structure, metric, value, counts, sums; bins: reference, structure, bin, count, confidence, observed).
    """
    pred = probs.argmax(1)
    refs = hard_references(test, fused)
    valid = test.rater_valid.astype(bool)
    frames, bins = [], []

    def add(reference, structure, kind, inputs, cases=None, extra=None):
        ids = test.case_ids if cases is None else test.case_ids[cases]
        for metric in metrics.of_kind(kind):
            frames.append(pd.DataFrame({"reference": reference, "case": ids, "structure": structure, "metric": metric.name,
                                        "value": metric.fn(inputs), **(extra or {})}))  # fmt: skip

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
        rater_mean = (votes & valid[:, :, None, None]).sum(1) / np.maximum(valid.sum(1), 1)[:, None, None]
        add("rater-mean", structure, "soft", metrics.SoftPair(prob, rater_mean))
        add("raters", structure, "set", metrics.RaterSet(mask[:, None], votes, valid, empty))  # one sample: the prediction
        targets = {"rater-mean": rater_mean}
        if test.gt is not None:
            targets = {"gt": np.isin(test.gt, classes), **targets}
        for name, target in targets.items():
            add(name, structure, "calibration", metrics.Calibrated(prob, target))
            count, confidence, observed = calibration.reliability(prob, target, metrics.N_BINS)
            bins.append(pd.DataFrame({"reference": name, "structure": structure, "bin": np.arange(metrics.N_BINS), "count": count,
                                      "confidence": confidence, "observed": observed}))  # fmt: skip
    return pd.concat(frames, ignore_index=True), pd.concat(bins, ignore_index=True)
