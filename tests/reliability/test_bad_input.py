"""Bad-input matrix: the CLI and every adapter refuse bad input with exit 2, one `error:` line, nothing written.

Each case builds a tiny dataset in its exact on-disk format (tests/fixtures), breaks one thing,
runs `python -m bench run` on it and checks the contract of the README ("2 for bad input, one line
on stderr saying what to fix"): exit status 2; stderr is exactly one line, starting with `error: `
and naming the file or value (a distinctive substring); no traceback; the results folder was not
created (or, where it existed, not changed).

The CLI runs in-process (`conftest.run_bench`): a fraction of a second a case instead of 3 s for a fresh
interpreter; a warning shown before the error counts as a second line. `test_a_real_subprocess_agrees` runs one
case through `run_cli` (a real `python -m bench`) to keep the two honest. Every run uses a tiny
budget, so a case that wrongly starts training still ends in seconds.

Cases marked xfail need a fix in bench/ (the CLI), not in the adapters; each reason says which.
"""

from __future__ import annotations

import gzip
import pickle
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import nibabel as nib
import numpy as np
import pandas as pd
import pytest
import tifffile
import torch
from conftest import run_bench, run_cli
from fixtures.make_choledoch import make_choledoch
from fixtures.make_cm_folder import make_cm_folder
from fixtures.make_lidc import make_lidc_crops, make_lidc_pickle
from fixtures.make_ms_lesion import ZOOMS, make_ms_lesion
from fixtures.make_riga import make_mrnet, make_raw
from PIL import Image
from test_datasets import make_mnist, write_idx

TINY = ["--max-steps", "2", "--train-size", "8", "--test-size", "4", "--methods", "mv-unet", "--seeds", "0", "--no-progress"]


# ---------------------------------------------------------------------------------------
# Running the CLI and checking the refusal
# ---------------------------------------------------------------------------------------


def snapshot(path: Path) -> dict[str, bytes] | None:
    """Every file under `path` with its content (None where `path` does not exist)."""
    if path.is_file():
        return {"": path.read_bytes()}
    if not path.exists():
        return None
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def assert_refused(out: subprocess.CompletedProcess, expected: str) -> None:
    code, stdout, stderr = out.returncode, out.stdout, out.stderr
    assert "Traceback" not in stderr + stdout, stderr
    assert code == 2, f"exit {code}, stderr:\n{stderr}"
    assert stderr.endswith("\n") and stderr.count("\n") == 1, f"not exactly one line:\n{stderr}"
    assert stderr.startswith("error: "), stderr
    assert expected in stderr, f"{expected!r} not in {stderr!r}"


# ---------------------------------------------------------------------------------------
# Small helpers to break files
# ---------------------------------------------------------------------------------------


def truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def find(root: Path, name: str) -> Path:
    (path,) = [p for p in root.rglob(name) if p.is_file()]
    return path


def save_nifti(volume: np.ndarray, path: Path) -> None:
    nib.save(nib.Nifti1Image(volume, np.diag([*ZOOMS, 1.0])), str(path))


def rewrite_pickle(path: Path, change: Callable[[dict], None]) -> None:
    with open(path, "rb") as f:
        content = pickle.load(f)
    change(content[next(iter(content))])  # the first entry
    path.write_bytes(pickle.dumps(content))


class RunsCode:
    """An object whose unpickling would call os.system: the restricted unpickler must refuse it."""

    def __reduce__(self):
        import os

        return (os.system, ("echo pwned",))


# ---------------------------------------------------------------------------------------
# Cases: setup(tmp) -> (CLI arguments, values for the expected message)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    setup: Callable[[Path], tuple[list[str], dict]]
    expected: str  # a substring of the error line; `{key}` is filled from the setup's dict
    xfail: str = ""  # "needs bench/ fix: …" where the fix is outside datasets/


def cli(*args: str) -> Callable[[Path], tuple[list[str], dict]]:
    """Arguments only, on the embedded default (nothing is read before they are checked)."""

    def setup(tmp: Path):
        (tmp / "file.txt").write_text("not a folder")
        return [a.replace("{tmp}", str(tmp)) for a in args], {}

    return setup


