"""LF-Net: label filling via mixed supervision, and its ablation variants.

Paper: M. Li, W. Shen, Q. Li, Y. Wang, "Label Filling via Mixed Supervision for Medical Image
Segmentation from Noisy Annotations", arXiv 2410.16057 (§III and "Implementation Details").
No public implementation is known, so everything here follows the paper's text and
docs/methods.md#lf-net; the open points of docs/methods.md#lf-net-open-points are decided below.

What is implemented
-------------------
Two stages (Algorithm 1):

1. ``soft_label`` trains the soft-label learning network ``sll`` (Θ1), the shared U-Net fed with
   the raters' label maps, with L_sll = TV-masked cross-entropy against the majority vote (eq. 4).
2. ``segmentation`` trains the segmentation U-Net ``seg`` (Θ2) and the rater characteristics net
   ``rcn`` (Θ3, θ1..θR) with ``sll`` frozen (the harness puts it in eval mode):
   L_seg = L_sl + L_ce + λ·L_rcl (eq. 10), where
   - L_ce = TV-masked cross-entropy of ``seg`` against the majority vote (eq. 6);
   - L_sl = −τ² · mean over TV-selected pixels of Σ_l q̂1 log q2 with q̂1 = softmax(a1/τ) of the frozen
     SLL (computed on the fly under no_grad) and q2 = softmax(a2/τ) of ``seg`` (eqs. 7–8);
   - L_rcl = Σ_r cross-entropy of RCN head r against rater r's labels, on every pixel (no TV mask),
     missing raters left out (eq. 9).
Prediction is softmax(``seg``(image)) only, without temperature (Algorithm 1, last line).

Equations are numbered in the order of the paper's source (independence = 1, TV = 3).
Notation: M^tv (eq. 3) is 1 where the most-voted class, background included, has ≥ β votes; β is a
count of raters, R − 1 by default (so R = 1, the Oracle view, selects every pixel). Ω is
`labels.fusion.majority_vote` (ties go to the lowest class, docs/methods.md#majority-vote-and-its-tie-rule).

Decisions on the paper's open points (docs/methods.md#lf-net-open-points; recorded in `Config` and `deviations()`)
-------------------------------------------------------------------------------------------------
- Loss normalisation (docs/methods.md#lf-net-loss-normalisation): every term is a mean, not the paper's sum over pixels. L_sll, L_ce
  and L_sl average over the TV-selected pixels of the batch (an empty mask gives 0); each rater's
  term of L_rcl averages over all pixels of the images that rater labelled, and the R terms are
  summed, as the Σ_r of eq. 9. So λ·L_rcl weighs R rater terms against one L_ce term, as in the
  paper, but the ratio of all pixels to selected pixels that the paper's sums carry is dropped.
- SLL input (docs/methods.md#lf-net-soft-label-network-input): the raters' maps one-hot encoded, R·L channels (channel r·L + l is 1 where
  rater r says class l), a missing rater all zeros (it also casts no vote). The paper writes R
  class-index channels, which for binary data carry the same information except that a missing
  rater would look like an all-background one; for multi-class data (RIGA) one-hot avoids an
  arbitrary order on the classes. The SLL sees only the raters' maps by default: §III-C defines
  P̂1 = f(Ỹ; Θ̂1) and says the stacked annotations are "fed to the network"; the f(X; Θ̂1) of §III-D1
  reads as a reuse of the generic notation. ``sll_sees_image=True`` prepends the image channels.
- RCN input (docs/methods.md#lf-net-the-rater-characteristics-net): option (a), the segmentation network's softmax P2 (probabilities, not an
  argmax, not detached), so that λ·L_rcl reaches Θ2; §III-D2 and §III-A describe the RCN as
  modelling each rater "based upon the learned true label" and back-propagating into the
  segmentation network. Without the image, everything the RCN knows about the true label comes
  through P2, so it cannot model a rater from the image alone and bypass the segmentation network.
  ``rcn_sees_image=True`` concatenates the image (option (b)).
- Shared-feature reading (``rater_module="shared"``, ``lf-net-rcn-shared``): the paper never says
  how the RCN connects to the segmentation network. Read "the backbone network is the 2D U-Net"
  as the segmentation U-Net itself: R per-rater heads (a 3×3 conv + BN + ReLU and a 1×1 class
  head each, ``RaterHeads``) sit on top of the segmentation network's complete last decoder block,
  whose output also feeds its own class head, so L_rcl shapes Θ2's features directly instead of
  reaching Θ2 through P2. (The heads add a layer rather than replacing the last decoder conv, as
  the separate RCN does.) Run as a declared reading beside ``rcn_sees_image=True``
  (``lf-net-rcn-image``), not as the default.
- RCN architecture ("the backbone network is the 2D U-Net, except the last decoder layer, where the
  branches are split"): the shared U-Net whose last decoder block keeps its first 3×3 conv shared;
  its second 3×3 conv (the last layer of the decoder) and the 1×1 class head are per rater. The R
  branches are computed as one convolution with R·32 output channels followed by a 1×1 convolution
  with R groups, which is exactly R independent branches. Splitting the whole last decoder block
  would cost ≈ 1.75× a U-Net's FLOPs for R = 5 instead of ≈ 1.2×.
- "Training epoch for rater characteristics net module is 15" on MNIST (docs/methods.md#lf-net-the-mnist-rcn-epochs): the RCN is trained
  only in stage 2 and jointly with Θ2 (Algorithm 1), so the paper budget reads it as the length of
  stage 2 on MNIST (15 epochs, bench/train/budget.py). The other reading, L_rcl active only in the first
  15 of 70 epochs of stage 2, is ``--budget paper-rcl15`` (which sets ``rcl_epochs=15``).
- λ (docs/methods.md#lf-net-hyper-parameters): 0.05 (the paper's default); the paper uses 0.01 on MNIST, which the
  config cannot know: the study file's per-dataset settings give it on mnist, mnist-5k and cm-folder, to every variant.
- "No TV" ablations (docs/methods.md#lf-net-no-tv-ablations): S+SLS (``lf-net-s-sls``) has no TV anywhere, so its SLL is also
  trained on the majority vote of every pixel (``sll_tv=False``); with rater-only input this SLL
  learns Ω itself, which matches Table IV where S+SLS is close to S. † (``lf-net-no-tv-sl``) removes
  the mask from L_sl only; its SLL keeps the TV mask.
- Replacing the SLL by the majority vote or STAPLE (text of §IV-D): that fused label p̂1 is softened
  like the SLL's output, q̂1 ∝ p̂1^(1/τ) (= softmax(log p̂1 / τ)); the one-hot majority vote stays
  one-hot. STAPLE is binary, per image (`labels.staple.staple`), precomputed in `prepare`.
- Replacing the RCN by CM-UNet's confusion matrices (``rater_module="cm"``): pixel-wise
  column-stochastic L×L matrices A_r[noisy, true] = p(ỹ_r | y) from R heads (3×3 conv + BN + ReLU,
  1×1 conv to L², softplus, normalised over the noisy label) on the segmentation U-Net's last
  decoder features, as in CM-UNet; the rater term is Σ_r NLL(log(A_r·P2)) with the correct log
  (docs/methods.md#cm-unet-double-softmax-in-the-loss), plus ``cm_trace_weight``·Σ_r mean trace(A_r). The trace weight is 0 by
  default: CM-UNet needs it to tell A from P2 when nothing else anchors P2, while here L_ce and L_sl
  anchor P2. The head is a small copy of the idea, independent of `methods/cm_unet.py`; the two
  could share one module later.

Ablations (Table IV, docs/methods.md#lf-net-ablation-variants) are config flags registered as one-line variants at the
bottom. Variants without the soft-label network have no ``soft_label`` stage and no ``sll``
module; variants without a rater module have no ``rcn``. The S and S+TV rows keep LF-Net's
segmentation schedule (70 epochs); ``mv-unet`` and ``qmv-unet`` are the 150-epoch baselines.

Defaults: β = R − 1, τ = 2.5, λ = 0.05 from the paper's Implementation Details and eq. 3. How long
and with what optimiser each stage trains is the budget's (bench/train/budget.py; the paper budget: Adam
lr 1e-4, 10 + 70 epochs). Measured on CPU (32×1×28×28 batches, R = 5, fwd + bwd + Adam): a stage-1
step costs 1.0× a U-Net step, a stage-2 step (seg + RCN + frozen SLL forward) 2.3–3.0×.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from labels.fusion import batch_votes, threshold_vote_mask, vote_targets
from labels.staple import staple
from methods.base import DataSpec, Method, Stage, StepContext
from methods.kit import masked_cross_entropy
from methods.lf_net_losses import confusion_rater_term, rater_cross_entropy, rater_onehot, soft_label_loss, soften
from methods.lf_net_rater_modules import ConfusionMatrixHeads, RaterCharacteristicsNet, RaterHeads
from methods.registry import register_method, register_variant
from methods.unet import UNet

SOFT_LABELS = ("sll", "mv", "staple", "none")
RATER_MODULES = ("rcn", "shared", "cm", "none")


@register_method(
    "lf-net",
    "LF-Net: soft-label network, then a U-Net on TV-masked MV + soft labels + rater characteristics net",
    group="main",
    display="LF-Net",
)
class LFNet(Method):
    """LF-Net (Li et al., arXiv 2410.16057) and its ablations; see the module docstring for every decision.

    Children: ``sll`` (soft-label U-Net, only when ``soft_label == "sll"``), ``seg`` (the segmentation
    U-Net, the only network used for prediction), ``rcn`` (rater characteristics net) or ``cm``
    (confusion-matrix heads), only when a rater module is used.
    """

    needs_consistent_raters = True  # head r models rater r

    @dataclass(frozen=True)
    class Config:
        # TV threshold as a count of raters, 1..R (`--set` checks it); None = R − 1 (paper eq. 3 and §III-C)
        beta: int | None = field(default=None, metadata={"domain": (1, "raters")})
        tau: float = 2.5  # temperature of L_sl (paper, Implementation Details)
        lam: float = 0.05  # λ, weight of L_rcl (paper default; 0.01 on MNIST comes from the study file's settings)
        soft_label: str = "sll"  # q̂1 source: "sll" (paper) | "mv" | "staple" (§IV-D text ablations) | "none" (no L_sl)
        sl_tv: bool = True  # TV mask on L_sl (paper eq. 8; False = Table IV †)
        sll_tv: bool = True  # TV mask on L_sll (paper eq. 4; False for S+SLS, docs/methods.md#lf-net-no-tv-ablations)
        sll_sees_image: bool = False  # SLL input = raters only (§III-C, f(Ỹ; Θ1)); True prepends the image
        use_ce: bool = True  # L_ce term (False = Table IV ‡)
        ce_tv: bool = True  # TV mask on L_ce (paper eq. 6; False = CE vs MV on every pixel, Table IV S rows)
        rater_module: str = (
            "rcn"  # "rcn" (paper) | "shared" (heads on Θ2's features, a reading) | "cm" (CM-UNet's CMs, §IV-D text) | "none"
        )
        rcn_sees_image: bool = (
            False  # RCN input = P2 only (docs/methods.md#lf-net-the-rater-characteristics-net, option a); True adds the image
        )
        rcl_epochs: int | None = (
            None  # L_rcl active in the first N stage-2 epochs; None = all (docs/methods.md#lf-net-the-mnist-rcn-epochs, other reading)
        )
        cm_trace_weight: float = 0.0  # trace regulariser of the CM rater module (see module docstring)

    def __init__(self, cfg: Config, spec: DataSpec):
        super().__init__(cfg, spec)
        if cfg.soft_label not in SOFT_LABELS:
            raise ValueError(f"soft_label must be one of {SOFT_LABELS}, not {cfg.soft_label!r}")
        if cfg.rater_module not in RATER_MODULES:
            raise ValueError(f"rater_module must be one of {RATER_MODULES}, not {cfg.rater_module!r}")
        if not cfg.use_ce and cfg.soft_label == "none" and (cfg.rater_module == "none" or cfg.rcl_epochs is not None):
            raise ValueError("lf-net config without a loss term in some epoch (use_ce and soft_label off, rater term off or limited)")
        if cfg.soft_label == "staple" and spec.n_classes != 2:
            raise ValueError("soft_label='staple' fuses binary labels only; this dataset has classes beyond background/foreground")
        L, R, C = spec.n_classes, spec.n_raters, spec.in_channels
        self.beta = cfg.beta if cfg.beta is not None else max(R - 1, 0)
        if cfg.soft_label == "sll":
            self.sll = UNet(R * L + (C if cfg.sll_sees_image else 0), L)
        self.seg = UNet(C, L)
        if cfg.rater_module == "rcn":
            self.rcn = RaterCharacteristicsNet(L + (C if cfg.rcn_sees_image else 0), L, R)
        elif cfg.rater_module == "shared":
            self.rcn = RaterHeads(self.seg.out_channels, L, R)
        elif cfg.rater_module == "cm":
            self.cm = ConfusionMatrixHeads(self.seg.out_channels, L, R)

    @property
    def stages(self) -> list[Stage]:
        cfg = self.cfg
        trained = ("seg",) + {"rcn": ("rcn",), "shared": ("rcn",), "cm": ("cm",), "none": ()}[cfg.rater_module]
        seg_stage = Stage("segmentation", trained)
        if cfg.soft_label == "sll":
            return [Stage("soft_label", ("sll",)), seg_stage]
        return [seg_stage]

    def prepare(self, raters: np.ndarray, rater_valid: np.ndarray) -> dict[str, np.ndarray]:
        """The split's vote targets (Ω, M^tv) once, not at every step; STAPLE's posterior where it replaces the SLL."""
        out = vote_targets(raters, rater_valid, self.spec.n_classes, self.beta)
        if self.cfg.soft_label == "staple":
            out["staple"] = staple(raters, rater_valid).astype(np.float32)  # foreground posterior (N, H, W)
        return out

    def sll_logits(self, images: torch.Tensor, raters: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """a1: the soft-label network's logits (B, L, H, W) from the raters' one-hot maps (and the image if configured)."""
        x = rater_onehot(raters, valid, self.spec.n_classes).to(images.dtype)
        if self.cfg.sll_sees_image:
            x = torch.cat([images, x], dim=1)
        return self.sll(x.contiguous(memory_format=torch.channels_last))

    def soft_target(self, batch: dict[str, torch.Tensor], mv: torch.Tensor) -> torch.Tensor:
        """q̂1 (B, L, H, W): the softened fused label from the frozen SLL, the majority vote or STAPLE; no gradient."""
        with torch.no_grad():
            if self.cfg.soft_label == "sll":
                a1 = self.sll_logits(batch["images"], batch["raters"], batch["rater_valid"])
                return torch.softmax(a1.float() / self.cfg.tau, dim=1)
            if self.cfg.soft_label == "mv":
                probs = F.one_hot(mv, self.spec.n_classes).permute(0, 3, 1, 2).to(torch.float32)
            else:
                fg = batch["staple"].float()
                probs = torch.stack([1 - fg, fg], dim=1)
            return soften(probs, self.cfg.tau)

    def loss(self, batch: dict[str, torch.Tensor], ctx: StepContext) -> dict[str, torch.Tensor]:
        """Stage ``soft_label``: L_sll. Stage ``segmentation``: L_sl + L_ce + λ·L_rcl (terms off in ablations log 0).

        Logged keys are the same in both stages ("loss", "sll", "ce", "sl", "rcl"): unweighted terms,
        0 where a term is not part of this stage or variant.
        """
        return self.loss_and_logits(batch, ctx)[0]

    def validation(self, batch: dict[str, torch.Tensor], ctx: StepContext) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
        parts, logits = self.loss_and_logits(batch, ctx)
        return parts, None if logits is None else torch.softmax(logits.float(), dim=1)

    def loss_and_logits(self, batch: dict[str, torch.Tensor], ctx: StepContext) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
        """`loss`'s parts and, in stage ``segmentation``, the segmentation network's logits (B, L, H, W) (else None)."""
        images, raters, valid = batch["images"], batch["raters"], batch["rater_valid"]
        L = self.spec.n_classes
        mv, tv = batch_votes(batch, L, self.beta)
        zero = images.new_zeros((), dtype=torch.float32)
        parts = {"sll": zero, "ce": zero, "sl": zero, "rcl": zero}
        if ctx.stage == "soft_label":
            parts["sll"] = masked_cross_entropy(self.sll_logits(images, raters, valid), mv, tv if self.cfg.sll_tv else None)
            return {"loss": parts["sll"], **{k: v.detach() for k, v in parts.items()}}, None
        if ctx.stage != "segmentation":
            raise ValueError(f"unknown stage {ctx.stage!r}")

        features = self.seg.features(images)
        logits = self.seg.head(features)
        total = zero
        if self.cfg.use_ce:
            parts["ce"] = masked_cross_entropy(logits, mv, tv if self.cfg.ce_tv else None)
            total = total + parts["ce"]
        if self.cfg.soft_label != "none":
            parts["sl"] = soft_label_loss(logits, self.soft_target(batch, mv), self.cfg.tau, tv if self.cfg.sl_tv else None)
            total = total + parts["sl"]
        if self.cfg.rater_module != "none" and self.rcl_on(ctx):
            probs = torch.softmax(logits.float(), dim=1)  # P2, not detached: λ·L_rcl reaches Θ2
            if self.cfg.rater_module == "rcn":
                x = torch.cat([images, probs.to(images.dtype)], dim=1) if self.cfg.rcn_sees_image else probs.to(images.dtype)
                parts["rcl"] = rater_cross_entropy(self.rcn(x.contiguous(memory_format=torch.channels_last)), raters, valid)
            elif self.cfg.rater_module == "shared":
                parts["rcl"] = rater_cross_entropy(self.rcn(features), raters, valid)
            else:
                parts["rcl"] = confusion_rater_term(self.cm(features), probs, raters, valid, self.cfg.cm_trace_weight)
            total = total + self.cfg.lam * parts["rcl"]
        return {"loss": total, **{k: v.detach() for k, v in parts.items()}}, logits

    def rcl_on(self, ctx: StepContext) -> bool:
        """Whether L_rcl is part of this step's loss (`rcl_epochs`: only in the first epochs of stage 2)."""
        return self.cfg.rcl_epochs is None or ctx.epoch < self.cfg.rcl_epochs

    def graph_key(self, ctx: StepContext) -> tuple:
        return (self.rcl_on(ctx),) if ctx.stage == "segmentation" else ()

    def predict_proba(self, images: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) → softmax of the segmentation network's logits (B, L, H, W), no temperature."""
        return torch.softmax(self.seg(images).float(), dim=1)

    def teacher(
        self, images: torch.Tensor, raters: torch.Tensor, rater_valid: torch.Tensor, temperature: float = 1.0
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The soft-label network's p̂1 = softmax(a1 / `temperature`) (1: none) and the TV mask; None without an SLL."""
        if self.cfg.soft_label != "sll":
            return None
        probs = torch.softmax(self.sll_logits(images, raters, rater_valid).float() / temperature, dim=1)
        return probs, threshold_vote_mask(raters, rater_valid, self.spec.n_classes, self.beta)

    def has_own_fused_labels(self) -> bool:
        return self.cfg.soft_label == "sll"  # the SLL's soft label and the TV mask (`own_fused_labels`)

    fused_label_keys = {"TV": "the raters' vote is trusted (the most-voted class has ≥ β votes)"}

    def own_fused_labels(
        self, images: torch.Tensor, raters: torch.Tensor, rater_valid: torch.Tensor, temperature: float = 1.0
    ) -> dict[str, torch.Tensor]:
        """SLL: the soft-label network's probability of foreground, softmax(a1 / `temperature`) (1: the network's own
        output; `cfg.tau` shows the softened target q̂1 that L_sl trains against); TV: the threshold-vote mask M^tv with
        this model's β. {} without an SLL."""
        out = self.teacher(images, raters, rater_valid, temperature)
        if out is None:
            return {}
        probs, tv = out
        return {"SLL": probs[:, 1:].sum(1), "TV": tv}

    def deviations(self) -> list[str]:
        cfg = self.cfg
        out = [
            "losses are means over (selected) pixels, not the paper's sums; L_rcl sums R per-rater means (docs/methods.md#lf-net-loss-normalisation)",
        ]
        if cfg.soft_label == "sll":
            out.append(
                "SLL input: raters one-hot, R·L channels (missing rater = zeros), not R class-index channels (docs/methods.md#lf-net-soft-label-network-input)"
            )
            if cfg.sll_sees_image:
                out.append("SLL also sees the image (sll_sees_image=True; the paper's method section feeds only the raters)")
        if cfg.rater_module == "rcn":
            out.append(
                "RCN input = the segmentation softmax P2"
                + (" + image" if cfg.rcn_sees_image else "")
                + "; the last decoder conv and head split per rater (docs/methods.md#lf-net-the-rater-characteristics-net)"
            )
        if cfg.rater_module == "shared":
            out.append("rater heads on the segmentation network's last decoder features (the shared-feature reading of the RCN)")
        return out


_S = {"soft_label": "none", "rater_module": "none", "ce_tv": False}  # S: CE vs MV on every pixel, nothing else
# Table IV rows in the paper's order (the study file places the full model's row); then the text's substitutions.
register_variant(
    "lf-net-s", "lf-net", "LF-Net ablation S: segmentation network on the majority vote of every pixel (Table IV)", display="S", **_S
)
register_variant(
    "lf-net-s-tv", "lf-net", "LF-Net ablation S+TV: CE vs MV on TV-selected pixels (Table IV)", display="S+TV", **{**_S, "ce_tv": True}
)
register_variant(
    "lf-net-s-sls",
    "lf-net",
    "LF-Net ablation S+SLS: CE vs MV on every pixel + unmasked L_sl, SLL trained without TV (Table IV)",
    display="S+SLS",
    soft_label="sll",
    sl_tv=False,
    sll_tv=False,
    rater_module="none",
    ce_tv=False,
)
register_variant(
    "lf-net-s-rcls",
    "lf-net",
    "LF-Net ablation S+RCLS: CE vs MV on every pixel + λ·L_rcl (Table IV)",
    display="S+RCLS",
    soft_label="none",
    ce_tv=False,
)
register_variant(
    "lf-net-s-tv-sls",
    "lf-net",
    "LF-Net ablation S+TV+SLS: L_ce + L_sl, no rater module (Table IV)",
    display="S+TV+SLS",
    rater_module="none",
)
register_variant(
    "lf-net-no-tv-sl", "lf-net", "LF-Net ablation †: full loss without the TV mask in L_sl (Table IV)", display="†", sl_tv=False
)
register_variant("lf-net-no-ce", "lf-net", "LF-Net ablation ‡: L_sl + λ·L_rcl, no L_ce (Table IV)", display="‡", use_ce=False)
# Declared readings of what the paper leaves open (run beside lf-net, the code's reading, and †).
# The soft-label network's input read as §III-D1's f(X; Θ1): the image beside the raters, under each L_sl mask (the
# 2×2 of docs/decisions.md, "LF-Net's four readings under the paper's recipe").
register_variant(
    "lf-net-sll-image",
    "lf-net",
    "LF-Net reading: the soft-label network sees the image beside the raters",
    "variant",
    display="SLL sees image",
    sll_sees_image=True,
)
register_variant(
    "lf-net-sll-image-no-tv-sl",
    "lf-net",
    "LF-Net reading: the SLL sees the image, and L_sl covers every pixel (†)",
    "variant",
    display="SLL sees image, †",
    sll_sees_image=True,
    sl_tv=False,
)
register_variant(
    "lf-net-rcn-image",
    "lf-net",
    "LF-Net reading: the RCN sees the image beside P2",
    "variant",
    display="RCN sees image",
    rcn_sees_image=True,
)
register_variant(
    "lf-net-rcn-shared",
    "lf-net",
    "LF-Net reading: per-rater heads on the segmentation network's features (shared-feature RCN)",
    "variant",
    display="shared-feature RCN",
    rater_module="shared",
)
register_variant(
    "lf-net-cm",
    "lf-net",
    "LF-Net with the RCN replaced by CM-UNet's pixel-wise confusion matrices (§IV-D text)",
    display="RCN→CM",
    rater_module="cm",
)
register_variant(
    "lf-net-sll-mv",
    "lf-net",
    "LF-Net with the soft-label network replaced by the majority vote (§IV-D text)",
    display="SLL→MV",
    soft_label="mv",
)
register_variant(
    "lf-net-sll-staple",
    "lf-net",
    "LF-Net with the soft-label network replaced by per-image STAPLE (§IV-D text)",
    display="SLL→STAPLE",
    soft_label="staple",
)
