"""Small file helpers under the results store (bench/store.py) and the training state: atomic writes, flock'd locks,
JSON and tables, whether a writer process is alive. They know no file name: callers pass paths.
"""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from datasets.contract import atomic  # the one atomic writer, low enough for the adapters' caches too


class PlatformError(RuntimeError):
    """This system lacks what claims need (fcntl.flock)."""


class UnreadableFile(Exception):
    """A file that is there but cannot be read as what it should be (empty, truncated, overwritten). The message is one
    line: the file, what is wrong and, once the results store has added it (`with_repair`), the command that repairs it."""

    def __init__(self, path: Path, problem: str, repair: str = ""):
        self.path, self.problem, self.repair = Path(path), problem, repair
        super().__init__(f"{path}: {problem}" + (f"; {repair}" if repair else ""))

    def with_repair(self, repair: str) -> UnreadableFile:
        return UnreadableFile(self.path, self.problem, repair)


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


def write_json(path: Path, obj: dict) -> None:
    with atomic(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, default=str) + "\n")


def write_text(path: Path, text: str) -> None:
    with atomic(path) as tmp:
        tmp.write_text(text)


def read_json(path: Path) -> dict:
    """A JSON object; {} where the file is missing; UnreadableFile where it is empty, truncated or not a JSON object."""
    if not path.is_file():
        return {}
    try:
        text = path.read_text()
        if not text.strip():
            raise UnreadableFile(path, "empty (0 bytes of JSON)")
        obj = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UnreadableFile(path, f"not valid JSON, truncated or overwritten ({e})") from None
    if not isinstance(obj, dict):
        raise UnreadableFile(path, f"holds a JSON {type(obj).__name__}, not an object")
    return obj


def read_table(path: Path, columns: list[str] | None = None, **csv_options) -> pd.DataFrame:
    """A Parquet or CSV table by suffix (`columns`: those it must hold); UnreadableFile where it is empty, truncated,
    overwritten or lacks a column. A CSV that does not end with a line break was cut mid-row: every writer here ends one."""
    try:
        if path.stat().st_size == 0:
            raise UnreadableFile(path, "empty (0 bytes)")
        if path.suffix == ".parquet":
            table = pd.read_parquet(path)
        else:
            with path.open("rb") as f:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    raise UnreadableFile(path, "truncated (its last row is cut off)")
            table = pd.read_csv(path, **csv_options)
    except (UnreadableFile, FileNotFoundError):
        raise
    except Exception as e:  # pyarrow's and pandas' many parse errors (ArrowInvalid, ParserError, UnicodeDecodeError, …)
        kind = "a Parquet" if path.suffix == ".parquet" else "a CSV"
        raise UnreadableFile(path, f"not {kind} table, truncated or overwritten ({reason(e)})") from None
    missing = [c for c in columns or [] if c not in table.columns]
    if missing:
        raise UnreadableFile(path, f"lacks the column(s) {', '.join(missing)}")
    return table


def reason(error: Exception) -> str:
    """A parser's error in a few words: its type and first sentence (pyarrow's run to several)."""
    text = str(error).splitlines()[0].split(". ")[0] if str(error) else ""
    return f"{type(error).__name__}: {text[:100]}" if text else type(error).__name__


def check_table(path: Path) -> None:
    """UnreadableFile where a table is damaged, reading no more than it must: a Parquet file's footer, a CSV whole."""
    if path.suffix != ".parquet" or not path.is_file() or path.stat().st_size == 0:
        read_table(path)
        return
    import pyarrow.parquet as pq

    try:
        pq.read_metadata(path)
    except Exception as e:  # ArrowInvalid and kin: a truncated or overwritten file has no footer
        raise UnreadableFile(path, f"not a Parquet table, truncated or overwritten ({reason(e)})") from None


def check_zip(path: Path, members: tuple[str, ...]) -> None:
    """UnreadableFile where an .npz archive is empty, truncated or overwritten (its directory, at its end, is read) or
    lacks one of `members` (array names)."""
    import zipfile

    try:
        if path.stat().st_size == 0:
            raise UnreadableFile(path, "empty (0 bytes)")
        with zipfile.ZipFile(path) as z:
            names = {n.removesuffix(".npy") for n in z.namelist()}
    except zipfile.BadZipFile as e:
        raise UnreadableFile(path, f"not an .npz archive, truncated or overwritten ({e})") from None
    missing = [m for m in members if m not in names]
    if missing:
        raise UnreadableFile(path, f"lacks the array(s) {', '.join(missing)}")


def write_table(path: Path, df: pd.DataFrame) -> None:
    """Parquet or CSV by suffix, atomically."""
    with atomic(path) as tmp:
        if path.suffix == ".parquet":
            df.to_parquet(tmp, index=False)
        else:
            df.to_csv(tmp, index=False)


def unwritable(folder: Path) -> str:
    """Why files cannot be written into `folder` ("" when they can), found without creating anything: a temporary file
    in it, or in its nearest existing parent where it does not exist yet."""
    existing = Path(folder).absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file"
    try:
        tempfile.TemporaryFile(dir=existing).close()
    except OSError as e:
        return str(e.strerror or e)
    return ""


def alive(pid: int) -> bool:
    """Whether a process of this host has this id (a temporary file named after it may still be written)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
