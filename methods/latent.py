"""What the latent-variable methods share (Prob. U-Net, Pionono, D-Persona): a Gaussian encoder over a global latent,
the latent fused with the U-Net's last features, the KL of diagonal Gaussians, reparameterised draws, the soft Dice loss
and the weight-norm term of their official code, and the one-hot rater masks their posteriors read.

Shapes: images (B, C, H, W); features (B, F, H, W), the shared U-Net's last decoder features (F = 32); a latent z (B, D),
or M of them (B, M, D); logits (B, L, H, W), or (B, M, L, H, W) for M latents; ids long (B,), each image's read-out
identity (its index in its split mixed with the cell's seed, `bench.train.inference.readout_ids`).

Read-outs draw afresh for every image, from a generator seeded by the image's id (`per_image`), so a read-out of an
image is the same whatever batch it is in, and no set of draws is shared by every image (docs/methods.md#samples).
Initialisation follows the official code (`init_convs`): with PyTorch's default init the pooled
features of the 12–15 plain conv + ReLU layers of a Gaussian encoder vary across images by a few 1e-5 of their size,
so the prior starts (and on MNIST stays) blind to the image.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from scipy.special import ndtri
from scipy.stats import qmc
from torch import nn

# The draws a sampling method's consensus (its `predict_proba`) averages per image, and how they are drawn: `mc`,
# independent normal draws, or `rqmc`, scrambled Sobol points through the normal quantile (`consensus_normal`). Set by
# the rule declared in docs/decisions.md (the consensus read-out's draws) from what it measured (docs/methods.md#samples).
# On mnist-5k's worst-read Prob. U-Net cell, 64 `rqmc` points read within 0.10 points of each other and 0.13 of 256;
# 64 `mc` draws 0.67 apart.
CONSENSUS_DRAWS = 64
CONSENSUS_ESTIMATORS = ("mc", "rqmc")
CONSENSUS_ESTIMATOR = "rqmc"


def truncated_normal_(tensor: torch.Tensor, std: float) -> torch.Tensor:
    """Fill with N(0, std²) truncated at ±2 std, in place."""
    return nn.init.trunc_normal_(tensor, 0.0, std, -2 * std, 2 * std)


INITS = ("he", "orthogonal", "xavier")


def init_convs(module: nn.Module, kind: str) -> nn.Module:
    """Every conv of `module` initialised as the official code: "he" (He-normal weights, fan-in and ReLU gain, biases
    ~ N(0, 0.001²) truncated: the Prob. U-Net code's `init_weights`, its Gaussian encoders), "orthogonal" (the same
    biases: its Fcomb's `init_weights_orthogonal_normal`) or "xavier" (Xavier-uniform, zero biases: Pionono's head)."""
    if kind not in INITS:
        raise ValueError(f"init kind must be one of {INITS}, not {kind!r}")
    for m in module.modules():
        if not isinstance(m, nn.Conv2d):
            continue
        {
            "he": lambda w: nn.init.kaiming_normal_(w, mode="fan_in", nonlinearity="relu"),
            "orthogonal": nn.init.orthogonal_,
            "xavier": nn.init.xavier_uniform_,
        }[kind](m.weight)
        if m.bias is not None:
            nn.init.zeros_(m.bias) if kind == "xavier" else truncated_normal_(m.bias, 0.001)
    return module


def per_image(ids: torch.Tensor, draw_one, device: torch.device):
    """Random draws per image, each from a NumPy generator seeded by the image's id (all 64 bits: a torch CPU generator
    keeps only the low 32 of its seed): `draw_one(rng)` → an array (or a tuple of them), stacked to (B, ...) tensors on
    `device`. The same draws for an image whatever batch it is in."""
    drawn = [draw_one(np.random.default_rng(int(i))) for i in ids.tolist()]
    if isinstance(drawn[0], tuple):
        return tuple(torch.from_numpy(np.stack(parts)).to(device) for parts in zip(*drawn))
    return torch.from_numpy(np.stack(drawn)).to(device)


def image_normal(ids: torch.Tensor, shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """Standard-normal draws (B, *shape) float32, per image from its id (`per_image`)."""
    return per_image(ids, lambda rng: rng.standard_normal(shape, dtype=np.float32), device)


def image_sobol_normal(ids: torch.Tensor, n: int, d: int, device: torch.device) -> torch.Tensor:
    """Per image, the first n points (n a power of 2) of a d-dimensional Sobol sequence Owen-scrambled from the image's id
    (`per_image`), through the normal quantile: (B, n, d) float32. Each point is a standard-normal draw; their mean of a
    smooth function has a smaller error than n independent draws' (randomised quasi-Monte Carlo)."""
    if n < 1 or n & (n - 1):
        raise ValueError(f"an rqmc read-out takes a power of 2 of draws, not {n}: set consensus_draws to 64, 256, 1024, ...")

    def points(rng: np.random.Generator) -> np.ndarray:
        u = qmc.Sobol(d, scramble=True, rng=rng).random_base2(n.bit_length() - 1)
        return ndtri(np.clip(u, 1e-12, 1 - 1e-12)).astype(np.float32)  # a scrambled point is in (0, 1) but for rounding

    return per_image(ids, points, device)


