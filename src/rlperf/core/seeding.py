"""Seeding and the random state a checkpoint must carry for an exact resume."""

from __future__ import annotations

import random
import warnings
from typing import Any

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy's legacy global generator and torch (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state(cuda: bool = False) -> dict[str, Any]:
    """The global generators' state as tensors (no pickling); CUDA ones only when ``cuda``
    (asking for them would create a CUDA context in a run that uses none)."""
    state: dict[str, Any] = {"torch_cpu": torch.get_rng_state()}
    if cuda:
        state["torch_cuda"] = list(torch.cuda.get_rng_state_all())
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` captured.

    CUDA generators are restored for the devices visible now; a checkpoint from a machine
    with more GPUs restores the first ones and warns (results then differ from an
    uninterrupted run).
    """
    torch.set_rng_state(state["torch_cpu"])
    cuda_states = state.get("torch_cuda") or []
    if cuda_states and torch.cuda.is_available():
        count = torch.cuda.device_count()
        if len(cuda_states) > count:
            warnings.warn(
                f"checkpoint has random state for {len(cuda_states)} GPUs, {count} visible now: "
                "the resumed run is not bit-identical",
                stacklevel=2,
            )
        for index, gen_state in enumerate(cuda_states[:count]):
            torch.cuda.set_rng_state(gen_state, index)
