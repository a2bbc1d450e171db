"""SIGINT and SIGTERM handled for the length of a ``with`` block, the previous handlers put
back after it: the one mechanism under a training run's clean stop and a sweep's passing
of signals to its points."""

from __future__ import annotations

import signal
from types import FrameType
from typing import Any, Self

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class SignalScope:
    """Installs :meth:`on_signal` for SIGINT and SIGTERM on entry (from the main thread)
    and restores the previous handlers on exit; ``received`` names the last signal."""

    def __init__(self) -> None:
        self.received: str | None = None
        self._previous: dict[int, Any] = {}

    def on_signal(self, signum: int) -> None:
        """What a signal does; ``received`` already names it unless this raises first."""
        raise NotImplementedError

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        self.on_signal(signum)

    def __enter__(self) -> Self:
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
