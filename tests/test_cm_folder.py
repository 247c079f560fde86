import numpy as np
import pytest

from datasets import DATASETS
from datasets.adapters import cm_folder
from datasets.contract import DataError, Splits
from labels.overlap import average_dsc

tifffile = pytest.importorskip("tifffile")
from tests.fixtures.make_cm_folder import make_cm_folder  # noqa: E402  (needs tifffile)

PARTS = ("train", "val", "test")
load_cm_folder = DATASETS["cm-folder"].load  # the adapter behind the registry's checks


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    root = tmp_path_factory.mktemp("cm")
    return root, make_cm_folder(root)


@pytest.fixture
def fresh(tmp_path):
    """A fixture of its own, for tests that damage it."""
    return tmp_path, make_cm_folder(tmp_path, counts={"train": 2, "validate": 1, "test": 2})


def test_loads_the_folders_matched_by_id(written):
    root, fx = written
    splits = load_cm_folder(root)
    assert isinstance(splits, Splits) and "train/ validate/ test/" in splits.rule
    for name in PARTS:
        part, want = getattr(splits, name), fx[name]
        assert part.n == len(want["ids"]) > 0
        assert list(part.case_ids) == want["ids"] and list(part.groups) == want["ids"]
        assert part.images.dtype == np.float32 and part.images.shape[1:] == (1, 28, 28)  # 3 equal channels -> 1
        np.testing.assert_array_equal(part.images, want["images"])
        np.testing.assert_array_equal(part.gt, want["gt"])
        np.testing.assert_array_equal(part.raters, want["raters"])
        assert part.rater_names == ("good", "over", "under", "wrong") and part.raters_simulated
        np.testing.assert_array_equal(part.raters[:, 0], part.gt)  # no Good/ folder: good = GT, as CM's loader
        assert part.rater_valid.all() and part.spacing == (1.0, 1.0)
    # Numeric ids are in numeric order, not string order.
    assert [int(i) for i in splits.train.case_ids] == sorted(int(i) for i in splits.train.case_ids)
    # The files' raters have no knob; their Average DSC against the files' GT is recorded.
    info = splits.raters_info
    assert (info["style"], info["level"], info["target"], info["strength"], info["usable"]) == ("files", "protocol", None, None, None)
    assert info["realised_average"] == pytest.approx(average_dsc(splits.train.raters, splits.train.gt))


def test_gt_is_the_papers_half_range_rule_not_cms_gt10(written):
    root, fx = written
    splits = load_cm_folder(root)
    raw = tifffile.imread(fx["paths"]["train"]["GT"][splits.train.case_ids[0]])
    np.testing.assert_array_equal(splits.train.gt[0], raw >= 127.5)
    assert (raw > 10).sum() > (raw >= 127.5).sum()


def test_good_and_blank_folders_become_raters(tmp_path):
    fx = make_cm_folder(tmp_path, counts={"train": 3, "validate": 2, "test": 2}, good_blank=True)
    splits = load_cm_folder(tmp_path)
    for name in PARTS:
        part = getattr(splits, name)
        assert part.rater_names == ("good", "over", "under", "wrong", "blank")
        np.testing.assert_array_equal(part.raters, fx[name]["raters"])  # {0, 255} uint8, .tiff in test/
        assert (part.raters[:, 0] != part.gt).any()  # good comes from Good/, not GT
        assert part.raters[:, 4].sum() == part.n  # CM's stray blank pixel is kept


def test_without_good_from_gt_only_the_folders_are_raters(written, monkeypatch):
    monkeypatch.setattr(cm_folder, "GOOD_FROM_GT", False)
    splits = load_cm_folder(written[0])
    assert splits.train.rater_names == ("over", "under", "wrong")
    np.testing.assert_array_equal(splits.train.raters, written[1]["train"]["raters"][:, 1:])


def test_distinct_channels_are_all_kept_and_integers_scaled(fresh):
    root, fx = fresh
    case_id = fx["test"]["ids"][0]
    rgb = (np.arange(28 * 28 * 3).reshape(28, 28, 3) % 256).astype(np.uint8)
    tifffile.imwrite(fx["paths"]["test"]["Gaussian"][case_id], rgb, photometric="rgb")
    splits = load_cm_folder(root)
    assert splits.train.images.shape[1] == splits.test.images.shape[1] == 3
    np.testing.assert_allclose(splits.test.images[0], np.moveaxis(rgb, 2, 0) / 255, rtol=1e-6)
    np.testing.assert_array_equal(splits.train.images[:, 1], fx["train"]["images"][:, 0])