def on(dataset: str, make: Callable, mutate: Callable | None = None, *extra: str) -> Callable[[Path], tuple[list[str], dict]]:
    """Write `dataset`'s fixture under tmp/data with `make`, break it with `mutate(data_root, fixture)`."""

    def setup(tmp: Path):
        data = tmp / "data"
        info = make(data)
        names = mutate(data, info) if mutate else None  # a dict of names for the message, or anything else
        return ["--dataset", dataset, "--data-root", str(data), *extra], names if isinstance(names, dict) else {}

    return setup


def empty_folder(dataset: str, folder: str) -> Callable[[Path], tuple[list[str], dict]]:
    return on(dataset, lambda data: (data / folder).mkdir(parents=True))


def chol(data: Path) -> dict:
    return make_choledoch(data, "spectr")


# mnist (official IDX files) --------------------------------------------------------------


def mnist_constant_images(data: Path, _) -> None:
    path = data / "mnist" / "t10k-images-idx3-ubyte"
    raw = path.read_bytes()
    path.write_bytes(raw[:16] + bytes(len(raw) - 16))  # the header kept, every pixel 0


def mnist_fewer_labels(data: Path, _) -> None:
    path = data / "mnist" / "t10k-labels-idx1-ubyte"
    write_idx(path, np.zeros(7, np.uint8), 0x801, compress=False)


# ms-lesion (ISBI 2015 NIfTI) ---------------------------------------------------------------


def ms_mask(values: Callable[[np.ndarray], np.ndarray]) -> Callable:
    def mutate(data: Path, info: dict) -> None:
        save_nifti(values(info["scans"]["training01_01"]["mask1"]), info["paths"]["training01_01"]["mask1"])

    return mutate


def ms_flair(values: Callable[[np.ndarray], np.ndarray]) -> Callable:
    def mutate(data: Path, info: dict) -> None:
        save_nifti(values(info["scans"]["training01_01"]["flair"].copy()), info["paths"]["training01_01"]["flair"])

    return mutate


def with_nan(volume: np.ndarray) -> np.ndarray:
    volume[5, 5, 5] = np.nan
    return volume


def ms_no_lesion_in_test_subjects(data: Path, info: dict) -> None:
    for scan_id, paths in info["paths"].items():
        if not scan_id.startswith("training01"):  # training02 and training03 are the test subjects
            for key in ("mask1", "mask2"):
                save_nifti(np.zeros_like(info["scans"][scan_id][key]), paths[key])


# choledoch (ENVI cubes + PNG masks) -------------------------------------------------------


def chol_file(name: str) -> Callable[[Path, dict], Path]:
    return lambda data, info: info["hdrs"][name].with_suffix(".raw")


def chol_mask(array: np.ndarray) -> Callable:
    return lambda data, info: Image.fromarray(array).save(info["folder"] / "MDC" / "Mask" / "050625-20x-roi4.png")


def chol_cube(change: Callable[[np.ndarray], None]) -> Callable:
    def mutate(data: Path, info: dict) -> None:
        path = info["hdrs"]["042145-20x-roi1"].with_suffix(".raw")  # float32, bil, little-endian
        cube = np.fromfile(path, "<f4")
        change(cube)
        cube.tofile(path)

    return mutate


def chol_one_slide(data: Path, info: dict) -> None:
    (info["folder"] / "MDC" / "four_fold.json").unlink()
    for name, hdr in info["hdrs"].items():
        if not name.startswith("042145"):  # keep the two scenes of slide 042145
            for path in hdr.parent.glob(hdr.stem + "*"):
                path.unlink()


# lidc (Kohl crops, Knegt pickle) -----------------------------------------------------------


def crop_png(name: str, array: np.ndarray | None = None, truncated: bool = False) -> Callable:
    def mutate(data: Path, _) -> None:
        path = find(data / "lidc", name)
        if truncated:
            truncate(path)
        else:
            Image.fromarray(array).save(path)

    return mutate


def pickle_entry(change: Callable[[dict], None]) -> Callable:
    return lambda data, _: rewrite_pickle(data / "lidc" / "data_lidc.pickle", change)


def set_mask(r: int, value: np.ndarray | Callable) -> Callable[[dict], None]:
    def change(entry: dict) -> None:
        entry["masks"][r] = value(entry["masks"][r]) if callable(value) else value

    return change


