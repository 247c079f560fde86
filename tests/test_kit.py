"""Tests for methods/kit.py, the pieces methods share: the masked mean and its losses, the drawn rater, and the
confusion-matrix likelihood that CM-UNet and LF-Net's CM ablation both use, against the two formulas each method wrote
for itself before (two tensor layouts), on random tiny tensors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from methods import kit
from methods.base import DataSpec, StepContext
from methods.registry import build_method

B, R, L, H, W = 3, 4, 3, 5, 6


def random_case(seed: int):
    g = torch.Generator().manual_seed(seed)
    a = F.softplus(torch.randn(B, R, H, W, L, L, generator=g) * 2)
    cms = a / a.sum(-2, keepdim=True)  # (B, R, H, W, L, L) column-stochastic
    probs = torch.softmax(torch.randn(B, L, H, W, generator=g), 1)
    raters = torch.randint(0, L, (B, R, H, W), generator=g)
    valid = torch.rand(B, R, generator=g) > 0.3
    valid[0, 0] = False  # at least one missing pair
    return cms, probs, raters, valid


def cm_unet_before(logits, cms, raters, valid, alpha):
    """CM-UNet's loss as methods/cm_unet.py wrote it: cms (B, R, H, W, L, L), EPS 1e-8, valid pairs summed over B."""
    b = valid.shape[0]
    probs = torch.softmax(logits.float(), dim=1)
    p = probs.permute(0, 2, 3, 1)[:, None, :, :, None, :]
    p_noisy = (cms * p).sum(-1).movedim(-1, 2)
    nll = -torch.log(p_noisy.gather(2, raters[:, :, None]).squeeze(2) + 1e-8).mean((-2, -1))
    trace = cms.diagonal(dim1=-2, dim2=-1).sum(-1).mean((-2, -1))
    weight = valid.to(nll.dtype)
    return (nll * weight).sum() / b + alpha * (trace * weight).sum() / b


def lf_net_before(cms, probs, raters, valid, trace_weight):
    """LF-Net's CM rater term as methods/lf_net.py wrote it: cms (B, R, L, L, H, W), EPS 1e-7, per-rater means summed."""

    def per_rater_mean(per_pixel, valid):
        w = valid.to(per_pixel.dtype)
        return ((per_pixel.mean((2, 3)) * w).sum(0) / w.sum(0).clamp(min=1)).sum()

    noisy = (cms * probs.float()[:, None, None]).sum(3)
    picked = noisy.gather(2, raters[:, :, None]).squeeze(2)
    loss = per_rater_mean(-torch.log(picked + 1e-7), valid)
    if trace_weight:
        loss = loss + trace_weight * per_rater_mean(cms.diagonal(dim1=2, dim2=3).sum(-1), valid)
    return loss


@pytest.mark.parametrize("seed", range(5))
def test_the_one_likelihood_gives_both_methods_old_losses(seed):
    from methods.cm_unet import confusion_loss
    from methods.lf_net import confusion_rater_term

    cms, probs, raters, valid = random_case(seed)
    logits = torch.log(probs)
    new = confusion_loss(logits, cms, raters, valid, 0.3)["loss"]
    assert new.item() == pytest.approx(cm_unet_before(logits, cms, raters, valid, 0.3).item(), abs=1e-6)
    old_layout = cms.permute(0, 1, 4, 5, 2, 3)  # LF-Net's heads gave (B, R, L, L, H, W)
    for weight in (0.0, 0.5):
        new = confusion_rater_term(cms, probs, raters, valid, weight)
        assert new.item() == pytest.approx(lf_net_before(old_layout, probs, raters, valid, weight).item(), abs=1e-6)


def test_confusion_nll_by_hand_and_identity_matrices():
    """With A = I the likelihood is the softmax itself: −log(p[ỹ] + eps); trace(I) = L."""
    _, probs, raters, _ = random_case(0)
    eye = torch.eye(L).expand(B, R, H, W, L, L)
    nll = kit.confusion_nll(eye, probs, raters, eps=0.0)
    assert nll.shape == (B, R, H, W)
    for r in range(R):
        expected = -torch.log(probs.gather(1, raters[:, r : r + 1]).squeeze(1))
        assert torch.allclose(nll[:, r], expected, atol=1e-6)
    assert torch.equal(kit.confusion_trace(eye), torch.full((B, R, H, W), float(L)))
    # one pixel by hand: A = [[0.9, 0.2], [0.1, 0.8]], p = (0.3, 0.7): p_noisy = (0.27 + 0.14, 0.03 + 0.56) = (0.41, 0.59)
    a = torch.tensor([[0.9, 0.2], [0.1, 0.8]]).view(1, 1, 1, 1, 2, 2)
    p = torch.tensor([0.3, 0.7]).view(1, 2, 1, 1)
    assert torch.allclose(kit.noisy_label_probs(a, p).flatten(), torch.tensor([0.41, 0.59]))
    assert kit.confusion_nll(a, p, torch.ones(1, 1, 1, 1, dtype=torch.long), 0.0).item() == pytest.approx(
        -torch.log(torch.tensor(0.59)).item()
    )


