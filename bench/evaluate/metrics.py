"""The metrics, one descriptor each: what a metric is scored against, how, which way is better and how it is shown.

Scoring (bench/evaluate/scoring.py), the report's tables and paired tests (bench/report/render.py), the
printed table (bench/cli/run.py), the reproduction report and the README's metric table all read
`METRICS`; adding a metric is one function (in bench/evaluate/pixel.py, boundary.py or multirater.py) and one
`register(Metric(...))` line (docs/architecture.md#a-metric shows a worked example).

Each metric has a `kind`, which says what its function receives and which references it is
scored against:

* ``hard``: a `HardPair` (the argmax prediction and one hard reference, both (N, H, W) bool, and
  the pixel spacing), against every hard reference (gt, majority, staple, each rater); its rows
  carry the pair's counts (tp, fp, fn, |gt|, |pred|) and bAHD's directed sums;
* ``soft``: a `SoftPair` (the foreground probability and the raters' mean mask, (N, H, W)),
  against ``rater-mean``;
* ``set``: a `RaterSet` (the method's samples (N, M, H, W), its output for each rater slot, the raters'
  masks (N, R, H, W), which are valid (N, R), the empty-pair rule), against ``raters``; a metric's
  `outputs` names the stack it scores, whose size is the row's `n_samples`;
* ``calibration``: a `Calibrated` pair (the foreground probability and a target mask, hard or soft),
  against ``gt`` (where it exists) and ``rater-mean``.

A function returns one value per case, (N,).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from bench.evaluate import boundary, calibration, multirater
from bench.evaluate.pixel import score
from labels.overlap import soft_dice_iou

KINDS = ("hard", "soft", "set", "calibration")
N_BINS = 15  # reliability bins (ECE)


@dataclass
class HardPair:
    mask: np.ndarray  # (N, H, W) bool, the prediction
    ref: np.ndarray  # (N, H, W) bool, the reference
    spacing: tuple[float, float]

    @cached_property
    def counts(self) -> dict[str, np.ndarray]:
        """`pixel.score` once per pair: dice, bahd, the counts and the directed sums."""
        return score(self.mask, self.ref, self.spacing)

    @cached_property
    def surface(self) -> dict[str, np.ndarray]:
        """`boundary.surface_scores` once per pair: hd95, assd and nsd (at `boundary.NSD_TOLERANCE`)."""
        return boundary.surface_scores(self.mask, self.ref, self.spacing)


@dataclass
class SoftPair:
    prob: np.ndarray  # (N, H, W) foreground probability
    target: np.ndarray  # (N, H, W) the raters' mean mask in [0, 1]

    @cached_property
    def soft(self) -> tuple[np.ndarray, np.ndarray]:
        return soft_dice_iou(self.prob, self.target)


@dataclass
class RaterSet:
    samples: np.ndarray  # (N, M, H, W) bool: the method's samples, else its per-rater outputs, else its one prediction (M = 1)
    own: np.ndarray  # (N, R, H, W) or (N, 1, H, W) bool: the output for each rater slot, else the one prediction offered to all
    votes: np.ndarray  # (N, R, H, W) bool, each rater's mask
    valid: np.ndarray  # (N, R) bool
    empty: str  # the empty-pair rule (multirater.EMPTY_RULES)

    @property
    def offered(self) -> np.ndarray:
        """The samples as Dice_match pairs them: one prediction (M = 1) is offered to every rater, (N, R, H, W)."""
        return np.broadcast_to(self.samples, self.votes.shape) if self.samples.shape[1] == 1 else self.samples

    @property
    def own_offered(self) -> np.ndarray:
        """The per-rater outputs as a Hungarian match pairs them: one prediction is offered to every rater, (N, R, H, W)."""
        return np.broadcast_to(self.own, self.votes.shape) if self.own.shape[1] == 1 else self.own

    @cached_property
    def sample_mean(self) -> np.ndarray:
        """(N, H, W) the share of samples marking each pixel."""
        return self.samples.mean(1)

    @cached_property
    def rater_mean(self) -> np.ndarray:
        """(N, H, W) the share of valid raters marking each pixel."""
        votes = self.votes & self.valid[:, :, None, None]
        return votes.sum(1) / np.maximum(self.valid.sum(1), 1)[:, None, None]


@dataclass
class Calibrated:
    prob: np.ndarray  # (N, H, W) foreground probability
    target: np.ndarray  # (N, H, W) the target, bool or in [0, 1]


@dataclass(frozen=True)
class Metric:
    """One metric: `fn(inputs of its kind) -> (N,)` and how tables show it.

    name: the long table's `metric`; scale: 100 for a fraction shown in %; digits: decimals shown;
    short / latex: its name in Markdown and LaTeX headers (a structure is added as a subscript where
    a table has several); tables: the rendered tables that show it as a column ("table1": DSC/bAHD
    against the headline reference; "table2": datasets without GT; "table3": soft metrics; "ablation").
    """

    name: str
    kind: str
    fn: Callable[..., np.ndarray]
    higher_is_better: bool
    scale: float = 1.0
    digits: int = 3
    short: str = ""
    latex: str = ""
    tables: tuple[str, ...] = ()
    description: str = ""
    references: tuple[str, ...] = field(default=())
    outputs: str = ""  # a set metric: the RaterSet stack it scores ("samples" or "own"), whose size is the row's n_samples

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"metric {self.name!r}: kind must be one of {KINDS}, not {self.kind!r}")

    def header(self, structure: str | None = None, latex: bool = False) -> str:
        """The column header, e.g. "DSC (%) ↑", "soft DSC disc (%) ↑", r"DSC$_\\mathrm{disc}^\\mathrm{soft}$ (\\%)~$\\uparrow$"."""
        percent = self.scale == 100
        if latex:
            sub = rf"_\mathrm{{{structure}}}" if structure else ""
            base, _, sup = self.latex.partition("^")
            name = f"{base}${sub}^{sup}$" if sup else (f"{base}${sub}$" if sub else base)
            return name + (r" (\%)" if percent else "") + ("~$\\uparrow$" if self.higher_is_better else "~$\\downarrow$")
        name = f"{self.short} {structure}" if structure else self.short
        return name + (" (%)" if percent else "") + (" ↑" if self.higher_is_better else " ↓")


METRICS: dict[str, Metric] = {}


def register(metric: Metric) -> Metric:
    if metric.name in METRICS:
        raise ValueError(f"metric {metric.name!r} is registered twice")
    METRICS[metric.name] = metric
    return metric


def get(name: str) -> Metric:
    if name not in METRICS:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(METRICS)}")
    return METRICS[name]


def of_kind(kind: str) -> list[Metric]:
    return [m for m in METRICS.values() if m.kind == kind]


def in_table(table: str) -> list[Metric]:
    return [m for m in METRICS.values() if table in m.tables]


def higher_is_better(name: str) -> bool:
    """The direction of a metric; unknown names (a column of an older results folder) count as higher-is-better."""
    return METRICS[name].higher_is_better if name in METRICS else True


register(
    Metric(
        "dsc",
        "hard",
        lambda p: p.counts["dice"],
        True,
        100,
        2,
        "DSC",
        "DSC",
        ("table1", "table2", "ablation"),
        "Dice of the argmax prediction; both empty = 1, one empty = 0",
        ("gt", "majority", "staple", "rater:*"),
    )
)
register(
    Metric(
        "bahd",
        "hard",
        lambda p: p.counts["bahd"],
        False,
        1,
        3,
        "bAHD",
        "bAHD",
        ("table1", "table2"),
        "balanced average Hausdorff distance in spacing units; both empty = 0; empty prediction = half the diagonal; empty reference = NaN",
        ("gt", "majority", "staple", "rater:*"),
    )
)
register(
    Metric(
        "hd95",
        "hard",
        lambda p: p.surface["hd95"],
        False,
        1,
        3,
        "HD95",
        "HD95",
        (),
        "95th percentile of both directed surface-distance sets pooled (4-neighbour surfaces, as medpy's hd95), spacing units; "
        "both empty = 0; empty prediction = the image diagonal; empty reference = NaN",
        ("gt", "majority", "staple", "rater:*"),
    )
)
register(
    Metric(
        "assd",
        "hard",
        lambda p: p.surface["assd"],
        False,
        1,
        3,
        "ASSD",
        "ASSD",
        (),
        "average symmetric surface distance: mean of both directed surface-distance sets pooled (as medpy 0.5's assd), "
        "spacing units; both empty = 0; empty prediction = the image diagonal; empty reference = NaN",
        ("gt", "majority", "staple", "rater:*"),
    )
)
register(
    Metric(
        "nsd",
        "hard",
        lambda p: p.surface["nsd"],
        True,
        100,
        2,
        "NSD",
        "NSD",
        (),
        f"normalised surface Dice (Nikolov et al.) at tolerance {boundary.NSD_TOLERANCE:g} spacing unit, over surface pixels "
        "(not surfel areas); both empty = 1; one empty = 0",
        ("gt", "majority", "staple", "rater:*"),
    )
)
register(
    Metric(
        "soft_dice",
        "soft",
        lambda p: p.soft[0],
        True,
        100,
        2,
        "soft DSC",
        "DSC^\\mathrm{soft}",
        ("table3", "ablation"),
        "MR-Net's protocol: prediction and rater mean binarised at 0.1/0.3/0.5/0.7/0.9, Dice averaged; both empty = 1",
        ("rater-mean",),
    )
)
register(
    Metric(
        "soft_iou",
        "soft",
        lambda p: p.soft[1],
        True,
        100,
        2,
        "soft IoU",
        "IoU^\\mathrm{soft}",
        ("table3",),
        "as soft_dice with IoU",
        ("rater-mean",),
    )
)
register(
    Metric(
        "ged",
        "set",
        lambda s: multirater.ged(s.samples, s.votes, s.valid, s.empty),
        False,
        1,
        3,
        "GED",
        "GED",
        ("table2",),
        "squared generalised energy distance over the M samples, d = 1 − IoU, all ordered pairs; both empty: d = 0",
        ("raters",),
        "samples",
    )
)
register(
    Metric(
        "ged_unbiased",
        "set",
        lambda s: multirater.ged(s.samples, s.votes, s.valid, s.empty, unbiased=True),
        False,
        1,
        3,
        "GED_u",
        "GED$_\\mathrm{u}$",
        (),
        "GED with the sample term over distinct pairs only: 0 in expectation for a perfect sampler at any M (M = 1: equal to GED)",
        ("raters",),
        "samples",
    )
)
register(
    Metric(
        "ged_floor",
        "set",
        lambda s: multirater.ged_floor(s.votes, s.valid, s.samples.shape[1], s.empty),
        False,
        1,
        3,
        "GED floor",
        "GED$_\\mathrm{floor}$",
        (),
        "not a score of the method: the expected GED of a perfect sampler of the raters at this row's M, (D − s)/M (multirater.ged_floor)",
        ("raters",),
        "samples",
    )
)
register(
    Metric(
        "dice_match",
        "set",
        lambda s: multirater.dice_match(s.offered, s.votes, s.valid, s.empty),
        True,
        100,
        2,
        "Dice_match",
        "Dice$_\\mathrm{match}$",
        ("table2",),
        "Hungarian-matched Dice of raters and samples, mean over valid raters (one output is offered to every rater)",
        ("raters",),
        "samples",
    )
)
register(
    Metric(
        "dice_max",
        "set",
        lambda s: multirater.dice_max(s.samples, s.votes, s.valid, s.empty),
        True,
        100,
        2,
        "Dice_max",
        "Dice$_\\mathrm{max}$",
        (),
        "each rater's best Dice over the samples, mean over raters",
        ("raters",),
        "samples",
    )
)
register(
    Metric(
        "dice_soft",
        "set",
        lambda s: soft_dice_iou(s.sample_mean, s.rater_mean, smooth=False, strict=True, empty=s.empty)[0],
        True,
        100,
        2,
        "Dice_soft",
        "Dice$_\\mathrm{soft}$",
        (),
        "the samples' mean mask against the raters' mean, both "
        "binarised at 0.1/0.3/0.5/0.7/0.9 (>, as D-Persona), Dice averaged; both empty = 1",
        ("raters",),
        "samples",
    )
)
register(
    Metric(
        "dice_personal",
        "set",
        lambda s: multirater.nanmean(multirater.paired_dice(s.own, s.votes, s.valid, s.empty), 1),
        True,
        100,
        2,
        "Dice_personal",
        "Dice$_\\mathrm{pers}$",
        (),
        "Dice of the output for rater r against rater r, mean over valid "
        "raters (a method without per-rater outputs offers its one prediction)",
        ("raters",),
        "own",
    )
)
register(
    Metric(
        "dice_personal_match",
        "set",
        lambda s: multirater.dice_match(s.own_offered, s.votes, s.valid, s.empty),
        True,
        100,
        2,
        "Dice_pers,match",
        "Dice$_\\mathrm{pers}^\\mathrm{match}$",
        (),
        "the per-rater outputs matched to the raters by the Hungarian method (Dice_personal is the diagonal), mean over valid raters",
        ("raters",),
        "own",
    )
)
register(
    Metric(
        "dice_between",
        "set",
        lambda s: multirater.between_dice(s.own, s.valid if s.own.shape[1] > 1 else None, s.empty),
        True,
        100,
        2,
        "Dice_between",
        "Dice$_\\mathrm{between}$",
        (),
        "how alike the per-rater outputs are: Dice over "
        "distinct pairs of valid rater slots, mean (100 when every head says the same; NaN for one output); compare "
        "with dice_between_raters, not across methods",
        ("raters",),
        "own",
    )
)
register(
    Metric(
        "dice_between_raters",
        "set",
        lambda s: multirater.between_dice(s.votes, s.valid, s.empty),
        True,
        100,
        2,
        "Dice_between raters",
        "Dice$_\\mathrm{between}^\\mathrm{raters}$",
        (),
        "not a score of the method: the raters' own Dice_between, which a perfect per-rater model's outputs reproduce",
        ("raters",),
        "own",
    )
)
register(
    Metric(
        "ece",
        "calibration",
        lambda c: calibration.ece(c.prob, c.target, N_BINS),
        False,
        1,
        3,
        "ECE",
        "ECE",
        (),
        f"expected calibration error of the foreground probability, {N_BINS} equal-width bins, per case",
        ("gt", "rater-mean"),
    )
)