def validate_consensus(method: str, draws: int, estimator: str) -> None:
    """A method's consensus read-out settings, checked when it is built rather than after it trained."""
    if estimator not in CONSENSUS_ESTIMATORS:
        raise ValueError(f"{method}: consensus_estimator must be one of {CONSENSUS_ESTIMATORS}, not {estimator!r}")
    if draws < 1 or (estimator == "rqmc" and draws & (draws - 1)):
        raise ValueError(f"{method}: consensus_draws must be {'a power of 2' if estimator == 'rqmc' else '≥ 1'}, not {draws}")


def consensus_normal(ids: torch.Tensor, n: int, d: int, device: torch.device, estimator: str) -> torch.Tensor:
    """The n standard-normal latent offsets (B, n, d) a consensus averages per image: `rqmc` (`image_sobol_normal`), else
    `mc` (`image_normal`); the method checked its estimator when it was built (`validate_consensus`)."""
    return image_sobol_normal(ids, n, d, device) if estimator == "rqmc" else image_normal(ids, (n, d), device)


class GaussianEncoder(nn.Module):
    """A prior or posterior net (Kohl et al. 2018): a diagonal Gaussian over a D-dimensional latent, from an image (and masks).

    Per scale: 2× average pooling (not before the first), then `convs` 3×3 conv + ReLU; then the mean over H, W and one
    1×1 conv to 2·D values, split into μ and log σ. (B, C_in, H, W) → (mu, log_sigma), each (B, D), float32.
    He-normal convs with small biases, as the official code (`init_convs(…, "he")`).
    """

    def __init__(self, in_channels: int, latent_dim: int, channels: tuple[int, ...] = (32, 64, 128, 192), convs: int = 3):
        super().__init__()
        layers: list[nn.Module] = []
        c_prev = in_channels
        for i, c in enumerate(channels):
            if i:
                layers.append(nn.AvgPool2d(2, ceil_mode=True))  # ceil: 7 → 4 on MNIST's 28 × 28, never to 0
            for _ in range(convs):
                layers += [nn.Conv2d(c_prev, c, 3, padding=1), nn.ReLU(inplace=True)]
                c_prev = c
        self.encoder = nn.Sequential(*layers)
        self.to_gaussian = nn.Conv2d(c_prev, 2 * latent_dim, 1)
        self.latent_dim = latent_dim
        init_convs(self, "he")

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pooled = self.encoder(x).float().mean((2, 3), keepdim=True)
        out = self.to_gaussian(pooled).flatten(1).float()
        return out[:, : self.latent_dim], out[:, self.latent_dim :]


