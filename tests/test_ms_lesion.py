import gzip
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
from conftest import REAL_RATERS_INFO
from scipy import ndimage as ndi

from datasets import DATASETS
from datasets.adapters import ms_lesion
from datasets.adapters.ms_lesion import ALL_CONTRASTS, choose_train_subjects
from datasets.contract import DataError, Splits
from datasets.raters import RATER_NAMES
from datasets.raters.ms import delete_passes, edge_add, erode6, passes_at, simulate_ms_raters
from labels.overlap import average_dsc
from tests.fixtures.make_ms_lesion import make_ms_lesion, make_ms_lesion_from_real

# The adapters behind the registry's checks.
load_ms_lesion, load_ms_lesion_real = DATASETS["ms-lesion"].load, DATASETS["ms-lesion-real"].load

# The fixtures hold 6 (or fewer) of the challenge's 21 scans; the loader says so.
pytestmark = [
    pytest.mark.filterwarnings("ignore:ms-lesion. found"),
    # One 3-D erosion empties the fixture's small lesions on many slices: the protocol pool is sparse (tested below).
    pytest.mark.filterwarnings("ignore:ms-lesion. noise level protocol .* the rater pool is sparse"),
]


@pytest.fixture(scope="module")
def fixture(tmp_path_factory):
    root = tmp_path_factory.mktemp("ms")
    return root, make_ms_lesion(root)


@pytest.fixture(scope="module")
def splits(fixture) -> Splits:
    return load_ms_lesion(fixture[0])


