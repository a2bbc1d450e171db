"""The contracts between runners and algorithms (see docs/architecture.md).

Dependencies point one way: ``runners -> core <- algos``. A runner knows an algorithm only
through :class:`Algorithm`; an algorithm knows the runner only through the
:class:`GradientStep` it is handed.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch
from torch import nn

from rlperf.core.types import Batch, DataSpec, Progress, WorkerUpdates


@dataclass(frozen=True)
class OptimizerSpec:
    """The optimizer an algorithm wants; the runner builds it (locally, shared, distributed)."""

    name: str
    """adam, radam or rmsprop."""
    learning_rate: float
    eps: float = 1e-8
    alpha: float | None = None
    """RMSprop smoothing constant of the squared-gradient average; unset = torch's default (0.99)."""
    fused: bool = False
    """Adam as torch's fused kernel (each tensor's whole update in one pass) instead of its
    ``foreach`` form (one pass per operation; on a CPU, one loop over the tensors each).
    The same float32 maths in another order: not the ``foreach`` result bit for bit."""


class Optimizer(Protocol):
    """What the training process holds of a learner's optimizer, whoever makes the steps:
    its learning rate (the algorithm's schedule) and the state a checkpoint keeps."""

    def set_learning_rate(self, lr: float) -> None: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


@runtime_checkable
class GradientStep(Optimizer, Protocol):
    """One optimizer step on a loss, provided by the runner.

    The runner decides where gradients go (a local optimizer, a Hogwild shared model, an
    all-reduce) and at which precision the forward pass runs; the algorithm only builds the
    loss inside :meth:`autocast` and hands it over.
    """

    def __call__(self, loss: torch.Tensor, max_grad_norm: float | None = None) -> float:
        """Backward, clip, step; returns the gradient norm before clipping (nan if not computed)."""
        ...

    def autocast(self) -> AbstractContextManager[Any]:
        """Context for the forward pass (mixed precision when the runner enables it)."""
        ...


@runtime_checkable
class RecordableStep(GradientStep, Protocol):
    """A gradient step that an algorithm may record, with its loss, as one CUDA graph
    (``runner.cuda_graph``; :mod:`rlperf.core.cuda_graph`)."""

    graphs: bool
    """Whether the run asked for graphs (the algorithm then uses :meth:`apply`)."""
    programs: dict[Hashable, Any]
    """What the algorithm recorded on this step, kept from update to update."""

    def apply(self, loss: torch.Tensor, max_grad_norm: float | None = None) -> torch.Tensor:
        """Backward, clip, step without waiting for the device: the norm as a tensor."""
        ...

    def found_nonfinite(self, steps: int) -> None:
        """``steps`` minibatch steps of the last update had a non-finite loss or gradient
        norm (counted on the device, read once after the update)."""
        ...


class Policy(Protocol):
    """An actor-critic network (an ``nn.Module``; models.policy.ActorCritic implements it).

    Runners call :meth:`act`; algorithms call :meth:`evaluate` and :meth:`value`.
    """

    def act(
        self, obs: torch.Tensor, deterministic: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Actions for a batch of observations, without autograd: (actions, logprobs, values)."""
        ...

    def evaluate(
        self, obs: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(logprobs of ``actions``, entropies, values) with gradients."""
        ...

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """Value estimates."""
        ...

    def parameters(self) -> Iterator[nn.Parameter]: ...


class Algorithm(Protocol):
    """The learning maths: what data it needs and how it learns from a batch."""

    data_spec: DataSpec
    policy: nn.Module

    def optimizer_spec(self) -> OptimizerSpec: ...

    def update(self, batch: Batch, step: GradientStep, progress: Progress) -> dict[str, float]:
        """Learn from one batch (a Rollout, or Transitions for kind "transitions"); returns
        metrics named ``losses/...``."""
        ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


@runtime_checkable
class AsyncAlgorithm(Algorithm, Protocol):
    """An algorithm whose workers learn by themselves (A3C on the Hogwild runner): in the
    training process it only follows them, applying its schedules to the shared optimizer."""

    def follow_workers(
        self, updates: WorkerUpdates, optimizer: Optimizer, progress: Progress
    ) -> dict[str, float]:
        """Set the schedule's learning rate for ``progress``; returns the workers' metrics
        with the driver's own (``losses/learning_rate``...)."""
        ...


class Behaviour(Protocol):
    """How an off-policy algorithm acts (DQN: epsilon-greedy on Q-values).

    The algorithm owns the rule and its schedule; the runner calls :meth:`act` and keeps
    :attr:`network`'s weights current. It is picklable, so a play process can hold its own
    copy (with its own network) while the learner trains the original.
    """

    network: nn.Module

    def act(self, obs: torch.Tensor, env_steps: int) -> torch.Tensor:
        """Actions (N,) int64 for observations (N, *obs_shape); ``env_steps`` collected so far
        drives the exploration schedule."""
        ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


class OffPolicyAlgorithm(Algorithm, Protocol):
    """An algorithm that learns from replayed transitions (``DataSpec.kind == "transitions"``):
    ``update`` takes :class:`~rlperf.core.types.Transitions` and makes one gradient step per
    row of its G axis; :attr:`behaviour` says how to act."""

    behaviour: Behaviour
