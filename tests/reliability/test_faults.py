"""Fault injection: real `python -m bench run` processes killed, raced, poisoned and starved of disk.

Every scenario runs the CLI in subprocesses on the embedded mnist-5k with a tiny budget (seeds 0,1,
4 steps per stage, 64 training and 24 test images; about 12 s for lf-net + mv-unet uninterrupted
on 2 idle cores, lf-net having two stages so stage checkpoints matter) and compares with one
uninterrupted reference run, bit for bit: the session's `reference_sweep` (tests/conftest.py), which
the backend and reproducibility tests share, is exactly the kill campaign's command.

- kills: SIGKILL to the sweep's process group at seeded random times (fractions of the run's
  expected duration, from the reference) and when a file appears in the results folder (polled
  every 10 ms): a train_log.csv (an epoch just ended, the next one trains), an lf-net stage-0
  checkpoint (between stages), a predictions.npz (scoring), a `.name.PID.tmp.ext` file (mid atomic
  write); then one clean rerun must give the reference table, predictions and training logs
  exactly. 3 phase kills by default, 12 kills under `-m slow`;
- two sweeps started together into one results folder with overlapping cells (mv-unet and lf-net
  seed 0; lf-net seeds 0 and 1): each cell trained exactly once (manifest pid, one log row per stage
  epoch), the other sweep counts it as done;
- a NaN loss (`--set cm-unet.alpha=nan`): that cell fails with a clear reason, a finished cell is
  kept and the cell after the failures still trains;
- a results tmpfs too small for the run, and one remounted read-only mid-run (slow); both need
  root to mount and are skipped otherwise.

Subprocesses run with OMP_NUM_THREADS=1 (conftest.one_thread_subprocesses says why), as the reference did.

`python -m pytest -m slow -s tests/reliability/test_faults.py` runs the slow part and prints how
many kills landed mid-run; `-s` on the default part prints the other figures (timings, who trained
which shared cell, the error messages of the disk faults).
"""

from __future__ import annotations

import csv
import ctypes
import errno
import fnmatch
import json
import os
import random
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import REFERENCE_METHODS, REPO, ROW_KEYS, SEEDS, ReferenceSweep, cell_folder, sorted_table, sweep_command

# Rows per cell and test image: the 5 hard metrics (dsc, bahd, hd95, assd, nsd) against 8 hard references (gt, majority,
# staple, 5 raters), soft_dice, soft_iou and ece against rater-mean, the 10 set metrics against raters (ged, ged_unbiased,
# ged_floor, dice_match, dice_max, dice_soft, dice_personal, dice_personal_match, dice_between, dice_between_raters), ece
# against gt; one structure.
N_CASES, N_ROWS = 24, 8 * 5 + 3 + 10 + 1
KILLED = REFERENCE_METHODS  # the kill campaign's sweep is the reference's: lf-net first, so its phases come early in a run
# Concurrent writers (methods, --seeds): lf-net seed 0 in both; mv-unet seed 0 only in the first, lf-net seed 1 only in the second.
SWEEP_1, SWEEP_2 = (["mv-unet", "lf-net"], (0,)), (["lf-net"], (0, 1))
KEYS = ROW_KEYS
TIMEOUT = 300  # seconds for any one subprocess
SUMMARY = re.compile(r"(\d+) cells: (\d+) trained, (\d+) already done, (\d+) failed")


# --------------------------------------------------------------------------- running the CLI


command = sweep_command  # the tiny sequential sweep; extra flags come last and win


