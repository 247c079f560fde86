"""The long results table's schema, its summary over seeds and its per-case view.

One row per cell × reference × case × structure × metric (`COLUMNS`): the cell's KEYS, what the
prediction was scored against (`reference`), the value and, for hard-mask metrics, the raw counts
and bAHD's directed distance sums, so another Dice or bAHD empty-mask convention is a
recomputation, and the number of predicted segmentations it scores (`n_samples`). `CALIBRATION` is the companion table of reliability bins (one row per cell ×
reference × structure × bin).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

KEYS = ["dataset", "raters", "noise", "method", "seed"]  # a cell: one training run
COUNTS = ["tp", "fp", "fn", "n_gt", "n_pred"]
SUMS = ["gt_to_pred_sum", "pred_to_gt_sum"]  # bAHD's directed distance sums (NaN where the target set is empty)
# n_samples: how many predicted segmentations the value scores (M samples, or the per-rater outputs, for the set
# metrics; 1 for the consensus prediction every other metric scores). Tables written before it have NaN there.
COLUMNS = [*KEYS, "reference", "case", "structure", "metric", "value", *COUNTS, *SUMS, "n_samples"]
CALIBRATION = [*KEYS, "reference", "structure", "bin", "count", "confidence", "observed"]
STRUCTURE_ORDER = ["foreground", "disc", "cup"]
# A table's group: one dataset, rater style and noise level, scored against one reference.
GROUP = ["dataset", "raters", "noise", "reference"]
SUMMARY = [*GROUP, "method", "structure", "metric", "mean", "std", "n_seeds", "n_cases"]


def select(table: pd.DataFrame, **values) -> pd.DataFrame:
    """The rows of a long table (or of any frame) whose columns equal `values`: `select(table, metric="dsc", noise="protocol")`."""
    keep = np.ones(len(table), dtype=bool)
    for column, value in values.items():
        keep &= (table[column] == value).to_numpy()
    return table[keep]


def with_keys(frame: pd.DataFrame, keys: dict, columns: list[str]) -> pd.DataFrame:
    """`frame` with the cell's KEYS in front, in the order of `columns`."""
    frame = frame.copy()
    for key in KEYS:
        frame[key] = keys[key]
    return frame[columns]


def summarise(table: pd.DataFrame, averages: pd.DataFrame | None = None) -> pd.DataFrame:
    """Mean over cases per seed, then mean ± sample std over seeds, per GROUP × method × structure × metric.

    `averages` (store.rater_averages: dataset, raters, noise, dsc) adds the paper's "Average" row
    (method "average", reference "gt"): the raters' mean DSC vs GT on the training split.
    """
    group = [*GROUP, "method", "structure", "metric"]
    per_seed = table.groupby([*group, "seed"], dropna=False)["value"].mean().reset_index()
    out = per_seed.groupby(group, dropna=False)["value"].agg(mean="mean", std="std", n_seeds="count").reset_index()
    n_cases = table.groupby(group, dropna=False)["case"].nunique().rename("n_cases").reset_index()
    out = out.merge(n_cases, on=group, how="left")
    if averages is not None and len(averages):
        avg = averages.assign(
            reference="gt",
            method="average",
            structure="foreground",
            metric="dsc",
            mean=averages["dsc"],
            std=np.nan,
            n_seeds=0,
            n_cases=0,
        )
        out = pd.concat([avg[out.columns], out], ignore_index=True)
    return out[SUMMARY]


CASE_KEYS = [*GROUP, "method", "case"]


def pooled_areas(rows: pd.DataFrame, by) -> pd.DataFrame:
    """Per `by` group of hard-mask rows: precision, recall and predicted ÷ reference area from their COUNTS pooled over
    the group's rows (cases, seeds); NaN where a denominator is 0."""
    sums = rows.groupby(by)[COUNTS].sum()
    return pd.DataFrame(
        {
            "precision": sums["tp"] / (sums["tp"] + sums["fp"]).replace(0, np.nan),
            "recall": sums["tp"] / (sums["tp"] + sums["fn"]).replace(0, np.nan),
            "area": sums["n_pred"] / sums["n_gt"].replace(0, np.nan),
        }
    )


def mean_sd(mean: float, sd: float | None, digits: int = 2) -> str:
    """ "12.34 ± 0.56", or the mean alone where the sd is missing (one seed, or a paper value without one)."""
    return f"{mean:.{digits}f}" if sd is None or pd.isna(sd) else f"{mean:.{digits}f} ± {sd:.{digits}f}"


def per_case(table: pd.DataFrame, metric: str, structure: str) -> pd.DataFrame:
    """Values averaged over seeds, one row per GROUP × method × case.

    A NaN value of one seed (e.g. a metric undefined for an empty mask) is skipped in the mean;
    the case is NaN only when every seed is NaN. `n_seeds` counts the seeds that had a value.

    Returns columns dataset, raters, noise, reference, method, case, value, n_seeds.
    """
    rows = select(table, metric=metric, structure=structure)
    grouped = rows.groupby(CASE_KEYS, dropna=False, sort=True)["value"]
    out = grouped.agg(value="mean", n_seeds="count").reset_index()
    return out[[*CASE_KEYS, "value", "n_seeds"]]


def pooled_bins(calibration: pd.DataFrame) -> pd.DataFrame:
    """Reliability bins pooled over seeds (and cases): per GROUP × method × structure × bin, count-weighted means."""
    group = [*GROUP, "method", "structure", "bin"]
    c = calibration.assign(
        wc=calibration["confidence"].fillna(0) * calibration["count"], wo=calibration["observed"].fillna(0) * calibration["count"]
    )
    out = c.groupby(group, dropna=False)[["count", "wc", "wo"]].sum().reset_index()
    n = out["count"].where(out["count"] > 0)
    return out.assign(confidence=out["wc"] / n, observed=out["wo"] / n).drop(columns=["wc", "wo"])


def ordered_structures(names) -> list[str]:
    """Structures in the tables' order (foreground, disc, cup), then any other by name."""
    names = set(names)
    return [s for s in STRUCTURE_ORDER if s in names] + sorted(names - set(STRUCTURE_ORDER))
