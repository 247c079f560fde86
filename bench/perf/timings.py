"""`python -m bench perf`: training throughput of the shared U-Net, one evaluation's cost, metric and STAPLE timings.

Training: the shared U-Net (through the `mv-unet` method) on random images with five random binary
raters, at the paper's sizes:

- 28×28, 1 channel, batch 128 (MNIST);
- 180×180, 1 channel, batch 8 (LIDC crops);
- 60-band hyperspectral, batch 2 (Choledoch): the full 256×320 on CUDA, 128×160 on CPU, where the
  full size takes seconds per step.

Each configuration is timed two ways, in fp32 and in bf16 autocast, side by side in one run:

- `harness`: `harness.fit` per step, its once-per-fit set-up left out (a fit of 2 × steps minus a
  fit of steps over the same split of 4 batches), so the time includes the harness's own work
  per step (gathering each batch by index, the channels-last copy, the on-device loss sums, the
  batch order's upload and the log row once per epoch) but not the split's move to the device or
  its vote targets, which a cell pays once;
- `bare`: a plain PyTorch loop on the same network and data: contiguous slices of tensors already
  on the device, forward, cross-entropy against the majority vote (votes · 2 > raters), backward,
  Adam step.

Warm-up steps run before each timed part and are not counted. Harness overhead is
1 − harness img/s ÷ bare img/s in the same precision. FLOPs per step are counted once per
configuration with `torch.utils.flop_counter.FlopCounterMode` on one training step (forward and
backward convolutions; pooling, interpolation, elementwise work and the optimiser are not counted),
and compared with the peak of large square matmuls measured in the same run (on CUDA, fp32
convolutions may use TF32 while the fp32 matmul peak does not; the JSON records both flags).

Limits, beside the peaks: on CUDA the TF32 matmul peak too (fp32 cells on CUDA allow TF32); the
copy bandwidth of a large tensor; per configuration a lower bound of the bytes a step moves
(`step_bytes`, an estimate: activations written, read back and their gradients, parameters and Adam's state) and
the memory-bound step time it implies; on CUDA the kernels and host synchronisations per harness
step (profiler). On CUDA the harness is timed a third way, `graphed` (`--engine graphed`, each
step a replayed CUDA graph), and `graphed_speedup` is its img/s over the eager harness's.
Concurrent cells are a property of a sweep (`--backend auto` on CUDA), not timed here.

Evaluation: one evaluation of MV-UNet on 800 28×28 validation images (`time_evaluation`), its loss pass plus a pass of
its own for the GT diagnostic against the one pass that serves both (`Method.validation`).

Peak memory: on CUDA `torch.cuda.max_memory_allocated` per run (reset before each); on CPU the
process's maximum resident set size so far (`getrusage`), which only grows, so a later run's value
includes the earlier runs' peaks.

Metrics: DSC + bAHD with `bench.evaluate.pixel` on a batch of mask pairs vs medpy's `dc` + `assd` per pair
(ASSD is the closest of medpy's distances to bAHD; the values differ, only the work is comparable).
STAPLE: `labels.staple.staple` on a batch vs SimpleITK's `STAPLEImageFilter` per image.
"""

from __future__ import annotations

import functools
import sys
from datetime import datetime, timezone
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

import methods
from bench.files import write_json
from bench.perf import machine
from bench.perf.workloads import build_mv_unet, random_data, time_evaluation, time_metrics, time_staple
from bench.train import hardware, harness

SCHEMA = "bench-perf/1"
PRECISIONS = ("fp32", "bf16")
DEFAULT_STEPS = {"cpu": 10, "cuda": 50}  # timed training steps per configuration and loop
WARMUP_STEPS = {"cpu": 3, "cuda": 10}
QUICK_STEPS = 2
QUICK_WARMUP = 1
HARNESS_BATCHES = 4  # the split `time_harness` loops over, in batches


# --------------------------------------------------------------------------- configurations


