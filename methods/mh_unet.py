"""MH-UNet: a shared U-Net with one output head per rater; prediction = mean of the heads (Doctor Net).

Paper: M. Y. Guan, V. Gulshan, A. M. Dai, G. E. Hinton, "Who Said What: Modeling Individual
Labelers Improves Classification", AAAI 2018. Guan et al. classify fundus images with a shared
Inception trunk and one softmax head per doctor ("Doctor Net", DN); the LF-Net paper uses it as a
segmentation baseline (docs/methods.md#mh-unet).

Implemented:
- Trunk: the shared U-Net up to its last decoder features (B, 32, H, W), shared by all heads (the
  last decoder block is shared, not duplicated per head). Its single output head is replaced by
  R per-rater 1×1-conv heads of L channels each, stored as one 1×1 conv with R·L output channels
  (the same thing: a 1×1 conv's output channels share no parameters).
- Loss (stage "train"): head r is trained by cross-entropy on rater r's labels only; a missing
  rater (rater_valid False) contributes nothing. Normalisation: the mean over the valid (image,
  rater) pairs of the per-pixel mean CE. docs/methods.md#mh-unet-loss-normalisation writes a sum over raters; with all raters
  valid that is R times our value, which Adam's scale invariance makes nearly irrelevant.
- Prediction (DN): the mean of the R heads' softmax probabilities.
- Option `learned_weights` (WDN, Guan et al.'s "Weighted Doctor Net"): after the DN is trained, a
  second stage "weights" fits one averaging weight per head, w = softmax(logits) (logits start at
  0, i.e. at the DN's uniform average), on top of the frozen network. Target: the rater mean (the
  fraction of valid raters voting each class per pixel), with soft cross-entropy of the weighted
  average of the heads' probabilities. As we recall Guan et al. (the paper text was not available
  to check), the averaging weights are fitted against the distribution of the doctors' grades of
  each image, the target their baselines are trained on; the rater mean is that target for
  segmentation. Prediction: Σ_r w_r · softmax(head_r).

Deviations: none from the shared U-Net.

Defaults: the LF-Net paper trains MH-UNet with "official code, default training strategies"
(docs/methods.md#paper-budget-per-method). Guan et al. released no segmentation code, so the DN stage uses the LF-Net
paper's schedule for the single-U-Net baselines in the paper budget: 150 epochs, Adam lr 1e-4. The
WDN stage trains R numbers: 10 epochs there (our choice). Budgets live in bench/train/budget.py.
`needs_consistent_raters`: head r models one person only if rater slot r is one person throughout.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass

import torch
from torch import nn

from labels.fusion import rater_mean
from methods.base import DataSpec, Method, Stage, StepContext
from methods.kit import masked_cross_entropy, soft_cross_entropy
from methods.registry import register_method
from methods.unet import UNet


class HeadWeights(nn.Module):
    """WDN's averaging weights: softmax over one learned logit per head, starting uniform."""

    def __init__(self, n_heads: int):
        super().__init__()
        self.logits = nn.Parameter(torch.zeros(n_heads))

    def forward(self) -> torch.Tensor:
        """→ (R,) non-negative weights summing to 1."""
        return torch.softmax(self.logits.float(), dim=0)