def slices(volume: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """(…, X, Y, Z) -> (K, …, Y, X): the documented axial slicing."""
    moved = np.moveaxis(volume[..., keep], -1, 0)
    return np.swapaxes(moved, -1, -2)


def expected_scan(scan: dict, noise: float = 1.0, gt_key: str = "mask1") -> dict:
    """What the loader must return for one fixture scan, computed from the written volumes."""
    mask1, mask2 = scan["mask1"] > 0, scan["mask2"] > 0
    keep = np.flatnonzero((mask1 | mask2).any(axis=(0, 1)))
    flair = scan["flair"]
    brain = flair[flair != 0]
    norm = (flair - brain.mean()) / brain.std()
    gt = {"mask1": mask1, "mask2": mask2, "union": mask1 | mask2}[gt_key]
    return {
        "keep": keep,
        "images": slices(norm, keep)[:, None],
        "gt": slices(gt, keep).astype(np.uint8),
        "raters": slices(simulate_ms_raters(gt, noise), keep),
        "real": slices(np.stack([mask1, mask2]).astype(np.uint8), keep),
    }


def rows_of(data, scan_id: str) -> np.ndarray:
    return np.flatnonzero([c.startswith(scan_id + "_z") for c in data.case_ids])


def part_of(splits: Splits, scan_id: str):
    """The one split part holding the slices of `scan_id`."""
    (part,) = [p for p in (splits.train, splits.val, splits.test) if len(rows_of(p, scan_id))]
    return part


# ---------------------------------------------------------------------------------------
# The MS rater rules on hand-made volumes
# ---------------------------------------------------------------------------------------


def test_erode6_is_one_six_connected_erosion():
    cross = np.zeros((5, 5, 5), dtype=bool)
    cross[2, 2, 1:4] = cross[2, 1:4, 2] = cross[1:4, 2, 2] = True  # the centre and its 6 face neighbours
    eroded = erode6(cross)
    assert eroded.sum() == 1 and eroded[2, 2, 2]  # a 26-connected (cube) erosion would remove it
    assert not ndi.binary_erosion(cross, structure=np.ones((3, 3, 3))).any()
    full = np.ones((3, 3, 3), dtype=bool)  # outside the volume is background
    assert np.array_equal(np.argwhere(erode6(full)), [[1, 1, 1]])
    assert np.array_equal(erode6(cross, passes=0), cross)


def test_edge_add_differs_from_dilation_at_a_gap_voxel():
    mask = np.zeros((5, 5, 5), dtype=bool)
    mask[2, 2, 1] = mask[2, 2, 3] = True  # one background voxel between them along z
    once = edge_add(mask, passes=1)
    dilated = ndi.binary_dilation(mask, structure=ndi.generate_binary_structure(3, 1))
    assert dilated[2, 2, 2] and not once[2, 2, 2]  # equal neighbours along z: zero central difference
    gap = np.zeros_like(mask)
    gap[2, 2, 2] = True
    assert np.array_equal(once, dilated & ~gap)  # elsewhere the edge rule is a 6-connected dilation
    # Two passes: the gap is still never filled (its neighbours agree along every axis).
    assert not edge_add(mask, passes=2)[2, 2, 2]
    assert edge_add(mask, passes=2).sum() > once.sum()
    # At the border, outside counts as background: a corner voxel grows into the volume only.
    corner = np.zeros((3, 3, 3), dtype=bool)
    corner[0, 0, 0] = True
    assert np.array_equal(np.argwhere(edge_add(corner, 1)), [[0, 0, 0], [0, 0, 1], [0, 1, 0], [1, 0, 0]])


def test_delete_blocks_runs_in_c_order():
    full = np.ones((2, 2, 3), dtype=bool)
    once = delete_passes(full, passes=1, block=2)
    assert np.array_equal(np.flatnonzero(once), [2, 3, 6, 7, 10, 11])  # blocks [0,2), [4,6), [8,10) go
    assert np.array_equal(np.flatnonzero(delete_passes(full, passes=2, block=2)), [6, 7])
    # The order is C order of the indices, not of memory: a Fortran-ordered copy gives the same.
    assert np.array_equal(delete_passes(np.asfortranarray(full), passes=1, block=2), once)
    # Fortran ordering would delete other voxels.
    fortran = np.ones(12, dtype=bool)
    fortran[[0, 1, 4, 5, 8, 9]] = False
    assert not np.array_equal(once, fortran.reshape((2, 2, 3), order="F"))
    # With the official 100-voxel blocks, two passes keep about a quarter.
    big = np.ones((10, 10, 40), dtype=bool)
    assert delete_passes(big).sum() == 1000


def test_simulated_raters_follow_the_rules_and_scale_with_noise():
    gt = np.zeros((12, 12, 12), dtype=bool)
    gt[3:9, 4:8, 2:10] = True
    raters = simulate_ms_raters(gt, 1.0)
    assert raters.shape == (5, 12, 12, 12) and raters.dtype == np.uint8 and set(np.unique(raters)) <= {0, 1}
    good, over, under, wrong, blank = raters.astype(bool)
    assert np.array_equal(good, gt) and not blank.any()
    assert np.array_equal(over, edge_add(gt, 2)) and np.array_equal(under, erode6(gt, 1))
    assert np.array_equal(wrong, delete_passes(edge_add(gt, 2), 2, 100))
    assert not (wrong & ~over).any() and not (under & ~gt).any()

    assert [passes_at(n) for n in (0, 0.2, 0.5, 1, 1.5, 2)] == [(0, 0, 0), (0, 0, 0), (1, 1, 1), (1, 2, 2), (2, 3, 3), (2, 4, 4)]
    at_zero = simulate_ms_raters(gt, 0.0)
    assert all(np.array_equal(at_zero[i], gt) for i in range(4)) and not at_zero[4].any()
    areas = np.array([simulate_ms_raters(gt, n)[1:3].sum(axis=(1, 2, 3), dtype=np.int64) for n in (0, 0.5, 1, 1.5, 2)])
    assert np.all(np.diff(areas[:, 0]) > 0)  # over grows with every step
    assert np.all(np.diff(areas[:, 1]) <= 0)  # under shrinks
    with pytest.raises(ValueError, match="noise"):
        passes_at(-1)


def test_subject_split_closest_to_the_papers_10_of_21():
    isbi = {"training01": 4, "training02": 4, "training03": 5, "training04": 4, "training05": 4}
    assert choose_train_subjects(isbi) == ("training01", "training03")  # 9 scans; no subset gives 10
    with pytest.raises(DataError, match="at least 2"):
        choose_train_subjects({"training01": 4})


# ---------------------------------------------------------------------------------------
# Loading the fixture
# ---------------------------------------------------------------------------------------


def test_ms_lesion_loads_slices_raters_and_gt(fixture, splits):
    _, fx = fixture
    assert isinstance(splits, Splits) and min(splits.train.n, splits.val.n, splits.test.n) > 0
    # 3 subjects × 2 scans: one subject (2 scans) is closest to 10/21 of 6; one of its scans is val.
    assert set(splits.train.groups) == set(splits.val.groups) == {"training01"}
    assert set(splits.test.groups) == {"training02", "training03"}  # no subject in two parts
    # The test subject without masks (testdata_website/) and the raw orig/ copy are ignored.
    assert not any("test01" in c for part in (splits.train, splits.val, splits.test) for c in part.case_ids)
    assert "by subject" in splits.rule and "training01_01" in splits.rule
    for part in (splits.train, splits.val, splits.test):
        assert part.images.dtype == np.float32 and part.images.shape[1:] == (1, 40, 32)
        assert part.rater_names == RATER_NAMES and part.raters_simulated and part.rater_ids_consistent
        assert part.spacing == pytest.approx((1.2, 1.0))  # (dy, dx) from the header
        assert part.rater_valid.all()
    for scan_id, scan in fx["scans"].items():
        part = part_of(splits, scan_id)
        rows, want = rows_of(part, scan_id), expected_scan(scan)
        assert list(part.case_ids[rows]) == [f"{scan_id}_z{z:03d}" for z in want["keep"]]
        np.testing.assert_allclose(part.images[rows], want["images"], rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(part.gt[rows], want["gt"])
        np.testing.assert_array_equal(part.raters[rows], want["raters"])
    # Slices where only mask2 marks lesion are kept, so some gt slices are empty.
    empty_gt = [part.gt.reshape(part.n, -1).any(axis=1) for part in (splits.train, splits.val, splits.test)]
    assert not np.concatenate(empty_gt).all()


def test_ms_lesion_real_exposes_the_two_raters_without_gt(fixture, splits):
    root, fx = fixture
    real = load_ms_lesion_real(root)
    assert real.rule == splits.rule
    for part, sim in ((real.train, splits.train), (real.val, splits.val), (real.test, splits.test)):
        assert part.gt is None and part.rater_names == ("mask1", "mask2") and not part.raters_simulated
        assert part.raters.shape[1] == 2 and list(part.case_ids) == list(sim.case_ids)
        np.testing.assert_array_equal(part.images, sim.images)
    rows = rows_of(real.test, "training03_02")  # masks written as {0, 255}
    np.testing.assert_array_equal(real.test.raters[rows], expected_scan(fx["scans"]["training03_02"])["real"])
    assert real.raters_info == REAL_RATERS_INFO
    with pytest.raises(
        DataError, match=r"ms-lesion-real has real raters, so there is no noise level to set \(got 0.5\); use --noise-levels protocol"
    ):
        load_ms_lesion_real(root, noise="0.5")
    with pytest.raises(DataError, match="ms-lesion-real: unknown rater style 'ms'; this dataset has real"):
        load_ms_lesion_real(root, "ms")


def test_gt_rater_option(fixture):
    root, fx = fixture
    union = load_ms_lesion(root, gt_rater="union")
    rows = rows_of(union.test, "training02_01")
    want = expected_scan(fx["scans"]["training02_01"], gt_key="union")
    np.testing.assert_array_equal(union.test.gt[rows], want["gt"])
    np.testing.assert_array_equal(union.test.raters[rows], want["raters"])
    with pytest.raises(DataError, match="unknown GT rater 'mask3'"):
        load_ms_lesion(root, gt_rater="mask3")


def test_protocol_pool_is_recorded_and_its_sparseness_warned_not_refused(fixture):
    root, _ = fixture
    with pytest.warns(
        UserWarning,
        match=r"ms-lesion: noise level protocol \(ms raters, strength 1, .*\): the rater pool is sparse: under is non-empty in \d+\.\d% of images",
    ):
        splits = load_ms_lesion(root)
    info = splits.raters_info
    assert (info["style"], info["level"], info["target"], info["strength"]) == ("ms", "protocol", None, 1.0)
    assert info["realised_average"] == pytest.approx(average_dsc(splits.train.raters, splits.train.gt))
    usable = info["usable"]
    assert usable["counted"] == "images with GT foreground" and usable["n_images"] == splits.train.gt.any(axis=(1, 2)).sum()
    assert usable["nonempty"]["good"] == 1.0 and usable["nonempty"]["under"] < 0.95  # slices with empty GT do not count


def test_a_target_level_reached_by_a_whole_step(fixture):
    root, fx = fixture
    # On the fixture's training slices the Average moves in steps: 0.822 (no pass), 0.590 (one edge-add
    # and one deletion pass, knob 0.25), 0.459 (plus one erosion, knob 0.5), ...
    splits = load_ms_lesion(root, noise="0.59")
    info = splits.raters_info
    assert (info["level"], info["target"], info["strength"]) == ("0.59", 0.59, 0.25)
    assert abs(info["realised_average"] - 0.59) <= 0.01
    assert info["realised_average"] == pytest.approx(average_dsc(splits.train.raters, splits.train.gt))
    assert min(info["usable"]["nonempty"].values()) >= 0.95 and info["usable"]["tv_foreground"] >= 0.95
    rows = rows_of(splits.test, "training02_01")  # every split is simulated at the knob found on train
    np.testing.assert_array_equal(splits.test.raters[rows], expected_scan(fx["scans"]["training02_01"], noise=0.25)["raters"])
    again = load_ms_lesion(root, noise="0.590")
    np.testing.assert_array_equal(again.train.raters, splits.train.raters)


@pytest.mark.parametrize(
    "level, refused",
    [
        (
            "0.7",
            r"ms-lesion: noise level 0.7 \(ms raters, measured on the training slices\): no strength gives Average DSC 0.700 within 0.01: it jumps from 0.822 to 0.590",
        ),
        (
            "0.3",
            r"ms-lesion: noise level 0.3 \(ms raters, strength \d.*\) gives a degenerate rater pool: under is non-empty in \d+\.\d% of images",
        ),
        ("0.1", r"ms-lesion: noise level 0.1 .*outside the reachable range \[0\.\d{3}, 0\.822\]"),
    ],
)
def test_unreachable_or_degenerate_levels_are_refused(fixture, level, refused):
    with pytest.raises(DataError, match=refused) as info:
        load_ms_lesion(fixture[0], noise=level)
    assert "\n" not in str(info.value)


def test_all_four_contrasts_stack_in_a_fixed_order(fixture, monkeypatch):
    root, fx = fixture
    monkeypatch.setattr(ms_lesion, "CONTRASTS", ALL_CONTRASTS)
    monkeypatch.setattr(ms_lesion, "SLICES", "brain")
    splits = load_ms_lesion(root)
    assert splits.test.images.shape[1] == 4
    scan = fx["scans"]["training02_02"]
    brain_z = np.flatnonzero((scan["flair"] != 0).any(axis=(0, 1)))
    rows = rows_of(splits.test, "training02_02")
    assert len(rows) == len(brain_z) > len(expected_scan(scan)["keep"])
    for c, contrast in enumerate(ALL_CONTRASTS):
        volume = scan[contrast]
        brain = volume[volume != 0]
        want = slices((volume - brain.mean()) / brain.std(), brain_z)
        np.testing.assert_allclose(splits.test.images[rows, c], want, rtol=1e-5, atol=1e-5)


def test_real_nifti_from_nibabel_loads(tmp_path):
    source = Path(nib.__file__).parent / "tests" / "data" / "anatomical.nii"  # real MRI, big-endian int16, 2 mm
    if not source.is_file():
        pytest.skip("nibabel's test data are not installed")
    fx = make_ms_lesion_from_real(tmp_path, source)
    splits = load_ms_lesion(tmp_path)
    assert splits.test.images.shape[1:] == (1, 41, 33) and splits.test.spacing == (2.0, 2.0)
    assert splits.val.n == 0 and splits.train.n > 0  # one training scan: nothing left for val
    mask1, mask2 = fx["scans"]["training02_01"]["mask1"], fx["scans"]["training02_01"]["mask2"]
    keep = np.flatnonzero((mask1 | mask2).any(axis=(0, 1)))
    np.testing.assert_array_equal(splits.test.gt, slices(mask1, keep))
    flair = np.asarray(nib.load(str(source)).dataobj, dtype=np.float32)
    norm = (flair - flair[flair != 0].mean()) / flair[flair != 0].std()
    np.testing.assert_allclose(splits.test.images[:, 0], slices(norm, keep), rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_realistic_mni152_volume(tmp_path):
    """nilearn's real MNI152 T1/GM/WM maps cropped to 181×217×181, FLAIR-like contrast, WM lesions."""
    nilearn = pytest.importorskip("nilearn")
    data = Path(nilearn.__file__).parent / "datasets" / "data"
    maps = {k: nib.load(str(data / f"mni_icbm152_{k}_tal_nlin_sym_09a_converted.nii.gz")) for k in ("gm", "wm")}
    crop = tuple(slice((n - m) // 2, (n - m) // 2 + m) for n, m in zip(maps["gm"].shape, (181, 217, 181)))
    gm, wm = (np.asarray(maps[k].dataobj, dtype=np.float32)[crop] for k in ("gm", "wm"))
    rng = np.random.default_rng(0)
    for s in (1, 2):
        lesions = np.zeros(gm.shape, dtype=bool)
        for centre in np.argwhere(wm > 0.9)[rng.choice(int((wm > 0.9).sum()), 4)]:
            lesions |= np.linalg.norm(np.indices(gm.shape) - centre[:, None, None, None], axis=0) <= 3
        lesions &= wm > 0.5
        flair = (60 * gm + 40 * wm + 80 * lesions).astype(np.float32)
        folder = tmp_path / "ms-lesion" / f"training{s:02d}"
        for name, volume in (
            (f"preprocessed/training{s:02d}_01_flair_pp.nii.gz", flair),
            (f"masks/training{s:02d}_01_mask1.nii.gz", lesions),
            (f"masks/training{s:02d}_01_mask2.nii.gz", lesions),
        ):
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            nib.save(nib.Nifti1Image(volume.astype(np.float32 if volume.dtype != bool else np.uint8), np.eye(4)), str(folder / name))
    splits = load_ms_lesion(tmp_path)
    assert splits.test.images.shape[1:] == (1, 217, 181) and splits.train.n > 0


# ---------------------------------------------------------------------------------------
# Bad input: one line naming the file and the problem
# ---------------------------------------------------------------------------------------


@pytest.fixture
def small(tmp_path):
    return tmp_path, make_ms_lesion(tmp_path, n_subjects=2, n_timepoints=1)


def test_scan_count_far_from_the_challenges_is_a_warning(small):
    with pytest.warns(UserWarning, match=r"found 2 training scans under .*, the challenge has 21"):
        load_ms_lesion(small[0])


def test_missing_root_says_where_to_put_the_data(tmp_path):
    with pytest.raises(DataError, match=r"ms-lesion/ not found; download .* unpack it into"):
        load_ms_lesion(tmp_path)


def test_no_matching_files(tmp_path):
    (tmp_path / "ms-lesion" / "other").mkdir(parents=True)
    (tmp_path / "ms-lesion" / "other" / "brain.nii").write_bytes(b"")
    with pytest.raises(DataError, match="no files named trainingNN_TT_flair_pp"):
        load_ms_lesion(tmp_path)


def test_missing_rater_mask_is_named(small):
    root, fx = small
    fx["paths"]["training02_01"]["mask2"].unlink()
    with pytest.raises(DataError, match=r"training02_01 has no training02_01_mask2.nii\[.gz\]"):
        load_ms_lesion(root)


def test_image_mask_shape_mismatch_is_named(small):
    root, fx = small
    path = fx["paths"]["training01_01"]["mask1"]
    nib.save(nib.Nifti1Image(np.zeros((30, 40, 32), dtype=np.uint8), np.eye(4)), str(path))
    with pytest.raises(DataError, match=r"mask .*training01_01_mask1.nii is \(30, 40, 32\), image .* is \(32, 40, 32\)"):
        load_ms_lesion(root)


@pytest.mark.parametrize("scan", ["training01_01", "training02_01"])  # .nii and .nii.gz
def test_truncated_file_is_named(small, scan):
    root, fx = small
    path = fx["paths"][scan]["flair"]
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    cut = raw[: len(raw) // 2]
    path.write_bytes(gzip.compress(cut)[:-20] if path.suffix == ".gz" else cut)
    with pytest.raises(DataError, match=rf"{path.name}: unreadable or truncated NIfTI"):
        load_ms_lesion(root)


def test_duplicate_file_is_named(small):
    root, fx = small
    path = fx["paths"]["training01_01"]["flair"]
    (path.parent / (path.name + ".gz")).write_bytes(gzip.compress(path.read_bytes()))
    with pytest.raises(DataError, match="two files for training01_01 flair"):
        load_ms_lesion(root)


def test_voxel_size_mismatch_is_named(small):
    root, fx = small
    for key in ("flair", "mask1", "mask2"):
        path = fx["paths"]["training02_01"][key]
        image = nib.load(str(path))
        nib.save(nib.Nifti1Image(np.asarray(image.dataobj), np.diag([2.0, 2.0, 2.0, 1.0])), str(path))
    with pytest.raises(DataError, match=r"training02_01_flair_pp.nii.gz has voxel size \(2.0, 2.0, 2.0\) mm"):
        load_ms_lesion(root)


def test_other_in_plane_sizes_are_cropped_or_padded(small):
    root, fx = small
    for key in ("flair", "mask1", "mask2"):
        path = fx["paths"]["training02_01"][key]
        volume = np.asarray(nib.load(str(path)).dataobj)
        nib.save(nib.Nifti1Image(np.pad(volume, ((2, 2), (0, 0), (0, 0)))[:, 1:-1], np.diag([1.0, 1.2, 2.0, 1.0])), str(path))
    splits = load_ms_lesion(root)
    assert splits.test.images.shape[2:] == (40, 32)
    want = expected_scan(fx["scans"]["training02_01"])
    np.testing.assert_array_equal(splits.test.gt[:, 1:-1], want["gt"][:, 1:-1])  # rows 0 and 39 were cropped away