class Fcomb(nn.Module):
    """The latent fused with the U-Net's last features: z tiled over H, W and concatenated with them, then `hidden`
    1×1 conv + ReLU of F channels and a 1×1 conv to L logits (Kohl et al. 2018: three hidden; Pionono's head: two).

    features (B, F, H, W), z (B, D) → (B, L, H, W); z (B, M, D) → (B, M, L, H, W), the features shared by the M latents.
    Orthogonal convs with small biases, as the Prob. U-Net code (`init_convs(…, "orthogonal")`); Pionono re-initialises its head.
    """

    def __init__(self, feature_channels: int, latent_dim: int, n_classes: int, hidden: int = 3):
        super().__init__()
        layers: list[nn.Module] = []
        c_prev = feature_channels + latent_dim
        for _ in range(hidden):
            layers += [nn.Conv2d(c_prev, feature_channels, 1), nn.ReLU(inplace=True)]
            c_prev = feature_channels
        self.layers = nn.Sequential(*layers)
        self.last_layer = nn.Conv2d(c_prev, n_classes, 1)
        init_convs(self, "orthogonal")

    def forward(self, features: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        if z.ndim == 3:  # M latents per image: fold them into the batch
            b, m = z.shape[:2]
            out = self(features.repeat_interleave(m, 0), z.flatten(0, 1))
            return out.unflatten(0, (b, m))
        h, w = features.shape[-2:]
        tiled = z.to(features.dtype)[:, :, None, None].expand(-1, -1, h, w)
        return self.last_layer(self.layers(torch.cat([features, tiled], 1)))


def kl_diagonal(mu_q: torch.Tensor, log_sigma_q: torch.Tensor, mu_p: torch.Tensor, log_sigma_p: torch.Tensor) -> torch.Tensor:
    """KL(q ‖ p) of two diagonal Gaussians, analytic: Σ_d log(σp/σq) + (σq² + (μq − μp)²) / (2σp²) − ½.

    Each argument (B, D) → (B,) float32.
    """
    mu_q, log_sigma_q, mu_p, log_sigma_p = (t.float() for t in (mu_q, log_sigma_q, mu_p, log_sigma_p))
    var_ratio = torch.exp(2 * (log_sigma_q - log_sigma_p))
    mean_term = (mu_q - mu_p) ** 2 * torch.exp(-2 * log_sigma_p)
    return (log_sigma_p - log_sigma_q + 0.5 * (var_ratio + mean_term) - 0.5).sum(-1)


def draw(mu: torch.Tensor, log_sigma: torch.Tensor, n: int, generator: torch.Generator) -> torch.Tensor:
    """n reparameterised draws z = μ + σ·ε per row, ε from `generator`: mu, log_sigma (B, D) → (B, n, D), differentiable in both."""
    eps = torch.randn((mu.shape[0], n, mu.shape[1]), generator=generator, device=mu.device)
    return mu[:, None] + torch.exp(log_sigma)[:, None] * eps


def soft_dice_loss(probs: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
    """1 − mean over channels of the soft Dice 2Σ p·y / Σ (p + y), each sum over the whole batch and every pixel.

    The loss of D-Persona's and Pionono's official code: their "generalised Dice" weights (1 / (Σ y)²) multiply both the
    numerator and the denominator of each channel, so they cancel and this is what it computes. A channel the batch's
    target never marks has Dice 0: a constant term without gradient, as there.
    probs, target (B, K, H, W) in [0, 1]; weight (B,) in {0, 1} leaves images out (None: all in). → scalar float32.
    """
    probs, target = probs.float(), target.float()
    if weight is not None:
        w = weight.float()[:, None, None, None]
        probs, target = probs * w, target * w
    inter = (probs * target).sum((0, 2, 3))
    total = (probs + target).sum((0, 2, 3))
    return 1 - (2 * inter / total.clamp_min(1e-6)).mean()


def norm_penalty(*modules: nn.Module) -> torch.Tensor:
    """Σ ‖W‖₂ over every parameter tensor (weights and biases), not squared: the official PyTorch code's "L2 regularisation"."""
    return sum(p.float().norm(2) for m in modules for p in m.parameters())


def one_hot_masks(labels: torch.Tensor, valid: torch.Tensor, n_classes: int) -> torch.Tensor:
    """Rater masks as a posterior net reads them: one-hot, minus ½ (Kohl et al.'s reference code); a missing rater is −½.

    labels long (B, K, H, W); valid bool (B, K) → (B, K·L, H, W) float32 in {−½, ½}.
    """
    onehot = F.one_hot(labels, n_classes).movedim(-1, 2).float() * valid[:, :, None, None, None].float()
    return (onehot - 0.5).flatten(1, 2)


def softplus_inverse(x: float) -> float:
    """The raw value whose softplus is x > 0."""
    return x + math.log(-math.expm1(-x))
