"""Tests for methods/ls_unet.py: label sampling draws only valid raters, all of them, reproducibly."""

from __future__ import annotations

import torch

from methods.base import DataSpec, StepContext
from methods.kit import sample_valid_raters
from methods.ls_unet import LabelSamplingUNet
from methods.registry import get_entry

# 4 images × 4 raters; image 1 has only rater 2, image 3 has none.
VALID = torch.tensor(
    [
        [True, True, True, True],
        [False, False, True, False],
        [True, False, True, False],
        [False, False, False, False],
    ]
)


def draws(seed: int, steps: int = 400) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.stack([sample_valid_raters(VALID, gen) for _ in range(steps)])  # (steps, B)


def test_registered_as_main():
    entry = get_entry("ls-unet")
    assert entry.cls is LabelSamplingUNet and entry.group == "main"


def test_draws_only_valid_raters():
    d = draws(0)
    for b in range(3):  # image 3 has no valid rater: its draw is arbitrary and masked out of the loss
        assert VALID[b, d[:, b]].all(), f"image {b} drew a missing rater"


def test_every_valid_rater_is_drawn_about_uniformly():
    d = draws(1, steps=2000)
    for b in range(3):
        allowed = VALID[b].nonzero().flatten().tolist()
        counts = torch.bincount(d[:, b], minlength=4)[allowed].float()
        assert (counts > 0).all(), f"image {b}: some valid rater never drawn"
        freq = counts / counts.sum()
        assert torch.allclose(freq, torch.full_like(freq, 1 / len(allowed)), atol=0.05)


def test_sampling_is_seeded_and_resampled_every_step():
    a, b = draws(7, steps=50), draws(7, steps=50)
    assert torch.equal(a, b)  # same generator seed -> same draws
    assert not torch.equal(a, draws(8, steps=50))
    assert len(set(a[:, 0].tolist())) > 1  # image 0 is not frozen to one rater


def test_loss_is_ce_against_the_drawn_rater_and_ignores_images_without_raters():
    spec = DataSpec(in_channels=1, n_classes=2, n_raters=4)
    m = LabelSamplingUNet(LabelSamplingUNet.Config(), spec).eval()
    torch.manual_seed(0)
    images = torch.randn(4, 1, 16, 16)
    raters = torch.randint(0, 2, (4, 4, 16, 16))
    loss = m.loss({"images": images, "raters": raters, "rater_valid": VALID}, StepContext("train", 0, 0, torch.Generator().manual_seed(3)))[
        "loss"
    ]
    drawn = sample_valid_raters(VALID, torch.Generator().manual_seed(3))
    with torch.no_grad():
        ce = torch.nn.functional.cross_entropy(m.net(images), raters[torch.arange(4), drawn], reduction="none")
    assert torch.allclose(loss, ce[:3].mean(), atol=1e-6)  # image 3 (no valid rater) left out
    # Changing every label of the rater-less image leaves the loss unchanged.
    raters2 = raters.clone()
    raters2[3] = 1 - raters2[3]
    loss2 = m.loss(
        {"images": images, "raters": raters2, "rater_valid": VALID}, StepContext("train", 0, 0, torch.Generator().manual_seed(3))
    )["loss"]
    assert torch.allclose(loss, loss2)
