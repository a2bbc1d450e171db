"""Named crash points for fault-injection tests.

A process started with ``RLPERF_CRASH_AT=NAME[:N]`` SIGKILLs itself the Nth time (default:
the first) it reaches ``crash_point(NAME)``: a real kill at a moment a random timer almost
never hits, such as between the two files of a checkpoint. Without the variable a crash
point costs one comparison. Points: ``checkpoint.tensors`` (tensors written, the JSON tree
not yet), ``checkpoint.renamed`` (the checkpoint in place, the ``latest`` pointer not yet
moved), ``records.row`` (after each record file's append of an iteration's row).
"""

from __future__ import annotations

import os
import signal

CRASH_POINTS = ("checkpoint.tensors", "checkpoint.renamed", "records.row")


def _parse(spec: str | None) -> tuple[str, int] | None:
    if not spec:
        return None
    name, _, count = spec.partition(":")
    if name not in CRASH_POINTS:
        raise ValueError(
            f"RLPERF_CRASH_AT={spec}: unknown crash point; valid: {', '.join(CRASH_POINTS)}"
        )
    return name, int(count or 1)


_ARMED = _parse(os.environ.get("RLPERF_CRASH_AT"))
_reached = 0


def crash_point(name: str) -> None:
    """SIGKILL this process if ``RLPERF_CRASH_AT`` names ``name`` and this is its Nth visit."""
    global _reached
    if _ARMED is None or _ARMED[0] != name:
        return
    _reached += 1
    if _reached == _ARMED[1]:
        os.kill(os.getpid(), signal.SIGKILL)
