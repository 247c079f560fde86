"""RIGA adapter on fixtures in the two real on-disk formats (tests/fixtures/make_riga.py)."""

import os
import shutil
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import REAL_RATERS_INFO
from PIL import Image
from skimage import draw

from datasets import DATASETS
from datasets.adapters import riga
from datasets.contract import DataError
from tests.fixtures.make_riga import make_mrnet, make_raw


def dice(a: np.ndarray, b: np.ndarray) -> float:
    return 2 * (a & b).sum() / max(a.sum() + b.sum(), 1)


def load(root, quiet: bool = True, cache=None):
    """The registry's RIGA loader (cache folder `cache`), with the fixture's expected warnings (few images; image48
    without prime) silenced."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*incomplete download")
        if quiet:
            warnings.filterwarnings("ignore", message=".*image48: marked copies but no image48prime")
        return DATASETS["riga"].load(root, cache=cache)


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    root = tmp_path_factory.mktemp("riga-raw")
    return root, make_raw(root)


@pytest.fixture
def raw_copy(raw, tmp_path):
    """A private copy of the raw fixture that a test may damage."""
    root, expected = raw
    shutil.copytree(root / "riga", tmp_path / "riga")
    return tmp_path


def expected_labels(case: dict) -> tuple[np.ndarray, np.ndarray]:
    """The drawn masks put through the adapter's ROI crop and nearest resize: (image (3, S, S), labels (6, S, S))."""
    top, left, side = riga.disc_roi(case["discs"])
    labels = [riga.resize_labels(riga.crop_square(riga.label_map(d, c), top, left, side)) for d, c in zip(case["discs"], case["cups"])]
    image = riga.to_input(riga.resize_image(riga.crop_square(case["prime"], top, left, side)))
    return image, np.stack(labels)


def by_id(splits):
    parts = [splits.train, splits.val, splits.test]
    return {cid: (part, i) for part in parts for i, cid in enumerate(part.case_ids)}


# ---------------------------------------------------------------- mask derivation


def test_derived_masks_match_drawing_exactly_on_tiff_and_closely_on_jpeg(raw):
    _, expected = raw
    for case_id, case in expected.items():
        prime = riga.read_image(case["files"][0], "RGB")
        for k in range(6):
            marked = riga.read_image(case["files"][k + 1], "RGB")
            disc, cup = riga.derive_masks(prime, marked, bool(case["lossy"][k]))
            assert not (cup & ~disc).any(), f"{case_id} rater {k + 1}: cup outside the disc"
            scores = dice(disc, case["discs"][k]), dice(cup, case["cups"][k])
            if case["lossy"][k]:
                assert min(scores) >= 0.9, (case_id, k + 1, scores)
            else:
                assert scores == (1.0, 1.0), (case_id, k + 1, scores)


def test_derivation_on_the_real_scikit_image_fundus(tmp_path):
    expected = make_raw(tmp_path, realistic=True, seed=1)
    worst = {True: 1.0, False: 1.0}
    for case in expected.values():
        prime = riga.read_image(case["files"][0], "RGB")
        for k in range(6):
            lossy = bool(case["lossy"][k])
            masks = riga.derive_masks(prime, riga.read_image(case["files"][k + 1], "RGB"), lossy)
            worst[lossy] = min(worst[lossy], dice(masks[0], case["discs"][k]), dice(masks[1], case["cups"][k]))
    assert worst[False] == 1.0 and worst[True] >= 0.9, worst


def ring(shape, centre, radius, width=2):
    outer = np.zeros(shape, bool)
    outer[draw.disk(centre, radius, shape=shape)] = True
    inner = np.zeros(shape, bool)
    inner[draw.disk(centre, radius - width, shape=shape)] = True
    return outer & ~inner, outer


