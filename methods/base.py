"""The method interface (docs/methods.md#the-method-interface): a method owns its networks and its loss, nothing else."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
from torch import nn


@dataclass(frozen=True)
class DataSpec:
    """What a method needs to know about the data to build its networks."""

    in_channels: int
    n_classes: int
    n_raters: int
    rater_ids_consistent: bool = True


@dataclass(frozen=True)
class Stage:
    """One training stage: which child modules it trains (how long is the budget's business, bench/train/budget.py).

    Children not named are frozen and kept in eval mode during the stage (so a frozen network's
    batch-norm statistics stay fixed). An empty `modules` trains every parameter.
    """

    name: str
    modules: tuple[str, ...] = ()


@dataclass
class StepContext:
    """Per-step information the harness hands to `Method.loss`; `generator` is the only randomness a method may use."""

    stage: str
    epoch: int
    step: int
    generator: torch.Generator


class Method(nn.Module):
    """Base class. Subclasses set `Config` (a frozen dataclass) and implement `loss` and `predict_proba`.

    Batches are dicts: images float (B, C, H, W); raters long (B, R, H, W); rater_valid bool (B, R);
    index long (B,) into the training split; plus the per-image arrays that `prepare` returned.
    There is never a ground-truth field.
    """

    Config: ClassVar[type]
    needs_consistent_raters: ClassVar[bool] = False  # per-rater modelling needs rater r to be one person
    # Latent draws per image that the consensus (`predict_proba`) averages; 0: a read-out without draws. A method that
    # draws takes `predict_proba(images, ids)` and seeds its draws per image from `ids` (methods/latent.py::per_image).
    consensus_draws: int = 0
    consensus_estimator: str = "mc"  # how those draws are drawn: methods/latent.py::consensus_normal
    # The stage whose weights alone decide `predict_proba`, where that is not the last (D-Persona's "prior": its personas
    # stage trains only per-rater heads): the logged GT diagnostic and the selection reading follow it.
    consensus_stage: ClassVar[str | None] = None

    def __init__(self, cfg, spec: DataSpec):
        super().__init__()
        self.cfg = cfg
        self.spec = spec

    @property
    def stages(self) -> list[Stage]:
        return [Stage("train")]

    def prepare(self, raters: np.ndarray, rater_valid: np.ndarray) -> dict[str, np.ndarray]:
        """Optional precomputation on the training raters (N, R, H, W); returns per-image arrays (N, ...)."""
        return {}

    def loss(self, batch: dict[str, torch.Tensor], ctx: StepContext) -> dict[str, torch.Tensor]:
        """Returns {"loss": scalar to minimise, other keys: detached parts for the log}."""
        raise NotImplementedError

    def validation(self, batch: dict[str, torch.Tensor], ctx: StepContext) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
        """The loss parts of a validation batch (as `loss`, in eval mode, without gradients) and, where the loss's forward
        pass already holds it, the consensus of the batch's images (B, L, H, W) as `predict_proba` gives it.

        None (the default): the harness reads the consensus for the logged GT diagnostic in a pass of its own. A method
        whose consensus is a function of the logits its loss computes overrides this to spare that second pass.
        """
        return self.loss(batch, ctx), None

    def graph_key(self, ctx: StepContext) -> tuple:
        """The Python values `loss` branches on beside the batch's shape, e.g. whether an epoch-limited term is on.

        A graphed step (bench/train/steps.py) captures one CUDA graph per key and cannot see a branch
        taken on `ctx.epoch` or `ctx.step` otherwise: a method whose loss reads them returns here
        what it decides from them. () for a loss that never reads them.
        """
        return ()

    def predict_proba(self, images: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) → probabilities of the true label (B, L, H, W); no rater input at test time.

        A method with `consensus_draws` > 0 is called as `predict_proba(images, ids)`, ids long (B,) each image's read-out
        identity, from which it seeds its draws per image (so a read-out never depends on the batch or on one shared draw).
        """
        raise NotImplementedError

    def predict_samples(self, images: torch.Tensor, n_samples: int, ids: torch.Tensor) -> torch.Tensor | None:
        """M draws from the method's distribution of segmentations: (B, C, H, W) → probabilities (B, M, L, H, W).

        None (the default): the method models no such distribution; draws from the mixture of its per-rater outputs
        (`predict_raters`), else its one prediction, stand in as its samples when the set metrics are scored. ids long (B,):
        each image's read-out identity; the draws of an image come from a generator seeded by it (`latent.per_image`).
        """
        return None

    def predict_raters(self, images: torch.Tensor, ids: torch.Tensor) -> torch.Tensor | None:
        """One output per rater slot, in the training data's rater order: (B, C, H, W) → probabilities (B, R, L, H, W).

        None (the default): the method has no per-rater outputs. ids as `predict_samples`, for a method whose per-rater
        read-out draws.
        """
        return None

    def learning_rates(self) -> dict[str, float]:
        """{child module name: its own learning rate}, where a method's recipe gives some parameters their own (Pionono's
        latent); every other parameter takes the budget's. {} (the default): one learning rate for all."""
        return {}

    def teacher(self, images: torch.Tensor, raters: torch.Tensor, rater_valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """A learned fused label the method trains against, for diagnostics only (None: the method has none).

        images (B, C, H, W), raters long (B, R, H, W), rater_valid bool (B, R) -> (probs (B, L, H, W),
        selected bool (B, H, W): the pixels where the method trusts the raters' vote instead).
        """
        return None

    def has_own_fused_labels(self) -> bool:
        """Whether `own_fused_labels` returns any, known without data: generic code (the reproduction page's fused-label
        figure) asks this before it loads a split to draw them. False (the default): the method fuses nothing of its own."""
        return False

    # What a value of 1 means in each mask `own_fused_labels` returns, for the figure's key ({title: meaning}).
    fused_label_keys: dict[str, str] = {}

    def own_fused_labels(
        self, images: torch.Tensor, raters: torch.Tensor, rater_valid: torch.Tensor, temperature: float = 1.0
    ) -> dict[str, torch.Tensor]:
        """The method's own fused labels of a batch, drawn beside the fusion rules in the fused-label figure: {title:
        (B, H, W)}, float for a probability of foreground, bool for a mask; {} when it fuses nothing of its own.

        images (B, C, H, W), raters long (B, R, H, W), rater_valid bool (B, R); `temperature` divides a soft label's logits.
        """
        return {}

    def deviations(self) -> list[str]:
        """Departures from the shared U-Net or the paper, recorded in the run manifest."""
        return []
