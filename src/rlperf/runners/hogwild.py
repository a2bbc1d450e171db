"""The hogwild runner: A3C's worker processes learn into a shared model (source 002).

``num_workers`` processes (spawned) each step ``num_envs / num_workers`` envs with a local
copy of the network. Every update segment a worker copies the shared model's weights into
its local copy, plays ``horizon`` (A3C: ``num_local_steps``) steps, builds the algorithm's
loss on the local copy and applies the gradient to the shared model through an optimizer
whose statistics are in shared memory too (``core/shared_optim.py``). Nobody waits for
anybody: learning happens inside the workers, lock-free.

How this fits the session's loop (collect, load, update, sync): the driver process owns no
learning. ``collect`` waits for the workers' segment reports (phase ``sample``, sub-phase
``queue_wait``): at least ``num_workers`` of them and at least ``MIN_ITERATION_S`` since the
previous iteration, and returns them as a
:class:`~rlperf.core.shared_optim.WorkerUpdates` "batch" (their env steps, episodes and mean
loss metrics); the algorithm's ``update`` in the driver applies the learning-rate schedule
to the shared optimizer and passes the metrics on; ``sync_weights`` has nothing to do
(workers pull at each segment start). The workers time their own phases and report them:
``perf/worker_{sync,sample,learn}_time_ms``, ``perf/env_step_time_ms`` and
``perf/policy_forward_time_ms`` are means per segment.

A separate evaluation process (``runner.eval_interval_s`` > 0) plays greedy episodes with
the shared model's latest weights, never updating it; its returns appear as ``eval/...``.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

import torch
import torch.multiprocessing as torch_mp

from rlperf.config.schema import RunnerConfig
from rlperf.core.errors import ConfigError, WorkerError, describe_exit
from rlperf.core.protocols import Algorithm
from rlperf.core.resources import children_ignore_sigint
from rlperf.core.shared_optim import HogwildGradientStep, SharedOptimizer, WorkerUpdates
from rlperf.envs.base import EpisodeEnd
from rlperf.runners.env_slice import EnvSlice, EnvSliceFactory
from rlperf.runners.hogwild_worker import (
    SEGMENT_PHASES,
    SegmentReport,
    WorkerSetup,
    evaluator_main,
    worker_main,
)
from rlperf.telemetry.timers import PhaseTimer

SEGMENT_TIMEOUT_S = 300.0
"""Longest wait for any segment report before the workers are declared hung."""
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


@dataclass
class _Process:
    role: str
    index: int
    process: Any  # a torch.multiprocessing SpawnProcess
    conn: Connection

    @property
    def name(self) -> str:
        return f"{self.role} {self.index} (pid {self.process.pid})"


class HogwildRunner:
    """A3C's asynchronous workers on one shared model and one shared optimizer."""

    name = "hogwild"

    def __init__(
        self,
        cfg: RunnerConfig,
        algo: Algorithm,
        *,
        num_envs: int,
        make_env_slice: EnvSliceFactory,
        seed: int,
    ) -> None:
        if cfg.learner_device != "cpu" or cfg.actor_device != "cpu":
            # Hogwild shares one model through CPU shared memory; CUDA tensors would need
            # CUDA IPC and one device for every process, which this runner does not do.
            raise ConfigError(
                "the hogwild runner keeps its shared model in CPU shared memory: set "
                "runner.learner_device and runner.actor_device to cpu"
            )
        if cfg.eval_interval_s < 0:
            raise ConfigError(
                f"runner.eval_interval_s must be zero or positive, got {cfg.eval_interval_s}"
            )
        self.cfg = cfg
        self.learner_device = torch.device("cpu")
        self.actor_device = torch.device("cpu")
        self.shared = algo.policy.share_memory()
        self.optimizer = SharedOptimizer(
            [p for p in self.shared.parameters() if p.requires_grad], algo.optimizer_spec()
        )
        self.envs_per_worker = num_envs // cfg.num_workers
        self.resources: dict[tuple[str, int], dict[str, Any]] = {}
        self._started = False
        self._pending: deque[SegmentReport] = deque()
        self._eval_returns: deque[float] = deque(maxlen=100)
        self._eval_episodes = 0
        self._returns: deque[float] = deque(maxlen=100)
        self._worker_seconds: dict[str, float] = {}
        self._steps = 0
        self._segments = 0
        self._iteration_end = 0.0
        self._ctx = torch_mp.get_context("spawn")
        self.processes: list[_Process] = []
        try:
            for i in range(cfg.num_workers):
                first = i * self.envs_per_worker
                setup = WorkerSetup(
                    index=i,
                    first_env=first,
                    make_envs=EnvSlice(make_env_slice, self.envs_per_worker, seed + first, first),
                    env_seed=seed + first,
                    torch_seed=seed + 7919 * (i + 1),
                    algo=algo,
                    optimizer=self.optimizer,
                    torch_threads=cfg.actor_threads,
                    cpu_affinity=cfg.actor_cpu_affinity,
                )
                self.processes.append(self._spawn("worker", i, worker_main, setup))
            if cfg.eval_interval_s > 0:
                eval_seed = seed + 1_000_003  # episodes no worker plays
                setup = WorkerSetup(
                    index=0,
                    first_env=0,
                    make_envs=EnvSlice(make_env_slice, 1, eval_seed, EVAL_ENV),
                    env_seed=eval_seed,
                    torch_seed=seed + 104_729,
                    algo=algo,
                    optimizer=None,
                    torch_threads=1,
                    cpu_affinity=cfg.actor_cpu_affinity,
                    eval_interval_s=cfg.eval_interval_s,
                )
                self.processes.append(self._spawn("evaluator", 0, evaluator_main, setup))
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ processes

    def _spawn(
        self, role: str, index: int, target: Callable[..., None], setup: WorkerSetup
    ) -> _Process:
        parent_conn, child_conn = self._ctx.Pipe(duplex=True)
        process = self._ctx.Process(
            target=target, args=(setup, child_conn), name=f"rlperf-{role}-{index}", daemon=True
        )
        with children_ignore_sigint():
            process.start()
        child_conn.close()
        return _Process(role, index, process, parent_conn)

    def _handle(self, proc: _Process) -> None:
        """Every message waiting on ``proc``'s pipe."""
        while proc.conn.poll():
            try:
                message = proc.conn.recv()
            except (EOFError, OSError):
                proc.process.join(1.0)
                raise HogwildWorkerError(
                    f"{proc.name} died with {describe_exit(proc.process.exitcode)}"
                ) from None
            kind = message[0]
            if kind == "segment":
                self._pending.append(message[1])
            elif kind == "eval":
                self._eval_returns.append(float(message[1]))
                self._eval_episodes += 1
            elif kind == "hello":
                self.resources[(proc.role, proc.index)] = message[1]
            elif kind == "error":
                proc.process.join(2.0)
                raise HogwildWorkerError(f"{proc.name} raised {message[1]}", message[2])

    def _receive(self, timeout: float = SEGMENT_TIMEOUT_S, *, quiet: bool = False) -> None:
        """Block until a message arrives or a process dies; handle what arrived. Silence
        for ``timeout`` seconds is an error unless ``quiet``."""
        conns = {p.conn: p for p in self.processes}
        sentinels = {p.process.sentinel: p for p in self.processes}
        ready = wait([*conns, *sentinels], timeout)
        if not ready:
            if quiet:
                return
            raise HogwildWorkerError(
                f"no report from any of {self.cfg.num_workers} workers within {timeout:g} s"
            )
        for handle in ready:
            if handle in conns:
                self._handle(conns[handle])
        for handle in ready:
            proc = sentinels.get(handle)  # type: ignore[call-overload]
            if proc is not None:
                self._handle(proc)  # a report sent just before dying still counts
                proc.process.join(1.0)
                raise HogwildWorkerError(
                    f"{proc.name} died with {describe_exit(proc.process.exitcode)}"
                )

    # ------------------------------------------------------------------ Runner

    def make_gradient_step(self, algo: Algorithm) -> HogwildGradientStep:
        """The driver's step: it owns the learning-rate schedule and the optimizer's state
        for checkpoints; its gradient steps are never called (workers make them)."""
        return HogwildGradientStep(self.shared, self.shared, self.optimizer)

    def collect(self, timer: PhaseTimer) -> tuple[WorkerUpdates, list[EpisodeEnd]]:  # type: ignore[override]
        if not self._started:
            while len(self.resources) < len(self.processes):  # every process built its envs
                self._receive()
            for proc in self.processes:
                proc.conn.send(("start",))
            self._started = True
            self._iteration_end = time.monotonic() + MIN_ITERATION_S
        with timer.phase("queue_wait"):
            while True:
                enough = len(self._pending) >= self.cfg.num_workers
                left = self._iteration_end - time.monotonic()
                if enough and left <= 0:
                    break
                self._receive(left if enough else SEGMENT_TIMEOUT_S, quiet=enough)
        # Anything else already waiting is taken too, without blocking.
        for proc in self.processes:
            self._handle(proc)
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
        batch = WorkerUpdates(
            num_steps=self._steps, num_envs=1, metrics=metrics, segments=len(reports)
        )
        return batch, episodes

    def load(self, batch: WorkerUpdates) -> WorkerUpdates:  # type: ignore[override]
        return batch

    def sync_weights(self) -> None:
        """Nothing to do: each worker copies the shared weights at its segment's start."""

    def worker_metrics(self) -> dict[str, float]:
        workers = [p for p in self.processes if p.role == "worker"]
        metrics = {
            "sys/live_workers": float(sum(p.process.is_alive() for p in workers)),
            "sys/worker_restarts": 0.0,
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

    def process_resources(self) -> list[dict[str, Any]]:
        return [self.resources[k] for k in sorted(self.resources)]

    def state_dict(self) -> dict[str, Any]:
        # Workers run their own episodes asynchronously: no consistent env snapshot exists,
        # so a resumed run starts new episodes (weights and optimizer state are kept).
        return {"envs": None}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        del state

    def close(self) -> None:
        for proc in self.processes:
            with contextlib.suppress(OSError):
                proc.conn.send(("stop",))
        deadline = time.monotonic() + 5.0
        # A worker blocked on sending a report would never read "stop": keep draining.
        while time.monotonic() < deadline and any(p.process.is_alive() for p in self.processes):
            for proc in self.processes:
                with contextlib.suppress(EOFError, OSError):
                    while proc.conn.poll():
                        proc.conn.recv()
            time.sleep(0.01)
        for proc in self.processes:
            if proc.process.is_alive():
                proc.process.kill()
                proc.process.join(5.0)
            proc.conn.close()
