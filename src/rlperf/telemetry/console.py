"""The live console view: SPS, ETA, reward and where the time goes.

On a terminal it is a rich live panel redrawn every iteration; without a TTY (pipes, CI)
it stays silent: metrics.jsonl and progress.csv hold everything it would show.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from rlperf.telemetry.timers import PHASES


def interactive() -> bool:
    """True when a person is watching a terminal (not CI, not a pipe)."""
    return sys.stdout.isatty() and not os.environ.get("CI")


def _fmt_duration(seconds: float | None) -> str:
    if seconds is None or seconds != seconds or seconds == float("inf"):
        return "?"
    seconds = int(seconds)
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def summary_line(record: dict[str, Any], eta_s: float | None) -> str:
    """One line: iteration, steps, SPS, ETA, reward, phase split in % of the iteration."""
    wall = record.get("time_this_iter_s") or 0.0
    split = " ".join(
        f"{p} {100 * record.get(f'{p}_time_ms', 0.0) / 1000 / wall:.0f}%"
        for p in (*PHASES, "other")
        if wall
    )
    reward = record.get("episode_reward_mean")
    reward_text = "-" if reward is None else f"{reward:.2f}"
    return (
        f"iter {record['iteration']}  steps {record['timesteps_total']:,}  SPS {record['SPS']:.0f}  "
        f"ETA {_fmt_duration(eta_s)}  reward {reward_text}  [{split}]"
    )


def panel(record: dict[str, Any], eta_s: float | None, title: str) -> Any:
    """The rich panel the live view shows for ``record``."""
    from rich.panel import Panel
    from rich.text import Text

    line = summary_line(record, eta_s)
    sys_cpu = record.get("sys/proc_cpu_percent")
    if sys_cpu is not None:
        line += (
            f"\nCPU (process tree) {sys_cpu:.0f}%  RAM {record.get('sys/ram_percent') or 0:.0f}%"
        )
    # Text, not a markup string: the phase split is in [brackets], which rich would
    # otherwise take for style tags and drop.
    return Panel(Text(line), title=title)


class ConsoleView:
    """Shows progress; ``enabled=False`` for a quiet run (--no-progress)."""

    def __init__(self, enabled: bool, title: str) -> None:
        self.title = title
        self._live: Any = None
        if enabled and interactive():
            from rich.live import Live

            self._live = Live(refresh_per_second=4, transient=False)
            self._live.start()

    def update(self, record: dict[str, Any], eta_s: float | None) -> None:
        if self._live is not None:
            self._live.update(panel(record, eta_s, self.title))

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