def run(methods: list[str], results: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(command(methods, results, *extra), cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT)


def start(args: list[str], log: Path) -> subprocess.Popen:
    """The command in its own process group (so a kill reaches any child), stdout/stderr to LOG.out/.err."""
    with open(log.with_suffix(".out"), "w") as out, open(log.with_suffix(".err"), "w") as err:
        return subprocess.Popen(args, cwd=REPO, stdout=out, stderr=err, start_new_session=True)


def kill(proc: subprocess.Popen) -> bool:
    """SIGKILL the process group; True when the sweep was still running, i.e. the kill landed mid-run."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=60)
    return proc.returncode == -signal.SIGKILL


def finish(proc: subprocess.Popen, timeout: float = TIMEOUT) -> int:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill(proc)
        raise


def counts(stdout: str) -> tuple[int, int, int, int]:
    """(cells, trained, already done, failed) from the run's closing line."""
    found = SUMMARY.search(stdout)
    assert found, f"no closing summary line in stdout:\n{stdout}"
    return tuple(int(g) for g in found.groups())


# --------------------------------------------------------------------------- reading a results folder


cell = cell_folder  # (results, method, seed) -> runs/mnist-5k/lfnet/protocol/<method>/seed-<s>


def all_cells(methods: list[str], seeds: tuple[int, ...] = SEEDS) -> list[tuple[str, int]]:
    return [(m, s) for m in methods for s in seeds]


def is_temp(path: str | Path) -> bool:
    """A file of `files.atomic` (`.name.PID.tmp.ext`) or of the dataset cache."""
    name = Path(path).name
    return name.startswith(".") and ".tmp" in name


def files(results: Path) -> dict[str, tuple[int, int, int]]:
    """Every file below `results` (relative path -> inode, size, mtime): changes show what a run just wrote."""
    out = {}
    for root, _, names in os.walk(results):
        for name in names:
            path = os.path.join(root, name)
            try:
                st = os.stat(path)
            except FileNotFoundError:  # replaced or removed while we looked
                continue
            out[os.path.relpath(path, results)] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return out


def temp_files(results: Path) -> list[str]:
    return sorted(rel for rel in files(results) if is_temp(rel))


def unreadable(results: Path, checkpoints: bool = False) -> list[str]:
    """Result files that do not parse (temporary files excluded): must always be empty."""
    bad = []
    for rel in files(results):
        path = results / rel
        if is_temp(rel):
            continue
        try:
            if path.suffix == ".parquet":
                pd.read_parquet(path)
            elif path.suffix == ".json":
                json.loads(path.read_text())
            elif path.suffix == ".npz":
                with np.load(path, allow_pickle=False) as f:
                    [f[k] for k in f.files]
            elif path.name == "summary.csv":
                pd.read_csv(path)
            elif path.name == "train_log.csv":
                with path.open(newline="") as f:
                    list(csv.DictReader(f))
            elif path.suffix == ".pt" and checkpoints:
                torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:
            bad.append(f"{rel}: {type(e).__name__}: {e}")
    return bad


def done_cells(results: Path, methods: list[str]) -> list[tuple[str, int]]:
    return [(m, s) for m, s in all_cells(methods) if (cell(results, m, s) / "metrics.parquet").is_file()]


def manifest(results: Path, method: str, seed: int) -> dict:
    return json.loads((cell(results, method, seed) / "manifest.json").read_text())


sorted_rows = sorted_table


def collected(results: Path) -> pd.DataFrame:
    return sorted_rows(pd.read_parquet(results / "metrics.parquet"))


def training_log(results: Path, method: str, seed: int) -> pd.DataFrame:
    return pd.read_csv(cell(results, method, seed) / "train_log.csv").drop(columns="seconds")


def assert_same_rows(got: pd.DataFrame, want: pd.DataFrame) -> None:
    """Same rows and values bit for bit; no duplicate and no missing (method, seed, case, structure, metric)."""
    assert not got.duplicated(KEYS).any(), got[got.duplicated(KEYS, keep=False)]
    assert len(got) == len(want), f"{len(got)} rows, want {len(want)}"
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert np.array_equal(got["value"].to_numpy().view(np.int64), want["value"].to_numpy().view(np.int64))


def assert_cell_reproduced(results: Path, reference: Path, method: str, seed: int) -> None:
    """A cell equals the reference's: predictions bit for bit, one log row per evaluation and stop with the same losses."""
    with (
        np.load(cell(results, method, seed) / "predictions.npz") as got,
        np.load(cell(reference, method, seed) / "predictions.npz") as want,
    ):
        assert np.array_equal(got["probs"], want["probs"]) and np.array_equal(got["case_ids"], want["case_ids"]), (method, seed)
    log = training_log(results, method, seed)
    schedules = json.loads((cell(results, method, seed) / "config.json").read_text())["schedules"]
    expected = [(stage, event) for stage in schedules for event in ("eval", "stop")]  # --max-steps 4: one evaluation per stage
    got = list(zip(log["stage"], log["event"]))
    assert got == expected, f"{method}/seed-{seed} logged {got}, want {expected}"
    pd.testing.assert_frame_equal(log, training_log(reference, method, seed), check_exact=True)


@dataclass
class Reference:
    results: Path  # the session's shared reference sweep: read it, never run into it
    seconds: float  # wall time of the uninterrupted lf-net + mv-unet sweep (the kill campaign's command)
    table: pd.DataFrame  # lf-net, mv-unet × seeds 0, 1, sorted

    def cell_seconds(self, method: str, seed: int) -> float:
        return manifest(self.results, method, seed)["seconds"]

    def remaining(self, results: Path) -> float:
        """Expected wall time of the kill campaign's command into `results`: start-up and collect plus the stages left."""
        overhead = self.seconds - sum(self.cell_seconds(m, s) for m, s in all_cells(KILLED))
        left = 0.0
        for m, s in all_cells(KILLED):
            if (cell(results, m, s) / "metrics.parquet").is_file():
                continue
            stages = len(json.loads((cell(self.results, m, s) / "config.json").read_text())["schedules"])
            finished = len(
                [p for p in (cell(results, m, s) / "checkpoints").glob("stage-*.pt") if not p.name.endswith((".partial.pt", ".held.pt"))]
            )
            left += self.cell_seconds(m, s) * (stages - finished) / stages
        return overhead + left

    def rows(self, methods: list[str], seeds: tuple[int, ...] = SEEDS) -> pd.DataFrame:
        return self.table[self.table["method"].isin(methods) & self.table["seed"].isin(seeds)].reset_index(drop=True)

    def cells_rows(self, cells: list[tuple[str, int]]) -> pd.DataFrame:
        keep = pd.Series(list(zip(self.table["method"], self.table["seed"]))).isin(cells)
        return self.table[keep.to_numpy()].reset_index(drop=True)

    def cell_bytes(self, method: str, seed: int) -> int:
        return sum(p.stat().st_size for p in cell(self.results, method, seed).rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def reference(reference_sweep: ReferenceSweep) -> Reference:
    """The uninterrupted sequential run of the kill campaign's command: the session's shared reference sweep."""
    assert reference_sweep.command == command(KILLED, reference_sweep.results)
    table = reference_sweep.table
    assert len(table) == len(KILLED) * len(SEEDS) * N_CASES * N_ROWS and not table.duplicated(KEYS).any()
    print(f"\nreference: lf-net + mv-unet sweep {reference_sweep.seconds:.1f} s uninterrupted")
    return Reference(reference_sweep.results, reference_sweep.seconds, table)


# --------------------------------------------------------------------------- 1. kills


# Phase-targeted kills: the first file matching the predicate that appears (or is replaced) after
# the attempt starts triggers the kill.
PHASES: dict[str, Callable[[str], bool]] = {
    "training": lambda rel: rel.endswith("/train_log.csv"),  # an epoch just ended: the next one trains
    "between-stages": lambda rel: fnmatch.fnmatch(rel, "*/lf-net/seed-*/checkpoints/stage-0-*.pt"),
    "scoring": lambda rel: rel.endswith("/predictions.npz"),  # scoring and writing metrics next
    "mid-write": is_temp,  # inside files.atomic: a checkpoint, json or table half written
}


@dataclass
class Kill:
    plan: str  # a phase, or "t=…s" for a random time
    at: float  # seconds after the start when the kill was sent
    landed: bool  # the sweep was still running
    pid: int = 0
    trigger: str = ""  # the file that triggered a phase kill
    done: int = 0  # cells finished after the kill
    unreadable: list[str] = field(default_factory=list)


def kill_once(results: Path, plan: str, at: float | None, log: Path) -> Kill:
    """Start the sweep, kill it at `at` seconds or when `plan`'s file appears; check every file still parses."""
    before = files(results) if results.exists() else {}
    proc = start(command(KILLED, results), log)
    t0 = time.perf_counter()
    trigger = ""
    try:
        while proc.poll() is None and not trigger:
            elapsed = time.perf_counter() - t0
            assert elapsed < TIMEOUT, f"attempt {plan} still running after {TIMEOUT} s"
            if at is not None and elapsed >= at:
                break
            if at is None and results.exists():
                trigger = next((rel for rel, st in files(results).items() if before.get(rel) != st and PHASES[plan](rel)), "")
            if not trigger:
                time.sleep(0.01)
    finally:
        sent = time.perf_counter() - t0
        landed = kill(proc)
    return Kill(plan, sent, landed, proc.pid, trigger, len(done_cells(results, KILLED)), unreadable(results))


@dataclass
class Round:
    results: Path  # one results folder, killed again and again until its cells are all done
    kills: list[Kill] = field(default_factory=list)


def kill_campaign(root: Path, reference: Reference, plans: list[str], seed: int) -> list[Round]:
    """One attempt per plan: a phase name, or "random" for a seeded random time; returns the folders killed into.

    A random kill comes at a fraction (uniform in 5–70 %, from a seeded RNG) of the attempt's expected
    duration, from the reference run: start-up and collect plus the stages still to train. A phase that
    nothing left can trigger (no lf-net cell between stages) gets a random time too. The tiny sweep
    finishes after a few kills, so when a folder has every cell done (or an attempt ran to its end)
    the next kill starts a fresh folder: every kill then hits a run with work left.
    """
    rng = random.Random(seed)
    rounds: list[Round] = []
    for i, plan in enumerate(plans):
        if not rounds or len(done_cells(rounds[-1].results, KILLED)) == 4 or not rounds[-1].kills[-1].landed:
            rounds.append(Round(root / f"round-{len(rounds)}"))
        results = rounds[-1].results
        at = None
        if plan == "random" or not reachable(results, plan):
            at = rng.uniform(0.05, 0.7) * reference.remaining(results)
        label = plan if at is None else f"t={at:.1f}s" if plan == "random" else f"{plan}->t={at:.1f}s"
        k = kill_once(results, plan, at, root / f"attempt-{i}")
        k.plan = label
        rounds[-1].kills.append(k)
    return rounds


def reachable(results: Path, phase: str) -> bool:
    """Whether a rerun still writes the phase's file (a finished cell writes nothing again)."""
    pending = [c for c in all_cells(KILLED) if c not in done_cells(results, KILLED)]
    if phase == "between-stages":
        return any(not list((cell(results, m, s) / "checkpoints").glob("stage-0-*.pt")) for m, s in pending if m == "lf-net")
    return bool(pending)


def check_campaign(rounds: list[Round], reference: Reference, min_landed: int) -> None:
    kills = [k for r in rounds for k in r.kills]
    landed = sum(k.landed for k in kills)
    print(
        f"\nkill campaign: {len(kills)} kills in {len(rounds)} results folder(s), {landed} landed mid-run "
        "(the sweep was alive when SIGKILLed)"
    )
    n = 0
    for r in rounds:
        for k in r.kills:
            print(
                f"  kill {n:2d} {r.results.name}  {k.plan:<24} at {k.at:5.1f} s  {'landed' if k.landed else 'missed (had exited)':<20}"
                f"  cells done after: {k.done}/4  {k.trigger}"
            )
            n += 1
    for k in kills:
        assert not k.unreadable, f"after kill {k}: unreadable files {k.unreadable}"
    assert landed >= min_landed, kills
    for r in rounds:
        check_resumed(r.results, reference, r.kills)


def check_resumed(results: Path, reference: Reference, kills: list[Kill]) -> subprocess.CompletedProcess:
    """The clean rerun after kills into `results`, and everything it must restore."""
    done_before = len(done_cells(results, KILLED))
    t0 = time.perf_counter()
    final = run(KILLED, results)
    seconds = time.perf_counter() - t0
    assert final.returncode == 0, final.stderr
    assert counts(final.stdout) == (4, 4 - done_before, done_before, 0), final.stdout
    assert_same_rows(collected(results), reference.rows(KILLED))
    per_cell = sorted_rows(pd.concat([pd.read_parquet(cell(results, m, s) / "metrics.parquet") for m, s in all_cells(KILLED)]))
    assert_same_rows(per_cell, reference.rows(KILLED))
    for m, s in all_cells(KILLED):
        assert manifest(results, m, s)["status"] == "done"
        assert_cell_reproduced(results, reference.results, m, s)
    assert unreadable(results, checkpoints=True) == []
    # A cell clears a killed writer's temporaries when it resumes; those of a kill inside store.collect stay in
    # the results root (test_rerun_removes_stale_temporary_files_of_collect).
    leftovers = temp_files(results)
    assert [t for t in leftovers if t.startswith("runs")] == []
    killed_pids = {k.pid for k in kills}
    assert all(int(re.search(r"\.(\d+)\.tmp", t).group(1)) in killed_pids for t in leftovers), (leftovers, killed_pids)
    print(
        f"  {results.name}: final rerun {seconds:.1f} s: {4 - done_before} cells trained, {done_before} already done; rows lost 0; "
        f"stale temporary files left (results root, by killed processes): {len(leftovers)} {leftovers}"
    )
    return final


def test_killed_sweep_resumes_to_the_reference_bit_for_bit(tmp_path, reference):
    """3 kills: between lf-net's stages, mid atomic write, while scoring; then a clean rerun."""
    rounds = kill_campaign(tmp_path, reference, ["between-stages", "mid-write", "scoring"], seed=0)
    check_campaign(rounds, reference, min_landed=2)  # phase kills fire while the sweep still runs


@pytest.mark.slow
def test_twelve_kills_at_random_times_and_phases_then_resume(tmp_path, reference):
    """12 kills: seeded random times (fractions of the reference run, see kill_campaign) between every phase."""
    plans = [
        "training",
        "random",
        "between-stages",
        "random",
        "mid-write",
        "scoring",
        "random",
        "training",
        "between-stages",
        "random",
        "mid-write",
        "random",
    ]
    rounds = kill_campaign(tmp_path, reference, plans, seed=2024)
    check_campaign(rounds, reference, min_landed=10)


@pytest.fixture(scope="module")
def stale_rerun(tmp_path_factory, reference) -> Path:
    """A rerun into a folder holding what kills mid-write leave: a dead process's temporaries in a cell and the root."""
    results = tmp_path_factory.mktemp("stale") / "results"
    plant_temporaries(cell(results, "mv-unet", 0), ["checkpoints/.stage-0-train.{pid}.tmp.pt", ".metrics.{pid}.tmp.parquet"])
    plant_temporaries(results, [".metrics.{pid}.tmp.parquet", ".summary.{pid}.tmp.csv"])
    out = run(["mv-unet"], results, "--seeds", "0")  # the last --seeds wins
    assert out.returncode == 0, out.stderr
    assert counts(out.stdout) == (1, 1, 0, 0)
    assert_same_rows(collected(results), reference.rows(["mv-unet"]).query("seed == 0").reset_index(drop=True))
    return results


def test_rerun_removes_a_cells_stale_temporary_files(stale_rerun):
    assert [t for t in temp_files(stale_rerun) if t.startswith("runs")] == []


def test_rerun_removes_stale_temporary_files_of_collect(stale_rerun):
    assert temp_files(stale_rerun) == []


def plant_temporaries(folder: Path, names: list[str]) -> list[Path]:
    """Half-written `files.atomic` files of a process that no longer runs, as a SIGKILL mid-write leaves them."""
    dead = subprocess.Popen(["true"])
    dead.wait(timeout=10)
    paths = [folder / name.format(pid=dead.pid) for name in names]
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\0" * 4096)
    return paths


def test_a_kill_while_the_log_is_trimmed_keeps_finished_stages(tmp_path, monkeypatch):
    """In process: resume trims the log of an unfinished stage; dying half way must not lose the finished one."""
    from bench.train import checkpoints

    log = tmp_path / "train_log.csv"
    for row in (
        {"stage": "soft_label", "epoch": 0, "loss": 0.5},
        {"stage": "soft_label", "epoch": 1, "loss": 0.4},
        {"stage": "segmentation", "epoch": 0, "loss": 2.0},
    ):
        checkpoints.append_log(log, row)

    def killed(*args, **kwargs):
        raise SystemExit("SIGKILL")  # the process dies on its first write after the old log was read

    monkeypatch.setattr(checkpoints, "write_log", killed)
    try:
        checkpoints.trim_log(log, {"soft_label"})
    except SystemExit:
        pass
    assert log.is_file(), "train_log.csv is gone"
    with log.open(newline="") as f:
        assert [(r["stage"], r["epoch"]) for r in csv.DictReader(f)][:2] == [("soft_label", "0"), ("soft_label", "1")]


def test_a_kill_before_the_logs_first_row_leaves_a_log_that_a_rerun_resumes(tmp_path):
    """In process: append_log creates train_log.csv and writes its header and first row as one buffered write, so a SIGKILL
    in between leaves an empty file (the 12-kill campaign under -m slow hit it). A rerun must take it for an empty log;
    otherwise every rerun of that cell fails ("ValueError: I/O operation on closed file") until --force."""
    from bench.train import checkpoints

    log = tmp_path / "train_log.csv"
    log.write_text("")
    checkpoints.trim_log(log, set())  # resume: nothing finished, nothing to keep
    checkpoints.trim_log(log, set(), ("soft_label", 4))  # resume from a mid-stage checkpoint
    assert checkpoints.logged_stops(log) == {}
    checkpoints.append_log(log, {"stage": "soft_label", "event": "eval", "step": 4})
    with log.open(newline="") as f:
        assert [(r["stage"], r["step"]) for r in csv.DictReader(f)] == [("soft_label", "4")]


# --------------------------------------------------------------------------- 2. concurrent writers


def sweep_of(sweep: tuple[list[str], tuple[int, ...]], results: Path) -> list[str]:
    methods, seeds = sweep
    return command(methods, results, "--seeds", ",".join(map(str, seeds)))


@pytest.mark.parametrize("stagger", [0.0, pytest.param(1.5, marks=pytest.mark.slow)], ids=["together", "staggered"])
def test_two_sweeps_into_one_folder_train_each_cell_once(tmp_path, reference, stagger):
    """Sweep 1 (mv-unet, lf-net; seed 0) and sweep 2 (lf-net; seeds 0, 1) start together into one folder: lf-net seed 0
    is in both, and each has a cell of its own."""
    results = tmp_path / "shared"
    t0 = time.perf_counter()
    first = start(sweep_of(SWEEP_1, results), tmp_path / "sweep1")
    try:
        time.sleep(stagger)
        second = start(sweep_of(SWEEP_2, results), tmp_path / "sweep2")
        try:
            codes = finish(first), finish(second)
        finally:
            kill(second)
    finally:
        kill(first)
    seconds = time.perf_counter() - t0
    outs = [(tmp_path / f"sweep{i}.out").read_text() for i in (1, 2)]
    errs = [(tmp_path / f"sweep{i}.err").read_text() for i in (1, 2)]
    assert codes == (0, 0), errs
    cells = {first.pid: all_cells(*SWEEP_1), second.pid: all_cells(*SWEEP_2)}
    union = list(dict.fromkeys(cells[first.pid] + cells[second.pid]))
    assert len(union) == 3 and set(cells[first.pid]) & set(cells[second.pid]) == {("lf-net", 0)}
    trainer = {}
    for m, s in union:
        info = manifest(results, m, s)
        assert info["status"] == "done"
        trainer[m, s] = info["pid"]
        assert (m, s) in cells.get(info["pid"], []), f"{m}/seed-{s} trained by pid {info['pid']}, not by a sweep that has it"
        assert_cell_reproduced(results, reference.results, m, s)  # one log row per stage epoch: trained once
    for pid, mine in cells.items():
        trained = sum(trainer[c] == pid for c in mine)
        out = outs[0] if pid == first.pid else outs[1]
        assert counts(out) == (2, trained, 2 - trained, 0), out  # a shared cell the other sweep trained: "already done"
    assert_same_rows(collected(results), reference.cells_rows(union))
    assert unreadable(results, checkpoints=True) == []
    assert temp_files(results) == []
    shared = "sweep 1" if trainer["lf-net", 0] == first.pid else "sweep 2"
    print(
        f"\nconcurrent writers ({'together' if not stagger else f'sweep 2 {stagger} s later'}): {seconds:.1f} s; "
        f"sweep 1 trained {sum(p == first.pid for p in trainer.values())}, sweep 2 {sum(p == second.pid for p in trainer.values())}"
        f" of 3 cells; shared cell lf-net/seed-0 trained by {shared}; rows lost 0"
    )


# --------------------------------------------------------------------------- 3. non-finite loss


def test_nan_loss_fails_only_that_cell_with_a_clear_reason(tmp_path, reference_sweep, reference):
    """cm-unet (NaN loss) first, then mv-unet: seed 0 finished earlier (copied from the reference), seed 1 trains after
    both failures."""
    results = reference_sweep.copy(tmp_path / "nan", cells=[("mv-unet", 0)])
    kept = (cell(results, "mv-unet", 0) / "metrics.parquet").read_bytes()
    out = run(["cm-unet", "mv-unet"], results, "--set", "cm-unet.alpha=nan")
    assert out.returncode == 1, out.stderr
    bad = "cm-unet@alpha=nan"
    lines = [line for line in out.stderr.strip().splitlines() if not line.startswith("note: ")]  # the lfnet pool's sparseness
    assert len(lines) == 2 and "Traceback" not in out.stderr, out.stderr
    for s, line in zip(SEEDS, lines):
        assert line.startswith(f"failed: mnist-5k/lfnet/protocol/{bad}/seed-{s}: ") and "non-finite loss" in line, line
        info = manifest(results, bad, s)
        assert info["status"] == "failed" and "non-finite loss" in info["reason"], info.get("reason")
        assert not (cell(results, bad, s) / "metrics.parquet").exists()
        assert not list((cell(results, bad, s) / "checkpoints").glob("*.pt"))  # no stage finished
        log = pd.read_csv(cell(results, bad, s) / "train_log.csv")
        assert log["train_loss"].isna().all(), log  # the flag really made the loss NaN
    assert counts(out.stdout) == (4, 1, 1, 2)
    assert (cell(results, "mv-unet", 0) / "metrics.parquet").read_bytes() == kept
    assert manifest(results, "mv-unet", 1)["status"] == "done"
    assert_cell_reproduced(results, reference.results, "mv-unet", 1)
    assert_same_rows(collected(results), reference.rows(["mv-unet"]))
    assert unreadable(results) == [] and temp_files(results) == []


# --------------------------------------------------------------------------- 4. full disk, read-only disk


def mount_tmpfs(path: Path, size_bytes: int) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    out = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(path)], capture_output=True, text=True, timeout=30
    )
    if out.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {out.stderr.strip()}")


