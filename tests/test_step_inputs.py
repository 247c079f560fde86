"""A training step's inputs are prepared once, not at every step: vote targets once per split, the batch order once per epoch.

On CUDA the step must also run without a host synchronisation (`torch.cuda.set_sync_debug_mode("error")`); that test
is skipped where no GPU is present.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

import labels.fusion as fusion
from bench.train import hardware, harness
from methods import DataSpec, build_method


def toy_split(n: int = 24, size: int = 16, n_raters: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    gt = np.zeros((n, size, size), np.uint8)
    gt[:, 4:12, 4:12] = 1
    raters = np.stack([np.roll(gt, k - 1, axis=2) for k in range(n_raters)], axis=1).astype(np.uint8)
    images = (gt[:, None] + rng.normal(0, 0.3, (n, 1, size, size))).astype(np.float32)
    return images, raters, np.ones((n, n_raters), bool)


@pytest.mark.parametrize("name", ["qmv-unet", "lf-net"])
def test_vote_targets_are_counted_once_per_split_not_per_step(name, monkeypatch):
    images, raters, valid = toy_split()
    method = build_method(name, DataSpec(1, 2, 3))
    calls = []  # the images of each vote count: a split's (`vote_targets`, in prepare) or a batch's (`vote_counts`, in a step)
    module = sys.modules[type(method).__module__]
    prepared, counted = module.vote_targets, fusion.vote_counts
    monkeypatch.setattr(module, "vote_targets", lambda *a: calls.append(len(a[0])) or prepared(*a))
    monkeypatch.setattr(fusion, "vote_counts", lambda *a: calls.append(a[0].shape[0]) or counted(*a))
    steps = 9  # three epochs of 8-image batches
    harness.fit(
        method,
        harness.Split(images, raters, valid),
        harness.fixed_schedules(method, steps, 8),
        harness.Runtime(0, torch.device("cpu"), "fp32"),
        val=harness.Split(images[:8], raters[:8], valid[:8]),
    )
    assert calls == [24, 8]  # the training split once, the validation split once; no step counts votes


def test_the_batch_order_is_drawn_once_per_epoch(monkeypatch):
    images, raters, valid = toy_split()
    method = build_method("mv-unet", DataSpec(1, 2, 3))
    drawn = []
    permute = torch.randperm
    monkeypatch.setattr(torch, "randperm", lambda n, **k: drawn.append(n) or permute(n, **k))
    harness.fit(
        method, harness.Split(images, raters, valid), harness.fixed_schedules(method, 9, 8), harness.Runtime(0, torch.device("cpu"), "fp32")
    )
    assert drawn == [24, 24, 24]  # 9 steps of 8 from 24 images: three epochs


def test_prepared_and_counted_votes_agree():
    _, raters, valid = toy_split(n=5, n_raters=4)
    valid[0, 1] = False
    prepared = fusion.vote_targets(raters, valid, 2, beta=3, chunk=2)
    r, v = torch.from_numpy(raters).long(), torch.from_numpy(valid)
    assert np.array_equal(prepared["mv"], fusion.majority_vote(r, v, 2).numpy())
    assert np.array_equal(prepared["tv"], fusion.threshold_vote_mask(r, v, 2, 3).numpy())
    mv, tv = fusion.batch_votes({"raters": r, "rater_valid": v}, 2, 3)
    assert torch.equal(mv, torch.from_numpy(prepared["mv"]).long()) and torch.equal(tv, torch.from_numpy(prepared["tv"]))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: the step's host synchronisations are a CUDA matter")
def test_training_steps_do_not_synchronise_with_the_host():
    images, raters, valid = toy_split(n=64)
    method = build_method("lf-net", DataSpec(1, 2, 3))
    device = torch.device("cuda")
    method.to(device=device, memory_format=torch.channels_last)
    data = hardware.to_tensors({"images": images, "raters": raters, "rater_valid": valid, **method.prepare(raters, valid)}, device)
    schedules = harness.fixed_schedules(method, 100, 16)
    run = harness.StageRun(
        method, 0, method.stages[0], schedules[method.stages[0].name], len(images), harness.Runtime(0, device), torch.bfloat16, None
    )
    run.train_step(data)  # first step: allocations, cuDNN autotuning
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(5):
            run.train_step(data)
    finally:
        torch.cuda.set_sync_debug_mode("default")
