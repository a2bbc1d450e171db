"""Phase timers: where each iteration's wall time goes.

The four phases are the thesis's (RLlib's) timers: ``sample`` (env stepping + acting),
``load`` (batch assembly / transfer to the learner), ``learn`` (forward, backward,
optimizer) and ``update`` (weight sync to the actors). ``other`` is the rest of the
iteration's wall time, so the five always add up to it. Sub-phases are finer views inside
those and are not added again: ``env_step`` and ``policy_forward`` inside ``sample``,
``checkpoint`` inside ``other``. A lap runs from the end of the previous lap, so writing an
iteration's record is charged to the next iteration's ``other``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

PHASES = ("sample", "load", "learn", "update")


class PhaseTimer:
    """Accumulates seconds per phase between two :meth:`lap` calls.

    ``sync`` (e.g. ``torch.cuda.synchronize``) is called at every phase boundary so that
    asynchronous GPU work is charged to the phase that issued it.
    """

    def __init__(self, sync: Callable[[], None] | None = None) -> None:
        self._sync = sync
        self._seconds: dict[str, float] = {}
        self._lap_start = time.perf_counter()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        if self._sync is not None:
            self._sync()
        start = time.perf_counter()
        try:
            yield
        finally:
            if self._sync is not None:
                self._sync()
            self.add(name, time.perf_counter() - start)

    def add(self, name: str, seconds: float) -> None:
        self._seconds[name] = self._seconds.get(name, 0.0) + seconds

    def elapsed(self) -> float:
        """Seconds since the current lap started."""
        return time.perf_counter() - self._lap_start

    def lap(self) -> dict[str, float]:
        """Seconds per phase since the previous lap, with ``other`` and ``wall``; starts a new lap."""
        now = time.perf_counter()
        wall = now - self._lap_start
        out = {name: self._seconds.get(name, 0.0) for name in PHASES}
        out["other"] = max(wall - sum(out.values()), 0.0)
        out.update({k: v for k, v in self._seconds.items() if k not in PHASES})
        out["wall"] = wall
        self._seconds = {}
        self._lap_start = now
        return out