def mask_with_nan(mask: np.ndarray) -> np.ndarray:
    out = mask.astype(np.float32)
    out[0, 0] = np.nan
    return out


def image_with_nan(entry: dict) -> None:
    entry["image"] = entry["image"].copy()
    entry["image"][3, 3] = np.nan


# riga (raw marked copies, MR-Net DiscRegion) -------------------------------------------------


def riga_ink_removed_from_test(data: Path, _) -> None:
    """Every Magrabia marked copy replaced by its clean prime: no rater contour can be recovered."""
    for folder in ("Magrabia/Magrabia/MagrabiaMale", "Magrabia/MagrabiFemale"):
        prime = data / "riga" / folder / "image1prime.tif"
        for copy in (data / "riga" / folder).glob("[Ii]mage1-*.tif"):
            shutil.copy(prime, copy)


def riga_shorter_copy(data: Path, _) -> None:
    path = data / "riga" / "MESSIDOR" / "image1-2.tif"
    Image.fromarray(np.asarray(Image.open(path))[:-10]).save(path)


MRNET_MASK = "MESSIDOR/Rater4/image2-Rater4.png"


def mrnet_mask(change: Callable[[np.ndarray], np.ndarray]) -> Callable:
    def mutate(data: Path, _) -> None:
        path = data / "riga" / "DiscRegion" / MRNET_MASK
        Image.fromarray(change(np.asarray(Image.open(path)))).save(path)

    return mutate


def mrnet_csv_without(column: str) -> Callable:
    def mutate(data: Path, _) -> None:
        path = data / "riga" / "DiscRegion" / "Glaucoma_multirater_Magrabia.csv"
        pd.read_csv(path).drop(columns=[column]).to_csv(path)

    return mutate


# cm-folder (CM-UNet TIFF layout) ------------------------------------------------------------


def cm_file(part: str, kind: str, k: int = 0) -> Callable[[dict], Path]:
    return lambda info: sorted(info["paths"][part][kind].values())[k]


def cm_write(part: str, kind: str, array: Callable[[np.ndarray], np.ndarray], k: int = 0) -> Callable:
    def mutate(data: Path, info: dict) -> dict:
        path = cm_file(part, kind, k)(info)
        value = array(tifffile.imread(path))
        tifffile.imwrite(path, value, photometric="rgb" if value.ndim == 3 else None)
        return {"name": path.name}

    return mutate


def cm_missing(part: str, kind: str, k: int) -> Callable:
    def mutate(data: Path, info: dict) -> dict:
        path = cm_file(part, kind, k)(info)
        path.unlink()
        return {"name": path.name}

    return mutate


def cm_truncated(part: str, kind: str) -> Callable:
    def mutate(data: Path, info: dict) -> dict:
        path = cm_file(part, kind)(info)
        truncate(path)
        return {"name": path.name}

    return mutate


def cm_constant_inputs(data: Path, info: dict) -> None:
    for part in ("train", "val", "test"):
        for path in info["paths"][part]["Gaussian"].values():
            tifffile.imwrite(path, np.zeros((28, 28, 3), np.float32), photometric="rgb")


def cm_empty_test(data: Path, info: dict) -> None:
    for path in (info["root"] / "test").rglob("*.tif"):
        path.unlink()


def cm_duplicate_gt(data: Path, info: dict) -> dict:
    path = cm_file("train", "GT")(info)
    (path.parent / "copy").mkdir()
    shutil.copy(path, path.parent / "copy" / path.name)
    return {"id": path.name.split("_")[0]}


def with_pixel_nan(image: np.ndarray) -> np.ndarray:
    image = image.copy()
    image[3, 3] = np.nan
    return image


# ---------------------------------------------------------------------------------------

BENCH_FIX = "needs bench/ fix: "

