"""The transitions runner (DQN): env steps and gradient steps interleaved, in one process.

An off-policy algorithm declares ``DataSpec(kind="transitions")`` with a replay size, a
batch size, ``train_frequency`` (env steps per gradient step) and ``learning_starts``. This
runner keeps the replay buffer, steps the envs with the algorithm's behaviour policy, and
after every vector step makes the gradient steps that are due, as source 003's programs do
(one env step of N envs, one gradient step). Records would come every env step if each of
those were a session iteration, so one iteration is ``horizon`` env steps, and this runner
drives it (:meth:`TransitionsRunner.run_iteration`), timing each part in its own phase:

- ``sample``: acting (``policy_forward``), ``env_step``, ``replay_add``;
- after each vector step, the gradient steps it made due: the replay sampled onto the
  learner's device (``load``), the algorithm's update through the session's learner
  (``learn``), the acting weights refreshed (``update``). The iteration ends with one such
  update even when none is due, so the algorithm's schedules (target syncs, epsilon) and
  metrics follow every iteration.

The replay buffer is not checkpointed (0.7 GB for 003's Pong): a resumed run refills
``learning_starts`` transitions with the restored policy before gradient steps resume.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np
import torch

from rlperf.buffers.replay import ReplayBuffer
from rlperf.config.schema import RunnerConfig
from rlperf.core.devices import resolve_device
from rlperf.core.errors import WorkerError
from rlperf.core.learner import Learner
from rlperf.core.protocols import OffPolicyAlgorithm
from rlperf.core.types import Transitions
from rlperf.envs.base import EpisodeEnd
from rlperf.envs.vector import VectorEnv
from rlperf.runners.base import Iteration, LocalLearner
from rlperf.telemetry.timers import PhaseTimer


class TransitionsRunner(LocalLearner):
    """Steps a vector env in this process and learns between its steps (runner ``inproc``
    with a transitions algorithm)."""

    name = "inproc"

    def __init__(
        self,
        cfg: RunnerConfig,
        envs: VectorEnv | None,
        algo: OffPolicyAlgorithm,
        *,
        num_envs: int,
        obs_space: Any,
        frame_stack: int,
        frames_per_step: float,
        seed: int,
    ) -> None:
        """``frame_stack``: frames per observation for the replay (1 unless Atari);
        ``frames_per_step``: emulator frames per env step (frameskip) for ``perf/fps``."""
        self.cfg = cfg
        self.algo = algo
        self.spec = algo.data_spec
        self.envs = envs
        self.num_envs = num_envs
        self.learner_device = resolve_device(cfg.learner_device)
        # Acting uses the learner's own network, so there is nothing to copy between updates.
        self.actor_device = self.learner_device
        self.learner = algo.policy.to(self.learner_device)
        if cfg.channels_last:
            self.learner.to(memory_format=torch.channels_last)
        if cfg.compile:
            # In place, as the rollout runners do (checkpoint names stay the eager module's);
            # static shapes: the acting batch and the replayed batch get a graph each. The
            # algorithm's own copies (DQN's target network) stay eager.
            self.learner.compile(dynamic=False)
        self.obs_shape = tuple(obs_space.shape)
        self.replay = ReplayBuffer(
            self.spec.buffer_size,
            num_envs,
            self.obs_shape,
            obs_space.dtype,
            frame_stack,
            seed,
            n_step=self.spec.n_step,
            gamma=self.spec.gamma,
        )
        self.frames_per_step = frames_per_step
        self.env_steps = 0
        """Env steps collected over the run (restored on resume; drives the exploration)."""
        self._since_train = 0  # env steps since the last gradient step was owed
        self._learning = False  # the replay has held learning_starts transitions
        self._gradient_steps = 0  # this iteration's
        self._collect_start = 0.0
        self._first_collect: float | None = None
        self._frames_this_process = 0
        self._iteration_frames = 0
        self._obs: np.ndarray | None = None
        if envs is not None:
            self._obs = np.array(envs.reset(seed))  # a copy: the env reuses its buffer

    # ------------------------------------------------------------------ producing

    def _produce(self, timer: PhaseTimer) -> tuple[int, list[EpisodeEnd]]:
        """One vector step of every env into the replay; returns (env steps, true games)."""
        assert self.envs is not None and self._obs is not None
        obs = torch.from_numpy(self._obs).to(self.actor_device)
        with timer.phase("policy_forward"):
            actions = self.algo.behaviour.act(obs, self.env_steps)
        actions_np = actions.numpy()
        with timer.phase("env_step"):
            result = self.envs.step(actions_np)
        with timer.phase("replay_add"):
            self.replay.add(
                self._obs,
                actions_np,
                result.rewards,
                result.terminations,
                result.truncations,
                result.final_obs,
            )
            np.copyto(self._obs, result.obs)
        return self.num_envs, result.episodes

    def _owed(self, new_steps: int) -> int:
        """Gradient steps due after ``new_steps`` more env steps: none before the replay
        holds ``learning_starts`` transitions, then one per ``train_frequency`` env steps."""
        if not self._learning:
            if len(self.replay) < max(self.spec.learning_starts, 1):
                return 0
            self._learning = True
        self._since_train += new_steps
        owed = self._since_train // self.spec.train_frequency
        self._since_train -= owed * self.spec.train_frequency
        return owed

    def _sample(self, gradient_steps: int) -> Transitions:
        """Replay samples for ``gradient_steps`` steps of ``batch_size`` each (G may be 0),
        on the learner's device."""
        G, B = gradient_steps, self.spec.batch_size
        if G == 0:
            empty = torch.empty((0, B, *self.obs_shape), dtype=self._obs_dtype())
            zeros = torch.empty((0, B))
            batch = Transitions(empty, zeros.long(), zeros, empty, zeros, zeros, self.env_steps)
        else:
            sample = self.replay.sample(G * B)
            batch = Transitions(
                *(torch.from_numpy(a).reshape(G, B, *a.shape[1:]) for a in sample),
                env_steps=self.env_steps,
            )
        return batch.to(self.learner_device, non_blocking=self.learner_device.type == "cuda")

    def _obs_dtype(self) -> torch.dtype:
        return torch.from_numpy(self.replay.frames[:0, :0]).dtype

    def _learn(
        self, learner: Learner, gradient_steps: int, produced: int, timer: PhaseTimer
    ) -> dict[str, float]:
        """``gradient_steps`` gradient steps (possibly none) after ``produced`` env steps of
        this iteration, each part in its phase."""
        with timer.phase("load"):
            batch = self._sample(gradient_steps)
        with timer.phase("learn"):
            metrics = learner.learn(batch, env_steps_ahead=produced)
        with timer.phase("update"):
            self.sync_weights()
        self._gradient_steps += gradient_steps
        return metrics

    def _begin_iteration(self) -> None:
        """Per-iteration bookkeeping of subclasses (the play/train runner's lags)."""

    # ------------------------------------------------------------------ Runner

    def run_iteration(self, learner: Learner, timer: PhaseTimer) -> Iteration:
        """``horizon`` env steps, each followed by the gradient steps it made due; the
        metrics are the newest value of each that the iteration's updates returned."""
        self._collect_start = time.perf_counter()
        if self._first_collect is None:
            self._first_collect = self._collect_start
        self._begin_iteration()
        self._gradient_steps = 0
        produced, episodes, metrics = 0, [], {}
        while True:
            with timer.phase("sample"):
                steps, ended = self._produce(timer)
            produced += steps
            self.env_steps += steps
            episodes += ended
            owed = self._owed(steps)
            if produced >= self.spec.horizon:
                break
            if owed:
                metrics.update(self._learn(learner, owed, produced, timer))
        metrics.update(self._learn(learner, owed, produced, timer))
        self._iteration_frames = produced * self.frames_per_step
        self._frames_this_process += self._iteration_frames
        return Iteration(produced, episodes, metrics)

    def sync_weights(self) -> None:
        """Nothing to do: the behaviour acts with the learner's network."""

    def worker_metrics(self) -> dict[str, float]:
        now = time.perf_counter()
        seconds = now - self._collect_start
        total = now - (self._first_collect or now)
        return {
            "perf/gradient_steps": float(self._gradient_steps),
            "perf/replay_transitions": float(len(self.replay)),
            # frames = env steps x frameskip (003's FPS); SPS counts env steps.
            "perf/fps": self._iteration_frames / seconds if seconds > 0 else 0.0,
            "perf/avg_fps": self._frames_this_process / total if total > 0 else 0.0,
        }

    def process_resources(self) -> list[dict[str, Any]]:
        return []

    def state_dict(self) -> dict[str, Any]:
        envs: list[Any] | None = None
        if self.envs is not None:
            try:
                envs = self.envs.get_state()
            except (NotImplementedError, WorkerError):
                envs = None  # a resume restarts the episodes
        return {"envs": envs, "env_steps": self.env_steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.env_steps = int(state["env_steps"])
        if state["envs"] is not None and self.envs is not None:
            np.copyto(self._obs, self.envs.set_state(state["envs"]))  # type: ignore[arg-type]
        print(
            f"rlperf: the replay buffer is not checkpointed: {self.spec.learning_starts} "
            "transitions are collected with the restored policy before gradient steps resume",
            file=sys.stderr,
            flush=True,
        )

    def close(self) -> None:
        if self.envs is not None:
            self.envs.close()
