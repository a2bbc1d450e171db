"""Worker side of :class:`~rlperf.envs.subproc.SubprocVectorEnv`: what runs in each process.

A worker builds its ``N / W`` consecutive envs from pickled factories, attaches the shared
memory segment (:mod:`rlperf.envs.subproc_shm`), then serves the parent's requests until
"close" or EOF: a step writes observations, rewards, terminations and truncations straight
into shared memory and replies with a tag byte plus one :data:`EPISODE` record per finished
game; rare requests (``reset``, ``get_state``, ``set_state``) are pickled.

This module also defines that pipe protocol (:data:`STEP` and the ``TAG_*`` reply bytes),
which the parent imports. :func:`worker_main` is the process target: a module-level
function, so that a spawned child can import it by name. The module is kept free of
parent-only imports so that a worker loads little before it caps its thread pools.
"""

from __future__ import annotations

import contextlib
import multiprocessing.connection
import os
import pickle
import signal
import struct
import sys
import traceback
from typing import Any

import numpy as np

from rlperf.envs.base import SingleEnv
from rlperf.envs.subproc_shm import map_views, open_segment

__all__ = ["EPISODE", "STEP", "TAG_ERROR", "TAG_OK", "TAG_STEPPED", "worker_main"]

# ---------------------------------------------------------------------------- protocol
# Parent -> worker: STEP, or a pickled (command, argument) tuple (pickles start with 0x80,
# so they can never be mistaken for STEP).
STEP = b"s"
# Worker -> parent: a tag byte, then the payload.
TAG_STEPPED = ord("k")  # step done; payload: EPISODE records of the games that ended
TAG_OK = ord("o")  # request done; payload: pickled result, or nothing for None
TAG_ERROR = ord("e")  # an env raised; payload: pickled dict, see _error_reply()
EPISODE = struct.Struct("<qdqQ")  # env index, true game return, true game length, rooms mask


def rooms_mask(game_end: tuple) -> int:
    """Visited rooms as a bit mask (bit r = room r; 0 = not tracked): fixed-size records."""
    return sum(1 << r for r in game_end[2]) if len(game_end) > 2 else 0


def rooms_of(mask: int) -> tuple[int, ...] | None:
    """The rooms of a mask from :func:`rooms_mask` (None: not tracked)."""
    return tuple(r for r in range(64) if mask >> r & 1) or None


# Each worker is ONE of the W parallel streams: a thread pool inside it would only compete
# with the other workers (and the learner) for the same cores. Set in the worker before the
# env factories are unpickled, i.e. before they import OpenCV / torch / OpenMP runtimes
# (rlperf.envs.make imports no torch). numpy's OpenBLAS pool is already created by then (this
# module imports numpy), but it only sleeps: envs do no BLAS work. Setting these in the
# parent's environment around start() instead would race with other threads reading it.
_CHILD_THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "OPENCV_FOR_THREADS_NUM": "1",
}


def _error_reply(exc: BaseException, env_index: int | None) -> bytes:
    """Tagged error message: env index, type, message, traceback text, pickled exception."""
    try:
        pickled: bytes | None = pickle.dumps(exc)
    except Exception:  # unpicklable exceptions still report type, message and traceback
        pickled = None
    info = {
        "env_index": env_index,
        "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "type_name": type(exc).__qualname__,
        "message": str(exc),
        "traceback": traceback.format_exc(),
        "exception": pickled,
    }
    return bytes([TAG_ERROR]) + pickle.dumps(info)


def _ok_reply(result: Any = None) -> bytes:
    return bytes([TAG_OK]) if result is None else bytes([TAG_OK]) + pickle.dumps(result)


def _limit_loaded_thread_pools() -> None:
    """Cap the pools of libraries the envs imported whose env-variable setting may be ignored."""
    cv2 = sys.modules.get("cv2")
    if cv2 is not None:
        with contextlib.suppress(Exception):
            cv2.setNumThreads(1)
    torch = sys.modules.get("torch")
    if torch is not None:
        with contextlib.suppress(Exception):
            torch.set_num_threads(1)


