"""Vector of :class:`SingleEnv` stepped by worker processes, frames passed through shared memory.

:class:`SubprocVectorEnv` is a drop-in replacement for
:class:`~rlperf.envs.vector.SyncVectorEnv` (same methods, same :class:`VecStep`, same-step
autoreset, same seeds, interchangeable :meth:`get_state` snapshots) whose ``N`` envs are
split over ``W`` worker processes, ``N / W`` consecutive envs each, so that emulation runs on
``W`` cores at once.

Data path. Everything that is per-env and per-step lives in ONE shared-memory segment that
the parent and every worker map: the observation batch ``(N, *obs_shape)`` that the workers
write straight into (the parent's ``obs`` is a view of it, no copy), a second
``(N, *obs_shape)`` area for the final observations of truncated envs (rare) with a flag per
env, and the actions, rewards, terminations and truncations. No frame ever goes through a
pipe: a step is one 1-byte message to each worker and one short reply from each (a tag byte
plus 24 bytes per finished game). Pickled messages are used only for rare requests
(construction, ``reset``, ``get_state``, ``set_state``, ``close``) between the parent and
its own children.

Start method. ``spawn`` by default: every worker is a fresh interpreter that inherits
nothing from the parent (no torch threads, no CUDA context, no other worker's pipe ends, so
a worker's death reads as EOF). Measured on 2 cores for 8 Pong envs in 2 workers,
construction takes 0.50 s with spawn, 0.48 s with forkserver and 0.31 s with forkserver
preloading ``rlperf.envs.atari`` (after 0.47 s for the first, which starts the server):
the ~0.2 s saved once per run does not pay for a long-lived server process outside our
process tree, a process-global preload list, and workers that are not our children.
``forkserver`` remains available; ``fork`` is refused.

Failure handling. An exception raised by an env in a worker becomes an
:class:`EnvWorkerError` naming the env, the worker and the original exception; a worker that
dies is noticed at once (the parent waits on the worker's pipe AND its process sentinel, so
a dead worker wakes the wait) and one that hangs after ``step_timeout_s``. After such an
error the vector env refuses further use until :meth:`SubprocVectorEnv.restart_worker`
replaces the failed worker (fresh envs from the same factories, attached to the same
segment), and :meth:`SubprocVectorEnv.close` (or, failing that, garbage collection or
interpreter exit, through ``weakref.finalize``) still stops every worker and unlinks the
shared memory.

Layout. This module is the parent side (:class:`SubprocVectorEnv`, its clean-up and
:func:`make_subproc_vector_env`); the code that runs inside a worker, and the pipe protocol,
are in :mod:`rlperf.envs.subproc_worker`; the shared-memory layout and segment helpers are in
:mod:`rlperf.envs.subproc_shm`.

Long because the parent's side and the shared-memory protocol must be read together; the
worker's side is subproc_worker.py.
"""

from __future__ import annotations

import contextlib
import functools
import mmap
import multiprocessing
import multiprocessing.connection
import pickle
import select
import time
import weakref
from collections.abc import Callable, Sequence
from multiprocessing import shared_memory
from multiprocessing.process import BaseProcess
from typing import Any

import gymnasium
import numpy as np

from rlperf.config.schema import EnvConfig
from rlperf.core.errors import WorkerError, describe_exit
from rlperf.core.resources import children_ignore_sigint
from rlperf.envs.base import EnvState, EpisodeEnd, SingleEnv
from rlperf.envs.make import make_env, validate_env_id
from rlperf.envs.subproc_shm import create_segment, map_views, region_layout
from rlperf.envs.subproc_worker import (
    EPISODE,
    STEP,
    TAG_ERROR,
    TAG_OK,
    TAG_STEPPED,
    rooms_of,
    worker_main,
)
from rlperf.envs.vector import VecStep

__all__ = ["EnvWorkerError", "SubprocVectorEnv", "make_subproc_vector_env"]

_STARTUP_TIMEOUT_S = 120.0  # imports + env construction on a loaded machine
_JOIN_TIMEOUT_S = 5.0  # how long close() lets workers exit by themselves


