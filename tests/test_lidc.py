"""The LIDC-IDRI adapter on fixtures in Kohl's crop layout and Knegt's pickle format, and its safe unpickler."""

import os
import pickle

import numpy as np
import pytest
from PIL import Image

from datasets import DATASETS
from datasets.adapters.lidc import RATER_NAMES, read_pickle, split_patients
from datasets.contract import DataError, centre_fit
from tests.fixtures.make_lidc import EMPTY_TWO, ONE_BASED, make_lidc_crops, make_lidc_pickle

# The fixtures are far smaller than the releases; that warning is tested once, below.
load_lidc = DATASETS["lidc"].load  # the adapter behind the registry's checks
pytestmark = pytest.mark.filterwarnings("ignore:lidc. found:UserWarning")


def all_parts(splits):
    return (splits.train, splits.val, splits.test)


def test_crops_load_the_written_arrays_with_their_own_split(tmp_path):
    expected = make_lidc_crops(tmp_path)
    splits = load_lidc(tmp_path)
    seen = []
    for part_name, part in zip(("train", "val", "test"), all_parts(splits)):
        assert part.images.shape == (part.n, 1, 180, 180) and part.images.dtype == np.float32
        assert part.raters.shape == (part.n, 4, 180, 180) and part.rater_valid.all()
        assert part.gt is None and not part.rater_ids_consistent and not part.raters_simulated
        assert part.rater_names == RATER_NAMES and part.spacing == (0.5, 0.5)
        for i, case in enumerate(part.case_ids):
            image, masks, split = expected[case]
            assert split == part_name
            np.testing.assert_array_equal(part.images[i, 0], image.astype(np.float32) / 255)
            np.testing.assert_array_equal(part.raters[i], masks)  # 0/255 PNGs → {0, 1}, reader order kept
            seen.append(case)
    assert sorted(seen) == sorted(expected)
    assert list(splits.train.case_ids) == ["LIDC-IDRI-0001/z--52.5_c0", "LIDC-IDRI-0001/z-105.0_c0", "LIDC-IDRI-0001/z-105.0_c1"]
    assert "own train/val/test folders" in splits.rule
    assert splits.train.images.base is splits.test.images.base  # parts are views of one array, not copies
    info = splits.raters_info
    assert info["style"] == "real" and info["level"] == "protocol" and info["target"] is None
    assert info["strength"] is None and info["realised_average"] is None and info["usable"] is None


def test_empty_reader_masks_are_valid_votes_and_one_based_names_are_read(tmp_path):
    make_lidc_crops(tmp_path)
    splits = load_lidc(tmp_path)
    train = splits.train
    i = list(train.case_ids).index(EMPTY_TWO)
    assert train.raters[i, :2].any(axis=(1, 2)).all() and not train.raters[i, 2:].any()
    assert train.rater_valid[i].all()
    j = list(splits.test.case_ids).index(ONE_BASED)
    assert splits.test.raters[j].any(axis=(1, 2)).all()


def test_pickles_are_merged_and_split_by_patient(tmp_path):
    expected = make_lidc_pickle(tmp_path)  # two files, pickle protocols 4 and 2
    splits = load_lidc(tmp_path)
    parts = all_parts(splits)
    assert sorted(np.concatenate([p.case_ids for p in parts])) == sorted(expected)
    patients = [set(p.groups) for p in parts]
    assert all(len(p) == 1 for p in patients) and len(set.union(*patients)) == 3  # 3 patients: 1 / 1 / 1
    for part in parts:
        assert part.images.shape == (part.n, 1, 128, 128) and part.spacing == (1.0, 1.0)
        assert all(g == c.split("_")[0] for g, c in zip(part.groups, part.case_ids))
        for i, key in enumerate(part.case_ids):
            np.testing.assert_array_equal(part.images[i, 0], expected[key][0])
            np.testing.assert_array_equal(part.raters[i], expected[key][1])
    assert "by patient" in splits.rule and "722:144:144" in splits.rule


def test_a_count_unlike_the_release_warns(tmp_path):
    make_lidc_crops(tmp_path)
    with pytest.warns(UserWarning, match=r"found 7 images \(crops\) .* full release has 12816"):
        load_lidc(tmp_path)


def test_protocol_5_pickle_loads(tmp_path):
    image = np.linspace(0, 1, 16, dtype=np.float32).reshape(4, 4)
    path = tmp_path / "p5.pickle"
    path.write_bytes(pickle.dumps({"LIDC-IDRI-0001_s1": {"image": image, "masks": [image > 0.5] * 4, "series_uid": "1.2"}}, protocol=5))
    entry = read_pickle(path)["LIDC-IDRI-0001_s1"]
    np.testing.assert_array_equal(entry["image"], image)


