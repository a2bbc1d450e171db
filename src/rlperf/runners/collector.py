"""Acting: step a vector env with a policy for T steps and record the rollout.

One loop shared by every runner that acts with a local copy of the policy: the in-process
runners write into their own buffers, each actor process of the decoupled runner into a
rollout slot in shared memory.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import numpy as np
import torch

from rlperf.core.cuda_graph import GraphedCall
from rlperf.core.errors import WorkerError
from rlperf.core.resources import intra_op_threads
from rlperf.core.types import Rollout
from rlperf.envs.base import EpisodeEnd
from rlperf.envs.vector import VecStep, VectorEnv
from rlperf.models.policy import ActorCritic
from rlperf.telemetry.timers import PhaseTimer

# Called with the failed step's error and its index t; either re-raises or repairs step t
# and returns the observations to continue from (see SubprocRunner._recover).
WorkerErrorHandler = Callable[[WorkerError, int, Rollout], np.ndarray]


def act_precision(
    precision: str, device: torch.device, cache: bool = True
) -> contextlib.AbstractContextManager[object]:
    """Acting runs at the learner's precision, so the behaviour log-probs match what the
    learner recomputes at the same weights (ratios of exactly 1 before the first step).
    ``cache=False`` for a recorded forward: a graph would replay casts of stale weights."""
    if precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16, cache_enabled=cache)
    return contextlib.nullcontext()


class RecordedActing:
    """``policy.act(obs)`` on a fixed observation buffer, recorded once as a CUDA graph
    (``runner.cuda_graph``) and replayed every step: one launch instead of one per layer.

    The outputs are fixed tensors too, overwritten by the next call; the policy's weights
    must change in place (an optimizer's step, ``SharedPolicyWeights.pull``). Sampling
    draws from the device's default generator, which a graph advances on every replay."""

    def __init__(
        self, policy: ActorCritic, obs: torch.Tensor, precision: str, device: torch.device
    ) -> None:
        self.policy, self.obs, self.precision, self.device = policy, obs, precision, device
        self.outputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
        self.call = GraphedCall(self._act, device)

    def _act(self) -> None:
        with act_precision(self.precision, self.device, cache=False):
            result = self.policy.act(self.obs)
        if self.outputs is None:  # the first call (eager) makes the fixed outputs
            self.outputs = tuple(torch.empty_like(x) for x in result)  # type: ignore[assignment]
        for out, x in zip(self.outputs, result, strict=True):  # type: ignore[arg-type]
            out.copy_(x)

    def __call__(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        self.call()
        assert self.outputs is not None
        return self.outputs


class RolloutCollector:
    """Owns the acting side of a vector env: its current observations and the policy copy.

    ``next_obs_N`` always holds the observations the next step acts on; it lives on the
    policy's device and survives between rollouts, so consecutive rollouts continue the same
    episodes.
    """

    def __init__(
        self,
        envs: VectorEnv,
        policy: ActorCritic,
        device: torch.device,
        precision: str,
        first_obs: np.ndarray,
        *,
        pin_memory: bool = False,
        on_worker_error: WorkerErrorHandler | None = None,
        threads: int | None = None,
        graphed: bool = False,
    ) -> None:
        self.envs = envs
        self.policy = policy
        self.device = device
        self.precision = precision
        self.on_worker_error = on_worker_error
        # torch intra-op threads while acting (None: the process's setting). A batch of a few
        # frames gains little from more threads, and their OpenMP spin after every forward
        # can take cores that a C++ engine's threads step on.
        self.threads = threads
        obs = torch.from_numpy(first_obs)
        self.next_obs_N = torch.empty(
            obs.shape, dtype=obs.dtype, device=device, pin_memory=pin_memory
        )
        self.next_obs_N.copy_(obs)
        self.recorded = (
            RecordedActing(policy, self.next_obs_N, precision, device) if graphed else None
        )
        """``runner.cuda_graph``: the acting forward, recorded (None: called eagerly)."""
        self.next_parity_N = torch.full((first_obs.shape[0],), -1, dtype=torch.int8)
        """Frame parity of the game each of ``next_obs_N`` belongs to (-1: not known, as
        before the first step: resets do not report it)."""

    def act(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(actions, logprobs, values) for ``next_obs_N``."""
        if self.recorded is not None:
            return self.recorded()
        with act_precision(self.precision, self.device):
            return self.policy.act(self.next_obs_N)

    def collect(self, buf: Rollout, timer: PhaseTimer) -> list[EpisodeEnd]:
        """Fill ``buf`` (T steps of every env) and return the true games that ended meanwhile.

        ``buf.next_obs_N`` may be this collector's own ``next_obs_N`` (no copy) or a separate
        buffer that receives a copy of it.
        """
        with intra_op_threads(self.threads):
            episodes = self._collect(buf, timer)
        if buf.next_obs_N is not self.next_obs_N:
            buf.next_obs_N.copy_(self.next_obs_N)
        return episodes

    def _collect(self, buf: Rollout, timer: PhaseTimer) -> list[EpisodeEnd]:
        episodes: list[EpisodeEnd] = []
        buf.truncation_values_TN.zero_()
        for t in range(buf.num_steps):
            buf.obs_TN[t].copy_(self.next_obs_N)
            if buf.frame_parity_TN is not None:
                buf.frame_parity_TN[t] = self.next_parity_N
            with timer.phase("policy_forward"):
                # The policy's own copy of the frames: the buffer may live elsewhere (an
                # actor process acting on a GPU fills a rollout slot in host shared memory).
                actions, logprobs, values = self.act()
            buf.actions_TN[t] = actions
            buf.logprobs_TN[t] = logprobs
            buf.values_TN[t] = values
            with timer.phase("env_step"):
                try:
                    result = self.envs.step(actions.cpu().numpy())
                except WorkerError as exc:
                    if self.on_worker_error is None:
                        raise
                    self.next_obs_N.copy_(torch.from_numpy(self.on_worker_error(exc, t, buf)))
                    continue
            self._record_step(buf, t, result)
            episodes += result.episodes
        return episodes

    def _record_step(self, buf: Rollout, t: int, result: VecStep) -> None:
        self.next_obs_N.copy_(torch.from_numpy(result.obs))
        if result.frame_parity is not None:
            self.next_parity_N.copy_(torch.from_numpy(result.frame_parity))
        buf.rewards_TN[t] = torch.from_numpy(result.rewards)
        buf.dones_TN[t] = torch.from_numpy(result.terminations | result.truncations)
        if result.final_obs:  # rare: a step limit cut an episode
            index = list(result.final_obs)
            final = np.stack([result.final_obs[i] for i in index])
            with torch.no_grad(), act_precision(self.precision, self.device):
                values = self.policy.value(torch.from_numpy(final).to(self.device)).float()
            buf.truncation_values_TN[t, index] = values.to(buf.truncation_values_TN.device)