class EnvWorkerError(WorkerError):
    """An env worker failed: its env raised, the process died, or it stopped answering.

    The vector env that raised it is unusable afterwards until ``restart_worker()`` replaces
    the failed worker (or call ``close()``).
    """

    def __init__(
        self,
        message: str,
        *,
        worker_index: int | None,
        env_index: int | None = None,
        exc_type: str | None = None,
        exitcode: int | None = None,
        worker_traceback: str | None = None,
    ) -> None:
        super().__init__(message)
        self.worker_index = worker_index
        """Index of the worker process (0 .. num_workers - 1); None if not one worker's fault."""
        self.env_index = env_index
        """Index of the env whose code raised, in the vector; None for deaths and timeouts."""
        self.exc_type = exc_type
        """Qualified name of the original exception type, if an env raised."""
        self.exitcode = exitcode
        """Exit code of a dead worker (negative: killed by that signal)."""
        self.worker_traceback = worker_traceback
        """Traceback text of the original exception, formatted in the worker."""
        self.pickled_exception: bytes | None = None
        """The original exception, pickled in the worker (None if it could not be)."""
        if worker_traceback:
            # Shown under the parent's traceback when nobody catches the error.
            self.add_note("worker-side traceback:\n" + worker_traceback.rstrip())

    def __reduce__(self) -> tuple[Any, ...]:
        # Keep the keyword-only attributes when pickled (default exception pickling would
        # call __init__(message) and lose them).
        kwargs = {
            "worker_index": self.worker_index,
            "env_index": self.env_index,
            "exc_type": self.exc_type,
            "exitcode": self.exitcode,
            "worker_traceback": self.worker_traceback,
        }
        return (functools.partial(EnvWorkerError, **kwargs), (str(self),))


# ---------------------------------------------------------------------------- parent side


class _Resources:
    """What must be released even if the vector env is never closed: the finalizer's state.

    Kept apart from the vector env so that ``weakref.finalize`` does not keep it alive.
    """

    def __init__(self) -> None:
        self.processes: list[BaseProcess] = []
        self.conns: list[multiprocessing.connection.Connection] = []
        self.segment: shared_memory.SharedMemory | None = None
        self.mapping: mmap.mmap | None = None
        self.unresponsive: set[int] = set()
        """Workers that timed out: close() terminates them without waiting for them to exit."""


def _release(resources: _Resources) -> None:
    """Stop and join every worker (killing stragglers), then close and unlink the segment."""
    close_message = pickle.dumps(("close", None))
    for conn in resources.conns:
        with contextlib.suppress(OSError):
            conn.send_bytes(close_message)
        # Our end closed = EOF for a worker that missed the message; it exits either way.
        with contextlib.suppress(OSError):
            conn.close()
    deadline = time.monotonic() + _JOIN_TIMEOUT_S
    for w, process in enumerate(resources.processes):
        if w not in resources.unresponsive:
            process.join(max(0.0, deadline - time.monotonic()))
    for process in resources.processes:
        if process.exitcode is None:  # hung in an env: SIGTERM, then SIGKILL
            process.terminate()
            process.join(1.0)
        if process.exitcode is None:
            process.kill()
            process.join(5.0)
        with contextlib.suppress(ValueError):
            process.close()  # releases the sentinel descriptor
    resources.processes.clear()
    resources.conns.clear()
    if resources.mapping is not None:
        # Fails while the caller still holds an observation view: the mapping then lives on
        # until the view dies, which is harmless once the name is unlinked.
        with contextlib.suppress(BufferError):
            resources.mapping.close()
        resources.mapping = None
    if resources.segment is not None:
        with contextlib.suppress(FileNotFoundError):
            resources.segment.unlink()
        resources.segment = None


def _put(items: list[Any], index: int, item: Any) -> None:
    """``items[index] = item``, appending when ``index`` is one past the end."""
    if index == len(items):
        items.append(item)
    else:
        items[index] = item


