"""The ground floor of label arithmetic, shared by datasets, methods and bench alike.

- `overlap`: Dice and IoU from counts, per image and per rater, the pool's Average DSC, soft Dice / IoU;
- `fusion`: votes of several raters (majority, threshold-vote mask, rater mean);
- `staple`: STAPLE's consensus of several raters, its posterior (`staple`) and its hard label at 0.5 (`staple_mask`).

Nothing here imports the rest of the project: datasets measure their pools, methods build their targets and bench
scores predictions with the same definitions.
"""
