"""Diagnostics every algorithm reports, computed one way for all of them."""

from __future__ import annotations

import torch


def explained_variance(predicted: torch.Tensor, target: torch.Tensor) -> float:
    """1 - Var[target - predicted] / Var[target]: 1 is perfect, 0 no better than a constant
    (``losses/explained_variance`` of the value function); nan where every target is the same."""
    var = target.var()
    return float("nan") if var == 0 else float(1 - (target - predicted).var() / var)


def value_fit(
    predicted: torch.Tensor, target: torch.Tensor, key: str = "losses/explained_variance"
) -> dict[str, float]:
    """``{key: explained_variance}`` for an algorithm's logged metrics, or nothing while it is
    undefined. Every target equal happens in a healthy run (a solved CartPole's value head
    at 100.0 in bf16 turns every TD(lambda) return into exactly 100.0), and a logged nan would
    stop it under ``nan_policy=raise``."""
    ev = explained_variance(predicted, target)
    return {} if ev != ev else {key: ev}