def test_normalise_columns_makes_columns_sum_to_one():
    a = torch.tensor([[1.0, 3.0], [3.0, 1.0]])
    assert torch.allclose(kit.normalise_columns(a), torch.tensor([[0.25, 0.75], [0.75, 0.25]]))
    assert torch.equal(kit.normalise_columns(torch.zeros(2, 2)), torch.zeros(2, 2))  # an underflowed column: 0, not NaN


def test_masked_mean_over_all_or_one_axis_and_an_empty_mask():
    values = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    mask = torch.tensor([[True, False, True], [False, False, False]])
    assert kit.masked_mean(values, mask).item() == 2.0  # (1 + 3) / 2
    assert kit.masked_mean(values).item() == 3.5
    assert torch.equal(kit.masked_mean(values, mask, dim=1), torch.tensor([2.0, 0.0]))  # a row without a kept value: 0
    assert torch.equal(kit.masked_mean(values, mask, dim=0), torch.tensor([1.0, 0.0, 3.0]))
    empty = kit.masked_mean(values, torch.zeros_like(mask))
    assert empty.item() == 0.0 and empty.requires_grad  # zero, and still a graph for backward
    assert kit.masked_mean(values, mask.float() * 2).item() == 2.0  # weights: Σ w·v / Σ w


def test_masked_cross_entropy_is_the_masked_mean_of_the_pixel_losses():
    g = torch.Generator().manual_seed(1)
    logits, target = torch.randn(2, 3, 4, 4, generator=g), torch.randint(0, 3, (2, 4, 4), generator=g)
    mask = torch.rand(2, 4, 4, generator=g) > 0.5
    ce = F.cross_entropy(logits, target, reduction="none")
    assert kit.masked_cross_entropy(logits, target, mask).item() == pytest.approx(ce[mask].mean().item(), rel=1e-6)
    assert kit.masked_cross_entropy(logits, target).item() == pytest.approx(ce.mean().item(), rel=1e-6)
    onehot = F.one_hot(target, 3).movedim(-1, 1).float()
    assert kit.soft_cross_entropy(logits, onehot).item() == pytest.approx(ce.mean().item(), rel=1e-6)


def test_drawn_targets_draw_only_valid_raters_and_flag_images_without_one():
    raters = torch.arange(4).view(1, 4, 1, 1).expand(3, 4, 2, 2).clone()  # rater r's mask is all r
    valid = torch.tensor([[False, True, False, True], [True, False, False, False], [False] * 4])
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        drawn, target, keep = kit.drawn_targets(raters, valid, g)
        assert drawn[0] in (1, 3) and drawn[1] == 0
        assert torch.equal(target[:, 0, 0], drawn)
        assert keep.tolist() == [True, True, False]


def test_prior_sampling_draws_per_image_whatever_the_batch():
    """The samples and consensus of a prior-sampling method depend on an image's id, not on its batch."""
    spec = DataSpec(1, 2, 3)
    torch.manual_seed(0)
    m = build_method("prob-unet", spec, {"consensus_draws": 4}).eval()
    images, ids = torch.randn(3, 1, 16, 16), torch.tensor([7, 8, 9])
    with torch.no_grad():
        both = kit.prior_samples(m, images, 2, ids)
        alone = kit.prior_samples(m, images[1:2], 2, ids[1:2])
        consensus = kit.prior_consensus(m, images, ids)
    assert both.shape == (3, 2, 2, 16, 16) and consensus.shape == (3, 2, 16, 16)
    assert torch.allclose(both[1], alone[0], atol=1e-5)
    assert torch.allclose(consensus.sum(1), torch.ones(3, 16, 16), atol=1e-5)
    assert m.loss(
        {"images": images, "raters": torch.zeros(3, 3, 16, 16, dtype=torch.long), "rater_valid": torch.ones(3, 3, dtype=torch.bool)},
        StepContext("train", 0, 0, torch.Generator().manual_seed(0)),
    )["loss"].isfinite()
