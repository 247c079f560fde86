"""Tests for methods/mr_net.py: condition sampling and targets, the EIM's ConvLSTM step, the MPM's
maps and holistic attention, the shared-U-Net split, both backbones, and a harness smoke run."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
import torch

import methods.mr_net as mr
import methods.mr_net_blocks as blocks
from bench.train import harness, inference
from methods.base import DataSpec, StepContext
from methods.registry import build_method, get_entry
from methods.unet import UNet

CPU = torch.device("cpu")


def _raters() -> torch.Tensor:
    """(B=2, R=3, 2, 2) hand-made binary rater masks."""
    return torch.tensor(
        [
            [[[1, 0], [0, 0]], [[1, 1], [0, 0]], [[1, 1], [1, 0]]],
            [[[0, 0], [0, 1]], [[0, 0], [1, 1]], [[0, 1], [1, 1]]],
        ]
    )


# ----------------------------------------------------------------------------- conditions and targets


def test_one_hot_condition_target_is_that_raters_mask():
    raters = _raters()
    cond = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    target = mr.condition_target(raters, cond, 2)
    assert torch.equal(target[:, 1], raters[torch.arange(2), torch.tensor([1, 2])].float())
    assert torch.equal(target[:, 0], 1 - target[:, 1])


def test_uniform_condition_target_is_rater_mean():
    raters = _raters()
    target = mr.condition_target(raters, torch.full((2, 3), 1 / 3), 2)
    expected = torch.tensor([[[3, 2], [1, 0]], [[0, 1], [2, 3]]]) / 3
    torch.testing.assert_close(target[:, 1], expected)
    torch.testing.assert_close(target.sum(1), torch.ones(2, 2, 2))


def test_random_condition_target_is_weighted_sum():
    raters = _raters()
    cond = torch.tensor([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]])
    target = mr.condition_target(raters, cond, 3)  # a third class nobody uses stays 0
    expected = torch.tensor([[[1.0, 0.5], [0.2, 0.0]], [[0.0, 0.8], [0.9, 1.0]]])
    torch.testing.assert_close(target[:, 1], expected)
    assert torch.all(target[:, 2] == 0)
    torch.testing.assert_close(target.sum(1), torch.ones(2, 2, 2))


def _integer_weights(row: torch.Tensor) -> bool:
    """True when the nonzero weights are integers 1–10 divided by their sum."""
    w = row[row > 0]
    for total in range(len(w), 10 * len(w) + 1):
        scaled = w * total
        if torch.all((scaled - scaled.round()).abs() < 1e-4) and scaled.round().max() <= 10 and int(scaled.round().sum()) == total:
            return True
    return False


def test_sample_conditions_kinds_and_missing_raters():
    valid = torch.tensor([[True, True, True, True], [True, False, True, False], [False, False, True, False]])
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):
        c = mr.sample_conditions(valid, gen)
        assert c.shape == (3, 3, 4)
        torch.testing.assert_close(c.sum(2), torch.ones(3, 3))
        assert torch.all(c[:, ~valid] == 0)  # a missing rater has weight 0 in every condition
        one_hot, random, uniform = c
        assert torch.all((one_hot == 0) | (one_hot == 1))
        assert torch.all(random[valid] > 0) and all(_integer_weights(row) for row in random)
        torch.testing.assert_close(uniform, torch.tensor([[0.25] * 4, [0.5, 0, 0.5, 0], [0, 0, 1.0, 0]]))
    # the one-hot condition picks every valid rater over many draws
    picks = torch.stack([mr.sample_conditions(torch.ones(8, 3, dtype=torch.bool), gen)[0].argmax(1) for _ in range(10)])
    assert set(picks.flatten().tolist()) == {0, 1, 2}


def test_sample_conditions_is_reproducible_from_the_generator():
    valid = torch.ones(4, 3, dtype=torch.bool)
    a = mr.sample_conditions(valid, torch.Generator().manual_seed(3))
    b = mr.sample_conditions(valid, torch.Generator().manual_seed(3))
    assert torch.equal(a, b)


# ----------------------------------------------------------------------------- EIM


def test_convlstm_step_by_hand():
    torch.manual_seed(0)
    cell = blocks.ConvLSTMCell(2)
    x, h, c = torch.randn(3, 1, 2, 4, 4).unbind(0)
    new_h, new_c = cell(x, h, c)
    assert new_h.shape == new_c.shape == (1, 2, 4, 4)
    i, f, o, g = cell.gates(torch.cat([x, h], 1)).chunk(4, 1)
    expected_c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    torch.testing.assert_close(new_c, expected_c)
    torch.testing.assert_close(new_h, torch.sigmoid(o) * torch.tanh(expected_c))


@pytest.mark.parametrize("size", [1, 3])
def test_bottleneck_conv_is_the_3x3_convolution(size):
    # on a 1×1 map the centre tap alone, as a matrix product: the same output and gradients as the convolution
    torch.manual_seed(0)
    fast = blocks.BottleneckConv(4, 6)
    conv = torch.nn.Conv2d(4, 6, 3, padding=1)
    conv.load_state_dict(fast.state_dict())
    x = torch.randn(2, 4, size, size, requires_grad=True)
    outputs, grads = [], []
    for module in (fast, conv):
        y = module(x)
        (y * torch.arange(y.numel()).reshape(y.shape)).sum().backward()
        outputs.append(y)
        grads.append([t.grad.clone() for t in (x, module.weight, module.bias)])
        x.grad = None
    torch.testing.assert_close(outputs[0], outputs[1])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b)
    if size == 1:
        assert grads[0][1][:, :, 0].abs().sum() == 0  # the taps that see only padding get no gradient


def test_eim_shape_and_condition_changes_output():
    torch.manual_seed(0)
    eim = blocks.ExpertiseInferring(n_raters=3, channels=8)
    x = torch.randn(2, 8, 3, 3)
    a = eim(x, torch.tensor([[1.0, 0, 0], [1.0, 0, 0]]))
    b = eim(x, torch.tensor([[0.0, 0, 1], [1.0, 0, 0]]))
    assert a.shape == (2, 8, 3, 3)
    assert not torch.allclose(a[0], b[0])  # another condition, another output
    torch.testing.assert_close(a[1], b[1])  # same condition, same output


# ----------------------------------------------------------------------------- MPM


def test_holistic_attention_by_hand():
    # 1×4 map, 3×3 box kernel: blurred = [.5, .5, .2, .2]/9 → min-max [1, 1, 0, 0] → max with map [1, 1, 0, .2]
    maps = torch.tensor([[[[0.5, 0.0, 0.0, 0.2]]]])
    features = torch.tensor([[[[2.0, 3.0, 4.0, 5.0]], [[1.0, 1.0, 1.0, 1.0]]]])  # C = 2
    out = blocks.holistic_attention(maps, features, torch.full((3, 3), 1 / 9))
    weight = torch.tensor([1.0, 1.0, 0.0, 0.2])
    expected = features * weight + features
    torch.testing.assert_close(out, expected)


def test_holistic_attention_stacks_one_copy_per_map():
    maps = torch.rand(2, 3, 5, 5)
    features = torch.randn(2, 4, 5, 5)
    kernel = blocks.gaussian_kernel(31, 4.0)
    out = blocks.holistic_attention(maps, features, kernel)
    assert out.shape == (2, 12, 5, 5)
    torch.testing.assert_close(out[:, 4:8], blocks.holistic_attention(maps[:, 1:2], features, kernel))


def test_gaussian_kernel_matches_official_recipe():
    from scipy import stats

    k = blocks.gaussian_kernel(31, 4.0)
    interval = 9 / 31
    k1 = np.diff(stats.norm.cdf(np.linspace(-4 - interval / 2, 4 + interval / 2, 32)))
    ref = np.sqrt(np.outer(k1, k1))
    np.testing.assert_allclose(k.numpy(), ref / ref.sum(), rtol=1e-5)
    assert k.shape == (31, 31) and k.argmax() == 15 * 31 + 15


def test_perception_maps_by_hand():
    # three raters with foreground probabilities 0, 1, 1 (very confident logits): unbiased std = sqrt(1/3)
    fg = torch.tensor([-30.0, 30.0, 30.0])
    rater_logits = torch.stack([torch.zeros(3), fg], 1)[None, :, :, None, None]  # (1, R=3, L=2, 1, 1)
    coarse = torch.tensor([0.0, np.log(3.0)])[None, :, None, None]  # softmax → fg 0.75
    maps = blocks.perception_maps(rater_logits, coarse)
    assert maps.shape == (1, 2, 1, 1)
    torch.testing.assert_close(maps.flatten(), torch.tensor([0.75, (1 / 3) ** 0.5]))


# ----------------------------------------------------------------------------- backbones and method


def test_shared_unet_split_equals_unet_features():
    torch.manual_seed(0)
    backbone = blocks.SharedUNetBackbone(1, 2).eval()
    x = torch.randn(2, 1, 28, 28)
    bottleneck, skips = backbone.encode(x)
    torch.testing.assert_close(backbone.decode(bottleneck, skips), UNet.features(backbone.net, x))


@pytest.mark.parametrize("size", [64, 28])
def test_resnet34_backbone_forward(size):
    spec = DataSpec(in_channels=3, n_classes=2, n_raters=4)
    m = build_method("mr-net", spec, {"backbone": "resnet34"}).eval()
    n_blocks = [len(layer) for layer in m.coarse.backbone.layers]
    assert n_blocks == [3, 4, 6, 3]
    with torch.no_grad():
        probs = m.predict_proba(torch.randn(1, 3, size, size))
    assert probs.shape == (1, 2, size, size)
    torch.testing.assert_close(probs.sum(1), torch.ones(1, size, size))
    assert any("ResNet-34" in d for d in m.deviations())


def test_loss_parts_and_conditions_reach_the_right_modules():
    spec = DataSpec(in_channels=1, n_classes=3, n_raters=3)
    torch.manual_seed(0)
    m = build_method("mr-net", spec)
    batch = {
        "images": torch.randn(2, 1, 16, 16),
        "raters": torch.randint(0, 3, (2, 3, 16, 16)),
        "rater_valid": torch.tensor([[True, True, False], [True, True, True]]),
    }
    parts = m.loss(batch, StepContext("train", 0, 0, torch.Generator().manual_seed(0)))
    assert set(parts) == {"loss", "coarse", "mrm", "mpm"}
    torch.testing.assert_close(parts["loss"].detach(), parts["coarse"] + parts["mrm"] + parts["mpm"])
    # each module's loss trains only that module (the official code's detachments), so one Adam on the sum
    # takes the same steps as the official three optimisers
    condition = mr.sample_conditions(batch["rater_valid"], torch.Generator().manual_seed(0))[1]
    for k, name in enumerate(("coarse", "mrm", "mpm")):
        m.zero_grad(set_to_none=True)
        outputs = m.forward_condition(batch["images"], m.coarse.encode(batch["images"]), condition)
        outputs[k].float().square().mean().backward()
        for child_name, child in m.named_children():
            has_grad = any(p.grad is not None and p.grad.abs().sum() > 0 for p in child.parameters())
            assert has_grad == (child_name == name), (name, child_name)
    assert outputs[1].shape == (2, 3, 3, 16, 16) and outputs[2].shape == (2, 3, 16, 16)


def test_batch_norm_running_stats_come_from_the_uniform_condition_only():
    spec = DataSpec(in_channels=1, n_classes=2, n_raters=3)
    torch.manual_seed(0)
    m = build_method("mr-net", spec).train()
    ref = copy.deepcopy(m)
    batch = {
        "images": torch.randn(4, 1, 16, 16),
        "raters": torch.randint(0, 2, (4, 3, 16, 16)),
        "rater_valid": torch.ones(4, 3, dtype=torch.bool),
    }
    m.loss(batch, StepContext("train", 0, 0, torch.Generator().manual_seed(0)))
    uniform = mr.sample_conditions(batch["rater_valid"], torch.Generator().manual_seed(0))[2]
    with torch.no_grad():
        ref.forward_condition(batch["images"], ref.coarse.encode(batch["images"]), uniform)  # one uniform pass
    buffers = dict(ref.named_buffers())
    for name, value in m.named_buffers():
        if "running" in name:
            torch.testing.assert_close(value, buffers[name], msg=name)
    momenta = {mod.momentum for mod in m.modules() if isinstance(mod, torch.nn.BatchNorm2d)}
    assert momenta == {0.1}  # restored after the m and p passes


def test_missing_rater_is_left_out_of_the_mrm_loss():
    spec = DataSpec(in_channels=1, n_classes=2, n_raters=3)
    torch.manual_seed(0)
    m = build_method("mr-net", spec)
    images = torch.randn(2, 1, 16, 16)
    raters = torch.randint(0, 2, (2, 3, 16, 16))
    valid = torch.tensor([[True, False, True], [True, True, True]])
    other = raters.clone()
    other[0, 1] = 1 - other[0, 1]  # change only the missing rater's mask
    losses = [
        m.loss({"images": images, "raters": r, "rater_valid": valid}, StepContext("train", 0, 0, torch.Generator().manual_seed(1)))
        for r in (raters, other)
    ]
    for key in ("loss", "coarse", "mrm", "mpm"):
        torch.testing.assert_close(losses[0][key], losses[1][key])


def test_registered_and_fit_smoke(tmp_path):
    entry = get_entry("mr-net")
    assert entry.group == "main" and entry.cls.needs_consistent_raters
    spec = DataSpec(in_channels=1, n_classes=2, n_raters=3)
    m = build_method("mr-net", spec)
    assert [s.modules for s in m.stages] == [("coarse", "mrm", "mpm")]
    rng = np.random.default_rng(0)
    images = rng.standard_normal((8, 1, 16, 16)).astype(np.float32)
    raters = (rng.random((8, 3, 16, 16)) > 0.5).astype(np.uint8)
    valid = np.ones((8, 3), dtype=bool)
    valid[0, 2] = False
    log = tmp_path / "train_log.csv"
    split = harness.Split(images, raters, valid)
    records = harness.fit(
        m, split, harness.fixed_schedules(m, 2, 4), harness.Runtime(0, CPU), val=split, out=harness.Output(log_path=log, progress=False)
    ).stages
    assert np.isfinite(records["train"]["best_val_loss"])
    row = pd.read_csv(log).iloc[0]
    assert np.isfinite(row["train_loss"]) and {"val_coarse", "val_mrm", "val_mpm"} <= set(row.index)
    probs = inference.predict_proba(m, images, device=CPU)
    assert probs.shape == (8, 2, 16, 16) and np.isfinite(probs).all()
    assert probs.min() >= 0 and probs.max() <= 1
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-5)
