"""Data-parallel learners: several processes, one model, gradients averaged each step.

Each learner process (a *rank*) collects its own batch with its own envs, computes the loss
on it and all-reduces the gradients before the optimizer step, so every rank applies the
same averaged gradient and the models stay identical — DistributedDataParallel's semantics.
torch's ``DistributedDataParallel`` wrapper itself is not used: it averages gradients only
for calls of the module's ``forward``, while rlperf's algorithms call the policy's
``evaluate``/``value`` methods. Instead :class:`DataParallelGradientStep` all-reduces one
flat buffer of all gradients per step (DDP's bucketing, with a single bucket) through
``torch.distributed``: gloo between CPU learners, nccl between GPUs.
"""

from __future__ import annotations

import socket
import time
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

from rlperf.core.optim import LocalGradientStep


def backend_for(device: torch.device) -> str:
    """nccl between CUDA devices, gloo otherwise."""
    return "nccl" if device.type == "cuda" else "gloo"


def free_port() -> int:
    """A TCP port on localhost that is free right now (for the rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def init_rank(rank: int, world_size: int, port: int, device: torch.device) -> None:
    """Join the process group of ``world_size`` learners on this machine."""
    dist.init_process_group(
        backend_for(device),
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
    )


def destroy() -> None:
    """Leave the process group (if joined)."""
    if dist.is_initialized():
        dist.destroy_process_group()


def broadcast_module(module: nn.Module) -> None:
    """Make every rank's parameters and buffers equal to rank 0's."""
    with torch.no_grad():
        for tensor in module.state_dict().values():
            dist.broadcast(tensor, src=0)


class DataParallelGradientStep(LocalGradientStep):
    """A local gradient step whose gradients are averaged over all ranks before clipping."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.world_size = dist.get_world_size()
        self._comm_seconds = 0.0

    def reduce_gradients(self) -> None:
        start = time.perf_counter()
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        flat = _flatten_dense_tensors(grads)
        dist.all_reduce(flat)
        flat /= self.world_size
        for p, g in zip(self.params, _unflatten_dense_tensors(flat, grads), strict=True):
            p.grad = g
        self._comm_seconds += time.perf_counter() - start

    def pop_comm_seconds(self) -> float:
        """Seconds spent in all-reduces since the previous call."""
        seconds, self._comm_seconds = self._comm_seconds, 0.0
        return seconds


def agree_on_stop(local_signal: bool, decide: Any) -> Any:
    """Every rank reports whether it received a stop signal; rank 0 then decides with
    ``decide(any_signal)`` and all ranks return rank 0's decision, so they leave the
    training loop at the same iteration (a rank that left alone would block the others in
    their next all-reduce)."""
    flag = torch.tensor([1 if local_signal else 0])
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    decision = [decide(bool(flag.item())) if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(decision, src=0)
    return decision[0]


def gather_objects(items: list[Any]) -> list[Any]:
    """Every rank's ``items`` concatenated in rank order (small Python objects only)."""
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, items)
    return [x for part in out for x in part]
