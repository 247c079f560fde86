"""bench.evaluate: one cell scored against every reference at once, cross-checked against direct computations."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.evaluate import calibration, multirater
from bench.evaluate.long_table import per_case, pooled_bins, summarise
from bench.evaluate.pixel import dice, directed_distance_sums
from bench.evaluate.scoring import hard_references, reference_mask, score_predictions
from datasets import RaterData


def toy_data(n=6, size=12, seed=0, with_gt=True, missing=True) -> tuple[np.ndarray, RaterData]:
    rng = np.random.default_rng(seed)
    gt = np.zeros((n, size, size), np.uint8)
    for i in range(n):
        y, x = rng.integers(2, size - 5, 2)
        gt[i, y : y + 4, x : x + 4] = 1
    gt[0] = 0  # one empty case
    raters = np.stack([gt, np.roll(gt, 1, axis=2), gt * (rng.random(gt.shape) > 0.3), np.zeros_like(gt)], axis=1).astype(np.uint8)
    valid = np.ones((n, 4), bool)
    if missing:
        valid[1, 3] = False
    fg = np.clip(gt + rng.normal(0, 0.3, gt.shape), 0.01, 0.99).astype(np.float32)
    probs = np.stack([1 - fg, fg], axis=1)
    data = RaterData(
        images=rng.random((n, 1, size, size), dtype=np.float32),
        raters=raters,
        rater_valid=valid,
        gt=gt if with_gt else None,
        case_ids=np.array([f"c{i}" for i in range(n)]),
        groups=np.array([f"c{i}" for i in range(n)]),
        rater_names=("a", "b", "c", "d"),
    )
    return probs, data


def value(rows: pd.DataFrame, reference: str, metric: str) -> np.ndarray:
    part = rows[(rows["reference"] == reference) & (rows["metric"] == metric)]
    return part.set_index("case")["value"]


def test_every_reference_is_scored_and_matches_a_direct_computation():
    probs, test = toy_data()
    rows, bins = score_predictions(probs, test)
    refs = set(rows["reference"])
    assert refs == {"gt", "majority", "staple", "rater:a", "rater:b", "rater:c", "rater:d", "rater-mean", "raters"}
    pred = probs.argmax(1) == 1
    np.testing.assert_allclose(value(rows, "gt", "dsc").to_numpy(), dice(pred, test.gt == 1))
    for k, name in enumerate("abcd"):
        cases = test.rater_valid[:, k]
        got = value(rows, f"rater:{name}", "dsc")
        assert list(got.index) == list(test.case_ids[cases])  # a rater is scored only where it annotated
        np.testing.assert_allclose(got.to_numpy(), dice(pred[cases], test.raters[cases, k] == 1))
    votes = test.raters == 1
    np.testing.assert_allclose(value(rows, "raters", "ged").to_numpy(), multirater.ged(pred[:, None], votes, test.rater_valid))
    # one output offered to every rater: Dice_match is the mean per-rater Dice over the valid raters
    per_rater = multirater.per_rater_dice(pred, votes, test.rater_valid)
    np.testing.assert_allclose(value(rows, "raters", "dice_match").to_numpy(), np.nanmean(per_rater, axis=1))
    np.testing.assert_allclose(value(rows, "gt", "ece").to_numpy(), calibration.ece(probs[:, 1], test.gt == 1))
    # directed sums and counts kept beside DSC so another convention is a recomputation
    gt_rows = rows[(rows["reference"] == "gt") & (rows["metric"] == "dsc")]
    assert (gt_rows["tp"] == (pred & (test.gt == 1)).sum((1, 2))).all()
    gt_to_pred, pred_to_gt = directed_distance_sums(pred, test.gt == 1)
    np.testing.assert_allclose(gt_rows["gt_to_pred_sum"], gt_to_pred, equal_nan=True)
    np.testing.assert_allclose(gt_rows["pred_to_gt_sum"], pred_to_gt, equal_nan=True)
    assert set(bins["reference"]) == {"gt", "rater-mean"} and bins.groupby("reference")["count"].sum().eq(probs[:, 1].size).all()


def test_without_gt_or_binary_labels_the_missing_references_are_left_out():
    probs, test = toy_data(with_gt=False)
    rows, bins = score_predictions(probs, test)
    assert "gt" not in set(rows["reference"]) and set(bins["reference"]) == {"rater-mean"}
    with pytest.raises(ValueError, match="no ground truth"):
        reference_mask(test, "gt")
    assert "staple" in hard_references(test)


def test_summary_and_per_case_keep_references_apart():
    probs, test = toy_data()
    rows, _ = score_predictions(probs, test)
    frames = [rows.assign(dataset="d", raters="cm", noise="protocol", method="m", seed=s) for s in (0, 1)]
    table = pd.concat(frames, ignore_index=True)
    summary = summarise(table)
    gt = summary[(summary["reference"] == "gt") & (summary["metric"] == "dsc")]
    assert len(gt) == 1 and gt["n_seeds"].iloc[0] == 2 and gt["mean"].iloc[0] == pytest.approx(value(rows, "gt", "dsc").mean())
    cases = per_case(table, "dsc", "foreground")
    assert set(cases["reference"]) >= {"gt", "majority", "rater:a"} and cases["n_seeds"].eq(2).all()


def test_pooled_bins_weight_by_count():
    cal = pd.DataFrame(
        {
            "dataset": "d",
            "raters": "cm",
            "noise": "protocol",
            "method": "m",
            "seed": [0, 1],
            "reference": "gt",
            "structure": "foreground",
            "bin": 3,
            "count": [1, 3],
            "confidence": [0.2, 0.24],
            "observed": [0.0, 0.4],
        }
    )
    pooled = pooled_bins(cal)
    assert pooled["count"].item() == 4
    assert pooled["confidence"].item() == pytest.approx((0.2 + 3 * 0.24) / 4)
    assert pooled["observed"].item() == pytest.approx(1.2 / 4)


def test_the_fused_test_references_are_computed_once_per_data_setting(tmp_path, monkeypatch):
    """Majority and STAPLE of the test raters are the same for every cell of a data setting: computed once, cached on disk."""
    from pathlib import Path

    from bench.run import split_cache

    calls = []
    original = split_cache.fused_references
    monkeypatch.setattr(split_cache, "fused_references", lambda test: calls.append(test.n) or original(test))
    key = split_cache.DataKey.of("mnist-5k", Path("data"), "lfnet", "protocol", tmp_path)
    split_cache.fused_test_references.cache_clear()
    first = split_cache.fused_test_references(key)
    split_cache.fused_test_references.cache_clear()  # a new process: from the file
    again = split_cache.fused_test_references(key)
    assert calls == [1000] and set(first) == {"majority", "staple"} and list(tmp_path.glob("*-references-*.npz"))
    for name in first:
        np.testing.assert_array_equal(first[name], again[name])
    test = split_cache.load_splits(key).test.subset(np.arange(30))
    probs = np.random.default_rng(0).random((30, 2, 28, 28)).astype(np.float32)
    probs /= probs.sum(1, keepdims=True)
    cached, _ = score_predictions(probs, test, fused={k: v[:30] for k, v in first.items()})
    pd.testing.assert_frame_equal(cached, score_predictions(probs, test)[0])
