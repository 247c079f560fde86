"""LF-Net's rater modules: the networks that give each rater's logits or confusion matrices, one branch per rater.

Holds `per_rater_branches` (R independent conv branches computed as one conv and a grouped 1×1 conv),
`RaterHeads` (per-rater heads on given features), `RaterCharacteristicsNet` (the RCN: the shared U-Net
with its last decoder layer split per rater) and `ConfusionMatrixHeads` (CM-UNet-style pixel-wise
confusion matrices, for the ablation that replaces the RCN).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from methods.kit import normalise_columns
from methods.unet import UNet


def per_rater_branches(channels: int, outputs: int, n_raters: int) -> nn.Sequential:
    """R independent branches on C channels, each a 3×3 conv (+ BN + ReLU) and a 1×1 conv to `outputs` channels, computed
    as one (C → R·C) conv and a grouped 1×1 conv: (B, C, H, W) → (B, R·outputs, H, W), rater-major."""
    return nn.Sequential(
        nn.Conv2d(channels, channels * n_raters, 3, padding=1, bias=False),
        nn.BatchNorm2d(channels * n_raters),
        nn.ReLU(inplace=True),
        nn.Conv2d(channels * n_raters, outputs * n_raters, 1, groups=n_raters),
    )


class RaterHeads(nn.Module):
    """R per-rater branches on C-channel features: a 3×3 conv (+ BN + ReLU) and a 1×1 class head each.

    Computed as one (C → R·C) conv and a grouped 1×1 conv, which is exactly R independent branches.
    Shapes: features (B, C, H, W) → per-rater logits (B, R, L, H, W).
    """

    def __init__(self, channels: int, n_classes: int, n_raters: int):
        super().__init__()
        self.n_raters, self.n_classes = n_raters, n_classes
        self.branches = per_rater_branches(channels, n_classes, n_raters)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.branches(features).unflatten(1, (self.n_raters, self.n_classes))


class RaterCharacteristicsNet(nn.Module):
    """The RCN: the shared U-Net whose last decoder layer is split into R per-rater branches (`RaterHeads`).

    The last decoder block's first 3×3 conv stays shared; its second 3×3 conv (+ BN + ReLU) and the
    1×1 class head are per rater. Shapes: (B, C_in, H, W) → per-rater logits (B, R, L, H, W).
    """

    def __init__(self, in_channels: int, n_classes: int, n_raters: int):
        super().__init__()
        self.backbone = UNet(in_channels, n_classes)
        self.backbone.decoders[-1] = self.backbone.decoders[-1][:3]  # conv → BN → ReLU; the second conv goes per rater
        self.backbone.head = nn.Identity()  # replaced by the per-rater heads below
        self.branches = RaterHeads(self.backbone.out_channels, n_classes, n_raters)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.branches(self.backbone.features(x))


class ConfusionMatrixHeads(nn.Module):
    """CM-UNet-style pixel-wise confusion matrices on the segmentation U-Net's features (the "RCN → CM" ablation).

    Shapes: features (B, 32, H, W) → A (B, R, H, W, L, L) with A[:, r, h, w, i, j] = p(rater r says i | true j), the
    layout of `methods.kit.confusion_nll`; each column sums to 1 over i (softplus, then normalised over the noisy
    label, as CM-UNet).
    """

    def __init__(self, in_channels: int, n_classes: int, n_raters: int):
        super().__init__()
        self.n_raters, self.n_classes = n_raters, n_classes
        self.heads = per_rater_branches(in_channels, n_classes * n_classes, n_raters)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        L = self.n_classes
        a = F.softplus(self.heads(features).float()).unflatten(1, (self.n_raters, L, L))  # (B, R, L, L, H, W)
        return normalise_columns(a.permute(0, 1, 4, 5, 2, 3))
