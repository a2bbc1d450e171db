"""Where per-iteration records go: metrics.jsonl (the source of truth), progress.csv, TensorBoard.

A record is a flat dict. Keys without a namespace are the thesis's (RLlib's) columns
(``episode_reward_mean``, ``sample_time_ms``, ...); namespaced keys follow the project's
scheme (``charts/``, ``losses/``, ``perf/``, ``sys/``, ``energy/``). ``None`` means "not
measured here" and is written as JSON null / an empty CSV cell, never as 0.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from pathlib import Path
from typing import Any

# The thesis's progress.csv columns first, then rlperf's.
CSV_COLUMNS = [
    "iteration",
    "episode_reward_min",
    "episode_reward_mean",
    "episode_reward_max",
    "episode_len_mean",
    "episodes_this_iter",
    "episodes_total",
    "episode_reward_ema",
    "timesteps_total",
    "sample_time_ms",
    "load_time_ms",
    "learn_time_ms",
    "update_time_ms",
    "other_time_ms",
    "time_this_iter_s",
    "time_total_s",
    "SPS",
    "warmup",
]


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class JsonlSink:
    """One JSON object per line, flushed per record so a crash loses at most the last line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = path.open("a", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        self._file.write(json.dumps({k: _clean(v) for k, v in record.items()}) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


class CsvSink:
    """progress.csv: the thesis's columns, then every other key seen in the first record.

    The header is written once; a resumed run keeps the existing header (no second header),
    and keys that appear later than the first record go to metrics.jsonl only.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.columns: list[str] | None = None
        if path.exists() and path.stat().st_size > 0:
            with path.open(newline="", encoding="utf-8") as f:
                self.columns = next(csv.reader(f), None)
        self._file = path.open("a", newline="", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        if self.columns is None:
            self.columns = CSV_COLUMNS + sorted(k for k in record if k not in CSV_COLUMNS)
            csv.writer(self._file).writerow(self.columns)
        row = ["" if (v := _clean(record.get(c))) is None else v for c in self.columns]
        csv.writer(self._file).writerow(row)
        self._file.flush()

    def close(self) -> None:
        self._file.close()


# Thesis-named keys shown in TensorBoard under the project's namespaces.
TENSORBOARD_NAMES = {
    "episode_reward_mean": "charts/episodic_return",
    "episode_len_mean": "charts/episodic_length",
    "episode_reward_ema": "charts/episodic_return_ema",
    "SPS": "charts/SPS",
    **{f"{p}_time_ms": f"perf/{p}_time_ms" for p in ("sample", "load", "learn", "update", "other")},
}


class TensorBoardSink:
    """TensorBoard scalars keyed by env steps (the x axis CleanRL and SB3 users expect):
    every namespaced key, and the thesis-named keys under their namespaced names."""

    def __init__(self, log_dir: Path, purge_step: int | None = None) -> None:
        from torch.utils.tensorboard import SummaryWriter  # heavy import, only when enabled

        # purge_step: on resume, events logged after the checkpoint are hidden, so curves
        # continue without a doubled segment.
        self._writer = SummaryWriter(log_dir=str(log_dir), purge_step=purge_step)

    def write(self, record: dict[str, Any]) -> None:
        step = int(record["timesteps_total"])
        for key, value in record.items():
            name = TENSORBOARD_NAMES.get(key, key)
            if "/" not in name or not isinstance(value, int | float) or isinstance(value, bool):
                continue
            if math.isfinite(value):
                self._writer.add_scalar(name, value, step)

    def close(self) -> None:
        self._writer.close()


def _truncate_lines(path: Path, keep: int, removed_to: Path | None, header_lines: int = 0) -> bool:
    """Keep the first ``keep`` complete lines of ``path`` (atomically replaced).

    The lines removed (a torn last line included) are appended to ``removed_to/<name>``,
    after the file's first ``header_lines`` lines, so nothing written is lost. Returns
    whether anything was removed.
    """
    if not path.exists():
        return False
    data = path.read_bytes()
    lines = data.split(b"\n")
    complete = lines[:-1]  # the last element is b"" or a torn line with no newline
    removed = complete[keep:] + ([lines[-1]] if lines[-1] else [])
    if not removed:
        return False
    if removed_to is not None:
        removed_to.mkdir(parents=True, exist_ok=True)
        kept_header = complete[:header_lines]
        (removed_to / path.name).write_bytes(
            b"".join(line + b"\n" for line in kept_header + removed)
        )
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(b"".join(line + b"\n" for line in complete[:keep]))
    os.replace(tmp, path)
    return True


def truncate_records(run_dir: Path, last_iteration: int, removed_to: Path | None = None) -> None:
    """Drop rows after ``last_iteration`` (and any torn last line) from metrics.jsonl and
    progress.csv, so a resumed run continues them without duplicated or broken rows.

    With ``removed_to``, the dropped rows are saved there (resuming from an older checkpoint
    abandons a line of history, but never deletes what it recorded)."""
    jsonl = run_dir / "metrics.jsonl"
    if jsonl.exists():
        keep = 0
        for line in jsonl.read_text(encoding="utf-8").splitlines():
            try:
                it = json.loads(line)["iteration"]
            except (json.JSONDecodeError, KeyError, TypeError):
                break
            if it > last_iteration:
                break
            keep += 1
        _truncate_lines(jsonl, keep, removed_to)
    progress = run_dir / "progress.csv"
    if progress.exists():
        text = progress.read_text(encoding="utf-8")
        rows = list(csv.reader(io.StringIO(text)))
        keep = 1 if rows else 0  # the header
        for row in rows[1:]:
            if not row or not row[0].isdigit() or int(row[0]) > last_iteration:
                break
            keep += 1
        _truncate_lines(progress, keep, removed_to, header_lines=1)