def train_configs(device: torch.device, quick: bool) -> list[dict]:
    """The (name, channels, height, width, batch) of each timed training configuration."""
    if quick:
        return [
            {"name": "28x28", "channels": 1, "height": 28, "width": 28, "batch": 4, "note": "quick: batch 4 instead of 128"},
            {
                "name": "180x180",
                "channels": 1,
                "height": 32,
                "width": 32,
                "batch": 2,
                "note": "quick: 32x32 batch 2 instead of 180x180 batch 8",
            },
            {"name": "hyperspectral", "channels": 60, "height": 16, "width": 20, "batch": 2, "note": "quick: 16x20 instead of 256x320"},
        ]
    hs = (256, 320) if device.type == "cuda" else (128, 160)
    hs_note = "full 256x320 (CUDA)" if device.type == "cuda" else "128x160 on CPU (the full 256x320 is too slow there)"
    return [
        {"name": "28x28", "channels": 1, "height": 28, "width": 28, "batch": 128, "note": "MNIST size, paper batch"},
        {"name": "28x28-b32", "channels": 1, "height": 28, "width": 28, "batch": 32, "note": "MNIST size, quick-budget batch"},
        {"name": "180x180", "channels": 1, "height": 180, "width": 180, "batch": 8, "note": "LIDC crop size"},
        {"name": "hyperspectral", "channels": 60, "height": hs[0], "width": hs[1], "batch": 2, "note": f"60 bands, {hs_note}"},
    ]


# --------------------------------------------------------------------------- training


def step_bytes(method: methods.Method, batch: dict[str, torch.Tensor]) -> int:
    """An estimate of the memory traffic of one fp32 training step, in bytes.

    Activations: every module output is written in the forward pass, read again in the backward
    pass and its gradient written (3 × its bytes). Parameters: read in the forward and backward
    passes, gradient written, and Adam reads the gradient and both moments and writes both moments
    and the weight (8 × their bytes). Input batches and temporaries are left out.
    """
    sizes = []
    hooks = [
        m.register_forward_hook(lambda _m, _i, out: sizes.append(out.numel() * out.element_size()) if torch.is_tensor(out) else None)
        for m in method.modules()
        if not list(m.children())
    ]
    ctx = methods.StepContext("train", 0, 0, torch.Generator(device=batch["images"].device).manual_seed(0))
    try:
        with torch.no_grad():
            method.loss(batch, ctx)
    finally:
        for hook in hooks:
            hook.remove()
    params = sum(p.numel() * p.element_size() for p in method.parameters())
    return 3 * sum(sizes) + 8 * params


