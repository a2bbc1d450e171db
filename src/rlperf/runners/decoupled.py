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

import os
from collections import deque
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import torch

from rlperf.config.schema import RunnerConfig
from rlperf.core.devices import resolve_device
from rlperf.core.errors import ActorError
from rlperf.core.protocols import Algorithm
from rlperf.core.types import Rollout
from rlperf.envs.base import EpisodeEnd
from rlperf.envs.facts import ENGINES
from rlperf.models.policy import ActorCritic
from rlperf.runners.actor import ActorSetup, actor_main
from rlperf.runners.actor_stats import ActorStats
from rlperf.runners.base import LocalLearner, RolloutDriver
from rlperf.runners.child import ProcessStart, RolloutReport
from rlperf.runners.env_slice import EnvSlice, EnvSliceFactory
from rlperf.runners.facts import RunnerFacts
from rlperf.runners.shared_memory import (
    RolloutSlots,
    SharedPolicyWeights,
    empty_batch,
    gather_rollouts,
)
from rlperf.runners.supervisor import SupervisedRunner, Supervisor, Worker, worker_seeds
from rlperf.telemetry.timers import PhaseTimer


def learner_threads(cfg: RunnerConfig) -> int:
    """The learner's torch threads when runner.torch_threads is unset: the CPUs the actors
    leave. Oversubscribed cores hurt more than idle ones: a torch thread that loses its
    core stalls its siblings at every parallel region (measured in docs/benchmarks.md)."""
    cpus = len(cfg.cpu_affinity or os.sched_getaffinity(0))
    return max(1, cpus - cfg.num_workers * cfg.actor_threads)


def actor_engine_threads(cfg: RunnerConfig) -> int:
    """A C++ engine's threads per actor when env.num_threads is unset: the usable cores
    shared between the actors. Each actor's pool defaulting to every core oversubscribes
    them num_workers times; on 16 cores with 2 actors, 8 threads each (with the GPU
    learner on 2 torch threads) gave 1.17x the SPS of 16 each (docs/benchmarks.md, "One
    GPU, third run")."""
    cpus = len(cfg.actor_cpu_affinity or os.sched_getaffinity(0))
    return max(1, cpus // cfg.num_workers)


def _actor_error(message: str, actor: Worker | None, worker_traceback: str | None) -> ActorError:
    index = -1 if actor is None else actor.index
    return ActorError(message, worker_index=index, worker_traceback=worker_traceback)


class DecoupledRunner(LocalLearner, SupervisedRunner, RolloutDriver):
    """Actors and learner in separate processes, overlapping, with bounded policy lag."""

    name = "decoupled"
    # at least one update behind; the runner drops rollouts above the algorithm's bound
    facts: ClassVar[RunnerFacts] = RunnerFacts(frozenset({"rollout"}), 1, ENGINES, True, rnd=True)

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
        self.stats = ActorStats(self.max_policy_lag)
        self.workers = Supervisor(
            cfg,
            describe=self._describe,
            make_error=_actor_error,
            on_message=self._on_message,
            respawn=self._respawn,
            silence=f"no rollout from any of {cfg.num_workers} actors",
        )
        try:
            for i in range(cfg.num_workers):
                self._spawn(i, self._owned_slots(i), seed_offset=0)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ actors

    def _owned_slots(self, index: int) -> list[int]:
        per = self.cfg.slots_per_actor
        return list(range(index * per, (index + 1) * per))

    def _spawn(self, index: int, slot_ids: list[int], seed_offset: int) -> None:
        seeds = worker_seeds(self.seed, index, self.envs_per_actor, seed_offset)
        setup = ActorSetup(
            index=index,
            first_env=seeds.first_env,
            make_envs=EnvSlice(
                self.make_env_slice, self.envs_per_actor, seeds.env_seed, seeds.first_env
            ),
            env_seed=seeds.env_seed,
            make_policy=self.make_policy,
            start=ProcessStart(
                self.cfg.actor_threads, self.cfg.actor_cpu_affinity, seeds.torch_seed
            ),
            device=str(self.actor_device),
            precision=self.cfg.precision,
            channels_last=self.cfg.channels_last,
            cuda_graph=self.cfg.cuda_graph,
            slots=self.slots,
            slot_ids=slot_ids,
            weights=self.weights,
        )
        self.workers.spawn("actor", index, actor_main, setup)

    def _respawn(self, actor: Worker, restarts: int) -> None:
        # The new actor fills the dead one's slots, except those whose data the learner has
        # (finished and waiting, or being read): those come back to it when released.
        busy = {r.slot for r in self._ready} | set(self._held)
        free = [s for s in self._owned_slots(actor.index) if s not in busy]
        self._spawn(actor.index, free, seed_offset=restarts * self.num_envs)

    def _describe(self, actor: Worker) -> str:
        lo = actor.index * self.envs_per_actor
        return f"actor {actor.index} (envs {lo}..{lo + self.envs_per_actor - 1}, pid {actor.process.pid})"

    def _on_message(self, actor: Worker, message: tuple) -> None:
        if message[0] == "full":
            self._ready.append(message[1])

    def _release(self, slot: int) -> None:
        """Give ``slot`` back to the actor that owns it (a dead one's restart gets it)."""
        self.workers.send(self.workers.workers[slot // self.cfg.slots_per_actor], ("free", slot))

    # ------------------------------------------------------------------ Runner

    def collect(self, timer: PhaseTimer) -> tuple[Rollout, list[EpisodeEnd]]:
        if not self.workers.started:
            self.workers.start(lambda: ("start",), lambda: self.weights.publish(self.learner))
        for slot in self._held:
            self._release(slot)
        self._held = []
        reports: list[RolloutReport] = []
        self.stats.start_batch()
        with timer.phase("queue_wait"):
            while len(reports) < self.cfg.num_workers:
                if not self._ready:
                    self.workers.receive()
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
        return {
            "sys/live_workers": float(self.workers.live()),
            "sys/worker_restarts": float(self.workers.budget.used),
            **self.stats.metrics(),
        }
