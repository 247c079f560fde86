"""D-Persona: a Prob. U-Net whose prior samples are bounded by the raters' union and intersection, then one projection
head per rater that picks that rater's latent from the prior's samples.

Paper: Y. Wu, X. Luo, Z. Xu, X. Guo, L. Ju, Z. Ge, W. Liao, J. Cai, "Diversified and Personalized Multi-rater Medical
Image Segmentation", CVPR 2024. Code read: `ycwu1997/D-Persona` (docs/methods.md#d-persona has the lines).

Implemented:
- Stage 1, "prior" (networks `net`, `prior`, `posterior`, `fcomb`): the shared U-Net's last features (B, 32, H, W); a
  prior net p(z | x) and a posterior net q(z | x, Y) reading the image and every rater's mask (one-hot − ½; a missing
  rater −½), each five scales of 16-32-64-128-256 channels (three 3×3 conv + ReLU per scale, average pooling between),
  a mean over H, W and a 1×1 conv to μ, log σ of a diagonal Gaussian over a 6-dimensional latent; Fcomb: z tiled and
  concatenated with the features, three 1×1 conv + ReLU and a 1×1 conv to the logits. Loss:
      soft Dice(Fcomb(z ~ q), one valid rater per image, every class)
      + KL(q ‖ p) (analytic, mean over images, weight 1)
      + β · bound, β = 0.5
      + 1e-5 · Σ‖W‖ (not squared) over the prior, posterior and Fcomb's hidden convs,
  where bound = 1 − ½ [Dice(max_n p_n, ∪_r Y_r) + Dice(min_n p_n, ∩_r Y_r)]: p_n the foreground probability of n = 10
  prior draws (reparameterised), max and min per pixel, ∪ and ∩ over the image's valid raters, each Dice a soft Dice
  over the batch (`latent.soft_dice_loss`), as the official code.
- Stage 2, "personas" (only `heads` trains; stage 1 frozen in eval mode): head r, a small conv net on the features
  (3×3 convs 32-32, then two average-pooled pairs to 16 and to D, ReLU, channel dropout 0.1, mean over H, W), gives
  a query q_r ∈ R^D; with a bank z_1..z_N of prior draws (N = 100 in training, 500 at test, not differentiated),
  z_r = Σ_i softmax_i(q_r · z_i) z_i, and Fcomb(features, z_r) is rater r's output. Loss: soft Dice of output r
  against rater r over the foreground classes, mean over raters with a valid mask.
- Test: samples are stage 1's prior draws (`predict_samples`); per-rater outputs are stage 2's heads over a bank of
  500 prior draws (`predict_raters`); the consensus is the mean softmax over `consensus_draws` (64) prior draws, a
  scrambled Sobol set as Prob. U-Net's (`consensus_estimator`, `predict_proba`). Every read-out draws afresh per image
  from the image's read-out id (methods/latent.py::per_image).
- Initialisation: prior and posterior nets He-normal with small biases, Fcomb orthogonal (the official code's
  `init_weights` and `init_weights_orthogonal_normal`, inherited from the Prob. U-Net code).

Deviations (each a choice; the official code is kept where it is not named here):
- The backbone is the shared U-Net, as for every method, not the ImageNet-pretrained ResNet-34 U-Net (no weights can
  be downloaded); Fcomb's width is the features' (32, not 16).
- Softmax over L classes, not one sigmoid logit, so that RIGA's nested labels fit: for a binary dataset the
  reconstruction Dice over both classes is the official term (which adds the background channel); the bound and the
  heads' loss score the foreground as there.
- The reconstruction rater is drawn per image among its valid raters, not one index for the whole batch.
- Stage 2 freezes stage 1 outright (eval mode, no gradients); the official code only leaves it out of the optimiser,
  so its batch-norm statistics drift. Heads' convs pad by 1 (the official `padding=3` is an argument in the wrong slot).
- Rater slots are the dataset's (on LIDC, whatever reader filled the slot); the official LIDC loader sorts each image's
  masks by area, so its "persona" r is the r-th smallest mask.
- Readings (`bench/train/readings.py`) are held in stage 1 (`consensus_stage`); each replaces stage 1's networks only,
  and the heads keep what stage 2 trained (on stage 1's restored weights, which a reading other than that one differs
  from: docs/decisions.md, "A reading of a method whose consensus is not read in its last stage").
- No cosine learning-rate schedule (the harness has none for any method). Checkpoints: the official LIDC code keeps
  the epoch best on the test fold; here, as every method, the budget's rule on this method's own validation loss.
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
    image_normal,
    kl_diagonal,
    norm_penalty,
    one_hot_masks,
    soft_dice_loss,
    validate_consensus,
)
from methods.registry import register_method
from methods.unet import UNet

ENCODER_CHANNELS = (16, 32, 64, 128, 256)  # the official prior and posterior nets


def bound_loss(fg: torch.Tensor, raters_fg: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """D-Persona's bound term: 1 − ½ [Dice(max_n fg_n, ∪_r Y_r) + Dice(min_n fg_n, ∩_r Y_r)], soft Dice over the batch.

    fg (B, N, H, W) foreground probabilities of N prior draws; raters_fg bool (B, R, H, W); valid bool (B, R).
    Images without a valid rater are left out. → scalar float32.
    """
    mask = valid[:, :, None, None]
    union = (raters_fg & mask).any(1)
    inter = (raters_fg | ~mask).all(1) & valid.any(1)[:, None, None]
    preds = torch.stack([fg.amax(1), fg.amin(1)], 1)  # (B, 2, H, W)
    return soft_dice_loss(preds, torch.stack([union, inter], 1), valid.any(1))


def channel_dropout(x: torch.Tensor, p: float, generator: torch.Generator | None, training: bool) -> torch.Tensor:
    """Dropout of whole channels (B, K, H, W) with the method's generator (no global RNG), scaled by 1 / (1 − p)."""
    if not training or p == 0 or generator is None:
        return x
    keep = torch.rand(x.shape[:2], generator=generator, device=x.device) >= p
    return x * keep[:, :, None, None].to(x.dtype) / (1 - p)


