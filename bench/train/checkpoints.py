"""A cell's training state on disk: stage checkpoints (finished and in progress) and the training log.

A finished stage's weights replace its in-progress file and the earlier stages' (its file holds the whole method);
every write goes through a temporary file and one rename (`bench.files.atomic`), so a killed cell leaves either the
old or the new state, never a torn one, and a rerun resumes exactly where it was (`resume`, `trim_log`).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import torch

from bench.files import atomic
from bench.store import checkpoint_path, earlier_checkpoints, held_path
from methods.base import Method


def save_checkpoint(method: Method, k: int, name: str, checkpoint_dir: Path | None, partial: dict | None = None) -> None:
    """A finished stage's weights, or (`partial`) the state of a stage in progress. A finished stage drops its partial file
    and the earlier stages' weights, which its own file holds too: a cell keeps one stage's weights on disk."""
    if checkpoint_dir is None:
        return
    write_state(
        {"model": method.state_dict(), **partial} if partial else method.state_dict(),
        checkpoint_path(checkpoint_dir, k, name, partial is not None),
    )
    if partial is None:
        checkpoint_path(checkpoint_dir, k, name, partial=True).unlink(missing_ok=True)
        for earlier in earlier_checkpoints(checkpoint_dir, k):
            earlier.unlink(missing_ok=True)


def save_held(readings: dict[str, dict], k: int, name: str, checkpoint_dir: Path | None) -> None:
    """The readings a finished stage held, so that a run resumed after it (a later stage, or its read-outs) still has
    them: without them its result would fall back to the weights training ended on."""
    if checkpoint_dir is not None:
        write_state(readings, held_path(checkpoint_dir, k, name))


def load_held(k: int, name: str, checkpoint_dir: Path | None) -> dict[str, dict]:
    """What `save_held` kept for stage k ({} where nothing was: a cell checkpointed before it existed)."""
    if checkpoint_dir is None or not (path := held_path(checkpoint_dir, k, name)).is_file():
        return {}
    return torch.load(path, map_location="cpu", weights_only=True)


def save_result(method: Method, path: Path) -> None:
    """The weights a cell's result is read from, where they are not its last stage's (`bench predict` reads them)."""
    write_state(method.state_dict(), path)


def write_state(state: dict, path: Path) -> None:
    buffer = io.BytesIO()
    torch.save(state, buffer)  # in memory first: a full disk then fails in a plain write
    with atomic(path) as tmp:
        tmp.write_bytes(buffer.getbuffer())


def resume(method: Method, stages, checkpoint_dir: Path | None) -> tuple[int, dict | None]:
    """Load the saved state: returns (index of the first stage still to train, its mid-stage state or None)."""
    if checkpoint_dir is None:
        return 0, None
    first = 0
    for k in reversed(range(len(stages))):
        path = checkpoint_path(checkpoint_dir, k, stages[k].name)
        if path.is_file():
            method.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
            first = k + 1
            break
    if first < len(stages):
        path = checkpoint_path(checkpoint_dir, first, stages[first].name, partial=True)
        if path.is_file():
            state = torch.load(path, map_location="cpu", weights_only=True)
            method.load_state_dict(state.pop("model"))
            return first, state
    return first, None


def trim_log(log_path: Path | None, keep_stages: set[str], partial: tuple[str, int] | None = None) -> None:
    """Drop log rows of work a resumed run redoes: stages that did not finish, past the mid-stage checkpoint `partial` = (stage, step)."""
    if log_path is None or not log_path.is_file():
        return
    with log_path.open(newline="") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []  # read here: a kill before the first row leaves an empty file, and a closed one cannot be read
        rows = [
            r
            for r in reader
            if r["stage"] in keep_stages or (partial and r["stage"] == partial[0] and int(r["step"]) <= partial[1] and r["event"] == "eval")
        ]
    write_log(log_path, header, rows)


def logged_stops(log_path: Path | None) -> dict[str, dict]:
    """The stop rows of the log, by stage, with numbers as numbers and empty fields left out (a run killed before its
    first row may have left an empty file)."""
    if log_path is None or not log_path.is_file():
        return {}
    with log_path.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r.get("event") == "stop"]
    ints = ("step", "epoch", "best_step", "restored_step", "rule_stop", "rule_restored")
    text = ("stage", "event", "stop", "reason", "rule_how")
    return {
        r["stage"]: {k: v if k in text else int(float(v)) if k in ints else float(v) for k, v in r.items() if v != "" and k != "best"}
        for r in rows
    }


def write_log(log_path: Path, header: list[str], rows: list[dict]) -> None:
    with atomic(log_path) as tmp, tmp.open("w", newline="") as f:  # replaced in one step: a kill keeps the old log
        if rows:
            writer = csv.DictWriter(f, fieldnames=header, restval="")
            writer.writeheader()
            writer.writerows(rows)


def append_log(log_path: Path | None, row: dict) -> None:
    """One CSV row per evaluation or stage stop; a row with new columns rewrites the file with the wider header."""
    if log_path is None:
        return
    header, rows = None, []
    if log_path.exists():
        with log_path.open(newline="") as f:
            header = next(csv.reader(f), None)  # None: a run killed before its first row left an empty file
    if header is not None and set(row) - set(header):
        with log_path.open(newline="") as f:
            rows = list(csv.DictReader(f))
        write_log(log_path, header + [k for k in row if k not in header], [*rows, row])
        return
    new = header is None
    with log_path.open("w" if new else "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=header or list(row), restval="")
        if new:
            writer.writeheader()
        writer.writerow(row)
