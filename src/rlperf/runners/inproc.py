"""The in-process synchronous runner: one process steps all envs, acts, and learns.

The simplest architecture and the reference the others are measured against: no copies
between processes, no policy lag, fully deterministic for a fixed seed (the basis of the
resume-equivalence test). Acting and learning alternate, so one always waits for the other.
"""

from __future__ import annotations

import contextlib
import copy
import sys
import warnings
from typing import Any

import numpy as np
import torch

from rlperf.config.schema import RunnerConfig
from rlperf.core.errors import WorkerError
from rlperf.core.optim import LocalGradientStep
from rlperf.core.protocols import Algorithm
from rlperf.core.types import Rollout
from rlperf.envs.base import EpisodeEnd
from rlperf.envs.vector import VectorEnv
from rlperf.telemetry.timers import PhaseTimer


def resolve_device(name: str) -> torch.device:
    """``name`` as a torch.device with an explicit index for CUDA ("cuda" -> "cuda:0"), so
    that two spellings of one GPU compare equal."""
    device = torch.device(name)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


class InProcRunner:
    """Steps a vector env and learns in turns, keeping the rollout in preallocated tensors.

    The vector env may step its games in this process (SyncVectorEnv), in a C++ thread pool
    (EnvPool, ALE's vector env) or in worker processes (:class:`SubprocRunner`); acting and
    learning always happen here, one after the other.
    """

    name = "inproc"

    def __init__(self, cfg: RunnerConfig, envs: VectorEnv, algo: Algorithm, *, seed: int) -> None:
        self.cfg = cfg
        self.envs = envs
        self.learner_device = resolve_device(cfg.learner_device)
        self.actor_device = resolve_device(cfg.actor_device)
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
        self.truncation_values_TN = alloc((T, N), torch.float32)
        self.next_obs_N = alloc((N, *space.shape), obs_dtype)
        self.next_obs_N.copy_(torch.from_numpy(envs.reset(seed)))

    def make_gradient_step(self, algo: Algorithm) -> LocalGradientStep:
        return LocalGradientStep(
            algo.policy,
            algo.optimizer_spec(),
            device=self.learner_device,
            precision=self.cfg.precision,
        )

    def _act_precision(self) -> contextlib.AbstractContextManager[object]:
        # Acting runs at the learner's precision, so the behaviour log-probs match what the
        # learner recomputes at the same weights (ratios of exactly 1 before the first step).
        if self.cfg.precision == "bf16":
            return torch.autocast(device_type=self.actor_device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def collect(self, timer: PhaseTimer) -> tuple[Rollout, list[EpisodeEnd]]:
        episodes: list[EpisodeEnd] = []
        self.truncation_values_TN.zero_()
        for t in range(self.obs_TN.shape[0]):
            obs = self.obs_TN[t]
            obs.copy_(self.next_obs_N)
            with timer.phase("policy_forward"), self._act_precision():
                actions, logprobs, values = self.actor.act(obs)
            self.actions_TN[t] = actions
            self.logprobs_TN[t] = logprobs
            self.values_TN[t] = values
            with timer.phase("env_step"):
                try:
                    result = self.envs.step(actions.cpu().numpy())
                except WorkerError as exc:
                    self._recover(exc, t)  # re-raises when no restart is allowed
                    continue
            self.next_obs_N.copy_(torch.from_numpy(result.obs))
            self.rewards_TN[t] = torch.from_numpy(result.rewards)
            self.dones_TN[t] = torch.from_numpy(result.terminations | result.truncations)
            if result.final_obs:  # rare: a step limit cut an episode
                self._value_truncated(t, result.final_obs)
            episodes += result.episodes
        rollout = Rollout(
            obs_TN=self.obs_TN,
            actions_TN=self.actions_TN,
            logprobs_TN=self.logprobs_TN,
            values_TN=self.values_TN,
            rewards_TN=self.rewards_TN,
            dones_TN=self.dones_TN,
            next_obs_N=self.next_obs_N,
            truncation_values_TN=self.truncation_values_TN,
        )
        return rollout, episodes

    def _recover(self, exc: WorkerError, t: int) -> None:
        """Runners that can restart a failed worker do it here; by default re-raise."""
        raise exc

    def _value_truncated(self, t: int, final_obs: dict[int, np.ndarray]) -> None:
        index = list(final_obs)
        obs = torch.from_numpy(np.stack([final_obs[i] for i in index])).to(self.actor_device)
        with torch.no_grad(), self._act_precision():
            values = self.actor.value(obs).float()
        self.truncation_values_TN[t, index] = values.to(self.truncation_values_TN.device)

    def load(self, batch: Rollout) -> Rollout:
        # Asynchronous only towards a GPU (from pinned memory); a device-to-host copy must
        # be complete before the CPU reads it.
        return batch.to(self.learner_device, non_blocking=self.learner_device.type == "cuda")

    def sync_weights(self) -> None:
        if self.actor is not self.learner:
            # Blocking copies: a non-blocking device-to-host copy could still be in flight
            # when the next collect() reads the actor's weights.
            with torch.no_grad():
                for dst, src in zip(
                    self.actor.parameters(), self.learner.parameters(), strict=True
                ):
                    dst.copy_(src)

    def worker_metrics(self) -> dict[str, float]:
        return {}  # no worker processes

    def state_dict(self) -> dict[str, Any]:
        try:
            envs: list[Any] | None = self.envs.get_state()
        except (NotImplementedError, WorkerError):
            # An env without exact snapshots, or workers that failed: a resume restarts the
            # episodes.
            envs = None
        return {"envs": envs}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["envs"] is None:
            warnings.warn(
                "the checkpoint holds no env snapshot (this env cannot be snapshotted): "
                "episodes restart on resume, so the run is not bit-identical to an uninterrupted one",
                stacklevel=2,
            )
        else:
            self.next_obs_N.copy_(torch.from_numpy(self.envs.set_state(state["envs"])))
        self.sync_weights()

    def close(self) -> None:
        self.envs.close()


class SubprocRunner(InProcRunner):
    """The synchronous runner over envs stepped in worker processes (``SubprocVectorEnv``).

    Observations land in shared memory that the rollout copies once; the workers emulate
    while this process waits, so it pays off when env stepping, not learning, dominates.
    """

    name = "subprocess"

    def __init__(self, cfg: RunnerConfig, envs: VectorEnv, algo: Algorithm, *, seed: int) -> None:
        super().__init__(cfg, envs, algo, seed=seed)
        self.seed = seed
        self.worker_restarts = 0
        """Failed env workers restarted so far in the run (``sys/worker_restarts``)."""

    def _recover(self, exc: WorkerError, t: int) -> None:
        """Restart the failed worker (runner.restart_failed_workers) and end step ``t``.

        The step that failed is treated as ended for EVERY env: reward 0 and done 1 at
        ``t`` (no bootstrap across it), and the next observations are the current buffer:
        the restarted worker's envs start new episodes, the others continue from where their
        completed (but discarded) step left them. Cost: one lost transition per env, and the
        episode ends reported by that step are not counted. The restart seed,
        ``seed + restarts * num_envs``, gives every restart its own env seeds.
        """
        w = getattr(exc, "worker_index", None)
        cfg = self.cfg
        if (
            w is None
            or not cfg.restart_failed_workers
            or self.worker_restarts >= cfg.max_worker_restarts
        ):
            raise exc
        self.worker_restarts += 1
        print(
            f"rlperf: restarting env worker {w} (restart {self.worker_restarts} of at most "
            f"{cfg.max_worker_restarts}) after: {exc}",
            file=sys.stderr,
            flush=True,
        )
        seed = self.seed + self.worker_restarts * self.envs.num_envs
        obs = self.envs.restart_worker(w, seed=seed)  # type: ignore[attr-defined]
        self.next_obs_N.copy_(torch.from_numpy(obs))
        self.rewards_TN[t] = 0.0
        self.dones_TN[t] = 1.0
        self.truncation_values_TN[t] = 0.0

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "worker_restarts": self.worker_restarts}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        # The restart budget is per run, so it carries over a resume (absent: older runs).
        self.worker_restarts = int(state.get("worker_restarts", 0))
        super().load_state_dict(state)

    def worker_metrics(self) -> dict[str, float]:
        return {
            "sys/live_workers": float(self.envs.live_workers),  # type: ignore[attr-defined]
            "sys/worker_restarts": float(self.worker_restarts),
        }
