"""Tests for bench/perf/timings.py: the quick run writes complete JSON, the FLOP count is plausible, the verb parses.

Speed is measured by the benchmark itself, never asserted here.
"""

from __future__ import annotations

import argparse
import json
import math

import pytest
import torch

from bench.cli import perf as perf_verb
from bench.perf import timings, workloads
from bench.train import hardware


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op thread: on a loaded machine two spinning OpenMP threads make each step many times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory, one_thread):
    out = tmp_path_factory.mktemp("perf") / "sub" / "perf.json"
    result = timings.run_perf(out, quick=True, device="cpu")
    return out, result


def positive(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def test_quick_run_writes_all_sections(quick_run):
    out, result = quick_run
    assert out.is_file() and not list(out.parent.glob("*.tmp"))
    data = json.loads(out.read_text())
    assert data == json.loads(json.dumps(result))
    assert data["schema"] == timings.SCHEMA and data["quick"] is True
    assert {"env", "matmul_peak", "training", "evaluation", "metrics", "staple"} <= set(data)

    env = data["env"]
    assert env["device"] == "cpu" and env["device_name"] and env["torch"] == torch.__version__
    assert positive(env["threads"])
    assert env["harness_precision"] == ("bf16" if hardware.autocast_dtype(torch.device("cpu"), "auto") else "fp32")

    assert set(data["matmul_peak"]) == {"fp32", "bf16"}  # tf32 on CUDA only
    assert positive(data["bandwidth"]["gbs"])
    assert all(positive(v["gflops"]) and positive(v["n"]) for v in data["matmul_peak"].values())

    assert [c["name"] for c in data["training"]] == ["28x28", "180x180", "hyperspectral"]
    assert data["training"][2]["channels"] == 60
    for cfg in data["training"]:
        assert positive(cfg["flops_per_step"]) and positive(cfg["steps"]) and positive(cfg["batch"])
        assert positive(cfg["bytes_per_step"]) and positive(cfg["memory_bound_ms"]) and "kernels_per_step" not in cfg  # CUDA only
        assert {(r["precision"], r["loop"]) for r in cfg["runs"]} == {(p, loop) for p in ("fp32", "bf16") for loop in ("harness", "bare")}
        for run in cfg["runs"]:
            for key in ("seconds", "images_per_s", "gflops", "peak_fraction", "peak_memory_mib"):
                assert positive(run[key]), (cfg["name"], run)
        assert set(cfg["harness_overhead"]) == {"fp32", "bf16"}
        assert all(math.isfinite(v) and v < 1 for v in cfg["harness_overhead"].values())

    e = data["evaluation"]
    assert positive(e["two_passes_s"]) and positive(e["one_pass_s"]) and e["images"] == 32
    assert e["same_dsc"] is True and e["saving"] == pytest.approx(1 - e["one_pass_s"] / e["two_passes_s"])

    m = data["metrics"]
    assert all(positive(m[k]) for k in ("pairs", "bench_ms_per_pair", "medpy_ms_per_pair", "speedup"))
    assert m["dice_max_abs_diff"] < 1e-9  # the same DSC by both routes

    s = data["staple"]
    assert positive(s["ours_ms_per_image"]) and s["raters"] == 5
    if "skipped" not in s:
        assert positive(s["sitk_ms_per_image"]) and positive(s["speedup"])
        assert 0.9 <= s["mean_dice_agreement"] <= 1.0


def test_report_has_a_row_per_run(quick_run):
    _, result = quick_run
    text = timings.format_report(result)
    rows = [line.split() for line in text.splitlines() if line.startswith(("  fp32", "  bf16"))]
    assert sorted((r[0].rstrip("*"), r[1]) for r in rows) == sorted(
        [(p, loop) for p in ("fp32", "bf16") for loop in ("harness", "bare")] * 3
    )
    assert "metrics," in text and "staple," in text


def unet_forward_flops(in_channels: int, height: int, width: int, n_classes: int = 2) -> int:
    """Hand count: 2·Cin·Cout·9 per output pixel for each 3×3 convolution of the shared U-Net, plus the 1×1 head."""
    channels = (32, 64, 128, 256)
    sizes, flops, c_prev = [], 0, in_channels
    h, w = height, width
    for c in channels:
        flops += 2 * 9 * (c_prev * c + c * c) * h * w
        sizes.append((h, w))
        c_prev, h, w = c, h // 2, w // 2
    flops += 2 * 9 * (256 * 256 * 2) * h * w  # bottleneck
    c_up = 256
    for c, (h, w) in zip(reversed(channels), reversed(sizes)):
        flops += 2 * 9 * ((c_up + c) * c + c * c) * h * w
        c_up = c
    return flops + 2 * 32 * n_classes * height * width


def test_step_flops_matches_a_hand_estimate(one_thread):
    device = torch.device("cpu")
    images, raters, valid = workloads.random_data(2, 1, 28, 28)
    method = workloads.build_mv_unet(1, device)
    data = hardware.to_tensors({"images": images, "raters": raters, "rater_valid": valid}, device)
    flops = timings.step_flops(method, hardware.make_batch(data, torch.arange(2), device))
    estimate = 3 * 2 * unet_forward_flops(1, 28, 28)  # training ≈ forward + 2× forward for the backward
    assert flops > 0
    assert 0.5 <= flops / estimate <= 2.0, (flops, estimate)


def test_cli_hook_parses():
    parser = argparse.ArgumentParser(prog="python -m bench")
    perf_verb.add_parser(parser.add_subparsers(dest="verb"))
    args = parser.parse_args(["perf"])
    assert (args.out, args.steps, args.device, args.quick, args.func) == ("results/perf.json", None, "auto", False, perf_verb.cmd_perf)
    args = parser.parse_args(["perf", "--out", "x/p.json", "--steps", "7", "--device", "cpu", "--quick"])
    assert (args.out, args.steps, args.device, args.quick) == ("x/p.json", 7, "cpu", True)
    for bad in (["perf", "--steps", "0"], ["perf", "--steps", "two"], ["perf", "--device", "tpu"]):
        with pytest.raises(SystemExit) as exc:
            parser.parse_args(bad)
        assert exc.value.code == 2


def test_the_cuda_step_counts_build_their_stage_run_on_any_device(one_thread):
    """The profiler's kernel and sync counts run only on CUDA in `bench perf`; here their set-up (the harness's stage run,
    whose signature changes with the harness) runs on the CPU, where no CUDA kernel or sync is counted."""
    counts = timings.cuda_step_counts({"batch": 4, "channels": 1, "height": 28, "width": 28}, torch.device("cpu"), steps=1)
    assert counts == {"kernels_per_step": 0.0, "host_syncs_per_step": 0.0}
