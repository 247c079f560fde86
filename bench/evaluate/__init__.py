"""Evaluation: metrics against every reference.

Each prediction is scored against every reference a case has (gt, majority,
STAPLE, each rater, the rater mean). Single-mask metrics (DSC, bAHD, soft
DSC/IoU) live in :mod:`bench.metrics`; :mod:`bench.evaluate.multirater` holds
the metrics that read several raters or several predictions at once (GED,
Hungarian-matched Dice, Dice_max, per-rater Dice, soft Dice/IoU at thresholds,
ECE), each with its empty-pair rule named and selectable (:data:`EMPTY_RULES`).
"""

from bench.evaluate.multirater import (
    EMPTY_RULES,
    dice_match,
    dice_max,
    ece,
    ged,
    iou_distance,
    per_rater_dice,
    reliability,
    soft_dice_iou_at,
)

__all__ = [
    "EMPTY_RULES",
    "dice_match",
    "dice_max",
    "ece",
    "ged",
    "iou_distance",
    "per_rater_dice",
    "reliability",
    "soft_dice_iou_at",
]
