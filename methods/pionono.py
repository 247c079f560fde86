"""Pionono: one learned Gaussian over a latent per rater, fused with a U-Net's last features by a small head.

Paper: A. Schmidt, P. Morales-Álvarez, R. Molina, "Probabilistic Modeling of Inter- and Intra-observer Variability in
Medical Image Segmentation", ICCV 2023. Code read: `arneschmidt/pionono_segmentation` (docs/methods.md#pionono has the lines).

Implemented:
- Latent: rater r has q(z | r) = N(μ_r, L_r L_rᵀ) over an 8-dimensional z, a full covariance through its Cholesky
  factor L_r; μ_r starts at N(0, 8²) per entry, L_r at 2·I. The prior p(z) = N(0, 2²·I) is fixed, the same for every
  rater. Draws are reparameterised: z = μ_r + L_r ε.
- Head: z tiled over H, W and concatenated with the shared U-Net's last features (B, 32, H, W), two 1×1 conv + ReLU
  (32 channels) and a 1×1 conv to the L logits (the official head: three 1×1 convs of the features' width).
- Loss (one stage, "train"): per image, one of its valid raters r drawn at every step (the official loader draws one
  annotator per item); five draws z ~ q(z | r), the head's softmax averaged over them (the official `mc_sampling`:
  its head ends in a softmax); then
  soft Dice loss (1 − mean over classes of 2Σ p·y / Σ(p + y) over the batch: the official "generalised Dice", whose
  weights cancel) + 5e-4 · mean over images of KL(q(z | r) ‖ p), analytic + 1e-5 · Σ‖W‖ (not squared) over the
  head's hidden convs, as the official code.
- Learning rates: the latent (μ, L) at 0.02 under every budget (the published latent learning rate); every other
  parameter at the budget's rate (the official 1e-4 under the paper budget).
- Test: per rater, one pass with z = μ_r (`predict_raters`, `rater_readout="mean"`, the default); or, with
  `rater_readout="draws"`, the official read-out: the mean softmax of `readout_draws` (5) draws of rater r's latent,
  drawn per image from its read-out id. Samples from the raters' mixture, a rater drawn uniformly per sample and
  z ~ q(z | r) (`predict_samples`, per image from its id); the consensus is the mean of the per-rater outputs
  (`predict_proba`).
- Initialisation: the head Xavier-uniform with zero biases (the official `PiononoHead.initialize_weights`).

Deviations (each a choice; the official code is kept where it is not named here):
- The backbone is the shared U-Net, as for every method, not the official ImageNet-pretrained ResNet-34 U-Net (no
  weights can be downloaded); the head is its features' width (32), not 16.
- The consensus: the official code trains a fused label (STAPLE on Gleason 2019, the expert on TNBC) as one more
  rater and samples that rater's latent; this benchmark gives no method a fused label it did not make, so the consensus
  is the mean of the raters' outputs and the samples come from the mixture of their latents.
- L_r's diagonal is the softplus of a free parameter (positive, so N(μ_r, L_r L_rᵀ) is always valid); the official
  diagonal is free and a run whose diagonal crosses 0 stops with an error.
- μ_r's start is drawn from torch's seeded generator (the official numpy draw is not seeded).
- No learning-rate decay (the official code divides every rate by 1.1 per epoch after epoch 40); the harness has none
  for any method. No checkpoint selection in the official code; here, as every method, the budget's rule on this
  method's own validation loss (the official code validates on its training images, and then only logs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from methods.base import DataSpec, Method, Stage, StepContext
from methods.kit import drawn_targets, masked_mean
from methods.latent import Fcomb, init_convs, norm_penalty, per_image, soft_dice_loss, softplus_inverse
from methods.registry import register_method
from methods.unet import UNet


class RaterLatents(nn.Module):
    """q(z | r) = N(μ_r, L_r L_rᵀ) for each rater slot, L_r lower-triangular with a softplus diagonal.

    mu (R, D); scale_tril → (R, D, D).
    """

    def __init__(self, n_raters: int, latent_dim: int, init_mu_sigma: float, init_sigma: float):
        super().__init__()
        self.mu = nn.Parameter(torch.randn(n_raters, latent_dim) * init_mu_sigma)
        self.lower = nn.Parameter(torch.zeros(n_raters, latent_dim, latent_dim))  # below the diagonal
        self.raw_diag = nn.Parameter(torch.full((n_raters, latent_dim), softplus_inverse(init_sigma)))

    def scale_tril(self) -> torch.Tensor:
        return torch.tril(self.lower.float(), -1) + torch.diag_embed(F.softplus(self.raw_diag.float()))

    def draw(self, rater: torch.Tensor, n: int, generator: torch.Generator) -> torch.Tensor:
        """n reparameterised draws z = μ_r + L_r ε for each rater index: rater long (B,) → (B, n, D)."""
        eps = torch.randn((len(rater), n, self.mu.shape[1]), generator=generator, device=self.mu.device)
        return self.transform(rater, eps)

    def transform(self, rater: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
        """z = μ_r + L_r ε: rater long (B,) or (B, n), eps standard normal (B, n, D) → (B, n, D)."""
        if rater.ndim == 1:
            rater = rater[:, None].expand(-1, eps.shape[1])
        mu, tril = self.mu.float()[rater], self.scale_tril()[rater]  # (B, n, D), (B, n, D, D)
        return mu + (tril @ eps.float()[..., None])[..., 0]


def kl_to_isotropic(mu: torch.Tensor, scale_tril: torch.Tensor, prior_sigma: float) -> torch.Tensor:
    """KL(N(μ, L Lᵀ) ‖ N(0, s²·I)) = ½ [tr(L Lᵀ)/s² + μᵀμ/s² − D + D·log s² − log det(L Lᵀ)], analytic.

    mu (B, D), scale_tril (B, D, D) with a positive diagonal → (B,) float32.
    """
    d = mu.shape[-1]
    var = prior_sigma**2
    trace = (scale_tril**2).sum((-2, -1))
    log_det = 2 * torch.log(torch.diagonal(scale_tril, dim1=-2, dim2=-1)).sum(-1)
    return 0.5 * (trace / var + (mu**2).sum(-1) / var - d + d * math.log(var) - log_det)


@register_method(
    "pionono",
    "U-Net with one learned Gaussian latent per rater (soft Dice + KL + L2); samples per rater",
    group="field",
    display="Pionono",
)
class Pionono(Method):
    """Pionono (Schmidt et al., ICCV 2023).

    Shapes: images (B, C, H, W); raters (B, R, H, W); rater_valid (B, R); latent (B, D);
    → probabilities (B, L, H, W), per-rater outputs (B, R, L, H, W), samples (B, M, L, H, W).
    """

    needs_consistent_raters = True  # q(z | r) models one person only if slot r is one person throughout

    @dataclass(frozen=True)
    class Config:
        latent_dim: int = 8  # official config.yaml
        kl_weight: float = 5e-4  # official kl_factor
        reg_weight: float = 1e-5  # official reg_factor (Σ‖W‖ of the head's hidden convs)
        latent_lr: float = 0.02  # official z_learning_rate, under every budget
        train_draws: int = 5  # official mc_samples: latent draws averaged (logits) per training image
        prior_sigma: float = 2.0  # official z_prior_sigma, also the start of L_r's diagonal
        init_mu_sigma: float = 8.0  # official z_posterior_init_sigma: μ_r's start ~ N(0, 8²)
        rater_readout: str = "mean"  # per-rater output: "mean" (z = μ_r) or "draws" (the official mean of readout_draws draws)
        readout_draws: int = 5  # official mc_samples, for rater_readout="draws"

        def __post_init__(self):
            if self.rater_readout not in ("mean", "draws"):
                raise ValueError(f"pionono: rater_readout must be 'mean' or 'draws', not {self.rater_readout!r}")

    def __init__(self, cfg: Config, spec: DataSpec):
        super().__init__(cfg, spec)
        self.net = UNet(spec.in_channels, spec.n_classes)
        self.net.head = nn.Identity()
        self.latent = RaterLatents(spec.n_raters, cfg.latent_dim, cfg.init_mu_sigma, cfg.prior_sigma)
        self.head = init_convs(Fcomb(self.net.out_channels, cfg.latent_dim, spec.n_classes, hidden=2), "xavier")
        self.consensus_draws = cfg.readout_draws if cfg.rater_readout == "draws" else 0

    @property
    def stages(self) -> list[Stage]:
        return [Stage("train")]

    def learning_rates(self) -> dict[str, float]:
        return {"latent": self.cfg.latent_lr}

    def loss(self, batch: dict[str, torch.Tensor], ctx: StepContext) -> dict[str, torch.Tensor]:
        drawn, target, keep = drawn_targets(batch["raters"], batch["rater_valid"], ctx.generator)  # target (B, H, W)
        z = self.latent.draw(drawn, self.cfg.train_draws, ctx.generator)  # (B, S, D)
        probs = torch.softmax(self.head(self.net(batch["images"]), z).float(), dim=2).mean(1)  # softmax averaged over the draws
        dice = soft_dice_loss(probs, F.one_hot(target, self.spec.n_classes).movedim(-1, 1), keep)
        kl = masked_mean(kl_to_isotropic(self.latent.mu.float()[drawn], self.latent.scale_tril()[drawn], self.cfg.prior_sigma), keep)
        reg = norm_penalty(self.head.layers)
        loss = dice + self.cfg.kl_weight * kl + self.cfg.reg_weight * reg
        return {"loss": loss, "dice": dice.detach(), "kl": kl.detach()}

    def predict_raters(self, images: torch.Tensor, ids: torch.Tensor | None) -> torch.Tensor:
        features = self.net(images)
        r, d = self.spec.n_raters, self.cfg.latent_dim
        if self.cfg.rater_readout == "mean":
            mu = self.latent.mu.float()[None].expand(len(images), -1, -1)  # (B, R, D): each rater's mean latent
            return torch.softmax(self.head(features, mu).float(), dim=2)
        k = self.cfg.readout_draws
        eps = per_image(ids, lambda rng: rng.standard_normal((r * k, d), dtype=np.float32), images.device)  # (B, R·K, D)
        z = self.latent.transform(torch.arange(r, device=images.device).repeat_interleave(k)[None].expand(len(images), -1), eps)
        return torch.softmax(self.head(features, z).float(), dim=2).unflatten(1, (r, k)).mean(2)  # (B, R, L, H, W)

    def predict_samples(self, images: torch.Tensor, n_samples: int, ids: torch.Tensor) -> torch.Tensor:
        r, d = self.spec.n_raters, self.cfg.latent_dim
        draw = lambda rng: (rng.integers(r, size=n_samples), rng.standard_normal((n_samples, d), dtype=np.float32))  # noqa: E731
        rater, eps = per_image(ids, draw, images.device)  # (B, M), (B, M, D)
        return torch.softmax(self.head(self.net(images), self.latent.transform(rater, eps)).float(), dim=2)

    def predict_proba(self, images: torch.Tensor, ids: torch.Tensor | None = None) -> torch.Tensor:
        if ids is None:
            ids = torch.arange(len(images))
        return self.predict_raters(images, ids).mean(1)