class PersonaHead(nn.Module):
    """Rater r's projection head: features (B, F, H, W) → query (B, D), ≥ 0 (its last op a ReLU, as the official)."""

    def __init__(self, in_channels: int, latent_dim: int, dropout: float = 0.1):
        super().__init__()
        widths = (32, 16, latent_dim)
        self.pairs = nn.ModuleList()
        c_prev = in_channels
        for c in widths:
            self.pairs.append(nn.ModuleList([nn.Conv2d(c_prev, c, 3, padding=1), nn.Conv2d(c, c, 3, padding=1)]))
            c_prev = c
        self.dropout = dropout

    def forward(self, features: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        x = features
        for i, (first, second) in enumerate(self.pairs):
            if i:
                x = F.avg_pool2d(x, 2, ceil_mode=True)
            x = channel_dropout(F.relu(first(x)), self.dropout, generator, self.training)
            x = F.relu(second(x))
        return x.float().mean((2, 3))


def attend(queries: torch.Tensor, bank: torch.Tensor) -> torch.Tensor:
    """Each rater's latent as a softmax-weighted mean of the bank: queries (B, R, D), bank (B, N, D) → (B, R, D).

    weights_ri = softmax_i(q_r · z_i), no temperature (as the official code).
    """
    weights = torch.softmax(queries.float() @ bank.float().transpose(1, 2), dim=-1)  # (B, R, N)
    return weights @ bank.float()


@register_method(
    "d-persona",
    "Prob. U-Net bounded by the raters' union and intersection, then per-rater projection heads (2 stages)",
    group="field",
    display="D-Persona",
)
class DPersona(Method):
    """D-Persona (Wu et al., CVPR 2024).

    Shapes: images (B, C, H, W); raters (B, R, H, W); rater_valid (B, R); latent (B, D);
    → probabilities (B, L, H, W), samples (B, M, L, H, W), per-rater outputs (B, R, L, H, W).
    """

    needs_consistent_raters = True  # stage 2's head r models slot r
    consensus_stage = "prior"  # the consensus is the mean of prior draws; stage 2 leaves it as it is

    @dataclass(frozen=True)
    class Config:
        latent_dim: int = 6  # official initialize_model.py
        beta: float = 0.5  # weight of the bound term (official train_dp.py)
        bound_draws: int = 10  # prior draws in the bound term (official prior_sample_num)
        reg_weight: float = 1e-5  # Σ‖W‖ of the prior, posterior and Fcomb's hidden convs (official reg_factor)
        bank_train: int = 100  # stage 2's prior draws per image in training (official test_step default)
        bank_test: int = 500  # ... at test (official test.sh)
        consensus_draws: int = CONSENSUS_DRAWS  # prior draws per image averaged by the consensus
        consensus_estimator: str = CONSENSUS_ESTIMATOR  # how they are drawn: "mc" or "rqmc" (latent.consensus_normal)

    def __init__(self, cfg: Config, spec: DataSpec):
        super().__init__(cfg, spec)
        self.consensus_draws = cfg.consensus_draws
        self.consensus_estimator = cfg.consensus_estimator
        validate_consensus("d-persona", cfg.consensus_draws, cfg.consensus_estimator)
        self.net = UNet(spec.in_channels, spec.n_classes)
        self.net.head = nn.Identity()
        self.prior = GaussianEncoder(spec.in_channels, cfg.latent_dim, ENCODER_CHANNELS)
        self.posterior = GaussianEncoder(spec.in_channels + spec.n_raters * spec.n_classes, cfg.latent_dim, ENCODER_CHANNELS)
        self.fcomb = Fcomb(self.net.out_channels, cfg.latent_dim, spec.n_classes)
        self.heads = nn.ModuleList(PersonaHead(self.net.out_channels, cfg.latent_dim) for _ in range(spec.n_raters))

    @property
    def stages(self) -> list[Stage]:
        return [Stage("prior", ("net", "prior", "posterior", "fcomb")), Stage("personas", ("heads",))]

    def loss(self, batch: dict[str, torch.Tensor], ctx: StepContext) -> dict[str, torch.Tensor]:
        images, raters, valid = batch["images"], batch["raters"], batch["rater_valid"]
        if ctx.stage == "personas":
            return self.persona_loss(images, raters, valid, ctx.generator)
        n_classes = self.spec.n_classes
        _, target, keep = drawn_targets(raters, valid, ctx.generator)  # the reconstruction's rater, per image
        features = self.net(images)
        mu_p, log_sigma_p = self.prior(images)
        mu_q, log_sigma_q = self.posterior(torch.cat([images, one_hot_masks(raters, valid, n_classes)], 1))
        recon_probs = torch.softmax(self.fcomb(features, draw(mu_q, log_sigma_q, 1, ctx.generator)[:, 0]).float(), dim=1)
        recon = soft_dice_loss(recon_probs, F.one_hot(target, n_classes).movedim(-1, 1), keep)
        kl = masked_mean(kl_diagonal(mu_q, log_sigma_q, mu_p, log_sigma_p), keep)
        prior_logits = self.fcomb(features, draw(mu_p, log_sigma_p, self.cfg.bound_draws, ctx.generator))  # (B, N, L, H, W)
        fg = 1 - torch.softmax(prior_logits.float(), dim=2)[:, :, 0]  # foreground probability of each draw
        bound = bound_loss(fg, raters > 0, valid)
        reg = norm_penalty(self.prior, self.posterior, self.fcomb.layers)
        loss = recon + kl + self.cfg.beta * bound + self.cfg.reg_weight * reg
        return {"loss": loss, "recon": recon.detach(), "kl": kl.detach(), "bound": bound.detach()}

    def rater_logits(self, images: torch.Tensor, eps: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        """Stage 2: each head's latent picked from a bank of prior draws μ + σ·eps (eps (B, N, D) standard normal),
        decoded by Fcomb → (B, R, L, H, W). `generator`: the heads' channel dropout in training (None at test)."""
        features = self.net(images)
        with torch.no_grad():
            mu, log_sigma = self.prior(images)
            bank = mu[:, None] + torch.exp(log_sigma)[:, None] * eps  # (B, N, D)
        queries = torch.stack([head(features, generator) for head in self.heads], 1)  # (B, R, D)
        return self.fcomb(features, attend(queries, bank))

    def persona_loss(self, images: torch.Tensor, raters: torch.Tensor, valid: torch.Tensor, generator: torch.Generator) -> dict:
        """Soft Dice of output r against rater r over the foreground classes, mean over raters (each over its valid images)."""
        eps = torch.randn((len(images), self.cfg.bank_train, self.cfg.latent_dim), generator=generator, device=images.device)
        probs = torch.softmax(self.rater_logits(images, eps, generator).float(), dim=2)
        target = F.one_hot(raters, self.spec.n_classes).movedim(-1, 2)  # (B, R, L, H, W)
        losses = torch.stack([soft_dice_loss(probs[:, r, 1:], target[:, r, 1:], valid[:, r]) for r in range(self.spec.n_raters)])
        return {"loss": masked_mean(losses, valid.any(0))}  # over the raters with a valid mask in the batch (no branch: graph-safe)

    def predict_samples(self, images: torch.Tensor, n_samples: int, ids: torch.Tensor) -> torch.Tensor:
        return prior_samples(self, images, n_samples, ids)

    def predict_raters(self, images: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        eps = image_normal(ids, (self.cfg.bank_test, self.cfg.latent_dim), images.device)
        return torch.softmax(self.rater_logits(images, eps, None).float(), dim=2)

    def predict_proba(self, images: torch.Tensor, ids: torch.Tensor | None = None) -> torch.Tensor:
        return prior_consensus(self, images, ids)
