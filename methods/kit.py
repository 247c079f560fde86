"""What methods share, written once: masked means and cross-entropies, the drawn rater of label sampling, prior
sampling, and CM-UNet's confusion-matrix likelihood.

A method module imports shared pieces from here (and from `base`, `unet`, `latent`, `registry`), never from another
method's module (`tests/test_imports.py`), so that a method can change its own code without changing another's.

Shapes: logits (B, L, H, W); class-index targets long (B, H, W); raters long (B, R, H, W); rater_valid bool (B, R);
confusion matrices A (B, R, H, W, L, L), column-stochastic: A[b, r, h, w, i, j] = p(rater r says i | true class j).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from methods.latent import consensus_normal, image_normal


def masked_mean(values: torch.Tensor, mask: torch.Tensor | None = None, dim: int | None = None, scale: float = 1.0) -> torch.Tensor:
    """`scale` × the mean of `values` where `mask` is set (None: every value), over every axis or over `dim`.

    values (...); mask of the same shape, bool or 0/1 weights. Where nothing is selected the mean is 0 (a zero loss that
    still has a graph), not NaN: a batch without a selected pixel must not stop training. `scale` multiplies the sum
    before the division, the order in which a scaled loss (LF-Net's τ² · L_sl) has always been rounded.
    """
    if mask is None:
        return scale * (values.mean() if dim is None else values.mean(dim))
    mask = mask.to(values.dtype)
    if dim is None:
        return scale * (values * mask).sum() / mask.sum().clamp(min=1)
    return scale * (values * mask).sum(dim) / mask.sum(dim).clamp(min=1)


def masked_cross_entropy(logits: torch.Tensor, target: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Cross-entropy (B, L, H, W) vs class indices (B, H, W), averaged over the pixels where `mask` (B, H, W) is set.

    The papers write unnormalised sums over pixels; we average over the selected pixels of the batch so that the loss
    scale does not depend on how many pixels the mask keeps (docs/methods.md#lf-net-loss-normalisation).
    """
    return masked_mean(F.cross_entropy(logits.float(), target, reduction="none"), mask)


def soft_cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy against a per-pixel class distribution `target` (B, L, H, W), mean over pixels."""
    return -(target * F.log_softmax(logits.float(), dim=1)).sum(1).mean()


# ----------------------------------------------------------------------------- one drawn rater per image


def sample_valid_raters(valid: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Draw one valid rater per image, uniformly among that image's valid raters.

    valid: bool (B, R). → long (B,) rater indices. An image with no valid rater gets an arbitrary
    index (uniform over all R, so the draw stays defined); the caller must leave it out of the loss.
    The draw uses only `generator` (the harness's seeded generator), never the global RNG.
    """
    weights = valid.to(torch.float32)
    none_valid = weights.sum(1) == 0
    weights = torch.where(none_valid[:, None], torch.ones_like(weights), weights)
    return torch.multinomial(weights, 1, generator=generator).squeeze(1)


def drawn_targets(raters: torch.Tensor, valid: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One valid rater per image (`sample_valid_raters`) and its mask, the target of every method that learns from one
    drawn rater (LS-UNet, Prob. U-Net, Pionono, D-Persona's reconstruction).

    raters long (B, R, H, W); valid bool (B, R) → drawn long (B,), target long (B, H, W), keep bool (B,): the images
    that have a valid rater (the others' targets mean nothing: leave them out of the loss).
    """
    drawn = sample_valid_raters(valid, generator).to(raters.device)
    target = raters[torch.arange(len(raters), device=raters.device), drawn]
    return drawn, target, valid.any(1)


# ----------------------------------------------------------------------------- prior sampling (Prob. U-Net, D-Persona)


def prior_samples(method: torch.nn.Module, images: torch.Tensor, n_samples: int, ids: torch.Tensor) -> torch.Tensor:
    """Softmax of Fcomb over n_samples prior draws per image, each image's from its id: the samples of a prior-sampling
    method (one with children `net`, `prior`, `fcomb`). images (B, C, H, W), ids long (B,) → (B, M, L, H, W)."""
    mu, log_sigma = method.prior(images)
    z = mu[:, None] + torch.exp(log_sigma)[:, None] * image_normal(ids, (n_samples, mu.shape[1]), mu.device)
    return torch.softmax(method.fcomb(method.net(images), z).float(), dim=2)


def prior_consensus(method: torch.nn.Module, images: torch.Tensor, ids: torch.Tensor | None, group: int = 16) -> torch.Tensor:
    """Mean softmax over `method.consensus_draws` prior draws per image, each image's from its id and drawn as
    `method.consensus_estimator` says (`latent.consensus_normal`) (B, L, H, W): the consensus of a prior-sampling
    method. ids None: 0..B−1, for a look outside the harness (then the batch matters).
    Decoded `group` draws at a time, so memory stays that of 16 draws."""
    if ids is None:
        ids = torch.arange(len(images))
    mu, log_sigma = method.prior(images)
    features = method.net(images)
    eps = consensus_normal(ids, method.consensus_draws, mu.shape[1], mu.device, method.consensus_estimator)  # (B, M, D)
    total = 0
    for part in eps.split(group, dim=1):
        z = mu[:, None] + torch.exp(log_sigma)[:, None] * part
        total = total + torch.softmax(method.fcomb(features, z).float(), dim=2).sum(1)
    return total / eps.shape[1]


# ----------------------------------------------------------------------------- the confusion-matrix likelihood


def normalise_columns(a: torch.Tensor) -> torch.Tensor:
    """Positive (..., L, L) → column-stochastic: A[..., i, j] / Σ_i A[..., i, j], so A[i, j] = p(noisy i | true j).

    The clamp only keeps a column whose entries all underflowed to 0 at 0 instead of NaN.
    """
    return a / a.sum(-2, keepdim=True).clamp(min=1e-12)


def noisy_label_probs(cms: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
    """p_noisy_r = A_r · p per pixel: cms (B, R, H, W, L, L) column-stochastic, probs (B, L, H, W) → (B, R, L, H, W).

    Written as a broadcast product and sum rather than einsum/matmul so that autocast keeps it in float32.
    """
    p = probs.float().permute(0, 2, 3, 1)[:, None, :, :, None, :]  # (B, 1, H, W, 1, L): p_j
    return (cms * p).sum(-1).movedim(-1, 2)  # Σ_j A[i, j] p_j


def confusion_nll(cms: torch.Tensor, probs: torch.Tensor, raters: torch.Tensor, eps: float) -> torch.Tensor:
    """Each rater's per-pixel negative log-likelihood under the confusion model: −log((A_r · p)[ỹ_r] + eps).

    cms (B, R, H, W, L, L) column-stochastic; probs (B, L, H, W) the true-label probabilities; raters long (B, R, H, W)
    → (B, R, H, W) float32. The log of the mixed probabilities, not a cross-entropy on them (which would take a second
    softmax, the bug of CM-UNet's official code, docs/methods.md#cm-unet-double-softmax-in-the-loss). Each method
    reduces it over pixels, raters and images its own way, and leaves out missing raters there.
    """
    return -torch.log(noisy_label_probs(cms, probs).gather(2, raters[:, :, None]).squeeze(2) + eps)


def confusion_trace(cms: torch.Tensor) -> torch.Tensor:
    """trace(A_r) per pixel, the regulariser of CM-UNet: cms (B, R, H, W, L, L) → (B, R, H, W)."""
    return cms.diagonal(dim1=-2, dim2=-1).sum(-1)
