"""The in-process synchronous runner: one process steps all envs, acts, and learns.

The simplest architecture and the reference the others are measured against: no copies
between processes, no policy lag, fully deterministic for a fixed seed (the basis of the
resume-equivalence test). Acting and learning alternate, so one always waits for the other.
"""

from __future__ import annotations

import copy
import warnings
from typing import Any

import numpy as np
import torch

from rlperf.config.schema import RunnerConfig
from rlperf.core.optim import LocalGradientStep
from rlperf.core.protocols import Algorithm
from rlperf.core.types import Rollout
from rlperf.envs.base import EpisodeEnd
from rlperf.envs.vector import SyncVectorEnv
from rlperf.telemetry.timers import PhaseTimer


class InProcRunner:
    """Steps a :class:`SyncVectorEnv` and keeps the rollout in preallocated tensors."""

    name = "inproc"

    def __init__(
        self, cfg: RunnerConfig, envs: SyncVectorEnv, algo: Algorithm, *, seed: int
    ) -> None:
        self.cfg = cfg
        self.envs = envs
        self.learner_device = torch.device(cfg.learner_device)
        self.actor_device = torch.device(cfg.actor_device)
        self.learner = algo.policy.to(self.learner_device)
        if cfg.channels_last:
            # 4-D conv weights become NHWC; oneDNN/cuDNN then keep activations NHWC too.
            self.learner.to(memory_format=torch.channels_last)
        # One network when acting and learning share a device; otherwise an acting copy
        # that sync_weights refreshes after each update.
        self.actor = (
            self.learner
            if self.actor_device == self.learner_device
            else copy.deepcopy(self.learner).to(self.actor_device)
        )

        T, N = algo.data_spec.horizon, envs.num_envs
        space = envs.single_observation_space
        obs_dtype = torch.from_numpy(np.zeros((), dtype=space.dtype)).dtype
        pin = self.learner_device.type == "cuda" and self.actor_device.type == "cpu"
        dev = self.actor_device

        def alloc(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
            # Pinned host memory makes the host-to-GPU copy in load() asynchronous.
            return torch.zeros(shape, dtype=dtype, device=dev, pin_memory=pin)

        self.obs_TN = alloc((T, N, *space.shape), obs_dtype)
        self.actions_TN = alloc((T, N), torch.int64)
        self.logprobs_TN = alloc((T, N), torch.float32)
        self.values_TN = alloc((T, N), torch.float32)
        self.rewards_TN = alloc((T, N), torch.float32)
        self.dones_TN = alloc((T, N), torch.float32)
        self.next_obs_N = alloc((N, *space.shape), obs_dtype)
        self.next_obs_N.copy_(torch.from_numpy(envs.reset(seed)))

    def make_gradient_step(self, algo: Algorithm) -> LocalGradientStep:
        return LocalGradientStep(
            algo.policy,
            algo.optimizer_spec(),
            device=self.learner_device,
            precision=self.cfg.precision,
        )

    def collect(self, timer: PhaseTimer) -> tuple[Rollout, list[EpisodeEnd]]:
        episodes: list[EpisodeEnd] = []
        for t in range(self.obs_TN.shape[0]):
            obs = self.obs_TN[t]
            obs.copy_(self.next_obs_N)
            with timer.phase("policy_forward"):
                actions, logprobs, values = self.actor.act(obs)
            self.actions_TN[t] = actions
            self.logprobs_TN[t] = logprobs
            self.values_TN[t] = values
            with timer.phase("env_step"):
                result = self.envs.step(actions.cpu().numpy())
            self.next_obs_N.copy_(torch.from_numpy(result.obs))
            self.rewards_TN[t] = torch.from_numpy(result.rewards)
            self.dones_TN[t] = torch.from_numpy(result.terminations | result.truncations)
            episodes += result.episodes
        rollout = Rollout(
            obs_TN=self.obs_TN,
            actions_TN=self.actions_TN,
            logprobs_TN=self.logprobs_TN,
            values_TN=self.values_TN,
            rewards_TN=self.rewards_TN,
            dones_TN=self.dones_TN,
            next_obs_N=self.next_obs_N,
        )
        return rollout, episodes

    def load(self, batch: Rollout) -> Rollout:
        return batch.to(self.learner_device, non_blocking=True)

    def sync_weights(self) -> None:
        if self.actor is not self.learner:
            # Blocking copies: a non-blocking device-to-host copy could still be in flight
            # when the next collect() reads the actor's weights.
            with torch.no_grad():
                for dst, src in zip(
                    self.actor.parameters(), self.learner.parameters(), strict=True
                ):
                    dst.copy_(src)

    def state_dict(self) -> dict[str, Any]:
        try:
            envs: list[Any] | None = self.envs.get_state()
        except NotImplementedError:
            envs = None  # an env without exact snapshots: a resume restarts the episodes
        return {"envs": envs, "next_obs": self.next_obs_N}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["envs"] is None:
            warnings.warn(
                "the checkpoint holds no env snapshot (this env cannot be snapshotted): "
                "episodes restart on resume, so the run is not bit-identical to an uninterrupted one",
                stacklevel=2,
            )
        else:
            self.envs.set_state(state["envs"])
            self.next_obs_N.copy_(state["next_obs"])
        self.sync_weights()

    def close(self) -> None:
        self.envs.close()
