"""Process-level resource settings applied before a run starts."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import sys
import threading
from collections.abc import Iterator

import torch

# glibc mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def retain_freed_memory() -> bool:
    """Keep freed heap memory in the process instead of returning it to the OS (glibc only).

    A training step frees and re-allocates the same large activation buffers every
    minibatch. By default glibc serves blocks above a dynamic threshold with mmap and gives
    them back with munmap, so every minibatch page-faults fresh zeroed pages; on virtual
    machines whose memory is backed lazily by the host, a first touch can cost milliseconds
    per MB. Raising the mmap threshold to its maximum (32 MiB) and never trimming keeps those
    pages mapped and reused. Returns whether the setting was applied.
    """
    if not sys.platform.startswith("linux"):
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        return bool(libc.mallopt(_M_TRIM_THRESHOLD, 1 << 30)) and bool(
            libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)
        )
    except (OSError, AttributeError):
        return False


def apply_cpu_resources(affinity: list[int] | None, torch_threads: int | None) -> None:
    """Pin the process to ``affinity`` (os.sched_setaffinity) and set torch's intra-op threads."""
    if affinity is not None:
        os.sched_setaffinity(0, affinity)
    if torch_threads is not None:
        torch.set_num_threads(torch_threads)


@contextlib.contextmanager
def intra_op_threads(threads: int | None) -> Iterator[None]:
    """torch's intra-op threads set to ``threads`` inside the block, restored after it.

    ``None`` (or the current count) changes nothing. A switch and back costs about 15 us
    here, nothing next to a rollout.
    """
    before = torch.get_num_threads()
    if threads is None or threads == before:
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def die_with_parent() -> None:
    """Linux: have the kernel kill this process when its parent dies (PR_SET_PDEATHSIG).

    Worker processes otherwise notice a dead parent only at their next pipe operation; a
    worker busy with a long rollout would outlive a learner killed with SIGKILL.
    """
    if not sys.platform.startswith("linux"):
        return
    name = ctypes.util.find_library("c")
    if name is None:
        return
    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(name).prctl(pr_set_pdeathsig, signal.SIGKILL)


@contextlib.contextmanager
def children_ignore_sigint() -> Iterator[None]:
    """Start children with SIGINT ignored from their first instruction on.

    A disposition of SIG_IGN survives fork+exec and Python keeps it at start-up, so a
    Ctrl-C during the seconds a worker spends importing cannot print a traceback from every
    child. Only the main thread may change handlers; elsewhere workers set it themselves.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is None:  # a handler installed outside Python: leave it alone
        yield
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
