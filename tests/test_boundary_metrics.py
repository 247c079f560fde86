"""HD95, ASSD and NSD (bench/evaluate/boundary.py): medpy's values, a brute-force NSD, the empty rules, the long table
and `bench report --metrics`."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from medpy.metric import binary as medpy_binary
from scipy.spatial.distance import cdist

from bench import study
from bench.cli.options import UsageError
from bench.cli.report import hard_metrics
from bench.evaluate import boundary, long_table, metrics
from bench.evaluate.scoring import score_predictions
from bench.report import table_text, tables

PAPER = study.default()


def random_pairs(seed: int, n: int = 40) -> list[tuple[np.ndarray, np.ndarray, tuple[float, float]]]:
    """Random (pred, gt, spacing) of one (H, W) image each, both non-empty: blobs, speckle, one-pixel masks, masks
    touching or filling the image border, thin images (H or W = 1) and anisotropic spacing."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        h, w = (int(v) for v in rng.integers(1, 14, 2))
        spacing = (float(rng.uniform(0.3, 2.5)), float(rng.uniform(0.3, 2.5)))
        masks = []
        for _ in range(2):
            kind = rng.integers(4)
            if kind == 0:  # one pixel, often on the border
                m = np.zeros((h, w), dtype=bool)
                m[rng.integers(h), rng.integers(w)] = True
            elif kind == 1:  # a rectangle, clipped by the image border
                m = np.zeros((h, w), dtype=bool)
                r, c = rng.integers(-2, h), rng.integers(-2, w)
                m[max(r, 0) : r + rng.integers(1, 8), max(c, 0) : c + rng.integers(1, 8)] = True
            elif kind == 2:  # speckle
                m = rng.random((h, w)) < rng.uniform(0.05, 0.95)
            else:  # the whole image
                m = np.ones((h, w), dtype=bool)
            masks.append(m)
        if masks[0].any() and masks[1].any():
            out.append((masks[0], masks[1], spacing))
    return out


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_hd95_and_assd_equal_medpys(seed):
    pairs = random_pairs(seed)
    for pred, gt, spacing in pairs:
        got = boundary.surface_scores(pred[None], gt[None], spacing)
        want_hd95 = medpy_binary.hd95(pred, gt, voxelspacing=spacing, connectivity=1)
        want_assd = medpy_binary.assd(pred, gt, voxelspacing=spacing, connectivity=1)
        np.testing.assert_allclose(got["hd95"][0], want_hd95, rtol=0, atol=1e-6, err_msg=f"{pred}\n{gt}\n{spacing}")
        np.testing.assert_allclose(got["assd"][0], want_assd, rtol=0, atol=1e-6, err_msg=f"{pred}\n{gt}\n{spacing}")


def test_one_pixel_and_border_masks_equal_medpys():
    pred, gt = np.zeros((2, 7, 9), dtype=bool), np.zeros((2, 7, 9), dtype=bool)
    pred[0, 0, 0] = gt[0, 6, 8] = True  # one pixel each, in opposite corners
    pred[1, :, :3] = True  # a band along the left border against one pixel on the right border
    gt[1, 3, 8] = True
    spacing = (0.7, 1.9)
    got = boundary.surface_scores(pred, gt, spacing)
    for i in range(2):
        assert got["hd95"][i] == pytest.approx(medpy_binary.hd95(pred[i], gt[i], voxelspacing=spacing, connectivity=1), abs=1e-6)
        assert got["assd"][i] == pytest.approx(medpy_binary.assd(pred[i], gt[i], voxelspacing=spacing, connectivity=1), abs=1e-6)
    assert got["hd95"][0] == pytest.approx(np.hypot(6 * 0.7, 8 * 1.9))  # two single pixels: their distance
    assert got["assd"][0] == pytest.approx(np.hypot(6 * 0.7, 8 * 1.9))


def test_the_surface_is_the_foreground_with_a_background_4_neighbour_or_on_the_border():
    mask = np.ones((1, 5, 5), dtype=bool)
    mask[0, 0, 0] = False  # (1, 1) has a background diagonal neighbour only: not on the surface
    surf = boundary.surfaces(mask)[0]
    assert not surf[1:4, 1:4].any() and surf[0, 1:].all() and surf[1:, 0].all() and surf[-1].all() and surf[:, -1].all()
    block = np.zeros((1, 5, 5), dtype=bool)
    block[0, 1:4, 1:4] = True
    assert boundary.surfaces(block)[0].sum() == 8  # the 3×3 block's centre is inside


