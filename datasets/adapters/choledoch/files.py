"""Reading the Multidimensional Choledoch Database's files: ENVI hyperspectral cubes and label PNGs.

Holds the ENVI reader (`read_envi_header`, `envi_data_file`, `read_envi`: any of the three interleaves,
either byte order, the stored data type) and `read_mask` (a label PNG as a binary cancer mask).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from PIL import Image

from datasets.contract import DataError

#: ENVI `data type` codes (complex types 6 and 9 are not used by hyperspectral cameras).
ENVI_DTYPES = {1: "u1", 2: "i2", 3: "i4", 4: "f4", 5: "f8", 12: "u2", 13: "u4", 14: "i8", 15: "u8"}
DATA_EXTENSIONS = (".raw", ".img", ".dat", "")  # in order of preference


# ---------------------------------------------------------------------------------------
# ENVI
# ---------------------------------------------------------------------------------------


def read_envi_header(path: Path) -> dict[str, str]:
    """An ENVI header's `key = value` fields, keys lower-cased; `{…}` values may span lines."""
    try:
        text = path.read_text(encoding="latin-1")
    except OSError as e:
        raise DataError(f"{path}: unreadable ({e.strerror}); copy it again") from None
    if not text.lstrip().upper().startswith("ENVI"):
        raise DataError(f"{path}: not an ENVI header (the first line must be 'ENVI'); copy it again")
    # A braced value is matched whole, so `=` inside it (e.g. in a description) starts no key.
    fields = re.findall(r"^[ \t]*([^=\n{}]+?)[ \t]*=[ \t]*(\{[^}]*\}|[^\n]*)", text, flags=re.MULTILINE)
    return {key.strip().lower(): value.strip() for key, value in fields}


def envi_data_file(hdr: Path) -> Path | None:
    """The data file of header `hdr`: `<stem>.raw|.img|.dat|<stem>`, or `<data file>.hdr`'s data file."""
    stem = hdr.name[: -len(hdr.suffix)]
    if Path(stem).suffix.lower() in DATA_EXTENSIONS[:-1] and (hdr.parent / stem).is_file():
        return hdr.parent / stem  # `scene.raw.hdr` names `scene.raw`
    by_suffix = {}
    for path in hdr.parent.glob(glob_escape(stem) + "*"):
        rest = path.name[len(stem) :]
        if path.is_file() and rest.lower() in DATA_EXTENSIONS:
            by_suffix[rest.lower()] = path
    return next((by_suffix[ext] for ext in DATA_EXTENSIONS if ext in by_suffix), None)


def glob_escape(text: str) -> str:
    return re.sub(r"([\[\]*?])", r"[\1]", text)


def read_envi(hdr: Path) -> np.ndarray:
    """The cube of an ENVI header in its stored data type: (bands, lines, samples), native byte order."""
    fields = read_envi_header(hdr)
    try:
        lines, samples, bands = (int(fields[k]) for k in ("lines", "samples", "bands"))
        code = int(fields["data type"])
        offset = int(fields.get("header offset", "0"))
        big_endian = int(fields.get("byte order", "0")) == 1
    except (KeyError, ValueError) as e:
        raise DataError(f"{hdr}: ENVI header lacks a valid {e} field (needs lines, samples, bands, data type); copy it again") from None
    interleave = fields.get("interleave", "bsq").lower()
    if code not in ENVI_DTYPES:
        raise DataError(f"{hdr}: unsupported ENVI data type {code} (supported: {sorted(ENVI_DTYPES)})")
    if interleave not in ("bsq", "bil", "bip"):
        raise DataError(f"{hdr}: unknown interleave {interleave!r} (expected bsq, bil or bip)")
    data = envi_data_file(hdr)
    if data is None:
        stem = hdr.name[: -len(hdr.suffix)]
        raise DataError(f"{hdr}: its ENVI data file ({stem}.raw, .img, .dat or {stem}) is missing; copy it next to the header")
    dtype = np.dtype(ENVI_DTYPES[code]).newbyteorder(">" if big_endian else "<")
    count = lines * samples * bands
    size = data.stat().st_size
    if size < offset + count * dtype.itemsize:
        raise DataError(f"{data}: truncated ({size} bytes, the header {hdr.name} needs {offset + count * dtype.itemsize}); copy it again")
    flat = np.fromfile(data, dtype=dtype, count=count, offset=offset)
    # The three ENVI orders, each brought to (bands, lines, samples).
    if interleave == "bsq":
        cube = flat.reshape(bands, lines, samples)
    elif interleave == "bil":
        cube = flat.reshape(lines, bands, samples).transpose(1, 0, 2)
    else:
        cube = flat.reshape(lines, samples, bands).transpose(2, 0, 1)
    return np.ascontiguousarray(cube, dtype=dtype.newbyteorder("="))


# ---------------------------------------------------------------------------------------
# Label masks
# ---------------------------------------------------------------------------------------


def read_mask(path: Path) -> np.ndarray:
    """A label PNG → (H, W) uint8 {0, 1}: any non-zero value (1, 128, 255, palette index) is cancer."""
    try:
        with Image.open(path) as image:
            image.load()
            # Palette and grey PNGs hold the label itself; colour ones mark it in any channel.
            array = np.asarray(image.convert("RGB") if image.mode in ("RGB", "RGBA", "LA") else image)
    except (OSError, ValueError) as e:
        raise DataError(f"{path}: unreadable PNG ({e}); copy it again") from None
    if array.ndim == 3:
        array = array.max(axis=2)
    if len(np.unique(array)) > 3:
        raise DataError(f"{path}: not a label mask ({len(np.unique(array))} distinct values; expected 0/1, 0/255 or 0/128/255)")
    return (array > 0).astype(np.uint8)