def test_touching_contours_give_the_convex_hole_as_cup():
    shape = (120, 120)
    prime = np.full((*shape, 3), 120, np.uint8)
    disc_ring, disc = ring(shape, (60, 60), 40)
    cup_ring, cup = ring(shape, (60, 78), 22)  # touches the disc contour on the right
    marked = prime.copy()
    marked[disc_ring | cup_ring] = (0, 255, 0)
    got_disc, got_cup = riga.derive_masks(prime, marked, lossy=False)
    assert dice(got_disc, disc) == 1.0 and dice(got_cup, cup) >= 0.95
    assert not (got_cup & ~got_disc).any()


def test_open_contour_is_closed_by_a_stronger_closing():
    shape = (100, 100)
    prime = np.full((*shape, 3), 90, np.uint8)
    disc_ring, disc = ring(shape, (50, 50), 35)
    cup_ring, cup = ring(shape, (50, 50), 15)
    disc_ring[48:52, :20] = False  # a 4-px gap in the disc outline
    marked = prime.copy()
    marked[disc_ring | cup_ring] = (0, 0, 255)
    got_disc, got_cup = riga.derive_masks(prime, marked, lossy=False)
    assert dice(got_disc, disc) >= 0.98 and dice(got_cup, cup) >= 0.95


def test_tiff_copy_changed_everywhere_is_thresholded_like_a_jpeg():
    shape = (100, 100)
    rng = np.random.default_rng(0)
    prime = rng.integers(60, 200, (*shape, 3)).astype(np.uint8)
    disc_ring, disc = ring(shape, (50, 50), 35)
    cup_ring, cup = ring(shape, (50, 50), 15)
    marked = (prime.astype(int) + rng.integers(-2, 3, prime.shape)).clip(0, 255).astype(np.uint8)  # re-encoded
    marked[disc_ring | cup_ring] = (0, 0, 255)
    got_disc, got_cup = riga.derive_masks(prime, marked, lossy=False)
    assert dice(got_disc, disc) == 1.0 and dice(got_cup, cup) == 1.0


def test_unmarked_copy_gives_no_masks():
    prime = np.full((50, 50, 3), 100, np.uint8)
    assert riga.derive_masks(prime, prime.copy(), lossy=False) is None


def test_roi_is_square_centred_on_the_union_disc_and_padded_outside_the_photo():
    discs = np.zeros((2, 100, 120), bool)
    discs[0, 2:22, 0:16] = True  # near the top-left corner
    discs[1, 4:24, 2:18] = True
    top, left, side = riga.disc_roi(discs)
    assert side == 2 * 22 and (top, left) == (13 - 22, 9 - 22)  # union box rows 2..23, cols 0..17
    crop = riga.crop_square(np.full((100, 120, 3), 7, np.uint8), top, left, side)
    assert crop.shape == (44, 44, 3)
    assert (crop[:-top] == 0).all() and (crop[:, :-left] == 0).all() and (crop[-top:, -left:] == 7).all()


# ---------------------------------------------------------------- the raw release through load_riga


def test_raw_release_loads_with_mrnet_split(raw):
    root, expected = raw
    with pytest.warns(UserWarning, match=r"image48: marked copies but no image48prime"):
        splits = load(root, quiet=False)
    assert "train BinRushed+MESSIDOR, test Magrabia" in splits.rule
    assert sorted(splits.test.case_ids) == ["Magrabia/MagrabiFemale/image1", "Magrabia/MagrabiaMale/image1"]
    train_ids = [*splits.train.case_ids, *splits.val.case_ids]
    assert sorted(train_ids) == sorted(c for c in expected if not c.startswith("Magrabia"))
    assert splits.val.n >= 1 and not set(splits.train.groups) & set(splits.val.groups)
    assert not any("BinRushed1/" in c for c in train_ids)  # the folder without primes is ignored
    for part in (splits.train, splits.val, splits.test):
        assert part.images.dtype == np.float32 and part.images.shape[1:] == (3, riga.SIZE, riga.SIZE)
        assert 0 <= part.images.min() and part.images.max() <= 1
        assert part.raters.shape[1:] == (6, riga.SIZE, riga.SIZE) and part.raters.dtype == np.uint8
        assert part.rater_valid.all() and part.gt is None
        assert part.classes == ("background", "rim", "cup") and part.structures == {"disc": (1, 2), "cup": (2,)}
        assert part.rater_names == tuple(f"rater{k}" for k in range(1, 7)) and part.rater_ids_consistent
        assert not part.raters_simulated and set(np.unique(part.raters)) == {0, 1, 2}


