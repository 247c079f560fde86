"""MR-Net's network blocks: the rater-conditioned encoder-decoder, its two backbones and the perception module.

Holds the Expertise-aware Inferring Module (`ConvLSTMCell`, `ExpertiseInferring`, their `BottleneckConv`), the backbones
(`SharedUNetBackbone`: the shared U-Net split at its bottleneck; `ResNet34UNet`: the official coarse
network, with `BasicBlock` and `UpBlock`), `ConditionedNet` (a backbone with the EIM at its bottleneck:
the coarse network and the reconstruction module's body) and the Multi-rater Perception Module
(`PerceptionModule`, with `gaussian_kernel`, `holistic_attention` and `perception_maps`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from methods.unet import CHANNELS, UNet

# ----------------------------------------------------------------------------- EIM (ConvLSTM)


class BottleneckConv(nn.Conv2d):
    """A 3×3 convolution with padding 1 that, on a 1×1 map, applies its centre tap as a matrix product.

    On a 1×1 map (the bottleneck of a 28×28 image) the eight other taps see only padding, so this is the
    same sum and the same gradients (zero on those taps). The CPU's convolution kernels do the padded
    work: on mnist-5k (one thread, fp32, the CPU shared with two training runs) the product made an MR-Net
    training step 11–18 % shorter at batch 32 and 16–17 % at batch 8, almost all of it in the EIM's gate
    convolution (512 → 1,024 channels). (N, C_in, h, w) → (N, C_out, h, w).
    """

    def __init__(self, c_in: int, c_out: int):
        super().__init__(c_in, c_out, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-2:] == (1, 1):
            return F.linear(x.flatten(1), self.weight[:, :, 1, 1], self.bias)[:, :, None, None]
        return super().forward(x)


class ConvLSTMCell(nn.Module):
    """One ConvLSTM step: gates from a 3×3 conv over [input, hidden] (Shi et al. 2015; official `ConvLSTMCell`)."""

    def __init__(self, channels: int):
        super().__init__()
        self.gates = BottleneckConv(2 * channels, 4 * channels)

    def forward(self, x: torch.Tensor, hidden: torch.Tensor, cell: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x, hidden, cell (N, C, h, w) → new (hidden, cell), each (N, C, h, w)."""
        i, f, o, g = self.gates(torch.cat([x, hidden], 1)).chunk(4, 1)
        cell = torch.sigmoid(f) * cell + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(cell), cell


class ExpertiseInferring(nn.Module):
    """EIM: the condition, broadcast and convolved, initialises a one-step ConvLSTM over the bottleneck."""

    def __init__(self, n_raters: int, channels: int):
        super().__init__()
        self.condition_conv = BottleneckConv(n_raters, channels)
        self.cell = ConvLSTMCell(channels)

    def forward(self, x: torch.Tensor, condition: torch.Tensor) -> torch.Tensor:
        """x (N, C, h, w), condition (N, R) → the new hidden state (N, C, h, w), replacing x."""
        grid = condition[:, :, None, None].to(x.dtype).expand(-1, -1, *x.shape[-2:])
        state = self.condition_conv(grid)  # both the initial hidden and the initial cell state
        hidden, _ = self.cell(x, state, state)
        return hidden


# ----------------------------------------------------------------------------- backbones


