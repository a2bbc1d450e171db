"""Gradient steps that runners hand to algorithms (see :class:`rlperf.core.protocols.GradientStep`)."""

from __future__ import annotations

import contextlib
import inspect
import math
import sys
from collections.abc import Hashable, Iterable, Mapping
from typing import Any, Self

import torch
from torch import nn

from rlperf.core.nan_guard import NonFiniteGuard
from rlperf.core.protocols import Algorithm, OptimizerSpec

PRECISIONS = ("fp32", "bf16")
IMPLEMENTATION = ("capturable", "foreach", "fused")
"""Optimizer options that choose how the update runs, not what it computes."""


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


def build_optimizer(
    params: Iterable[nn.Parameter], spec: OptimizerSpec, graphs_on: torch.device | None = None
) -> torch.optim.Optimizer:
    """The torch optimizer named by ``spec``. ``graphs_on``: a device whose CUDA graphs
    will record the optimizer's step (its learning rate becomes a tensor there, which
    :meth:`LocalGradientStep.set_learning_rate` overwrites in place)."""
    _skip_the_compiler_import()
    if graphs_on is not None:
        recordable = {"adam": torch.optim.Adam, "radam": torch.optim.RAdam}
        if spec.name not in recordable:
            raise ValueError(f"CUDA graphs record Adam's and RAdam's step only, not {spec.name}")
        cuda = graphs_on.type == "cuda"
        # capturable keeps the step counts on the device; on a CPU (nothing is captured)
        # torch takes a tensor learning rate only in its per-tensor implementation.
        lr = torch.tensor(spec.learning_rate, device=graphs_on)
        return recordable[spec.name](params, lr=lr, eps=spec.eps, capturable=cuda, foreach=cuda)
    if spec.name == "adam":
        if spec.fused:
            return torch.optim.Adam(params, lr=spec.learning_rate, eps=spec.eps, fused=True)
        # foreach: each operation over all parameters at once (torch's default on GPUs; on a
        # CPU a loop per operation, which spec.fused avoids where the steps are small).
        return torch.optim.Adam(params, lr=spec.learning_rate, eps=spec.eps, foreach=True)
    if spec.name == "radam":
        # Rectified Adam (Liu et al. 2020): PQN's optimizer; its warm-up needs no schedule.
        return torch.optim.RAdam(params, lr=spec.learning_rate, eps=spec.eps, foreach=True)
    if spec.name == "rmsprop":
        extra = {} if spec.alpha is None else {"alpha": spec.alpha}
        return torch.optim.RMSprop(
            params, lr=spec.learning_rate, eps=spec.eps, foreach=True, **extra
        )
    raise ValueError(f"unknown optimizer {spec.name!r}; valid: adam, radam, rmsprop")


