"""`bench predict`: a finished cell's weights run on new images of its dataset's folder layout (datasets/adapters/folder.py).

A cell's result weights are `checkpoints/result.pt` where a reading chose weights other than those training ended on
(the `trajectory` budget's selection), else its last stage's file, which the harness writes after restoring what the
budget restores. The method is rebuilt from config.json as `resolve.load_trained` rebuilds it, so no training data is
read. Images are read and scaled as the folder adapter reads them, padded (centred, zeros) to a multiple of 16 for the
U-Net's four poolings, and the outputs cropped back.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

import methods
from bench import store
from bench.run import resolve
from bench.train import inference
from datasets import DataError
from datasets.adapters import folder

MULTIPLE = 16  # the shared U-Net halves the size four times


def load_method(cell: Path) -> tuple[methods.Method, dict]:
    """A finished cell's method with its result weights (`resolve.load_trained`, then `checkpoints/result.pt` where a
    reading chose other weights than its last stage's), and its config.json; DataError for a cell that cannot predict."""
    if not (cell / store.METRICS).is_file():
        raise DataError(
            f"{cell}: not a finished cell (no {store.METRICS}); give a cell folder runs/<dataset>/<raters>/<noise>/<method>/seed-<s> whose run finished"
        )
    try:
        method = resolve.load_trained(cell)
    except FileNotFoundError as e:  # e.g. a cell kept by scripts/keep_cells.sh, without its checkpoints
        raise DataError(f"{e}; its weights are not kept: retrain the cell to predict") from None
    except ValueError as e:
        raise DataError(str(e)) from None
    chosen = cell / store.CHECKPOINTS / store.RESULT_WEIGHTS
    if chosen.is_file():
        method.load_state_dict(torch.load(chosen, map_location="cpu", weights_only=True))
    return method, store.read_config(cell)


def pad(images: np.ndarray) -> tuple[np.ndarray, tuple[slice, slice]]:
    """(S, C, H, W) zero-padded, centred, to multiples of `MULTIPLE`, and the slices that crop the output back."""
    h, w = images.shape[2:]
    H, W = -(-h // MULTIPLE) * MULTIPLE, -(-w // MULTIPLE) * MULTIPLE
    top, left = (H - h) // 2, (W - w) // 2
    out = np.zeros((*images.shape[:2], H, W), np.float32)
    out[:, :, top : top + h, left : left + w] = images
    return out, (slice(top, top + h), slice(left, left + w))


def predict_images(cell: Path, images_dir: Path, out_dir: Path, device: torch.device, samples: int | None = None) -> list[Path]:
    """Every case of `images_dir` (`<case>_0000<ending>`, …) through the cell: in `out_dir`, per case, `<case><ending>` (the
    label map), `<case>_prob-<class><ending>` for each class but the background, `<case>_rater-<name><ending>` for a
    method's per-rater outputs and `<case>_sample-<m><ending>` for a sampler's M samples. Returns the files written."""
    manifest = store.read_manifest(cell)
    data_root = Path(manifest.get("data_root", ""))
    if not (data_root / "dataset.json").is_file():
        raise DataError(
            f"{cell}: its dataset {store.cell_at(cell).dataset} is not a folder:PATH dataset (or {data_root} moved); bench predict reads images as your own folder's adapter does"
        )
    layout = folder.read_layout(data_root)
    cases = folder.cases_in(images_dir, layout.ending)
    if not cases:
        raise DataError(f"{images_dir}: no <case>_0000{layout.ending} files (the layout of {data_root}/imagesTr)")
    method, config = load_method(cell)
    seed, precision = store.cell_at(cell).seed, "auto"  # bf16 where this machine runs it natively, as a cell does
    n_samples = samples or (config.get("options") or {}).get("samples") or 16
    written = []
    for case in cases:
        images, meta = folder.case_images(layout, images_dir, case)
        if images.shape[1] != method.spec.in_channels:
            raise DataError(f"{images_dir}/{case}_*: {images.shape[1]} channel(s), the cell's network takes {method.spec.in_channels}")
        padded, (rows, cols) = pad(images)
        probs = inference.predict_proba(method, padded, device=device, precision=precision, seed=seed)[:, :, rows, cols]
        out = {case: probs.argmax(1).astype(np.uint8)}
        for k, name in enumerate(layout.classes[1:], start=1):
            out[f"{case}_prob-{name}"] = probs[:, k].astype(np.float32)
        extra = inference.predict_outputs(method, padded, n_samples=n_samples, seed=seed, device=device, precision=precision)
        for k, name in enumerate(config.get("raters") or []) if "rater_outputs" in extra else []:
            out[f"{case}_rater-{name}"] = extra["rater_outputs"][:, k, rows, cols].astype(np.uint8)
        if type(method).predict_samples is not methods.Method.predict_samples and "samples" in extra:
            for m in range(extra["samples"].shape[1]):
                out[f"{case}_sample-{m}"] = extra["samples"][:, m, rows, cols].astype(np.uint8)
        written += [folder.write_like(a, meta, out_dir / f"{name}{layout.ending}", layout.axis) for name, a in out.items()]
    return written
