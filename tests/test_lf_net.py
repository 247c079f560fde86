"""Tests for methods/lf_net.py: TV mask, the three LF-Net loss terms by hand, every ablation's terms, R = 1,
prediction through the segmentation network only, and a training smoke test."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import methods.lf_net as lf
from bench import study
from bench.report import rows
from bench.train import harness, inference
from labels.fusion import majority_vote, threshold_vote_mask
from methods.base import DataSpec, StepContext
from methods.kit import masked_cross_entropy
from methods.registry import build_method, get_entry, method_names

CPU = torch.device("cpu")
VARIANTS = [
    "lf-net",
    "lf-net-s",
    "lf-net-s-tv",
    "lf-net-s-sls",
    "lf-net-s-rcls",
    "lf-net-s-tv-sls",
    "lf-net-no-tv-sl",
    "lf-net-no-ce",
    "lf-net-cm",
    "lf-net-sll-mv",
    "lf-net-sll-staple",
    "lf-net-sll-image",
    "lf-net-sll-image-no-tv-sl",
    "lf-net-rcn-image",
    "lf-net-rcn-shared",
]


def ctx(stage: str, epoch: int = 0) -> StepContext:
    return StepContext(stage, epoch, 0, torch.Generator().manual_seed(0))


def blob_raters(n: int, n_raters: int, size: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Images (n, 1, size, size) and raters (n, R, size, size) uint8: a disc per image, each rater shifted/grown/shrunk."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:size, :size]
    images = np.empty((n, 1, size, size), np.float32)
    raters = np.empty((n, n_raters, size, size), np.uint8)
    for i in range(n):
        cy, cx, rad = rng.uniform(0.35, 0.65) * size, rng.uniform(0.35, 0.65) * size, rng.uniform(0.15, 0.3) * size
        d = np.hypot(yy - cy, xx - cx)
        images[i, 0] = (d <= rad) + 0.3 * rng.standard_normal((size, size))
        for r in range(n_raters):
            raters[i, r] = d <= rad + (r - n_raters // 2)  # raters from under- to over-segmenting
    return images, raters


def batch_of(images: np.ndarray, raters: np.ndarray, valid: np.ndarray | None = None, **extra) -> dict[str, torch.Tensor]:
    valid = np.ones(raters.shape[:2], bool) if valid is None else valid
    out = {"images": torch.from_numpy(images), "raters": torch.from_numpy(raters).long(), "rater_valid": torch.from_numpy(valid)}
    out["index"] = torch.arange(len(images))
    out.update({k: torch.from_numpy(v) for k, v in extra.items()})
    return out


def build(name: str, spec: DataSpec, **overrides) -> lf.LFNet:
    torch.manual_seed(0)
    m = build_method(name, spec, overrides)
    return m.eval()  # batch norm from running statistics: the same logits inside and outside `loss`


# --- TV mask and the masked cross-entropy ------------------------------------------------------


def test_tv_mask_counts_raters_background_included():
    # R = 3, L = 3, one row of 5 pixels; β = R − 1 = 2 votes for the most-voted class.
    raters = torch.tensor([[[[1, 1, 0, 0, 2]], [[1, 1, 0, 1, 2]], [[1, 0, 0, 2, 0]]]])  # (1, 3, 1, 5)
    valid = torch.ones(1, 3, dtype=torch.bool)
    m = build("lf-net", DataSpec(1, 3, 3))
    assert m.beta == 2
    mask = threshold_vote_mask(raters, valid, 3, m.beta)
    # 3×fg ✓ | 2×fg ✓ | 3×background ✓ (background counts) | 0,1,2 ✗ | 2,2,0 ✓
    assert mask.tolist() == [[[True, True, True, False, True]]]
    # a missing rater casts no vote: with rater 3 gone, pixel 2 (0, 1, ·) no longer qualifies ...
    raters2 = torch.tensor([[[[1, 0]], [[1, 1]], [[1, 1]]]])
    valid2 = torch.tensor([[True, False, True]])
    assert threshold_vote_mask(raters2, valid2, 3, 2).tolist() == [[[True, False]]]
    # ... and β is a count (4 of 5 with R = 5), not a fraction
    assert build("lf-net", DataSpec(1, 2, 5)).beta == 4


def test_tv_masked_cross_entropy_by_hand():
    # 3 pixels, binary; raters (R = 3) give MV = (1, 0, 1) and votes (3, 2, 2) → β = 3 keeps pixel 0 only.
    raters = torch.tensor([[[[1, 0, 1]], [[1, 0, 0]], [[1, 1, 1]]]])
    valid = torch.ones(1, 3, dtype=torch.bool)
    logits = torch.tensor([[[[0.0, 1.0, 2.0]], [[2.0, 0.0, -1.0]]]])  # (1, 2, 1, 3)
    mv = majority_vote(raters, valid, 2)
    assert mv.tolist() == [[[1, 0, 1]]]
    ce0 = -math.log(math.exp(2.0) / (math.exp(0.0) + math.exp(2.0)))
    ce1 = -math.log(math.exp(1.0) / (math.exp(1.0) + math.exp(0.0)))
    mask3 = threshold_vote_mask(raters, valid, 2, 3)
    assert masked_cross_entropy(logits, mv, mask3).item() == pytest.approx(ce0, rel=1e-6)
    mask2 = threshold_vote_mask(raters, valid, 2, 2)  # every pixel
    ce2 = -math.log(math.exp(-1.0) / (math.exp(2.0) + math.exp(-1.0)))
    assert masked_cross_entropy(logits, mv, mask2).item() == pytest.approx((ce0 + ce1 + ce2) / 3, rel=1e-6)


# --- L_sl --------------------------------------------------------------------------------------


def test_soft_label_loss_by_hand_with_tau_squared_and_mask():
    tau = 2.5
    a1 = [2.0, 0.0]  # frozen SLL logits at the pixel
    a2 = [1.0, 3.0]  # segmentation logits at the pixel
    z1 = [math.exp(v / tau) for v in a1]
    q1 = [v / sum(z1) for v in z1]
    z2 = [math.exp(v / tau) for v in a2]
    log_q2 = [math.log(v / sum(z2)) for v in z2]
    expected = -(tau**2) * sum(p * lq for p, lq in zip(q1, log_q2, strict=True))

    logits = torch.tensor(a2).view(1, 2, 1, 1)
    target = torch.softmax(torch.tensor(a1).view(1, 2, 1, 1) / tau, dim=1)
    assert lf.soft_label_loss(logits, target, tau).item() == pytest.approx(expected, rel=1e-6)
    # τ² factor: the same pixel at τ = 1 is the plain cross-entropy, not scaled
    plain = -(torch.softmax(torch.tensor(a1), 0) * torch.log_softmax(torch.tensor(a2), 0)).sum().item()
    assert lf.soft_label_loss(logits, torch.softmax(torch.tensor(a1).view(1, 2, 1, 1), 1), 1.0).item() == pytest.approx(plain, rel=1e-6)

    # masking: a second pixel with other values is outside the mask → the mean over selected pixels is the first one's
    logits2 = torch.tensor([[[[1.0, -4.0]], [[3.0, 5.0]]]])  # (1, 2, 1, 2)
    target2 = torch.cat([target, torch.tensor([0.9, 0.1]).view(1, 2, 1, 1)], dim=3)
    mask = torch.tensor([[[True, False]]])
    assert lf.soft_label_loss(logits2, target2, tau, mask).item() == pytest.approx(expected, rel=1e-6)
    assert lf.soft_label_loss(logits2, target2, tau, torch.zeros_like(mask)).item() == 0.0
    unmasked = lf.soft_label_loss(logits2, target2, tau).item()
    assert unmasked != pytest.approx(expected)


def test_soften_probabilities_equals_softmax_of_log_and_keeps_one_hot():
    p = torch.tensor([0.2, 0.8]).view(1, 2, 1, 1)
    assert torch.allclose(lf.soften(p, 2.5), torch.softmax(p.log() / 2.5, 1))
    one_hot = torch.tensor([0.0, 1.0]).view(1, 2, 1, 1)
    assert torch.equal(lf.soften(one_hot, 2.5), one_hot)


# --- L_rcl -------------------------------------------------------------------------------------


def test_rater_cross_entropy_sums_raters_and_masks_missing_ones():
    rng = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 2, 2, 1, 3, generator=rng)  # (B, R, L, H, W)
    raters = torch.tensor([[[[0, 1, 1]], [[1, 1, 0]]], [[[1, 0, 0]], [[0, 0, 1]]]])  # (B, R, H, W)
    valid = torch.tensor([[True, False], [True, True]])  # rater 1 missing on image 0

    def ce(b, r):
        return F.cross_entropy(logits[b, r][None], raters[b, r][None], reduction="none").flatten().tolist()

    expected = np.mean(ce(0, 0) + ce(1, 0)) + np.mean(ce(1, 1))
    assert lf.rater_cross_entropy(logits, raters, valid).item() == pytest.approx(expected, rel=1e-6)
    changed = raters.clone()
    changed[0, 1] = 1 - changed[0, 1]  # the missing rater's labels do not matter
    assert lf.rater_cross_entropy(logits, changed, valid).item() == pytest.approx(expected, rel=1e-6)


def test_rcl_is_not_tv_masked_and_reaches_the_segmentation_network():
    # L = 3, R = 3 raters that disagree everywhere (0, 1, 2): the TV mask is empty, L_ce = L_sl = 0, L_rcl is not.
    raters = np.stack([np.full((16, 16), r, np.uint8) for r in range(3)])[None].repeat(2, 0)
    images = np.random.default_rng(0).random((2, 1, 16, 16), dtype=np.float32)
    spec = DataSpec(1, 3, 3)
    m = build("lf-net", spec)
    batch = batch_of(images, raters)
    assert not threshold_vote_mask(batch["raters"], batch["rater_valid"], 3, m.beta).any()
    parts = m.loss(batch, ctx("segmentation"))
    assert parts["ce"].item() == 0.0 and parts["sl"].item() == 0.0
    with torch.no_grad():
        probs = torch.softmax(m.seg(batch["images"]), 1)
        expected = lf.rater_cross_entropy(m.rcn(probs), batch["raters"], batch["rater_valid"])
    assert parts["rcl"].item() == pytest.approx(expected.item(), rel=1e-5) and parts["rcl"].item() > 0
    assert parts["loss"].item() == pytest.approx(m.cfg.lam * expected.item(), rel=1e-5)
    # λ·L_rcl back-propagates into Θ2 (P2 is not detached); the frozen SLL gets nothing
    parts["loss"].backward()
    assert m.seg.head.weight.grad is not None and m.seg.head.weight.grad.abs().sum() > 0
    assert all(p.grad is None for p in m.sll.parameters())


def test_rcl_epochs_switches_the_rater_term_off():
    images, raters = blob_raters(2, 3, 16)
    m = build("lf-net", DataSpec(1, 2, 3), rcl_epochs=1)
    assert m.loss(batch_of(images, raters), ctx("segmentation", epoch=0))["rcl"].item() > 0
    assert m.loss(batch_of(images, raters), ctx("segmentation", epoch=1))["rcl"].item() == 0.0


def test_confusion_heads_are_column_stochastic_and_identity_gives_cross_entropy():
    heads = lf.ConfusionMatrixHeads(32, 3, 2)
    cms = heads(torch.randn(1, 32, 2, 2))
    assert cms.shape == (1, 2, 2, 2, 3, 3)  # (B, R, H, W, L, L), the layout of methods.kit.confusion_nll
    assert torch.allclose(cms.sum(-2), torch.ones(1, 2, 2, 2, 3))
    probs = torch.softmax(torch.randn(1, 3, 2, 2), 1)
    raters = torch.randint(0, 3, (1, 2, 2, 2))
    eye = torch.eye(3).expand(1, 2, 2, 2, 3, 3)
    valid = torch.ones(1, 2, dtype=torch.bool)
    expected = sum(F.nll_loss(probs.log(), raters[:, r]).item() for r in range(2))
    assert lf.confusion_rater_term(eye, probs, raters, valid, 0.0).item() == pytest.approx(expected, rel=1e-4)
    # trace term: identity has trace L = 3 per rater
    assert lf.confusion_rater_term(eye, probs, raters, valid, 0.5).item() == pytest.approx(expected + 0.5 * 2 * 3, rel=1e-4)


# --- variants: which terms each loss has -------------------------------------------------------

# ce / sl: None (absent), "tv" (TV-masked) or "all" (every pixel); rcl: None, "rcn", "rcn-image", "shared" or "cm";
# sll: the soft-label source; sll_tv: the SLL stage's mask
EXPECTED = {
    "lf-net": dict(ce="tv", sl="tv", rcl="rcn", sll="sll", sll_tv=True),
    "lf-net-s": dict(ce="all", sl=None, rcl=None, sll=None, sll_tv=None),
    "lf-net-s-tv": dict(ce="tv", sl=None, rcl=None, sll=None, sll_tv=None),
    "lf-net-s-sls": dict(ce="all", sl="all", rcl=None, sll="sll", sll_tv=False),
    "lf-net-s-rcls": dict(ce="all", sl=None, rcl="rcn", sll=None, sll_tv=None),
    "lf-net-s-tv-sls": dict(ce="tv", sl="tv", rcl=None, sll="sll", sll_tv=True),
    "lf-net-no-tv-sl": dict(ce="tv", sl="all", rcl="rcn", sll="sll", sll_tv=True),
    "lf-net-no-ce": dict(ce=None, sl="tv", rcl="rcn", sll="sll", sll_tv=True),
    "lf-net-cm": dict(ce="tv", sl="tv", rcl="cm", sll="sll", sll_tv=True),
    "lf-net-sll-mv": dict(ce="tv", sl="tv", rcl="rcn", sll="mv", sll_tv=None),
    "lf-net-sll-staple": dict(ce="tv", sl="tv", rcl="rcn", sll="staple", sll_tv=None),
    "lf-net-sll-image": dict(ce="tv", sl="tv", rcl="rcn", sll="sll", sll_tv=True),
    "lf-net-sll-image-no-tv-sl": dict(ce="tv", sl="all", rcl="rcn", sll="sll", sll_tv=True),
    "lf-net-rcn-image": dict(ce="tv", sl="tv", rcl="rcn-image", sll="sll", sll_tv=True),
    "lf-net-rcn-shared": dict(ce="tv", sl="tv", rcl="shared", sll="sll", sll_tv=True),
}
MODULE = {"rcn": "rcn", "rcn-image": "rcn", "shared": "rcn", "cm": "cm", None: None}  # the child each rater term trains


def test_every_variant_is_registered_in_its_group():
    assert set(EXPECTED) == set(VARIANTS)
    assert {n for n in method_names() if n.startswith("lf-net")} == set(VARIANTS)
    assert get_entry("lf-net").group == "main"
    readings = [n for n in method_names() if rows.table_of(study.default(), n) == "readings"]  # the study says where they are shown
    assert readings == ["lf-net-sll-image", "lf-net-sll-image-no-tv-sl", "lf-net-rcn-image", "lf-net-rcn-shared"]
    assert all(get_entry(n).group == "variant" for n in readings)
    assert all(get_entry(n).group == "ablation" for n in VARIANTS if n != "lf-net" and n not in readings)
    assert lf.LFNet.needs_consistent_raters


@pytest.mark.parametrize("name", VARIANTS)
def test_variant_loss_has_exactly_the_expected_terms(name):
    exp = EXPECTED[name]
    n, R, size = 2, 5, 16
    images, raters = blob_raters(n, R, size)
    valid = np.ones((n, R), bool)
    valid[1, 0] = False  # one missing rater
    spec = DataSpec(1, 2, R)
    m = build(name, spec)
    extra = {k: v for k, v in m.prepare(raters, valid).items()}
    batch = batch_of(images, raters, valid, **extra)
    r_t, v_t = batch["raters"], batch["rater_valid"]
    mv, tv = majority_vote(r_t, v_t, 2), threshold_vote_mask(r_t, v_t, 2, 4)
    assert 0 < tv.sum() < tv.numel()  # the mask selects some pixels, so "tv" and "all" differ

    # stages and modules
    stage_names = [s.name for s in m.stages]
    assert stage_names == (["soft_label", "segmentation"] if exp["sll"] == "sll" else ["segmentation"])
    assert hasattr(m, "sll") == (exp["sll"] == "sll")
    module = MODULE[exp["rcl"]]
    assert hasattr(m, "rcn") == (module == "rcn") and hasattr(m, "cm") == (module == "cm")
    assert m.stages[-1].modules == ("seg",) + ((module,) if module else ())

    if exp["sll"] == "sll":  # stage 1: L_sll, masked or not, and nothing else
        parts = m.loss(batch, ctx("soft_label"))
        with torch.no_grad():
            a1 = m.sll_logits(batch["images"], r_t, v_t)
        expected = masked_cross_entropy(a1, mv, tv if exp["sll_tv"] else None)
        assert parts["sll"].item() == pytest.approx(expected.item(), rel=1e-5)
        assert parts["loss"].item() == pytest.approx(expected.item(), rel=1e-5)
        assert parts["ce"].item() == parts["sl"].item() == parts["rcl"].item() == 0.0

    parts = m.loss(batch, ctx("segmentation"))
    assert set(parts) == {"loss", "sll", "ce", "sl", "rcl"}
    assert parts["sll"].item() == 0.0
    with torch.no_grad():
        logits = m.seg(batch["images"])
    masks = {"tv": tv, "all": None}
    total = 0.0
    if exp["ce"] is None:
        assert parts["ce"].item() == 0.0
    else:
        expected = masked_cross_entropy(logits, mv, masks[exp["ce"]]).item()
        assert parts["ce"].item() == pytest.approx(expected, rel=1e-5)
        total += expected
    if exp["sl"] is None:
        assert parts["sl"].item() == 0.0
    else:
        with torch.no_grad():
            if exp["sll"] == "sll":
                q1 = torch.softmax(m.sll_logits(batch["images"], r_t, v_t) / 2.5, 1)
            elif exp["sll"] == "mv":
                q1 = F.one_hot(mv, 2).permute(0, 3, 1, 2).float()
            else:
                fg = torch.from_numpy(extra["staple"])
                q1 = lf.soften(torch.stack([1 - fg, fg], 1), 2.5)
        expected = lf.soft_label_loss(logits, q1, 2.5, masks[exp["sl"]]).item()
        assert parts["sl"].item() == pytest.approx(expected, rel=1e-5)
        total += expected
    if exp["rcl"] is None:
        assert parts["rcl"].item() == 0.0
    else:
        with torch.no_grad():
            probs = torch.softmax(logits, 1)
            if exp["rcl"] == "rcn":
                expected = lf.rater_cross_entropy(m.rcn(probs), r_t, v_t).item()
            elif exp["rcl"] == "rcn-image":
                expected = lf.rater_cross_entropy(m.rcn(torch.cat([batch["images"], probs], 1)), r_t, v_t).item()
            elif exp["rcl"] == "shared":
                expected = lf.rater_cross_entropy(m.rcn(m.seg.features(batch["images"])), r_t, v_t).item()
            else:
                expected = lf.confusion_rater_term(m.cm(m.seg.features(batch["images"])), probs, r_t, v_t, 0.0).item()
        assert parts["rcl"].item() == pytest.approx(expected, rel=1e-5)
        total += 0.05 * expected
    assert parts["loss"].item() == pytest.approx(total, rel=1e-5)


# --- R = 1, multi-class, prediction -------------------------------------------------------------


def test_single_rater_oracle_view_selects_every_pixel_and_has_one_head():
    images, raters = blob_raters(2, 1, 16)
    m = build("lf-net", DataSpec(1, 2, 1))
    assert m.beta == 0
    batch = batch_of(images, raters)
    assert threshold_vote_mask(batch["raters"], batch["rater_valid"], 2, m.beta).all()
    assert m.rcn(torch.rand(2, 2, 16, 16)).shape == (2, 1, 2, 16, 16)
    for stage in ("soft_label", "segmentation"):
        parts = m.loss(batch, ctx(stage))
        assert torch.isfinite(parts["loss"]) and parts["loss"].item() > 0


def test_multiclass_three_labels():
    rng = np.random.default_rng(0)
    images = rng.random((2, 3, 16, 16), dtype=np.float32)
    raters = rng.integers(0, 3, (2, 4, 16, 16)).astype(np.uint8)
    spec = DataSpec(3, 3, 4)
    for name in ("lf-net", "lf-net-cm", "lf-net-sll-mv"):
        m = build(name, spec)
        for stage in [s.name for s in m.stages]:
            assert torch.isfinite(m.loss(batch_of(images, raters), ctx(stage))["loss"])
        assert m.predict_proba(torch.from_numpy(images)).shape == (2, 3, 16, 16)
    with pytest.raises(ValueError, match="binary"):
        build("lf-net-sll-staple", spec)


def test_sll_input_is_one_hot_per_rater_with_missing_raters_zero():
    raters = torch.tensor([[[[2]], [[0]]]])  # (1, 2, 1, 1), L = 3
    x = lf.rater_onehot(raters, torch.tensor([[True, False]]), 3)
    assert x.flatten().tolist() == [0, 0, 1, 0, 0, 0]  # rater 0 says class 2; rater 1 missing
    assert build("lf-net", DataSpec(1, 3, 2)).sll.encoders[0][0].in_channels == 6
    assert build("lf-net", DataSpec(1, 3, 2), sll_sees_image=True).sll.encoders[0][0].in_channels == 7


@pytest.mark.parametrize("name", ["lf-net", "lf-net-no-tv-sl", "lf-net-sll-image", "lf-net-sll-image-no-tv-sl"])
def test_the_image_reaches_the_soft_label_and_l_sl_only_in_the_image_readings(name):
    """The 2×2 of docs/decisions.md: the image readings' SLL (and so q̂1 and L_sl) moves with the image, the raters-only
    readings' does not; the raters reach every reading's SLL."""
    images, raters = blob_raters(2, 5, 16)
    torch.manual_seed(0)
    m = build(name, DataSpec(1, 2, 5)).eval()
    batch = batch_of(images, raters, **m.prepare(raters, np.ones((2, 5), bool)))
    other = {**batch, "images": batch["images"] + 1.0}
    flipped = {**batch, "raters": 1 - batch["raters"]}
    with torch.no_grad():
        sl = {k: m.loss(b, ctx("segmentation"))["sl"].item() for k, b in (("same", batch), ("flipped", flipped))}
        target = {k: m.soft_target(b, b["raters"][:, 0]) for k, b in (("same", batch), ("image", other), ("raters", flipped))}
    sees_image = get_entry(name).overrides.get("sll_sees_image", False)
    assert sees_image == ("sll-image" in name)
    assert (not torch.equal(target["same"], target["image"])) == sees_image
    assert not torch.equal(target["same"], target["raters"]) and sl["same"] != sl["flipped"]


def test_prediction_uses_the_segmentation_network_only():
    images, _ = blob_raters(2, 3, 16)
    x = torch.from_numpy(images)
    for name in ("lf-net", "lf-net-cm"):
        m = build(name, DataSpec(1, 2, 3))
        before = m.predict_proba(x)
        assert torch.allclose(before.sum(1), torch.ones(2, 16, 16))
        with torch.no_grad():
            for child in ("sll", "rcn", "cm"):
                if hasattr(m, child):
                    for p in getattr(m, child).parameters():
                        p.add_(torch.randn_like(p))
        assert torch.equal(m.predict_proba(x), before)
        with torch.no_grad():
            m.seg.head.bias.add_(torch.tensor([1.0, -1.0]))
        assert not torch.allclose(m.predict_proba(x), before)


# --- smoke: the harness trains and predicts -----------------------------------------------------


@pytest.mark.parametrize("name", ["lf-net", "lf-net-cm", "lf-net-sll-staple"])
def test_fit_and_predict_smoke(name):
    images, raters = blob_raters(8, 5, 16, seed=3)
    valid = np.ones((8, 5), bool)
    valid[2, 4] = False
    torch.manual_seed(0)
    m = build_method(name, DataSpec(1, 2, 5))
    split = harness.Split(images, raters, valid)
    records = harness.fit(
        m, split, harness.fixed_schedules(m, 2, 4), harness.Runtime(0, CPU), val=split, out=harness.Output(progress=False)
    ).stages
    assert list(records) == [s.name for s in m.stages]
    assert all(np.isfinite(r["best_val_loss"]) for r in records.values())
    probs = inference.predict_proba(m, images, device=CPU)
    assert probs.shape == (8, 2, 16, 16) and np.isfinite(probs).all()
    assert np.allclose(probs.sum(1), 1, atol=1e-5)


def test_the_shared_feature_reading_trains_the_segmentation_features_through_its_heads():
    """lf-net-rcn-shared: the rater heads sit on Θ2's last decoder features, so L_rcl alone moves Θ2's encoder."""
    images, raters = blob_raters(2, 5, 16)
    m = build("lf-net-rcn-shared", DataSpec(1, 2, 5))
    assert isinstance(m.rcn, lf.RaterHeads) and not hasattr(m.rcn, "backbone")
    batch = batch_of(images, raters, np.ones((2, 5), bool))
    rcl = lf.rater_cross_entropy(m.rcn(m.seg.features(batch["images"])), batch["raters"], batch["rater_valid"])
    rcl.backward()
    first = next(m.seg.parameters())
    assert first.grad is not None and first.grad.abs().sum() > 0
    assert all(p.grad is None for p in m.sll.parameters())  # the soft-label network is not part of it


def test_the_teacher_is_the_soft_label_networks_output_and_the_vote_mask():
    images, raters = blob_raters(2, 5, 16)
    valid = np.ones((2, 5), bool)
    batch = batch_of(images, raters, valid)
    m = build("lf-net", DataSpec(1, 2, 5)).eval()
    probs, selected = m.teacher(batch["images"], batch["raters"], batch["rater_valid"])
    with torch.no_grad():
        want = torch.softmax(m.sll_logits(batch["images"], batch["raters"], batch["rater_valid"]), 1)
    torch.testing.assert_close(probs, want)
    assert torch.equal(selected, threshold_vote_mask(batch["raters"], batch["rater_valid"], 2, 4))
    assert build("lf-net-s", DataSpec(1, 2, 5)).teacher(batch["images"], batch["raters"], batch["rater_valid"]) is None
