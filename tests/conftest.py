import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from datasets.contract import RaterData

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session", autouse=True)
def shared_cache(tmp_path_factory):
    """One decoded-dataset cache for the whole session, so CLI tests decode mnist-5k once."""
    os.environ["BENCH_CACHE"] = str(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="session", autouse=True)
def one_thread():
    """In-process tests train on tiny tensors, where a second intra-op thread only adds overhead
    (and oversubscribes a busy machine); CLI subprocesses keep the default."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def blobs(n: int, size: int = 16, seed: int = 0) -> np.ndarray:
    """n binary masks (n, size, size) with one random rectangle each."""
    rng = np.random.default_rng(seed)
    out = np.zeros((n, size, size), dtype=np.uint8)
    for m in out:
        y, x = rng.integers(1, size // 2, 2)
        h, w = rng.integers(3, size // 2, 2)
        m[y : y + h, x : x + w] = 1
    return out


@pytest.fixture
def tiny_data() -> RaterData:
    """8 noisy 16×16 images with 3 raters (gt, gt shifted, gt with a hole) and one missing rater slot."""
    gt = blobs(8)
    rng = np.random.default_rng(1)
    raters = np.stack([gt, np.roll(gt, 1, axis=2), gt * (rng.random(gt.shape) > 0.2)], axis=1).astype(np.uint8)
    valid = np.ones((8, 3), dtype=bool)
    valid[0, 2] = False
    images = (gt[:, None] + rng.normal(0, 0.3, (8, 1, 16, 16))).astype(np.float32)
    ids = np.array([f"case-{i}" for i in range(8)])
    return RaterData(images, raters, valid, gt, ids, ids, rater_names=("a", "b", "c"))


def run_cli(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """`python -m bench ARGS` in a subprocess from the repo root."""
    return subprocess.run(
        [sys.executable, "-m", "bench", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