CASES = [
    # --- the CLI: names and flag values, checked before any data is read -------------------
    Case("unknown-method", cli("--methods", "mv-unet,nope"), "unknown method 'nope'; known: mv-unet"),
    Case("unknown-dataset", cli("--dataset", "MNIST"), "unknown dataset 'MNIST'; known: mnist-5k"),
    Case("seed-negative", cli("--seeds=-1"), "--seeds must be ≥ 0, got -1"),
    Case("seed-non-numeric", cli("--seeds", "0,x"), "--seeds '0,x': expected comma-separated ints"),
    Case("seed-fraction", cli("--seeds", "1.5"), "--seeds '1.5'"),
    Case("seeds-empty", cli("--seeds", ","), "--seeds is empty"),
    Case("noise-negative", cli("--noise-levels=-0.5"), "--noise-levels: noise level -0.5 is not 'protocol' or a target Average DSC"),
    Case("noise-non-numeric", cli("--noise-levels", "high"), "--noise-levels: noise level 'high' is neither 'protocol' nor a number"),
    Case("noise-nan", cli("--noise-levels", "nan"), "--noise-levels: noise level nan is not 'protocol' or a target Average DSC"),
    Case("noise-one", cli("--noise-levels", "1"), "noise level 1 is not 'protocol' or a target Average DSC strictly between 0 and 1"),
    Case(
        "noise-protocol-twice",
        cli("--noise-levels", "protocol,PROTOCOL"),
        "--noise-levels protocol,PROTOCOL: protocol given more than once",
    ),
    Case(
        "raters-unknown-style",
        cli("--raters", "nope"),
        "--raters nope: mnist-5k: unknown rater style 'nope'; this dataset has lfnet, cm, cm-fit, morpho",
    ),
    Case("max-steps-zero", cli("--max-steps", "0"), "--max-steps must be ≥ 1, got 0"),
    Case("max-steps-negative", cli("--max-steps=-2"), "--max-steps must be ≥ 1, got -2"),
    Case("train-size-zero", cli("--train-size", "0"), "--train-size must be ≥ 1, got 0"),
    Case("test-size-negative", cli("--test-size=-4"), "--test-size must be ≥ 1, got -4"),
    Case("results-under-a-file", cli("--results", "{tmp}/file.txt/results"), "cannot write the results folder"),
    Case("max-steps-non-numeric", cli("--max-steps", "abc"), "--max-steps"),
    Case("budget-unknown", cli("--budget", "fast"), "fast"),
    Case("methods-empty", cli("--methods", ""), "--methods"),
    Case(
        "noise-inf-second-level",
        on("mnist", make_mnist, None, "--noise-levels", "protocol,inf"),
        "--noise-levels: noise level inf is not 'protocol' or a target Average DSC",
    ),
    Case("oracle-without-gt", on("lidc", make_lidc_crops, None, "--methods", "oracle"), "oracle"),
    Case("binary-method-on-3-classes", on("riga", make_mrnet, None, "--methods", "staple-unet"), "staple-unet"),
    # --- data root and dataset folders ------------------------------------------------------
    Case("mnist-root-missing", on("mnist", lambda data: None), "mnist: missing train-images-idx3-ubyte.gz"),
    Case("ms-root-missing", on("ms-lesion", lambda data: None), "ms-lesion/ not found"),
    Case("choledoch-root-is-a-file", on("choledoch", lambda data: data.write_text("x")), "is a file; point --data-root at the folder"),
    Case(
        "lidc-folder-is-a-file", on("lidc", lambda data: (data.mkdir(), (data / "lidc").write_text("x"))), "lidc/ is a file, not a folder"
    ),
    Case("riga-folder-empty", empty_folder("riga", "riga"), "riga: no imageNprime.<tif|jpg> or Glaucoma_multirater_*.csv"),
    Case("cm-folder-empty", empty_folder("cm-folder", "cm-folder"), "cm-folder: no <id>_<Kind>.tif files"),
    # --- mnist: IDX files -------------------------------------------------------------------
    Case(
        "mnist-truncated",
        on("mnist", make_mnist, lambda d, i: truncate(d / "mnist/t10k-images-idx3-ubyte", 0.9)),
        "t10k-images-idx3-ubyte: truncated",
    ),
    Case(
        "mnist-corrupt-gzip",
        on("mnist", make_mnist, lambda d, i: (d / "mnist/train-images-idx3-ubyte.gz").write_bytes(b"not gzip")),
        "train-images-idx3-ubyte.gz: unreadable",
    ),
    Case(
        "mnist-empty-file",
        on("mnist", make_mnist, lambda d, i: (d / "mnist/train-labels-idx1-ubyte.gz").write_bytes(gzip.compress(b""))),
        "train-labels-idx1-ubyte.gz: not an IDX file",
    ),
    Case("mnist-label-count", on("mnist", make_mnist, mnist_fewer_labels), "t10k-labels-idx1-ubyte: 7 labels for 20 test images"),
    Case(
        "mnist-constant-images", on("mnist", make_mnist, mnist_constant_images), "t10k-images-idx3-ubyte: every value of the 20 digits is 0"
    ),
    # --- ms-lesion: NIfTI volumes -----------------------------------------------------------
    Case(
        "ms-truncated-gz",
        on("ms-lesion", make_ms_lesion, lambda d, i: truncate(i["paths"]["training02_01"]["flair"])),
        "training02_01_flair_pp.nii.gz: unreadable or truncated NIfTI",
    ),
    Case(
        "ms-empty-file",
        on("ms-lesion", make_ms_lesion, lambda d, i: i["paths"]["training01_02"]["mask1"].write_bytes(b"")),
        "training01_02_mask1.nii: unreadable or truncated NIfTI",
    ),
    Case(
        "ms-rater-mask-missing",
        on("ms-lesion-real", make_ms_lesion, lambda d, i: i["paths"]["training01_02"]["mask2"].unlink()),
        "training01_02 has no training01_02_mask2.nii",
    ),
    Case(
        "ms-mask-shape",
        on("ms-lesion", make_ms_lesion, ms_mask(lambda m: m[:30])),
        "training01_01_mask1.nii is (30, 40, 32), image",
    ),
    Case(
        "ms-mask-value-7",
        on("ms-lesion", make_ms_lesion, ms_mask(lambda m: m * np.uint8(7))),
        "training01_01_mask1.nii: mask values {0, 7}",
    ),
    Case(
        "ms-mask-probabilities",
        on("ms-lesion-real", make_ms_lesion, ms_mask(lambda m: m * np.float32(0.3))),
        "training01_01_mask1.nii: mask values {0, 0.3}",
    ),
    Case("ms-image-nan", on("ms-lesion", make_ms_lesion, ms_flair(with_nan)), "training01_01_flair_pp.nii: contains NaN"),
    Case(
        "ms-image-constant",
        on("ms-lesion", make_ms_lesion, ms_flair(np.zeros_like)),
        "training01_01_flair_pp.nii: every value of the volume is 0",
    ),
    Case("ms-one-subject", on("ms-lesion", lambda data: make_ms_lesion(data, n_subjects=1)), "found scans of 1 subject(s) (training01)"),
    Case(
        "ms-empty-test-split",
        on("ms-lesion", make_ms_lesion, ms_no_lesion_in_test_subjects),
        "the test subjects (training02, training03) have no axial slices",
    ),
    Case(
        "ms-noise-inf",
        on("ms-lesion", make_ms_lesion, None, "--noise-levels", "inf"),
        "--noise-levels: noise level inf is not 'protocol' or a target Average DSC",
    ),
    Case(
        "ms-real-noise-level",
        on("ms-lesion-real", make_ms_lesion, None, "--noise-levels", "0.5"),
        "ms-lesion-real has real raters, so there is no noise level to set (got 0.5); use --noise-levels protocol",
    ),
    # --- choledoch: ENVI cubes, PNG masks, fold file -----------------------------------------
    Case(
        "choledoch-truncated-cube",
        on("choledoch", chol, lambda d, i: truncate(chol_file("050625-20x-roi4")(d, i))),
        "050625-20x-roi4.raw: truncated",
    ),
    Case(
        "choledoch-corrupt-header",
        on("choledoch", chol, lambda d, i: i["hdrs"]["050625-20x-roi4"].write_text("garbage\n")),
        "050625-20x-roi4.hdr: not an ENVI header",
    ),
    Case(
        "choledoch-mask-missing",
        on("choledoch", chol, lambda d, i: (i["folder"] / "MDC/Mask/050625-20x-roi4.png").unlink()),
        "050625-20x-roi4.hdr has no mask PNG",
    ),
    Case("choledoch-mask-shape", on("choledoch", chol, chol_mask(np.zeros((30, 40), np.uint8))), "050625-20x-roi4.png: mask is 30×40"),
    Case(
        "choledoch-mask-is-a-photo",
        on("choledoch", chol, chol_mask(np.arange(32 * 40, dtype=np.uint8).reshape(32, 40))),
        "050625-20x-roi4.png: not a label mask (256 distinct values",
    ),
    Case(
        "choledoch-cube-nan",
        on("choledoch", chol, chol_cube(lambda c: c.__setitem__(100, np.nan))),
        "042145-20x-roi1.hdr: the cube holds NaN",
    ),
    Case(
        "choledoch-cube-constant",
        on("choledoch", chol, chol_cube(lambda c: c.__setitem__(slice(None), 0.5))),
        "042145-20x-roi1.hdr: every band is constant",
    ),
    Case("choledoch-one-slide", on("choledoch", chol, chol_one_slide), "choledoch: 1 slides are too few"),
    Case(
        "choledoch-corrupt-folds",
        on("choledoch", chol, lambda d, i: (i["folder"] / "MDC/four_fold.json").write_text("{not json")),
        "four_fold.json: not SpecTr's fold file",
    ),
    # --- lidc: Kohl crops --------------------------------------------------------------------
    Case(
        "lidc-reader-mask-missing",
        on("lidc", make_lidc_crops, lambda d, i: find(d / "lidc", "z-12.5_c0_l3.png").unlink()),
        "lacks the reader mask",
    ),
    Case(
        "lidc-mask-shape",
        on("lidc", make_lidc_crops, crop_png("z-12.5_c0_l2.png", np.zeros((170, 180), np.uint8))),
        "z-12.5_c0_l2.png: mask is 170×180",
    ),
    Case("lidc-truncated-png", on("lidc", make_lidc_crops, crop_png("z-12.5_c0.png", truncated=True)), "z-12.5_c0.png: unreadable PNG"),
    Case(
        "lidc-no-test-split",
        on("lidc", make_lidc_crops, lambda d, i: shutil.rmtree(d / "lidc/lidc_crops/test")),
        "none under a test/ folder",
    ),
    Case(
        "lidc-grey-image-as-mask",
        on("lidc", make_lidc_crops, crop_png("z-12.5_c0_l2.png", np.random.default_rng(0).integers(0, 256, (180, 180), np.uint8))),
        "z-12.5_c0_l2.png: not a reader mask",
    ),
    Case(
        "lidc-constant-crop",
        on("lidc", make_lidc_crops, crop_png("z-12.5_c0.png", np.zeros((180, 180), np.uint8))),
        "z-12.5_c0.png: every value of the CT crop is 0",
    ),
    # --- lidc: Knegt pickle ------------------------------------------------------------------
    Case(
        "pickle-runs-code",
        on("lidc", make_lidc_pickle, pickle_entry(lambda e: e.__setitem__("series_uid", RunsCode()))),
        "refused to unpickle the global",
    ),
    Case(
        "pickle-truncated",
        on("lidc", make_lidc_pickle, lambda d, i: truncate(d / "lidc/data_lidc.pickle")),
        "data_lidc.pickle: unreadable or truncated pickle",
    ),
    Case(
        "pickle-three-readers",
        on("lidc", make_lidc_pickle, pickle_entry(lambda e: e.__setitem__("masks", e["masks"][:3]))),
        "has 3 masks, expected 4",
    ),
    Case(
        "pickle-mask-shape",
        on("lidc", make_lidc_pickle, pickle_entry(set_mask(1, np.zeros((64, 128), np.uint8)))),
        "mask 1 is (64, 128) uint8, the image (128, 128)",
    ),
    Case("pickle-image-nan", on("lidc", make_lidc_pickle, pickle_entry(image_with_nan)), "has no finite 2-D numeric 'image'"),
    Case(
        "pickle-image-0-255",
        on("lidc", make_lidc_pickle, pickle_entry(lambda e: e.__setitem__("image", e["image"] * 255))),
        "expected [0, 1]",
    ),
    Case(
        "pickle-mask-value-7",
        on("lidc", make_lidc_pickle, pickle_entry(set_mask(0, lambda m: m * np.uint8(7)))),
        "mask 0: mask values {0, 7}",
    ),
    Case("pickle-mask-nan", on("lidc", make_lidc_pickle, pickle_entry(set_mask(0, mask_with_nan))), "mask 0: mask values {0, 1, nan}"),
    Case(
        "pickle-too-few-patients",
        on("lidc", make_lidc_pickle, lambda d, i: (d / "lidc/more/data_lidc_part2.pkl").unlink()),
        "lidc: 2 patient(s) are too few",
    ),
    # --- riga: raw release (marked copies) ------------------------------------------------------
    Case(
        "riga-rater-file-missing",
        on("riga", make_raw, lambda d, i: (d / "riga/MESSIDOR/image2-4.tif").unlink()),
        "image2-4.(tif|jpg) is missing",
    ),
    Case(
        "riga-truncated-copy",
        on("riga", make_raw, lambda d, i: truncate(d / "riga/Magrabia/MagrabiFemale/image1-3.tif")),
        "image1-3.tif: unreadable or truncated image",
    ),
    Case("riga-copy-shape", on("riga", make_raw, riga_shorter_copy), "image1-2.tif: shape (374, 416, 3) differs from image1prime.tif"),
    Case("riga-no-test-subset", on("riga", make_raw, lambda d, i: shutil.rmtree(d / "riga/Magrabia")), "riga: no Magrabia images"),
    Case("riga-no-contours-in-test", on("riga", make_raw, riga_ink_removed_from_test), "none of the 2 test (Magrabia) image(s)"),
    # --- riga: MR-Net DiscRegion ------------------------------------------------------------
    Case(
        "mrnet-csv-column",
        on("riga", make_mrnet, mrnet_csv_without("maskName")),
        "Glaucoma_multirater_Magrabia.csv: missing column(s) maskName",
    ),
    Case(
        "mrnet-csv-corrupt",  # pandas' reason spans two lines
        on("riga", make_mrnet, lambda d, i: (d / "riga/DiscRegion/Glaucoma_multirater_Magrabia.csv").write_bytes(bytes(range(256)) * 4)),
        "Glaucoma_multirater_Magrabia.csv: unreadable CSV",
    ),
    Case(
        "mrnet-mask-missing",
        on("riga", make_mrnet, lambda d, i: (d / "riga/DiscRegion" / MRNET_MASK).unlink()),
        "image2-Rater4.png (listed in Glaucoma_multirater_MESSIDOR.csv) is missing",
    ),
    Case("mrnet-mask-shape", on("riga", make_mrnet, mrnet_mask(lambda m: m[:-5])), "image2-Rater4.png: mask shape (275, 280) differs"),
    Case(
        "mrnet-mask-16-bit",
        on("riga", make_mrnet, mrnet_mask(lambda m: m.astype(np.uint16) * 256)),
        "image2-Rater4.png: 16/32-bit mask",
    ),
    # --- cm-folder: CM-UNet TIFF layout ------------------------------------------------------
    Case("cm-rater-file-missing", on("cm-folder", make_cm_folder, cm_missing("train", "Over", 2)), "{name} is missing (the Over mask of"),
    Case(
        "cm-mask-shape",
        on("cm-folder", make_cm_folder, cm_write("test", "Under", lambda a: np.zeros((27, 28), np.float32), 1)),
        "{name} is 27×28, its image",
    ),
    Case("cm-truncated-tif", on("cm-folder", make_cm_folder, cm_truncated("val", "Gaussian")), "{name}: unreadable or truncated TIFF"),
    Case("cm-image-nan", on("cm-folder", make_cm_folder, cm_write("train", "Gaussian", with_pixel_nan, 1)), "{name}: contains NaN"),
    Case("cm-empty-test-split", on("cm-folder", make_cm_folder, cm_empty_test), "cm-folder: no test/ folder"),
    Case(
        "cm-mask-value-7",
        on("cm-folder", make_cm_folder, cm_write("train", "Wrong", lambda a: (a > 0).astype(np.uint8) * 7)),
        "{name}: mask values {{0, 7}}",
    ),
    Case(
        "cm-mask-negative",
        on("cm-folder", make_cm_folder, cm_write("train", "Wrong", lambda a: (a - 1).astype(np.float32))),
        "{name}: mask values {{-1, 0}}",
    ),
    Case(
        "cm-gt-out-of-range",
        on("cm-folder", make_cm_folder, cm_write("train", "GT", lambda a: a * 100)),
        "{name}: GT values in [0, 25500]",
    ),
    Case("cm-constant-images", on("cm-folder", make_cm_folder, cm_constant_inputs), "cm-folder: every training image is 0"),
    Case("cm-duplicate-id", on("cm-folder", make_cm_folder, cm_duplicate_gt), "two GT files for id {id}"),
    Case(
        "cm-noise-level",
        on("cm-folder", make_cm_folder, None, "--noise-levels", "0.5"),
        "cm-folder reads its raters from files, so there is no noise level to set (got 0.5); use --noise-levels protocol",
    ),
]


