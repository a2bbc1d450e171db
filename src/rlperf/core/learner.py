"""The learning half of an iteration, as every runner's driver calls it.

A runner decides when learning happens (after a rollout, between env steps, or in worker
processes) and times it; the :class:`Learner` decides nothing about execution. It hands a
batch to the algorithm through the gradient step at the run's progress, guarded against
non-finite batches and metrics, and remembers what the session needs when something fails
(whether the learner was touched, the last batch for the non-finite dump).
"""

from __future__ import annotations

from collections.abc import Callable

from rlperf.core.nan_guard import NonFiniteGuard
from rlperf.core.optim import LocalGradientStep
from rlperf.core.protocols import Algorithm, AsyncAlgorithm, GradientStep, Optimizer
from rlperf.core.types import Batch, Progress, WorkerUpdates

ProgressAt = Callable[[int], Progress]
"""The run's progress with this many env steps of the current iteration already taken."""


class Learner:
    """``algo`` learning through ``step`` at the progress ``progress_at`` gives."""

    def __init__(
        self, algo: Algorithm, step: Optimizer, guard: NonFiniteGuard, progress_at: ProgressAt
    ) -> None:
        self.algo = algo
        self.step = step
        self.guard = guard
        self.progress_at = progress_at
        # Decided once: an interleaved driver calls learn() after every few env steps.
        self._gradient_step = step if isinstance(step, GradientStep) else None
        self._async_algo = algo if isinstance(algo, AsyncAlgorithm) else None
        if isinstance(step, LocalGradientStep) and guard.policy != "none":
            step.guard = guard  # every loss and gradient norm is checked before it applies
        self.touched = False
        """Whether an update began since :meth:`begin_iteration`: from then on a failure may
        leave the learner half-updated."""
        self.last_batch: Batch | None = None
        """The last batch handed to the algorithm (saved when it turns out non-finite)."""

    def begin_iteration(self) -> None:
        self.touched = False

    def learn(self, batch: Batch, env_steps_ahead: int = 0) -> dict[str, float]:
        """One update of the algorithm on ``batch`` (already on the learner's device);
        ``env_steps_ahead``: env steps this iteration took before it (interleaved drivers)."""
        step = self._gradient_step
        if step is None:
            raise TypeError(f"{type(self.step).__name__} makes no gradient steps in this process")
        self.last_batch = batch
        skip = self.guard.check_batch(batch)
        self.touched = True
        progress = self.progress_at(env_steps_ahead)
        metrics = {} if skip else self.algo.update(batch, step, progress)
        self.guard.check_metrics(metrics)
        return metrics

    def follow(self, updates: WorkerUpdates, env_steps_ahead: int) -> dict[str, float]:
        """What workers learned by themselves: the algorithm's schedules follow them."""
        algo = self._async_algo
        if algo is None:
            raise TypeError(f"{type(self.algo).__name__} does not learn in worker processes")
        self.touched = True
        metrics = algo.follow_workers(updates, self.step, self.progress_at(env_steps_ahead))
        self.guard.check_metrics(metrics)
        return metrics