def worker_main(
    worker_index: int,
    first_env: int,
    env_fns_pickle: bytes,
    conn: multiprocessing.connection.Connection,
) -> None:
    """Entry point of a worker process: build its envs, then serve requests until close/EOF."""
    # Ctrl-C goes to the whole process group; the parent handles it and closes us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.update(_CHILD_THREAD_ENV)
    envs: list[SingleEnv] = []
    try:
        current: int | None = None
        try:
            env_fns = pickle.loads(env_fns_pickle)
            for j, env_fn in enumerate(env_fns):
                current = first_env + j
                envs.append(env_fn())
        except Exception as exc:
            conn.send_bytes(_error_reply(exc, current))
            return
        _limit_loaded_thread_pools()
        conn.send_bytes(_ok_reply([(env.observation_space, env.action_space) for env in envs]))
        command, argument = pickle.loads(conn.recv_bytes())
        if command != "attach":
            return  # "close" before the segment existed (the parent gave up)
        segment_name, layout = argument
        _, mapping = open_segment(segment_name, None)
        views = map_views(mapping, layout)
        conn.send_bytes(_ok_reply())
        _serve(envs, first_env, views, conn)
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass  # the parent is gone (or closed our pipe): nothing left to serve
    finally:
        for env in envs:
            with contextlib.suppress(Exception):
                env.close()


def _serve(
    envs: list[SingleEnv],
    first_env: int,
    views: dict[str, np.ndarray],
    conn: multiprocessing.connection.Connection,
) -> None:
    """The request loop; returns on "close" (EOF raises EOFError to the caller)."""
    k = len(envs)
    stop = first_env + k
    obs = views["obs"][first_env:stop]
    final_obs = views["final_obs"][first_env:stop]
    final_flags = views["final_flags"][first_env:stop]
    actions = views["actions"][first_env:stop]
    rewards = views["rewards"][first_env:stop]
    terminations = views["terminations"][first_env:stop]
    truncations = views["truncations"][first_env:stop]
    recv, send = conn.recv_bytes, conn.send_bytes
    stepped_tag = bytes([TAG_STEPPED])
    pack_end = EPISODE.pack
    while True:
        message = recv()
        if message == STEP:
            j = 0
            try:
                ends: list[bytes] = []
                # Python ints index the envs' action tables faster than numpy scalars.
                action_list = actions.tolist()
                for j in range(k):
                    env = envs[j]
                    ob, reward, terminated, truncated, game_end = env.step(action_list[j])
                    rewards[j] = reward
                    terminations[j] = terminated
                    truncations[j] = truncated
                    if game_end is not None:
                        ends.append(
                            pack_end(first_env + j, game_end[0], game_end[1], rooms_mask(game_end))
                        )
                    cut = truncated and not terminated
                    final_flags[j] = cut
                    if terminated or truncated:
                        if cut:
                            final_obs[j] = ob  # env.step returns a buffer reset() overwrites
                        ob = env.reset()
                    obs[j] = ob
            except Exception as exc:
                send(_error_reply(exc, first_env + j))
                continue
            send(stepped_tag + b"".join(ends))
            continue

        command, argument = pickle.loads(message)
        if command == "close":
            return
        j = 0
        try:
            if command == "reset":
                for j in range(k):
                    obs[j] = envs[j].reset(seed=argument + first_env + j)
                reply = _ok_reply()
            elif command == "get_state":
                states = []
                for j in range(k):
                    states.append(envs[j].get_state())
                reply = _ok_reply(states)
            elif command == "set_state":
                for j in range(k):
                    envs[j].set_state(argument[j])
                    obs[j] = argument[j]["obs"]
                reply = _ok_reply()
            else:
                raise ValueError(f"unknown worker command {command!r}")
        except Exception as exc:
            reply = _error_reply(exc, first_env + j)
        send(reply)
