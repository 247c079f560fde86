"""Tests for methods/mh_unet.py: per-head loss with missing raters masked, prediction = mean of heads, WDN."""

from __future__ import annotations

import math

import numpy as np
import torch

from bench.train import harness, inference
from methods.base import DataSpec, StepContext
from methods.mh_unet import MultiHeadUNet, multi_head_loss
from methods.registry import build_method, get_entry

SPEC = DataSpec(in_channels=1, n_classes=2, n_raters=3)


def ctx(stage: str = "train") -> StepContext:
    return StepContext(stage, 0, 0, torch.Generator().manual_seed(0))


def test_registered_as_main_and_needs_consistent_raters():
    entry = get_entry("mh-unet")
    assert entry.cls is MultiHeadUNet and entry.group == "main"
    assert MultiHeadUNet.needs_consistent_raters


def test_loss_by_hand_on_a_tiny_case():
    # B = 1, R = 2, L = 2, one row of 2 pixels. Head 0 logits (0, ln 3) at both pixels -> p(1) = 3/4;
    # head 1 logits (0, 0) -> p = 1/2. Rater 0 says (1, 0), rater 1 says (1, 1).
    logits = torch.zeros(1, 2, 2, 1, 2)
    logits[0, 0, 1] = math.log(3)
    raters = torch.tensor([[[[1, 0]], [[1, 1]]]])
    valid = torch.ones(1, 2, dtype=torch.bool)
    ce0 = (-math.log(3 / 4) - math.log(1 / 4)) / 2  # head 0, per-pixel mean
    ce1 = math.log(2)  # head 1
    assert math.isclose(multi_head_loss(logits, raters, valid).item(), (ce0 + ce1) / 2, rel_tol=1e-6)
    # Rater 1 missing: only head 0 counts (mean over the one valid pair).
    valid[0, 1] = False
    assert math.isclose(multi_head_loss(logits, raters, valid).item(), ce0, rel_tol=1e-6)


def test_missing_rater_contributes_nothing():
    m = MultiHeadUNet(MultiHeadUNet.Config(), SPEC).eval()
    torch.manual_seed(0)
    images = torch.randn(2, 1, 16, 16)
    raters = torch.randint(0, 2, (2, 3, 16, 16))
    valid = torch.tensor([[True, False, True], [True, True, True]])
    loss = m.loss({"images": images, "raters": raters, "rater_valid": valid}, ctx())["loss"]
    changed = raters.clone()
    changed[0, 1] = 1 - changed[0, 1]  # the missing rater's labels
    assert torch.equal(loss, m.loss({"images": images, "raters": changed, "rater_valid": valid}, ctx())["loss"])
    changed[1, 1] = 1 - changed[1, 1]  # a valid rater's labels do matter
    assert not torch.allclose(loss, m.loss({"images": images, "raters": changed, "rater_valid": valid}, ctx())["loss"])
    # A missing head gets no gradient from that image: with rater 1 missing everywhere, its head's weights get none.
    m.zero_grad()
    valid_none = torch.tensor([[True, False, True], [True, False, True]])
    m.loss({"images": images, "raters": raters, "rater_valid": valid_none}, ctx())["loss"].backward()
    grad = m.heads.weight.grad.view(3, 2, -1)
    assert grad[1].abs().max() == 0 and grad[0].abs().max() > 0


def test_prediction_is_mean_of_heads():
    m = MultiHeadUNet(MultiHeadUNet.Config(), SPEC).eval()
    images = torch.randn(2, 1, 16, 16)
    with torch.no_grad():
        logits = m.head_logits(images)
        assert logits.shape == (2, 3, 2, 16, 16)
        expected = torch.softmax(logits, dim=2).mean(1)
        assert torch.allclose(m.predict_proba(images), expected, atol=1e-6)


def test_wdn_weights_start_uniform_and_train_only_in_their_stage():
    m = MultiHeadUNet(MultiHeadUNet.Config(learned_weights=True), SPEC)
    assert [s.name for s in m.stages] == ["train", "weights"]
    assert m.stages[1].modules == ("weights",)
    assert torch.allclose(m.head_weights(), torch.full((3,), 1 / 3))
    m.eval()
    images = torch.randn(2, 1, 16, 16)
    with torch.no_grad():
        m.weights.logits.copy_(torch.tensor([0.0, math.log(2), math.log(5)]))  # weights 1/8, 2/8, 5/8
        probs = torch.softmax(m.head_logits(images), dim=2)
        expected = (probs * torch.tensor([1, 2, 5])[None, :, None, None, None] / 8).sum(1)
        assert torch.allclose(m.predict_proba(images), expected, atol=1e-6)
    raters = torch.randint(0, 2, (2, 3, 16, 16))
    valid = torch.ones(2, 3, dtype=torch.bool)
    m.zero_grad()
    m.loss({"images": images, "raters": raters, "rater_valid": valid}, ctx("weights"))["loss"].backward()
    assert m.weights.logits.grad.abs().sum() > 0
    assert all(p.grad is None for p in [*m.net.parameters(), *m.heads.parameters()])
    with torch.inference_mode():  # the validation pass: the weights stage's loss and the weighted consensus, one forward
        batch = {"images": images, "raters": raters, "rater_valid": valid}
        parts, consensus = m.validation(batch, ctx("weights"))
        assert torch.equal(parts["loss"], m.loss(batch, ctx("weights"))["loss"])
        assert torch.allclose(consensus, expected, atol=1e-6)


def test_smoke_fit_and_predict_dn_and_wdn():
    rng = np.random.default_rng(0)
    images = rng.normal(size=(8, 1, 16, 16)).astype(np.float32)
    raters = rng.integers(0, 2, (8, 3, 16, 16)).astype(np.uint8)
    valid = np.ones((8, 3), dtype=bool)
    valid[0, 1] = False
    for overrides in ({}, {"learned_weights": True}):
        m = build_method("mh-unet", SPEC, overrides)
        split, run = harness.Split(images, raters, valid), harness.Runtime(0, torch.device("cpu"))
        harness.fit(m, split, harness.fixed_schedules(m, 2, 4), run, out=harness.Output(progress=False))
        probs = inference.predict_proba(m, images, device=torch.device("cpu"))
        assert probs.shape == (8, 2, 16, 16) and np.isfinite(probs).all()
        assert np.allclose(probs.sum(1), 1, atol=1e-5)