def remount(path: Path, options: str) -> None:
    out = subprocess.run(["mount", "-o", f"remount,{options}", str(path)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr


def umount(path: Path) -> None:
    if subprocess.run(["umount", str(path)], capture_output=True, timeout=30).returncode != 0:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


def remount_read_only_now(path: Path, proc: subprocess.Popen, timeout: float = 120) -> tuple[bool, int]:
    """Spin on mount(2) MS_REMOUNT|MS_RDONLY until it succeeds; (done, attempts).

    Linux refuses (EBUSY) while any file on the filesystem is open for writing, and a running cell
    holds its claim's lock file open O_RDWR, so this lands between two cells or as the run collects.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    target, deadline, attempts = os.fsencode(path), time.perf_counter() + timeout, 0
    while proc.poll() is None and time.perf_counter() < deadline:
        attempts += 1
        if libc.mount(b"tmpfs", target, b"tmpfs", 32 | 1, None) == 0:  # MS_REMOUNT | MS_RDONLY
            return True, attempts
        err = ctypes.get_errno()
        if err != errno.EBUSY:
            raise OSError(err, os.strerror(err), str(path))
    return False, attempts


@dataclass
class DiskFault:
    first: subprocess.CompletedProcess  # the run that hit the fault
    done: list[tuple[str, int]]  # cells finished in it
    temporaries: list[str]  # temporary files it left
    unreadable: list[str]
    kept: dict[tuple[str, int], bytes]  # finished cells' metrics.parquet after the fault
    status: dict[tuple[str, int], str]  # each cell's manifest status after the fault
    second: subprocess.CompletedProcess  # the rerun once the disk is fine again
    results: Path
    note: str = ""


def statuses(results: Path) -> dict[tuple[str, int], str]:
    return {
        (m, s): manifest(results, m, s).get("status", "") for m, s in all_cells(KILLED) if (cell(results, m, s) / "manifest.json").is_file()
    }


@pytest.fixture(scope="module")
def full_disk(tmp_path_factory, reference):
    """Results on a tmpfs with room for one mv-unet cell (its checkpoint is ~20 MB), then remounted big enough."""
    mnt = tmp_path_factory.mktemp("full-disk")
    one_cell = reference.cell_bytes("mv-unet", 0)
    mount_tmpfs(mnt, one_cell * 3 // 2)
    try:
        results = mnt / "results"
        first = run(KILLED, results)
        done = done_cells(results, KILLED)
        kept = {c: (cell(results, *c) / "metrics.parquet").read_bytes() for c in done}
        fault = DiskFault(first, done, temp_files(results), unreadable(results, checkpoints=True), kept, statuses(results), None, results)
        remount(mnt, f"size={40 * one_cell}")
        fault.second = run(KILLED, results)
        print(
            f"\nfull disk ({one_cell * 3 // 2 / 2**20:.0f} MiB): exit {first.returncode}, {len(done)} of 4 cells done; "
            f"stderr:\n{first.stderr.strip()}"
        )
        yield fault
    finally:
        umount(mnt)


def test_full_disk_fails_without_half_written_files_and_resumes(full_disk, reference):
    f = full_disk
    assert f.first.returncode != 0, f.first.stdout
    assert 1 <= len(f.done) < 4, f.done  # sized so the first cell fits and the rest do not
    assert f.temporaries == [] and f.unreadable == [], (f.temporaries, f.unreadable)
    for m, s in set(all_cells(KILLED)) - set(f.done):
        assert f"failed: mnist-5k/lfnet/protocol/{m}/seed-{s}: " in f.first.stderr
    assert f.second.returncode == 0, f.second.stderr
    assert counts(f.second.stdout) == (4, 4 - len(f.done), len(f.done), 0)
    for c, data in f.kept.items():
        assert (cell(f.results, *c) / "metrics.parquet").read_bytes() == data  # finished cells untouched
    assert_same_rows(collected(f.results), reference.rows(KILLED))
    for m, s in all_cells(KILLED):
        assert_cell_reproduced(f.results, reference.results, m, s)
    assert temp_files(f.results) == [] and unreadable(f.results, checkpoints=True) == []


def test_full_disk_failure_is_recorded_with_its_cause(full_disk):
    f = full_disk
    lines = [line for line in f.first.stderr.splitlines() if line.startswith("failed: ")]
    assert lines and all("No space left on device" in line for line in lines), f.first.stderr
    for m, s in set(all_cells(KILLED)) - set(f.done):
        assert f.status.get((m, s)) == "failed", f.status


@pytest.fixture(scope="module")
def read_only(tmp_path_factory, reference):
    """A sweep whose results tmpfs turns read-only once its first cell is done; then rw again and a rerun."""
    mnt = tmp_path_factory.mktemp("read-only")
    mount_tmpfs(mnt, 40 * reference.cell_bytes("mv-unet", 0))
    logs = tmp_path_factory.mktemp("read-only-logs")
    proc = None
    try:
        results = mnt / "results"
        proc = start(command(KILLED, results), logs / "sweep")
        first_done = cell(results, KILLED[0], SEEDS[0]) / "metrics.parquet"
        deadline = time.perf_counter() + TIMEOUT
        while proc.poll() is None and not first_done.exists() and time.perf_counter() < deadline:
            time.sleep(0.01)
        switched, attempts = remount_read_only_now(mnt, proc)
        done_at_switch = len(done_cells(results, KILLED))
        code = finish(proc)
        first = subprocess.CompletedProcess(proc.args, code, (logs / "sweep.out").read_text(), (logs / "sweep.err").read_text())
        done = done_cells(results, KILLED)
        kept = {c: (cell(results, *c) / "metrics.parquet").read_bytes() for c in done}
        fault = DiskFault(first, done, temp_files(results), unreadable(results, checkpoints=True), kept, statuses(results), None, results)
        fault.note = f"read-only after {attempts} EBUSY tries, with {done_at_switch} of 4 cells done" if switched else ""
        remount(mnt, "rw")
        fault.second = run(KILLED, results)
        print(f"\nread-only mid-run: {fault.note or 'never switched'}; exit {code}; stderr:\n{first.stderr.strip()}")
        yield fault
    finally:
        if proc is not None and proc.poll() is None:
            kill(proc)
        umount(mnt)


@pytest.mark.slow
def test_read_only_disk_mid_run_fails_keeps_finished_cells_and_resumes(read_only, reference):
    f = read_only
    if not f.note:
        pytest.skip("the sweep finished before the tmpfs could be remounted read-only")
    assert f.first.returncode != 0, f.first.stdout
    assert "Read-only file system" in f.first.stderr, f.first.stderr
    assert f.done, "the first cell was done before the switch"
    assert f.temporaries == [] and f.unreadable == [], (f.temporaries, f.unreadable)
    assert f.second.returncode == 0, f.second.stderr
    assert counts(f.second.stdout) == (4, 4 - len(f.done), len(f.done), 0)
    for c, data in f.kept.items():
        assert (cell(f.results, *c) / "metrics.parquet").read_bytes() == data
    assert_same_rows(collected(f.results), reference.rows(KILLED))
    for m, s in all_cells(KILLED):
        assert_cell_reproduced(f.results, reference.results, m, s)
    assert temp_files(f.results) == [] and unreadable(f.results, checkpoints=True) == []


@pytest.mark.slow
def test_read_only_disk_error_is_one_clear_line(read_only):
    if not read_only.note:
        pytest.skip("the sweep finished before the tmpfs could be remounted read-only")
    err = read_only.first.stderr
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Read-only file system" in errors[0], err
