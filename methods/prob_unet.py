"""Prob. U-Net: a U-Net whose last features are fused with a latent drawn from a learned prior, trained as a CVAE.

Paper: S. A. A. Kohl, B. Romera-Paredes, C. Meyer, J. De Fauw, J. R. Ledsam, K. H. Maier-Hein, S. M. A. Eslami,
D. J. Rezende, O. Ronneberger, "A Probabilistic U-Net for Segmentation of Ambiguous Images", NeurIPS 2018. Code read:
the reference re-implementation `SimonKohl/probabilistic_unet` (TensorFlow, "KO") and the PyTorch port
`stefanknegt/Probabilistic-Unet-Pytorch` ("PT"); docs/methods.md#prob-u-net has the lines.

Implemented:
- Networks: the shared U-Net (its output head removed) gives the last features (B, 32, H, W); a prior net p(z | x)
  reads the image, a posterior net q(z | x, y) the image and one rater's mask (one-hot − ½, as KO); each is an
  encoder of four scales (32-64-128-192 channels, three 3×3 conv + ReLU per scale, average pooling between), a mean
  over H, W and a 1×1 conv to μ and log σ of a diagonal Gaussian over a 6-dimensional latent (KO's and the paper's 6;
  PT's script uses 2). Fcomb: z tiled over H, W, concatenated with the features, three 1×1 conv + ReLU (32 channels)
  and a 1×1 conv to the L logits.
- Loss (one stage, "train"): per image, one of its valid raters drawn at every step (as LS-UNet; PT's loader draws one
  of the four graders per item); z ~ q by reparameterisation; loss = Σ over pixels of CE(Fcomb(features, z), rater),
  mean over images, + β · mean over images of KL(q ‖ p), analytic, β = 1 (KO; the paper's ELBO). KO's division of
  the pixel sum by the batch size is this mean over images; PT sums over the batch too, so its β = 10 acts as 2.
- No weight-norm term: KO's 1e-5 · ½Σ‖W‖² is weight decay on every network, and PT's 1e-5 · Σ‖W‖ (not squared, on the
  prior, posterior and Fcomb) is another; at 1e-5 beside a pixel-summed CE neither moves the fit, and the budgets give
  no other method weight decay, so we leave both out (docs/methods.md#prob-u-net).
- Test: M samples, z drawn from the prior (`predict_samples`); the consensus (`predict_proba`) is the mean of the
  softmax over `consensus_draws` (64) prior draws, drawn afresh per image from its read-out id as a scrambled Sobol set
  (`consensus_estimator` "rqmc": each point a prior draw, their mean the same consensus with a smaller error; chosen by
  the rule in docs/decisions.md, "mc" gives independent draws), argmax the hard label.
  The draws of an image never depend on its batch, and no set of draws is shared by every image: a faithful sampler of
  a pool whose pixels carry 2 or 3 of 5 votes sits on the 0.5 threshold, and one shared set of offsets moved the
  consensus DSC of one trained model between 0.1 and 89.6 (docs/methods.md#samples).
- Initialisation: the prior and posterior nets He-normal with biases ~ N(0, 0.001²) (KO, PT's `init_weights`),
  Fcomb orthogonal (PT's `init_weights_orthogonal_normal`); the shared U-Net keeps PyTorch's default, as every method.

Deviations: the backbone is the shared U-Net (bilinear upsampling, batch norm) as for every method, not KO's
(no batch norm, 3 convs per block).
Stopping: as every method, the budget's rule on this method's own validation loss (the ELBO on the validation split).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from methods.base import DataSpec, Method, Stage, StepContext
from methods.kit import drawn_targets, masked_mean, prior_consensus, prior_samples
from methods.latent import (
    CONSENSUS_DRAWS,
    CONSENSUS_ESTIMATOR,
    Fcomb,
    GaussianEncoder,
    draw,
    kl_diagonal,
    one_hot_masks,
    validate_consensus,
)
from methods.registry import register_method
from methods.unet import UNet


@register_method(
    "prob-unet",
    "U-Net fused with a latent from a learned prior (CVAE: CE + beta KL); samples from the prior",
    group="field",
    display="Prob. U-Net",
)
class ProbabilisticUNet(Method):
    """Prob. U-Net (Kohl et al., NeurIPS 2018).

    Shapes: images (B, C, H, W); raters (B, R, H, W); rater_valid (B, R); latent (B, D);
    → probabilities (B, L, H, W), samples (B, M, L, H, W).
    """

    @dataclass(frozen=True)
    class Config:
        latent_dim: int = 6  # the paper's and KO's 6
        beta: float = 1.0  # weight of KL(q ‖ p); KO's and the paper's 1
        consensus_draws: int = CONSENSUS_DRAWS  # prior draws per image averaged by the consensus
        consensus_estimator: str = CONSENSUS_ESTIMATOR  # how they are drawn: "mc" or "rqmc" (latent.consensus_normal)

    def __init__(self, cfg: Config, spec: DataSpec):
        super().__init__(cfg, spec)
        self.consensus_draws = cfg.consensus_draws
        self.consensus_estimator = cfg.consensus_estimator
        validate_consensus("prob-unet", cfg.consensus_draws, cfg.consensus_estimator)
        self.net = UNet(spec.in_channels, spec.n_classes)
        self.net.head = nn.Identity()  # Fcomb replaces the single output head
        self.prior = GaussianEncoder(spec.in_channels, cfg.latent_dim)
        self.posterior = GaussianEncoder(spec.in_channels + spec.n_classes, cfg.latent_dim)
        self.fcomb = Fcomb(self.net.out_channels, cfg.latent_dim, spec.n_classes)

    @property
    def stages(self) -> list[Stage]:
        return [Stage("train")]

    def loss(self, batch: dict[str, torch.Tensor], ctx: StepContext) -> dict[str, torch.Tensor]:
        """The negative ELBO: Σ_pixels CE(Fcomb(features, z ~ q), drawn rater), mean over the images that have a valid
        rater, + β · their mean KL(q ‖ p)."""
        images = batch["images"]
        _, target, keep = drawn_targets(batch["raters"], batch["rater_valid"], ctx.generator)  # target (B, H, W)
        mu_p, log_sigma_p = self.prior(images)
        mu_q, log_sigma_q = self.posterior(torch.cat([images, one_hot_masks(target[:, None], keep[:, None], self.spec.n_classes)], 1))
        logits = self.fcomb(self.net(images), draw(mu_q, log_sigma_q, 1, ctx.generator)[:, 0])
        ce = masked_mean(F.cross_entropy(logits.float(), target, reduction="none").sum((1, 2)), keep)
        kl = masked_mean(kl_diagonal(mu_q, log_sigma_q, mu_p, log_sigma_p), keep)
        return {"loss": ce + self.cfg.beta * kl, "ce": ce.detach(), "kl": kl.detach()}

    def predict_samples(self, images: torch.Tensor, n_samples: int, ids: torch.Tensor) -> torch.Tensor:
        return prior_samples(self, images, n_samples, ids)

    def predict_proba(self, images: torch.Tensor, ids: torch.Tensor | None = None) -> torch.Tensor:
        return prior_consensus(self, images, ids)
