"""What every runner provides to the training session (see docs/architecture.md).

A runner produces batches and moves weights; it never computes a loss. The session drives
one iteration as ``collect`` (phase ``sample``), ``load``, the algorithm's update (phase
``learn``, through the runner's gradient step) and ``sync_weights`` (phase ``update``).
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

from rlperf.config.schema import RunnerConfig
from rlperf.core.optim import LocalGradientStep
from rlperf.core.protocols import Algorithm, GradientStep
from rlperf.core.types import Rollout
from rlperf.envs.base import EpisodeEnd
from rlperf.telemetry.timers import PhaseTimer


class Runner(Protocol):
    """The execution architecture behind one training run."""

    name: str
    learner_device: torch.device
    actor_device: torch.device

    def make_gradient_step(self, algo: Algorithm) -> GradientStep:
        """The gradient step the algorithm will learn through (placement, precision)."""
        ...

    def collect(self, timer: PhaseTimer) -> tuple[Rollout, list[EpisodeEnd]]:
        """One batch as the algorithm's DataSpec asks, and the true games that ended meanwhile."""
        ...

    def load(self, batch: Rollout) -> Rollout:
        """The batch on the learner's device."""
        ...

    def sync_weights(self) -> None:
        """Make the acting policy equal to the learner's."""
        ...

    def worker_metrics(self) -> dict[str, float]:
        """Per-iteration facts about the runner's worker processes (``sys/live_workers``)."""
        ...

    def process_resources(self) -> list[dict[str, Any]]:
        """What each of the runner's worker processes got: role, index, pid, torch threads,
        CPU affinity (for the run manifest)."""
        ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class LocalLearner:
    """The gradient step of every runner whose learner lives in the training process:
    :class:`LocalGradientStep` on ``learner_device`` at ``cfg.precision`` (data-parallel
    learners and Hogwild's shared optimizer bring their own)."""

    cfg: RunnerConfig
    learner_device: torch.device

    def make_gradient_step(self, algo: Algorithm) -> LocalGradientStep:
        return LocalGradientStep.for_algorithm(algo, self.learner_device, self.cfg.precision)
