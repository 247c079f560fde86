import numpy as np
import torch

from labels.fusion import majority_vote, rater_mean, threshold_vote_mask, vote_counts


def t(rows):
    """Raters as (B=1, R, H=1, W) long from a list of R rows."""
    return torch.tensor(rows, dtype=torch.long)[None, :, None, :]


def test_majority_vote_with_ties_goes_to_background():
    # 4 raters, pixels with 0..4 foreground votes: foreground needs a strict majority (> R/2).
    raters = t([[0, 1, 1, 1, 1], [0, 0, 1, 1, 1], [0, 0, 0, 1, 1], [0, 0, 0, 0, 1]])
    valid = torch.ones(1, 4, dtype=torch.bool)
    assert majority_vote(raters, valid, 2).tolist() == [[[0, 0, 0, 1, 1]]]


def test_majority_vote_multiclass_lowest_class_wins_ties():
    raters = t([[0, 1, 2], [1, 1, 2], [2, 2, 1]])
    valid = torch.ones(1, 3, dtype=torch.bool)
    # pixel 0: one vote each for 0, 1, 2 -> 0; pixel 1: 1 twice; pixel 2: 2 twice
    assert majority_vote(raters, valid, 3).tolist() == [[[0, 1, 2]]]


def test_missing_rater_casts_no_vote():
    raters = t([[1, 1], [1, 0], [0, 0]])
    valid = torch.tensor([[True, True, False]])
    assert vote_counts(raters, valid, 2)[0, :, 0].tolist() == [[0, 1], [2, 1]]
    assert majority_vote(raters, valid, 2).tolist() == [[[1, 0]]]  # 2 of 2 valid; 1-1 tie -> background


def test_threshold_vote_mask_counts_raters_for_either_class():
    # 5 raters, foreground votes per pixel 0..5; beta = 4 keeps 0, 1 (background 5, 4) and 4, 5 votes.
    votes = [0, 1, 2, 3, 4, 5]
    raters = t([[int(v > r) for v in votes] for r in range(5)])
    valid = torch.ones(1, 5, dtype=torch.bool)
    assert threshold_vote_mask(raters, valid, 2, beta=4).tolist() == [[[True, True, False, False, True, True]]]
    assert threshold_vote_mask(raters, valid, 2, beta=5).tolist() == [[[True, False, False, False, False, True]]]


def test_rater_mean_is_vote_fraction():
    raters = t([[1, 0], [1, 1], [0, 1], [1, 1]])
    valid = torch.ones(1, 4, dtype=torch.bool)
    mean = rater_mean(raters, valid, 2)
    np.testing.assert_allclose(mean[0, 1, 0].numpy(), [0.75, 0.75])
    np.testing.assert_allclose(mean.sum(1).numpy(), 1.0)