class LocalGradientStep:
    """Backward + clip + optimizer step on parameters that live in this process.

    ``precision="bf16"`` runs the forward pass under ``torch.autocast`` with bfloat16: on CPUs
    with AMX (and GPUs with bf16 tensor cores) convolutions and matmuls take the fast kernels,
    while parameters, gradients and optimizer state stay fp32.

    ``graphs=True`` (``runner.cuda_graph``): algorithms that can may record their minibatch
    step, this step's :meth:`apply` included, as one CUDA graph (:attr:`programs` keeps what
    they recorded); the optimizer is then one a graph can record (Adam or RAdam).
    """

    def __init__(
        self,
        module: nn.Module,
        spec: OptimizerSpec,
        *,
        device: torch.device,
        precision: str = "fp32",
        graphs: bool = False,
    ) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"unknown precision {precision!r}; valid: {', '.join(PRECISIONS)}")
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.graphs = graphs
        self.optimizer = build_optimizer(self.params, spec, device if graphs else None)
        self.programs: dict[Hashable, Any] = {}
        """What algorithms recorded on this step (``graphs``), kept from update to update."""
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
    def for_algorithm(
        cls, algo: Algorithm, device: torch.device, precision: str, graphs: bool = False
    ) -> Self:
        """The step on ``algo``'s policy with the optimizer it asks for."""
        return cls(
            algo.policy, algo.optimizer_spec(), device=device, precision=precision, graphs=graphs
        )

    def reduce_gradients(self) -> None:
        """Between backward and clipping: where data-parallel learners average gradients."""

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.precision == "bf16":
            # A graph replays the casts it recorded: autocast's cache of cast weights would
            # hold copies made before the capture (torch's graph notes say to turn it off).
            return torch.autocast(
                device_type=self.device.type, dtype=torch.bfloat16, cache_enabled=not self.graphs
            )
        return contextlib.nullcontext()

    def _gradients(
        self, loss: torch.Tensor, max_grad_norm: float | None, norm: bool
    ) -> torch.Tensor | None:
        """Backward and clipping; the norm before clipping (None when neither clipping nor
        ``norm`` asks for it)."""
        # set_to_none: no memset of every gradient; backward writes fresh tensors.
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.reduce_gradients()
        if max_grad_norm is not None:
            return nn.utils.clip_grad_norm_(self.params, max_grad_norm, foreach=True)
        if norm:
            grads = [p.grad for p in self.params if p.grad is not None]
            return nn.utils.get_total_norm(grads, foreach=True)
        return None

    def _optimizer_step(self) -> None:
        if "torch._dynamo" in sys.modules:  # loaded anyway (a compiled run): torch's own path
            self.optimizer.step()
        else:
            with torch.no_grad():
                self._update(self.optimizer)

    def apply(self, loss: torch.Tensor, max_grad_norm: float | None = None) -> torch.Tensor:
        """Backward, clip, step, without waiting for the device (so that a CUDA graph can
        record it): the gradient norm before clipping, as a tensor. Checks nothing: the
        caller checks the loss and the norm when it next reads from the device."""
        grad_norm = self._gradients(loss, max_grad_norm, norm=True)
        assert grad_norm is not None
        self._optimizer_step()
        return grad_norm

    def found_nonfinite(self, steps: int) -> None:
        """The guard's turn after an update whose steps were not checked one by one: with
        graphs, the steps applied before anything was read (nan_policy=skip_update is
        refused with runner.cuda_graph for that reason)."""
        if steps and self.guard is not None:
            self.guard.found(
                f"the loss or gradients ({steps} of the update's minibatch steps; "
                "runner.cuda_graph checks once per update, after the steps applied)"
            )

    def __call__(self, loss: torch.Tensor, max_grad_norm: float | None = None) -> float:
        norm = self._gradients(loss, max_grad_norm, norm=self.guard is not None)
        grad_norm = math.nan if norm is None else float(norm)
        if self.guard is not None and not (math.isfinite(grad_norm) and bool(loss.isfinite())):
            where = "the loss" if not bool(loss.isfinite()) else "the gradients"
            if self.guard.found(where):  # skip_update: this step never happened
                self.optimizer.zero_grad(set_to_none=True)
                return grad_norm
        self._optimizer_step()
        return grad_norm

    def set_learning_rate(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            if isinstance(group["lr"], torch.Tensor):
                group["lr"].fill_(lr)  # in place: a recorded graph reads this tensor
            else:
                group["lr"] = lr

    def state_dict(self) -> dict[str, Any]:
        state = self.optimizer.state_dict()
        for group in state["param_groups"]:  # a number, with or without graphs
            group["lr"] = float(group["lr"])
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        state = dict(state)
        # Checkpoints store JSON-style string keys; torch keys per-parameter state by index.
        state["state"] = {int(k): v for k, v in state["state"].items()}
        built = [{k: g[k] for k in IMPLEMENTATION if k in g} for g in self.optimizer.param_groups]
        self.optimizer.load_state_dict(state)
        for group, implementation in zip(self.optimizer.param_groups, built, strict=True):
            # torch restores these with the maths; they belong to this step's device and
            # graphs (a GPU run's capturable Adam resumed on a CPU, or the other way round)
            group.update(implementation)
            if self.graphs:  # the loaded learning rate, back in a tensor on the device
                group["lr"] = torch.tensor(float(group["lr"]), device=self.device)
