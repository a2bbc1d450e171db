"""What every runner provides to the training session (see docs/architecture.md).

A runner is the driver of one execution model: it produces data, decides when the learner
learns from it and times every phase of the iteration itself (``sample``, ``load``,
``learn``, ``update``); it never computes a loss, which is the algorithm's, reached through
the session's :class:`~rlperf.core.learner.Learner`. rlperf has three execution models:

- rollouts (:class:`RolloutDriver`: inproc, subprocess, decoupled, ray): collect T steps of
  N envs, load them onto the learner's device, learn once, sync the acting weights;
- interleaved transitions (``runners/transitions.py``: DQN in one process or with a play
  process): env steps and the gradient steps they make due, in turns, within one iteration;
- asynchronous workers (``runners/hogwild.py``: A3C): the workers learn; the driver waits
  for their reports and lets the algorithm's schedules follow them.

Each returns an :class:`Iteration`: the env steps, finished games and learning metrics.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from rlperf.config.schema import RunnerConfig
from rlperf.core.learner import Learner
from rlperf.core.optim import LocalGradientStep
from rlperf.core.protocols import Algorithm, Optimizer
from rlperf.core.types import Rollout
from rlperf.envs.base import EpisodeEnd
from rlperf.telemetry.timers import PhaseTimer


@dataclass
class Iteration:
    """What one iteration of a runner produced."""

    env_steps: int
    """Env steps taken (all of this learner's envs together)."""
    episodes: list[EpisodeEnd] = field(default_factory=list)
    """The true games that ended."""
    metrics: dict[str, float] = field(default_factory=dict)
    """What the algorithm's updates returned (with several, the newest value of each)."""


class Runner(Protocol):
    """The execution architecture behind one training run."""

    name: str
    learner_device: torch.device
    actor_device: torch.device

    def make_gradient_step(self, algo: Algorithm) -> Optimizer:
        """The learner's optimizer: a gradient step on ``learner_device`` at the run's
        precision where this process learns, the shared optimizer where workers do."""
        ...

    def run_iteration(self, learner: Learner, timer: PhaseTimer) -> Iteration:
        """One iteration: produce data, have ``learner`` learn, keep the actors current."""
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


class RolloutDriver(ABC):
    """The rollout execution model's iteration, for runners that provide ``collect``,
    ``load`` and ``sync_weights``: the thesis's four phases, one after the other."""

    @abstractmethod
    def collect(self, timer: PhaseTimer) -> tuple[Rollout, list[EpisodeEnd]]:
        """One rollout as the algorithm's DataSpec asks, and the true games that ended
        meanwhile (sub-phases such as ``env_step`` go into ``timer``)."""

    @abstractmethod
    def load(self, batch: Rollout) -> Rollout:
        """The rollout on the learner's device."""

    @abstractmethod
    def sync_weights(self) -> None:
        """Make the acting policy equal to the learner's."""

    def run_iteration(self, learner: Learner, timer: PhaseTimer) -> Iteration:
        with timer.phase("sample"):
            batch, episodes = self.collect(timer)
        with timer.phase("load"):
            batch = self.load(batch)
        with timer.phase("learn"):
            metrics = learner.learn(batch)
        with timer.phase("update"):
            self.sync_weights()
        odd_share = batch.odd_parity_share()
        if odd_share is not None:
            metrics = {**metrics, "parity/odd_share": odd_share}
        return Iteration(batch.num_steps * batch.num_envs, episodes, metrics)


class LocalLearner:
    """The gradient step of every runner whose learner lives in the training process:
    :class:`LocalGradientStep` on ``learner_device`` at ``cfg.precision`` (data-parallel
    learners and Hogwild's shared optimizer bring their own)."""

    cfg: RunnerConfig
    learner_device: torch.device

    def make_gradient_step(self, algo: Algorithm) -> LocalGradientStep:
        return LocalGradientStep.for_algorithm(
            algo, self.learner_device, self.cfg.precision, graphs=self.cfg.cuda_graph
        )
