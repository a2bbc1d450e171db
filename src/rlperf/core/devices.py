"""Naming torch devices one way, so that two spellings of one device compare equal."""

from __future__ import annotations

import torch


def resolve_device(name: str) -> torch.device:
    """``name`` as a torch.device with an explicit index for CUDA ("cuda" -> "cuda:0", the
    current device), so that "cuda" and "cuda:0" are the same device to every runner."""
    device = torch.device(name)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device
