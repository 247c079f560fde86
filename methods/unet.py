"""The shared 2-D U-Net every method builds on (LF-Net paper, Implementation Details)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

CHANNELS = (32, 64, 128, 256)


def conv_block(c_in: int, c_out: int) -> nn.Sequential:
    """Two 3×3 convolutions, each followed by batch norm and ReLU (Ronneberger et al. 2015)."""
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
        nn.Conv2d(c_out, c_out, 3, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
    )


class UNet(nn.Module):
    """U-Net with four encoder and four decoder blocks of 32-64-128-256 channels.

    Each encoder block is followed by 2× max-pooling; a bottleneck block keeps 256 channels; each
    decoder block upsamples (bilinear, to the skip's exact size so odd sizes such as 28→14→7→3
    work), concatenates the skip and convolves. `encode`/`decode` expose the bottleneck (MR-Net's
    condition module sits there); `features` returns the last decoder feature map
    (B, 32, H, W) so methods can attach extra heads (MH-UNet, CM-UNet, LF-Net's rater module).

    Shapes: images (B, C, H, W) → logits (B, n_classes, H, W).
    """

    def __init__(self, in_channels: int, n_classes: int, channels: tuple[int, ...] = CHANNELS):
        super().__init__()
        self.encoders = nn.ModuleList()
        c_prev = in_channels
        for c in channels:
            self.encoders.append(conv_block(c_prev, c))
            c_prev = c
        self.bottleneck = conv_block(channels[-1], channels[-1])
        self.decoders = nn.ModuleList()
        c_up = channels[-1]
        for c in reversed(channels):
            self.decoders.append(conv_block(c_up + c, c))
            c_up = c
        self.head = nn.Conv2d(channels[0], n_classes, 1)
        self.out_channels = channels[0]

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """(B, C, H, W) → bottleneck features (B, 256, H/16, W/16) and the four skips, finest first."""
        skips = []
        for enc in self.encoders:
            x = enc(x)
            skips.append(x)
            x = F.max_pool2d(x, 2)
        return self.bottleneck(x), skips

    def decode(self, x: torch.Tensor, skips: list[torch.Tensor]) -> torch.Tensor:
        """Bottleneck features and skips → last decoder features (B, 32, H, W)."""
        for dec, skip in zip(self.decoders, reversed(skips)):
            x = F.interpolate(x, size=skip.shape[-2:], mode="bilinear", align_corners=False)
            x = dec(torch.cat([x, skip], dim=1))
        return x

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) → last decoder features (B, 32, H, W)."""
        return self.decode(*self.encode(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))
