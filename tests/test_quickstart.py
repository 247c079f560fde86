"""The README's Quickstart table runs in order as written on a fresh clone: each `python -m bench` row in a fresh folder,
with tiny sizes added to every `run` row (one method, one seed, 32 training and 8 test images; 2 steps where the row
sets no cap of its own, so the smoke row keeps its 20). Before: the smoke row wrote its 20-step cells into `results/`,
and the next rows there were refused for changed options."""

from __future__ import annotations

import re
import shlex

from conftest import REPO, run_bench

TINY = ["--methods", "mv-unet", "--seeds", "0", "--train-size", "32", "--test-size", "8", "--backend", "sequential", "--no-progress"]


def quickstart_rows() -> list[list[str]]:
    """The commands of the Quickstart's table, in order (`python -m bench …` rows only: the test suite is this)."""
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Quickstart") : readme.index("## Commands")]
    return [shlex.split(c)[3:] for c in re.findall(r"^\| `(python -m bench[^`]*)` \|", section, re.M)]


def test_the_quickstart_rows_run_in_order_on_a_fresh_folder(tmp_path, monkeypatch):
    rows = quickstart_rows()
    assert [r[0] for r in rows] == ["run", "report", "run", "run"], rows  # smoke, its report, the dry run, the full run
    assert "--results" in rows[0], "the smoke run writes into a folder of its own"
    monkeypatch.chdir(tmp_path)  # a fresh clone's relative `results/`
    for row in rows:
        args = row
        if row[0] == "run":
            args = [*row, *TINY, *([] if "--max-steps" in row else ["--max-steps", "2"])]
        out = run_bench(*args)
        assert out.returncode == 0, f"{' '.join(row)}:\n{out.stderr}"
    assert (tmp_path / "results" / "smoke" / "report").is_dir() and (tmp_path / "results" / "metrics.parquet").is_file()
