"""Tests for methods/cm_unet.py: column normalisation, A·p likelihood, NLL and trace by hand, masking, GCM."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from methods.base import DataSpec, StepContext
from methods.cm_unet import ConfusionMatrixUNet, confusion_loss
from methods.kit import noisy_label_probs, normalise_columns
from methods.registry import build_method, get_entry

SPEC = DataSpec(in_channels=1, n_classes=2, n_raters=3)


def ctx() -> StepContext:
    return StepContext("train", 0, 0, torch.Generator().manual_seed(0))


def test_registered_names_groups_and_flags():
    assert get_entry("cm-unet").group == "main" and get_entry("cm-unet").cls is ConfusionMatrixUNet
    assert get_entry("cm-unet-global").group == "variant" and get_entry("cm-unet-global").overrides == {"cm": "global"}
    assert ConfusionMatrixUNet.needs_consistent_raters


def test_columns_sum_to_one():
    a = torch.rand(2, 3, 4, 4, 3, 3) + 0.1
    cm = normalise_columns(a)
    assert torch.allclose(cm.sum(-2), torch.ones(2, 3, 4, 4, 3))
    # [[1, 3], [3, 1]] -> columns (1/4, 3/4) and (3/4, 1/4): A[i, j] = a[i, j] / Σ_i a[i, j]
    assert torch.allclose(normalise_columns(torch.tensor([[1.0, 3.0], [3.0, 1.0]])), torch.tensor([[0.25, 0.75], [0.75, 0.25]]))


def test_heads_output_column_stochastic_pixel_matrices():
    m = ConfusionMatrixUNet(ConfusionMatrixUNet.Config(), SPEC).eval()
    with torch.no_grad():
        cm = m.confusion_matrices(m.net.features(torch.randn(2, 1, 16, 16)))
    assert cm.shape == (2, 3, 16, 16, 2, 2)
    assert (cm > 0).all() and torch.allclose(cm.sum(-2), torch.ones(2, 3, 16, 16, 2))


def test_pixel_heads_start_diagonally_dominant_unless_official_init():
    images = torch.randn(2, 1, 16, 16)
    diag = {}
    for bias in (0.0, 4.0):
        m = ConfusionMatrixUNet(ConfusionMatrixUNet.Config(identity_bias=bias), SPEC).eval()
        with torch.no_grad():
            diag[bias] = m.confusion_matrices(m.net.features(images)).diagonal(dim1=-2, dim2=-1)
    assert (diag[0.0] - 0.5).abs().max() < 0.15  # official init: columns ≈ uniform
    target = F.softplus(torch.tensor(4.0)) / (F.softplus(torch.tensor(4.0)) + F.softplus(torch.tensor(0.0)))  # ≈ 0.853
    assert (diag[4.0] - target).abs().max() < 0.1


def one_pixel_case():
    """1 image, 1 pixel, L = 2, R = 2. p = softmax(0, ln 3) = (1/4, 3/4).

    A_0 = [[0.9, 0.2], [0.1, 0.8]] -> A_0 p = (0.9/4 + 0.2·3/4, 0.1/4 + 0.8·3/4) = (0.375, 0.625).
    A_1 = [[0.5, 0.4], [0.5, 0.6]] -> A_1 p = (0.5/4 + 0.4·3/4, 0.5/4 + 0.6·3/4) = (0.425, 0.575).
    Rater 0 says 1, rater 1 says 0.
    """
    logits = torch.tensor([0.0, math.log(3)]).view(1, 2, 1, 1)
    cms = torch.tensor([[[0.9, 0.2], [0.1, 0.8]], [[0.5, 0.4], [0.5, 0.6]]]).view(1, 2, 1, 1, 2, 2)
    raters = torch.tensor([1, 0]).view(1, 2, 1, 1)
    return logits, cms, raters


def test_likelihood_and_nll_by_hand():
    logits, cms, raters = one_pixel_case()
    p_noisy = noisy_label_probs(cms, torch.softmax(logits, 1))
    assert p_noisy.shape == (1, 2, 2, 1, 1)
    assert torch.allclose(p_noisy.flatten(), torch.tensor([0.375, 0.625, 0.425, 0.575]))
    out = confusion_loss(logits, cms, raters, torch.ones(1, 2, dtype=torch.bool), alpha=0.0)
    assert math.isclose(out["nll"].item(), -math.log(0.625) - math.log(0.425), rel_tol=1e-5)
    assert math.isclose(out["loss"].item(), out["nll"].item(), rel_tol=1e-6)
    # Not the official double softmax: CrossEntropyLoss on the probabilities of rater 0 gives
    # log(1 + e^-(0.625 - 0.375)) ≈ 0.576 instead of −log 0.625 ≈ 0.470.
    official = F.cross_entropy(p_noisy[:, 0, :, 0, 0], raters[:, 0, 0, 0]).item()
    assert math.isclose(official, math.log(1 + math.exp(-0.25)), rel_tol=1e-5)
    assert abs(official + math.log(0.625)) > 0.1


def test_trace_term_by_hand():
    logits, cms, raters = one_pixel_case()
    out = confusion_loss(logits, cms, raters, torch.ones(1, 2, dtype=torch.bool), alpha=0.5)
    trace = (0.9 + 0.8) + (0.5 + 0.6)
    assert math.isclose(out["trace"].item(), trace, rel_tol=1e-6)
    assert math.isclose(out["loss"].item(), -math.log(0.625) - math.log(0.425) + 0.5 * trace, rel_tol=1e-5)
    # Mean over pixels: two pixels with traces 1.7 and 1.1 for one rater give 1.4.
    two = torch.stack([cms[:, 0, 0, 0], cms[:, 1, 0, 0]], dim=1).view(1, 1, 1, 2, 2, 2)
    out2 = confusion_loss(torch.zeros(1, 2, 1, 2), two, torch.zeros(1, 1, 1, 2, dtype=torch.long), torch.ones(1, 1, dtype=torch.bool), 1.0)
    assert math.isclose(out2["trace"].item(), 1.4, rel_tol=1e-6)


def test_missing_rater_contributes_nothing():
    logits, cms, raters = one_pixel_case()
    valid = torch.tensor([[True, False]])
    out = confusion_loss(logits, cms, raters, valid, alpha=0.5)
    assert math.isclose(out["loss"].item(), -math.log(0.625) + 0.5 * 1.7, rel_tol=1e-5)
    # Whole model: the missing rater's labels do not change the loss; its head gets no gradient.
    m = ConfusionMatrixUNet(ConfusionMatrixUNet.Config(alpha=0.4), SPEC).eval()
    torch.manual_seed(0)
    images = torch.randn(2, 1, 16, 16)
    raters = torch.randint(0, 2, (2, 3, 16, 16))
    valid = torch.tensor([[True, False, True], [True, False, True]])
    loss = m.loss({"images": images, "raters": raters, "rater_valid": valid}, ctx())["loss"]
    changed = raters.clone()
    changed[:, 1] = 1 - changed[:, 1]
    assert torch.equal(loss, m.loss({"images": images, "raters": changed, "rater_valid": valid}, ctx())["loss"])
    m.zero_grad()
    loss.backward()
    assert all(p.grad is None or p.grad.abs().max() == 0 for p in m.cms.heads[1].parameters())
    assert any(p.grad is not None and p.grad.abs().max() > 0 for p in m.cms.heads[0].parameters())


def test_global_variant_shape_and_initial_value():
    m = build_method("cm-unet-global", SPEC).eval()
    assert m.cfg.cm == "global"
    with torch.no_grad():
        cm = m.confusion_matrices(torch.zeros(2, 32, 5, 7))
    assert cm.shape == (2, 3, 5, 7, 2, 2)
    diag = F.softplus(torch.tensor(1.0)) / (F.softplus(torch.tensor(1.0)) + F.softplus(torch.tensor(0.0)))
    assert math.isclose(diag.item(), 0.6546, abs_tol=1e-4)
    assert torch.allclose(cm[..., 0, 0], diag) and torch.allclose(cm[..., 1, 1], diag)
    assert torch.allclose(cm[..., 1, 0], 1 - diag)
    assert sum(p.numel() for p in m.cms.parameters()) == 3 * 2 * 2  # one L×L matrix per rater


def test_prediction_uses_the_segmentation_head_only():
    m = ConfusionMatrixUNet(ConfusionMatrixUNet.Config(), SPEC).eval()
    images = torch.randn(2, 1, 16, 16)
    with torch.no_grad():
        before = m.predict_proba(images)
        for p in m.cms.parameters():
            p.add_(1.0)
        assert torch.equal(before, m.predict_proba(images))
        assert torch.allclose(before, torch.softmax(m.net(images), 1))


def test_multiclass_runs():
    spec = DataSpec(in_channels=3, n_classes=3, n_raters=2)
    m = ConfusionMatrixUNet(ConfusionMatrixUNet.Config(), spec)
    out = m.loss(
        {
            "images": torch.randn(2, 3, 16, 16),
            "raters": torch.randint(0, 3, (2, 2, 16, 16)),
            "rater_valid": torch.ones(2, 2, dtype=torch.bool),
        },
        ctx(),
    )
    out["loss"].backward()
    assert torch.isfinite(out["loss"]) and m.eval().predict_proba(torch.randn(1, 3, 16, 16)).shape == (1, 3, 16, 16)
