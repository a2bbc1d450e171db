"""The hogwild runner: A3C's worker processes learn into a shared model (source 002).

``num_workers`` processes (spawned) each step ``num_envs / num_workers`` envs with a local
copy of the network. Every update segment a worker copies the shared model's weights into
its local copy, plays ``horizon`` (A3C: ``num_local_steps``) steps, builds the algorithm's
loss on the local copy and applies the gradient to the shared model through an optimizer
whose statistics are in shared memory too (``core/shared_optim.py``). Nobody waits for
anybody: learning happens inside the workers, lock-free.

How it drives an iteration (the asynchronous-workers execution model): the driver process
learns nothing itself. It waits for the workers' segment reports (phase ``sample``,
sub-phase ``queue_wait``): at least ``num_workers`` of them and at least
``MIN_ITERATION_S`` since the previous iteration. Their account
(:class:`~rlperf.core.types.WorkerUpdates`: the mean loss metrics of the segments) goes to
the algorithm's ``follow_workers`` (phase ``learn``), which applies the learning-rate
schedule to the shared optimizer; there is no weight sync (workers pull at each segment's
start). The workers time their own phases and report them:
``perf/worker_{sync,sample,learn}_time_ms``, ``perf/env_step_time_ms`` and
``perf/policy_forward_time_ms`` are means per segment.

A separate evaluation process (``runner.eval_interval_s`` > 0) plays greedy episodes with
the shared model's latest weights, never updating it; its returns appear as ``eval/...``.

A worker or the evaluator that raises, dies or hangs is restarted with fresh env seeds
(``runner.restart_failed_workers``, as for the other process runners: supervision is
:mod:`rlperf.runners.supervisor`); the shared model and optimizer live on in the driver,
so nothing learned is lost with the process.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from typing import ClassVar

import torch

from rlperf.config.schema import RunnerConfig
from rlperf.core.errors import WorkerError
from rlperf.core.learner import Learner
from rlperf.core.protocols import Algorithm
from rlperf.core.shared_optim import SharedOptimizer
from rlperf.core.types import WorkerUpdates
from rlperf.envs.base import EpisodeEnd
from rlperf.envs.facts import ENGINES
from rlperf.runners.base import Iteration
from rlperf.runners.child import ProcessStart
from rlperf.runners.env_slice import EnvSlice, EnvSliceFactory
from rlperf.runners.facts import RunnerFacts
from rlperf.runners.hogwild_worker import (
    SEGMENT_PHASES,
    SegmentReport,
    WorkerSetup,
    evaluator_main,
    worker_main,
)
from rlperf.runners.supervisor import SupervisedRunner, Supervisor, Worker, worker_seeds
from rlperf.telemetry.timers import PhaseTimer

MIN_ITERATION_S = 0.5
"""An iteration takes every segment that arrives until at least num_workers did and this
many seconds passed since the previous one: A3C segments take milliseconds, and a record
(and stop check) per handful of segments would cost the driver a large share of a core."""

# The evaluation process's env is none of the run's training envs (env.fault_envs never names it).
EVAL_ENV = -1


class HogwildWorkerError(WorkerError):
    """A hogwild worker or the evaluator raised, died or hung."""

    def __init__(self, message: str, worker_traceback: str | None = None) -> None:
        super().__init__(message)
        if worker_traceback:
            self.add_note("worker-side traceback:\n" + worker_traceback.rstrip())


def _hogwild_error(message: str, proc: Worker | None, tb: str | None) -> HogwildWorkerError:
    return HogwildWorkerError(message, tb)


class HogwildRunner(SupervisedRunner):
    """A3C's asynchronous workers on one shared model and one shared optimizer."""

    name = "hogwild"
    # A worker's local copy trails the shared model by the updates other workers applied
    # during its segment (A3C's Hogwild lag). Its workers pickle the whole algorithm once
    # at spawn; APPO's and IMPALA's shared tensors do not survive that (their workers die at
    # start), so only A3C runs here. Its model lives in CPU shared memory: CUDA tensors would
    # need CUDA IPC and one device for every process, which it does not do. Its workers act
    # step by step, so they can carry an LSTM's state.
    facts: ClassVar[RunnerFacts] = RunnerFacts(
        frozenset({"rollout"}),
        1,
        ENGINES,
        True,
        algorithms=frozenset({"a3c"}),
        cuda=False,
        recurrent=True,
    )

    def __init__(
        self,
        cfg: RunnerConfig,
        algo: Algorithm,
        *,
        num_envs: int,
        make_env_slice: EnvSliceFactory,
        seed: int,
    ) -> None:
        self.cfg = cfg
        self.learner_device = torch.device("cpu")
        self.actor_device = torch.device("cpu")
        self.shared = algo.policy.share_memory()
        self.optimizer = SharedOptimizer(
            [p for p in self.shared.parameters() if p.requires_grad], algo.optimizer_spec()
        )
        self.envs_per_worker = num_envs // cfg.num_workers
        self._pending: deque[SegmentReport] = deque()
        self._eval_returns: deque[float] = deque(maxlen=100)
        self._eval_episodes = 0
        self._returns: deque[float] = deque(maxlen=100)
        self._worker_seconds: dict[str, float] = {}
        self._steps = 0
        self._segments = 0
        self._iteration_end = 0.0
        self.algo = algo
        self.make_env_slice = make_env_slice
        self.seed = seed
        self.workers = Supervisor(
            cfg,
            describe=lambda p: f"{p.role} {p.index} (pid {p.process.pid})",
            make_error=_hogwild_error,
            on_message=self._on_message,
            respawn=self._respawn,
            silence=f"no report from any of {cfg.num_workers} workers",
        )
        try:
            for i in range(cfg.num_workers):
                self._spawn_worker(i, seed_offset=0)
            if cfg.eval_interval_s > 0:
                self._spawn_evaluator(seed_offset=0)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ processes

    def _spawn_worker(self, i: int, seed_offset: int) -> None:
        seeds = worker_seeds(self.seed, i, self.envs_per_worker, seed_offset)
        setup = WorkerSetup(
            index=i,
            first_env=seeds.first_env,
            make_envs=EnvSlice(
                self.make_env_slice, self.envs_per_worker, seeds.env_seed, seeds.first_env
            ),
            env_seed=seeds.env_seed,
            start=ProcessStart(
                self.cfg.actor_threads, self.cfg.actor_cpu_affinity, seeds.torch_seed
            ),
            algo=self.algo,
            optimizer=self.optimizer,
        )
        self.workers.spawn("worker", i, worker_main, setup)

    def _spawn_evaluator(self, seed_offset: int) -> None:
        eval_seed = self.seed + 1_000_003 + seed_offset  # episodes no worker plays
        setup = WorkerSetup(
            index=0,
            first_env=0,
            make_envs=EnvSlice(self.make_env_slice, 1, eval_seed, EVAL_ENV),
            env_seed=eval_seed,
            start=ProcessStart(1, self.cfg.actor_cpu_affinity, self.seed + 104_729 + seed_offset),
            algo=self.algo,
            optimizer=None,
            eval_interval_s=self.cfg.eval_interval_s,
        )
        self.workers.spawn("evaluator", 0, evaluator_main, setup)

    def _respawn(self, proc: Worker, restarts: int) -> None:
        # A restarted worker pulls the shared weights at its first segment, as every
        # worker does: nothing of the dead one's is needed but fresh env seeds.
        seed_offset = restarts * self.envs_per_worker * self.cfg.num_workers
        if proc.role == "worker":
            self._spawn_worker(proc.index, seed_offset)
        else:
            self._spawn_evaluator(seed_offset)

    def _on_message(self, proc: Worker, message: tuple) -> None:
        if message[0] == "segment":
            self._pending.append(message[1])
        elif message[0] == "eval":
            self._eval_returns.append(float(message[1]))
            self._eval_episodes += 1

    # ------------------------------------------------------------------ Runner

    def make_gradient_step(self, algo: Algorithm) -> SharedOptimizer:
        """The shared optimizer: the workers step it; the driver owns its learning-rate
        schedule and checkpoints its state."""
        return self.optimizer

    def run_iteration(self, learner: Learner, timer: PhaseTimer) -> Iteration:
        with timer.phase("sample"):
            updates, episodes = self._receive_reports(timer)
        with timer.phase("learn"):
            metrics = learner.follow(updates, env_steps_ahead=self._steps)
        return Iteration(self._steps, episodes, metrics)

    def _receive_reports(self, timer: PhaseTimer) -> tuple[WorkerUpdates, list[EpisodeEnd]]:
        """The segment reports of one iteration, summed up."""
        if not self.workers.started:
            self.workers.start(lambda: ("start",))
            self._iteration_end = time.monotonic() + MIN_ITERATION_S
        with timer.phase("queue_wait"):
            while True:
                enough = len(self._pending) >= self.cfg.num_workers
                left = self._iteration_end - time.monotonic()
                if enough and left <= 0:
                    break
                self.workers.receive(left if enough else None, quiet=enough)
        # Anything else already waiting is taken too, without blocking.
        self.workers.drain_all()
        reports = list(self._pending)
        self._pending.clear()
        self._iteration_end = time.monotonic() + MIN_ITERATION_S
        seconds = {
            k: statistics.fmean(r.seconds.get(k, 0.0) for r in reports) for k in SEGMENT_PHASES
        }
        for k, v in seconds.items():
            timer.add(k if k in ("env_step", "policy_forward") else f"worker_{k}", v)
        self._worker_seconds = seconds
        names = {k for r in reports for k in r.metrics}
        metrics = {
            k: statistics.fmean(r.metrics[k] for r in reports if k in r.metrics)
            for k in sorted(names)
        }
        # 002 logged process 0's own losses; they are kept beside the means.
        for r in reports:
            if r.worker == 0:
                metrics.update(
                    {
                        f"worker0/{k.split('/')[-1]}": v
                        for k, v in r.metrics.items()
                        if k != "losses/learning_rate"  # the driver's schedule sets it
                    }
                )
                break
        episodes = [e for r in reports for e in r.episodes]
        self._returns.extend(e.episode_return for e in episodes)
        self._steps = sum(r.steps for r in reports)
        self._segments = len(reports)
        return WorkerUpdates(metrics, segments=len(reports)), episodes

    def sync_weights(self) -> None:
        """Nothing to do: each worker copies the shared weights at its segment's start."""

    def worker_metrics(self) -> dict[str, float]:
        metrics = {
            "sys/live_workers": float(self.workers.live("worker")),
            "sys/worker_restarts": float(self.workers.budget.used),
        }
        s = self._worker_seconds
        per_segment = self._steps / max(self._segments, 1)
        if s.get("sample"):
            # One worker's acting rate times the workers: what the envs deliver together.
            metrics["perf/actor_steps_per_s"] = per_segment / s["sample"] * self.cfg.num_workers
        if s.get("learn"):
            metrics["perf/learner_samples_per_s"] = per_segment / s["learn"] * self.cfg.num_workers
        if self._returns:
            returns = list(self._returns)
            metrics["charts/episodic_return_median100"] = statistics.median(returns)
            metrics["charts/episodic_return_std100"] = statistics.pstdev(returns)
        if self._eval_returns:
            returns = list(self._eval_returns)
            metrics["eval/greedy_return_mean100"] = statistics.fmean(returns)
            metrics["eval/greedy_return_median100"] = statistics.median(returns)
            metrics["eval/greedy_episodes"] = float(self._eval_episodes)
        return metrics
