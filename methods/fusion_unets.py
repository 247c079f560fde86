"""MV-, QMV-, Mean- and STAPLE-UNet: the shared U-Net trained on one fused label."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from labels.fusion import batch_votes, rater_mean, vote_targets
from labels.staple import staple_mask
from methods.base import DataSpec, Method, Stage, StepContext
from methods.kit import masked_cross_entropy, soft_cross_entropy
from methods.registry import register_method, register_variant
from methods.unet import UNet


@register_method("mv-unet", "U-Net on the per-pixel majority vote of the raters (ablation row S)", group="main", display="MV-UNet")
class FusedLabelUNet(Method):
    """A U-Net trained on one label fused from the raters (LF-Net paper §IV-B, baselines 1–3 and QMV).

    - `majority`: Ω, the per-pixel majority vote; ties go to the lowest class (background).
    - `tv_mask`: QMV-UNet, the LF-Net paper's L_ce: the majority label supervises only pixels whose
      most-voted class has ≥ β votes (β = R − 1 by default); the others are left out of the loss.
    - `mean`: the fraction of raters voting each class, a soft label, with soft cross-entropy.
    - `staple`: binary STAPLE (Warfield et al. 2004) per image by EM, thresholded at 0.5 into a
      hard label (ITK's convention), computed once before training (`prepare`).
    All use the shared U-Net, Adam and 150 epochs in the paper budget; none reads ground truth.
    """

    @dataclass(frozen=True)
    class Config:
        fusion: str = "majority"  # "majority" | "mean" | "staple"
        tv_mask: bool = False  # QMV: keep only threshold-voted pixels (LF-Net paper eq. 3)
        beta: int | None = None  # TV threshold as a count of raters; None = R − 1 (LF-Net paper)

    def __init__(self, cfg: Config, spec: DataSpec):
        super().__init__(cfg, spec)
        if cfg.fusion not in ("majority", "mean", "staple"):
            raise ValueError(f"fusion must be majority, mean or staple, not {cfg.fusion!r}")
        if cfg.fusion == "staple" and spec.n_classes != 2:
            raise ValueError("staple-unet fuses binary labels only; this dataset has classes beyond background/foreground")
        self.net = UNet(spec.in_channels, spec.n_classes)
        self.beta = cfg.beta if cfg.beta is not None else max(spec.n_raters - 1, 0)

    @property
    def stages(self) -> list[Stage]:
        return [Stage("train", ("net",))]

    def prepare(self, raters: np.ndarray, rater_valid: np.ndarray) -> dict[str, np.ndarray]:
        if self.cfg.fusion == "majority":  # the vote targets once per split, not at every step
            return vote_targets(raters, rater_valid, self.spec.n_classes, self.beta)
        if self.cfg.fusion != "staple":
            return {}
        return {"staple": staple_mask(raters, rater_valid)}

    def loss(self, batch: dict[str, torch.Tensor], ctx: StepContext) -> dict[str, torch.Tensor]:
        return self.fused_loss(self.net(batch["images"]), batch)

    def validation(self, batch: dict[str, torch.Tensor], ctx: StepContext) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        logits = self.net(batch["images"])
        return self.fused_loss(logits, batch), torch.softmax(logits.float(), dim=1)

    def fused_loss(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """CE of logits (B, L, H, W) against the batch's fused label."""
        raters, valid, n_classes = batch["raters"], batch["rater_valid"], self.spec.n_classes
        if self.cfg.fusion == "mean":
            return {"loss": soft_cross_entropy(logits, rater_mean(raters, valid, n_classes))}
        if self.cfg.fusion == "staple":
            return {"loss": masked_cross_entropy(logits, batch["staple"].long())}
        mv, tv = batch_votes(batch, n_classes, self.beta)
        return {"loss": masked_cross_entropy(logits, mv, tv if self.cfg.tv_mask else None)}

    def predict_proba(self, images: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.net(images).float(), dim=1)


register_variant(
    "qmv-unet",
    "mv-unet",
    "U-Net on the majority vote at threshold-voted pixels only (ablation row S+TV)",
    "main",
    display="QMV-UNet",
    tv_mask=True,
)
register_variant(
    "mean-unet", "mv-unet", "U-Net on the mean of the raters' masks as a soft label", "main", display="Mean-UNet", fusion="mean"
)
register_variant(
    "staple-unet", "mv-unet", "U-Net on the per-image STAPLE fusion of the raters", "main", display="STAPLE-UNet", fusion="staple"
)
