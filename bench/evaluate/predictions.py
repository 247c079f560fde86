"""A cell's test predictions on disk (`store.PREDICTIONS`): its probabilities in 1/255 steps, case ids and a method's
other outputs (samples, per-rater outputs), which `bench rescore` and the reproduction page score again without training."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.files import UnreadableFile, atomic, reason
from bench.store import PREDICTIONS, repair

OUTPUTS = ("samples", "rater_outputs")  # a method's outputs beside its probabilities (bench.train.inference.predict_outputs)


def read_predictions(folder: Path) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """A cell's test probabilities (N, L, H, W) float32 in [0, 1], case ids and its other outputs ({"samples",
    "rater_outputs"}: class indices (N, M, H, W), where the method has them), as `write_predictions` stored them."""
    path = folder / PREDICTIONS
    if not path.is_file():
        raise UnreadableFile(path, "missing (deleted?)", repair(folder, PREDICTIONS))
    try:
        with np.load(path, allow_pickle=False) as f:
            outputs = {key: f[key] for key in OUTPUTS if key in f}
            return f["probs"].astype(np.float32) / 255, f["case_ids"], outputs
    except Exception as e:  # zipfile.BadZipFile, EOFError, ValueError, KeyError, zlib.error: a damaged archive
        raise UnreadableFile(path, f"cannot read the predictions ({reason(e)})", repair(folder, PREDICTIONS)) from None


def write_predictions(path: Path, probs: np.ndarray, case_ids: np.ndarray, outputs: dict[str, np.ndarray] | None = None) -> None:
    """Test probabilities (N, L, H, W) in uint8 (1/255 steps), and the samples and per-rater outputs (class indices)."""
    with atomic(path) as tmp:
        np.savez_compressed(tmp, probs=np.round(probs * 255).astype(np.uint8), case_ids=case_ids, **(outputs or {}))
