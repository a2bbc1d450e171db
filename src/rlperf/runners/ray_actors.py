"""The ray runner: rollout actors are Ray actors, on one machine or across a cluster.

``num_workers`` :class:`~rlperf.runners.ray_rollout_actor.RolloutActor` s each step
``num_envs / num_workers`` envs (of any engine) with a versioned copy of the policy; Ray
places them on the cluster's nodes (``SPREAD``), reserving ``ray_num_cpus_per_actor`` CPUs
and ``ray_num_gpus_per_actor`` GPUs for each. The learner is this process (the Ray driver),
on ``runner.learner_device``.

Weights travel through Ray's object store: every publication is one ``ray.put`` of a flat
fp32 array, and the version number travels with its reference, so an actor fetches only
weights it does not hold yet.

Two modes, picked by the algorithm's ``max_policy_lag``:

- synchronous (0, PPO): every iteration each live actor samples one rollout with the
  current weights; the batch is the actors' rollouts in actor order, exactly on-policy;
- asynchronous (>= 1, IMPALA/APPO): each actor always has one rollout in flight and is given
  the newest weights the moment its previous rollout arrives, so acting overlaps learning;
  ``collect`` takes ``num_workers`` rollouts in arrival order and drops those whose lag
  exceeds ``max_policy_lag`` (``perf/rollouts_dropped``), as the decoupled runner does.

Faults: rlperf replaces failed actors itself (Ray's own ``max_restarts`` is 0). An actor
whose call raised (an env crashed), whose process or node died, or that sent no rollout
within ``runner.worker_timeout_s`` (hung; default 300 s, plus a grace for building a new
actor) is killed and a new actor is created in its place, with new env seeds, and asked
again with the current weights; the rollout in flight is lost. Replacements are counted
over the run (``runner.max_worker_restarts``, as for the other runners); past it, or with
``restart_failed_workers`` off, the run stops with :class:`ActorError` (the session writes a
checkpoint), unless ``ignore_worker_failures`` lets it continue with the actors left.
Replacing instead of letting Ray rebuild the actor matters: an actor whose constructor
fails (an env crashing at reset) is dead for good in Ray, and calling it again would only
fail again until a timeout.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from rlperf.config.schema import RunnerConfig
from rlperf.core.devices import resolve_device
from rlperf.core.errors import ActorError
from rlperf.core.protocols import Algorithm
from rlperf.core.types import Rollout
from rlperf.envs.base import EpisodeEnd
from rlperf.envs.facts import ENGINES
from rlperf.models.policy import ActorCritic
from rlperf.runners.actor_stats import ActorStats
from rlperf.runners.base import LocalLearner, RolloutDriver
from rlperf.runners.child import ProcessStart
from rlperf.runners.decoupled import learner_threads
from rlperf.runners.env_slice import EnvSliceFactory
from rlperf.runners.facts import RunnerFacts
from rlperf.runners.ray_cluster import check_capacity, check_ray_config, connect, import_ray
from rlperf.runners.ray_rollout_actor import (
    RayActorSetup,
    RayRollout,
    RolloutActor,
    rollout_from_arrays,
    weights_to_numpy,
)
from rlperf.runners.shared_memory import empty_batch, gather_rollouts
from rlperf.runners.supervisor import WORKER_TIMEOUT_S, RestartBudget, worker_seeds, worker_timeout
from rlperf.telemetry.timers import PhaseTimer

_ANSI_COLOUR = re.compile(r"\x1b\[[0-9;]*m")
# A new actor's first rollout may take this much longer than runner.worker_timeout_s: it
# starts a process, imports torch and builds its envs first.
BUILD_GRACE_S = 60.0


@dataclass
class _Actor:
    index: int
    handle: Any  # a ray.actor.ActorHandle
    incarnation: int = 0
    """0 for the first actor of this index, n for its n-th replacement (new env seeds)."""
    live: bool = True
    inflight: Any = None  # the ObjectRef of the rollout being sampled, if any
    deadline: float = 0.0
    """Monotonic time by which the rollout in flight must arrive, or the actor counts as hung."""
    fresh: bool = False
    """Not yet heard from since it was created: its first rollout includes its construction."""
    info: dict[str, Any] = field(default_factory=dict)


class RayRunner(LocalLearner, RolloutDriver):
    """Rollout actors on Ray; the learner in this process; synchronous or bounded-lag."""

    name = "ray"
    # synchronous (every actor acts with the current weights) when the algorithm needs lag
    # 0, asynchronous with the algorithm's lag bound otherwise
    facts: ClassVar[RunnerFacts] = RunnerFacts(
        frozenset({"rollout"}), 0, ENGINES, True, on_ray=True, check=check_ray_config
    )

    def __init__(
        self,
        cfg: RunnerConfig,
        algo: Algorithm,
        *,
        num_envs: int,
        make_env_slice: EnvSliceFactory,
        make_policy: Callable[[], ActorCritic],
        seed: int,
    ) -> None:
        self.cfg = cfg
        self._ray = import_ray()
        self.learner_device = resolve_device(cfg.learner_device)
        self.actor_device = resolve_device(cfg.actor_device)
        self.learner = algo.policy.to(self.learner_device)
        if cfg.channels_last:
            self.learner.to(memory_format=torch.channels_last)
        self.max_policy_lag = algo.data_spec.max_policy_lag
        self.asynchronous = self._asynchronous()
        self.num_steps = algo.data_spec.horizon
        self.envs_per_actor = num_envs // cfg.num_workers
        self.make_env_slice = make_env_slice
        self.make_policy = make_policy
        self.seed = seed
        self.version = 0
        self._weights_ref: Any = None
        self._started = False
        self._batches: dict[int, Rollout] = {}  # gather buffers by number of rollouts
        self.stats = ActorStats(self.max_policy_lag)
        self.weight_pulls = 0  # actors of the last batch that loaded weights to sample it
        self.budget = RestartBudget(cfg)
        self.timeout_s = worker_timeout(cfg)
        self.actors: list[_Actor] = []
        self.connection = connect(cfg, min_local_cpus=self._min_local_cpus())
        try:
            if self.connection.owned and cfg.torch_threads is None:
                # A private local Ray: the actors share this machine with the learner. Acting
                # overlaps learning only when asynchronous; synchronous actors wait while the
                # learner learns, so it takes every CPU.
                cpus = len(cfg.cpu_affinity or os.sched_getaffinity(0))
                torch.set_num_threads(learner_threads(cfg) if self.asynchronous else cpus)
            self.gpus_per_actor = self._gpus_per_actor()
            check_capacity(
                self._ray, cfg.num_workers, cfg.ray_num_cpus_per_actor, self.gpus_per_actor
            )
            self._remote = self._ray.remote(RolloutActor)
            self.actors = [_Actor(i, self._create(i)) for i in range(cfg.num_workers)]
            self._wait_built()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ actors

    def _asynchronous(self) -> bool:
        """Whether acting overlaps learning (the algorithm tolerates policy lag)."""
        return self.max_policy_lag > 0

    def _min_local_cpus(self) -> float:
        """CPUs a private local Ray declares at least (beyond ``runner.ray_num_cpus`` or the
        machine's count)."""
        return 0.0

    def _gpus_per_actor(self) -> float:
        """The GPU share each actor reserves (Ray is connected when this is asked)."""
        return self.cfg.ray_num_gpus_per_actor

    def _device_in_actor(self) -> str:
        """The device the actors act on, as named inside an actor's process."""
        return str(self.actor_device)

    def _create(self, index: int, incarnation: int = 0) -> Any:
        cfg = self.cfg
        seeds = worker_seeds(self.seed, index, self.envs_per_actor)
        setup = RayActorSetup(
            index=index,
            first_env=seeds.first_env,
            num_envs=self.envs_per_actor,
            make_envs=self.make_env_slice,
            env_seed=seeds.env_seed,
            incarnation=incarnation,
            make_policy=self.make_policy,
            start=ProcessStart(cfg.actor_threads, torch_seed=seeds.torch_seed),
            num_steps=self.num_steps,
            device=self._device_in_actor(),
            precision=cfg.precision,
            channels_last=cfg.channels_last,
        )
        return self._remote.options(
            name=None,
            num_cpus=cfg.ray_num_cpus_per_actor,
            num_gpus=self.gpus_per_actor,
            max_restarts=0,  # failed actors are replaced by _fail, counted and bounded
            max_task_retries=0,
            scheduling_strategy="SPREAD",
        ).remote(setup)

    def _wait_built(self) -> None:
        """Block until every actor has built its envs and policy (or failed doing so)."""
        ray = self._ray
        refs = [a.handle.info.remote() for a in self.actors]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=WORKER_TIMEOUT_S)
        if len(ready) < len(refs):
            raise ActorError(
                f"{len(refs) - len(ready)} of {len(refs)} ray actors were not placed and built "
                f"within {WORKER_TIMEOUT_S:g} s (ray status shows what the cluster lacks)",
                worker_index=-1,
            )
        for actor, ref in zip(self.actors, refs, strict=True):
            try:
                actor.info = ray.get(ref)
            except ray.exceptions.RayError as exc:
                raise ActorError(
                    f"{self._describe(actor)} failed to start: {_first_line(exc)}",
                    worker_index=actor.index,
                    worker_traceback=str(exc),
                ) from None

    def _describe(self, actor: _Actor) -> str:
        lo = actor.index * self.envs_per_actor
        where = ""
        if actor.info:
            where = f", pid {actor.info.get('pid')} on node {actor.info.get('node_ip')}"
        return f"ray actor {actor.index} (envs {lo}..{lo + self.envs_per_actor - 1}{where})"

    def _live(self) -> list[_Actor]:
        return [a for a in self.actors if a.live]

    def _publish(self) -> None:
        self.version += 1
        self._weights_ref = self._ray.put(weights_to_numpy(self.learner))

    def _submit(self, actor: _Actor) -> None:
        actor.inflight = actor.handle.sample.remote(self.version, [self._weights_ref])
        grace = BUILD_GRACE_S if actor.fresh else 0.0
        actor.deadline = time.monotonic() + self.timeout_s + grace

    def _fail(self, actor: _Actor, cause: str, worker_traceback: str | None = None) -> None:
        """``actor`` lost its rollout: replace it while restarts are left; otherwise give it up
        (``ignore_worker_failures``) or raise ActorError."""
        cfg = self.cfg
        actor.inflight = None
        with contextlib.suppress(Exception):
            self._ray.kill(actor.handle, no_restart=True)
        if self.budget.take(self._describe(actor), cause):
            actor.incarnation += 1
            actor.handle = self._create(actor.index, actor.incarnation)
            actor.info = {}
            actor.fresh = True
            self._submit(actor)
            return
        others = [a for a in self._live() if a is not actor]
        if cfg.ignore_worker_failures and others:
            actor.live = False
            _say(f"continuing with {len(others)} actors without {self._describe(actor)}: {cause}")
            return
        raise ActorError(
            f"{self._describe(actor)} {cause}",
            worker_index=actor.index,
            worker_traceback=worker_traceback,
        )

    def _receive(self, pending: list[_Actor]) -> tuple[_Actor, RayRollout] | None:
        """The next rollout of one of ``pending`` actors, or None after handling a failure
        (an exception, a death, or actors past their deadline)."""
        ray = self._ray
        owners = {a.inflight: a for a in pending}
        wait_s = max(0.0, min(a.deadline for a in pending) - time.monotonic())
        ready, _ = ray.wait(list(owners), num_returns=1, timeout=wait_s)
        if not ready:
            now = time.monotonic()
            for late in [a for a in pending if a.deadline <= now]:
                self._fail(
                    late,
                    f"sent no rollout within {self.timeout_s:g} s (hung; runner.worker_timeout_s)",
                )
            return None
        actor = owners[ready[0]]
        try:
            result: RayRollout = ray.get(ready[0])
        except ray.exceptions.RayActorError as exc:
            self._fail(actor, f"died ({_first_line(exc)})")
            return None
        except ray.exceptions.RayTaskError as exc:
            self._fail(actor, f"raised {_first_line(exc)}", str(exc))
            return None
        except ray.exceptions.RayError as exc:  # e.g. its node died with the rollout
            self._fail(actor, f"lost its rollout ({_first_line(exc)})")
            return None
        actor.inflight = None
        actor.fresh = False
        actor.info = result.info
        return actor, result

    # ------------------------------------------------------------------ Runner

    def collect(self, timer: PhaseTimer) -> tuple[Rollout, list[EpisodeEnd]]:
        if not self._started:
            self._publish()
            self._started = True
        if not self.asynchronous or not any(a.inflight is not None for a in self._live()):
            for actor in self._live():
                self._submit(actor)
        reports: list[tuple[_Actor, RayRollout]] = []
        self.stats.start_batch()
        with timer.phase("queue_wait"):
            while len(reports) < len(self._live()):
                pending = [a for a in self._live() if a.inflight is not None]
                received = self._receive(pending)
                if received is None:
                    continue
                actor, result = received
                if self.asynchronous:
                    self._submit(actor)  # acting goes on while the learner learns
                if self.stats.accept(self.version - result.policy_version):
                    reports.append(received)
        if not self.asynchronous:
            reports.sort(key=lambda r: r[0].index)  # the same env order every iteration
        with timer.phase("copy"):
            parts = [rollout_from_arrays(r.arrays) for _, r in reports]
            out = self._batches.get(len(parts))
            if out is None:
                out = self._batches[len(parts)] = empty_batch(
                    parts[0], len(parts) * self.envs_per_actor
                )
            batch = gather_rollouts(parts, out)
        busy = []
        for _, r in reports:
            for name in ("env_step", "policy_forward"):
                timer.add(name, r.seconds[name])
            timer.add("actor_weight_sync", r.seconds["weight_sync"])
            busy.append(sum(r.seconds.values()))
        self.stats.time_actors(batch.num_steps * batch.num_envs, busy)
        self.weight_pulls = sum(r.weights_pulled for _, r in reports)
        episodes = [e for _, r in reports for e in r.episodes]
        return batch, episodes

    def load(self, batch: Rollout) -> Rollout:
        return batch.to(self.learner_device)

    def sync_weights(self) -> None:
        self._publish()

    def worker_metrics(self) -> dict[str, float]:
        live = self._live()
        per_node = Counter(a.info.get("node_id") for a in live)
        return {
            "sys/live_workers": float(len(live)),
            "sys/worker_restarts": float(self.budget.used),
            "sys/nodes": float(len(per_node)),
            "sys/actors_per_node_min": float(min(per_node.values(), default=0)),
            "sys/actors_per_node_max": float(max(per_node.values(), default=0)),
            "perf/actor_weight_pulls": float(self.weight_pulls),
            **self.stats.metrics(),
        }

    def actors_per_node(self) -> dict[str, int]:
        """Live actors on each node, by node IP and id."""
        return dict(
            Counter(f"{a.info.get('node_ip')}/{a.info.get('node_id')}" for a in self._live())
        )

    def process_resources(self) -> list[dict[str, Any]]:
        return [{**a.info, "live": a.live} for a in self.actors if a.info]

    def state_dict(self) -> dict[str, Any]:
        # Actors run ahead of the learner (asynchronous mode) and live on other machines:
        # no env snapshot is kept, a resumed run starts new episodes.
        return {"envs": None, **self.budget.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.budget.load_state_dict(state)

    def close(self) -> None:
        ray = self._ray
        if ray.is_initialized():
            closing = []
            for actor in self.actors:
                with contextlib.suppress(Exception):
                    closing.append(actor.handle.close.remote())
            with contextlib.suppress(Exception):
                ray.wait(closing, num_returns=len(closing), timeout=5.0)
            for actor in self.actors:
                with contextlib.suppress(Exception):
                    ray.kill(actor.handle, no_restart=True)
        self.actors = []
        self._batches.clear()
        self._weights_ref = None
        if hasattr(self, "connection"):
            self.connection.shutdown()


def _first_line(exc: BaseException) -> str:
    """One line saying what went wrong: the actor's own exception where Ray carries it (a
    RayTaskError's first line only names the remote method), without terminal colours."""
    cause = getattr(exc, "cause", None)
    text = f"{type(cause).__name__}: {cause}" if isinstance(cause, BaseException) else str(exc)
    lines = [line for line in _ANSI_COLOUR.sub("", text).splitlines() if line.strip()]
    return (lines[0] if lines else type(exc).__name__)[:300]


def _say(message: str) -> None:
    print(f"rlperf: {message}", file=sys.stderr, flush=True)
