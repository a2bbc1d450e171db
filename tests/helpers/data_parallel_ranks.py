"""Rank entry points for data-parallel tests (module-level so spawned processes import them)."""

from __future__ import annotations

import torch
from torch import nn

from rlperf.core import distributed
from rlperf.core.protocols import OptimizerSpec

SPEC = OptimizerSpec("adam", learning_rate=0.01)


def tiny_net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))


def batch(rank: int) -> torch.Tensor:
    """Each rank's own data."""
    return torch.arange(12, dtype=torch.float32).reshape(4, 3) * (rank + 1) / 10


def loss_of(net: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return (net(x) ** 2).mean()


def take_steps(rank: int, world: int, port: int, steps: int, out: dict) -> None:
    """Train ``tiny_net`` for ``steps`` data-parallel steps; report the final weights."""
    distributed.init_rank(rank, world, port, torch.device("cpu"))
    try:
        net = tiny_net()
        if rank:  # a different init: the broadcast must make it rank 0's
            with torch.no_grad():
                for p in net.parameters():
                    p.add_(1.0)
        distributed.broadcast_module(net)
        step = distributed.DataParallelGradientStep(net, SPEC, device=torch.device("cpu"))
        for _ in range(steps):
            step(loss_of(net, batch(rank)), max_grad_norm=0.5)
        out[rank] = [p.detach().clone() for p in net.parameters()]
    finally:
        distributed.destroy()
