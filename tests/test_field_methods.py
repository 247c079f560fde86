"""The field's sampling methods (methods/prob_unet.py, pionono.py, d_persona.py, latent.py): their distinctive math on
tiny tensors, their samples and per-rater outputs, and a smoke run of each through the CLI scored with M > 1."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import run_bench
from torch.distributions import MultivariateNormal, Normal, kl_divergence

from bench import study
from bench.train import harness, inference
from bench.train.steps import param_groups
from methods.base import DataSpec, StepContext
from methods.d_persona import DPersona, attend, bound_loss
from methods.kit import drawn_targets
from methods.latent import kl_diagonal, one_hot_masks, soft_dice_loss
from methods.pionono import Pionono, kl_to_isotropic
from methods.prob_unet import ProbabilisticUNet
from methods.registry import build_method, get_entry, method_names

SPEC = DataSpec(in_channels=1, n_classes=2, n_raters=3)
FIELD = ("prob-unet", "pionono", "d-persona")


def ctx(stage: str = "train", seed: int = 0) -> StepContext:
    return StepContext(stage, 0, 0, torch.Generator().manual_seed(seed))


def tiny_batch(seed: int = 0, b: int = 4, size: int = 16) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    raters = (torch.rand(b, SPEC.n_raters, size, size, generator=gen) > 0.6).long()
    valid = torch.ones(b, SPEC.n_raters, dtype=torch.bool)
    valid[0, 2] = False
    return {"images": torch.randn(b, 1, size, size, generator=gen), "raters": raters, "rater_valid": valid}


def test_the_three_are_the_field_group():
    assert [n for n in method_names("field")] == list(FIELD)
    assert all(get_entry(n).group == "field" for n in FIELD)
    assert not set(FIELD) & set(method_names("main"))  # the paper's tables and the default run stay as they are


# --------------------------------------------------------------------------- KL of diagonal Gaussians (Prob. U-Net, D-Persona)


def test_kl_of_diagonal_gaussians_is_the_analytic_one():
    gen = torch.Generator().manual_seed(0)
    mu_q, ls_q, mu_p, ls_p = (torch.randn(5, 6, generator=gen) * 0.7 for _ in range(4))
    want = kl_divergence(Normal(mu_q, ls_q.exp()), Normal(mu_p, ls_p.exp())).sum(-1)
    assert torch.allclose(kl_diagonal(mu_q, ls_q, mu_p, ls_p), want, atol=1e-5)
    assert torch.allclose(kl_diagonal(mu_q, ls_q, mu_q, ls_q), torch.zeros(5), atol=1e-6)
    # By hand, one dimension: q = N(1, 1), p = N(0, e²): log e + (1 + 1) / (2e²) − ½.
    one = kl_diagonal(torch.ones(1, 1), torch.zeros(1, 1), torch.zeros(1, 1), torch.ones(1, 1))
    assert math.isclose(one.item(), 1 + 1 / math.e**2 - 0.5, rel_tol=1e-6)


def test_the_prob_unet_loss_is_pixel_summed_ce_plus_beta_kl_of_its_posterior_and_prior():
    torch.manual_seed(0)
    batch = tiny_batch()
    method = ProbabilisticUNet(ProbabilisticUNet.Config(beta=3.0), SPEC).eval()
    out = method.loss(batch, ctx())
    assert torch.allclose(out["loss"], out["ce"] + 3.0 * out["kl"])
    # The KL part is KL(q(z | x, y) ‖ p(z | x)) of the drawn rater's mask: recompute it from the nets.
    _, target, _ = drawn_targets(batch["raters"], batch["rater_valid"], torch.Generator().manual_seed(0))  # the loss's own draw
    mu_p, ls_p = method.prior(batch["images"])
    mu_q, ls_q = method.posterior(torch.cat([batch["images"], one_hot_masks(target[:, None], torch.ones(4, 1, dtype=torch.bool), 2)], 1))
    want = kl_divergence(Normal(mu_q, ls_q.exp()), Normal(mu_p, ls_p.exp())).sum(-1).mean()
    assert torch.allclose(out["kl"], want, atol=1e-5) and out["kl"] > 0
    assert out["ce"] > 16 * 16 * 0.1  # a sum over the 256 pixels of each image, not their mean


def test_prob_unet_samples_come_from_the_prior_and_differ():
    torch.manual_seed(0)
    method = ProbabilisticUNet(ProbabilisticUNet.Config(), SPEC).eval()
    with torch.no_grad():
        method.prior.to_gaussian.bias[6:] += 2.0  # a wide prior: its draws must change the logits
        x = tiny_batch()["images"]
        ids = torch.arange(10, 14)
        a = method.predict_samples(x, 4, ids)
        b = method.predict_samples(x, 4, ids)
        c = method.predict_proba(x, ids)
        one = method.predict_samples(x[1:2], 4, ids[1:2])
        other = method.predict_proba(x, ids + 100)
    assert a.shape == (4, 4, 2, 16, 16) and torch.equal(a, b)  # reproducible from the ids
    assert torch.allclose(one[0], a[1], atol=1e-5)  # an image's draws do not depend on its batch
    assert (a[:, 0] - a[:, 1]).abs().max() > 1e-4  # the samples differ
    assert torch.allclose(c.sum(1), torch.ones(4, 16, 16), atol=1e-5)
    assert torch.allclose(method.predict_proba(x[:1], ids[:1]), c[:1], atol=1e-5)  # the consensus does not depend on the batch
    assert not torch.allclose(other, c)  # other ids, other draws


def test_images_do_not_share_one_set_of_draws():
    """The defect of a consensus read from one set of offsets for every image: two identical images with different ids
    get different draws, and the same id the same draws."""
    from methods.latent import image_normal

    eps = image_normal(torch.tensor([5, 6, 5, 5 + 2**32]), (64, 6), torch.device("cpu"))
    assert torch.equal(eps[0], eps[2]) and not torch.allclose(eps[0], eps[1])
    assert not torch.allclose(eps[0], eps[3])  # ids apart only above 32 bits (another seed or stream) draw apart too


@pytest.mark.parametrize("name", ["prob-unet", "d-persona"])
def test_the_prior_sees_the_image_at_initialisation(name):
    """He-normal encoders as the official code: the prior's mean varies across images from the start. With PyTorch's
    default init (reset here for comparison) it varied by 2e-6 (Prob. U-Net) and 4e-8 (D-Persona) of its size through
    12–15 plain conv + ReLU layers, blind to the image; with He-normal by 0.16 and 0.045."""
    images = torch.rand(8, 1, 16, 16)
    images[4:] = 0
    images[4:, :, 4:12, 6:10] = 1  # half noise, half a bar

    def spread(method) -> float:
        with torch.no_grad():
            mu, _ = method.eval().prior(images)
        return float((mu - mu.mean(0)).abs().mean() / mu.abs().mean().clamp_min(1e-12))

    torch.manual_seed(0)
    method = build_method(name, SPEC)
    he = spread(method)
    for m in method.prior.modules():
        if isinstance(m, torch.nn.Conv2d):
            m.reset_parameters()
    assert he > 0.02 and spread(method) < 1e-4


def test_fcomb_is_orthogonal_and_pionono_s_head_xavier():
    torch.manual_seed(0)
    prob = ProbabilisticUNet(ProbabilisticUNet.Config(), SPEC)
    w = prob.fcomb.layers[0].weight.flatten(1)  # (32, 38): orthogonal rows
    assert torch.allclose(w @ w.T, torch.eye(32), atol=1e-5)
    assert prob.fcomb.layers[0].bias.abs().max() <= 0.002  # truncated N(0, 0.001²)
    pio = Pionono(Pionono.Config(), SPEC)
    assert (pio.head.last_layer.bias == 0).all()
    fan_in, fan_out = 32, 2
    bound = math.sqrt(6 / (fan_in + fan_out))  # Xavier-uniform's limit
    assert pio.head.last_layer.weight.abs().max() <= bound and pio.head.last_layer.weight.abs().max() > 0.8 * bound


# --------------------------------------------------------------------------- D-Persona's bound term


def test_the_bound_term_by_hand():
    # One image of 1 × 2 pixels, two raters (1, 0) and (1, 1): union (1, 1), intersection (1, 0). Three prior draws with
    # foreground probabilities (0.2, 0.9), (0.6, 0.1), (0.4, 0.5): max (0.6, 0.9), min (0.2, 0.1).
    fg = torch.tensor([[[[0.2, 0.9]], [[0.6, 0.1]], [[0.4, 0.5]]]])
    raters = torch.tensor([[[[1, 0]], [[1, 1]]]]).bool()
    valid = torch.ones(1, 2, dtype=torch.bool)
    dice_max = 2 * (0.6 + 0.9) / (0.6 + 0.9 + 2)
    dice_min = 2 * 0.2 / (0.2 + 0.1 + 1)
    assert math.isclose(bound_loss(fg, raters, valid).item(), 1 - (dice_max + dice_min) / 2, rel_tol=1e-6)
    # A missing rater is left out of both: with rater 1 missing, union = intersection = (1, 0).
    valid[0, 1] = False
    dice_max, dice_min = 2 * 0.6 / (0.6 + 0.9 + 1), 2 * 0.2 / (0.2 + 0.1 + 1)
    assert math.isclose(bound_loss(fg, raters, valid).item(), 1 - (dice_max + dice_min) / 2, rel_tol=1e-6)


def test_d_persona_stage_one_adds_beta_times_the_bound_and_its_kl():
    batch = tiny_batch()
    parts = {}
    for beta in (0.0, 0.5):
        torch.manual_seed(0)
        method = DPersona(DPersona.Config(beta=beta), SPEC).eval()
        parts[beta] = method.loss(batch, ctx("prior"))
    assert parts[0.5]["bound"] > 0
    assert torch.allclose(parts[0.5]["loss"] - parts[0.0]["loss"], 0.5 * parts[0.5]["bound"], atol=1e-5)
    assert parts[0.5]["kl"] > 0


def test_d_persona_heads_attend_over_the_prior_bank_and_train_alone_in_stage_two():
    bank = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])  # (B=1, N=2, D=2)
    queries = torch.tensor([[[10.0, 0.0], [0.0, 0.0]]])  # rater 0 points at z_1; rater 1 weighs both equally
    out = attend(queries, bank)
    w = 1 / (1 + math.exp(-10))
    assert torch.allclose(out, torch.tensor([[[w, 1 - w], [0.5, 0.5]]]), atol=1e-6)
    torch.manual_seed(0)
    method = DPersona(DPersona.Config(bank_train=8), SPEC)
    assert [s.modules for s in method.stages] == [("net", "prior", "posterior", "fcomb"), ("heads",)]
    loss = method.loss(tiny_batch(), ctx("personas"))["loss"]
    loss.backward()
    assert all(p.grad is None for p in method.prior.parameters())  # the bank is drawn without gradients
    assert all(p.grad is not None for p in method.heads.parameters())


# --------------------------------------------------------------------------- Pionono's per-rater latent


def test_pionono_kl_is_that_of_the_rater_gaussian_to_the_prior():
    torch.manual_seed(0)
    method = Pionono(Pionono.Config(), SPEC)
    with torch.no_grad():
        method.latent.lower.normal_(0, 0.3)  # a full covariance
    mu, tril = method.latent.mu.float(), method.latent.scale_tril()
    want = kl_divergence(MultivariateNormal(mu, scale_tril=tril), MultivariateNormal(torch.zeros(8), 4 * torch.eye(8)))
    assert torch.allclose(kl_to_isotropic(mu, tril, 2.0), want, rtol=1e-4)
    assert torch.allclose(torch.diagonal(Pionono(Pionono.Config(), SPEC).latent.scale_tril(), dim1=-2, dim2=-1), torch.full((3, 8), 2.0))


def test_pionono_draws_each_rater_from_its_own_gaussian():
    torch.manual_seed(0)
    latent = Pionono(Pionono.Config(), SPEC).latent
    with torch.no_grad():
        latent.lower.normal_(0, 0.5)
    z = latent.draw(torch.tensor([1]), 20_000, torch.Generator().manual_seed(0))[0].double()  # (n, D)
    tril = latent.scale_tril()[1].double()
    assert torch.allclose(z.mean(0), latent.mu[1].double(), atol=0.1)
    assert torch.allclose(torch.cov(z.T), tril @ tril.T, atol=0.25)


def test_pionono_loss_reaches_only_the_drawn_raters_latents_and_their_own_learning_rate():
    torch.manual_seed(0)
    method = Pionono(Pionono.Config(), SPEC)
    batch = tiny_batch(b=2)
    batch["rater_valid"][:] = torch.tensor([[False, True, False], [False, True, False]])  # only rater 1 can be drawn
    out = method.loss(batch, ctx())
    out["loss"].backward()
    grad = method.latent.mu.grad
    assert grad[1].abs().sum() > 0 and grad[0].abs().sum() == 0 and grad[2].abs().sum() == 0
    kl = kl_to_isotropic(method.latent.mu.float()[[1]], method.latent.scale_tril()[[1]], 2.0)[0]
    assert torch.allclose(out["kl"], kl) and out["kl"] > 1  # μ starts ~ N(0, 8²): far from the prior
    groups = param_groups(method)
    latent = [g for g in groups if "lr" in g]
    assert (
        len(latent) == 1 and latent[0]["lr"] == 0.02 and {id(p) for p in latent[0]["params"]} == {id(p) for p in method.latent.parameters()}
    )


def test_pionono_per_rater_outputs_use_each_raters_mean_latent():
    torch.manual_seed(0)
    method = Pionono(Pionono.Config(), SPEC).eval()
    x = tiny_batch()["images"]
    with torch.no_grad():
        per_rater = method.predict_raters(x, None)
        one = torch.softmax(method.head(method.net(x), method.latent.mu[2].expand(4, -1)), 1)
        consensus = method.predict_proba(x)
        drawn = Pionono(Pionono.Config(rater_readout="draws", readout_draws=3), SPEC)
        drawn.load_state_dict(method.state_dict())
        drawn.eval()
        ids = torch.arange(4)
        official = drawn.predict_raters(x, ids)
        eps = torch.from_numpy(np.random.default_rng(2).standard_normal((3 * 3, 8), dtype=np.float32))  # image 2's: rater-major
        z = drawn.latent.transform(torch.tensor([1, 1, 1]), eps[3:6][None])[0]  # rater 1's three draws
        want = torch.softmax(drawn.head(drawn.net(x[2:3]).expand(3, -1, -1, -1), z), 1).mean(0)
    assert per_rater.shape == (4, 3, 2, 16, 16)
    assert torch.allclose(per_rater[:, 2], one, atol=1e-5)
    assert (per_rater[:, 0] - per_rater[:, 1]).abs().max() > 1e-3  # the raters' latents give different outputs
    assert torch.allclose(consensus, per_rater.mean(1), atol=1e-6)
    # The official read-out: rater r's output is the mean softmax over draws of its latent, per image from its id.
    assert drawn.consensus_draws == 3 and official.shape == (4, 3, 2, 16, 16)
    assert torch.allclose(official[2, 1], want, atol=1e-5)


def test_the_soft_dice_loss_is_the_plain_mean_over_channels():
    probs = torch.tensor([[[[0.8, 0.2]], [[0.2, 0.8]]]])  # (1, 2, 1, 2)
    target = torch.tensor([[[[1.0, 0.0]], [[0.0, 1.0]]]])
    want = 1 - (2 * 0.8 / (1.0 + 1.0))  # both channels alike
    assert math.isclose(soft_dice_loss(probs, target).item(), want, rel_tol=1e-6)
    # A left-out image counts for nothing.
    both = soft_dice_loss(torch.cat([probs, 1 - probs]), torch.cat([target, target]), torch.tensor([1.0, 0.0]))
    assert math.isclose(both.item(), want, rel_tol=1e-6)


# --------------------------------------------------------------------------- outputs and the smoke run


@pytest.mark.parametrize("name", FIELD)
def test_each_trains_and_offers_samples(name, tiny_data):
    torch.manual_seed(0)
    spec = DataSpec(1, 2, tiny_data.n_raters)
    method = build_method(name, spec)
    schedules = harness.fixed_schedules(method, steps=2, batch_size=4)
    harness.fit(
        method,
        harness.Split(tiny_data.images, tiny_data.raters, tiny_data.rater_valid),
        schedules,
        harness.Runtime(0, torch.device("cpu")),
        out=harness.Output(progress=False),
    )
    out = inference.predict_outputs(method, tiny_data.images, n_samples=5, seed=0, device=torch.device("cpu"), precision="fp32")
    assert out["samples"].shape == (8, 5, 16, 16) and out["samples"].dtype == np.uint8
    assert ("rater_outputs" in out) == (name != "prob-unet")
    again = inference.predict_outputs(method, tiny_data.images, n_samples=5, seed=0, device=torch.device("cpu"), precision="fp32")
    assert all(np.array_equal(out[k], again[k]) for k in out)


def test_a_smoke_run_scores_the_field_and_mh_unet_over_their_samples(tmp_path):
    results = tmp_path / "r"
    proc = run_bench(
        "run",
        "--methods",
        "field,mh-unet,mv-unet",
        "--max-steps",
        "3",
        "--seeds",
        "0",
        "--train-size",
        "32",
        "--test-size",
        "12",
        "--samples",
        "6",
        "--empty-pair",
        "zero",
        "--backend",
        "sequential",
        "--no-progress",
        "--results",
        str(results),
    )
    assert proc.returncode == 0, proc.stderr
    config = json.loads(next(results.glob("runs/*/*/*/mv-unet/seed-0/config.json")).read_text())
    assert config["options"]["empty_pair"] == "zero"  # D-Persona's rule, recorded; rescore reads it back
    table = pd.read_parquet(results / "metrics.parquet")
    sets = table[table["reference"] == "raters"]
    n = sets.groupby(["method", "metric"])["n_samples"].unique().map(lambda v: list(v))
    for name in FIELD:
        assert n[(name, "ged")] == [6] and n[(name, "dice_match")] == [6] and n[(name, "dice_soft")] == [6]
    n_raters = 5  # mnist-5k's protocol raters
    assert n[("mh-unet", "ged")] == [6] and n[("mh-unet", "dice_personal")] == [n_raters]  # M draws from its heads' mixture
    assert n[("mv-unet", "ged")] == [1] and n[("pionono", "dice_personal")] == [n_raters] and n[("prob-unet", "dice_personal")] == [1]
    assert (table.loc[table["reference"] != "raters", "n_samples"] == 1).all()
    assert not sets["value"].isna().all()


# --------------------------------------------------------------------------- scoring over samples


def scored(test, probs, outputs):
    from bench.evaluate.scoring import score_predictions

    rows, _ = score_predictions(probs, test, outputs=outputs)
    return rows[rows["reference"] == "raters"].set_index(["metric", "case"])


def test_samples_are_scored_as_samples_and_an_empty_pair_counts_as_distance_zero(tiny_data):
    test = tiny_data.subset(np.arange(2))
    test.raters[:] = 0  # case-0 and case-1: every rater drew nothing
    test.raters[1, :, 4:8, 4:8] = 1  # ... except on case-1, where all three drew one square
    probs = np.zeros((2, 2, 16, 16), dtype=np.float32)
    probs[:, 0] = 1  # the consensus: empty
    samples = np.zeros((2, 4, 16, 16), dtype=np.uint8)
    samples[1, :2, 4:8, 4:8] = 1  # on case-1, two of four samples find the square
    rows = scored(test, probs, {"samples": samples})
    ged = rows.xs("ged")["value"]
    # case-0: every mask empty, every pair at distance 0 (rule "one": both empty = IoU 1) -> GED 0, not 2·1 − 1 − 1 under "zero".
    assert ged["case-0"] == 0.0
    # case-1: d(S, Y) = ½ (two samples match, two are empty: distance 1); d(S, S') = 2·(2·2)/16 = ½; d(Y, Y') = 0.
    assert math.isclose(ged["case-1"], 2 * 0.5 - 0.5 - 0.0)
    assert (rows["n_samples"].xs("ged") == 4).all()
    assert math.isclose(rows.xs("dice_max")["value"]["case-1"], 1.0)  # every rater finds a perfect sample
    assert math.isclose(rows.xs("dice_soft")["value"]["case-1"], (1 + 1 + 0 + 0 + 0) / 5)  # mean 0.5: > 0.1, 0.3 only
    # Without samples, the one (empty) prediction is the only sample: M = 1 and Dice_match is its mean per-rater Dice, 0.
    rows = scored(test, probs, {})
    assert (rows["n_samples"] == 1).all() and rows.xs("dice_match")["value"]["case-1"] == 0.0


def test_personal_dice_pairs_output_r_with_rater_r(tiny_data):
    test = tiny_data.subset(np.arange(1, 3))  # all three raters valid on both cases
    probs = np.stack([1 - test.raters[:, 0], test.raters[:, 0]], 1).astype(np.float32)  # the consensus: rater a
    per_rater = test.raters.copy()  # a perfect per-rater output
    rows = scored(test, probs, {"rater_outputs": per_rater})
    assert np.allclose(rows.xs("dice_personal")["value"], 1.0) and (rows["n_samples"] == 3).all()
    # The heads' spread of a perfect per-rater model is the raters' own; one output has no pair of heads.
    between, raters = rows.xs("dice_between")["value"], rows.xs("dice_between_raters")["value"]
    assert np.allclose(between, raters) and (raters < 1).all()
    assert scored(test, probs, {}).xs("dice_between")["value"].isna().all()
    rows = scored(test, probs, {"rater_outputs": per_rater[:, ::-1].copy()})  # outputs for the wrong raters
    assert (rows.xs("dice_personal")["value"] < 1).all()


def test_the_tables_compare_set_metrics_at_one_m_beside_the_perfect_sampler_floor(tmp_path):
    from bench.report.table_notes import samples_note
    from bench.report.tables import write_tables

    rows = [
        ("lidc", "real", "protocol", m, 0, "raters", "c0", "foreground", k, v, n)
        for m, n in (("prob-unet", 16), ("mv-unet", 1), ("cm-unet", 16), ("mh-unet", 4))
        for k, v in (("ged", 0.5), ("ged_floor", 0.04 * 16 / n), ("dice_match", 0.8))
    ]
    table = pd.DataFrame(
        rows, columns=["dataset", "raters", "noise", "method", "seed", "reference", "case", "structure", "metric", "value", "n_samples"]
    )
    line, apart = samples_note(study.default(), table)[("lidc", "real", "protocol")]
    assert apart == {"mh-unet"}  # scored at M = 4 while the others drew 16: left out, never compared
    assert "M = 16" in line and "GED 0.040" in line and "MH-UNet (M = 4)" in line
    summary = pd.DataFrame(
        [
            {
                "dataset": "lidc",
                "raters": "real",
                "noise": "protocol",
                "method": m,
                "reference": r,
                "structure": "foreground",
                "metric": k,
                "mean": 0.5,
                "std": 0.1,
            }
            for m in ("mv-unet", "cm-unet", "mh-unet")
            for r, k in (("majority", "dsc"), ("majority", "bahd"), ("raters", "ged"), ("raters", "dice_match"))
        ]
    )
    write_tables(study.default(), summary, tmp_path, samples=samples_note(study.default(), table))
    md = next(tmp_path.glob("table2_*.md")).read_text()
    mh = next(r for r in md.splitlines() if r.startswith("| MH-UNet"))
    cm = next(r for r in md.splitlines() if r.startswith("| CM-UNet"))
    assert mh.count("–") == 2 and "–" not in cm and "M = 16" in md  # MH-UNet's GED and Dice_match left out


def test_two_read_outs_with_other_draws_agree_within_half_a_point():
    """A small trained Prob. U-Net read twice with different draw seeds: fresh draws per image keep the consensus DSC
    within 0.5 points (one set of offsets shared by every image moved one mnist-5k model from 0.1 to 89.6)."""
    from labels.overlap import dice

    rng = np.random.default_rng(0)
    n = 64
    gt = np.zeros((n, 16, 16), np.uint8)
    for i, (y, x) in enumerate(rng.integers(2, 9, (n, 2))):
        gt[i, y : y + 6, x : x + 6] = 1
    grown = np.stack([np.pad(g, 1)[:-2, 1:-1] | g for g in gt])  # one rater one pixel taller, one as GT, one missing a row
    shrunk = gt.copy()
    shrunk[np.arange(n), rng.integers(2, 14, n)] = 0
    raters = np.stack([gt, grown, shrunk], 1).astype(np.uint8)
    images = (gt[:, None] + rng.normal(0, 0.3, (n, 1, 16, 16))).astype(np.float32)
    torch.manual_seed(0)
    method = build_method("prob-unet", SPEC)
    harness.fit(
        method,
        harness.Split(images, raters, np.ones((n, 3), bool)),
        harness.fixed_schedules(method, steps=30, batch_size=16),
        harness.Runtime(0, torch.device("cpu")),
        out=harness.Output(progress=False),
    )
    read = [inference.predict_proba(method, images, device=torch.device("cpu"), precision="fp32", draw_seed=k) for k in (0, 1, 0)]
    dsc = [float(dice(p.argmax(1) > 0, gt > 0).mean()) * 100 for p in read]
    assert np.array_equal(read[0], read[2])  # the same draw seed, the same read-out
    assert not np.array_equal(read[0], read[1])  # other draws ...
    assert abs(dsc[0] - dsc[1]) < 0.5 and dsc[0] > 50  # ... the same DSC, of a model that learned something


def test_rqmc_offsets_are_per_image_normal_draws_with_a_smaller_error_than_independent_ones():
    """`rqmc` consensus offsets: reproducible per image id, different between ids, each coordinate standard normal; the
    mean of a smooth function of a 6-dimensional latent over 64 of them errs far less than over 64 independent draws;
    a count that is not a power of 2, or an unknown estimator, is refused when the method is built."""
    from methods.latent import consensus_normal

    ids = torch.arange(200, dtype=torch.int64) + 2**40
    z = {e: consensus_normal(ids, 64, 6, torch.device("cpu"), e) for e in ("mc", "rqmc")}
    assert torch.equal(z["rqmc"][:3], consensus_normal(ids[:3], 64, 6, torch.device("cpu"), "rqmc"))  # batch-independent
    assert not torch.equal(z["rqmc"][0], z["rqmc"][1])
    flat = z["rqmc"].reshape(-1, 6)
    assert flat.mean(0).abs().max() < 0.02 and (flat.std(0) - 1).abs().max() < 0.02
    w = torch.tensor([0.9, -0.5, 0.3, 0.7, -0.2, 0.4])
    exact = 0.5  # E sigmoid(w·z) for symmetric z
    err = {e: ((torch.sigmoid(v @ w).mean(1) - exact) ** 2).mean().sqrt().item() for e, v in z.items()}
    assert err["rqmc"] < err["mc"] / 4, err
    with pytest.raises(ValueError, match="power of 2, not 100"):
        build_method("prob-unet", SPEC, {"consensus_estimator": "rqmc", "consensus_draws": 100})
    with pytest.raises(ValueError, match="consensus_estimator must be one of"):
        build_method("d-persona", SPEC, {"consensus_estimator": "sobol"})
