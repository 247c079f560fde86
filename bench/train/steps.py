"""How a stage's training step runs (docs/decisions.md#engines): `eager`, op by op, or `graphed`, captured once as a CUDA graph and replayed.

Both take the same step: gather the batch by index from the split on the device, flip it where the
schedule augments, the method's loss under autocast, backward, the optimiser's step. A graphed
step replays the kernels of one captured step, so the host launches one graph instead of a few
hundred kernels; its random draws come from the cell's own generator, registered with the graph,
so a replay advances it as the eager step would.

What a captured step cannot change between replays, and how the engine keeps it right:

- shapes: one graph per batch length (an epoch's short last batch gets its own);
- Python values the loss branches on (`StepContext.epoch`, `.step`): a method that reads them
  returns what it branches on from `Method.graph_key`, and each key gets its own graph;
- addresses: the batch index is copied into the graph's own buffer before each replay, and the
  weights, gradients and Adam's state stay where capture found them (restoring the best weights
  copies into them in place).

Capture needs warm-up steps on a side stream (cuDNN's autotuning and the allocator's first
allocations must not happen inside the graph). Warm-up would train, so the weights, buffers,
optimiser state and generator are put back exactly as they were before it.

`graphed` needs CUDA and Adam with `capturable=True` (its bias corrections computed on the device,
so a float rounding away from the eager step's: equal within the documented tolerance, not bit for
bit). `auto` (the default) picks an engine per card from what was measured on it (`MEASURED`,
docs/decisions.md#engines): `graphed` only on a card where it was measured both faster and equal.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch

from bench.train.budget import Schedule, make_optimiser
from bench.train.hardware import DeviceError, autocast, make_batch
from methods.base import Method, StepContext

ENGINES = ("eager", "graphed")
WARMUP_STEPS = 3  # side-stream steps before a capture (PyTorch's whole-network capture recipe uses 3)

#: What `scripts/gpu_check.sh` measured of `graphed` against `eager`, per card name (docs/decisions.md#engines):
#: faster = graphed's steps faster at every `bench perf` configuration and the default run shorter; equal = its cells
#: proven to train as eager's do (`test_graphed_cell_replays_the_eager_cell_on_cuda` passing on that card).
MEASURED = {
    # 2026-11-28: 1.13-2.87x per step, default run 34 s vs 56 s; the equality test failed as first written (it assumed a
    # bit-for-bit eager cell, which this card does not give: two eager default runs differ by up to 5.6 DSC points in a
    # method's mean) and its revision has not yet run on a card.
    "NVIDIA H200": {"faster": True, "equal": False},
}


def check_engine(engine: str, device: torch.device) -> None:
    if engine not in (*ENGINES, "auto"):
        raise DeviceError(f"--engine must be one of auto, {', '.join(ENGINES)}, not {engine!r}")
    if engine == "graphed" and device.type != "cuda":
        raise DeviceError("--engine graphed captures CUDA graphs and needs a CUDA GPU; use --engine eager on the CPU")


def pick_engine(engine: str, device: torch.device, card: str | None = None) -> str:
    """`eager` or `graphed` for `--engine ENGINE` on `device`: `auto` is `graphed` only on a CUDA card that `MEASURED`
    lists as both faster and equal, else `eager` (the CPU, an unmeasured card). `card`: the card's name (default: asked
    of CUDA)."""
    check_engine(engine, device)
    if engine != "auto":
        return engine
    if device.type != "cuda":
        return "eager"
    verdict = MEASURED.get(card if card is not None else torch.cuda.get_device_name(device), {})
    return "graphed" if verdict.get("faster") and verdict.get("equal") else "eager"


def flip(batch: dict[str, torch.Tensor], gen: torch.Generator) -> None:
    """Random flips, p = 0.5 per image and axis, of every per-pixel array of the batch (image, raters, prepared targets) alike."""
    images = batch["images"]
    size = images.shape[-2:]
    for dim in (-1, -2):
        chosen = torch.rand(images.shape[0], generator=gen, device=gen.device) < 0.5
        for key, value in batch.items():
            if value.ndim >= 3 and value.shape[-2:] == size:
                where = chosen.view(-1, *([1] * (value.ndim - 1))).to(value.device)
                batch[key] = torch.where(where, value.flip(dim), value)


def param_groups(method: Method) -> list[dict]:
    """The trainable parameters as optimiser groups: one per child with its own learning rate (`Method.learning_rates`), then
    the rest at the schedule's."""
    own = method.learning_rates()
    groups: dict[str, list] = {}
    for name, param in method.named_parameters():
        if param.requires_grad:
            child = name.split(".")[0]
            groups.setdefault(child if child in own else "", []).append(param)
    return [{"params": params, **({"lr": own[key]} if key else {})} for key, params in groups.items()]