class SharedUNetBackbone(nn.Module):
    """The shared U-Net split into encode / decode / logits so the EIM can sit at its bottleneck.

    `decode(*encode(x))` equals `UNet.features(x)` (pinned by a test).
    Features are at full resolution (stride 1), 32 channels.
    """

    feature_stride = 1

    def __init__(self, in_channels: int, n_out: int):
        super().__init__()
        self.net = UNet(in_channels, n_out)
        self.bottleneck_channels = CHANNELS[-1]
        self.feature_channels = self.net.out_channels

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        return self.net.encode(x)

    def decode(self, x: torch.Tensor, skips: list[torch.Tensor]) -> torch.Tensor:
        return self.net.decode(x, skips)

    def logits(self, features: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
        return self.net.head(features)


class BasicBlock(nn.Module):
    """ResNet basic block (He et al. 2016): two 3×3 convs with BN, identity or 1×1 projection shortcut."""

    def __init__(self, c_in: int, c_out: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class UpBlock(nn.Module):
    """The official `UnetBlock`: ConvT 2×2 on the deep path and 1×1 conv on the skip (n_out/2 each), concat, ReLU, BN."""

    def __init__(self, up_in: int, skip_in: int, n_out: int):
        super().__init__()
        self.up = nn.ConvTranspose2d(up_in, n_out // 2, 2, stride=2)
        self.skip = nn.Conv2d(skip_in, n_out // 2, 1)
        self.bn = nn.BatchNorm2d(n_out)

    def forward(self, x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        x = self.up(x)
        if x.shape[-2:] != skip.shape[-2:]:  # sizes that are not multiples of 32 (28 → 14 → 7 → 4 → 2 → 1)
            x = F.interpolate(x, size=skip.shape[-2:], mode="bilinear", align_corners=False)
        return self.bn(F.relu(torch.cat([x, self.skip(skip)], 1)))


class ResNet34UNet(nn.Module):
    """The official coarse network's backbone: ResNet-34 encoder (random init) with a `UnetBlock` decoder.

    Skips: stem ReLU (64 ch, 1/2), layer1 (64, 1/4), layer2 (128, 1/8), layer3 (256, 1/16);
    bottleneck layer4 (512, 1/32). Decoder output: 256 ch at 1/2 (the MPM's features); a ConvT 2×2
    gives the logits at full resolution (resized if the input size is odd).
    """

    feature_stride = 2
    bottleneck_channels = 512
    feature_channels = 256

    def __init__(self, in_channels: int, n_out: int, blocks: tuple[int, ...] = (3, 4, 6, 3)):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True))
        self.layers = nn.ModuleList()
        c_in = 64
        for k, (c, n) in enumerate(zip((64, 128, 256, 512), blocks)):
            stride = 1 if k == 0 else 2
            self.layers.append(nn.Sequential(*[BasicBlock(c_in if j == 0 else c, c, stride if j == 0 else 1) for j in range(n)]))
            c_in = c
        self.decoders = nn.ModuleList([UpBlock(512, 256, 256), UpBlock(256, 128, 256), UpBlock(256, 64, 256), UpBlock(256, 64, 256)])
        self.head = nn.ConvTranspose2d(256, n_out, 2, stride=2)
        for m in self.modules():  # the official ResNet init: N(0, 2/(k·k·c_out)), BN weight 1, bias 0
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        s0 = self.stem(x)
        x = F.max_pool2d(s0, 3, 2, 1)
        skips = [s0]
        for layer in self.layers:
            x = layer(x)
            skips.append(x)
        return skips.pop(), skips  # layer4 is the bottleneck

    def decode(self, x: torch.Tensor, skips: list[torch.Tensor]) -> torch.Tensor:
        for dec, skip in zip(self.decoders, reversed(skips)):
            x = dec(x, skip)
        return x

    def logits(self, features: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
        out = self.head(features)
        if out.shape[-2:] != tuple(size):
            out = F.interpolate(out, size=size, mode="bilinear", align_corners=False)
        return out


class ConditionedNet(nn.Module):
    """An encoder-decoder with the EIM at its bottleneck: the coarse network, and the MRM's body."""

    def __init__(self, backbone: nn.Module, n_raters: int):
        super().__init__()
        self.backbone = backbone
        self.eim = ExpertiseInferring(n_raters, backbone.bottleneck_channels)

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """x (N, C, H, W) → bottleneck and skips; the encoder does not see the condition."""
        return self.backbone.encode(x)

    def decode(
        self, encoded: tuple[torch.Tensor, list[torch.Tensor]], condition: torch.Tensor, size: tuple[int, int]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """encode's output, condition (N, R) → logits (N, n_out, *size), decoder features (N, C_f, h, w)."""
        bottleneck, skips = encoded
        features = self.backbone.decode(self.eim(bottleneck, condition), skips)
        return self.backbone.logits(features, size), features

    def forward(self, x: torch.Tensor, condition: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.decode(self.encode(x), condition, x.shape[-2:])


# ----------------------------------------------------------------------------- MPM


def gaussian_kernel(size: int = 31, nsig: float = 4.0) -> torch.Tensor:
    """The official `gkern(size, nsig)`: sqrt of the outer product of binned normal masses, normalised. → (size, size)."""
    interval = (2 * nsig + 1.0) / size
    edges = torch.linspace(-nsig - interval / 2, nsig + interval / 2, size + 1, dtype=torch.float64)
    k1 = torch.special.ndtr(edges).diff()
    k2 = torch.sqrt(torch.outer(k1, k1))
    return (k2 / k2.sum()).to(torch.float32)


def holistic_attention(maps: torch.Tensor, features: torch.Tensor, kernel: torch.Tensor) -> torch.Tensor:
    """Holistic soft attention (official `Soft`, from CPD): one attended copy of the features per map.

    maps (N, M, H, W) in [0, 1]; features (N, C, H, W); kernel (k, k), k odd → (N, M·C, H, W) with
    copy m = features · max(minmax(blur(map_m)), map_m) + features. Min-max is per image and map.
    """
    m, k = maps.shape[1], kernel.shape[-1]
    blurred = F.conv2d(maps, kernel.expand(m, 1, k, k), padding=k // 2, groups=m)
    lo = blurred.amin((2, 3), keepdim=True)
    hi = blurred.amax((2, 3), keepdim=True)
    weight = torch.maximum((blurred - lo) / (hi - lo + 1e-8), maps)
    return (features[:, None] * weight[:, :, None] + features[:, None]).flatten(1, 2)


def perception_maps(rater_logits: torch.Tensor, coarse_logits: torch.Tensor) -> torch.Tensor:
    """The MPM's attention and uncertainty maps for the foreground classes 1..L−1.

    rater_logits (N, R, L, H, W); coarse_logits (N, L, H, W) → (N, 2·(L−1), H, W): first the coarse
    probability of each foreground class, then the std over raters (unbiased, as `torch.std`) of
    that class's probability.
    """
    attention = torch.softmax(coarse_logits.float(), 1)[:, 1:]
    uncertainty = torch.softmax(rater_logits.float(), 2)[:, :, 1:].std(1)
    return torch.cat([attention, uncertainty], 1)


class PerceptionModule(nn.Module):
    """MPM (official `SoftAtt`): feature block, holistic attention for each map, concat, 3×3 conv to L logits."""

    def __init__(self, feature_channels: int, feature_stride: int, n_classes: int, width: int, blur: torch.Tensor):
        super().__init__()
        first = nn.ConvTranspose2d(feature_channels, width, 2, stride=2) if feature_stride == 2 else nn.Conv2d(feature_channels, width, 1)
        self.block = nn.Sequential(
            first,
            nn.BatchNorm2d(width),
            nn.PReLU(),
            nn.Conv2d(width, width, 3, padding=1),
            nn.BatchNorm2d(width),
            nn.PReLU(),
            nn.Conv2d(width, width, 3, padding=1),
            nn.BatchNorm2d(width),
            nn.PReLU(),
        )
        self.register_buffer("blur", blur)  # fixed Gaussian (the paper; official: a trained nn.Parameter)
        self.pred = nn.Conv2d(width * 2 * (n_classes - 1), n_classes, 3, padding=1)

    def forward(self, rater_logits: torch.Tensor, features: torch.Tensor, coarse_logits: torch.Tensor) -> torch.Tensor:
        """rater_logits (N, R, L, H, W), features (N, C_f, h, w), coarse_logits (N, L, H, W) → logits (N, L, H, W)."""
        fea = self.block(features)
        if fea.shape[-2:] != coarse_logits.shape[-2:]:
            fea = F.interpolate(fea, size=coarse_logits.shape[-2:], mode="bilinear", align_corners=False)
        maps = perception_maps(rater_logits, coarse_logits).to(fea.dtype)
        return self.pred(holistic_attention(maps, fea, self.blur))
