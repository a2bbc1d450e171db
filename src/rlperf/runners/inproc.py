"""The in-process synchronous runner: one process steps all envs, acts, and learns.

The simplest architecture and the reference the others are measured against: no copies
between processes, no policy lag, fully deterministic for a fixed seed (the basis of the
resume-equivalence test). Acting and learning alternate, so one always waits for the other.
"""

from __future__ import annotations

import copy
import warnings
from typing import Any, ClassVar

import numpy as np
import torch

from rlperf.config.schema import RunnerConfig
from rlperf.core.devices import resolve_device
from rlperf.core.errors import WorkerError
from rlperf.core.protocols import Algorithm
from rlperf.core.types import Rollout
from rlperf.envs.base import EpisodeEnd
from rlperf.envs.facts import ENGINES
from rlperf.envs.vector import VectorEnv
from rlperf.runners.base import LocalLearner, RolloutDriver
from rlperf.runners.collector import RolloutCollector
from rlperf.runners.facts import RunnerFacts
from rlperf.telemetry.timers import PhaseTimer


class InProcRunner(LocalLearner, RolloutDriver):
    """Steps a vector env and learns in turns, keeping the rollout in preallocated tensors.

    The vector env may step its games in this process (SyncVectorEnv), in a C++ thread pool
    (EnvPool, ALE's vector env) or in worker processes (:class:`SubprocRunner`); acting and
    learning always happen here, one after the other.
    """

    name = "inproc"
    facts: ClassVar[RunnerFacts] = RunnerFacts(
        frozenset({"rollout", "transitions"}),
        0,
        ENGINES,
        builds_own_envs=False,
        data_parallel=True,
        compile=True,
        rnd=True,
        # DQN's transitions are played by the network being trained, between its steps
        # (TransitionsRunner, the same runner name for transitions algorithms)
        acts_on_learner_device=frozenset({"transitions"}),
    )
    """Rollouts, or (DQN) transitions interleaved with gradient steps, in one process."""

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
        if cfg.compile:
            # In place, so parameter names (checkpoints) stay those of the eager module. Shapes
            # are static: acting and learning batches get one graph each.
            self.learner.compile(dynamic=False)

        T, N = algo.data_spec.horizon, envs.num_envs
        space = envs.single_observation_space
        obs_dtype = torch.from_numpy(np.zeros((), dtype=space.dtype)).dtype
        pin = self.learner_device.type == "cuda" and self.actor_device.type == "cpu"
        dev = self.actor_device

        self.collector = RolloutCollector(
            envs,
            self.actor,
            self.actor_device,
            cfg.precision,
            envs.reset(seed),
            pin_memory=pin,
            on_worker_error=self._recover,
            threads=cfg.act_threads,
            graphed=cfg.cuda_graph,
        )
        # Pinned host memory makes the host-to-GPU copy in load() asynchronous.
        rollout = Rollout.allocate(T, N, space.shape, obs_dtype, device=dev, pin_memory=pin)
        rollout.next_obs_N = self.collector.next_obs_N  # the collector's, updated in place
        self.rollout = rollout

    def collect(self, timer: PhaseTimer) -> tuple[Rollout, list[EpisodeEnd]]:
        return self.rollout, self.collector.collect(self.rollout, timer)

    def _recover(self, exc: WorkerError, t: int, buf: Rollout) -> np.ndarray:
        """Runners that can restart a failed worker do it here; by default re-raise."""
        raise exc

    def load(self, batch: Rollout) -> Rollout:
        # Asynchronous only towards a GPU (from pinned memory); a device-to-host copy must
        # be complete before the CPU reads it.
        return batch.to(self.learner_device, non_blocking=self.learner_device.type == "cuda")

    def sync_weights(self) -> None:
        if self.actor is not self.learner:
            # Blocking copies: a non-blocking device-to-host copy could still be in flight
            # when the next collect() reads the actor's weights.
            # The whole state, buffers included: an acting network may keep its
            # exploration rate in one (PQN's epsilon).
            with torch.no_grad():
                for dst, src in zip(
                    self.actor.state_dict().values(),
                    self.learner.state_dict().values(),
                    strict=True,
                ):
                    dst.copy_(src)

    def worker_metrics(self) -> dict[str, float]:
        return {}  # no worker processes

    def process_resources(self) -> list[dict[str, Any]]:
        return []

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
            obs = self.envs.set_state(state["envs"])
            self.collector.next_obs_N.copy_(torch.from_numpy(obs))
        self.sync_weights()

    def close(self) -> None:
        self.envs.close()