def test_raw_release_arrays_equal_the_drawn_raters(raw):
    root, expected = raw
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        splits = load(root)
    where = by_id(splits)
    for case_id, case in expected.items():
        part, i = where[case_id]
        image, labels = expected_labels(case)
        got = part.raters[i]
        for k in range(6):  # rater k is the k-th copy: raters in order 1..6
            if case["lossy"][k]:
                assert dice(got[k] > 0, labels[k] > 0) >= 0.9 and dice(got[k] == 2, labels[k] == 2) >= 0.85, (case_id, k + 1)
            else:
                np.testing.assert_array_equal(got[k], labels[k], err_msg=f"{case_id} rater {k + 1}")
        if not case["lossy"].any():  # same ROI only when every rater is exact
            np.testing.assert_array_equal(part.images[i], image)


def test_loader_writes_nothing_into_the_data_folder_and_caches_per_image(raw, tmp_path, monkeypatch):
    root, _ = raw
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "environment"))  # the cache folder is an argument, never read from here
    before = sorted(p for p in (root / "riga").rglob("*"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        load(root)
        assert not (tmp_path / "environment").exists()  # no cache folder given: nothing kept
        first = load(root, cache=tmp_path / "cache")
        assert len(list((tmp_path / "cache" / "riga-masks").glob("*.npz"))) == 6
        second = load(root, cache=tmp_path / "cache")
    assert sorted(p for p in (root / "riga").rglob("*")) == before
    np.testing.assert_array_equal(first.test.raters, second.test.raters)
    np.testing.assert_array_equal(first.train.images, second.train.images)


def test_unrecoverable_rater_is_marked_invalid_with_a_warning(raw_copy):
    folder = raw_copy / "riga/MESSIDOR"
    shutil.copyfile(folder / "image2prime.tif", folder / "image2-4.tif")  # rater 4's copy carries no ink
    with pytest.warns(UserWarning, match=r"image2-4.tif: no closed disc and cup contour"):
        splits = load(raw_copy)
    part, i = by_id(splits)["MESSIDOR/MESSIDOR/image2"]
    assert part.rater_valid[i].tolist() == [True, True, True, False, True, True]
    assert not part.raters[i, 3].any()


# ---------------------------------------------------------------- MR-Net's DiscRegion variant


def test_mrnet_discregion_csvs_load_with_six_raters(tmp_path):
    expected = make_mrnet(tmp_path)
    splits = load(tmp_path)
    assert "DiscRegion" in splits.rule and splits.test.n == 2 and splits.train.n + splits.val.n == 4
    where = by_id(splits)
    for case_id, case in expected.items():
        part, i = where[case_id]
        masks = case["masks"]
        classes = np.where(masks == 255, 2, np.where(masks > 0, 1, 0)).astype(np.uint8)  # disc > 0, cup == 255
        if masks.shape[1:] == (riga.SIZE, riga.SIZE):  # already 256×256: exact, no resizing involved
            np.testing.assert_array_equal(part.raters[i], classes)
            np.testing.assert_array_equal(part.images[i], case["image"].transpose(2, 0, 1) / np.float32(255))
        else:
            np.testing.assert_array_equal(part.raters[i], np.stack([riga.resize_labels(c) for c in classes]))
        assert part.rater_valid[i].all() and part.raters.shape[1] == 6


def test_mrnet_csv_missing_mask_is_named(tmp_path):
    make_mrnet(tmp_path)
    (tmp_path / "riga/DiscRegion/MESSIDOR/Rater3/image2-Rater3.png").unlink()
    with pytest.raises(DataError, match=r"image2-Rater3.png \(listed in Glaucoma_multirater_MESSIDOR.csv\) is missing"):
        load(tmp_path)


def test_mrnet_csv_without_columns_is_named(tmp_path):
    make_mrnet(tmp_path)
    path = tmp_path / "riga/DiscRegion/Glaucoma_multirater_Magrabia.csv"
    pd.read_csv(path).drop(columns=["maskName"]).to_csv(path)
    with pytest.raises(DataError, match=r"Glaucoma_multirater_Magrabia.csv: missing column\(s\) maskName"):
        load(tmp_path)


def test_mrnet_mask_of_other_size_is_named(tmp_path):
    make_mrnet(tmp_path)
    Image.fromarray(np.zeros((10, 10), np.uint8)).save(tmp_path / "riga/DiscRegion/Magrabia/Rater5/image1-Rater5.png")
    with pytest.raises(DataError, match=r"image1-Rater5.png: mask shape \(10, 10\) differs from image image1.png"):
        load(tmp_path)


# ---------------------------------------------------------------- bad inputs of the raw release


def test_missing_root_says_where_to_put_the_files(tmp_path):
    with pytest.raises(DataError, match=r"riga/ not found; download RIGA"):
        load(tmp_path)


def test_empty_root_says_what_is_expected(tmp_path):
    (tmp_path / "riga" / "docs").mkdir(parents=True)
    with pytest.raises(DataError, match=r"no imageNprime.<tif\|jpg> or Glaucoma_multirater_\*.csv under"):
        load(tmp_path)


def test_missing_rater_file_is_named(raw_copy):
    (raw_copy / "riga/MESSIDOR/image2-5.tif").unlink()
    with pytest.raises(DataError, match=r"MESSIDOR/image2-5\.\(tif\|jpg\) is missing \(rater 5 of image2prime.tif\)"):
        load(raw_copy)


def test_marked_copy_of_other_size_is_named(raw_copy):
    Image.fromarray(np.zeros((20, 30, 3), np.uint8)).save(raw_copy / "riga/MESSIDOR/image1-2.tif")
    with pytest.raises(DataError, match=r"image1-2.tif: shape \(20, 30, 3\) differs from image1prime.tif"):
        load(raw_copy)


def test_truncated_file_is_named(raw_copy):
    path = raw_copy / "riga/BinRushed/BinRushed2/image1-6.jpg"
    path.write_bytes(path.read_bytes()[:2000])
    with pytest.raises(DataError, match=r"image1-6.jpg: unreadable or truncated image"):
        load(raw_copy)


def test_missing_test_subset_is_an_error(raw_copy):
    shutil.rmtree(raw_copy / "riga/Magrabia")
    with pytest.raises(DataError, match=r"no Magrabia images under .* \(the test set\)"):
        load(raw_copy)


def test_cache_is_keyed_by_file_contents(raw_copy, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        load(raw_copy, cache=tmp_path / "cache")
        path = raw_copy / "riga/MESSIDOR/image1-1.tif"
        shutil.copyfile(raw_copy / "riga/MESSIDOR/image1prime.tif", path)  # rater 1 now carries no ink
        os.utime(path, ns=(1, 1))
        splits = load(raw_copy, cache=tmp_path / "cache")
    part, i = by_id(splits)["MESSIDOR/MESSIDOR/image1"]
    assert not part.rater_valid[i, 0]


def test_real_raters_refuse_a_noise_level_and_another_style(tmp_path):
    from datasets import get_dataset

    spec = get_dataset("riga")
    assert spec.rater_styles == ("real",) and spec.fixed_raters
    # Refused before anything is read: tmp_path holds no riga/ folder, which would be the error otherwise.
    with pytest.raises(
        DataError, match=r"^riga has real raters, so there is no noise level to set \(got 0\.45\); use --noise-levels protocol$"
    ):
        spec.load(tmp_path, None, "0.45")
    with pytest.raises(DataError, match=r"riga: unknown rater style 'cm'; this dataset has real"):
        spec.load(tmp_path, "cm", "protocol")
    with pytest.raises(DataError, match="no noise level to set"):
        DATASETS["riga"].load(tmp_path, noise="0.45")


def test_raters_info_records_real_raters(raw):
    splits = load(raw[0])
    assert splits.raters_info == REAL_RATERS_INFO
