"""``sweep.jsonl``: every status change of every point, one JSON object per line.

The file is only ever appended to (and flushed per line), so a sweep killed at any moment
leaves a readable history: a point whose last line says ``running`` was interrupted. The
latest line of a point is its status:

=============  ================================================================
``running``    an attempt started (``attempt``, ``command``, ``run_dir``)
``completed``  the attempt finished and its run is complete (``summary``: SPS ...)
``failed``     the attempt failed (``error``: one line; ``exit_code``; ``log``)
``interrupted`` the sweep was stopped by a signal during the attempt
``skipped``    the point cannot run on this machine (``reason``: ``needs GPU ...``)
=============  ================================================================

Every line also carries ``point``, ``time`` (UTC) and ``fingerprint`` (the hash of the
point's resolved config; see :meth:`~rlperf.sweep.plan.PlannedPoint.fingerprint`).
"""

from __future__ import annotations

import json
import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

LEDGER_FILE = "sweep.jsonl"
STATUSES = ("running", "completed", "failed", "interrupted", "skipped")
_APPEND = threading.Lock()
"""Points running side by side (``--parallel``) append from their own threads: one line at a
time."""


class Ledger:
    """Append-only status records of a sweep directory."""

    def __init__(self, sweep_dir: Path) -> None:
        self.path = Path(sweep_dir) / LEDGER_FILE

    def append(self, point: str, status: str, **fields: Any) -> dict[str, Any]:
        """Write one record (flushed and fsynced: the next line may be written by a resumed
        sweep after a crash)."""
        assert status in STATUSES, status
        record = {
            "time": datetime.now(UTC).isoformat(timespec="seconds"),
            "point": point,
            "status": status,
            **fields,
        }
        with _APPEND, self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())
        return record

    def records(self) -> list[dict[str, Any]]:
        """Every record in order; a torn last line (a crash mid-write) is ignored."""
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and "point" in record and "status" in record:
                out.append(record)
        return out

    def latest(self) -> dict[str, dict[str, Any]]:
        """Each point's latest record."""
        state: dict[str, dict[str, Any]] = {}
        for record in self.records():
            state[record["point"]] = record
        return state

    def attempts(self, point: str) -> int:
        """How many attempts of ``point`` were started over the sweep's history."""
        return sum(1 for r in self.records() if r["point"] == point and r["status"] == "running")
