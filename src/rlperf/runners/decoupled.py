"""The decoupled runner: actor processes collect rollouts while the learner learns (IMPALA-style).

``num_workers`` actor processes each step ``num_envs / num_workers`` envs (of any engine)
with their own copy of the policy, pulled from :class:`SharedPolicyWeights` before every
rollout, and write rollouts into slots of shared memory they own (``slots_per_actor``, 2 =
double buffering: one being written while the learner reads the other). The learner takes
finished slots in arrival order, ``num_workers`` rollouts per batch (the same batch size as
the synchronous runners), and gives each slot back only when it has finished reading it.

Acting and learning overlap, so the acting policy trails the learner: a rollout acted with
version v and consumed at learner version V has lag V - v. Rollouts with a lag above the
algorithm's ``max_policy_lag`` are dropped (``perf/rollouts_dropped``); the algorithm
(IMPALA, APPO) corrects the rest with V-trace.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

import numpy as np
import torch
import torch.multiprocessing as torch_mp

from rlperf.config.schema import RunnerConfig
from rlperf.core.errors import WorkerError, describe_exit
from rlperf.core.optim import LocalGradientStep
from rlperf.core.protocols import Algorithm
from rlperf.core.resources import children_ignore_sigint
from rlperf.core.types import Rollout
from rlperf.envs.base import EpisodeEnd
from rlperf.models.policy import ActorCritic
from rlperf.runners.actor import ActorSetup, RolloutReport, actor_main
from rlperf.runners.actor_stats import ActorStats
from rlperf.runners.env_slice import EnvSlice, EnvSliceFactory
from rlperf.runners.inproc import resolve_device
from rlperf.runners.shared_memory import (
    RolloutSlots,
    SharedPolicyWeights,
    empty_batch,
    gather_rollouts,
)
from rlperf.telemetry.timers import PhaseTimer

ROLLOUT_TIMEOUT_S = 300.0
"""Longest wait for any rollout before the actors are declared hung (start-up included)."""


def rollout_timeout(cfg: RunnerConfig) -> float:
    """How long the learner waits for any rollout before the actors count as hung."""
    return ROLLOUT_TIMEOUT_S if cfg.worker_timeout_s is None else cfg.worker_timeout_s


def learner_threads(cfg: RunnerConfig) -> int:
    """The learner's torch threads when runner.torch_threads is unset: the CPUs the actors
    leave. Oversubscribed cores hurt more than idle ones: a torch thread that loses its
    core stalls its siblings at every parallel region (measured in docs/benchmarks.md)."""
    cpus = len(cfg.cpu_affinity or os.sched_getaffinity(0))
    return max(1, cpus - cfg.num_workers * cfg.actor_threads)


class ActorError(WorkerError):
    """An actor process raised or died."""

    def __init__(self, message: str, *, worker_index: int, worker_traceback: str | None = None):
        super().__init__(message)
        self.worker_index = worker_index
        if worker_traceback:
            self.add_note("actor-side traceback:\n" + worker_traceback.rstrip())


@dataclass
class _Actor:
    index: int
    process: Any  # a torch.multiprocessing SpawnProcess
    conn: Connection


class DecoupledRunner:
    """Actors and learner in separate processes, overlapping, with bounded policy lag."""

    name = "decoupled"

    def __init__(
        self,
        cfg: RunnerConfig,
        algo: Algorithm,
        *,
        num_envs: int,
        obs_space: Any,
        make_env_slice: EnvSliceFactory,
        make_policy: Callable[[], ActorCritic],
        seed: int,
    ) -> None:
        self.cfg = cfg
        if cfg.torch_threads is None:
            torch.set_num_threads(learner_threads(cfg))
        self.learner_device = resolve_device(cfg.learner_device)
        self.actor_device = resolve_device(cfg.actor_device)
        self.learner = algo.policy.to(self.learner_device)
        if cfg.channels_last:
            self.learner.to(memory_format=torch.channels_last)
        self.max_policy_lag = algo.data_spec.max_policy_lag
        self.num_envs = num_envs
        self.envs_per_actor = num_envs // cfg.num_workers
        self.make_env_slice = make_env_slice
        self.make_policy = make_policy
        self.seed = seed
        obs_dtype = torch.from_numpy(np.zeros((), dtype=obs_space.dtype)).dtype
        self.slots = RolloutSlots(
            cfg.num_workers * cfg.slots_per_actor,
            algo.data_spec.horizon,
            self.envs_per_actor,
            tuple(obs_space.shape),
            obs_dtype,
        )
        self.weights = SharedPolicyWeights(self.learner)
        self._batch: Rollout | None = None  # gather buffer when a batch spans several slots
        self._ready: deque[RolloutReport] = deque()  # filled slots not consumed yet
        self._held: list[int] = []  # slots the current batch reads without a copy
        self._started = False
        self.stats = ActorStats(self.max_policy_lag)
        self.worker_restarts = 0
        self.resources: dict[int, dict[str, Any]] = {}
        self._ctx = torch_mp.get_context("spawn")
        self.actors: list[_Actor] = []
        try:
            for i in range(cfg.num_workers):
                self.actors.append(self._spawn(i, self._owned_slots(i), seed_offset=0))
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ actors

    def _owned_slots(self, index: int) -> list[int]:
        per = self.cfg.slots_per_actor
        return list(range(index * per, (index + 1) * per))

    def _spawn(self, index: int, slot_ids: list[int], seed_offset: int) -> _Actor:
        first_env = index * self.envs_per_actor
        env_seed = self.seed + first_env + seed_offset
        setup = ActorSetup(
            index=index,
            first_env=first_env,
            make_envs=EnvSlice(self.make_env_slice, self.envs_per_actor, env_seed, first_env),
            env_seed=env_seed,
            make_policy=self.make_policy,
            torch_seed=self.seed + 7919 * (index + 1) + seed_offset,
            device=str(self.actor_device),
            precision=self.cfg.precision,
            channels_last=self.cfg.channels_last,
            torch_threads=self.cfg.actor_threads,
            cpu_affinity=self.cfg.actor_cpu_affinity,
            slots=self.slots,
            slot_ids=slot_ids,
            weights=self.weights,
        )
        parent_conn, child_conn = self._ctx.Pipe(duplex=True)
        process = self._ctx.Process(
            target=actor_main, args=(setup, child_conn), name=f"rlperf-actor-{index}", daemon=True
        )
        with children_ignore_sigint():
            process.start()
        child_conn.close()
        return _Actor(index, process, parent_conn)

    def _describe(self, actor: _Actor) -> str:
        lo = actor.index * self.envs_per_actor
        return f"actor {actor.index} (envs {lo}..{lo + self.envs_per_actor - 1}, pid {actor.process.pid})"

    def _fail(self, actor: _Actor, cause: str, worker_traceback: str | None = None) -> None:
        """Restart a failed actor (runner.restart_failed_workers) or raise ActorError."""
        error = ActorError(
            f"{self._describe(actor)} {cause}",
            worker_index=actor.index,
            worker_traceback=worker_traceback,
        )
        cfg = self.cfg
        if not cfg.restart_failed_workers or self.worker_restarts >= cfg.max_worker_restarts:
            raise error
        self.worker_restarts += 1
        print(
            f"rlperf: restarting {self._describe(actor)} (restart {self.worker_restarts} of at "
            f"most {cfg.max_worker_restarts}) after: {cause}",
            file=sys.stderr,
            flush=True,
        )
        self._stop_process(actor)
        # The new actor fills the dead one's slots, except those whose data the learner has
        # (finished and waiting, or being read): those come back to it when released.
        busy = {r.slot for r in self._ready} | set(self._held)
        free = [s for s in self._owned_slots(actor.index) if s not in busy]
        new = self._spawn(actor.index, free, seed_offset=self.worker_restarts * self.num_envs)
        self.actors[actor.index] = new
        if self._started:
            new.conn.send(("start",))

    def _drain(self, actor: _Actor) -> None:
        """Handle every message waiting on ``actor``'s pipe."""
        while actor.conn.poll():
            try:
                message = actor.conn.recv()
            except (EOFError, OSError):
                actor.process.join(1.0)
                self._fail(actor, f"died with {describe_exit(actor.process.exitcode)}")
                return
            kind = message[0]
            if kind == "full":
                self._ready.append(message[1])
            elif kind == "hello":
                self.resources[actor.index] = message[1]
            elif kind == "error":
                actor.process.join(2.0)
                self._fail(actor, f"raised {message[1]}", message[2])
                return

    def _receive(self) -> None:
        """Block until at least one message arrived or an actor died; handle them."""
        conns = {a.conn: a for a in self.actors}
        sentinels = {a.process.sentinel: a for a in self.actors}
        timeout = rollout_timeout(self.cfg)
        ready = wait([*conns, *sentinels], timeout)
        if not ready:
            raise ActorError(
                f"no rollout from any of {len(self.actors)} actors within {timeout:g} s "
                "(runner.worker_timeout_s)",
                worker_index=-1,
            )
        for handle in ready:
            if handle in conns:
                self._drain(conns[handle])
        for handle in ready:
            actor = sentinels.get(handle)  # type: ignore[call-overload]
            if actor is not None and self.actors[actor.index] is actor:
                self._drain(actor)  # a report sent just before dying is still valid
                if self.actors[actor.index] is actor:
                    actor.process.join(1.0)
                    self._fail(actor, f"died with {describe_exit(actor.process.exitcode)}")

    def _release(self, slot: int) -> None:
        """Give ``slot`` back to the actor that owns it."""
        actor = self.actors[slot // self.cfg.slots_per_actor]
        with contextlib.suppress(OSError):  # a dead actor: its restart gets the slot
            actor.conn.send(("free", slot))

    def _stop_process(self, actor: _Actor) -> None:
        process = actor.process
        if process.is_alive():
            process.kill()
        process.join(5.0)
        actor.conn.close()

    # ------------------------------------------------------------------ Runner

    def make_gradient_step(self, algo: Algorithm) -> LocalGradientStep:
        return LocalGradientStep.for_algorithm(algo, self.learner_device, self.cfg.precision)

    def collect(self, timer: PhaseTimer) -> tuple[Rollout, list[EpisodeEnd]]:
        if not self._started:
            while len(self.resources) < len(self.actors):  # every actor has built its envs
                self._receive()
            self.weights.publish(self.learner)
            for actor in self.actors:
                actor.conn.send(("start",))
            self._started = True
        for slot in self._held:
            self._release(slot)
        self._held = []
        reports: list[RolloutReport] = []
        self.stats.start_batch()
        with timer.phase("queue_wait"):
            while len(reports) < len(self.actors):
                if not self._ready:
                    self._receive()
                    continue
                report = self._ready.popleft()
                if not self.stats.accept(self.weights.version - report.policy_version):
                    self._release(report.slot)
                    continue
                reports.append(report)
        if len(reports) == 1:
            batch = self.slots[reports[0].slot]  # read in place; released next time
            self._held = [reports[0].slot]
        else:
            with timer.phase("copy"):
                parts = [self.slots[r.slot] for r in reports]
                if self._batch is None:
                    self._batch = empty_batch(parts[0], self.num_envs)
                batch = gather_rollouts(parts, self._batch)
            for r in reports:
                self._release(r.slot)
        busy = []
        for r in reports:
            for name in ("env_step", "policy_forward"):
                timer.add(name, r.seconds[name])
            timer.add("actor_weight_sync", r.seconds["weight_sync"])
            timer.add("actor_slot_wait", r.seconds["slot_wait"])
            busy.append(
                r.seconds["env_step"] + r.seconds["policy_forward"] + r.seconds["weight_sync"]
            )
        self.stats.time_actors(batch.num_steps * batch.num_envs, busy)
        episodes = [e for r in reports for e in r.episodes]
        return batch, episodes

    def load(self, batch: Rollout) -> Rollout:
        return batch.to(self.learner_device)

    def sync_weights(self) -> None:
        self.weights.publish(self.learner)

    def worker_metrics(self) -> dict[str, float]:
        live = sum(a.process.is_alive() for a in self.actors)
        return {
            "sys/live_workers": float(live),
            "sys/worker_restarts": float(self.worker_restarts),
            **self.stats.metrics(),
        }

    def process_resources(self) -> list[dict[str, Any]]:
        return [self.resources[i] for i in sorted(self.resources)]

    def state_dict(self) -> dict[str, Any]:
        # Actors run ahead of the learner, so there is no consistent env snapshot to keep:
        # a resumed run starts new episodes.
        return {"envs": None, "worker_restarts": self.worker_restarts}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.worker_restarts = int(state.get("worker_restarts", 0))

    def close(self) -> None:
        for actor in self.actors:
            with contextlib.suppress(OSError):
                actor.conn.send(("stop",))
        deadline = time.monotonic() + 5.0
        for actor in self.actors:
            actor.process.join(max(deadline - time.monotonic(), 0.0))
            self._stop_process(actor)