def params():
    for case in CASES:
        marks = [pytest.mark.xfail(reason=case.xfail, strict=True)] if case.xfail else []
        yield pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", list(params()))
def test_bad_input_is_refused_in_one_line_before_anything_is_written(tmp_path, case):
    args, names = case.setup(tmp_path)
    results = tmp_path / "results"
    out = run_bench("run", *TINY, *args, *([] if "--results" in args else ["--results", str(results)]))
    assert_refused(out, case.expected.format(**names) if names else case.expected)
    assert not results.exists(), sorted(p.name for p in results.rglob("*"))


def test_a_results_path_that_is_a_file_is_left_alone(tmp_path):
    results = tmp_path / "results"
    results.write_text("my notes")
    assert_refused(run_bench("run", *TINY, "--results", str(results)), "cannot write the results folder")
    assert results.read_text() == "my notes"


def test_an_existing_results_folder_is_not_touched_by_bad_data(tmp_path):
    make_ms_lesion(tmp_path / "data")
    truncate(find(tmp_path / "data", "training02_01_flair_pp.nii.gz"))
    results = tmp_path / "results"
    (results / "runs").mkdir(parents=True)
    (results / "summary.csv").write_text("dataset,method\n")
    before = snapshot(results)
    out = run_bench("run", *TINY, "--dataset", "ms-lesion", "--data-root", str(tmp_path / "data"), "--results", str(results))
    assert_refused(out, "training02_01_flair_pp.nii.gz: unreadable or truncated NIfTI")
    assert snapshot(results) == before