@register_method(
    "mh-unet", "Shared U-Net with one output head per rater; prediction = mean of the heads (Doctor Net)", group="main", display="MH-UNet"
)
class MultiHeadUNet(Method):
    """MH-UNet (Guan et al., AAAI 2018): per-rater heads on a shared U-Net, averaged at test time.

    Shapes: images (B, C, H, W); raters (B, R, H, W); rater_valid (B, R);
    head logits (B, R, L, H, W) → probabilities (B, L, H, W).
    """

    needs_consistent_raters = True

    @dataclass(frozen=True)
    class Config:
        learned_weights: bool = False  # False: DN (plain mean of the heads); True: WDN (Guan et al. 2018)

    def __init__(self, cfg: Config, spec: DataSpec):
        super().__init__(cfg, spec)
        self.net = UNet(spec.in_channels, spec.n_classes)
        self.net.head = nn.Identity()  # the per-rater heads below replace the U-Net's single output head
        self.heads = nn.Conv2d(self.net.out_channels, spec.n_raters * spec.n_classes, 1)
        if cfg.learned_weights:
            self.weights = HeadWeights(spec.n_raters)

    @property
    def stages(self) -> list[Stage]:
        stages = [Stage("train", ("net", "heads"))]
        if self.cfg.learned_weights:
            stages.append(Stage("weights", ("weights",)))
        return stages

    def head_logits(self, images: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) → per-rater logits (B, R, L, H, W)."""
        out = self.heads(self.net(images))
        return out.unflatten(1, (self.spec.n_raters, self.spec.n_classes))

    def head_weights(self) -> torch.Tensor:
        """(R,) weights of the heads in the prediction: uniform (DN) or learned (WDN)."""
        if self.cfg.learned_weights:
            return self.weights()
        return torch.full((self.spec.n_raters,), 1.0 / self.spec.n_raters, device=self.heads.weight.device)

    def combine(self, logits: torch.Tensor) -> torch.Tensor:
        """Per-rater logits (B, R, L, H, W) → weighted mean of the heads' softmax (B, L, H, W)."""
        probs = torch.softmax(logits.float(), dim=2)
        # A broadcast product, not einsum, so that autocast keeps the sum in float32.
        return (probs * self.head_weights()[None, :, None, None, None]).sum(1)

    def loss(self, batch: dict[str, torch.Tensor], ctx: StepContext) -> dict[str, torch.Tensor]:
        # WDN: the network is frozen in the weights stage, only the R averaging logits learn.
        with torch.no_grad() if ctx.stage == "weights" else nullcontext():
            logits = self.head_logits(batch["images"])
        return self.heads_loss(logits, batch, ctx.stage)

    def validation(self, batch: dict[str, torch.Tensor], ctx: StepContext) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        logits = self.head_logits(batch["images"])
        return self.heads_loss(logits, batch, ctx.stage), self.combine(logits)

    def heads_loss(self, logits: torch.Tensor, batch: dict[str, torch.Tensor], stage: str) -> dict[str, torch.Tensor]:
        """The stage's loss of per-rater logits (B, R, L, H, W): each head against its rater, or (weights) the combined
        prediction against the raters' mean."""
        raters, valid = batch["raters"], batch["rater_valid"]
        if stage == "weights":
            probs = self.combine(logits)
            # log-probabilities are valid logits for the soft-CE helper (log_softmax(log q) = log q).
            return {"loss": soft_cross_entropy(torch.log(probs.clamp_min(1e-8)), rater_mean(raters, valid, self.spec.n_classes))}
        return {"loss": multi_head_loss(logits, raters, valid)}

    def predict_proba(self, images: torch.Tensor) -> torch.Tensor:
        return self.combine(self.head_logits(images))

    def predict_raters(self, images: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """Each head's softmax (B, R, L, H, W): its per-rater outputs, scored as its samples (M = R)."""
        return torch.softmax(self.head_logits(images).float(), dim=2)


def multi_head_loss(logits: torch.Tensor, raters: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Mean over valid (image, rater) pairs of the per-pixel mean CE of head r against rater r.

    logits (B, R, L, H, W); raters long (B, R, H, W); valid bool (B, R). → scalar. Every pair has
    H·W pixels, so the masked pixel mean equals the mean over pairs of per-pair pixel means.
    """
    b, r, _, h, w = logits.shape
    mask = valid[:, :, None, None].expand(b, r, h, w).reshape(b * r, h, w)
    return masked_cross_entropy(logits.flatten(0, 1), raters.flatten(0, 1), mask)
