"""Evaluation: every cell's predictions scored against every reference, and the tables built from the scores.

- `bench.evaluate.long_table`: the long table's schema (`COLUMNS`, `CALIBRATION`), `summarise` (mean ±
  std over seeds) and `per_case` (seed-averaged values per case, for paired tests).
- `bench.evaluate.scoring`: the references of a test split (gt, majority, STAPLE, each rater, the
  rater mean, the rater set) and `score_predictions`, which fills one cell's rows.
- `bench.evaluate.metrics`: the metric descriptors (name, kind, function, direction, scale, tables).
- `bench.evaluate.pixel`: single-mask metrics (DSC, bAHD, their counts); `bench.evaluate.boundary`: HD95, ASSD and
  NSD on the masks' surfaces; `bench.evaluate.multirater`: the
  metrics that read several raters or samples at once (GED, Dice_match, Dice_max, per-rater Dice), each
  with its empty-pair rule named; `bench.evaluate.calibration`: ECE and reliability bins. Dice itself and
  the soft DSC / IoU are `labels.overlap`'s.
"""
