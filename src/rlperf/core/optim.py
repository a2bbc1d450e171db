"""Gradient steps that runners hand to algorithms (see :class:`rlperf.core.protocols.GradientStep`)."""

from __future__ import annotations

import contextlib
import inspect
import math
import sys
from collections.abc import Iterable, Mapping
from typing import Any, Self

import torch
from torch import nn

from rlperf.core.nan_guard import NonFiniteGuard
from rlperf.core.protocols import Algorithm, OptimizerSpec

PRECISIONS = ("fp32", "bf16")


def _skip_the_compiler_import() -> None:
    """Let torch.optim's bookkeeping methods run without importing torch's compiler.

    ``Optimizer.zero_grad``, ``state_dict``, ``load_state_dict`` and ``add_param_group`` are
    wrapped so that torch.compile skips them; the wrapper imports ``torch._dynamo`` on its
    first call to build that skip, and caches it on the function as ``__dynamo_disable``.
    That import costs about 1.5 s of CPU in every process that trains (half of a training
    process's start on a 2-vCPU machine, docs/benchmarks.md), for a compiler an eager run
    never uses. Caching the plain function instead changes nothing for rlperf: it never
    compiles code that calls the optimizer (``runner.compile`` compiles the policy's
    forward). Done once, and only while the compiler is not loaded anyway."""
    if "torch._dynamo" in sys.modules:
        return
    for name in ("zero_grad", "state_dict", "load_state_dict", "add_param_group"):
        plain = getattr(vars(torch.optim.Optimizer).get(name), "__wrapped__", None)
        if plain is not None and getattr(plain, "__dynamo_disable", None) is None:
            plain.__dynamo_disable = plain


def build_optimizer(params: Iterable[nn.Parameter], spec: OptimizerSpec) -> torch.optim.Optimizer:
    """The torch optimizer named by ``spec``."""
    _skip_the_compiler_import()
    if spec.name == "adam":
        # foreach kernels: one fused pass over all parameters instead of one per tensor.
        return torch.optim.Adam(params, lr=spec.learning_rate, eps=spec.eps, foreach=True)
    if spec.name == "rmsprop":
        extra = {} if spec.alpha is None else {"alpha": spec.alpha}
        return torch.optim.RMSprop(
            params, lr=spec.learning_rate, eps=spec.eps, foreach=True, **extra
        )
    raise ValueError(f"unknown optimizer {spec.name!r}; valid: adam, rmsprop")


class LocalGradientStep:
    """Backward + clip + optimizer step on parameters that live in this process.

    ``precision="bf16"`` runs the forward pass under ``torch.autocast`` with bfloat16: on CPUs
    with AMX (and GPUs with bf16 tensor cores) convolutions and matmuls take the fast kernels,
    while parameters, gradients and optimizer state stay fp32.
    """

    def __init__(
        self,
        module: nn.Module,
        spec: OptimizerSpec,
        *,
        device: torch.device,
        precision: str = "fp32",
    ) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"unknown precision {precision!r}; valid: {', '.join(PRECISIONS)}")
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.optimizer = build_optimizer(self.params, spec)
        # The update itself, without the wrapper torch puts around every optimizer's step,
        # which imports torch's compiler on its first call (see _skip_the_compiler_import)
        # to mark a graph break, then runs the update without autograd, as done here. The
        # wrapper also runs step hooks and profiler labels, which rlperf does not use.
        self._update = inspect.unwrap(type(self.optimizer).step)
        self.device = device
        self.precision = precision
        self.guard: NonFiniteGuard | None = None
        """Set by the session: checks loss and gradients before the optimizer steps."""

    @classmethod
    def for_algorithm(cls, algo: Algorithm, device: torch.device, precision: str) -> Self:
        """The step on ``algo``'s policy with the optimizer it asks for."""
        return cls(algo.policy, algo.optimizer_spec(), device=device, precision=precision)

    def reduce_gradients(self) -> None:
        """Between backward and clipping: where data-parallel learners average gradients."""

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.precision == "bf16":
            return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def __call__(self, loss: torch.Tensor, max_grad_norm: float | None = None) -> float:
        # set_to_none: no memset of every gradient; backward writes fresh tensors.
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.reduce_gradients()
        grad_norm = math.nan
        if max_grad_norm is not None:
            grad_norm = float(nn.utils.clip_grad_norm_(self.params, max_grad_norm, foreach=True))
        elif self.guard is not None:
            grads = [p.grad for p in self.params if p.grad is not None]
            grad_norm = float(nn.utils.get_total_norm(grads, foreach=True))
        if self.guard is not None and not (math.isfinite(grad_norm) and bool(loss.isfinite())):
            where = "the loss" if not bool(loss.isfinite()) else "the gradients"
            if self.guard.found(where):  # skip_update: this step never happened
                self.optimizer.zero_grad(set_to_none=True)
                return grad_norm
        if "torch._dynamo" in sys.modules:  # loaded anyway (a compiled run): torch's own path
            self.optimizer.step()
        else:
            with torch.no_grad():
                self._update(self.optimizer)
        return grad_norm

    def set_learning_rate(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def state_dict(self) -> dict[str, Any]:
        return self.optimizer.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        state = dict(state)
        # Checkpoints store JSON-style string keys; torch keys per-parameter state by index.
        state["state"] = {int(k): v for k, v in state["state"].items()}
        self.optimizer.load_state_dict(state)