def test_other_sizes_are_centre_cropped(fresh):
    root, fx = fresh
    case_id = fx["test"]["ids"][1]
    for path in (paths[case_id] for paths in fx["paths"]["test"].values()):
        array = tifffile.imread(path)
        widths = ((1, 1), (1, 1), (0, 0)) if array.ndim == 3 else ((1, 1), (1, 1))
        tifffile.imwrite(path, np.pad(array, widths), photometric="rgb" if array.ndim == 3 else None)
    splits = load_cm_folder(root)
    assert splits.test.images.shape[2:] == (28, 28)
    np.testing.assert_array_equal(splits.test.raters[1], fx["test"]["raters"][1])
    np.testing.assert_array_equal(splits.test.images[1], fx["test"]["images"][1])


# ---------------------------------------------------------------------------------------
# Bad input: one line naming the file and the problem
# ---------------------------------------------------------------------------------------


def test_missing_root(tmp_path):
    with pytest.raises(DataError, match=r"cm-folder/ not found; put your train/, validate/ and test/"):
        load_cm_folder(tmp_path)


def test_no_matching_files(tmp_path):
    (tmp_path / "cm-folder" / "train").mkdir(parents=True)
    (tmp_path / "cm-folder" / "train" / "notes.txt").write_text("x")
    with pytest.raises(DataError, match="no <id>_<Kind>.tif files"):
        load_cm_folder(tmp_path)


def test_missing_rater_file_is_named(fresh):
    root, fx = fresh
    case_id = fx["test"]["ids"][1]
    fx["paths"]["test"]["Wrong"][case_id].unlink()
    with pytest.raises(DataError, match=rf"test/Wrong/{case_id}_Wrong.tif is missing \(the Wrong mask of .*{case_id}_Gaussian.tif\)"):
        load_cm_folder(root)


def test_mask_without_image_is_named(fresh):
    root, fx = fresh
    case_id = fx["train"]["ids"][0]
    fx["paths"]["train"]["Gaussian"][case_id].unlink()
    with pytest.raises(DataError, match=rf"{case_id}_GT.tif has no input image .*/train/Gaussian/{case_id}_Gaussian.tif"):
        load_cm_folder(root)


def test_shape_mismatch_is_named(fresh):
    root, fx = fresh
    path = fx["paths"]["val"]["Over"][fx["val"]["ids"][0]]
    tifffile.imwrite(path, np.zeros((27, 28), dtype=np.float32))
    with pytest.raises(DataError, match=rf"{path.name} is 27×28, its image .* is 28×28"):
        load_cm_folder(root)


def test_truncated_tiff_is_named(fresh):
    root, fx = fresh
    path = fx["paths"]["test"]["Gaussian"][fx["test"]["ids"][0]]
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(DataError, match=rf"{path.name}: unreadable or truncated TIFF"):
        load_cm_folder(root)


def test_missing_split_is_named(fresh):
    root, fx = fresh
    for paths in fx["paths"]["val"].values():
        for path in paths.values():
            path.unlink()
    with pytest.raises(DataError, match=r"no validate/ folder"):
        load_cm_folder(root)


def test_rater_folder_missing_from_a_split_is_named(fresh):
    root, fx = fresh
    for path in fx["paths"]["test"]["Under"].values():
        path.unlink()
    with pytest.raises(DataError, match=r"test/ has no Under/ files"):
        load_cm_folder(root)


def test_duplicate_file_is_named(fresh):
    root, fx = fresh
    path = fx["paths"]["train"]["GT"][fx["train"]["ids"][0]]
    path.with_suffix(".tiff").write_bytes(path.read_bytes())
    with pytest.raises(DataError, match=r"two GT files for id"):
        load_cm_folder(root)


def test_noise_is_fixed(written):
    with pytest.raises(
        DataError,
        match=r"cm-folder reads its raters from files, so there is no noise level to set \(got 0.5\); use --noise-levels protocol",
    ):
        load_cm_folder(written[0], noise="0.5")
    with pytest.raises(DataError, match="cm-folder: unknown rater style 'cm'; this dataset has files"):
        load_cm_folder(written[0], "cm")
