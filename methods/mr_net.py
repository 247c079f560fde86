"""MR-Net: calibrated segmentation from multi-rater agreement modelling.

Paper: W. Ji, S. Yu, J. Wu, K. Ma, C. Bian, Q. Bi, J. Li, H. Liu, L. Cheng, Y. Zheng, "Learning
Calibrated Medical Image Segmentation via Multi-Rater Agreement Modeling", CVPR 2021. Official code:
`jiwei0921/MRNet` (`MRNet_Code/`, a3e0165): `trainer/trainer_cvpr.py`, `models/Unet/unet_model.py`,
`models/VGGnet/Vggnet.py`, `models/soft_attention.py` (docs/methods.md#mr-net).

What is implemented (three modules, trained jointly; their network blocks are in methods/mr_net_blocks.py):

1. Coarse network with the Expertise-aware Inferring Module (EIM). A condition vector c (B, R) over
   the raters (non-negative, sums to 1) is broadcast over the bottleneck grid, a 3×3 conv maps it to
   the bottleneck channels, and the result is both the initial hidden and the initial cell state of
   a one-step ConvLSTM cell whose input is the bottleneck feature; the new hidden state replaces the
   bottleneck. Backbone: the shared U-Net (`methods/unet.py`), or the official ResNet-34 U-Net with
   `backbone="resnet34"` (written here: BasicBlock × [3, 4, 6, 3], random init as the official
   `pretrained=False`, `UnetBlock` decoder, ConvTranspose head; sizes that are not multiples of 32,
   e.g. 28×28, are handled by resizing the upsampled path to each skip's size).
2. Multi-rater Reconstruction Module (MRM): input = image ⊕ coarse class probabilities (detached);
   a second shared U-Net with a condition-initialised ConvLSTM at its bottleneck (as the official
   VGG16 MRM has at 1/16) and R per-rater 1×1 heads (one 1×1 conv to R·L channels), each giving one
   rater's L logits.
3. Multi-rater Perception Module (MPM): from the R rater maps (detached) an uncertainty map per
   foreground class (std over raters of that class's probability) and from the coarse prediction
   an attention map per foreground class; each map drives a holistic soft attention on the
   (detached) coarse decoder features (31×31 Gaussian blur, min-max normalisation, max with the raw
   map, multiply the features and add them back); the 2·(L−1) attended copies are concatenated and
   a 3×3 conv gives the final L logits.

Training, per batch, with the three conditions of the official code: `m` one-hot (one random valid
rater per sample), `p` random (integers 1–10 per valid rater, normalised), `ave` uniform (1/n_valid).
The target for a condition is the condition-weighted sum of the raters' one-hot masks, a soft label.
Losses (docs/methods.md#mr-net-losses): coarse (3·L_ave + 2·L_p + 1·L_m)/6; MRM: mean over conditions and valid
(image, rater) pairs of each head's cross-entropy against that rater's mask; MPM (3·L_ave + 2·L_p +
1·L_m)/6. The returned loss is their sum. Every loss is a mean over pixels. Missing raters get zero
weight in every condition and are left out of the MRM loss. Inference: uniform condition (1/R, the
official "Default Majority"), prediction = softmax of the MPM output.

Deviations from the official code, and decisions (docs/methods.md#mr-net-deviations-from-the-official-code, docs/methods.md#known-bugs-in-the-official-code):
- Backbone: the shared U-Net by default (one backbone for every method, docs/methods.md#the-shared-u-net); the official
  ResNet-34 U-Net is `backbone="resnet34"` (the LF-Net paper's RIGA table used it). The MRM is a
  second shared U-Net with R heads instead of the official VGG16-BN + ASPP decoder, for the same
  fairness reason and for CPU cost; its ConvLSTM sits at the U-Net bottleneck.
- Softmax over L classes with soft-target cross-entropy, not the official per-class sigmoid BCE
  (whose disc/cup channels overlap): the benchmark's convention (docs/methods.md#output-channels-and-probabilities). The MPM
  maps use the foreground classes 1..L−1 (binary: 2 maps, the official binary analogue; RIGA:
  rim and cup instead of the official disc and cup channels).
- The MRM sees the coarse class probabilities (softmax); the official code feeds raw logits.
- L_rec, the reconstruction loss, is omitted. In the official code it is computed on the detached
  coarse output, so it sends no gradient to the coarse network, and its gradient on the MRM is
  cleared before use (docs/methods.md#mr-net-reconstruction-loss-is-a-no-op): it has no effect on the published results. Implementing the
  paper's intent would add two MRM encoder passes per step and a choice the paper does not make
  (whether L_rec also trains the MRM). Without L_rec the official 0.7 factor on the coarse loss only
  rescales a loss that alone drives the coarse parameters, which Adam ignores, so it is dropped.
- The MPM uniform branch receives the uniform-condition coarse output, as in the paper; the official
  code passes the `p`-condition output there (a bug, docs/methods.md#mr-net-perception-module-fed-the-wrong-coarse-output).
- One optimiser (the harness's Adam) over all three modules in one stage, instead of three Adam
  optimisers stepped in turn. Because the MRM sees the coarse output detached and the MPM sees the
  rater maps, features and coarse output detached (as in the official code), the three losses touch
  disjoint parameters, so one Adam on their sum takes the same per-parameter steps as three.
- The coarse encoder runs once per batch (it does not see the condition); the EIM, decoder, MRM and
  MPM then run once per condition, as in the official code.
- Batch-norm running statistics are updated by the uniform-condition pass only (the `m` and `p`
  passes normalise with their own batch statistics but leave the running ones alone), because
  inference uses the uniform condition. The official running statistics average all three
  conditions; with raters as different as the simulated MNIST ones (a blank rater), one-hot
  conditions give coarse features of ~10× the variance, and the MPM, normalised by that inflated
  running variance at inference, fell to a Dice of 0.04 where batch statistics gave 0.80 (measured
  on mnist-5k after one quick epoch).
- The MPM's Gaussian kernel is fixed, as the paper and docs/methods.md#mr-net-the-three-modules describe it. The official code
  registers it as an `nn.Parameter`, so its optimiser trains it; its entries are ~1e-3, so Adam's
  first steps (~lr per step) rewrite it at the quick lr 1e-3.
- The MPM's convolutions keep PyTorch's default init, not the official N(0, 0.01): with weights that
  small, Adam at the quick lr 1e-3 changes them by ~10% per step and the batch-norm running statistics
  behind them lag: with uniform-only statistics but the official init, Dice after one quick epoch was
  0.29 in eval mode against 0.85 with batch statistics; with the default init 0.76 against 0.78.
- The MPM's first layer is a 1×1 conv (shared U-Net features are already at full resolution) or the
  official ConvTranspose 2×2 (ResNet-34 features are at 1/2 resolution); width 32 (the shared U-Net's
  decoder width) or the official 64.
- Under the quick and plateau budgets no weight decay (the official Adam has 5e-4) and the dataset's
  batch size (the official 8): those budgets train every method alike. The paper budget uses the
  official weight decay, batch and flips. The official code's ±15° rotation augmentation is not
  reproduced by any budget.

Training (bench/train/budget.py): the paper budget is the official schedule, Adam lr 1e-4, weight decay
5e-4, batch 8, flips, 123 epochs (`max_iteration=80000` becomes ceil(80000/655) = 123 epochs of 82
batches, and the iteration counter never reaches 80000; docs/methods.md#mr-net-schedule-and-model-selection, docs/methods.md#mr-net-iterations-that-are-epochs), last
weights. The quick and plateau budgets use the benchmark's stopping rule on the validation split
(the official code selects on its test set, docs/methods.md#mr-net-model-selection-on-the-test-set). A step costs 6.05× a plain U-Net step in
FLOPs (coarse encoder once, then per condition: coarse decoder + EIM 0.76, MRM 1.04, MPM 0.13
U-Nets) and about 10× in CPU time (32×1×28×28, one thread, bf16 on AMX: 1.63 s against 0.165 s), measured before the
EIM's convolutions took their centre tap on a 1×1 bottleneck (`BottleneckConv`), which made the step 11–18 % shorter
on one AVX2 thread in fp32.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from methods.base import DataSpec, Method, Stage, StepContext
from methods.kit import masked_mean, soft_cross_entropy
from methods.mr_net_blocks import ConditionedNet, PerceptionModule, ResNet34UNet, SharedUNetBackbone, gaussian_kernel
from methods.registry import register_method

CONDITION_WEIGHTS = (1.0, 2.0, 3.0)  # official (3·L_ave + 2·L_p + 1·L_m)/6, in the order (m, p, ave)


# ----------------------------------------------------------------------------- conditions and targets


def sample_conditions(valid: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """The three training conditions of the official trainer, over valid raters only.

    valid: bool (B, R). Returns float (3, B, R), rows summing to 1 (0 for an image with no valid
    rater): [0] `m`, one-hot on one random valid rater per image; [1] `p`, random integers 1–10 per
    valid rater, normalised; [2] `ave`, uniform over the valid raters. Missing raters get weight 0.
    """
    b, r = valid.shape
    device = generator.device
    w = valid.to(torch.float32)
    scores = torch.rand(b, r, generator=generator, device=device).to(valid.device)
    pick = scores.masked_fill(~valid, -1.0).argmax(1)  # uniform among the valid raters
    one_hot = F.one_hot(pick, r).to(torch.float32) * w
    ints = torch.randint(1, 11, (b, r), generator=generator, device=device).to(valid.device, torch.float32) * w
    random = ints / ints.sum(1, keepdim=True).clamp(min=1)
    uniform = w / w.sum(1, keepdim=True).clamp(min=1)
    return torch.stack([one_hot, random, uniform])


def condition_target(raters: torch.Tensor, condition: torch.Tensor, n_classes: int) -> torch.Tensor:
    """Σ_r c_r · onehot(rater r): the soft label of a condition.

    raters long (B, R, H, W); condition float (B, R) → float (B, L, H, W), summing over L to Σ_r c_r.
    """
    onehot = F.one_hot(raters, n_classes).to(torch.float32)  # (B, R, H, W, L)
    return torch.einsum("br,brhwl->blhw", condition.to(torch.float32), onehot)


# ----------------------------------------------------------------------------- batch norm


@contextmanager
def frozen_bn_stats(module: nn.Module):
    """Inside: train-mode batch norm still normalises with batch statistics but leaves the running ones as they are.

    Momentum 0 makes the running-statistics update `(1 − 0)·running + 0·batch` a no-op.
    """
    norms = [m for m in module.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    saved = [m.momentum for m in norms]
    for m in norms:
        m.momentum = 0.0
    try:
        yield
    finally:
        for m, momentum in zip(norms, saved):
            m.momentum = momentum


# ----------------------------------------------------------------------------- the method


@register_method(
    "mr-net",
    "MR-Net (Ji et al. CVPR 2021): rater-conditioned coarse net, multi-rater reconstruction, uncertainty attention",
    group="main",
    display="MR-Net",
)
class MRNet(Method):
    """MR-Net; see the module docstring for what is implemented, the deviations and the defaults."""

    needs_consistent_raters = True  # the condition weights rater r, and the MRM has one head per rater

    @dataclass(frozen=True)
    class Config:
        backbone: str = "unet"  # coarse network: "unet" (shared, LF-Net paper) | "resnet34" (official MR-Net code)
        mpm_width: int | None = None  # MPM channels; None: 32 (shared U-Net decoder width) or 64 (official SoftAtt) for resnet34
        blur_size: int = 31  # official Soft: gkern(31, 4)
        blur_nsig: float = 4.0  # official Soft: gkern(31, 4)

    def __init__(self, cfg: Config, spec: DataSpec):
        super().__init__(cfg, spec)
        if cfg.backbone not in ("unet", "resnet34"):
            raise ValueError(f"backbone must be unet or resnet34, not {cfg.backbone!r}")
        n_classes, n_raters = spec.n_classes, spec.n_raters
        if cfg.backbone == "unet":
            backbone: nn.Module = SharedUNetBackbone(spec.in_channels, n_classes)
        else:
            backbone = ResNet34UNet(spec.in_channels, n_classes)
        self.coarse = ConditionedNet(backbone, n_raters)
        self.mrm = ConditionedNet(SharedUNetBackbone(spec.in_channels + n_classes, n_raters * n_classes), n_raters)
        width = cfg.mpm_width or (32 if cfg.backbone == "unet" else 64)
        blur = gaussian_kernel(cfg.blur_size, cfg.blur_nsig)
        self.mpm = PerceptionModule(backbone.feature_channels, backbone.feature_stride, n_classes, width, blur)

    @property
    def stages(self) -> list[Stage]:
        return [Stage("train", ("coarse", "mrm", "mpm"))]

    def forward_condition(
        self, images: torch.Tensor, encoded: tuple[torch.Tensor, list[torch.Tensor]], condition: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One condition through the three modules.

        images (B, C, H, W), encoded = self.coarse.encode(images), condition (B, R) → logits: coarse
        (B, L, H, W), rater (B, R, L, H, W), final (B, L, H, W). The MRM sees the coarse output
        detached and the MPM sees all its inputs detached, as in the official code, so each
        module's loss trains only that module.
        """
        coarse, features = self.coarse.decode(encoded, condition, images.shape[-2:])
        coarse_probs = torch.softmax(coarse.detach().float(), 1).to(images.dtype)
        rater, _ = self.mrm(torch.cat([images, coarse_probs], 1), condition)
        rater = rater.unflatten(1, (self.spec.n_raters, self.spec.n_classes))
        final = self.mpm(rater.detach(), features.detach(), coarse.detach())
        return coarse, rater, final

    def loss(self, batch: dict[str, torch.Tensor], ctx: StepContext) -> dict[str, torch.Tensor]:
        images, raters, valid = batch["images"], batch["raters"], batch["rater_valid"]
        n_classes = self.spec.n_classes
        conditions = sample_conditions(valid, ctx.generator)  # (3, B, R): m, p, ave
        encoded = self.coarse.encode(images)  # once: the encoder does not see the condition
        mask = valid.to(torch.float32)
        loss_coarse = loss_mrm = loss_mpm = 0.0
        for k, weight in enumerate(CONDITION_WEIGHTS):
            # Batch-norm running statistics come from the uniform condition only (the last), the one
            # used at inference; the m and p passes normalise with their own batch statistics.
            with frozen_bn_stats(self) if k < 2 else nullcontext():
                coarse, rater, final = self.forward_condition(images, encoded, conditions[k])
            target = condition_target(raters, conditions[k], n_classes)
            weight = weight / sum(CONDITION_WEIGHTS)
            loss_coarse = loss_coarse + weight * soft_cross_entropy(coarse, target)
            loss_mpm = loss_mpm + weight * soft_cross_entropy(final, target)
            # MRM: each head against its own rater's mask, mean over pixels and valid (image, rater) pairs
            ce = F.cross_entropy(rater.float().transpose(1, 2), raters, reduction="none").mean((2, 3))  # (B, R)
            loss_mrm = loss_mrm + masked_mean(ce, mask) / 3
        total = loss_coarse + loss_mrm + loss_mpm
        return {"loss": total, "coarse": loss_coarse.detach(), "mrm": loss_mrm.detach(), "mpm": loss_mpm.detach()}

    def predict_proba(self, images: torch.Tensor) -> torch.Tensor:
        r = self.spec.n_raters
        uniform = torch.full((images.shape[0], r), 1.0 / r, device=images.device)  # official "Default Majority"
        _, _, final = self.forward_condition(images, self.coarse.encode(images), uniform)
        return torch.softmax(final.float(), 1)

    def deviations(self) -> list[str]:
        out = []
        if self.cfg.backbone == "unet":
            out.append("coarse network: shared U-Net with the EIM at its bottleneck instead of the official ResNet-34 U-Net")
        else:
            out.append("coarse network: the official ResNet-34 U-Net (random init) instead of the shared U-Net")
        return out + [
            "MRM: shared U-Net with R 1×1 heads and a ConvLSTM at its bottleneck instead of the official VGG16-BN + ASPP; input image ⊕ coarse probabilities (official: logits)",
            "softmax over L classes with soft-target cross-entropy instead of per-class sigmoid BCE; MPM maps over foreground classes 1..L−1",
            "reconstruction loss L_rec omitted (a no-op in the official code) and with it the 0.7 factor on the coarse loss",
            "MPM uniform branch uses the uniform-condition coarse output (paper), not the p-condition output (official code bug)",
            "one Adam over the three modules in one stage (official: three optimisers; same steps since the losses touch disjoint parameters)",
            "batch-norm running statistics from the uniform-condition pass only (official: all three conditions)",
            "MPM: fixed Gaussian blur (official: a trained parameter) and PyTorch's default conv init (official: N(0, 0.01))",
            "no weight decay (official Adam: 5e-4); harness batch size (official: 8)",
        ]
