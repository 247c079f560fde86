"""Score finished cells again from their saved predictions, and move cells of old results folders to the current layout.

Training never depends on the evaluation reference, so a cell scored against one reference needs no
retraining to be scored against all of them: its `predictions.npz` and its dataset's test split are enough.
A sampler's consensus depends on how many prior draws it averages and how they are drawn; `reread_cell` reads it
again from the cell's weights where the read-out its method gives now differs from the one the cell was read with.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

import methods
from bench import store
from bench.evaluate import predictions
from bench.files import UnreadableFile
from bench.results_folder import ResultsFolder
from bench.run import resolve, split_cache
from bench.run.cell import readout_spread
from bench.run.readings import score_cell
from bench.train import inference
from datasets import DataError, get_dataset


def migrate(results: Path) -> tuple[list[tuple[Path, Path]], list[tuple[Path, str]]]:
    """Move each old-layout cell (`runs/<dataset>/<reference>/noise-<x>/<method>/seed-<s>`) to its current path.

    An old cell trained at noise 1 (the protocol) becomes `runs/<dataset>/<style>/protocol/…`; its
    manifest's cell record is rewritten. Cells at another noise level (the old radius scale, which
    is not a target Average DSC) and second copies of one training (the same cell under two
    references) are left where they are. Returns (moved: (old, new)), (left: (old, why)).
    """
    moved, left = [], []
    folder = ResultsFolder(results)
    for old in folder.old_layout:
        info = folder.manifests[old]
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


def predicted_test(results: Path, cell, case_ids: np.ndarray, data_root: Path):
    """The test cases a cell predicted, in its order, from its dataset's test split."""
    splits = split_cache.load_splits(split_cache.DataKey.of_cell(cell, data_root))
    where = {c: i for i, c in enumerate(splits.test.case_ids)}
    missing = [c for c in case_ids if c not in where]
    if missing:
        raise ValueError(
            f"{len(missing)} predicted case(s) (e.g. {missing[0]}) are not in {cell.dataset}'s test split; the data "
            f"changed since the cell ran: `{store.retrain_command(results, cell, force=True)}` retrains it"
        )
    return splits.test.subset(np.array([where[c] for c in case_ids]))


def rescore_cell(results: Path, folder: Path, info: dict, data_root: Path) -> None:
    """Score one finished cell against every reference from its predictions; rewrites its metrics and reliability bins."""
    cell = store.cell_of(info)
    probs, case_ids, outputs = predictions.read_predictions(folder)
    test = predicted_test(results, cell, case_ids, data_root)
    empty = store.read_config(folder).get("options", {}).get("empty_pair", "one")  # the rule the cell was run under
    rows, bins = score_cell(cell, probs, test, outputs=outputs, empty=empty)
    info["rescored"] = time.time()
    store.finish_cell(folder, info, rows, bins)


READOUT = ("consensus_draws", "consensus_estimator")  # a drawing consensus's read-out (methods/latent.py)


def readout_now(cell, trains: str) -> dict:
    """The read-out the cell's method gives now: the registry defaults of the method it trained (config.json's `trains`)
    and the cell's own parameters."""
    config = methods.resolve_config(trains, cell.ref.kwargs)
    return {key: getattr(config, key) for key in READOUT}


def reread_cell(results: Path, folder: Path, info: dict, data_root: Path) -> bool:
    """Read a finished sampler's consensus again from its weights where the read-out its method gives now (number of
    prior draws, estimator) differs from the one it was read with, then score it again; False where it already was, or
    where its method draws no consensus.

    Same precision and threads as its training; the consensus record (`manifest.json` → `consensus`, with the draw-seed-1
    read-out beside it) says what it was read with before. The predictions are written first: a re-read killed before
    its metrics are is done again by the next. The manifest's `selection` keeps the read-out it was made with.
    Raises FileNotFoundError naming the folder where the cell's weights are gone (kept cells keep none).
    """
    cell, config = store.cell_of(info), store.read_config(folder)
    if "consensus_draws" not in config.get("method_config", {}):
        return False  # a method whose consensus draws nothing
    had = {"consensus_estimator": "mc", **{k: v for k, v in config["method_config"].items() if k in READOUT}}
    now = readout_now(cell, config["trains"])
    if had == now:
        return False
    if not any((folder / store.CHECKPOINTS).glob("stage-*.pt")):
        raise FileNotFoundError(
            f"{folder / store.CHECKPOINTS}: no weights to read the consensus again from (a kept cell keeps "
            f"none); `{store.retrain_command(results, cell, force=True)}` trains it again at today's read-out"
        )
    method = resolve.load_trained(folder)
    method.consensus_draws, method.consensus_estimator = now["consensus_draws"], now["consensus_estimator"]
    probs, case_ids, outputs = predictions.read_predictions(folder)
    test = predicted_test(results, cell, case_ids, data_root)
    precision = "bf16" if info.get("precision") == "torch.bfloat16" else "fp32"
    device = torch.device("cpu")
    with torch_threads(config.get("options", {}).get("threads", 1)):
        probs = inference.predict_proba(method, test.images, device=device, precision=precision, seed=cell.seed)
        spread = readout_spread(method, probs, test, device, precision, cell.seed)
    predictions.write_predictions(folder / store.PREDICTIONS, probs, case_ids, outputs)
    config["method_config"].update(now)
    store.write_config(folder, config)
    info["consensus"] = {**spread, "reread": {"at": time.time(), "had": info.get("consensus", had)}}
    rescore_cell(results, folder, info, data_root)
    return True


@contextlib.contextmanager
def torch_threads(n: int):
    """Torch's CPU threads set to n inside (a cell's read-out depends on them, as its training did)."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def rescore_all(results: Path, data_root: Path, progress: bool = True, reread: bool = False) -> list[tuple[str, str, bool]]:
    """Re-score every finished cell (skipping one another process holds); returns (cell, error or "", damaged) per cell.
    With `reread`, a sampler's consensus is first read again from its weights where its read-out changed (`reread_cell`).

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
                    if not (reread and reread_cell(results, folder, info, data_root)):
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