def brute_force(pred: np.ndarray, gt: np.ndarray, spacing: tuple[float, float], tau: float) -> tuple[float, float, float]:
    """(hd95, assd, nsd) of one (H, W) pair from every pairwise distance between the two surfaces' pixel coordinates."""
    sp, sg = (np.argwhere(boundary.surfaces(m[None])[0]) * np.asarray(spacing) for m in (pred, gt))
    d = cdist(sp, sg)  # Euclidean, spacing units
    d_pg, d_gp = d.min(axis=1), d.min(axis=0)
    pooled = np.concatenate((d_pg, d_gp))
    within = pooled <= tau + 1e-9 * max(tau, 1.0)  # ≤ τ in exact arithmetic: the coordinates' products round too
    return float(np.percentile(pooled, 95)), float(pooled.mean()), within.sum() / pooled.size


@pytest.mark.parametrize("tau", [0.0, 1.0, 2.5, 3.7, 4.0])
def test_nsd_equals_a_brute_force_count(tau):
    # Spacing (0.8, 1.3): 4.0 (5 rows) is a pixel distance, a tie each side may round either way; 1.0, 2.5 and 3.7 are not.
    spacing = (0.8, 1.3)
    for seed in range(3):
        pairs = [(p, g) for p, g, _ in random_pairs(10 + seed, 30) if p.shape[0] <= 10]
        for pred, gt in pairs:
            hd, mean, nsd = brute_force(pred, gt, spacing, tau)
            got = boundary.surface_scores(pred[None], gt[None], spacing, tolerance=tau)
            assert got["nsd"][0] == pytest.approx(nsd, abs=1e-12)
            assert got["hd95"][0] == pytest.approx(hd, abs=1e-9) and got["assd"][0] == pytest.approx(mean, abs=1e-9)


def test_nsd_counts_a_distance_equal_to_the_tolerance_as_within():
    gt = np.zeros((1, 8, 8), dtype=bool)
    gt[0, 2:5, 2:5] = True
    pred = np.roll(gt, 1, axis=2)  # one column to the right: every surface pixel is 0 or 1 pixel from the other surface
    assert boundary.nsd(pred, gt)[0] == 1.0 and boundary.NSD_TOLERANCE == 1.0
    # at τ = 0.5 only the pixels on both surfaces count: rows 2 and 4 at columns 3 and 4, 4 of each surface's 8
    assert boundary.nsd(pred, gt, tolerance=0.5)[0] == pytest.approx(8 / 16)
    assert boundary.nsd(gt, gt)[0] == 1.0 and boundary.hd95(gt, gt)[0] == 0.0 and boundary.assd(gt, gt)[0] == 0.0
    # spacing 0.1: a 3-pixel shift measures 0.30000000000000004 in floating point, and is within τ = 0.3
    shifted = np.roll(gt, 3, axis=2)
    assert boundary.nsd(shifted, gt, (0.1, 0.1), tolerance=0.3)[0] == 1.0
    assert boundary.nsd(shifted, gt, (0.1, 0.1), tolerance=0.29)[0] < 1.0


def test_empty_rules():
    shape, spacing = (3, 6, 10), (0.5, 2.0)
    pred, gt = np.zeros(shape, dtype=bool), np.zeros(shape, dtype=bool)
    # case 0: both empty; case 1: empty prediction; case 2: empty reference
    gt[1, 2:4, 3:6] = True
    pred[2, 1, 1] = True
    got = boundary.surface_scores(pred, gt, spacing)
    diagonal = np.hypot(6 * 0.5, 10 * 2.0)
    np.testing.assert_array_equal(got["hd95"], [0.0, diagonal, np.nan])
    np.testing.assert_array_equal(got["assd"], [0.0, diagonal, np.nan])
    np.testing.assert_array_equal(got["nsd"], [1.0, 0.0, 0.0])
    with pytest.raises(RuntimeError):  # medpy has no rule: it raises
        medpy_binary.hd95(pred[1], gt[1])
    # the worst value: no pair with a prediction scores as badly as predicting nothing
    far = np.zeros((1, 6, 10), dtype=bool)
    far[0, 0, 0] = True
    gt_far = np.zeros((1, 6, 10), dtype=bool)
    gt_far[0, 5, 9] = True
    assert boundary.hd95(far, gt_far, spacing)[0] < diagonal and boundary.assd(far, gt_far, spacing)[0] < diagonal


