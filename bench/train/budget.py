"""Training budgets, in one place (docs/methods.md#training-budgets): how long, with what optimiser, each stage of each method trains.

A method's `Stage` says *what* it trains; a budget says *how*: a `Schedule` per stage.

- ``quick``: the embedded default on a laptop CPU: the stopping rule below with a cap of 80 steps
  per stage, Adam at lr 1e-3, the dataset's quick batch size (32 on MNIST), the dataset's quick
  training-set cap (none on mnist-5k: a step costs the same whatever the split's size, and more
  images mean less overfitting; the large-image datasets keep theirs) and validation subset (128
  images), so that `python -m bench run` (all methods, oracle, 3 seeds) fits in 12 minutes on 2
  CPU cores. The large-image datasets train at the paper's batch of 2 and validate on 32 images,
  so that one seed of every method on LIDC fits in 15 minutes on 2 cores with native bf16. At
  this cap most stages stop at the cap, not on a plateau: the printed table says so.
- ``plateau``: the same rule, optimiser, learning rate and batch size as ``quick`` on the whole
  training and validation splits, with a cap of 5,000 steps per stage: the recommended comparison.
  A stage that reaches the cap is named `cap` in every table (a loss that keeps falling by a constant
  factor, LF-Net's soft-label cross-entropy, never plateaus).
- ``long``: the stop audit (`bench audit-stops`): every stage a fixed 4,000 steps with the same optimiser,
  learning rate, batch size and data as ``plateau``, ending on its lowest validation loss as the rule does.
- ``trajectory``: one trajectory per cell, read many ways (docs/decisions.md, "Readings along one trajectory"): every
  stage a fixed horizon (8,000 steps, or ``--max-steps``) with the same optimiser, learning rate, batch size and data as
  ``plateau``; the rule is replayed on the way (its stop is the ``rule`` reading) and the cell's result is its primary
  reading, the GT-free ``selection``; earlier stages end on their lowest validation loss.
- ``paper``: the paper's fixed epochs and the last weights (the paper states no model selection).
  LF-Net: Adam lr 1e-4, 10 + 70 epochs (MNIST: 10 + 15, "RCN epoch 15" read as the length of stage
  2), the paper's batch size. Competitors: "we apply the default training strategies for other
  competitors", so each one's optimiser, learning rate, batch size, epochs and augmentation come
  from its official code where one exists (the study file's `[[budget.stage]]` lines, each with its source).
- ``paper-rcl15``: ``paper`` with the other reading of "RCN epoch 15" on MNIST: stage 2 keeps its
  70 epochs and L_rcl is active in its first 15 (LF-Net's ``rcl_epochs=15``).

The stopping rule (quick, plateau), the same for every stage of every method (docs/decisions.md, "The stopping rule
revised after its audit"): every `eval_every` (20) steps the method's own loss is evaluated on the validation split
(raters only, eval mode, one fixed generator, so two evaluations differ only by the weights); the decision reads the mean
of the last `smooth` (3) evaluations, and an evaluation improves when that mean is a new low of the stage (`min_delta`
0: no margin, so no unit and no level); a stage stops once the evaluations since the last improvement reach
`patience_ratio` (½) × the evaluations up to it and at least `patience` (5), never before `min_evals` (10), or at
`max_steps`; the weights with the lowest validation loss are restored. Ground truth never enters. `plateau-1127` keeps
the rule it replaced (a 1 % fall of the smoothed level within 5 evaluations) for the folders of that rule's audit. A
rule is judged by what it costs each method: `bench audit-stops` puts it beside the ``long`` budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

import methods
from bench.study import PaperStage, Study
from datasets import DatasetSpec

OPTIMISERS = ("adam", "adamw")
AUGMENTATIONS = ("none", "flip")


@dataclass(frozen=True)
class Schedule:
    """How one stage trains. `max_steps` is the cap (early stopping) or the fixed length (paper)."""

    optimiser: str
    lr: float
    batch_size: int
    max_steps: int
    early_stopping: bool
    eval_every: int  # K: steps between validation evaluations
    patience: int = 0  # P: evaluations without an improvement (a smoothed fall > min_delta × the level) before stopping
    min_delta: float = 0.0
    patience_ratio: float = 0.0  # and at least this share of the evaluations up to the last improvement
    smooth: int = 1  # evaluations averaged for the stopping decision
    min_evals: int = 0  # evaluations before the rule may stop a stage
    restore: bool = False  # a fixed-length stage that still restores its lowest validation loss (budget `long`)
    rule_cap: int = 0  # a fixed-length stage replays the stopping rule with this cap (its `rule` reading); 0: none
    weight_decay: float = 0.0
    augment: str = "none"  # "flip": random horizontal and vertical flips of image and raters together, p = 0.5 each
    source: str = ""  # where these settings come from

    def __post_init__(self) -> None:
        if self.optimiser not in OPTIMISERS or self.augment not in AUGMENTATIONS:
            raise ValueError(f"schedule: optimiser must be one of {OPTIMISERS} and augment one of {AUGMENTATIONS}")
        if self.max_steps < 1 or self.eval_every < 1:
            raise ValueError(f"schedule: max_steps and eval_every must be >= 1, got {self.max_steps} and {self.eval_every}")

    @property
    def restore_best(self) -> bool:
        """Whether the stage ends on its weights with the lowest validation loss (every budget but the paper's)."""
        return self.early_stopping or self.restore


@dataclass(frozen=True)
class Budget:
    name: str
    early_stopping: bool
    lr: float = 1e-3
    eval_every: int = 20
    patience: int = 5
    min_delta: float = 0.0
    patience_ratio: float = 0.5
    smooth: int = 3
    min_evals: int = 10
    max_steps: int = 0  # cap per stage (early stopping), or every stage's fixed length (`long`)
    fixed_length: bool = False  # `long`: every stage max_steps exactly, restored by the rule's criterion
    capped_data: bool = False  # the dataset's quick training-set and validation caps
    # The study's stage reading (`stage_reading`) as a method config field over the stage's full epochs, instead of as the
    # stage's length (paper-rcl15: MNIST stage 2 keeps its 70 epochs, L_rcl active only in the first 15).
    reading_as_config: bool = False
    primary: str = "rule"  # the reading that is a cell's result (bench/train/readings.py); the others are scored beside it
    rule_cap: int = 0  # fixed-length stages replay the stopping rule up to this cap (`Schedule.rule_cap`)
    readings: bool = True  # score the held readings and the fixed steps on the test split beside the result
    description: str = ""

    def train_size(self, dataset: DatasetSpec) -> int | None:
        return dataset.quick_train_size if self.capped_data else None

    def val_size(self, dataset: DatasetSpec) -> int | None:
        return dataset.quick_val_size if self.capped_data else None

    @property
    def paper_lines(self) -> bool:
        """Whether stages follow the study's paper lines (fixed epochs, each method's own optimiser)."""
        return not (self.early_stopping or self.fixed_length)

    def batch_size(self, dataset: DatasetSpec) -> int:
        return dataset.paper_batch_size if self.paper_lines else dataset.quick_batch_size

    def schedule(self, method: str, stage: str, dataset: DatasetSpec, n_train: int, paper: Study) -> Schedule:
        """The Schedule of `stage` of the registered method `method` (a variant uses its base's line) on `dataset`; a
        budget with paper lines reads them from the study `paper`."""
        if not self.paper_lines:
            return Schedule(
                "adam",
                self.lr,
                self.batch_size(dataset),
                self.max_steps,
                self.early_stopping,
                self.eval_every,
                self.patience,
                self.min_delta,
                self.patience_ratio,
                self.smooth,
                self.min_evals,
                restore=self.fixed_length,
                rule_cap=self.rule_cap,
                source=f"{self.name} budget: Adam lr {self.lr:g}, batch {self.batch_size(dataset)}",
            )
        line = paper_stage(method, stage, paper)
        epochs = line.epochs
        reading = stage_reading(method, dataset, paper)
        if reading and stage == reading["stage"] and not self.reading_as_config:
            epochs = reading["epochs"]
        batch = line.batch_size or dataset.paper_batch_size
        steps_per_epoch = math.ceil(n_train / batch)
        length = f"{line.steps} steps" if line.steps else f"{epochs} epochs"
        return Schedule(
            line.optimiser,
            line.lr,
            batch,
            line.steps or epochs * steps_per_epoch,
            False,
            min(steps_per_epoch, line.steps or steps_per_epoch),
            weight_decay=line.weight_decay,
            augment=line.augment,
            source=f"{length}; {line.source}",
        )

    def config_overrides(self, method: str, dataset: DatasetSpec, paper: Study) -> dict:
        """Method config fields a budget sets: the study's stage reading where the budget reads it as a config field."""
        reading = stage_reading(method, dataset, paper)
        if self.reading_as_config and reading:
            return {reading["config"]: reading["epochs"]}
        return {}

    def record(self) -> dict:
        """What config.json records of the budget."""
        keys = (
            "name",
            "early_stopping",
            "eval_every",
            "patience",
            "min_delta",
            "patience_ratio",
            "smooth",
            "min_evals",
            "max_steps",
            "fixed_length",
            "capped_data",
            "reading_as_config",
            "primary",
            "rule_cap",
        )
        return {k: getattr(self, k) for k in keys}


def paper_base(method: str) -> str:
    """The registered name whose PAPER lines `method` uses: the first registered name of its class."""
    cls = methods.get_entry(method).cls
    return next(name for name in methods.method_names() if methods.get_entry(name).cls is cls)


def paper_stage(method: str, stage: str, paper: Study) -> PaperStage:
    """The study's paper-budget line for a stage of the registered method `method` (or of the method it shares lines with)."""
    base = paper_base(method)
    base = paper.same_as.get(base, base)
    if (base, stage) not in paper.stages:
        raise KeyError(f"the paper budget has no schedule for {method} stage {stage!r}; add a [[budget.stage]] line to {paper.file}")
    return paper.stages[(base, stage)]


def stage_reading(method: str, dataset: DatasetSpec, paper: Study) -> dict:
    """The study's reading of a stage length it states apart from its schedule (the LF-Net paper's MNIST "RCN epoch 15"),
    for this method and dataset: {datasets, method, stage, epochs, config}, or {} where it does not apply."""
    reading = paper.stage_reading
    applies = reading and dataset.card.name in reading["datasets"] and paper_base(method) == reading["method"]
    return reading if applies else {}


QUICK = Budget(
    "quick",
    early_stopping=True,
    max_steps=80,
    capped_data=True,
    readings=False,
    description="laptop CPU default: the stopping rule on a validation subset (128 images; 32 on large images), cap 80 steps per stage",
)
PLATEAU = Budget(
    "plateau",
    early_stopping=True,
    max_steps=5_000,
    description="the recommended comparison: the same rule on all training and validation images, cap 5,000 steps per stage",
)
PLATEAU_1127 = Budget(
    "plateau-1127",
    early_stopping=True,
    max_steps=5_000,
    min_delta=0.01,
    patience_ratio=0.0,
    description="the rule of 2026-11-27 (a 1 % fall of the smoothed level within 5 evaluations), kept for its audit's folders",
)
LONG = Budget(
    "long",
    early_stopping=False,
    fixed_length=True,
    max_steps=4_000,
    primary="min-val-loss",
    rule_cap=5_000,
    description="the stop audit: every stage 4,000 steps on all images, the lowest validation loss restored (bench audit-stops)",
)
TRAJECTORY = Budget(
    "trajectory",
    early_stopping=False,
    fixed_length=True,
    max_steps=8_000,
    primary="selection",
    rule_cap=5_000,
    description="one trajectory read many ways: every stage 8,000 steps on all images, the rule replayed, the GT-free selection kept",
)
PAPER_BUDGET = Budget(
    "paper", early_stopping=False, primary="last", description="the paper's fixed epochs; competitors as their official code"
)
BUDGETS = {
    b.name: b
    for b in (
        QUICK,
        PLATEAU,
        PLATEAU_1127,
        LONG,
        TRAJECTORY,
        PAPER_BUDGET,
        Budget(
            "paper-rcl15",
            early_stopping=False,
            reading_as_config=True,
            primary="last",
            description="paper, MNIST RCN: L_rcl in the first 15 of 70 epochs",
        ),
    )
}


CURVE_POINTS = 30  # at most this many points on a paper stage's test curve
CURVE_EVERY = 250  # a stage of any other budget scores its test curve every this many steps
FIRST_READING = 250  # the fixed-step readings: FIRST_READING × 2^k


def curve_steps(schedule: Schedule, n_train: int, paper: bool) -> frozenset[int]:
    """The steps at which a stage scores the test split's counts (its test curve, a diagnostic that never selects). A
    paper stage (`paper`): the end of every epoch, of every ⌈E / CURVE_POINTS⌉-th where it has E > CURVE_POINTS epochs,
    and its last step. Any other: every CURVE_EVERY steps up to its cap, and the last step of a fixed length."""
    if paper:
        per_epoch = math.ceil(n_train / schedule.batch_size)
        epochs = math.ceil(schedule.max_steps / per_epoch)
        every = math.ceil(epochs / CURVE_POINTS)
        ends = {e * per_epoch for e in range(every, epochs + 1, every) if e * per_epoch < schedule.max_steps}
        return frozenset(ends | {schedule.max_steps})
    last = set() if schedule.early_stopping else {schedule.max_steps}
    return frozenset(set(range(CURVE_EVERY, schedule.max_steps + 1, CURVE_EVERY)) | last)


def reading_steps(schedule: Schedule) -> frozenset[int]:
    """The fixed-step readings of a stage (`step-N`, scored in full): FIRST_READING × 2^k up to its cap or length."""
    return frozenset(FIRST_READING * 2**k for k in range(32) if FIRST_READING * 2**k <= schedule.max_steps)


def make_optimiser(schedule: Schedule, params: list, capturable: bool = False) -> torch.optim.Optimizer:
    """The optimiser `schedule` names, over `params` (parameters, or groups of them; `capturable`: its step counts and bias
    corrections on the device, for CUDA graphs)."""
    kind = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[schedule.optimiser]  # Schedule checked the name
    return kind(params, lr=schedule.lr, weight_decay=schedule.weight_decay, capturable=capturable)
