"""The training-step engines (bench/train/steps.py): what the CPU can prove of the graphed engine.

The CUDA capture itself needs a GPU (its test is skipped here). Everything around it is checked on the
CPU: the warm-up before a capture leaves no trace, one captured step per batch length and
`Method.graph_key`, the index copied into the graph's own buffer; every registered method's loss
tells the engine, through `graph_key`, about every branch it takes on the epoch or step; and no
method's step reads a tensor's values on the host (checked with fake tensors, which have none).
"""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
import torch
from test_step_inputs import toy_split
from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException, FakeTensorMode

import methods
from bench.cli import main as cli_main
from bench.train import harness, steps
from bench.train.budget import Schedule
from bench.train.hardware import DeviceError
from methods import DataSpec, build_method
from methods.base import Method, StepContext


def test_graphed_engine_is_refused_on_the_cpu_in_one_line(capsys):
    with pytest.raises(DeviceError, match="needs a CUDA GPU"):
        steps.check_engine("graphed", torch.device("cpu"))
    with pytest.raises(DeviceError, match="--engine must be one of auto, eager, graphed"):
        steps.check_engine("compiled", torch.device("cpu"))
    code = cli_main(["run", "--methods", "mv-unet", "--device", "cpu", "--engine", "graphed", "--results", "/nonexistent-not-created"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and "--engine graphed" in err[0]


def test_auto_picks_graphed_only_on_a_card_measured_faster_and_equal(monkeypatch):
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert steps.pick_engine("auto", cpu) == "eager"
    assert steps.pick_engine("auto", cuda, card="an unmeasured card") == "eager"
    monkeypatch.setattr(
        steps,
        "MEASURED",
        {"fast": {"faster": True, "equal": False}, "both": {"faster": True, "equal": True}, "slow": {"faster": False, "equal": True}},
    )
    assert [steps.pick_engine("auto", cuda, card=c) for c in ("fast", "both", "slow")] == ["eager", "graphed", "eager"]
    assert steps.pick_engine("eager", cuda, card="both") == "eager" and steps.pick_engine("graphed", cuda, card="fast") == "graphed"
    with pytest.raises(DeviceError, match="needs a CUDA GPU"):
        steps.pick_engine("graphed", cpu)


def train(monkeypatch, log, engine_step, calls: list | None = None):
    """LF-Net with L_rcl in its first epoch only, flips, 21 images in batches of 8 (a short last batch): the weights and the
    training log without its clock."""
    images, raters, valid = toy_split(n=21)
    torch.manual_seed(0)
    method = build_method("lf-net", DataSpec(1, 2, 3), {"rcl_epochs": 1})
    sched = Schedule("adam", 1e-3, 8, 9, False, 3, augment="flip", source="test")
    monkeypatch.setattr(harness, "make_step", lambda engine, *a: engine_step(*a))
    if calls is not None:
        body = steps.EagerStep.body
        monkeypatch.setattr(steps.EagerStep, "body", lambda self, *a: calls.append(len(a[1])) or body(self, *a))
    records = harness.fit(
        method,
        harness.Split(images, raters, valid),
        {s.name: sched for s in method.stages},
        harness.Runtime(0, torch.device("cpu"), "fp32"),
        out=harness.Output(log_path=log, progress=False),
    ).stages
    assert [r["reason"] for r in records.values()] == ["fixed: test"] * 2
    return method.state_dict(), pd.read_csv(log).drop(columns="seconds")


def test_the_graph_machinery_trains_exactly_as_the_eager_step(monkeypatch, tmp_path):
    eager_weights, eager_log = train(monkeypatch, tmp_path / "eager.csv", steps.EagerStep)
    made = []

    def graphed(*a):
        made.append(steps.GraphedStep(*a, capture=False))
        return made[-1]

    calls = []
    weights, log = train(monkeypatch, tmp_path / "graphed.csv", graphed, calls)
    pd.testing.assert_frame_equal(log, eager_log)
    assert len(log) == 2 * (3 + 1)  # every 3 steps a row, and a stop row, per stage
    assert eager_weights.keys() == weights.keys()
    for key, value in eager_weights.items():
        assert torch.equal(value, weights[key]), key
    # Soft-label stage: batch lengths 8 and 5; segmentation: the same with L_rcl on (epoch 0) and off (epochs 1-2).
    assert [sorted(step.graphs) for step in made] == [[(5, ()), (8, ())], [(5, (False,)), (5, (True,)), (8, (False,)), (8, (True,))]]
    warmups = (2 + 4) * steps.WARMUP_STEPS  # one warm-up per key: not one of them left a trace in the weights
    assert len(calls) == 2 * 9 + warmups


def whole_batch(method: Method, images, raters, valid) -> dict[str, torch.Tensor]:
    """A training batch of every image of a toy split, with the method's prepared targets."""
    prepared = {k: torch.from_numpy(v) for k, v in method.prepare(raters, valid).items()}
    return {
        "images": torch.from_numpy(images),
        "raters": torch.from_numpy(raters).long(),
        "rater_valid": torch.from_numpy(valid),
        "index": torch.arange(len(images)),
        **prepared,
    }


def hidden_branches(method: Method, batch: dict[str, torch.Tensor]) -> list[str]:
    """The stages whose loss changes between two contexts that differ only in epoch and step while `graph_key` does not."""
    hidden = []
    for stage in method.stages:
        early, late = (StepContext(stage.name, e, s, torch.Generator().manual_seed(1)) for e, s in ((0, 0), (10**6, 10**9)))
        same_loss = torch.equal(method.loss(dict(batch), early)["loss"], method.loss(dict(batch), late)["loss"])
        if not same_loss and method.graph_key(early) == method.graph_key(late):
            hidden.append(stage.name)
    return hidden


def test_every_method_names_the_epoch_and_step_branches_of_its_loss_in_graph_key():
    images, raters, valid = toy_split(n=4)
    found = {}
    for name in [*methods.method_names(), "lf-net@rcl_epochs=1"]:
        ref = methods.MethodRef.parse(name)
        base, params = ref.name, ref.kwargs
        torch.manual_seed(0)
        method = build_method(base, DataSpec(1, 2, 3), params)
        found[name] = hidden_branches(method, whole_batch(method, images, raters, valid))
    assert {name: stages for name, stages in found.items() if stages} == {}
    # LF-Net with L_rcl in its first epoch only does branch on the epoch, and says so:
    method = build_method("lf-net", DataSpec(1, 2, 3), {"rcl_epochs": 1})
    ctx = [StepContext("segmentation", e, 0, torch.Generator()) for e in (0, 1)]
    assert method.graph_key(ctx[0]) != method.graph_key(ctx[1])


@dataclasses.dataclass(frozen=True)
class WarmupConfig:
    pass


class Warmup(Method):
    """A loss that doubles in its first 100 steps and does not say so in `graph_key`."""

    Config = WarmupConfig

    def __init__(self, cfg, spec):
        super().__init__(cfg, spec)
        self.w = torch.nn.Parameter(torch.ones(()))

    def loss(self, batch, ctx):
        return {"loss": self.w * (2.0 if ctx.step < 100 else 1.0)}


def test_the_graph_key_check_catches_a_loss_that_hides_its_branch():
    assert hidden_branches(Warmup(WarmupConfig(), DataSpec(1, 2, 3)), {}) == ["train"]


def host_reads(method: Method, batch: dict[str, torch.Tensor], augment: bool = True) -> list[str]:
    """The stages whose training step (batch flips, loss, backward) reads a tensor's values on the host.

    Under FakeTensorMode tensors have shapes but no values, so `.item()`, `bool(t)`, boolean-mask
    indexing, `nonzero` or `unique` raise: exactly the operations that synchronise a CUDA step with
    the host and that a CUDA graph cannot capture.
    """
    found = []
    for stage in method.stages:
        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            fake = {key: mode.from_tensor(value) for key, value in batch.items()}
            ctx = StepContext(stage.name, 0, 0, torch.Generator().manual_seed(0))
            try:
                if augment:
                    steps.flip(fake, ctx.generator)
                method.loss(fake, ctx)["loss"].backward()
            except (DataDependentOutputException, DynamicOutputShapeException):
                found.append(stage.name)
        method.zero_grad(set_to_none=True)
    return found


def test_no_training_step_reads_a_tensor_on_the_host():
    """The CPU's stand-in for the CUDA test below, for every registered method: a step a CUDA graph can capture."""
    images, raters, valid = toy_split(n=4)
    found = {}
    for name in methods.method_names():
        torch.manual_seed(0)
        method = build_method(name, DataSpec(1, 2, 3))
        found[name] = host_reads(method, whole_batch(method, images, raters, valid))
    assert {name: stages for name, stages in found.items() if stages} == {}


class ReadsTheLoss(Warmup):
    """A loss that asks the host whether it is large."""

    def loss(self, batch, ctx):
        loss = self.w * batch["images"].mean()
        return {"loss": loss * 2 if loss.item() > 0 else loss}


def test_the_host_read_check_catches_an_item_call():
    batch = {"images": torch.ones(2, 1, 4, 4)}
    assert host_reads(ReadsTheLoss(WarmupConfig(), DataSpec(1, 2, 3)), batch) == ["train"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: the graphed engine captures CUDA graphs")
def test_graphed_cell_replays_the_eager_cell_on_cuda(monkeypatch):
    """fp32 without TF32, deterministic cuDNN and PyTorch's deterministic algorithms where it has them. A replay runs the
    kernels the eager step launches, so the graphed cell may differ from an eager cell with the same capturable Adam
    only as much as two such eager cells differ from each other: not at all where the card trains deterministically,
    else by the run-to-run noise of its kernels (which training amplifies: on an H200, 2026-11-28, two eager cells with
    different Adam roundings ended 1e-3 apart in their first convolution). The gaps are printed (-rP)."""
    images, raters, valid = toy_split(n=64, size=32)
    flags = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.deterministic
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        graphed = train_on_cuda(images, raters, valid, "graphed")
        eager = train_on_cuda(images, raters, valid, "eager")
        monkeypatch.setattr(harness, "make_step", lambda engine, *a: steps.EagerStep(*a, capturable=True))
        capturable = [train_on_cuda(images, raters, valid, "eager") for _ in range(2)]
    finally:
        torch.use_deterministic_algorithms(False)
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.deterministic = flags

    def gap(a: tuple, b: tuple) -> float:
        return max((a[1][k] - b[1][k]).abs().max().item() for k in a[1])

    noise, graphed_gap = gap(capturable[1], capturable[0]), gap(graphed, capturable[0])
    print(
        f"largest weight difference: two eager cells (capturable Adam) {noise:.3g}; graphed vs eager {graphed_gap:.3g}; "
        f"eager with the default Adam vs capturable {gap(eager, capturable[0]):.3g}"
    )
    assert [r["step"] for r in graphed[0].values()] == [r["step"] for r in capturable[0][0].values()]
    assert graphed_gap <= max(4 * noise, 1e-6)


def train_on_cuda(images, raters, valid, engine: str) -> tuple[dict, dict]:
    """LF-Net (L_rcl in its first two epochs) on CUDA in fp32: (stop records, weights on the CPU)."""
    torch.manual_seed(0)
    method = build_method("lf-net", DataSpec(1, 2, 3), {"rcl_epochs": 2})
    records = harness.fit(
        method,
        harness.Split(images, raters, valid),
        harness.fixed_schedules(method, 20, 16),
        harness.Runtime(0, torch.device("cuda"), "fp32", engine),
        out=harness.Output(progress=False),
    ).stages
    return records, {k: v.float().cpu() for k, v in method.state_dict().items()}
