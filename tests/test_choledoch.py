"""The MDC adapter on fixtures written in SpecTr's and Swin-Spectral's exact on-disk layouts."""

import importlib.util

import numpy as np
import pytest

from datasets import DATASETS
from datasets.adapters.choledoch import (
    DATA_SEED,
    NAME,
    NOISE_SCALE,
    SIZE,
    find_scenes,
    read_choledoch,
    resize_bands,
    resize_nearest,
    scene_key,
)
from datasets.adapters.choledoch.files import read_envi, read_envi_header
from datasets.contract import DataError
from datasets.raters import RATER_NAMES
from datasets.raters.morpho import simulate_raters
from labels.overlap import average_dsc
from tests.fixtures.make_choledoch import make_choledoch

load_choledoch = DATASETS["choledoch"].load  # the adapter behind the registry's checks

# The fixture has 9 scenes, not the paper's 538; that warning is tested once, below.
pytestmark = pytest.mark.filterwarnings("ignore:choledoch. found:UserWarning")


# At the fixture's stored 32×40 the protocol's radii (pixels of the 256×320 working grid) leave a
# degenerate pool, which is refused; loads at that size ask for a milder level.
MILD = "0.7"


def zscore(cube: np.ndarray) -> np.ndarray:
    x = cube.astype(np.float64)
    return (x - x.mean(axis=(1, 2), keepdims=True)) / x.std(axis=(1, 2), keepdims=True)


@pytest.fixture
def spectr(tmp_path):
    return make_choledoch(tmp_path, "spectr")


@pytest.fixture(scope="module")
def full_size(tmp_path_factory):
    """The fixture loaded at the working size 256×320, once for the module (about 4 s)."""
    root = tmp_path_factory.mktemp("choledoch")
    return make_choledoch(root, "spectr"), load_choledoch(root)


def test_envi_reader_returns_stored_cube_for_every_interleave_type_and_byte_order(spectr):
    for name in spectr["names"]:
        cube = read_envi(spectr["hdrs"][name])
        assert cube.dtype == spectr["cubes"][name].dtype and cube.dtype.isnative, name
        np.testing.assert_array_equal(cube, spectr["cubes"][name], err_msg=name)


def test_envi_header_keeps_braced_values_whole(spectr):
    fields = read_envi_header(spectr["hdrs"]["050625-20x-roi4"])
    assert fields["description"].startswith("{") and "60-band MDC cube" in fields["description"]
    assert (fields["lines"], fields["samples"], fields["bands"], fields["interleave"]) == ("32", "40", "60", "bsq")
    assert len(fields["wavelength"].strip("{}").split(",")) == 60


@pytest.mark.skipif(importlib.util.find_spec("spectral") is None, reason="spectral (SPy) not installed")
def test_envi_reader_agrees_with_spectral_python(spectr):
    from spectral import envi

    for name in spectr["names"]:
        hdr = spectr["hdrs"][name]
        data = next(p for p in hdr.parent.iterdir() if p.stem == hdr.stem and p != hdr)
        np.testing.assert_array_equal(envi.open(hdr, data)[:, :, :].transpose(2, 0, 1), read_envi(hdr))


@pytest.mark.parametrize("layout", ["spectr", "swin"])
def test_both_layouts_load_the_written_arrays_at_native_size(tmp_path, layout):
    fixture = make_choledoch(tmp_path, layout)
    scenes = find_scenes(fixture["folder"])
    data = read_choledoch(scenes, size=None)
    folds = [s.fold for s in scenes]
    assert list(data.case_ids) == fixture["names"]  # the blank reference is not a scene; `-L` is dropped
    assert data.images.shape == (9, 60, 32, 40) and data.images.dtype == np.float32 and data.in_channels == 60
    for i, name in enumerate(data.case_ids):
        np.testing.assert_allclose(data.images[i], zscore(fixture["cubes"][name]), rtol=1e-5, atol=1e-5, err_msg=name)
        np.testing.assert_array_equal(data.gt[i], fixture["masks"][name], err_msg=name)  # 0/255, 0/1 and palette PNGs
    assert list(data.groups) == [fixture["slides"][n] for n in data.case_ids]
    expected_folds = [fixture["folds"][n] for n in data.case_ids] if layout == "spectr" else [0] * 9
    assert folds == expected_folds
    assert data.raters.shape == (9, 5, 32, 40) and data.rater_names == RATER_NAMES and data.raters_simulated
    np.testing.assert_array_equal(data.raters[:, 0], data.gt)  # good = the pathologist
    assert data.raters[:, 4].sum() == 0  # blank


