"""Hogwild gradient steps: local gradients applied to a model and optimizer in shared memory.

A3C (Mnih et al. 2016, and source 002) keeps one global network in shared memory; every
worker process computes gradients on its own local copy and applies them to the global
parameters through an optimizer whose statistics (RMSprop's squared-gradient average,
Adam's moments and step count) are shared too, so all workers build one set of statistics.
Updates are lock-free ("Hogwild!", Recht et al. 2011): two workers may write the same
parameter at once, which the algorithm tolerates.

Why not torch's optimizers with ``share_memory_()`` on their state, as 002 does: 002 hands
the local gradient to the global model by aliasing (``global_param._grad = local_param.grad``)
and only when the global gradient is still unset. Since PyTorch 2, ``zero_grad()`` sets
gradients to None, so each backward creates a fresh local tensor while the global parameter
keeps pointing at the first one: every later update silently re-applies the first segment's
gradient. Here the gradients are passed to :meth:`SharedOptimizer.step` explicitly, one list
per update, and nothing is kept between updates.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from rlperf.core.protocols import OptimizerSpec

SHARED_OPTIMIZERS = ("adam", "rmsprop")


class SharedOptimizer:
    """Adam or RMSprop over shared parameters, with its statistics in shared memory.

    The maths are torch's defaults (``torch.optim.Adam``: betas (0.9, 0.999), bias
    correction; ``torch.optim.RMSprop``: not centred, no momentum, ``eps`` added outside the
    square root), so a single process reproduces torch's optimizer step for step. The
    object is picklable into spawned processes: every tensor it holds is in shared memory.
    The learning rate is a shared tensor too, so a schedule applied by one process reaches
    all of them.
    """

    def __init__(
        self,
        params: Sequence[torch.Tensor],
        spec: OptimizerSpec,
        betas: tuple[float, float] = (0.9, 0.999),
    ) -> None:
        if spec.name not in SHARED_OPTIMIZERS:
            raise ValueError(
                f"unknown optimizer {spec.name!r}; valid: {', '.join(SHARED_OPTIMIZERS)}"
            )
        self.name = spec.name
        self.params = [p.detach() for p in params]
        for p in self.params:
            if not p.is_shared() and p.device.type == "cpu":
                p.share_memory_()
        self.eps = spec.eps
        self.alpha = 0.99 if spec.alpha is None else spec.alpha
        self.betas = betas
        self.lr = torch.tensor(spec.learning_rate, dtype=torch.float64).share_memory_()
        self.steps = torch.zeros((), dtype=torch.int64).share_memory_()
        """Optimizer steps taken by all processes together (Adam's bias correction uses it)."""
        names = ("exp_avg", "exp_avg_sq") if self.name == "adam" else ("square_avg",)
        self.state: dict[str, list[torch.Tensor]] = {
            name: [_shared_zeros_like(p) for p in self.params] for name in names
        }

    @torch.no_grad()
    def step(self, grads: Sequence[torch.Tensor | None]) -> None:
        """Apply one update with ``grads`` (one per parameter, None = no gradient)."""
        if len(grads) != len(self.params):
            raise ValueError(f"{len(grads)} gradients for {len(self.params)} parameters")
        self.steps += 1  # lock-free like the rest: two simultaneous steps may count once
        lr = float(self.lr)
        if self.name == "adam":
            beta1, beta2 = self.betas
            t = int(self.steps)
            bias1 = 1.0 - beta1**t
            bias2_sqrt = math.sqrt(1.0 - beta2**t)
            for p, g, m, v in zip(
                self.params, grads, self.state["exp_avg"], self.state["exp_avg_sq"], strict=True
            ):
                if g is None:
                    continue
                g = g.to(p.device)
                m.lerp_(g, 1.0 - beta1)
                v.mul_(beta2).addcmul_(g, g, value=1.0 - beta2)
                denom = (v.sqrt() / bias2_sqrt).add_(self.eps)
                p.addcdiv_(m, denom, value=-lr / bias1)
        else:
            for p, g, v in zip(self.params, grads, self.state["square_avg"], strict=True):
                if g is None:
                    continue
                g = g.to(p.device)
                v.mul_(self.alpha).addcmul_(g, g, value=1.0 - self.alpha)
                p.addcdiv_(g, v.sqrt().add_(self.eps), value=-lr)

    def set_learning_rate(self, lr: float) -> None:
        self.lr.fill_(lr)

    def state_dict(self) -> dict[str, Any]:
        """Statistics as plain tensors (copies) plus the step count and learning rate."""
        return {
            "name": self.name,
            "steps": int(self.steps),
            "lr": float(self.lr),
            "state": {k: [t.clone() for t in v] for k, v in self.state.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Copy a :meth:`state_dict` into the shared tensors (every process sees it)."""
        if state["name"] != self.name:
            raise ValueError(f"optimizer state is for {state['name']}, this one is {self.name}")
        self.steps.fill_(int(state["steps"]))
        self.lr.fill_(float(state["lr"]))
        for name, tensors in self.state.items():
            saved = state["state"][name]
            if isinstance(saved, Mapping):  # checkpoints store lists as index-keyed dicts
                saved = [saved[k] for k in sorted(saved, key=int)]
            if len(saved) != len(tensors):
                raise ValueError(
                    f"optimizer state {name} has {len(saved)} tensors, expected {len(tensors)}"
                )
            for dst, src in zip(tensors, saved, strict=True):
                dst.copy_(torch.as_tensor(src))


def _shared_zeros_like(p: torch.Tensor) -> torch.Tensor:
    t = torch.zeros_like(p, memory_format=torch.contiguous_format)
    return t.share_memory_() if t.device.type == "cpu" else t


def share_model(model: nn.Module) -> nn.Module:
    """Move ``model``'s parameters and buffers into shared memory (in place); returns it."""
    return model.share_memory()


@torch.no_grad()
def copy_weights(dst: nn.Module, src: nn.Module) -> None:
    """``dst``'s parameters and buffers become equal to ``src``'s (same architecture)."""
    for d, s in zip(dst.parameters(), src.parameters(), strict=True):
        d.copy_(s)
    for d, s in zip(dst.buffers(), src.buffers(), strict=True):
        d.copy_(s)


@dataclass
class HogwildGradientStep:
    """The gradient step a Hogwild worker hands its algorithm.

    The algorithm builds its loss on ``local`` (this process's copy); the step backpropagates
    into ``local``'s gradients, clips them, applies exactly those gradients to the shared
    model through the shared optimizer, and refreshes ``local`` from the shared model, so a
    second gradient step in the same segment starts from the updated weights. Local
    gradients are dropped after every step: nothing of one update leaks into the next.

    ``owns_learning_rate``: whether :meth:`set_learning_rate` writes the shared learning
    rate. The runner gives the schedule to one process (the driver) and workers' calls are
    ignored, so the schedule follows the run's global step count.
    """

    local: nn.Module
    shared: nn.Module
    optimizer: SharedOptimizer
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    owns_learning_rate: bool = True
    steps_taken: int = 0
    """Updates this process applied (for its reports)."""
    skipped: int = 0
    """Updates dropped because their gradient was not finite (the driver's nan_policy then
    sees the non-finite ``losses/grad_norm``)."""

    def __post_init__(self) -> None:
        self._local_params = [p for p in self.local.parameters() if p.requires_grad]

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()

    def __call__(self, loss: torch.Tensor, max_grad_norm: float | None = None) -> float:
        for p in self._local_params:
            p.grad = None
        loss.backward()
        # The norm is always measured (an infinite bound clips nothing): it is logged, and a
        # non-finite one must never reach the shared model, which every worker reads.
        limit = math.inf if max_grad_norm is None else max_grad_norm
        grad_norm = float(nn.utils.clip_grad_norm_(self._local_params, limit))
        if math.isfinite(grad_norm):
            self.optimizer.step([p.grad for p in self._local_params])
            self.steps_taken += 1
        else:
            self.skipped += 1
        for p in self._local_params:
            p.grad = None
        copy_weights(self.local, self.shared)
        return grad_norm

    def sync_local(self) -> None:
        """Refresh the local copy from the shared model (start of an update segment)."""
        copy_weights(self.local, self.shared)

    def set_learning_rate(self, lr: float) -> None:
        if self.owns_learning_rate:
            self.optimizer.set_learning_rate(lr)

    def state_dict(self) -> dict[str, Any]:
        return self.optimizer.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.optimizer.load_state_dict(state)
