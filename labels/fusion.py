"""Label fusion of several raters' label maps: majority vote, threshold-vote mask, mean; STAPLE in `staple.py`.

All functions take raters as class indices, long (B, R, H, W), and rater_valid bool (B, R);
a missing rater casts no vote.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


def vote_counts(raters: torch.Tensor, valid: torch.Tensor, n_classes: int) -> torch.Tensor:
    """N^l: how many valid raters give class l to each pixel. → float (B, L, H, W)."""
    onehot = F.one_hot(raters, n_classes).to(torch.float32)  # (B, R, H, W, L)
    onehot = onehot * valid[:, :, None, None, None]
    return onehot.sum(1).permute(0, 3, 1, 2)


def majority_vote(raters: torch.Tensor, valid: torch.Tensor, n_classes: int) -> torch.Tensor:
    """Ω: the most-voted class per pixel. → long (B, H, W).

    Tie rule: the lowest class index wins (torch.argmax returns the first maximum), so with an even
    number of binary raters a 2-2 or 3-3 split is background, i.e. foreground needs a strict
    majority (votes > R/2), the rule of MR-Net's hard metric. The paper states no tie rule.
    """
    return vote_counts(raters, valid, n_classes).argmax(1)


def threshold_vote_mask(raters: torch.Tensor, valid: torch.Tensor, n_classes: int, beta: int) -> torch.Tensor:
    """M^tv (LF-Net eq. 3): 1 where the most-voted class, background included, has ≥ beta votes. → bool (B, H, W)."""
    return vote_counts(raters, valid, n_classes).amax(1) >= beta


def vote_targets(raters: np.ndarray, valid: np.ndarray, n_classes: int, beta: int = 0, chunk: int = 1024) -> dict[str, np.ndarray]:
    """A whole split's votes, the one majority vote over splits: a method's targets once (its `prepare`) instead of at
    every step, and the majority reference of scoring and of the label statistics.

    raters (N, R, H, W) class indices, valid (N, R) bool -> {"mv": Ω uint8 (N, H, W), "tv": M^tv bool (N, H, W)}
    (`beta` matters only to "tv"). The same as `majority_vote` and `threshold_vote_mask`, counted one class at a time
    in NumPy: no one-hot (N, R, H, W, L) float copy, which for a split of large images is gigabytes.
    """
    mv = np.zeros((len(raters), *raters.shape[2:]), dtype=np.uint8)
    best = np.zeros(mv.shape, dtype=np.int64)  # the votes of the most-voted class so far
    for start in range(0, len(raters), chunk):
        part = slice(start, start + chunk)
        labels, mine = np.asarray(raters[part]), np.asarray(valid[part], dtype=bool)[:, :, None, None]
        for label in range(n_classes):
            votes = ((labels == label) & mine).sum(1)
            better = votes > best[part]  # strict: a tie keeps the lower class, as argmax
            best[part][better], mv[part][better] = votes[better], label
    return {"mv": mv, "tv": best >= beta}


def threshold_vote_foreground(raters: np.ndarray, rater_valid: np.ndarray | None = None, beta: int | None = None) -> np.ndarray:
    """Foreground of the threshold-vote mask M^tv: raters (N, R, H, W) class indices, rater_valid (N, R) bool or None
    (all valid) -> (N, H, W) bool, True where the most-voted class has >= beta votes and is not background.

    beta defaults to R - 1; ties go to the lowest class (`majority_vote`), so with beta > R / 2 there are none inside
    the mask.
    """
    raters = np.asarray(raters)
    n, r = raters.shape[:2]
    valid = np.ones((n, r), dtype=bool) if rater_valid is None else np.asarray(rater_valid, dtype=bool)
    votes = vote_targets(raters, valid, max(int(raters.max(initial=0)) + 1, 2), r - 1 if beta is None else int(beta))
    return votes["tv"] & (votes["mv"] != 0)


def batch_votes(batch: dict[str, torch.Tensor], n_classes: int, beta: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Ω long (B, H, W) and M^tv bool (B, H, W) of a batch: the split's prepared targets where the batch has them, else
    counted from its raters (a batch built without `prepare`)."""
    if "mv" in batch:
        return batch["mv"].long(), batch["tv"].bool()
    counts = vote_counts(batch["raters"], batch["rater_valid"], n_classes)
    return counts.argmax(1), counts.amax(1) >= beta


def rater_mean(raters: torch.Tensor, valid: torch.Tensor, n_classes: int) -> torch.Tensor:
    """Fraction of valid raters voting each class. → float (B, L, H, W), sums to 1 over L."""
    n_valid = valid.sum(1).clamp(min=1).to(torch.float32)
    return vote_counts(raters, valid, n_classes) / n_valid[:, None, None, None]
