"""The lag filter and the actor statistics of the runners whose actors act beside the
learner (decoupled, Ray): one place for what a rollout's lag means and how actors are timed.
"""

from __future__ import annotations

import numpy as np


class ActorStats:
    """Per batch: which rollouts are fresh enough, their lags, and the actors' speed.

    A rollout acted with policy version v and consumed at learner version V has lag V - v;
    above the algorithm's ``max_policy_lag`` it is dropped (``perf/rollouts_dropped``).
    """

    def __init__(self, max_policy_lag: int) -> None:
        self.max_policy_lag = max_policy_lag
        self.lags: list[int] = []
        self.dropped = 0
        self.actor_steps_per_s = 0.0

    def start_batch(self) -> None:
        self.lags, self.dropped = [], 0

    def accept(self, lag: int) -> bool:
        """Whether a rollout of this lag may be learned from (counted either way)."""
        if lag > self.max_policy_lag:
            self.dropped += 1
            return False
        self.lags.append(lag)
        return True

    def time_actors(self, steps: int, busy_s: list[float]) -> None:
        """The batch's ``steps`` over the mean seconds an actor was busy acting for it."""
        mean = sum(busy_s) / len(busy_s) if busy_s else 0.0
        self.actor_steps_per_s = steps / mean if mean > 0 else 0.0

    def metrics(self) -> dict[str, float]:
        return {
            "perf/policy_lag": float(np.mean(self.lags)) if self.lags else 0.0,
            "perf/policy_lag_max": float(max(self.lags, default=0)),
            "perf/rollouts_dropped": float(self.dropped),
            "perf/actor_steps_per_s": self.actor_steps_per_s,
        }