def test_riga_keeps_only_its_derived_masks_when_no_cache_is_configured(tmp_path, monkeypatch):
    """By design: without $BENCH_CACHE the cache is the user's ($XDG_CACHE_HOME/lfnet-bench), and RIGA keeps the masks it
    derived before the bad file (about 10 minutes of work for the full release), so a rerun after the fix is fast.
    Nothing else is written: no cell, no table, nothing in the results folder."""
    monkeypatch.delenv("BENCH_CACHE", raising=False)  # restored afterwards, whatever the CLI sets
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user-cache"))
    make_raw(tmp_path / "data")
    truncate(tmp_path / "data" / "riga" / "Magrabia" / "MagrabiFemale" / "image1-3.tif")  # the test set is read last
    results = tmp_path / "results"
    out = run_bench("run", *TINY, "--dataset", "riga", "--data-root", str(tmp_path / "data"), "--results", str(results))
    assert_refused(out, "image1-3.tif: unreadable or truncated image")
    cache = tmp_path / "user-cache" / "lfnet-bench"
    written = sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file())
    assert written and all(w.startswith("riga-masks/") and w.endswith(".npz") for w in written), written
    assert not [p for p in results.rglob("*") if p.is_file()]


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible")
def test_cuda_without_a_gpu_is_refused(tmp_path):
    results = tmp_path / "results"
    assert_refused(run_bench("run", *TINY, "--device", "cuda", "--results", str(results)), "--device cuda")
    assert not results.exists()


def test_a_real_subprocess_agrees(tmp_path):
    """The in-process runner against `python -m bench`: an adapter that warns (6 of 21 scans) and then fails."""
    make_ms_lesion(tmp_path / "data")
    truncate(find(tmp_path / "data", "training01_02_mask1.nii"))
    results = tmp_path / "results"
    out = run_cli("run", *TINY, "--dataset", "ms-lesion", "--data-root", str(tmp_path / "data"), "--results", str(results), timeout=120)
    assert_refused(out, "training01_02_mask1.nii: unreadable or truncated NIfTI")
    assert not results.exists()