def test_load_at_working_size_splits_by_slide(full_size):
    fixture, splits = full_size
    parts = (splits.train, splits.val, splits.test)
    assert all(p.n > 0 for p in parts) and sum(p.n for p in parts) == 9
    slides = [set(p.groups) for p in parts]
    assert not (slides[0] & slides[1] or slides[0] & slides[2] or slides[1] & slides[2])
    assert "by slide" in splits.rule
    assert splits.train.images.base is splits.test.images.base  # parts are views of one array, not copies
    for part in parts:
        assert part.images.shape == (part.n, 60, *SIZE) and part.raters.shape == (part.n, 5, *SIZE)
        np.testing.assert_allclose(part.images.mean(axis=(2, 3)), 0, atol=1e-4)
        np.testing.assert_allclose(part.images.std(axis=(2, 3)), 1, atol=1e-3)
        for i, name in enumerate(part.case_ids):
            # 32×40 → 256×320 is ×8: nearest neighbour repeats each mask pixel 8×8 times.
            np.testing.assert_array_equal(part.gt[i], fixture["masks"][name].repeat(8, 0).repeat(8, 1))
        over, under = part.raters[:, 1].astype(bool), part.raters[:, 2].astype(bool)
        gt = part.gt.astype(bool)
        assert (under <= gt).all() and (gt <= over).all() and over.sum() > gt.sum() > under.sum()


def test_protocol_raters_are_the_morpho_rules_at_four_times_the_radii(full_size):
    _, splits = full_size
    train = splits.train
    np.testing.assert_array_equal(train.raters, simulate_raters(train.gt, seed=DATA_SEED, noise=NOISE_SCALE, keys=scene_keys_of(train)))
    info = splits.raters_info
    assert (info["style"], info["level"], info["target"], info["strength"]) == ("choledoch", "protocol", None, 1.0)
    assert info["realised_average"] == pytest.approx(average_dsc(train.raters, train.gt))
    assert info["usable"]["tv_foreground"] == 1.0


def scene_keys_of(data) -> np.ndarray:
    return np.array([scene_key(name) for name in data.case_ids], dtype=np.int64)


def test_a_target_level_bisects_the_knob_on_the_training_scenes(spectr, tmp_path):
    splits = load_choledoch(tmp_path, noise="0.65", size=None)
    info = splits.raters_info
    assert (info["style"], info["level"], info["target"]) == ("choledoch", "0.65", 0.65)
    assert abs(info["realised_average"] - 0.65) <= 0.01 and 0 < info["strength"] < 1  # 32×40 scenes: milder than the protocol
    for part in (splits.train, splits.test):  # every split at the knob found on train
        np.testing.assert_array_equal(
            part.raters, simulate_raters(part.gt, seed=DATA_SEED, noise=info["strength"] * NOISE_SCALE, keys=scene_keys_of(part))
        )
    with pytest.raises(DataError, match=r"choledoch: noise level 0.9 .*outside the reachable range \[0\.\d{3}, 0\.800\]"):
        load_choledoch(tmp_path, noise="0.9", size=None)
    with pytest.raises(DataError, match="choledoch: unknown rater style 'cm'; this dataset has choledoch"):
        load_choledoch(tmp_path, "cm")
    # The protocol itself runs where its pool is degenerate (the published rules), with the measured share in a warning.
    sparse = r"choledoch: noise level protocol \(choledoch raters, strength 1, .*\): the rater pool is sparse: .*foreground in \d+\.\d% of images"
    with pytest.warns(UserWarning, match=sparse):
        protocol = load_choledoch(tmp_path, size=None)
    assert "the rater pool is sparse" in protocol.raters_info["warning"]


def test_a_count_unlike_the_papers_warns(spectr, tmp_path):
    with pytest.warns(UserWarning, match=r"found 9 labelled scenes .* has 538"):
        load_choledoch(tmp_path, noise=MILD, size=None)


def test_test_fold_follows_four_fold_json(spectr, tmp_path):
    splits = load_choledoch(tmp_path, noise=MILD, size=None, test_fold=2)
    assert sorted(splits.test.case_ids) == sorted(n for n, k in spectr["folds"].items() if k == 2)
    assert "fold 2" in splits.rule and splits.train.n + splits.val.n == 7
    with pytest.raises(DataError, match="no scene of fold 5"):
        load_choledoch(tmp_path, size=None, test_fold=5)


@pytest.mark.parametrize(
    "name, slide",
    [
        ("050625-20x-roi4", "050625"),
        ("042145_2-20x-roi5", "042145"),
        ("032414c-20x-roi3", "032414"),
        ("031541vtc-20x-roi1", "031541"),
        ("033908-2-20x-roi5", "033908"),
        ("034004a2-20x-roi10", "034004"),
        ("030406C_2-20x-roi1-L", "030406"),
    ],
)
def test_scene_names_give_the_slide(name, slide):
    assert NAME.match(name)["slide"] == slide


def test_blank_reference_is_not_a_scene():
    assert NAME.match("031368c-20x-blank") is None


def test_resizing_rules():
    ramp = np.broadcast_to(np.arange(8, dtype=np.float32)[None, None, :], (2, 4, 8))
    np.testing.assert_allclose(resize_bands(ramp, (2, 4)), [[[0.5, 2.5, 4.5, 6.5]] * 2] * 2)  # block mean
    up = resize_bands(ramp, (8, 16))  # linear: pixel centres aligned, edges clamped
    np.testing.assert_allclose(up[0, 0], np.clip((np.arange(16) + 0.5) / 2 - 0.5, 0, 7))
    odd = resize_bands(np.ones((1, 10, 10), dtype=np.float32), (4, 4))  # non-integer shrink, anti-aliased
    np.testing.assert_allclose(odd, 1, rtol=1e-6)
    mask = np.eye(4, dtype=np.uint8)
    np.testing.assert_array_equal(resize_nearest(mask, (8, 8)), mask.repeat(2, 0).repeat(2, 1))
    assert set(np.unique(resize_nearest(mask, (3, 3)))) <= {0, 1}


