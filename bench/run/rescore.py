"""Score finished cells again from their saved predictions, and move cells of old results folders to the current layout.

Training never depends on the evaluation reference, so a cell scored against one reference needs no
retraining to be scored against all of them: its `predictions.npz` and its dataset's test split are enough.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from bench import store
from bench.files import UnreadableFile
from bench.run import split_cache
from bench.run.cell import score_cell
from datasets import DataError, get_dataset


def migrate(results: Path) -> tuple[list[tuple[Path, Path]], list[tuple[Path, str]]]:
    """Move each old-layout cell (`runs/<dataset>/<reference>/noise-<x>/<method>/seed-<s>`) to its current path.

    An old cell trained at noise 1 (the protocol) becomes `runs/<dataset>/<style>/protocol/…`; its
    manifest's cell record is rewritten. Cells at another noise level (the old radius scale, which
    is not a target Average DSC) and second copies of one training (the same cell under two
    references) are left where they are. Returns (moved: (old, new)), (left: (old, why)).
    """
    moved, left = [], []
    for old in store.old_layout_cells(results):
        info = store.read_manifest(old)
        cell = info["cell"]
        if float(cell["noise"]) != 1.0:
            left.append((old, f"noise {cell['noise']} was a radius scale, not a target Average DSC; retrain it with --noise-levels"))
            continue
        try:
            spec = get_dataset(cell["dataset"])
            style = spec.first_style or spec.rater_styles[0]
        except DataError as e:
            left.append((old, str(e)))
            continue
        new_cell = store.Cell(cell["dataset"], style, "protocol", cell["method"], int(cell["seed"]))
        new = store.cell_dir(results, new_cell)
        if new.exists():
            left.append((old, f"the same training is already at {new.relative_to(results)}"))
            continue
        new.parent.mkdir(parents=True, exist_ok=True)
        os.rename(old, new)
        old.with_name(old.name + ".lock").unlink(missing_ok=True)
        info["cell"] = new_cell.record()
        info.setdefault("moved_from", str(old.relative_to(results)))
        store.write_manifest(new, info)
        moved.append((old, new))
    return moved, left


def rescore_cell(results: Path, folder: Path, info: dict, data_root: Path) -> None:
    """Score one finished cell against every reference from its predictions; rewrites its metrics and reliability bins."""
    cell = store.cell_of(info)
    splits = split_cache.load_splits(split_cache.DataKey.of_cell(cell, data_root))
    probs, case_ids, outputs = store.read_predictions(folder)
    where = {c: i for i, c in enumerate(splits.test.case_ids)}
    missing = [c for c in case_ids if c not in where]
    if missing:
        raise ValueError(f"{len(missing)} predicted case(s) (e.g. {missing[0]}) are not in {cell.dataset}'s test split; the data "
                         f"changed since the cell ran: `{store.retrain_command(results, cell, force=True)}` retrains it")  # fmt: skip
    test = splits.test.subset(np.array([where[c] for c in case_ids]))
    empty = store.read_config(folder).get("options", {}).get("empty_pair", "one")  # the rule the cell was run under
    rows, bins = score_cell(cell, probs, test, outputs=outputs, empty=empty)
    info["rescored"] = time.time()
    store.finish_cell(folder, info, rows, bins)


def rescore_all(results: Path, data_root: Path, progress: bool = True) -> list[tuple[str, str, bool]]:
    """Re-score every finished cell (skipping one another process holds); returns (cell, error or "", damaged) per cell.

    A cell whose metrics or reliability bins are damaged is rebuilt from its predictions; one whose manifest, config,
    training log or predictions are damaged cannot be, and fails naming the file and the `bench run` that retrains it.
    """
    cells = store.finished(results)
    out = []
    bars = progress and sys.stderr.isatty()
    for folder, info, found in tqdm(cells, desc="rescore", unit="cell", disable=not bars):
        cell = store.cell_at(folder)
        with store.claim(results, cell) as held:
            if not held:
                out.append((str(cell), "running in another process", False))
                continue
            if found is not None and found.path.name not in (store.METRICS, store.CALIBRATION_BINS):
                out.append((str(cell), str(found), True))
            else:
                try:
                    rescore_cell(results, folder, info, data_root)
                    left = store.damage(folder)  # rescoring rewrote the scores; another file may still be damaged
                    out.append((str(cell), str(left) if left else "", left is not None))
                except UnreadableFile as e:
                    out.append((str(cell), str(e), True))
                except (DataError, ValueError, OSError) as e:
                    out.append((str(cell), f"{type(e).__name__}: {e}", False))
        if not bars:
            print(f"{'failed' if out[-1][1] else 'rescored'} {cell}", flush=True)  # the reason follows in the closing lines
    return out
