"""The child's side of every runner's worker processes, written once.

Actor processes (decoupled runner), Hogwild workers and their evaluator, and the play
process (play-train runner) all start the same way and end the same way: they die with
their parent, take the CPUs, torch threads and torch seed their :class:`ProcessStart` gives,
report the resources they got in a ``("hello", resources)`` message, and turn any exception
into an ``("error", message, traceback)`` message that the parent names the process with,
then exit 1. The Ray actors start and report the same way.
"""

from __future__ import annotations

import contextlib
import os
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, Protocol, TypeVar

import torch

from rlperf.core.resources import apply_cpu_resources, die_with_parent
from rlperf.envs.base import EpisodeEnd


@dataclass(frozen=True)
class ProcessStart:
    """What a worker process sets first: its CPUs, torch threads and torch seed."""

    torch_threads: int | None
    cpu_affinity: list[int] | None = None
    """None: the parent's CPUs."""
    torch_seed: int | None = None
    """None: torch's random generator is not used in the process (it is not seeded)."""

    def enter(self) -> None:
        """Apply the placement and the seed to this process."""
        apply_cpu_resources(self.cpu_affinity, self.torch_threads)
        if self.torch_seed is not None:
            torch.manual_seed(self.torch_seed)


class ChildSetup(Protocol):
    """Every worker process's setup says how it starts."""

    @property
    def start(self) -> ProcessStart: ...


Setup = TypeVar("Setup", bound=ChildSetup)


def run_child(body: Callable[[Setup, Connection], None], setup: Setup, conn: Connection) -> None:
    """Run ``body(setup, conn)`` as a worker process's whole life (see the module doc)."""
    die_with_parent()
    try:
        setup.start.enter()
        body(setup, conn)
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass  # the parent is gone or closed our pipe: nothing left to do
    except Exception as exc:  # reported to the parent, which names this process
        with contextlib.suppress(OSError):
            conn.send(("error", f"{type(exc).__name__}: {exc}", traceback.format_exc()))
        raise SystemExit(1) from None


@dataclass
class RolloutReport:
    """What an acting process says about a rollout it wrote into shared memory: the
    decoupled runner's actors (``slot``: one of their slots) and the play-train runner's
    play process (``slot``: one of its chunks)."""

    slot: int
    policy_version: int
    """Version of the weights that acted for the whole rollout."""
    episodes: list[EpisodeEnd]
    """True games that ended, with env indices in the learner's batch."""
    seconds: dict[str, float] = field(default_factory=dict)
    """Acting-side time: env_step, policy_forward, weight_sync, slot_wait (waiting for a free
    slot, i.e. for the learner)."""


def process_resources(role: str, index: int, device: str, **extra: Any) -> dict[str, Any]:
    """What this process got: its role and index, pid, torch threads, CPUs and device (the
    manifest's ``resources.processes`` entry)."""
    return {
        "role": role,
        "index": index,
        "pid": os.getpid(),
        "torch_threads": torch.get_num_threads(),
        "cpu_affinity": sorted(os.sched_getaffinity(0)),
        "device": device,
        **extra,
    }


def say_hello(conn: Connection, role: str, index: int, device: str) -> None:
    """Tell the parent this process is ready, and what it got."""
    conn.send(("hello", process_resources(role, index, device)))


def wait_for_free_slot(conn: Connection, free: deque[int]) -> bool:
    """Take the parent's messages until a slot (or chunk) is free to fill: ``("free", id)``
    adds to ``free``, ``("stop",)`` returns False. Messages already waiting are read first,
    so a stop is never missed behind free slots."""
    while not free or conn.poll():
        message = conn.recv()
        if message[0] == "stop":
            return False
        free.append(message[1])
    return True
