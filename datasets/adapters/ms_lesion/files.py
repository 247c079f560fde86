"""Reading the ISBI 2015 MS lesion challenge's files: finding every scan's NIfTI volumes and decoding them.

Holds the file-name patterns, `Scan` (one time point's files), `find_scans`, `read_nifti` and the per-volume
brain z-score (`zscore_brain`).

What a user has after downloading the challenge's training data (docs/datasets.md#ms-lesion-on-disk-layout): per subject
``training/trainingNN/preprocessed/trainingNN_TT_{flair,mprage,pd,t2}_pp.nii`` and
``training/trainingNN/masks/trainingNN_TT_mask{1,2}.nii``, 181×217×181 at 1 mm; NN = subject
(01 … 05), TT = time point (21 scans in all). Files are found by regex over a recursive walk of
``<data-root>/ms-lesion/``, as ``.nii`` or ``.nii.gz``. The test subjects (``testNN``) have no
masks and are skipped.
"""

from __future__ import annotations

import os
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from datasets.contract import DataError

IMAGE_RE = re.compile(r"^(?P<subject>(?:training|test)\d{2})_(?P<tp>\d{2})_(?P<contrast>flair|mprage|pd|t2)_pp\.nii(?:\.gz)?$")
MASK_RE = re.compile(r"^(?P<subject>training\d{2})_(?P<tp>\d{2})_mask(?P<rater>[12])\.nii(?:\.gz)?$")


# ---------------------------------------------------------------------------------------
# Finding and reading the files
# ---------------------------------------------------------------------------------------


@dataclass
class Scan:
    """One time point of one subject: its contrast files and rater masks."""

    subject: str
    timepoint: str
    images: dict[str, Path] = field(default_factory=dict)  # contrast -> path
    masks: dict[str, Path] = field(default_factory=dict)  # "mask1" / "mask2" -> path

    @property
    def scan_id(self) -> str:
        return f"{self.subject}_{self.timepoint}"


def find_scans(root: Path) -> list[Scan]:
    """All scans under `root` (recursive walk), sorted by subject and time point."""
    scans: dict[tuple[str, str], Scan] = {}
    for folder, _, files in sorted(os.walk(root, followlinks=True)):
        for name in sorted(files):
            image, mask = IMAGE_RE.match(name), MASK_RE.match(name)
            if not (image or mask):
                continue
            m = image or mask
            scan = scans.setdefault((m["subject"], m["tp"]), Scan(m["subject"], m["tp"]))
            slot, key = (scan.images, m["contrast"]) if image else (scan.masks, f"mask{m['rater']}")
            path = Path(folder) / name
            if key in slot:
                raise DataError(f"ms-lesion: two files for {scan.scan_id} {key}: {slot[key]} and {path}; keep one")
            slot[key] = path
    return [scans[k] for k in sorted(scans)]


def read_nifti(path: Path) -> tuple[np.ndarray, tuple[float, float, float]]:
    """A 3-D NIfTI volume as float32 (X, Y, Z) in nibabel's axis order, and its voxel size (mm)."""
    import nibabel as nib  # lazy: only this adapter needs it
    from nibabel.filebasedimages import ImageFileError

    try:
        image = nib.load(str(path))
        data = np.asarray(image.dataobj, dtype=np.float32)
        zooms = tuple(round(float(z), 6) for z in image.header.get_zooms()[:3])
    except (OSError, EOFError, ValueError, zlib.error, ImageFileError) as e:
        reason = (str(e).splitlines() or [type(e).__name__])[0]
        reason = re.sub(r' (from|of) ("[^"]*"|\S*)$', "", reason)  # nibabel repeats the path
        raise DataError(f"{path}: unreadable or truncated NIfTI ({reason}); download it again") from None
    if data.ndim == 4 and data.shape[3] == 1:
        data = data[..., 0]
    if data.ndim != 3:
        raise DataError(f"{path}: expected a 3-D volume, got shape {data.shape}")
    if not np.isfinite(data).all():
        raise DataError(f"{path}: contains NaN or infinite values; download it again")
    return data, zooms


def zscore_brain(volume: np.ndarray) -> np.ndarray:
    """(X, Y, Z) float32 -> same, z-scored with the mean and std of the non-zero (brain) voxels."""
    brain = volume[volume != 0]
    if brain.size == 0:
        return volume.astype(np.float32)
    std = float(brain.std())
    return ((volume - float(brain.mean())) / (std if std > 0 else 1.0)).astype(np.float32)