def test_both_layouts_prefer_the_crops(tmp_path):
    make_lidc_crops(tmp_path)
    make_lidc_pickle(tmp_path)
    splits = load_lidc(tmp_path)
    assert splits.train.images.shape[2:] == (180, 180)
    assert "data_lidc.pickle" in splits.rule and "ignored" in splits.rule


def test_patient_split_follows_the_paper_proportion():
    groups = np.repeat([f"LIDC-IDRI-{i:04d}" for i in range(1010)], 3)
    parts = split_patients(groups, seed=0)
    assert [len(set(groups[p])) for p in parts] == [722, 144, 144]
    assert not set(groups[parts[0]]) & set(groups[parts[1]]) and not set(groups[parts[1]]) & set(groups[parts[2]])
    again = split_patients(groups, seed=0)
    assert all((a == b).all() for a, b in zip(parts, again))
    assert [len(set(groups[p])) for p in split_patients(groups[: 875 * 3], seed=0)] == [625, 125, 125]


def test_fit_centre_crops_and_pads():
    a = np.arange(16).reshape(4, 4)
    np.testing.assert_array_equal(centre_fit(a, (2, 2)), [[5, 6], [9, 10]])
    padded = centre_fit(a, (6, 6))
    np.testing.assert_array_equal(padded[1:5, 1:5], a)
    assert padded.sum() == a.sum()


# --- the restricted unpickler -------------------------------------------------------------


class RunsACommand:
    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


class Evals:
    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return (eval, (f"__import__('os').system({self.command!r})",))


class NumpyLoad:
    def __reduce__(self):
        return (np.load, ("/etc/passwd",))  # a numpy global that is not array reconstruction


@pytest.mark.parametrize("payload, refused", [(RunsACommand, r"posix\.system"), (Evals, r"_*builtins?_*\.eval")])
@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_malicious_pickle_is_refused_and_runs_nothing(tmp_path, payload, refused, protocol):
    marker = tmp_path / "marker"
    folder = tmp_path / "lidc"
    folder.mkdir()
    content = {"LIDC-IDRI-0001_s1": {"image": np.zeros((4, 4)), "masks": [payload(f"touch {marker}")], "series_uid": "x"}}
    (folder / "data_lidc.pickle").write_bytes(pickle.dumps(content, protocol=protocol))
    with pytest.raises(DataError, match=rf"data_lidc.pickle: refused to unpickle the global {refused}"):
        load_lidc(tmp_path)
    assert not marker.exists()


def test_other_numpy_globals_are_refused(tmp_path):
    path = tmp_path / "x.pickle"
    path.write_bytes(pickle.dumps({"k": NumpyLoad()}))
    with pytest.raises(DataError, match=r"x.pickle: refused to unpickle the global numpy.*load"):
        read_pickle(path)


def test_codecs_encode_only_with_latin1(tmp_path):
    # GLOBAL '_codecs encode', then encode('x', 'rot13'): the one non-numpy global, narrowed to latin-1.
    path = tmp_path / "x.pickle"
    path.write_bytes(b"\x80\x02c_codecs\nencode\nq\x00X\x01\x00\x00\x00xq\x01X\x05\x00\x00\x00rot13q\x02\x86q\x03Rq\x04.")
    with pytest.raises(DataError, match=r"x.pickle: unreadable or truncated pickle .*codec .rot13."):
        read_pickle(path)


# --- bad inputs: one DataError each, naming the file and the problem -------------------------


def test_missing_root_says_what_to_download(tmp_path):
    with pytest.raises(DataError, match=r"lidc/ does not exist; download .*train.tar.gz"):
        load_lidc(tmp_path)


def test_unextracted_archives_say_extract(tmp_path):
    (tmp_path / "lidc").mkdir()
    (tmp_path / "lidc" / "train.tar.gz").write_bytes(b"\x1f\x8b")
    with pytest.raises(DataError, match=r"no crops .* under .*lidc/; extract train.tar.gz"):
        load_lidc(tmp_path)


def test_missing_reader_mask(tmp_path):
    make_lidc_crops(tmp_path)
    next((tmp_path / "lidc").rglob("z-12.5_c0_l2.png")).unlink()
    with pytest.raises(DataError, match=r"z-12.5_c0.png lacks the reader mask .*z-12.5_c0_l2.png"):
        load_lidc(tmp_path)