class EagerStep:
    """One training step, launched op by op: `step(data, index, ctx) -> {part: tensor}` (detached parts; "loss" the scalar)."""

    def __init__(self, method: Method, sched: Schedule, device: torch.device, dtype: torch.dtype | None, capturable: bool = False):
        self.method, self.sched, self.device, self.dtype = method, sched, device, dtype
        self.autocast_cache = not capturable  # a captured step must not keep autocast's cast weights between replays
        self.optimiser = make_optimiser(sched, param_groups(method), capturable=capturable)

    def __call__(self, data: dict[str, torch.Tensor], index: torch.Tensor, ctx: StepContext) -> dict[str, torch.Tensor]:
        self.optimiser.zero_grad(set_to_none=True)
        return self.body(data, index, ctx)

    def body(self, data: dict[str, torch.Tensor], index: torch.Tensor, ctx: StepContext) -> dict[str, torch.Tensor]:
        """The step without clearing gradients first: what a graph captures (its gradients are reassigned, never accumulated)."""
        batch = make_batch(data, index, self.device)
        if self.sched.augment == "flip":
            flip(batch, ctx.generator)
        with autocast(self.device, self.dtype, self.autocast_cache):
            parts = self.method.loss(batch, ctx)
        parts["loss"].backward()
        self.optimiser.step()
        return {key: value.detach() for key, value in parts.items()}


class GraphedStep(EagerStep):
    """The same step captured once per (batch length, `Method.graph_key`) and replayed.

    `capture=False` runs every part but the capture itself (warm-up, restore, the static index
    buffer, one entry per key) and then calls the step eagerly: how the CPU tests check that the
    machinery around the graph leaves training exactly as the eager engine trains.
    """

    def __init__(self, method: Method, sched: Schedule, device: torch.device, dtype: torch.dtype | None, capture: bool = True):
        if capture and device.type != "cuda":
            raise DeviceError("a graphed step needs a CUDA GPU")
        super().__init__(method, sched, device, dtype, capturable=capture)
        self.capture = capture
        self.graphs: dict[tuple, tuple] = {}  # key -> (graph or None, index buffer, step context, output parts)

    def __call__(self, data: dict[str, torch.Tensor], index: torch.Tensor, ctx: StepContext) -> dict[str, torch.Tensor]:
        key = (len(index), self.method.graph_key(ctx))
        if key not in self.graphs:
            self.graphs[key] = self.record(data, index, ctx)
        graph, buffer, captured_ctx, parts = self.graphs[key]
        buffer.copy_(index.to(buffer.device), non_blocking=True)
        if graph is None:
            captured_ctx.epoch, captured_ctx.step = ctx.epoch, ctx.step
            return super().__call__(data, buffer, captured_ctx)
        graph.replay()
        return parts

    def record(self, data: dict[str, torch.Tensor], index: torch.Tensor, ctx: StepContext) -> tuple:
        """Warm up, restore, and capture the step for this key; returns (graph, index buffer, context, output parts)."""
        buffer = index.to(self.device).clone()
        captured_ctx = StepContext(ctx.stage, ctx.epoch, ctx.step, ctx.generator)
        saved = self.snapshot(ctx.generator)
        side = torch.cuda.Stream() if self.capture else None
        if side is not None:
            side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side) if side is not None else nullcontext():
            for _ in range(WARMUP_STEPS):
                super().__call__(data, buffer, captured_ctx)
        if side is not None:
            torch.cuda.current_stream().wait_stream(side)
        self.restore(saved, ctx.generator)
        if not self.capture:
            return None, buffer, captured_ctx, None
        graph = torch.cuda.CUDAGraph()
        graph.register_generator_state(ctx.generator)
        self.optimiser.zero_grad(set_to_none=True)  # gradients allocated inside the graph: each replay reassigns them
        with torch.cuda.graph(graph):
            parts = self.body(data, buffer, captured_ctx)
        return graph, buffer, captured_ctx, parts

    def snapshot(self, gen: torch.Generator) -> dict:
        """Copies of what a warm-up step changes: weights, buffers, the optimiser's state tensors, the generator."""
        tensors = [*self.method.parameters(), *self.method.buffers()]
        return {
            "tensors": [t.detach().clone() for t in tensors],
            "optimiser": {id(p): {k: v.clone() for k, v in s.items() if torch.is_tensor(v)} for p, s in self.optimiser.state.items()},
            "gen": gen.get_state(),
        }

    def restore(self, saved: dict, gen: torch.Generator) -> None:
        """Puts the snapshot back in place (capture records addresses, so no tensor is replaced)."""
        with torch.no_grad():
            for t, value in zip([*self.method.parameters(), *self.method.buffers()], saved["tensors"]):
                t.copy_(value)
            for p, state in self.optimiser.state.items():
                before = saved["optimiser"].get(id(p), {})
                for k, v in state.items():
                    if torch.is_tensor(v):
                        # state the warm-up created starts from Adam's lazy zeros: the values a fresh optimiser has
                        v.copy_(before[k]) if k in before else v.zero_()
        self.optimiser.zero_grad(set_to_none=True)
        gen.set_state(saved["gen"])


def make_step(engine: str, method: Method, sched: Schedule, device: torch.device, dtype: torch.dtype | None) -> EagerStep:
    """The step object of `engine` ("eager" or "graphed")."""
    check_engine(engine, device)
    return GraphedStep(method, sched, device, dtype) if engine == "graphed" else EagerStep(method, sched, device, dtype)
