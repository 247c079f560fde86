"""Dataset adapters: each turns files a user already has into `RaterData` splits (DESIGN §3).

Adding a dataset is one module plus one entry in `DATASETS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from datasets import choledoch, cm_folder, lidc, mnist, ms_lesion, riga
from datasets.contract import DataError, DatasetCard, RaterData, Splits, oracle_view


@dataclass(frozen=True)
class DatasetSpec:
    """A registered dataset: its card, loader and the batch sizes of the two budgets."""

    card: DatasetCard
    load: Callable[[Path, float], Splits]  # (data_root, rater noise level) -> Splits
    paper_batch_size: int  # the paper: 128 on MNIST, 2 elsewhere
    quick_batch_size: int
    quick_train_size: int | None  # training images used by the quick budget (None: all)
    reference: str = "gt"  # evaluation reference: "gt" where the dataset has ground truth, else "majority"
    soft_metrics: bool = False  # also score soft DSC / IoU against the rater mean (the paper's RIGA protocol)
    # Paper settings that differ by dataset: base method -> {config field: value}; they apply to
    # every registered name built on that method's class (its variants and the oracle too).
    method_overrides: dict = field(default_factory=dict)


# LF-Net paper, Implementation Details: λ = 0.01 and "training epoch for RCN is 15" on MNIST.
MNIST_OVERRIDES = {"lf-net": {"lam": 0.01, "seg_epochs": 15}}


DATASETS: dict[str, DatasetSpec] = {
    "mnist-5k": DatasetSpec(mnist.CARD_5K, mnist.load_mnist_5k, 128, 32, 600, method_overrides=MNIST_OVERRIDES),
    "mnist": DatasetSpec(mnist.CARD_MNIST, mnist.load_mnist, 128, 32, 600, method_overrides=MNIST_OVERRIDES),
    "ms-lesion": DatasetSpec(ms_lesion.CARD, ms_lesion.load_ms_lesion, 2, 8, 128),
    "ms-lesion-real": DatasetSpec(ms_lesion.CARD_REAL, ms_lesion.load_ms_lesion_real, 2, 8, 128, reference="majority"),
    "choledoch": DatasetSpec(choledoch.CARD, choledoch.load_choledoch, 2, 4, 48),
    "lidc": DatasetSpec(lidc.CARD, lidc.load_lidc, 2, 8, 160, reference="majority"),
    "riga": DatasetSpec(riga.CARD, riga.load_riga, 2, 4, 80, reference="majority", soft_metrics=True),
    "cm-folder": DatasetSpec(cm_folder.CARD, cm_folder.load_cm_folder, 128, 32, 600, method_overrides=MNIST_OVERRIDES),
}


def get_dataset(name: str) -> DatasetSpec:
    if name not in DATASETS:
        raise DataError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    return DATASETS[name]


__all__ = ["DATASETS", "DataError", "DatasetCard", "DatasetSpec", "RaterData", "Splits", "get_dataset", "oracle_view"]
