"""Shared-memory structures between the learner and actor processes.

Both live in torch shared tensors (the ``file_descriptor`` strategy on Linux: the memory is
unlinked at creation, so nothing can leak into ``/dev/shm`` even when a process is killed)
and are handed to spawned processes as constructor arguments.
"""

from __future__ import annotations

import time
from dataclasses import fields

import torch
from torch import nn

from rlperf.core.types import Rollout


class SharedPolicyWeights:
    """The learner's latest weights with a version number, readable without a lock.

    A sequence counter guards the copy (a seqlock): the learner makes it odd, writes, and
    makes it even again; a reader retries when the counter was odd or moved during its copy.
    A lock would do too, but an actor killed while holding it would freeze the learner.
    The version is the number of publications so far.
    """

    def __init__(self, module: nn.Module) -> None:
        tensors = list(module.state_dict().values())
        if any(not t.is_floating_point() for t in tensors):
            raise TypeError("SharedPolicyWeights holds floating-point parameters and buffers only")
        self.numels = [t.numel() for t in tensors]
        self.flat = torch.zeros(sum(self.numels), dtype=torch.float32).share_memory_()
        self.seq = torch.zeros(1, dtype=torch.int64).share_memory_()

    @property
    def version(self) -> int:
        return int(self.seq[0]) // 2

    def publish(self, module: nn.Module) -> int:
        """Copy ``module``'s weights in as the next version; returns that version."""
        self.seq += 1
        with torch.no_grad():
            for dst, src in zip(
                self.flat.split(self.numels), module.state_dict().values(), strict=True
            ):
                dst.copy_(src.reshape(-1))
        self.seq += 1
        return self.version

    def pull(self, module: nn.Module, have: int) -> int:
        """Load the latest weights into ``module`` unless it already has version ``have``;
        returns the version it now has."""
        targets = list(module.state_dict().values())
        while True:
            before = int(self.seq[0])
            if before % 2:  # a publication is in progress
                time.sleep(0)
                continue
            if before // 2 == have:
                return have
            with torch.no_grad():
                for dst, src in zip(targets, self.flat.split(self.numels), strict=True):
                    dst.copy_(src.view(dst.shape))
            if int(self.seq[0]) == before:
                return before // 2


def _cat_dim(name: str) -> int:
    """The env axis of a Rollout field: axis 1 of ``*_TN`` tensors, axis 0 of ``*_N``."""
    return 1 if name.endswith("_TN") else 0


class RolloutSlots:
    """``num_slots`` preallocated rollouts of T steps x k envs in shared memory.

    An actor fills a slot it owns, hands its index to the learner, and gets it back only
    when the learner has finished reading it: data in use is never overwritten.
    """

    def __init__(
        self,
        num_slots: int,
        num_steps: int,
        num_envs: int,
        obs_shape: tuple[int, ...],
        obs_dtype: torch.dtype,
    ) -> None:
        self.data = Rollout.allocate(
            num_steps, num_envs, obs_shape, obs_dtype, slots=num_slots, share_memory=True
        )
        """Every field with a leading slot axis."""

    def __getitem__(self, slot: int) -> Rollout:
        """Slot ``slot`` as a Rollout of views (no copy)."""
        return Rollout(**{f.name: getattr(self.data, f.name)[slot] for f in fields(Rollout)})


def gather_rollouts(parts: list[Rollout], out: Rollout) -> Rollout:
    """Concatenate rollouts of equal length along the env axis into ``out``'s tensors."""
    for f in fields(Rollout):
        torch.cat(
            [getattr(p, f.name) for p in parts], dim=_cat_dim(f.name), out=getattr(out, f.name)
        )
    return out


def empty_batch(like: Rollout, num_envs: int) -> Rollout:
    """Buffers for a batch of ``num_envs`` envs shaped like ``like`` elsewhere."""

    def alloc(t: torch.Tensor, dim: int) -> torch.Tensor:
        shape = list(t.shape)
        shape[dim] = num_envs
        return torch.empty(shape, dtype=t.dtype)

    return Rollout(
        **{f.name: alloc(getattr(like, f.name), _cat_dim(f.name)) for f in fields(Rollout)}
    )
