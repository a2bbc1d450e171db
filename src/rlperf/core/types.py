"""Data that crosses the runner/algorithm boundary.

Shape convention used across rlperf: a suffix names the axes, ``T`` = time (steps per env),
``N`` = envs, ``B`` = flat batch. ``obs_TN`` is a (T, N, *obs_shape) tensor.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

import torch


@dataclass(frozen=True)
class DataSpec:
    """What an algorithm needs from a runner.

    A runner reads this instead of knowing the algorithm: how long each rollout is, which
    per-step outputs of the behaviour policy to keep, and how stale the policy that produced
    the data may be.
    """

    kind: Literal["rollout", "transitions"]
    """rollout: on-policy fragments of ``horizon`` steps per env; transitions: replay data."""
    horizon: int
    """Steps per env in one rollout (T)."""
    needs_logprob: bool = True
    """Keep the behaviour policy's log-probability of each action."""
    needs_value: bool = True
    """Keep the behaviour policy's value estimate of each observation."""
    max_policy_lag: int = 0
    """Updates by which the acting policy may trail the learner (0 = strictly on-policy)."""


@dataclass
class Rollout:
    """T steps of N envs, time-major.

    ``dones_TN[t]`` is true when the episode (or life, under episodic life) ended with the
    transition at step t, so ``obs_TN[t + 1]`` (or ``next_obs_N`` for the last step) already
    belongs to the next episode: bootstrapping must stop there.
    """

    obs_TN: torch.Tensor
    actions_TN: torch.Tensor
    logprobs_TN: torch.Tensor
    values_TN: torch.Tensor
    rewards_TN: torch.Tensor
    dones_TN: torch.Tensor
    next_obs_N: torch.Tensor
    """Observation after the last step, for the bootstrap value."""
    truncation_values_TN: torch.Tensor
    """Value of the final observation where an episode was cut by a step limit at step t
    (its ``dones_TN[t]`` is set), 0 elsewhere: the episode did not really end, so the
    learner adds ``gamma`` times this value to the reward."""

    @property
    def num_steps(self) -> int:
        return self.rewards_TN.shape[0]

    @property
    def num_envs(self) -> int:
        return self.rewards_TN.shape[1]

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Rollout:
        """The same rollout with every tensor on ``device`` (no copy when already there)."""
        return Rollout(
            **{
                f.name: getattr(self, f.name).to(device, non_blocking=non_blocking)
                for f in fields(self)
            }
        )


@dataclass(frozen=True)
class Progress:
    """Where the run stands, for schedules (learning-rate annealing and the like)."""

    iteration: int
    """Iterations completed before this update."""
    env_steps: int
    """Env steps collected before this batch."""
    fraction_left: float
    """1.0 at the start of the run's budget, 0.0 at its end (used for linear annealing)."""