# --- bad inputs: one DataError each, naming the file and the problem -------------------------


def test_missing_root_says_what_to_download(tmp_path):
    with pytest.raises(DataError, match=r"choledoch/ does not exist; download .*Kaggle"):
        load_choledoch(tmp_path)


def test_no_scenes(tmp_path):
    (tmp_path / "choledoch" / "MDC").mkdir(parents=True)
    with pytest.raises(DataError, match=r"no scene headers"):
        load_choledoch(tmp_path)


def test_missing_data_file(spectr, tmp_path):
    hdr = spectr["hdrs"]["032414c-20x-roi3"]
    hdr.with_suffix(".img").unlink()
    with pytest.raises(DataError, match=r"032414c-20x-roi3.hdr: its ENVI data file .* is missing"):
        load_choledoch(tmp_path, size=None)


def test_truncated_data_file(spectr, tmp_path):
    raw = spectr["hdrs"]["050625-20x-roi4"].with_suffix(".raw")
    raw.write_bytes(raw.read_bytes()[:-10])
    with pytest.raises(DataError, match=r"050625-20x-roi4.raw: truncated"):
        load_choledoch(tmp_path, size=None)


def test_not_an_envi_header(spectr, tmp_path):
    hdr = spectr["hdrs"]["050625-20x-roi4"]
    hdr.write_text("samples = 40\n")
    with pytest.raises(DataError, match=r"050625-20x-roi4.hdr: not an ENVI header"):
        load_choledoch(tmp_path, size=None)


@pytest.mark.parametrize(
    ("line", "edited", "message"),
    [
        ("data type = 12\n", "", r"050625-20x-roi4.hdr: ENVI header lacks a valid 'data type'"),
        ("data type = 12", "data type = 6", r"050625-20x-roi4.hdr: unsupported ENVI data type 6"),
        ("bands = 60", "bands = 30", r"050625-20x-roi4.hdr: 30 bands, expected 60"),
    ],
    ids=["no-data-type", "unsupported-data-type", "wrong-band-count"],
)
def test_bad_header_field_is_named(spectr, tmp_path, line, edited, message):
    hdr = spectr["hdrs"]["050625-20x-roi4"]
    hdr.write_text(hdr.read_text().replace(line, edited))
    with pytest.raises(DataError, match=message):
        load_choledoch(tmp_path, size=None)


def test_missing_mask(spectr, tmp_path):
    (spectr["folder"] / "MDC" / "Mask" / "042145-20x-roi1.png").unlink()
    with pytest.raises(DataError, match=r"042145-20x-roi1.hdr has no mask PNG"):
        load_choledoch(tmp_path, size=None)


def test_mask_shape_mismatch(spectr, tmp_path):
    from PIL import Image

    Image.fromarray(np.zeros((16, 20), dtype=np.uint8)).save(spectr["folder"] / "MDC" / "Mask" / "042145-20x-roi1.png")
    with pytest.raises(DataError, match=r"042145-20x-roi1.png: mask is 16×20 but 042145-20x-roi1.hdr is 32×40"):
        load_choledoch(tmp_path, size=None)


def test_colour_image_is_not_a_mask(spectr, tmp_path):
    from PIL import Image

    noise = np.random.default_rng(0).integers(0, 255, (32, 40), dtype=np.uint8)
    Image.fromarray(noise).save(spectr["folder"] / "MDC" / "Mask" / "042145-20x-roi1.png")
    with pytest.raises(DataError, match=r"042145-20x-roi1.png: not a label mask"):
        load_choledoch(tmp_path, size=None)


def test_scene_listed_in_folds_but_missing(spectr, tmp_path):
    hdr = spectr["hdrs"]["050031-20x-roi3"]
    hdr.unlink()
    with pytest.raises(DataError, match=r"050031-20x-roi3.hdr, listed in .*four_fold.json, is not under"):
        load_choledoch(tmp_path, size=None)


def test_mixed_sizes_need_a_working_size(spectr, tmp_path):
    from tests.fixtures.make_choledoch import write_envi

    hdr = spectr["hdrs"]["050625-20x-roi4"]
    write_envi(hdr, np.ones((60, 16, 20), dtype=np.uint16), "bsq", False, 0, ".raw")
    from PIL import Image

    Image.fromarray(np.zeros((16, 20), dtype=np.uint8)).save(spectr["folder"] / "MDC" / "Mask" / "050625-20x-roi4.png")
    with pytest.raises(DataError, match=r"050625-20x-roi4.hdr: 16×20, but .* is 32×40"):
        load_choledoch(tmp_path, size=None)
