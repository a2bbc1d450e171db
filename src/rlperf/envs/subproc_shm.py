"""Shared-memory segment of :class:`~rlperf.envs.subproc.SubprocVectorEnv`: layout and mapping.

Everything that is per-env and per-step lives in ONE segment that the parent and every
worker map: the observation batch ``(N, *obs_shape)``, a second ``(N, *obs_shape)`` area for
the final observations of truncated envs with a flag per env, and the actions, rewards,
terminations and truncations. This module says where each of these arrays lies in the
segment (:func:`region_layout`), creates or attaches the segment (:func:`create_segment`,
:func:`open_segment`) and maps numpy views onto it (:func:`map_views`). It is kept apart
because both sides use it: the parent (:mod:`rlperf.envs.subproc`) creates the segment, the
workers (:mod:`rlperf.envs.subproc_worker`) attach to it by name.
"""

from __future__ import annotations

import math
import mmap
import os
import secrets
from multiprocessing import shared_memory

import numpy as np

__all__ = ["create_segment", "map_views", "open_segment", "region_layout"]

_ALIGN = 64  # cache-line alignment of the regions inside the segment


def region_layout(
    num_envs: int, obs_shape: tuple[int, ...], obs_dtype: np.dtype
) -> tuple[dict[str, tuple[int, tuple[int, ...], str]], int]:
    """Offsets, shapes and dtypes of every array in the segment, and the segment's size."""
    regions: list[tuple[str, tuple[int, ...], np.dtype]] = [
        ("obs", (num_envs, *obs_shape), obs_dtype),
        ("final_obs", (num_envs, *obs_shape), obs_dtype),
        ("final_flags", (num_envs,), np.dtype(bool)),
        ("actions", (num_envs,), np.dtype(np.int64)),
        ("rewards", (num_envs,), np.dtype(np.float32)),
        ("terminations", (num_envs,), np.dtype(bool)),
        ("truncations", (num_envs,), np.dtype(bool)),
    ]
    layout: dict[str, tuple[int, tuple[int, ...], str]] = {}
    offset = 0
    for name, shape, dtype in regions:
        offset = -(-offset // _ALIGN) * _ALIGN
        layout[name] = (offset, shape, dtype.str)
        offset += math.prod(shape) * dtype.itemsize
    return layout, max(offset, 1)


def map_views(
    buffer: mmap.mmap, layout: dict[str, tuple[int, tuple[int, ...], str]]
) -> dict[str, np.ndarray]:
    """numpy views of every region of a mapped segment.

    ``np.frombuffer`` (unlike ``np.ndarray(buffer=...)``) keeps a buffer export on the mmap,
    so the mapping cannot be closed under a live view: a view is never left dangling.
    """
    return {
        name: np.frombuffer(
            buffer, dtype=np.dtype(dtype), count=math.prod(shape), offset=offset
        ).reshape(shape)
        for name, (offset, shape, dtype) in layout.items()
    }


def open_segment(name: str, size: int | None) -> tuple[shared_memory.SharedMemory, mmap.mmap]:
    """Create (``size`` given) or attach a segment, mapped through our OWN mmap.

    ``SharedMemory.close()`` refuses to run while numpy arrays still use its buffer, and
    callers may legitimately keep the last observation batch after ``close()``. Mapping the
    segment a second time and closing the ``SharedMemory`` object right away avoids that: our
    mapping is released when its last view dies, while the name is unlinked on ``close()``
    regardless (so ``/dev/shm`` never keeps it).
    """
    shm = shared_memory.SharedMemory(name=name, create=size is not None, size=size or 0)
    try:
        # _fd is the descriptor SharedMemory keeps open on POSIX; mmap() dups it.
        mapping = mmap.mmap(shm._fd, size if size is not None else shm.size)
    except BaseException:
        shm.close()
        if size is not None:
            shm.unlink()
        raise
    shm.close()
    return shm, mapping


def create_segment(size: int) -> tuple[shared_memory.SharedMemory, mmap.mmap]:
    """A new segment whose name says who made it (rlperf_<pid>_<random>), for leak hunts."""
    for _ in range(100):
        name = f"rlperf_{os.getpid()}_{secrets.token_hex(4)}"
        try:
            return open_segment(name, size)
        except FileExistsError:
            continue
    raise RuntimeError("could not find a free shared-memory name")
