"""Dataset adapters: each turns files a user already has into `RaterData` splits (DESIGN §3).

Adding a dataset is one module plus one entry in `DATASETS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from datasets import mnist
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


DATASETS: dict[str, DatasetSpec] = {
    "mnist-5k": DatasetSpec(mnist.CARD_5K, mnist.load_mnist_5k, 128, 32, 1200),
    "mnist": DatasetSpec(mnist.CARD_MNIST, mnist.load_mnist, 128, 32, 1200),
}


def get_dataset(name: str) -> DatasetSpec:
    if name not in DATASETS:
        raise DataError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    return DATASETS[name]


__all__ = ["DATASETS", "DataError", "DatasetCard", "DatasetSpec", "RaterData", "Splits", "get_dataset", "oracle_view"]
