"""Diagnostics every algorithm reports, computed one way for all of them."""

from __future__ import annotations

import torch


def explained_variance(predicted: torch.Tensor, target: torch.Tensor) -> float:
    """1 - Var[target - predicted] / Var[target]: 1 is perfect, 0 no better than a constant
    (``losses/explained_variance`` of the value function)."""
    var = target.var()
    return float("nan") if var == 0 else float(1 - (target - predicted).var() / var)