class SubprocVectorEnv:
    """Steps N envs in W worker processes; same interface and results as SyncVectorEnv.

    Env ``i`` is built by ``env_fns[i]`` inside worker ``i // (N / W)``. Autoreset is
    SAME-STEP, exactly as in :class:`~rlperf.envs.vector.SyncVectorEnv`: after
    ``step`` the observation of an env whose episode ended is the first of its next episode,
    and the final observation of a truncated episode is in :attr:`VecStep.final_obs`.

    The observation batch returned by :meth:`reset`, :meth:`step` and :meth:`set_state` is a
    zero-copy numpy view of the shared memory the workers write into: like SyncVectorEnv's
    buffer it is valid until the next of these calls (callers that keep observations copy
    them). Rewards, terminations, truncations and final observations are returned as the
    caller's own arrays.

    Differences from SyncVectorEnv: there is no ``envs`` list (the envs live in the
    workers); an exception inside an env during :meth:`reset`/:meth:`step` (or a dead or
    hung worker anywhere) raises :class:`EnvWorkerError` and leaves the vector unusable
    until :meth:`restart_worker` replaces that worker,
    while an exception from an env's ``get_state``/``set_state`` is re-raised with its own
    type (e.g. ``NotImplementedError`` for envs without snapshots, as runners expect) and
    the vector stays usable.

    The parent's ``__main__`` must be importable without side effects (the usual
    ``if __name__ == "__main__":`` guard), because spawned workers import it.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], SingleEnv]],
        num_workers: int,
        *,
        start_method: str = "spawn",
        step_timeout_s: float = 60.0,
    ) -> None:
        """Start ``num_workers`` processes and build the envs in them.

        ``env_fns`` must be picklable (module-level functions or classes, or
        ``functools.partial`` of them) and ``len(env_fns)`` a multiple of ``num_workers``.
        ``start_method`` is ``"spawn"`` (default: fresh interpreters, nothing of the
        parent's threads or torch state inherited) or ``"forkserver"``; ``"fork"`` is
        refused. ``step_timeout_s`` bounds every wait for a worker (start-up gets at least
        120 s for imports and env construction).
        """
        env_fns = list(env_fns)
        num_envs = len(env_fns)
        if num_envs < 1:
            raise ValueError("SubprocVectorEnv needs at least one env")
        if not isinstance(num_workers, int) or not 1 <= num_workers <= num_envs:
            raise ValueError(f"num_workers must be an int in [1, {num_envs}], got {num_workers!r}")
        if num_envs % num_workers:
            raise ValueError(
                f"the number of envs ({num_envs}) must be a multiple of num_workers "
                f"({num_workers}): every worker steps the same number of envs"
            )
        if start_method not in ("spawn", "forkserver"):
            raise ValueError(
                f"start_method must be 'spawn' or 'forkserver', got {start_method!r} "
                "('fork' would copy the parent's threads and torch state into the workers)"
            )
        if not step_timeout_s > 0:
            raise ValueError(f"step_timeout_s must be > 0, got {step_timeout_s!r}")

        self.num_envs = num_envs
        self.num_workers = num_workers
        self.envs_per_worker = num_envs // num_workers
        self._step_timeout_s = float(step_timeout_s)
        self._closed = False
        self._broken: BaseException | None = None
        """The first worker failure (or interruption mid-request) that broke the vector."""
        self._resources = _Resources()
        # Registered before anything exists, so a failure half-way leaks nothing.
        self._finalizer = weakref.finalize(self, _release, self._resources)
        self._pollers: list[select.poll] = []
        self._awaiting: set[int] = set()
        """Workers sent a request whose reply has not been read (restart_worker drains them)."""
        self._context = multiprocessing.get_context(start_method)
        self._payloads: list[bytes] = []
        try:
            self._start_workers(env_fns, self._context)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ construction

    def _start_workers(
        self, env_fns: list[Callable[[], SingleEnv]], context: multiprocessing.context.BaseContext
    ) -> None:
        k = self.envs_per_worker
        payloads = []
        for w in range(self.num_workers):
            try:
                payloads.append(pickle.dumps(env_fns[w * k : (w + 1) * k]))
            except Exception as exc:
                raise TypeError(
                    f"env_fns for envs {w * k}..{(w + 1) * k - 1} cannot be pickled "
                    f"({type(exc).__name__}: {exc}); use module-level functions/classes or "
                    "functools.partial of them"
                ) from exc
        self._payloads = payloads
        resources = self._resources
        with children_ignore_sigint():
            for w in range(self.num_workers):
                self._spawn(w, context)

        startup_timeout = max(self._step_timeout_s, _STARTUP_TIMEOUT_S)
        spaces: list[tuple[gymnasium.spaces.Box, gymnasium.spaces.Discrete]] = []
        for w in range(self.num_workers):
            reply = self._receive(w, startup_timeout, "env construction")
            spaces += self._result(w, reply, "env construction")
        obs_space, act_space = spaces[0]
        for i, (o, a) in enumerate(spaces):
            if o.shape != obs_space.shape or o.dtype != obs_space.dtype or a != act_space:
                raise ValueError(
                    f"env {i} has spaces {o}, {a} but env 0 has {obs_space}, {act_space}: "
                    "all envs of a vector must share them"
                )
        self.single_observation_space: gymnasium.spaces.Box = obs_space
        self.single_action_space: gymnasium.spaces.Discrete = act_space

        layout, size = region_layout(self.num_envs, obs_space.shape, np.dtype(obs_space.dtype))
        self._layout = layout
        resources.segment, resources.mapping = create_segment(size)
        views = map_views(resources.mapping, layout)
        self._obs = views["obs"]
        self._final_obs = views["final_obs"]
        self._final_flags = views["final_flags"]
        self._actions = views["actions"]
        self._rewards = views["rewards"]
        self._terminations = views["terminations"]
        self._truncations = views["truncations"]
        attach = pickle.dumps(("attach", (resources.segment.name, layout)))
        for w in range(self.num_workers):
            self._send(w, attach, "start-up")
        for w in range(self.num_workers):
            self._result(w, self._receive(w, startup_timeout, "start-up"), "start-up")

    def _spawn(self, w: int, context: multiprocessing.context.BaseContext) -> None:
        """Start worker ``w`` (its envs not built yet): appended at start-up, else replaced."""
        k = self.envs_per_worker
        resources = self._resources
        parent_conn, child_conn = context.Pipe(duplex=True)
        _put(resources.conns, w, parent_conn)
        process = context.Process(
            target=worker_main,
            args=(w, w * k, self._payloads[w], child_conn),
            name=f"rlperf-env-worker-{w}",
            daemon=True,
        )
        process.start()
        _put(resources.processes, w, process)
        # Only the child may hold its end, so its death reads as EOF here.
        child_conn.close()
        poller = select.poll()
        poller.register(parent_conn.fileno(), select.POLLIN)
        poller.register(process.sentinel, select.POLLIN)
        _put(self._pollers, w, poller)

    # ------------------------------------------------------------------ public API

    @property
    def worker_pids(self) -> list[int | None]:
        """Process ids of the workers, in worker order (for monitoring or CPU pinning)."""
        return [p.pid for p in self._resources.processes]

    @property
    def live_workers(self) -> int:
        """Worker processes alive now (for the ``sys/live_workers`` metric)."""
        return sum(p.is_alive() for p in self._resources.processes)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has run."""
        return self._closed

    def reset(self, seed: int) -> np.ndarray:
        """Reset every env, env ``i`` with ``seed + i``; returns the observation buffer."""
        request = pickle.dumps(("reset", int(seed)))
        self._request_all([request] * self.num_workers, "reset", fatal=True)
        return self._obs

    def step(self, actions: np.ndarray) -> VecStep:
        """Apply ``actions[i]`` to env ``i``, autoresetting finished envs in the same step."""
        self._check_usable()
        n = self.num_envs
        actions = np.asarray(actions)
        if actions.size != n:
            raise ValueError(f"expected {n} actions, got an array of shape {actions.shape}")
        # same_kind: any integer dtype is fine, float actions are refused rather than truncated.
        np.copyto(self._actions, actions.reshape(n), casting="same_kind")
        episodes: list[EpisodeEnd] = []
        error: EnvWorkerError | None = None
        try:
            for w in range(self.num_workers):
                self._send(w, STEP, "step")
            for w in range(self.num_workers):
                reply = self._receive(w, self._step_timeout_s, "step")
                if reply[0] == TAG_STEPPED:
                    if len(reply) > 1:
                        episodes += [
                            EpisodeEnd(i, ret, length, rooms_of(mask))
                            for i, ret, length, mask in EPISODE.iter_unpack(memoryview(reply)[1:])
                        ]
                elif error is None:
                    # Keep reading the other workers' replies so none is left in a pipe.
                    error = self._reply_error(w, reply, "step")
        except BaseException as exc:
            # Death, timeout or Ctrl-C mid-step: replies may still be in flight.
            self._broken = self._broken or exc
            raise
        if error is not None:
            self._broken = error
            raise error
        final_obs: dict[int, np.ndarray] = {}
        if self._final_flags.any():  # rare: a step limit cut an episode
            final_obs = {int(i): self._final_obs[i].copy() for i in self._final_flags.nonzero()[0]}
        return VecStep(
            self._obs,
            self._rewards.copy(),
            self._terminations.copy(),
            self._truncations.copy(),
            episodes,
            final_obs,
        )

    def restart_worker(self, worker_index: int, seed: int) -> np.ndarray:
        """Replace worker ``worker_index`` after a failure; returns the observation buffer.

        The failed process is killed (if still there) and reaped, and a fresh one builds the
        same envs from the same factories, attaches the existing shared-memory segment and
        resets its envs, env ``i`` with ``seed + i`` (pass a seed that differs per restart).
        The vector is usable again afterwards; the other workers' envs keep their state.

        Stale replies: a death or timeout during :meth:`step` interrupts the reading of the
        other workers' replies, though those workers finish their step (their envs advance
        and write their results into shared memory). Those replies are read and DISCARDED
        here, so the next step reads its own replies; the rewards and episode ends of that
        interrupted step are lost (the caller treats the step as ended, see SubprocRunner).
        A failure while draining, or while starting the new worker, propagates and leaves
        the vector unusable.
        """
        if self._closed:
            raise RuntimeError("SubprocVectorEnv is closed")
        w = worker_index
        if not isinstance(w, int) or not 0 <= w < self.num_workers:
            raise ValueError(f"worker_index must be in [0, {self.num_workers}), got {w!r}")
        resources = self._resources
        try:
            for v in sorted(self._awaiting - {w}):
                reply = self._receive(v, self._step_timeout_s, "restart (draining a reply)")
                if reply[0] == TAG_ERROR:
                    raise self._reply_error(v, reply, "the step before a restart")
            self._awaiting.discard(w)
            old = resources.processes[w]
            with contextlib.suppress(OSError):
                resources.conns[w].close()
            if old.exitcode is None:  # raised or hung: fresh envs anyway
                old.kill()
                old.join(5.0)
            resources.unresponsive.discard(w)
            try:
                with children_ignore_sigint():
                    self._spawn(w, self._context)
            finally:
                if resources.processes[w] is not old:
                    with contextlib.suppress(ValueError):
                        old.close()  # releases the sentinel descriptor
            startup_timeout = max(self._step_timeout_s, _STARTUP_TIMEOUT_S)
            spaces = self._result(w, self._receive(w, startup_timeout, "restart"), "restart")
            for o, a in spaces:
                if (
                    o.shape != self.single_observation_space.shape
                    or o.dtype != self.single_observation_space.dtype
                    or a != self.single_action_space
                ):
                    raise ValueError(f"restarted worker {w} built envs with spaces {o}, {a}")
            assert resources.segment is not None
            attach = pickle.dumps(("attach", (resources.segment.name, self._layout)))
            self._send(w, attach, "restart")
            self._result(w, self._receive(w, startup_timeout, "restart"), "restart")
            self._send(w, pickle.dumps(("reset", int(seed))), "restart")
            self._result(w, self._receive(w, self._step_timeout_s, "restart"), "restart")
        except BaseException as exc:
            self._broken = exc
            raise
        self._broken = None
        return self._obs

    def get_state(self) -> list[EnvState]:
        """Exact snapshots of every env, in order (the same states SyncVectorEnv gives)."""
        request = pickle.dumps(("get_state", None))
        results = self._request_all([request] * self.num_workers, "get_state", fatal=False)
        return [state for states in results for state in states]

    def set_state(self, states: Sequence[EnvState]) -> np.ndarray:
        """Restore every env; returns the observation buffer filled with their current obs."""
        if len(states) != self.num_envs:
            raise ValueError(f"got {len(states)} env states for {self.num_envs} envs")
        states = list(states)
        k = self.envs_per_worker
        requests = [
            pickle.dumps(("set_state", states[w * k : (w + 1) * k]))
            for w in range(self.num_workers)
        ]
        self._request_all(requests, "set_state", fatal=False)
        return self._obs

    def close(self) -> None:
        """Stop every worker (closing its envs) and release the shared memory; idempotent."""
        self._closed = True
        self._finalizer()

    def __enter__(self) -> SubprocVectorEnv:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ internals

    def _check_usable(self) -> None:
        if self._closed:
            raise RuntimeError("SubprocVectorEnv is closed")
        broken = self._broken
        if broken is not None:
            raise EnvWorkerError(
                f"SubprocVectorEnv is unusable after an earlier error "
                f"({type(broken).__name__}: {broken}); close() it",
                worker_index=getattr(broken, "worker_index", None),
                env_index=getattr(broken, "env_index", None),
            )

    def _request_all(self, requests: list[bytes], what: str, *, fatal: bool) -> list[Any]:
        """Send ``requests[w]`` (pickled) to every worker w, then collect the replies in order.

        The requests are built by the caller, so a bad argument fails before anything is
        sent and leaves the vector usable. ``fatal``: an env exception breaks the vector
        (reset: envs are half reset) and is an EnvWorkerError; otherwise it is re-raised with
        its original type (snapshots), as SyncVectorEnv would raise it.
        """
        self._check_usable()
        results: list[Any] = []
        error: BaseException | None = None
        try:
            for w in range(self.num_workers):
                self._send(w, requests[w], what)
            for w in range(self.num_workers):
                reply = self._receive(w, self._step_timeout_s, what)
                if reply[0] == TAG_ERROR:
                    if error is None:
                        error = self._reply_error(w, reply, what)
                    continue
                results.append(self._result(w, reply, what))
        except BaseException as exc:
            self._broken = self._broken or exc
            raise
        if error is not None:
            if fatal:
                self._broken = error
                raise error
            original = _unpickle_exception(error)
            if original is not None:
                raise original from error
            raise error
        return results

    def _send(self, w: int, data: bytes, what: str) -> None:
        try:
            self._resources.conns[w].send_bytes(data)
        except OSError as exc:  # broken pipe: the worker is gone
            raise self._dead_error(w, what) from exc
        self._awaiting.add(w)

    def _receive(self, w: int, timeout_s: float, what: str) -> bytes:
        """The next message from worker ``w``; raises if it dies or stays silent too long."""
        conn = self._resources.conns[w]
        # One poll() on the pipe AND the process sentinel: a reply or a death wakes it at once.
        events = self._pollers[w].poll(timeout_s * 1000.0)
        if not events:
            self._resources.unresponsive.add(w)
            lo = w * self.envs_per_worker
            raise EnvWorkerError(
                f"env worker {w} (envs {lo}..{lo + self.envs_per_worker - 1}) did not answer "
                f"within {timeout_s:g} s during {what}",
                worker_index=w,
            )
        conn_fd = conn.fileno()
        if any(fd == conn_fd for fd, _ in events):
            try:
                message = conn.recv_bytes()
            except (EOFError, OSError) as exc:
                raise self._dead_error(w, what) from exc
            self._awaiting.discard(w)
            return message
        raise self._dead_error(w, what)

    def _dead_error(self, w: int, what: str) -> EnvWorkerError:
        process = self._resources.processes[w]
        process.join(1.0)  # reap it to read its exit status
        lo = w * self.envs_per_worker
        return EnvWorkerError(
            f"env worker {w} (envs {lo}..{lo + self.envs_per_worker - 1}, pid {process.pid}) "
            f"died during {what} with {describe_exit(process.exitcode)}",
            worker_index=w,
            exitcode=process.exitcode,
        )

    def _result(self, w: int, reply: bytes, what: str) -> Any:
        """The payload of an OK reply; raises the EnvWorkerError of an error reply."""
        if reply[0] == TAG_OK:
            return pickle.loads(reply[1:]) if len(reply) > 1 else None
        if reply[0] == TAG_ERROR:
            raise self._reply_error(w, reply, what)
        raise EnvWorkerError(f"env worker {w} sent an unexpected reply", worker_index=w)

    def _reply_error(self, w: int, reply: bytes, what: str) -> EnvWorkerError:
        info = pickle.loads(reply[1:])
        env_index = info["env_index"]
        where = f"env {env_index} (worker {w})" if env_index is not None else f"worker {w}"
        error = EnvWorkerError(
            f"{where} raised {info['type_name']} during {what}: {info['message']}",
            worker_index=w,
            env_index=env_index,
            exc_type=info["type"],
            worker_traceback=info["traceback"],
        )
        error.pickled_exception = info["exception"]
        return error


def _unpickle_exception(error: EnvWorkerError) -> BaseException | None:
    """The worker's original exception object, if it survived pickling."""
    data = error.pickled_exception
    if data is None:
        return None
    try:
        exc = pickle.loads(data)
    except Exception:
        return None
    return exc if isinstance(exc, BaseException) else None


def make_subproc_vector_env(
    cfg: EnvConfig,
    dim: int,
    seed: int,
    num_workers: int,
    training: bool = True,
    step_timeout_s: float = 60.0,
) -> SubprocVectorEnv:
    """``cfg.num_envs`` copies of :func:`~rlperf.envs.make.make_env` in ``num_workers``
    processes; env i gets ``seed + i``, as :func:`~rlperf.envs.make.make_vector_env` does."""
    validate_env_id(cfg.id)  # a one-line error here rather than one per worker
    env_fns = [
        functools.partial(make_env, cfg, dim, seed + i, training, i) for i in range(cfg.num_envs)
    ]
    return SubprocVectorEnv(env_fns, num_workers, step_timeout_s=step_timeout_s)
