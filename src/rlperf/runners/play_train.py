"""The play/train runner (DQN): a play process steps the envs while this process trains.

Source 003's third rung ("play and train in separate processes"): acting and env stepping
move to a play process with its own copy of the network, and the training process only
adds transitions to the replay and makes gradient steps, so the two overlap.

- The play process acts with the algorithm's behaviour policy (epsilon-greedy) on a copy
  of the network that it refreshes from :class:`SharedPolicyWeights` (the decoupled
  runner's seqlock) before every chunk; the trainer publishes after its gradient steps.
- Transitions travel through a bounded queue: ``play_queue_chunks`` chunks of
  ``play_chunk_steps`` vector steps in shared memory (:class:`TransitionChunks`). The play
  process fills a free chunk, sends ``("full", RolloutReport)`` over its pipe, and waits when
  no chunk is free: the trainer gives a chunk back (``("free", chunk)``) once it has copied
  it into the replay, so data is never overwritten while being read.
- The trainer's iteration takes chunks in order, adds them to the replay and makes the
  gradient steps they make due (``train_frequency``), exactly as the in-process runner
  does after each vector step (:class:`~rlperf.runners.transitions.TransitionsRunner`).

The play process is spawned, dies with its parent (``PR_SET_PDEATHSIG``), ignores SIGINT
(the session stops it), reports exceptions with their traceback, and is restarted with
fresh env seeds (``runner.restart_failed_workers``) or stops the run cleanly. Env
snapshots are not kept (the play process runs ahead of the trainer): a resumed run starts
new episodes, and, as with every transitions runner, refills the replay.

One file although long: the play process's loop and the trainer's side speak one chunk
protocol, and are changed together.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, ClassVar

import numpy as np
import torch

from rlperf.config.schema import RunnerConfig
from rlperf.core.devices import resolve_device
from rlperf.core.errors import ActorError
from rlperf.core.protocols import Behaviour, OffPolicyAlgorithm
from rlperf.envs.base import EpisodeEnd
from rlperf.envs.facts import ENGINES
from rlperf.envs.vector import VectorEnv
from rlperf.runners.child import (
    ProcessStart,
    RolloutReport,
    run_child,
    say_hello,
    wait_for_free_slot,
)
from rlperf.runners.env_slice import EnvSlice, EnvSliceFactory
from rlperf.runners.facts import RunnerFacts
from rlperf.runners.shared_memory import SharedPolicyWeights
from rlperf.runners.supervisor import Supervisor, Worker
from rlperf.runners.transitions import TransitionsRunner
from rlperf.telemetry.timers import PhaseTimer

_RESTART = None
"""A marker in the queue of finished chunks: the play process was restarted here, so the
episodes of the chunks before it do not continue into those after it."""


def _play_error(message: str, play: Worker | None, worker_traceback: str | None) -> ActorError:
    return ActorError(message, worker_index=0, worker_traceback=worker_traceback)


class TransitionChunks:
    """``num_chunks`` chunks of T vector steps of N envs in shared memory (a bounded queue).

    ``final_obs`` holds the final observation of an episode cut by a step limit, where
    ``truncated`` is set.
    """

    def __init__(
        self,
        num_chunks: int,
        num_steps: int,
        num_envs: int,
        obs_shape: tuple[int, ...],
        obs_dtype: torch.dtype,
    ) -> None:
        S, T, N = num_chunks, num_steps, num_envs

        def alloc(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
            return torch.zeros(shape, dtype=dtype).share_memory_()

        self.num_steps = num_steps
        self.obs = alloc((S, T, N, *obs_shape), obs_dtype)
        self.final_obs = alloc((S, T, N, *obs_shape), obs_dtype)
        self.actions = alloc((S, T, N), torch.int64)
        self.rewards = alloc((S, T, N), torch.float32)
        self.terminated = alloc((S, T, N), torch.bool)
        self.truncated = alloc((S, T, N), torch.bool)


@dataclass
class PlaySetup:
    """Everything the play process needs, pickled once when it is spawned."""

    make_envs: Callable[[], VectorEnv]
    env_seed: int
    behaviour: Behaviour
    """A copy of the algorithm's behaviour policy with its own network."""
    device: str
    channels_last: bool
    start: ProcessStart
    chunks: TransitionChunks
    chunk_ids: list[int]
    """The chunks the play process may fill at start (the trainer returns them one by one)."""
    weights: SharedPolicyWeights


# ---------------------------------------------------------------- the play process


