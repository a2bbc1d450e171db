"""The parent's side of every runner's worker processes, written once.

The decoupled runner's actors, the play-train runner's play process and the hogwild
runner's workers and evaluator are supervised the same way (their child side is
:mod:`rlperf.runners.child`):

- **spawn**: a ``spawn`` process (no inherited torch or env state) with a duplex pipe,
  started with SIGINT ignored (the session stops it, not the terminal's Ctrl-C);
- **start**: wait until every worker has built its envs and said ``("hello", resources)``,
  then send each its start message;
- **receive**: block on every pipe and every process sentinel at once; silence for
  ``runner.worker_timeout_s`` means the workers hang; ``hello`` and ``error`` are handled
  here, every other message goes to the runner;
- **fail**: a worker that raised, died or closed its pipe is restarted with fresh env seeds
  (``runner.restart_failed_workers``, at most ``runner.max_worker_restarts`` in the run),
  otherwise the runner's error is raised with the worker's traceback attached;
- **close**: ask every worker to stop, keep draining their pipes (a worker blocked on a
  send never reads "stop"), then kill what is left.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

import torch.multiprocessing as torch_mp

from rlperf.config.schema import RunnerConfig
from rlperf.core.errors import WorkerError, describe_exit
from rlperf.core.resources import children_ignore_sigint

WORKER_TIMEOUT_S = 300.0
"""Longest wait for any worker's message before the workers are declared hung (start-up
included), when runner.worker_timeout_s is unset."""


@dataclass(frozen=True)
class WorkerSeeds:
    """Where worker ``index``'s envs sit in the batch and how it is seeded."""

    first_env: int
    env_seed: int
    """Seed of its first env (env i of the slice gets ``env_seed + i``)."""
    torch_seed: int


def worker_seeds(seed: int, index: int, envs_per_worker: int, seed_offset: int = 0) -> WorkerSeeds:
    """The seeds of worker ``index``: its envs continue the run's env seeds (so N workers of
    k envs see the seeds one process of N*k envs would), its torch seed is far from every
    other worker's; ``seed_offset`` gives a restarted worker seeds of its own."""
    first = index * envs_per_worker
    return WorkerSeeds(
        first_env=first,
        env_seed=seed + first + seed_offset,
        torch_seed=seed + 7919 * (index + 1) + seed_offset,
    )


class RestartBudget:
    """How many failed workers a run may still replace: at most ``runner.max_worker_restarts``
    over the whole run (the count carries over a resume), none with
    ``runner.restart_failed_workers`` off. Every process runner draws on one."""

    def __init__(self, cfg: RunnerConfig) -> None:
        self.cfg = cfg
        self.used = 0
        """Restarts spent so far in the run (``sys/worker_restarts``)."""

    def take(self, what: str, cause: object) -> bool:
        """Spend one restart on ``what`` and say so on stderr; False when none is left."""
        cfg = self.cfg
        if not (cfg.restart_failed_workers and self.used < cfg.max_worker_restarts):
            return False
        self.used += 1
        print(
            f"rlperf: restarting {what} (restart {self.used} of at most "
            f"{cfg.max_worker_restarts}) after: {cause}",
            file=sys.stderr,
            flush=True,
        )
        return True

    def state_dict(self) -> dict[str, int]:
        return {"worker_restarts": self.used}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.used = int(state.get("worker_restarts", 0))  # absent in older checkpoints


def worker_timeout(cfg: RunnerConfig) -> float:
    """How long a runner waits for any worker's message before they count as hung."""
    return WORKER_TIMEOUT_S if cfg.worker_timeout_s is None else cfg.worker_timeout_s


@dataclass
class Worker:
    """One supervised process and the parent's end of its pipe."""

    role: str
    index: int
    process: Any  # a torch.multiprocessing SpawnProcess
    conn: Connection


ErrorFactory = Callable[[str, Worker | None, str | None], WorkerError]
"""Builds the runner's error from (message, the worker or None when all are silent, the
worker-side traceback)."""


