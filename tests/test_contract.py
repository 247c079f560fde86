"""Contract test over every registered method (docs/methods.md#how-each-method-is-tested): a new method is checked without new test code."""

import numpy as np
import pytest
import torch

import methods
from bench import study
from bench.run import resolve
from bench.train import hardware, harness, inference
from bench.train.budget import BUDGETS
from datasets import get_dataset, oracle_view
from methods.base import StepContext

CPU = torch.device("cpu")
PAPER = study.default()
NAMES = [*methods.method_names(), PAPER.oracle]


def build(name, data, seed=0):
    """The method as a sweep builds it for a cell (registry defaults; ms-lesion has no paper overrides)."""
    if name == PAPER.oracle:
        data = oracle_view(data)
    return resolve.cell_method(methods.MethodRef.parse(name), seed, get_dataset("ms-lesion"), data, BUDGETS["quick"], PAPER), data


def first_batch(method, data, n=4):
    arrays = {"images": data.images, "raters": data.raters, "rater_valid": data.rater_valid}
    arrays.update(method.prepare(data.raters, data.rater_valid))
    return hardware.make_batch(hardware.to_tensors(arrays, CPU), torch.arange(n), CPU)


@pytest.mark.parametrize("name", NAMES)
def test_loss_is_finite_and_differentiable_in_every_stage(name, tiny_data):
    method, data = build(name, tiny_data)
    method.to(memory_format=torch.channels_last)
    batch = first_batch(method, data)
    for stage in method.stages:
        trained = set(stage.modules) or {n for n, _ in method.named_children()}
        for child_name, child in method.named_children():
            child.train(child_name in trained)
            child.requires_grad_(child_name in trained)
        method.zero_grad()
        parts = method.loss(batch, StepContext(stage.name, 0, 0, torch.Generator().manual_seed(0)))
        assert parts["loss"].ndim == 0 and torch.isfinite(parts["loss"]), stage.name
        parts["loss"].backward()
        grads = [p.grad for p in method.parameters() if p.requires_grad]
        assert grads and any(g is not None and g.abs().sum() > 0 for g in grads), f"{stage.name}: no gradient reaches the trained modules"


@pytest.mark.parametrize("name", NAMES)
def test_prediction_shape_range_and_seeded_reproducibility(name, tiny_data):
    probs = []
    for _ in range(2):
        method, data = build(name, tiny_data)
        harness.fit(
            method,
            harness.Split(data.images, data.raters, data.rater_valid),
            harness.fixed_schedules(method, 2, 4),
            harness.Runtime(3, CPU),
            out=harness.Output(progress=False),
        )
        probs.append(inference.predict_proba(method, data.images, device=CPU))
    p = probs[0]
    assert p.shape == (data.n, data.n_classes, 16, 16) and p.dtype == np.float32
    assert np.isfinite(p).all() and (p >= 0).all() and (p <= 1).all()
    np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(probs[0], probs[1])  # same seed, same CPU -> bit-identical


def test_registry_rejects_unknown_and_duplicate_names():
    with pytest.raises(methods.UnknownMethodError, match="known: mv-unet"):
        methods.get_entry("no-such-method")
    with pytest.raises(ValueError, match="registered twice"):
        methods.register_variant("mv-unet", "mv-unet", "again")
    with pytest.raises(ValueError, match="has no field"):
        methods.register_variant("mv-unet-x", "mv-unet", "bad", no_such_field=1)


def test_datasets_package_is_this_repo_not_hugging_face():
    import datasets

    assert harness.__file__.rsplit("/bench/", 1)[0] == datasets.__file__.rsplit("/datasets/", 1)[0]


@pytest.mark.parametrize("name", NAMES)
def test_validation_pass_gives_the_loss_and_the_consensus(name, tiny_data):
    """`Method.validation` is `loss` in eval mode, bit for bit, and its consensus (where it gives one) is `predict_proba`'s:
    the harness logs that consensus's GT diagnostic instead of reading it in a second pass."""
    method, data = build(name, tiny_data)
    method.to(memory_format=torch.channels_last).eval()
    batch = first_batch(method, data)
    with torch.inference_mode():
        for stage in method.stages:
            expected = method.loss(batch, StepContext(stage.name, 0, 0, torch.Generator().manual_seed(0)))
            parts, probs = method.validation(batch, StepContext(stage.name, 0, 0, torch.Generator().manual_seed(0)))
            assert parts.keys() == expected.keys(), stage.name
            for key in parts:
                torch.testing.assert_close(parts[key], expected[key], rtol=0, atol=0, msg=f"{stage.name}: {key}")
            if probs is not None:
                ids = inference.readout_ids(0, "consensus", len(batch["images"]))
                consensus = method.predict_proba(batch["images"], ids) if method.consensus_draws else method.predict_proba(batch["images"])
                torch.testing.assert_close(probs, consensus, rtol=0, atol=1e-6, msg=stage.name)


@pytest.mark.parametrize("name", NAMES)
def test_a_method_says_without_data_whether_it_fuses_labels_of_its_own(name, tiny_data):
    """`Method.has_own_fused_labels` (what the reproduction page asks before drawing the fused-label figure) is true exactly
    where `own_fused_labels` returns labels."""
    method, data = build(name, tiny_data)
    batch = first_batch(method.eval(), data, n=2)
    with torch.inference_mode():
        own = method.own_fused_labels(batch["images"], batch["raters"].long(), batch["rater_valid"])
    assert bool(own) == method.has_own_fused_labels()
