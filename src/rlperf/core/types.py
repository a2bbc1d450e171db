"""Data that crosses the runner/algorithm boundary.

Shape convention used across rlperf: a suffix names the axes, ``T`` = time (steps per env),
``N`` = envs, ``B`` = flat batch, ``G`` = gradient steps. ``obs_TN`` is a (T, N, *obs_shape)
tensor.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
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
    """Steps per env in one rollout (T); transitions: env steps of all envs together per
    iteration (the runner rounds up to whole vector steps)."""
    needs_logprob: bool = True
    """Keep the behaviour policy's log-probability of each action."""
    needs_value: bool = True
    """Keep the behaviour policy's value estimate of each observation."""
    max_policy_lag: int = 0
    """Updates by which the acting policy may trail the learner (0 = strictly on-policy)."""
    buffer_size: int = 0
    """transitions: replay capacity in transitions."""
    batch_size: int = 0
    """transitions: replay samples per gradient step."""
    train_frequency: int = 1
    """transitions: env steps (all envs together) per gradient step."""
    learning_starts: int = 0
    """transitions: transitions in the replay before the first gradient step."""
    n_step: int = 1
    """transitions: env steps summed per replayed transition (n-step returns)."""
    gamma: float = 0.99
    """transitions: the discount of the n-step returns the replay sums."""


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
    frame_parity_TN: torch.Tensor | None = None
    """int8: the frame parity of the game each step belongs to (see
    :attr:`~rlperf.envs.base.EpisodeEnd.frame_parity`), -1 where not known; allocated
    rollouts have it, hand-built ones may leave it out."""

    @classmethod
    def allocate(
        cls,
        num_steps: int,
        num_envs: int,
        obs_shape: tuple[int, ...],
        obs_dtype: torch.dtype,
        *,
        slots: int | None = None,
        device: torch.device | str = "cpu",
        pin_memory: bool = False,
        share_memory: bool = False,
    ) -> Rollout:
        """Zeroed buffers for ``num_steps`` steps of ``num_envs`` envs (with a leading axis of
        ``slots`` when given), in the dtypes every runner writes and every algorithm reads:
        observations ``obs_dtype`` (uint8 frames, float32 features), actions int64, and
        log-probabilities, values, rewards, dones (0.0 or 1.0) and truncation values float32,
        frame parities int8 (-1: not known).
        ``pin_memory`` makes host-to-GPU copies asynchronous; ``share_memory`` puts the
        buffers where other processes can write them."""
        lead = () if slots is None else (slots,)
        T, N = num_steps, num_envs

        def zeros(shape: tuple[int, ...], dtype: torch.dtype = torch.float32) -> torch.Tensor:
            out = torch.zeros(lead + shape, dtype=dtype, device=device, pin_memory=pin_memory)
            return out.share_memory_() if share_memory else out

        return cls(
            obs_TN=zeros((T, N, *obs_shape), obs_dtype),
            actions_TN=zeros((T, N), torch.int64),
            logprobs_TN=zeros((T, N)),
            values_TN=zeros((T, N)),
            rewards_TN=zeros((T, N)),
            dones_TN=zeros((T, N)),
            next_obs_N=zeros((N, *obs_shape), obs_dtype),
            truncation_values_TN=zeros((T, N)),
            frame_parity_TN=zeros((T, N), torch.int8).fill_(-1),
        )

    @property
    def num_steps(self) -> int:
        return self.rewards_TN.shape[0]

    @property
    def num_envs(self) -> int:
        return self.rewards_TN.shape[1]

    def odd_parity_share(self) -> float | None:
        """The share of this rollout's steps whose game is on odd frames, among the steps
        whose parity is known (None when none is). Each env gives one step per step, so this
        is the share of envs playing the odd-frame game: longer games hold their envs longer,
        so the parity whose games last longer gets more of the data."""
        if self.frame_parity_TN is None:
            return None
        known = self.frame_parity_TN >= 0
        count = int(known.sum())
        if count == 0:
            return None
        return float((self.frame_parity_TN == 1).sum()) / count

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Rollout:
        """The same rollout with every tensor on ``device`` (no copy when already there)."""
        return Rollout(
            **{
                f.name: getattr(self, f.name).to(device, non_blocking=non_blocking)
                for f in fields(self)
                if getattr(self, f.name) is not None
            }
        )