def play_main(setup: PlaySetup, conn: Connection) -> None:
    """Entry point of the play process.

    Protocol over its pipe: trainer -> play ``("start", env_steps)`` once the first weights
    are published, ``("free", chunk)``, ``("stop",)``; play -> trainer ``("hello",
    resources)``, ``("full", RolloutReport)``, ``("error", message, traceback)``.
    """
    run_child(_play, setup, conn)


def _play(setup: PlaySetup, conn: Connection) -> None:
    device = torch.device(setup.device)
    envs = setup.make_envs()
    try:
        behaviour = setup.behaviour
        network = behaviour.network.to(device)
        if setup.channels_last:
            network.to(memory_format=torch.channels_last)
        say_hello(conn, "play", 0, setup.device)
        free = deque(setup.chunk_ids)
        while True:
            message = conn.recv()
            if message[0] == "stop":
                return
            if message[0] == "free":
                free.append(message[1])
            elif message[0] == "start":
                env_steps = int(message[1])
                break
        chunks, n = setup.chunks, envs.num_envs
        obs = np.array(envs.reset(setup.env_seed))
        version, timer = -1, PhaseTimer()
        while True:
            with timer.phase("slot_wait"):
                if not wait_for_free_slot(conn, free):
                    return
            c = free.popleft()
            with timer.phase("weight_sync"):
                version = setup.weights.pull(network, version)
            episodes: list[EpisodeEnd] = []
            for t in range(chunks.num_steps):
                with timer.phase("policy_forward"):
                    actions = behaviour.act(torch.from_numpy(obs).to(device), env_steps)
                with timer.phase("env_step"):
                    result = envs.step(actions.numpy())
                chunks.obs[c, t] = torch.from_numpy(obs)
                chunks.actions[c, t] = actions
                chunks.rewards[c, t] = torch.from_numpy(result.rewards)
                chunks.terminated[c, t] = torch.from_numpy(result.terminations)
                chunks.truncated[c, t] = torch.from_numpy(result.truncations)
                for i, final in result.final_obs.items():
                    chunks.final_obs[c, t, i] = torch.from_numpy(final)
                np.copyto(obs, result.obs)
                env_steps += n
                episodes += result.episodes
            seconds = timer.lap()
            keys = ("env_step", "policy_forward", "weight_sync", "slot_wait")
            report = RolloutReport(c, version, episodes, {k: seconds.get(k, 0.0) for k in keys})
            conn.send(("full", report))
    finally:
        envs.close()


# ---------------------------------------------------------------- the trainer side


