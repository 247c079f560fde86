"""Small file helpers under the results store (bench/store.py) and the training state: atomic writes, flock'd locks,
JSON and tables, whether a writer process is alive. They know no file name: callers pass paths.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path

import pandas as pd


class PlatformError(RuntimeError):
    """This system lacks what claims need (fcntl.flock)."""


def flock_module():
    """`fcntl`, imported here and not at the top so that reading results works on any system; only claims need it."""
    try:
        import fcntl
    except ImportError:
        raise PlatformError(
            "claiming cells needs a POSIX system (Linux, macOS) for fcntl.flock, which this one lacks; on Windows, run the benchmark under WSL"
        ) from None
    return fcntl


@contextmanager
def locked(path: Path, wait: bool = True):
    """Hold an exclusive flock on `path` (created if missing); yields False instead of waiting when `wait` is False and it is held.

    The kernel releases an flock when its process dies, so a killed run never leaves a stale lock.
    The file is opened read-only, so an open lock does not keep its file system from going read-only.
    """
    fcntl = flock_module()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


@contextmanager
def atomic(path: Path):
    """Yield a temporary path beside `path`; on success it replaces `path` in one step, on failure it is removed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:  # e.g. a read-only file system: keep the error that got us here
            pass


def write_json(path: Path, obj: dict) -> None:
    with atomic(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, default=str) + "\n")


def write_text(path: Path, text: str) -> None:
    with atomic(path) as tmp:
        tmp.write_text(text)


def read_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def write_table(path: Path, df: pd.DataFrame) -> None:
    """Parquet or CSV by suffix, atomically."""
    with atomic(path) as tmp:
        if path.suffix == ".parquet":
            df.to_parquet(tmp, index=False)
        else:
            df.to_csv(tmp, index=False)


def alive(pid: int) -> bool:
    """Whether a process of this host has this id (a temporary file named after it may still be written)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