def test_mask_shape_mismatch(tmp_path):
    make_lidc_crops(tmp_path)
    path = next((tmp_path / "lidc").rglob("z-14.0_c0_l1.png"))
    Image.fromarray(np.zeros((90, 90), dtype=np.uint8)).save(path)
    with pytest.raises(DataError, match=r"z-14.0_c0_l1.png: mask is 90×90 but z-14.0_c0.png is 180×180"):
        load_lidc(tmp_path)


def test_truncated_png(tmp_path):
    make_lidc_crops(tmp_path)
    path = next((tmp_path / "lidc").rglob("images/*/z-14.0_c0.png"))
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(DataError, match=r"z-14.0_c0.png: unreadable PNG"):
        load_lidc(tmp_path)


def test_missing_split_folder(tmp_path):
    make_lidc_crops(tmp_path)
    val = next(p for p in (tmp_path / "lidc").rglob("val") if p.is_dir())
    val.rename(val.with_name("holdout"))
    with pytest.raises(DataError, match=r"not under a train/, val/ or test/ folder"):
        load_lidc(tmp_path)


def test_patient_in_two_split_folders(tmp_path):
    make_lidc_crops(tmp_path)
    val = next(p for p in (tmp_path / "lidc").rglob("val") if p.is_dir())
    for kind in ("images", "gt"):
        (val / kind / "LIDC-IDRI-0002").rename(val / kind / "LIDC-IDRI-0001")
    with pytest.raises(DataError, match=r"patient LIDC-IDRI-0001 has crops in both train/ and val/"):
        load_lidc(tmp_path)


def test_truncated_pickle(tmp_path):
    make_lidc_pickle(tmp_path)
    path = tmp_path / "lidc" / "data_lidc.pickle"
    path.write_bytes(path.read_bytes()[:-200])
    with pytest.raises(DataError, match=r"data_lidc.pickle: unreadable or truncated pickle"):
        load_lidc(tmp_path)


def test_pickle_of_the_wrong_structure(tmp_path):
    (tmp_path / "lidc").mkdir()
    (tmp_path / "lidc" / "data_lidc.pickle").write_bytes(pickle.dumps([1, 2, 3]))
    with pytest.raises(DataError, match=r"data_lidc.pickle: holds a list, expected Knegt's dict"):
        load_lidc(tmp_path)


def test_pickle_entry_with_three_masks(tmp_path):
    (tmp_path / "lidc").mkdir()
    entry = {"image": np.zeros((8, 8)), "masks": [np.zeros((8, 8), np.uint8)] * 3, "series_uid": "1"}
    (tmp_path / "lidc" / "data_lidc.pickle").write_bytes(pickle.dumps({f"P{i}_s": entry for i in range(3)}))
    with pytest.raises(DataError, match=r"data_lidc.pickle: entry 'P0_s' has 3 masks, expected 4"):
        load_lidc(tmp_path)


def test_pickle_image_outside_unit_range(tmp_path):
    (tmp_path / "lidc").mkdir()
    entry = {"image": np.full((8, 8), 300.0), "masks": [np.zeros((8, 8), np.uint8)] * 4, "series_uid": "1"}
    (tmp_path / "lidc" / "data_lidc.pickle").write_bytes(pickle.dumps({"P0_s": entry}))
    with pytest.raises(DataError, match=r"entry 'P0_s' has image values in \[300, 300\], expected \[0, 1\]"):
        load_lidc(tmp_path)


def test_duplicate_keys_across_pickles(tmp_path):
    make_lidc_pickle(tmp_path)
    (tmp_path / "lidc" / "copy.pickle").write_bytes((tmp_path / "lidc" / "data_lidc.pickle").read_bytes())
    with pytest.raises(DataError, match=r"key 'LIDC-IDRI-0101_slice10' is in both .* keep one copy"):
        load_lidc(tmp_path)


def test_too_few_patients_for_a_split(tmp_path):
    (tmp_path / "lidc").mkdir()
    entry = {"image": np.zeros((8, 8)), "masks": [np.zeros((8, 8), np.uint8)] * 4, "series_uid": "1"}
    (tmp_path / "lidc" / "data_lidc.pickle").write_bytes(pickle.dumps({"P0_a": entry, "P1_a": entry}))
    with pytest.raises(DataError, match=r"2 patient\(s\) are too few"):
        load_lidc(tmp_path)


def test_real_raters_refuse_a_noise_level(tmp_path):
    with pytest.raises(
        DataError, match=r"lidc has real raters, so there is no noise level to set \(got 0.5\); use --noise-levels protocol"
    ):
        load_lidc(tmp_path, noise="0.5")
    with pytest.raises(DataError, match=r"lidc: unknown rater style 'morpho'; this dataset has real"):
        load_lidc(tmp_path, "morpho")