def cuda_step_counts(cfg: dict, device: torch.device, steps: int = 3) -> dict:
    """Kernels and host synchronisations per harness step on CUDA, from the profiler (CUDA only)."""
    from torch.profiler import ProfilerActivity, profile

    images, raters, valid = random_data(cfg["batch"] * 4, cfg["channels"], cfg["height"], cfg["width"])
    method = build_mv_unet(cfg["channels"], device)
    data = hardware.to_tensors({"images": images, "raters": raters, "rater_valid": valid, **method.prepare(raters, valid)}, device)
    sched = harness.fixed_schedules(method, 100, cfg["batch"])["train"]
    run = harness.StageRun(method, 0, method.stages[0], sched, len(images), harness.Runtime(0, device), torch.bfloat16, None)
    run.train_step(data)
    machine.sync(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            run.train_step(data)
        machine.sync(device)
    events = prof.events()
    kernels = sum(1 for e in events if str(getattr(e, "device_type", "")).endswith("CUDA"))
    syncs = sum(1 for e in events if e.name in ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaMemcpy", "cudaEventSynchronize"))
    return {"kernels_per_step": kernels / steps, "host_syncs_per_step": max(syncs - 1, 0) / steps}  # the final sync is ours


def step_flops(method: methods.Method, batch: dict[str, torch.Tensor]) -> int:
    """FLOPs of one training step (forward + backward, fp32, no autocast) as FlopCounterMode counts them."""
    method.train()
    ctx = methods.StepContext("train", 0, 0, torch.Generator(device=batch["images"].device).manual_seed(0))
    counter = FlopCounterMode(display=False)
    with counter:
        loss = method.loss(batch, ctx)["loss"]
        loss.backward()
    method.zero_grad(set_to_none=True)
    return int(counter.get_total_flops())


def time_harness(cfg: dict, precision: str, steps: int, warmup: int, device: torch.device, seed: int = 0, engine: str = "eager") -> float:
    """Seconds for `steps` steps of `harness.fit` with `engine`, its once-per-fit set-up left out: a fit of 2·steps minus
    a fit of `steps`, both over one split of `HARNESS_BATCHES` batches, after a warm-up fit. Both fits pay the same
    set-up (the split moved to the device, its vote targets, a graph's capture, the final evaluation), so the difference
    is what the harness costs per step, its per-epoch work (the batch order's upload, the log row) included."""
    b = cfg["batch"]
    images, raters, valid = random_data(HARNESS_BATCHES * b, cfg["channels"], cfg["height"], cfg["width"], seed)
    method = build_mv_unet(cfg["channels"], device, seed)
    split, run, quiet = (
        harness.Split(images, raters, valid),
        harness.Runtime(seed, device, precision, engine),
        harness.Output(progress=False),
    )
    seconds = [
        machine.timed(lambda n=n: harness.fit(method, split, harness.fixed_schedules(method, n, b, 1e-4), run, out=quiet), device)[0]
        for n in (warmup, steps, 2 * steps)
    ]
    return max(seconds[2] - seconds[1], 1e-9)


def bare_steps(net, optimiser, images, raters, batch_size: int, steps: int, dtype: torch.dtype | None, device: torch.device) -> None:
    """`steps` plain training steps on consecutive slices: forward, CE vs majority vote, backward, Adam."""
    for i in range(steps):
        sl = slice(i * batch_size, (i + 1) * batch_size)
        x, votes = images[sl], raters[sl]
        target = (votes.sum(1) * 2 > votes.shape[1]).long()  # majority vote; 5 raters never tie
        with hardware.autocast(device, dtype):
            logits = net(x)
        loss = F.cross_entropy(logits.float(), target)
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()


def time_bare(cfg: dict, precision: str, steps: int, warmup: int, device: torch.device, seed: int = 0) -> float:
    """Seconds for `steps` bare PyTorch steps on the same network and data as `time_harness`, after `warmup` steps."""
    b = cfg["batch"]
    images, raters, _ = random_data((steps + warmup) * b, cfg["channels"], cfg["height"], cfg["width"], seed)
    x = torch.from_numpy(images).to(device).contiguous(memory_format=torch.channels_last)
    r = torch.from_numpy(raters).to(device)
    net = build_mv_unet(cfg["channels"], device, seed).net.train()
    optimiser = torch.optim.Adam(net.parameters(), lr=1e-4)
    dtype = hardware.autocast_dtype(device, precision)
    bare_steps(net, optimiser, x[: warmup * b], r[: warmup * b], b, warmup, dtype, device)
    return machine.timed(lambda: bare_steps(net, optimiser, x[warmup * b :], r[warmup * b :], b, steps, dtype, device), device)[0]


def time_training(cfg: dict, steps: int, warmup: int, device: torch.device, peaks: dict, log) -> dict:
    """Both loops in both precisions for one configuration, with its FLOP count and the harness overhead."""
    images, raters, valid = random_data(cfg["batch"], cfg["channels"], cfg["height"], cfg["width"])
    method = build_mv_unet(cfg["channels"], device)
    data = hardware.to_tensors({"images": images, "raters": raters, "rater_valid": valid}, device)
    batch = hardware.make_batch(data, torch.arange(cfg["batch"]), device)
    flops, traffic = step_flops(method, batch), step_bytes(method, batch)
    del method, data, batch
    machine.free(device)
    runs = []
    loops = [("harness", time_harness), ("bare", time_bare)]
    if device.type == "cuda":
        loops.append(("graphed", functools.partial(time_harness, engine="graphed")))
    for precision in PRECISIONS:
        for loop, timer in loops:
            log(f"  {cfg['name']}: {precision} {loop} ({warmup} + {steps} steps)")
            machine.reset_peak_memory(device)
            seconds = timer(cfg, precision, steps, warmup, device)
            memory, memory_kind = machine.peak_memory_mib(device)
            gflops = flops * steps / seconds / 1e9
            runs.append(
                {
                    "precision": precision,
                    "loop": loop,
                    "seconds": seconds,
                    "images_per_s": steps * cfg["batch"] / seconds,
                    "gflops": gflops,
                    "peak_fraction": gflops / peaks[precision]["gflops"],
                    "peak_memory_mib": memory,
                    "memory_kind": memory_kind,
                }
            )
            machine.free(device)
    overhead, graphed = {}, {}
    for precision in PRECISIONS:
        speed = {r["loop"]: r["images_per_s"] for r in runs if r["precision"] == precision}
        overhead[precision] = 1 - speed["harness"] / speed["bare"]
        if "graphed" in speed:
            graphed[precision] = speed["graphed"] / speed["harness"]
    bound = {"bytes_per_step": traffic, "memory_bound_ms": 1000 * traffic / (peaks["bandwidth"]["gbs"] * 1e9)}
    if device.type == "cuda":
        bound.update(cuda_step_counts(cfg, device))
    return {
        **cfg,
        "steps": steps,
        "warmup": warmup,
        "flops_per_step": flops,
        **bound,
        "runs": runs,
        "harness_overhead": overhead,
        **({"graphed_speedup": graphed} if graphed else {}),
    }


# --------------------------------------------------------------------------- metrics and STAPLE


def run_perf(out: Path, quick: bool = False, device: str = "auto", steps: int | None = None, verbose: bool = False) -> dict:
    """Time training, metrics and STAPLE; write the results to `out` (JSON, atomically) and return them."""
    dev = hardware.resolve_device(device)
    log = (lambda msg: print(msg, file=sys.stderr, flush=True)) if verbose else (lambda msg: None)
    steps = steps if steps is not None else (QUICK_STEPS if quick else DEFAULT_STEPS[dev.type])
    warmup = QUICK_WARMUP if quick else WARMUP_STEPS[dev.type]
    n_matmul = 256 if quick else (4096 if dev.type == "cuda" else 2048)
    result = {"schema": SCHEMA, "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "quick": quick}
    result["env"] = machine.environment(dev)
    log(f"matmul peak ({n_matmul}x{n_matmul})")
    peaks = {p: machine.matmul_peak(dev, torch.float32 if p == "fp32" else torch.bfloat16, n_matmul) for p in PRECISIONS}
    if dev.type == "cuda":
        peaks["tf32"] = machine.tf32_peak(dev, n_matmul)
    result["matmul_peak"] = peaks
    log("memory bandwidth")
    result["bandwidth"] = machine.bandwidth(dev, 16 if quick else (1024 if dev.type == "cuda" else 256))
    peaks = {**peaks, "bandwidth": result["bandwidth"]}
    result["training"] = []
    for cfg in train_configs(dev, quick):
        log(f"training {cfg['name']}")
        result["training"].append(time_training(cfg, steps, warmup, dev, peaks, log))
    log("evaluation")
    result["evaluation"] = time_evaluation(32 if quick else 800, 28, dev)
    log("metrics")
    result["metrics"] = time_metrics(20, 64) if quick else time_metrics(1000, 180)
    log("staple")
    result["staple"] = time_staple(10, 64) if quick else time_staple(200, 180)
    write_json(Path(out), result)
    return result


def format_report(result: dict) -> str:
    """The results as a readable table."""
    env = result["env"]
    lines = [
        f"device: {env['device']} ({env['device_name']}), torch {env['torch']}, {env['threads']} threads",
        f"harness default precision: {env['precision_note']}",
        "matmul peak: " + ", ".join(f"{p} {v['gflops']:.1f} GFLOP/s ({v['n']}x{v['n']})" for p, v in result["matmul_peak"].items()),
        f"memory bandwidth (copy): {result['bandwidth']['gbs']:.1f} GB/s",
    ]
    for cfg in result["training"]:
        lines.append("")
        lines.append(
            f"training {cfg['name']}: {cfg['channels']} ch, {cfg['height']}x{cfg['width']}, batch {cfg['batch']}, "
            f"{cfg['steps']} timed steps after {cfg['warmup']} warm-up, {cfg['flops_per_step'] / 1e9:.2f} GFLOP/step ({cfg['note']})"
        )
        counts = (
            f", {cfg['kernels_per_step']:.0f} kernels and {cfg['host_syncs_per_step']:.1f} host syncs per step"
            if "kernels_per_step" in cfg
            else ""
        )
        lines.append(
            f"  memory traffic ≈ {cfg['bytes_per_step'] / 1e6:.1f} MB/step: memory-bound step ≈ {cfg['memory_bound_ms']:.3f} ms{counts}"
        )
        lines.append(f"  {'precision':<11}{'loop':<9}{'img/s':>10}{'GFLOP/s':>10}{'% peak':>8}{'overhead':>10}{'peak MiB':>10}")
        for run in cfg["runs"]:
            mark = "*" if run["precision"] == env["harness_precision"] else " "
            overhead = f"{100 * cfg['harness_overhead'][run['precision']]:.1f}%" if run["loop"] == "harness" else ""
            lines.append(
                f"  {run['precision'] + mark:<11}{run['loop']:<9}{run['images_per_s']:>10.1f}{run['gflops']:>10.1f}"
                f"{100 * run['peak_fraction']:>7.1f}%{overhead:>10}{run['peak_memory_mib']:>10.0f}"
            )
    lines.append(
        "  (* the harness's default precision; overhead = 1 - harness img/s / bare img/s; "
        + ("peak MiB: CUDA max allocated)" if env["device"] == "cuda" else "peak MiB: process max RSS so far)")
    )
    e, m = result["evaluation"], result["metrics"]
    lines += [
        "",
        f"evaluation (MV-UNet, {e['images']} images {e['height']}x{e['width']}): loss pass + diagnostic pass {e['two_passes_s']:.2f} s, "
        f"one pass {e['one_pass_s']:.2f} s ({100 * e['saving']:.0f}% less; same diagnostic: {e['same_dsc']})",
        f"metrics, {m['pairs']} pairs {m['height']}x{m['width']}: bench.evaluate.pixel dice+bahd {m['bench_ms_per_pair']:.3f} ms/pair, "
        f"medpy dc+assd {m['medpy_ms_per_pair']:.3f} ms/pair, speed-up {m['speedup']:.1f}x (max |dDSC| {m['dice_max_abs_diff']:.1e})",
    ]
    s = result["staple"]
    head = f"staple, {s['images']} images {s['height']}x{s['width']}, {s['raters']} raters: labels.staple {s['ours_ms_per_image']:.3f} ms/image"
    if "skipped" in s:
        lines.append(f"{head}; {s['skipped']}")
    else:
        lines.append(
            f"{head}, SimpleITK {s['sitk_ms_per_image']:.3f} ms/image, speed-up {s['speedup']:.1f}x, "
            f"DSC agreement mean {s['mean_dice_agreement']:.4f} (min {s['min_dice_agreement']:.4f})"
        )
    return "\n".join(lines)