class PlayTrainRunner(TransitionsRunner):
    """A play process acting and stepping the envs; this process replays and learns."""

    name = "play-train"
    # the play process acts with the weights of its last pull, updates behind the trainer
    facts: ClassVar[RunnerFacts] = RunnerFacts(
        frozenset({"transitions"}), 1, ENGINES, True, max_workers=1
    )

    def __init__(
        self,
        cfg: RunnerConfig,
        algo: OffPolicyAlgorithm,
        *,
        num_envs: int,
        obs_space: Any,
        frame_stack: int,
        frames_per_step: float,
        make_env_slice: EnvSliceFactory,
        seed: int,
    ) -> None:
        # runner.torch_threads unset keeps torch's default (every core) for the trainer,
        # unlike the decoupled runner's "cores the actors leave": DQN's trainer is the
        # bottleneck, so the play process mostly waits on a full queue, and the idle core is
        # worth more to the trainer (Pong on 2 vCPUs, one measurement: 294 vs 194 FPS).
        super().__init__(
            cfg,
            None,
            algo,
            num_envs=num_envs,
            obs_space=obs_space,
            frame_stack=frame_stack,
            frames_per_step=frames_per_step,
            seed=seed,
        )
        self.actor_device = resolve_device(cfg.actor_device)
        self.make_env_slice = make_env_slice
        self.seed = seed
        obs_dtype = torch.from_numpy(np.zeros((), dtype=obs_space.dtype)).dtype
        self.chunks = TransitionChunks(
            cfg.play_queue_chunks, cfg.play_chunk_steps, num_envs, self.obs_shape, obs_dtype
        )
        self.weights = SharedPolicyWeights(self.learner)
        self._ready: deque[RolloutReport | None] = deque()  # filled chunks not consumed yet
        self._lags: list[int] = []
        self._play_busy = 0.0  # play-side busy seconds of this iteration's chunks
        self.workers = Supervisor(
            cfg,
            describe=self._describe,
            make_error=_play_error,
            on_message=self._on_message,
            respawn=self._respawn,
            silence="no transitions from the play process",
        )
        try:
            self._spawn(list(range(cfg.play_queue_chunks)), seed_offset=0)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ the play process

    def _spawn(self, chunk_ids: list[int], seed_offset: int) -> None:
        env_seed = self.seed + seed_offset
        # A copy whose network the play process owns; the original keeps acting for nobody.
        behaviour = copy.deepcopy(self.algo.behaviour)
        setup = PlaySetup(
            make_envs=EnvSlice(self.make_env_slice, self.num_envs, env_seed, 0),
            env_seed=env_seed,
            behaviour=behaviour,
            device=str(self.actor_device),
            channels_last=self.cfg.channels_last,
            start=ProcessStart(self.cfg.actor_threads, self.cfg.actor_cpu_affinity),
            chunks=self.chunks,
            chunk_ids=chunk_ids,
            weights=self.weights,
        )
        self.workers.spawn("play", 0, play_main, setup)

    def _respawn(self, play: Worker, restarts: int) -> None:
        # Finished chunks stay valid and are read first; then the new process's episodes.
        queued = {r.slot for r in self._ready if r is not None}
        self._ready.append(_RESTART)
        free = [c for c in range(self.cfg.play_queue_chunks) if c not in queued]
        self._spawn(free, seed_offset=restarts * self.num_envs)

    def _describe(self, play: Worker) -> str:
        return f"play process (envs 0..{self.num_envs - 1}, pid {play.process.pid})"

    def _on_message(self, play: Worker, message: tuple) -> None:
        if message[0] == "full":
            self._ready.append(message[1])

    # ------------------------------------------------------------------ producing

    def _produce(self, timer: PhaseTimer) -> tuple[int, list[EpisodeEnd]]:
        """The next chunk from the queue into the replay; returns (env steps, true games)."""
        if not self.workers.started:
            # The play process's epsilon schedule goes on from the trainer's env steps.
            self.workers.start(
                lambda: ("start", self.env_steps), lambda: self.weights.publish(self.learner)
            )
        with timer.phase("queue_wait"):
            while not self._ready or self._ready[0] is _RESTART:
                if self._ready and self._ready[0] is _RESTART:
                    self._ready.popleft()
                    self.replay.end_episodes()
                    continue
                self.workers.receive()
        report = self._ready.popleft()
        assert report is not None
        c, chunks = report.slot, self.chunks
        with timer.phase("replay_add"):
            for t in range(chunks.num_steps):
                truncated = chunks.truncated[c, t].numpy()
                final = {
                    int(i): chunks.final_obs[c, t, i].numpy() for i in np.flatnonzero(truncated)
                }
                self.replay.add(
                    chunks.obs[c, t].numpy(),
                    chunks.actions[c, t].numpy(),
                    chunks.rewards[c, t].numpy(),
                    chunks.terminated[c, t].numpy(),
                    truncated,
                    final,
                )
        # a dead play process: its restart gets the chunk
        self.workers.send(self.workers.workers[0], ("free", c))
        self._lags.append(self.weights.version - report.policy_version)
        for name in ("env_step", "policy_forward"):
            timer.add(name, report.seconds[name])
        timer.add("actor_weight_sync", report.seconds["weight_sync"])
        timer.add("actor_slot_wait", report.seconds["slot_wait"])
        self._play_busy += sum(report.seconds[k] for k in ("env_step", "policy_forward"))
        return chunks.num_steps * self.num_envs, report.episodes

    # ------------------------------------------------------------------ Runner

    def _begin_iteration(self) -> None:
        self._lags, self._play_busy = [], 0.0

    def sync_weights(self) -> None:
        self.weights.publish(self.learner)

    def worker_metrics(self) -> dict[str, float]:
        metrics = super().worker_metrics()
        steps = self._iteration_frames / self.frames_per_step
        metrics.update(
            {
                "sys/live_workers": float(self.workers.live()),
                "sys/worker_restarts": float(self.workers.budget.used),
                "perf/policy_lag": float(np.mean(self._lags)) if self._lags else 0.0,
                "perf/policy_lag_max": float(max(self._lags, default=0)),
                # the play process's capacity: env steps per second of its busy time
                "perf/actor_steps_per_s": steps / self._play_busy if self._play_busy else 0.0,
            }
        )
        return metrics

    def process_resources(self) -> list[dict[str, Any]]:
        return self.workers.process_resources()

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), **self.workers.budget.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.workers.budget.load_state_dict(state)
        super().load_state_dict(state)

    def close(self) -> None:
        self.workers.close()
