"""Your own data (`--dataset folder:PATH`, datasets/adapters/folder.py): the README's example end to end (check, run,
predict, export), NIfTI 2-D and 3-D folders, every problem on its line, and `bench predict`'s refusals."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import nibabel
import numpy as np
import pandas as pd
import pytest
from PIL import Image

from bench.cli import main
from datasets import get_dataset

README = Path(__file__).resolve().parents[1] / "README.md"
AFFINE = np.diag([0.8, 0.7, 2.5, 1.0])


def readme_example() -> tuple[str, list[str]]:
    """The Python block and the commands of the README's "Your own data" section."""
    section = README.read_text().split("\n## Your own data\n", 1)[1].split("\n## ", 1)[0]
    blocks = dict(re.findall(r"```(python|bash)\n(.*?)```", section, re.S))
    return blocks["python"], [line for line in blocks["bash"].splitlines() if line.strip()]


def bench(line: str) -> int:
    """A `python -m bench …` line of the README, run in this process."""
    words = shlex.split(line)
    assert words[:3] == ["python", "-m", "bench"], line
    return main(words[3:])


def test_readme_example_runs_check_run_predict_and_export(tmp_path, monkeypatch, capsys):
    code, commands = readme_example()
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    assert len(list((tmp_path / "mydata/imagesTr").glob("*_0000.png"))) == 30
    check, run, predict, export = commands
    assert bench(check) == 0
    assert "0 problem(s)" in capsys.readouterr().out
    assert bench(run.replace("--max-steps 20", "--max-steps 2")) == 0  # the README's 20 steps, cut to keep the suite fast
    assert bench(predict) == 0
    written = sorted(p.name for p in (tmp_path / "results/mydata/predicted").iterdir())
    assert len(written) == 60 and "c0.png" in written and "c0_prob-disk.png" in written
    label = np.asarray(Image.open(tmp_path / "results/mydata/predicted/c0.png"))
    assert label.shape == (32, 32) and set(np.unique(label)) <= {0, 1}
    prob = np.asarray(Image.open(tmp_path / "results/mydata/predicted/c0_prob-disk.png"))
    assert prob.dtype == np.uint16
    assert bench(export) == 0
    table = pd.read_csv(tmp_path / "results/mydata/export.csv")
    assert set(table["dataset"]) == {"folder-mydata"} and set(table["method"]) == {"mv-unet", "lf-net"}
    assert {"gt", "majority", "rater:ann"} <= set(table["reference"])


def smoke(root: Path, results: Path, method: str, steps: int) -> int:
    """`bench run` of one method, seed 0, a few steps, on the folder at `root`."""
    args = ["--methods", method, "--seeds", "0", "--max-steps", str(steps), "--results", str(results), "--no-progress"]
    return main(["run", "--dataset", f"folder:{root}", *args])