@dataclass
class Transitions:
    """Replay samples for G gradient steps of B transitions each (G may be 0).

    ``dones_GB`` is 1 where the episode (or life) terminated with the transition, so nothing
    is bootstrapped from ``next_obs_GB`` there; an episode cut by a step limit keeps 0 and
    its ``next_obs_GB`` is the real final observation.
    """

    obs_GB: torch.Tensor
    actions_GB: torch.Tensor
    rewards_GB: torch.Tensor
    next_obs_GB: torch.Tensor
    dones_GB: torch.Tensor
    discounts_GB: torch.Tensor
    """The factor of each bootstrapped value: gamma^m for a return of m steps."""
    env_steps: int
    """Env steps collected when the batch was sampled (for schedules such as target syncs)."""

    @property
    def num_gradient_steps(self) -> int:
        return self.actions_GB.shape[0]

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Transitions:
        """The same batch with every tensor on ``device`` (no copy when already there)."""
        moved = {
            f.name: getattr(self, f.name).to(device, non_blocking=non_blocking)
            for f in fields(self)
            if f.name.endswith("_GB")
        }
        return Transitions(**moved, env_steps=self.env_steps)


Batch = Rollout | Transitions
"""What a runner hands an algorithm: a Rollout (kind rollout) or Transitions."""


@dataclass
class WorkerUpdates:
    """What asynchronous workers (A3C's Hogwild) report to the driver process in one
    iteration: they computed and applied the gradients themselves, so this is no batch to
    learn from but the account of what they learned."""

    metrics: dict[str, float] = field(default_factory=dict)
    """Means over the iteration's segments of what the algorithm's updates returned."""
    segments: int = 0
    """Gradient steps (segments) the workers applied in this iteration."""


@dataclass(frozen=True)
class Progress:
    """Where the run stands, for schedules (learning-rate annealing and the like)."""

    iteration: int
    """Iterations completed before this update."""
    env_steps: int
    """Env steps collected before this batch."""
    fraction_left: float
    """1.0 at the start of the run's budget, 0.0 at its end (used for linear annealing)."""
    mean_return_100: float | None = None
    """Mean return of the last 100 finished games, None before the 100th (or where the
    caller does not track games): what schedules keyed to the return compare against."""
    target_share: float | None = None
    """Share of the way from the run's first 100 games to ``stop.target_reward`` that the
    mean of the last 100 has covered (None without a target or before the 100th game): the
    return in the game's own scale."""
    parity_means: tuple[float | None, float | None] = (None, None)
    """Mean return of the last games on even and on odd frames
    (:meth:`~rlperf.telemetry.episodes.EpisodeStats.parity_means`; None where not known)."""

    def leading_parity(self, gap: float) -> int | None:
        """The frame parity (0 even, 1 odd) whose last games' mean return leads the other's
        by more than ``gap``; None while they are within it or either is not known."""
        even, odd = self.parity_means
        if even is None or odd is None or abs(even - odd) <= gap:
            return None
        return 0 if even > odd else 1

    def annealed(self, value: float, anneal: bool) -> float:
        """``value`` decayed linearly to 0 over the run's budget when ``anneal`` (CleanRL's
        ``anneal_lr``), else ``value``: the one learning-rate schedule of every algorithm."""
        return value * self.fraction_left if anneal else value

    def annealed_over(self, value: float, fraction: float) -> float:
        """``value`` decayed linearly to 0 over the first ``fraction`` (0 < fraction <= 1)
        of the run's budget, then 0: :meth:`annealed` with an earlier end (as
        ``exploration_fraction`` ends epsilon's decay)."""
        return value * max(0.0, 1.0 - (1.0 - self.fraction_left) / fraction)
