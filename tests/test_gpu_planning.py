"""Several cells per GPU (`--backend auto` on CUDA), planned from the cards' free memory and the CPUs, with a CUDA-less test double."""

from __future__ import annotations

from contextlib import ExitStack

import pytest
import torch

from bench.run import sweep
from bench.train import hardware, harness

GIB = 1024**3


@pytest.fixture
def two_cards(monkeypatch):
    """Two visible 80 GB cards with `free` GiB free each (the test sets it)."""
    state = {"free": 60}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda k=0: (state["free"] * GIB, 80 * GIB))
    return state


def test_auto_runs_several_cells_per_card_within_memory_and_cpus(two_cards, monkeypatch):
    monkeypatch.setattr(sweep, "usable_cpus", lambda: 16)
    assert hardware.gpu_slots(16) == 16  # 8 a card (the cap), 16 CPUs
    assert sweep.resolve_backend("auto", None, 30, "cuda") == ("loky", 16)
    assert sweep.resolve_backend("auto", None, 5, "cuda") == ("loky", 5)  # no more workers than cells
    assert sweep.resolve_backend("auto", None, 1, "cuda") == ("sequential", 1)
    assert sweep.resolve_backend("auto", 3, 30, "cuda") == ("loky", 3)  # --n-jobs overrides
    two_cards["free"] = 5  # two cells' worth a card
    assert hardware.gpu_slots(16) == 4
    monkeypatch.setattr(sweep, "usable_cpus", lambda: 3)
    two_cards["free"] = 60
    assert sweep.resolve_backend("auto", None, 30, "cuda") == ("loky", 3)  # one CPU per cell


def test_cpu_planning_is_unchanged(monkeypatch):
    monkeypatch.setattr(sweep, "usable_cpus", lambda: 2)
    assert sweep.resolve_backend("auto", None, 30, "cpu") == ("loky", 2)
    assert sweep.resolve_backend("auto", None, 1, "cpu") == ("sequential", 1)
    assert sweep.resolve_backend("dask", None, 30, "cpu") == ("dask", 2)


def test_cells_spread_over_the_cards_before_sharing_one(two_cards, tmp_path):
    with ExitStack() as held:
        devices = [held.enter_context(hardware.pinned_device("cuda", tmp_path)) for _ in range(5)]
    assert [d.index for d in devices] == [0, 1, 0, 1, 0]
    assert sorted(p.name for p in (tmp_path / "locks").rglob("*.lock"))[:2] == ["gpu-0-slot-0.lock", "gpu-0-slot-1.lock"]


@pytest.fixture
def tf32_flags():
    """resolve_precision sets the TF32 flags; restored by hand, not by monkeypatch (torch's cuBLAS flag is a computed
    attribute, which pytest ≥ 9.2 tries to delete on undo, leaving the test's other patches in place)."""
    flags = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags


def test_the_cuda_precision_is_measured_once_per_shape_and_recorded(monkeypatch, tmp_path, tf32_flags):
    """The faster of fp32 (with TF32) and bf16 for the cell's shape, measured once; here with a test double for the timer."""
    from methods import DataSpec, build_method

    measured = []
    monkeypatch.setattr(hardware, "_step_ms", lambda method, batch, sched, device, dtype: measured.append(dtype) or (3.0 if dtype else 2.0))
    monkeypatch.setattr(hardware, "make_batch", lambda data, index, device: data)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Test Card")
    hardware._CUDA_CHOICES.clear()
    method = build_method("mv-unet", DataSpec(1, 2, 3))
    data = {"images": torch.zeros(8, 1, 16, 16)}
    sched = harness.fixed_schedules(method, 10, 4)["train"]
    cuda = torch.device("cuda")
    record = tmp_path / "cuda-precision.json"
    first = hardware.resolve_precision(method, data, sched, cuda, "auto", record)
    again = hardware.resolve_precision(method, data, sched, cuda, "auto", record)
    assert first == again == {"precision": "fp32", "step_ms": {"fp32": 2.0, "bf16": 3.0}, "tf32": True}
    assert measured == [None, torch.bfloat16]  # once for this configuration and shape
    hardware._CUDA_CHOICES.clear()  # another process: reads the record, measures nothing
    assert hardware.resolve_precision(method, data, sched, cuda, "auto", record) == first and len(measured) == 2
    assert hardware.resolve_precision(method, data, sched, cuda, "bf16") == {"precision": "bf16", "tf32": False, "step_ms": {}}
    assert hardware.faster({"fp32": 1.0, "bf16": 1.0}) == "fp32" and hardware.faster({"fp32": 2.0, "bf16": 1.0}) == "bf16"
    cpu = hardware.resolve_precision(method, data, sched, torch.device("cpu"), "auto")
    assert cpu["precision"] == ("bf16" if hardware.cpu_has_fast_bf16() else "fp32") and cpu["step_ms"] == {}
