"""Seeding and the random state a checkpoint must carry for an exact resume."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy's legacy global generator and torch (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state() -> dict[str, Any]:
    """The global generators' state as tensors and JSON values (no pickling)."""
    state: dict[str, Any] = {"torch_cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            state[f"torch_cuda{i}"] = s
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` captured."""
    torch.set_rng_state(state["torch_cpu"])
    if torch.cuda.is_available():
        cuda_states = [state[k] for k in sorted(state) if k.startswith("torch_cuda")]
        if cuda_states:
            torch.cuda.set_rng_state_all(cuda_states)
