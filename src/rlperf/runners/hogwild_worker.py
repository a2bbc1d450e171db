"""The processes of the hogwild runner: learning workers and the greedy evaluator.

Protocol over each process's own pipe (small messages only; weights live in shared memory):

- driver -> process: ``("start",)`` once the driver is ready (after a resume has loaded the
  shared weights), ``("stop",)``.
- worker -> driver: ``("hello", resources)`` after start-up, ``("segment", SegmentReport)``
  after each gradient step, ``("error", message, traceback)`` before exiting on an exception.
- evaluator -> driver: ``("hello", resources)``, ``("eval", return, length)`` per episode.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection

import numpy as np
import torch

from rlperf.core.protocols import Algorithm
from rlperf.core.shared_optim import HogwildGradientStep, SharedOptimizer
from rlperf.core.types import Progress, Rollout
from rlperf.envs.base import EpisodeEnd
from rlperf.envs.vector import VectorEnv
from rlperf.models.recurrent import RecurrentActorCritic, RecurrentRollout, reset_ended
from rlperf.runners.child import ProcessStart, run_child, say_hello
from rlperf.runners.collector import RolloutCollector
from rlperf.telemetry.timers import PhaseTimer

SEGMENT_PHASES = ("sync", "sample", "learn", "env_step", "policy_forward")
"""Worker-side seconds in each report: ``sync`` (local copy from the shared model),
``sample`` (acting and env steps; ``env_step`` and ``policy_forward`` inside it),
``learn`` (loss, backward and the shared optimizer step)."""


@dataclass
class WorkerSetup:
    """Everything a hogwild process needs, pickled once when it is spawned."""

    index: int
    first_env: int
    """Index of the worker's first env among the run's envs (for episode reports)."""
    make_envs: Callable[[], VectorEnv]
    env_seed: int
    start: ProcessStart
    algo: Algorithm
    """The algorithm; its ``policy`` is the shared model (its tensors in shared memory)."""
    optimizer: SharedOptimizer | None
    """The shared optimizer (None for the evaluator, which never updates the model)."""
    eval_interval_s: float = 0.0


@dataclass
class SegmentReport:
    """What a worker says after each gradient step it applied."""

    worker: int
    steps: int
    """Env steps of the segment (num_local_steps x the worker's envs)."""
    episodes: list[EpisodeEnd]
    """True games that ended, with env indices among the run's envs."""
    metrics: dict[str, float]
    seconds: dict[str, float] = field(default_factory=dict)


def worker_main(setup: WorkerSetup, conn: Connection) -> None:
    """Entry point of a learning worker."""
    run_child(_learn, setup, conn)


def evaluator_main(setup: WorkerSetup, conn: Connection) -> None:
    """Entry point of the greedy evaluation process."""
    run_child(_evaluate, setup, conn)


def _empty_rollout(envs: VectorEnv, horizon: int) -> Rollout:
    n = envs.num_envs
    space = envs.single_observation_space
    obs_dtype = torch.from_numpy(np.zeros((), dtype=space.dtype)).dtype
    return Rollout.allocate(horizon, n, space.shape, obs_dtype)


class RecurrentCollector:
    """The acting loop of a recurrent policy: step by step with the LSTM state, which is
    zeroed when an env's episode ends and carried over from one segment to the next."""

    def __init__(
        self, envs: VectorEnv, policy: RecurrentActorCritic, first_obs: np.ndarray
    ) -> None:
        self.envs = envs
        self.policy = policy
        self.next_obs_N = torch.from_numpy(first_obs).clone()
        self.state = policy.initial_state(envs.num_envs)

    def collect(self, buf: RecurrentRollout, timer: PhaseTimer) -> list[EpisodeEnd]:
        buf.initial_h_N, buf.initial_c_N = (s.clone() for s in self.state)
        buf.truncation_values_TN.zero_()
        episodes: list[EpisodeEnd] = []
        for t in range(buf.num_steps):
            buf.obs_TN[t].copy_(self.next_obs_N)
            with timer.phase("policy_forward"):
                actions, logprobs, values, state = self.policy.act_step(buf.obs_TN[t], self.state)
            buf.actions_TN[t], buf.logprobs_TN[t], buf.values_TN[t] = actions, logprobs, values
            with timer.phase("env_step"):
                result = self.envs.step(actions.numpy())
            self.next_obs_N.copy_(torch.from_numpy(result.obs))
            dones = torch.from_numpy(result.terminations | result.truncations)
            buf.rewards_TN[t] = torch.from_numpy(result.rewards)
            buf.dones_TN[t] = dones
            for i, final in result.final_obs.items():  # a step limit cut the episode
                with torch.no_grad():
                    buf.truncation_values_TN[t, i] = self.policy.value_from(
                        torch.from_numpy(final).unsqueeze(0),
                        (state[0][i : i + 1], state[1][i : i + 1]),
                    )[0]
            self.state = reset_ended(state, dones)
            episodes += result.episodes
        buf.next_obs_N.copy_(self.next_obs_N)
        buf.final_h_N, buf.final_c_N = (s.clone() for s in self.state)
        return episodes


def _wait_for_start(conn: Connection) -> bool:
    while True:
        message = conn.recv()
        if message[0] == "start":
            return True
        if message[0] == "stop":
            return False


def _learn(setup: WorkerSetup, conn: Connection) -> None:
    algo = setup.algo
    shared = algo.policy
    local = copy.deepcopy(shared)  # private memory: the segment's forward and backward
    algo.policy = local
    assert setup.optimizer is not None
    step = HogwildGradientStep(local, shared, setup.optimizer, owns_learning_rate=False)
    envs = setup.make_envs()
    try:
        say_hello(conn, "worker", setup.index, "cpu")
        if not _wait_for_start(conn):
            return
        step.sync_local()
        first_obs = envs.reset(setup.env_seed)
        buf = _empty_rollout(envs, algo.data_spec.horizon)
        collector: RolloutCollector | RecurrentCollector
        if getattr(local, "is_recurrent", False):
            collector = RecurrentCollector(envs, local, first_obs)  # type: ignore[arg-type]
            fields = {f.name: getattr(buf, f.name) for f in dataclasses.fields(Rollout)}
            buf = RecurrentRollout(**fields)
        else:
            collector = RolloutCollector(envs, local, torch.device("cpu"), "fp32", first_obs)
            buf.next_obs_N = collector.next_obs_N  # no copy: the collector keeps it current
        timer = PhaseTimer()
        segments = env_steps = 0
        while not conn.poll() or conn.recv()[0] != "stop":
            # ---- 002's loop: sync from the shared model, play a segment, apply its gradient ----
            with timer.phase("sync"):
                step.sync_local()
            with timer.phase("sample"):
                episodes = collector.collect(buf, timer)
            with timer.phase("learn"):
                metrics = algo.update(buf, step, Progress(segments, env_steps, 1.0))
            steps = buf.num_steps * buf.num_envs
            segments += 1
            env_steps += steps
            seconds = timer.lap()
            report = SegmentReport(
                worker=setup.index,
                steps=steps,
                episodes=[
                    dataclasses.replace(e, env_index=e.env_index + setup.first_env)
                    for e in episodes
                ],
                metrics=metrics,
                seconds={k: seconds.get(k, 0.0) for k in SEGMENT_PHASES},
            )
            conn.send(("segment", report))
    finally:
        envs.close()


def _evaluate(setup: WorkerSetup, conn: Connection) -> None:
    """002's local_test: greedy episodes with the shared model's current weights; never
    computes a gradient or writes the shared model."""
    shared = setup.algo.policy
    local = copy.deepcopy(shared)
    envs = setup.make_envs()
    try:
        say_hello(conn, "evaluator", setup.index, "cpu")
        if not _wait_for_start(conn):
            return
        obs = envs.reset(setup.env_seed)
        recurrent = getattr(local, "is_recurrent", False)
        while True:
            local.load_state_dict(shared.state_dict())  # the latest weights for each episode
            state = local.initial_state(1) if recurrent else None
            done = False
            while not done:
                with torch.no_grad():
                    if recurrent:
                        actions, _, _, state = local.act_step(torch.from_numpy(obs), state, True)
                    else:
                        actions, _, _ = local.act(torch.from_numpy(obs), deterministic=True)
                result = envs.step(actions.numpy())
                obs = result.obs
                for e in result.episodes:
                    conn.send(("eval", e.episode_return, e.length))
                    done = True
            if conn.poll(setup.eval_interval_s) and conn.recv()[0] == "stop":
                return
    finally:
        envs.close()
