"""LS-UNet: the shared U-Net trained on one rater per image, drawn anew at every step (label sampling).

Paper: M. H. Jensen, D. R. Jørgensen, R. Jalaboi, M. E. Hansen, M. A. Olsen, "Improving
Uncertainty Estimation in Convolutional Neural Networks Using Inter-rater Agreement", MICCAI 2019.

Implemented (docs/methods.md#ls-unet): the raters are not fused. At every training step, each
image's target is one of its *valid* raters (rater_valid True), drawn uniformly at random with the
harness's generator; the draw is repeated at every step, so every rater keeps being seen (the trap
of docs/methods.md#ls-unet is freezing one draw per image). Loss: pixel-wise cross-entropy against the drawn rater's
label map, averaged over the pixels of the batch. An image without any valid rater is left out of
the loss. Prediction: softmax of the U-Net's logits (argmax = the hard label).

Deviations: none from the shared U-Net. No MC-dropout averaging at test time (the shared U-Net has
no dropout; docs/methods.md#ls-unet lists it as optional). Jensen et al. released no code; Knegt's LIDC loader
(`random.randint(0, 3)` per `__getitem__`) is the reference for the sampling, which we restrict to
valid raters.

Defaults: the LF-Net paper trains LS-UNet with "official code, default training strategies"
(docs/methods.md#paper-budget-per-method). There is no official LS code, so we use the LF-Net paper's schedule for the
other single-U-Net baselines in the paper budget: 150 epochs, Adam lr 1e-4 (bench/train/budget.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from methods.base import DataSpec, Method, Stage, StepContext
from methods.kit import drawn_targets, masked_cross_entropy
from methods.registry import register_method
from methods.unet import UNet


@register_method(
    "ls-unet", "U-Net trained on one valid rater per image, drawn anew at every step (label sampling)", group="main", display="LS-UNet"
)
class LabelSamplingUNet(Method):
    """LS-UNet (Jensen et al., MICCAI 2019): CE against one uniformly drawn valid rater per image and step.

    Shapes: images (B, C, H, W); raters (B, R, H, W); rater_valid (B, R) → probabilities (B, L, H, W).
    """

    @dataclass(frozen=True)
    class Config:
        """No hyper-parameters of its own (how long it trains is the budget\'s business, bench/train/budget.py)."""

    def __init__(self, cfg: Config, spec: DataSpec):
        super().__init__(cfg, spec)
        self.net = UNet(spec.in_channels, spec.n_classes)

    @property
    def stages(self) -> list[Stage]:
        return [Stage("train", ("net",))]

    def loss(self, batch: dict[str, torch.Tensor], ctx: StepContext) -> dict[str, torch.Tensor]:
        return self.drawn_loss(self.net(batch["images"]), batch, ctx)

    def validation(self, batch: dict[str, torch.Tensor], ctx: StepContext) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        logits = self.net(batch["images"])
        return self.drawn_loss(logits, batch, ctx), torch.softmax(logits.float(), dim=1)

    def drawn_loss(self, logits: torch.Tensor, batch: dict[str, torch.Tensor], ctx: StepContext) -> dict[str, torch.Tensor]:
        """CE of logits (B, L, H, W) (mean over the pixels of images that have a valid rater) against the drawn raters."""
        _, target, keep = drawn_targets(batch["raters"], batch["rater_valid"], ctx.generator)
        # Images without any valid rater have nothing to learn from: mask all their pixels.
        mask = keep[:, None, None].expand_as(target)
        return {"loss": masked_cross_entropy(logits, target, mask)}

    def predict_proba(self, images: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.net(images).float(), dim=1)
