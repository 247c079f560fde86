"""LF-Net's loss terms (methods/lf_net.py assembles them): the raters' one-hot maps, the temperature softening and the
soft-label loss (eq. 8), the per-rater cross-entropy of the RCN (eq. 9) and the confusion-matrix rater term of the
ablation that replaces it; each tested on tiny tensors (tests/test_lf_net.py, tests/test_kit.py)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from methods.kit import confusion_nll, confusion_trace, masked_mean

_EPS = 1e-7  # keeps log(A·p) finite for the confusion-matrix rater term


def rater_onehot(raters: torch.Tensor, valid: torch.Tensor, n_classes: int) -> torch.Tensor:
    """SLL input: (B, R, H, W) long, valid (B, R) → float (B, R·L, H, W); channel r·L + l is 1 where rater r says l.

    A missing rater's L channels are all zero (distinct from an all-background rater).
    """
    onehot = F.one_hot(raters, n_classes).to(torch.float32) * valid[:, :, None, None, None]  # (B, R, H, W, L)
    return onehot.permute(0, 1, 4, 2, 3).flatten(1, 2)


def soften(probs: torch.Tensor, tau: float) -> torch.Tensor:
    """Temperature applied to probabilities (B, L, H, W): p^(1/τ) renormalised, = softmax(log p / τ); zeros stay zero."""
    powered = probs.clamp(min=0) ** (1.0 / tau)
    return powered / powered.sum(1, keepdim=True).clamp(min=1e-12)


def soft_label_loss(logits: torch.Tensor, soft_target: torch.Tensor, tau: float, mask: torch.Tensor | None = None) -> torch.Tensor:
    """L_sl (eq. 8) = −τ² · mean over the pixels where `mask` is set of Σ_l q̂1 log softmax(logits/τ).

    logits (B, L, H, W) of the segmentation network; soft_target q̂1 (B, L, H, W), already softened
    and sums to 1 over L; mask bool (B, H, W) or None (every pixel). The paper sums over pixels; we
    average over the selected ones (docs/methods.md#lf-net-loss-normalisation). An empty mask gives 0.
    """
    per_pixel = -(soft_target * F.log_softmax(logits.float() / tau, dim=1)).sum(1)  # (B, H, W)
    return masked_mean(per_pixel, mask, scale=tau**2)


def per_rater_mean(per_pixel: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Σ_r of the mean of per_pixel (B, R, H, W) over the pixels of the images rater r labelled (valid (B, R)).

    A rater missing from every image of the batch contributes 0.
    """
    return masked_mean(per_pixel.mean((2, 3)), valid, dim=0).sum()  # every image has the same H·W


def rater_cross_entropy(rater_logits: torch.Tensor, raters: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """L_rcl (eq. 9): Σ_r mean cross-entropy of head r's logits (B, R, L, H, W) vs rater r's labels (B, R, H, W).

    Every pixel counts (no TV mask); missing raters (valid (B, R) False) are left out.
    """
    ce = F.cross_entropy(rater_logits.float().flatten(0, 1), raters.flatten(0, 1), reduction="none")  # (B·R, H, W)
    return per_rater_mean(ce.unflatten(0, raters.shape[:2]), valid)


def confusion_rater_term(
    cms: torch.Tensor, probs: torch.Tensor, raters: torch.Tensor, valid: torch.Tensor, trace_weight: float
) -> torch.Tensor:
    """CM rater term: Σ_r mean −log((A_r·p)[ỹ_r]) + trace_weight · Σ_r mean trace(A_r), missing raters left out.

    cms (B, R, H, W, L, L) column-stochastic; probs (B, L, H, W) true-label probabilities; raters (B, R, H, W). The
    likelihood is CM-UNet's (`methods.kit.confusion_nll`); the reduction is L_rcl's (`per_rater_mean`).
    """
    loss = per_rater_mean(confusion_nll(cms, probs, raters, _EPS), valid)
    if trace_weight:
        loss = loss + trace_weight * per_rater_mean(confusion_trace(cms), valid)
    return loss