def write_nifti_folder(root: Path, volume: bool, n_cases: int = 8) -> Path:
    """Three raters (rater c skips case 3) and a ground truth: 2-D slices (32, 32) or volumes (32, 32, 4) along axis 2."""
    rng = np.random.default_rng(1)
    shape = (32, 32, 4) if volume else (32, 32)
    for folder in ("imagesTr", "labelsTr/gt", "labelsTr/a", "labelsTr/b", "labelsTr/c"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    for case in range(n_cases):
        disk = np.hypot(*np.mgrid[-16:16, -16:16]) < rng.uniform(5, 11)
        disk = np.repeat(disk[..., None], 4, 2) if volume else disk
        image = (disk * 150 + rng.normal(60, 20, shape)).astype(np.float32)
        nibabel.save(nibabel.Nifti1Image(image, AFFINE), root / f"imagesTr/p{case}_0000.nii.gz")
        for k, rater in enumerate(("gt", "a", "b", "c")):
            if (case, rater) != (3, "c"):
                mask = np.roll(disk, k - 1 if k else 0, axis=1).astype(np.uint8)
                nibabel.save(nibabel.Nifti1Image(mask, AFFINE), root / f"labelsTr/{rater}/p{case}.nii.gz")
    meta = {"name": "vol" if volume else "flat", "channel_names": {"0": "T1"}, "labels": {"background": 0, "lesion": 1}}
    (root / "dataset.json").write_text(json.dumps({**meta, "file_ending": ".nii.gz"}))
    return root


@pytest.mark.parametrize("volume", [False, True], ids=["nifti-2d", "nifti-3d"])
def test_nifti_folder_check_run_predict_export(tmp_path, volume, capsys):
    root = write_nifti_folder(tmp_path / "data", volume)
    spec = get_dataset(f"folder:{root}")
    splits = spec.load(root, None)
    data = [splits.train, splits.val, splits.test]
    assert sum(d.n for d in data) == 8 * (4 if volume else 1)  # a volume is its 4 slices, each an image
    assert spec.reference == "gt" and spec.rater_styles == ("files", "morpho")
    assert splits.train.spacing == pytest.approx((0.8, 0.7))  # the in-plane zooms of the NIfTI header
    assert all(d.rater_names == ("a", "b", "c") for d in data)
    missing = [cid for d in data for cid, valid in zip(d.case_ids, d.rater_valid) if not valid[2]]
    assert missing == ([f"p3:{k}" for k in range(4)] if volume else ["p3"])  # recorded, never filled
    groups = {part: set(d.groups) for part, d in zip(("train", "val", "test"), data)}
    assert not (groups["train"] & groups["test"]) and not (groups["train"] & groups["val"])  # a volume stays in one split

    results = tmp_path / "results"
    assert main(["check", f"folder:{root}"]) == 0
    assert smoke(root, results, "mh-unet", 2) == 0
    name = spec.card.name
    cell = results / f"runs/{name}/files/protocol/mh-unet/seed-0"
    new = tmp_path / "new"
    new.mkdir()
    (new / "x_0000.nii.gz").write_bytes((root / "imagesTr/p0_0000.nii.gz").read_bytes())
    assert main(["predict", str(cell), "--images", str(new), "--out", str(tmp_path / "out")]) == 0
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == [
        "x.nii.gz",
        "x_prob-lesion.nii.gz",
        "x_rater-a.nii.gz",
        "x_rater-b.nii.gz",
        "x_rater-c.nii.gz",
    ]
    label, source = nibabel.load(out / "x.nii.gz"), nibabel.load(new / "x_0000.nii.gz")
    assert label.shape == source.shape and np.allclose(label.affine, source.affine)  # the input's affine and grid
    assert np.isin(np.asarray(label.dataobj), (0, 1)).all()
    prob = np.asarray(nibabel.load(out / "x_prob-lesion.nii.gz").dataobj)
    assert prob.dtype == np.float32 and 0 <= prob.min() and prob.max() <= 1
    assert main(["export", "--results", str(results)]) == 0
    assert set(pd.read_csv(results / "export.csv")["dataset"]) == {name}


def write_png_folder(root: Path, n_cases: int = 6) -> Path:
    for folder in ("imagesTr", "labelsTr/gt", "labelsTr/a", "labelsTr/b"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(2)
    for case in range(n_cases):
        disk = np.hypot(*np.mgrid[-8:8, -8:8]) < 5
        Image.fromarray(rng.integers(0, 255, (16, 16), dtype=np.uint8)).save(root / f"imagesTr/c{case}_0000.png")
        for rater in ("gt", "a", "b"):
            Image.fromarray(disk.astype(np.uint8) * 255).save(root / f"labelsTr/{rater}/c{case}.png")
    (root / "dataset.json").write_text(
        json.dumps({"channel_names": {"0": "grey"}, "labels": {"background": 0, "fg": 1}, "file_ending": ".png"})
    )
    return root


def test_check_lists_every_problem_on_its_own_line(tmp_path, capsys):
    root = write_png_folder(tmp_path / "d", n_cases=10)
    Image.fromarray(np.full((16, 16), 3, np.uint8)).save(root / "labelsTr/a/c1.png")  # not a declared class
    Image.fromarray(np.zeros((12, 12), np.uint8)).save(root / "labelsTr/b/c2.png")  # not its image's size
    (root / "imagesTr/c4_0000.png").unlink()
    (root / "labelsTr/gt/c4.png").unlink()  # rater masks without an image are not a case: ignored
    for rater in ("a", "b", "gt"):
        (root / f"labelsTr/{rater}/c5.png").unlink()  # an image no one labelled
    assert main(["check", f"folder:{root}"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3, err
    expected = ("c1.png: label values {3}", "c2.png: 12×12, its image is 16×16", "case c5 has no rater mask and no ground truth")
    assert all(sum(e in line for line in err) == 1 for e in expected), err
    assert main(["run", "--dataset", f"folder:{root}", "--dry-run"]) == 2
    assert "(and 2 more: `python -m bench check" in capsys.readouterr().err


def test_ids_in_two_splits_and_json_errors_are_refused(tmp_path, capsys):
    root = write_png_folder(tmp_path / "d")
    (root / "imagesTs").mkdir()
    (root / "imagesTs/c0_0000.png").write_bytes((root / "imagesTr/c0_0000.png").read_bytes())
    assert main(["check", f"folder:{root}"]) == 2
    assert "case c0 is in both imagesTr/ and imagesTs/" in capsys.readouterr().err
    (root / "dataset.json").write_text(json.dumps({"channel_names": {"0": "grey"}, "labels": {"background": 0}, "file_ending": ".png"}))
    assert main(["check", f"folder:{root}"]) == 2
    assert "labels must give classes 0..L-1" in capsys.readouterr().err
    assert main(["check", f"folder:{tmp_path / 'nowhere'}"]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_noise_levels_only_on_simulated_raters_and_one_data_root(tmp_path, capsys):
    root = write_png_folder(tmp_path / "d")
    assert main(["run", "--dataset", f"folder:{root}", "--noise-levels", "0.6", "--dry-run"]) == 2
    assert "reads files raters from files (--raters morpho simulates raters instead)" in capsys.readouterr().err
    splits = get_dataset(f"folder:{root}").load(root, "morpho", "protocol")
    assert splits.train.rater_names == ("good", "over", "under", "wrong", "blank") and splits.train.raters_simulated
    assert main(["run", "--dataset", f"folder:{root}", "--data-root", str(tmp_path), "--dry-run"]) == 2
    assert "is its own data root" in capsys.readouterr().err


def test_predict_refuses_an_unfinished_cell_and_wrong_channels(tmp_path, capsys):
    root = write_png_folder(tmp_path / "d")
    results = tmp_path / "r"
    assert smoke(root, results, "mv-unet", 1) == 0
    cell = results / "runs/folder-d/files/protocol/mv-unet/seed-0"
    rgb = tmp_path / "rgb"
    rgb.mkdir()
    Image.fromarray(np.zeros((16, 16, 3), np.uint8) + 9).save(rgb / "z_0000.png")
    assert main(["predict", str(cell), "--images", str(rgb), "--out", str(tmp_path / "o")]) == 2
    assert "3 channel(s), the cell's network takes 1" in capsys.readouterr().err
    (cell / "metrics.parquet").unlink()
    assert main(["predict", str(cell), "--images", str(root / "imagesTr"), "--out", str(tmp_path / "o")]) == 2
    assert "not a finished cell" in capsys.readouterr().err


def test_a_report_in_a_fresh_process_knows_a_folder_without_ground_truth(tmp_path):
    from bench.report import tables
    from bench.results_folder import ResultsFolder
    from datasets import DATASETS

    root = write_png_folder(tmp_path / "nogt")
    for path in (root / "labelsTr/gt").iterdir():
        path.unlink()
    (root / "labelsTr/gt").rmdir()
    results = tmp_path / "r"
    assert smoke(root, results, "mv-unet", 1) == 0
    del DATASETS["folder-nogt"]  # as in a new process: only the results folder knows the dataset
    assert tables.default_reference("folder-nogt") == "gt"  # unknown datasets are taken as scored against GT
    ResultsFolder.open(results)  # registers it again from the cell's recorded data root
    assert tables.default_reference("folder-nogt") == "majority"