class Supervisor:
    """Spawns, watches, restarts and stops one runner's worker processes.

    The runner supplies what differs: how a worker is described in messages, the error
    type it raises, what to do with its own messages (``on_message``) and how to start a
    worker again after a failure (``respawn(worker, seed_offset)``, which calls
    :meth:`spawn`; None: failures are never restarted).
    """

    def __init__(
        self,
        cfg: RunnerConfig,
        *,
        describe: Callable[[Worker], str],
        make_error: ErrorFactory,
        on_message: Callable[[Worker, tuple], None],
        respawn: Callable[[Worker, int], None] | None,
        silence: str,
    ) -> None:
        self.cfg = cfg
        self.describe = describe
        self.make_error = make_error
        self.on_message = on_message
        self.respawn = respawn
        self.silence = silence
        """What the timeout error says nobody sent, e.g. "no rollout from any of 2 actors"."""
        self.workers: list[Worker] = []
        self.resources: dict[tuple[str, int], dict[str, Any]] = {}
        self.budget = RestartBudget(cfg)
        self._start_message: Callable[[], tuple] | None = None
        self._ctx = torch_mp.get_context("spawn")

    # ------------------------------------------------------------------ processes

    def spawn(
        self, role: str, index: int, target: Callable[[Any, Connection], None], setup: Any
    ) -> Worker:
        """Start ``target(setup, conn)`` as worker ``role index``; it replaces a worker of
        the same role and index (a restart) or is added."""
        parent_conn, child_conn = self._ctx.Pipe(duplex=True)
        process = self._ctx.Process(
            target=target, args=(setup, child_conn), name=f"rlperf-{role}-{index}", daemon=True
        )
        with children_ignore_sigint():
            process.start()
        child_conn.close()
        worker = Worker(role, index, process, parent_conn)
        self.resources.pop((role, index), None)
        for i, old in enumerate(self.workers):
            if (old.role, old.index) == (role, index):
                self.workers[i] = worker
                break
        else:
            self.workers.append(worker)
        if self._start_message is not None:  # a restart after the start: it starts at once
            self.send(worker, self._start_message())
        return worker

    def start(
        self, message: Callable[[], tuple], before: Callable[[], None] = lambda: None
    ) -> None:
        """Wait until every worker said hello, call ``before`` (e.g. publish the first
        weights), then send each worker ``message()``; a worker restarted later gets it
        when spawned."""
        while len(self.resources) < len(self.workers):
            self.receive()
        before()
        self._start_message = message
        for worker in self.workers:
            self.send(worker, message())

    @property
    def started(self) -> bool:
        return self._start_message is not None

    def send(self, worker: Worker, message: tuple) -> None:
        """Send ``message``; a dead worker's pipe is ignored (its restart is pending)."""
        with contextlib.suppress(OSError):
            worker.conn.send(message)

    def live(self, role: str | None = None) -> int:
        """How many workers (of ``role``) are alive."""
        return sum(w.process.is_alive() for w in self.workers if role in (None, w.role))

    def process_resources(self) -> list[dict[str, Any]]:
        """Every worker's hello, in (role, index) order (the manifest's processes)."""
        return [self.resources[k] for k in sorted(self.resources)]

    # ------------------------------------------------------------------ messages

    def fail(self, worker: Worker, cause: str, worker_traceback: str | None = None) -> None:
        """Restart a failed worker or raise the runner's error."""
        error = self.make_error(f"{self.describe(worker)} {cause}", worker, worker_traceback)
        if self.respawn is None or not self.budget.take(self.describe(worker), cause):
            raise error
        self._stop(worker)
        self.respawn(worker, self.budget.used)

    def drain(self, worker: Worker) -> None:
        """Handle every message waiting on ``worker``'s pipe."""
        while self._current(worker) and worker.conn.poll():
            try:
                message = worker.conn.recv()
            except (EOFError, OSError):
                worker.process.join(1.0)
                self.fail(worker, f"died with {describe_exit(worker.process.exitcode)}")
                return
            kind = message[0]
            if kind == "hello":
                self.resources[(worker.role, worker.index)] = message[1]
            elif kind == "error":
                worker.process.join(2.0)
                self.fail(worker, f"raised {message[1]}", message[2])
                return
            else:
                self.on_message(worker, message)

    def receive(self, timeout: float | None = None, *, quiet: bool = False) -> None:
        """Block until a message arrives or a worker dies, and handle what arrived. Silence
        for ``timeout`` (default: runner.worker_timeout_s) is an error unless ``quiet``."""
        if timeout is None:
            timeout = worker_timeout(self.cfg)
        conns = {w.conn: w for w in self.workers}
        sentinels = {w.process.sentinel: w for w in self.workers}
        ready = wait([*conns, *sentinels], timeout)
        if not ready:
            if quiet:
                return
            raise self.make_error(
                f"{self.silence} within {timeout:g} s (runner.worker_timeout_s)", None, None
            )
        for handle in ready:
            if handle in conns:
                self.drain(conns[handle])
        for handle in ready:
            worker = sentinels.get(handle)  # type: ignore[call-overload]
            if worker is not None and self._current(worker):
                self.drain(worker)  # a report sent just before dying is still valid
                if self._current(worker):
                    worker.process.join(1.0)
                    self.fail(worker, f"died with {describe_exit(worker.process.exitcode)}")

    def drain_all(self) -> None:
        """Handle whatever every worker has sent, without blocking."""
        for worker in list(self.workers):
            self.drain(worker)

    def _current(self, worker: Worker) -> bool:
        """Whether ``worker`` is still supervised (not replaced by a restart)."""
        return any(w is worker for w in self.workers)

    # ------------------------------------------------------------------ stopping

    def _stop(self, worker: Worker) -> None:
        if worker.process.is_alive():
            worker.process.kill()
        worker.process.join(5.0)
        worker.conn.close()

    def close(self, grace_s: float = 5.0) -> None:
        """Ask every worker to stop; kill those still alive after ``grace_s``."""
        for worker in self.workers:
            self.send(worker, ("stop",))
        deadline = time.monotonic() + grace_s
        # A worker blocked on sending a report would never read "stop": keep draining.
        while time.monotonic() < deadline and any(w.process.is_alive() for w in self.workers):
            for worker in self.workers:
                with contextlib.suppress(EOFError, OSError):
                    while worker.conn.poll():
                        worker.conn.recv()
            time.sleep(0.01)
        for worker in self.workers:
            self._stop(worker)


class SupervisedRunner:
    """The Runner methods of a runner whose workers run ahead of its learner (decoupled,
    hogwild): resources from the workers' hellos, restarts kept across a resume, and no env
    snapshot (there is no consistent one to keep: a resumed run starts new episodes)."""

    workers: Supervisor

    def process_resources(self) -> list[dict[str, Any]]:
        return self.workers.process_resources()

    def state_dict(self) -> dict[str, Any]:
        return {"envs": None, **self.workers.budget.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.workers.budget.load_state_dict(state)

    def close(self) -> None:
        self.workers.close()