def test_a_batch_equals_its_cases_one_by_one():
    rng = np.random.default_rng(7)
    pred, gt = rng.random((2, 12, 9, 11)) < rng.uniform(0.02, 0.6, (2, 12, 1, 1))
    pred[0], gt[1], pred[2] = False, False, gt[2]  # empty prediction, empty reference, equal masks
    pred[3], gt[3] = False, False  # both empty
    batch = boundary.surface_scores(pred, gt, (1.2, 0.6))
    for i in range(len(pred)):
        one = boundary.surface_scores(pred[i : i + 1], gt[i : i + 1], (1.2, 0.6))
        for key in ("hd95", "assd", "nsd"):
            np.testing.assert_array_equal(batch[key][i : i + 1], one[key])


def test_the_descriptors():
    for name, higher in (("hd95", False), ("assd", False), ("nsd", True)):
        m = metrics.get(name)
        assert m.kind == "hard" and m.higher_is_better is higher and m.tables == ()
        assert m.references == metrics.get("bahd").references
        assert "both empty" in m.description and "empty" in m.description
    assert metrics.get("nsd").scale == 100 and metrics.get("nsd").header() == "NSD (%) ↑" and metrics.get("hd95").header() == "HD95 ↓"
    assert [m.name for m in metrics.in_table("table1")] == ["dsc", "bahd"]  # the paper's tables are unchanged


@pytest.fixture
def scored(tiny_data):
    rng = np.random.default_rng(0)
    p = rng.random((tiny_data.n, 1, 16, 16)).astype(np.float32)
    rows, _ = score_predictions(np.concatenate([1 - p, p], axis=1), tiny_data, progress=False)
    return tiny_data, p, rows


def test_the_long_table_has_them_against_every_hard_reference(scored):
    data, p, rows = scored
    for name in ("hd95", "assd", "nsd"):
        mine = rows[rows["metric"] == name]
        assert set(mine["reference"]) == {"gt", "majority", "staple", "rater:a", "rater:b", "rater:c"}
        assert mine[long_table.COUNTS].notna().all().all()  # a hard metric's rows carry the pair's counts
        gt_rows = mine[mine["reference"] == "gt"]
        want = boundary.surface_scores(p[:, 0] > 0.5, data.gt.astype(bool), data.spacing)[name]
        np.testing.assert_allclose(gt_rows["value"], want)
        assert (mine["n_samples"] == 1).all()
    assert len(rows[rows["metric"] == "nsd"]) == len(rows[rows["metric"] == "dsc"])


def test_report_adds_them_as_columns_when_asked(scored):
    _, _, rows = scored
    long = pd.concat(
        [rows.assign(dataset="toy", raters="r", noise="protocol", method=m, seed=s) for m in ("mv-unet", "lf-net") for s in (0, 1)]
    )
    summary = long_table.summarise(long[long_table.COLUMNS])
    part = summary[summary["reference"] == "gt"]
    (_, plain), *_ = tables.group_tables(PAPER, part, ("toy", "r", "protocol", "gt"))
    assert [c.metric for c in plain.columns] == ["dsc", "bahd"]
    (_, table), *_ = tables.group_tables(PAPER, part, ("toy", "r", "protocol", "gt"), extra=("hd95", "assd", "nsd"))
    assert [c.metric for c in table.columns] == ["dsc", "bahd", "hd95", "assd", "nsd"]
    header = table_text.to_markdown(table).splitlines()
    assert any("HD95 ↓" in line and "ASSD ↓" in line and "NSD (%) ↑" in line for line in header)
    assert hard_metrics("hd95, nsd,hd95") == ("hd95", "nsd")
    for bad in ("ged", "hd99"):
        with pytest.raises(UsageError, match="not a hard metric; choose from dsc, bahd, hd95, assd, nsd"):
            hard_metrics(bad)
