"""A diagnostic of a method's learned fused label after training (`teacher_diagnostic`): GT read only here, never trained on."""

from __future__ import annotations

import numpy as np
import torch

from bench.train.hardware import autocast, autocast_dtype
from methods.base import Method


@torch.inference_mode()
def teacher_diagnostic(
    method: Method,
    images: np.ndarray,
    raters: np.ndarray,
    rater_valid: np.ndarray,
    gt: np.ndarray,
    *,
    device: torch.device,
    precision: str = "auto",
    batch_size: int = 256,
) -> dict | None:
    """Where a method's learned fused label (`Method.teacher`) stands on the pixels it does not trust the vote on.

    Mean teacher probability of foreground (class > 0) on the pixels outside its selected set (`p_fg_outside_gt_fg`,
    `…_gt_bg`: split by what GT says there), and the same inside; GT is read only here, after training, as a
    diagnostic. images (N, C, H, W), raters (N, R, H, W), rater_valid (N, R), gt (N, H, W).
    Returns None for a method without a teacher.
    """
    method.to(device=device, memory_format=torch.channels_last).eval()
    dtype = autocast_dtype(device, precision)
    sums = np.zeros((2, 2))  # [inside TV?][GT foreground?] sum of p(fg)
    counts = np.zeros((2, 2))
    for start in range(0, len(images), batch_size):
        part = slice(start, start + batch_size)
        x = torch.from_numpy(images[part]).to(device).contiguous(memory_format=torch.channels_last)
        with autocast(device, dtype):
            out = method.teacher(x, torch.from_numpy(raters[part]).long().to(device), torch.from_numpy(rater_valid[part]).to(device))
        if out is None:
            return None
        probs, selected = out
        fg = (1 - probs.float()[:, 0]).cpu().numpy()
        inside, truth = selected.cpu().numpy().astype(bool), gt[part] > 0
        for a in (0, 1):
            for b in (0, 1):
                where = (inside == a) & (truth == b)
                sums[a, b] += fg[where].sum()
                counts[a, b] += where.sum()
    mean = np.divide(sums, counts, out=np.full_like(sums, np.nan), where=counts > 0)
    return {
        "p_fg_outside_gt_fg": float(mean[0, 1]),
        "p_fg_outside_gt_bg": float(mean[0, 0]),
        "p_fg_inside_gt_fg": float(mean[1, 1]),
        "p_fg_inside_gt_bg": float(mean[1, 0]),
        "pixels_outside_gt_fg": int(counts[0, 1]),
        "pixels_outside_gt_bg": int(counts[0, 0]),
    }
