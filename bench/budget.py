"""Training budgets: `paper` (the paper's schedule) and `quick` (the embedded default on a laptop CPU).

paper: Adam, lr 1e-4, the paper's batch size (128 on MNIST, 2 elsewhere), each stage's paper
epochs (150 for the fusion baselines; LF-Net 10 + 70), the whole training split.

quick: sized so `python -m bench run` (every method plus the oracle, 3 seeds, mnist-5k: 30 cells)
takes about 10 minutes on 2 CPU cores: Adam at lr 1e-3 (ten times the paper's), the dataset's
quick batch size (32 on MNIST), a capped training set (600 of 3,200 mnist-5k images; MV-UNet
scored 94.85 with 700 and 94.89 with 1,200 images, seed 0) and each stage's `quick_epochs`. The
fusion baselines come close to their plateau; LF-Net, CM-UNet and MR-Net do not (see the README).
The test set is never reduced.
"""

from __future__ import annotations

from dataclasses import dataclass

from datasets import DatasetSpec
from methods.base import Stage


@dataclass(frozen=True)
class Budget:
    name: str
    lr: float
    paper_schedule: bool

    def epochs(self, stage: Stage) -> int:
        return stage.epochs if self.paper_schedule else stage.quick_epochs

    def batch_size(self, dataset: DatasetSpec) -> int:
        return dataset.paper_batch_size if self.paper_schedule else dataset.quick_batch_size

    def train_size(self, dataset: DatasetSpec) -> int | None:
        return None if self.paper_schedule else dataset.quick_train_size


BUDGETS = {"quick": Budget("quick", lr=1e-3, paper_schedule=False), "paper": Budget("paper", lr=1e-4, paper_schedule=True)}
