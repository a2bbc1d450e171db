"""Time to target in a benchmark (``rlperf bench --target R``): how long each seed took to
reach R, and the median over seeds with its 95 % bootstrap confidence interval.

**One seed** (:func:`seed_target`): a run that reached the target has ``target_reached`` in
its ``manifest.json`` (written by the training session when its preset's
``stop.target_reward_metric`` first reached ``stop.target_reward``: the metric, its value,
the iteration, the env steps and the training seconds at that iteration's end). A run that
did not reach it stopped at its cap, the bench's wall-clock budget (or a step budget of its
preset's, whichever came first): what it ran, in env steps and training seconds, is a lower
bound of its time to target.

**Over seeds** (:func:`censored_median`): the median, with the misses counted at their cap.
A cap is less than the miss's true time, so with any miss the median and both ends of its
interval are lower bounds; with half or more missed even the median is a cap, not a time,
and is shown as ``> cap``. The interval is rliable's bootstrap (the seeds resampled; a
percentile interval, 2,000 resamples, numpy's generator seeded as for the bench's other
intervals: :mod:`~rlperf.report.bench_stats`). Percentile, not BCa: with the misses tied at
the cap and 2-10 seeds, BCa's jackknife acceleration is undefined or erratic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from rlperf.report.bench_stats import BOOTSTRAP_REPS, CONFIDENCE, seeded

FINAL_MEAN_KEY = "episode_reward_mean"
"""The record key of the mean return of the last 100 true games (``EpisodeStats.summary``)."""
PARITY_KEYS = ("parity/even_reward_mean", "parity/odd_reward_mean")
"""The record keys of the mean returns of the last games on even and on odd frames."""
PARITY_SPLIT = 5.0
"""Points between the two parities' means above which a record counts as split: on Pong a
stall is one of the two games (one per frame parity) learned late."""


@dataclass(frozen=True)
class SeedTarget:
    """One seed's way to the target, or as far as it got."""

    reached: bool
    env_steps: int
    """Env steps to the target; when not reached, every step the run took (its cap)."""
    seconds: float
    """Training seconds (``time_total_s``: start-up not counted) to the target; when not
    reached, all the run trained (its cap)."""
    process_s: float | None
    """The whole ``rlperf train`` command, start to exit (see :func:`process_seconds`)."""
    process_source: str | None
    """Where :attr:`process_s` comes from: ``sweep`` or ``manifest`` (None: neither has it)."""
    value: float | None
    """The criterion's value when the target was reached (None: not reached)."""
    final_mean: float | None
    """Where the run ended: the mean return of its last 100 games in its last record."""
    parity_split_steps: int | None = None
    """Env steps, to the target or to the end, of the iterations whose games on even and on
    odd frames were more than :data:`PARITY_SPLIT` apart (the last 10 of each); None for a
    run that recorded no parities (engines that do not tell them, runs before they did)."""


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def process_seconds(
    manifest: dict[str, Any], ledger_wall_s: Any = None
) -> tuple[float | None, str | None]:
    """Seconds of the whole training command and where they come from.

    The sweep times each run's process from its start to its exit (``wall_s`` in its ledger
    record): that is preferred. Without it, the manifest's ``started_utc`` to ``ended_utc``,
    which is shorter: it starts after the interpreter has started and read the config (just
    before the envs and the model are built) and ends with the last manifest write, before
    the process exits. (None, None) when neither is there."""
    wall = _number(ledger_wall_s)
    if wall is not None:
        return wall, "sweep"
    try:
        started = datetime.fromisoformat(str(manifest["started_utc"]))
        ended = datetime.fromisoformat(str(manifest["ended_utc"]))
    except (KeyError, TypeError, ValueError):
        return None, None
    return (ended - started).total_seconds(), "manifest"


def seed_target(
    manifest: dict[str, Any], records: list[dict[str, Any]], ledger_wall_s: Any = None
) -> SeedTarget:
    """A completed run's time to target from its ``manifest.json``, its ``metrics.jsonl``
    records and the sweep's ``wall_s`` of its process (see the module's docstring)."""
    last = records[-1] if records else {}
    final_mean = _number(last.get(FINAL_MEAN_KEY))
    process_s, source = process_seconds(manifest, ledger_wall_s)
    hit = manifest.get("target_reached")
    if isinstance(hit, dict) and _number(hit.get("env_steps")) is not None:
        steps = int(hit["env_steps"])
        return SeedTarget(
            True,
            steps,
            _number(hit.get("wall_time_s")) or 0.0,
            process_s,
            source,
            _number(hit.get("value")),
            final_mean,
            parity_split_steps(records, steps),
        )
    # The cap: the final counters (the manifest's; the last record's for a manifest without)
    steps = _number(manifest.get("env_steps"))
    seconds = _number(manifest.get("time_total_s"))
    if steps is None:
        steps = _number(last.get("timesteps_total")) or 0.0
    if seconds is None:
        seconds = _number(last.get("time_total_s")) or 0.0
    split = parity_split_steps(records, int(steps))
    return SeedTarget(False, int(steps), seconds, process_s, source, None, final_mean, split)


def parity_split_steps(records: list[dict[str, Any]], up_to: int) -> int | None:
    """Env steps up to ``up_to`` in the iterations whose records hold both parities' means
    more than :data:`PARITY_SPLIT` apart (None: no record holds both)."""
    split = 0
    told = False
    before = 0.0
    for record in records:
        steps = _number(record.get("timesteps_total"))
        if steps is None:
            continue
        even, odd = (_number(record.get(key)) for key in PARITY_KEYS)
        if even is not None and odd is not None:
            told = True
            if abs(even - odd) > PARITY_SPLIT:
                split += int(min(steps, up_to) - min(before, up_to))
        before = steps
    return split if told else None


@dataclass(frozen=True)
class CensoredMedian:
    """The median over seeds of a time to target, misses counted at their cap."""

    value: float
    low: float | None
    """The 95 % interval's ends (None with fewer than 2 seeds: nothing to resample)."""
    high: float | None
    n: int
    reached: int

    @property
    def missed(self) -> int:
        return self.n - self.reached

    @property
    def lower_bound(self) -> bool:
        """A seed missed: the median and its interval are lower bounds."""
        return self.missed > 0

    @property
    def beyond_cap(self) -> bool:
        """Half or more missed: the median is a cap, not a time (shown as ``> cap``)."""
        return 2 * self.missed >= self.n


def _median(scores: np.ndarray) -> np.ndarray:
    """The median of a ``seeds x 1`` matrix (rliable's aggregate function shape)."""
    return np.array([np.median(scores[:, 0])])


def censored_median(
    values: Sequence[float], reached: Sequence[bool], *, reps: int = BOOTSTRAP_REPS
) -> CensoredMedian:
    """The median of ``values`` (one per seed: its time to target, or its cap where
    ``reached`` is False) with a 95 % percentile-bootstrap interval over the seeds."""
    if len(values) != len(reached):
        raise ValueError(f"{len(values)} values but {len(reached)} reached flags")
    if not values:
        raise ValueError("no seeds: no median")
    data = np.asarray(values, dtype=float)
    low = high = None
    if len(data) >= 2:
        from rliable import library

        # One "task" column: rliable's stratified bootstrap is then the plain bootstrap of
        # the seeds, the same machinery (and seed) as the bench's score intervals.
        with seeded():
            _, bands = library.get_interval_estimates(
                {"x": data[:, None]},
                _median,
                reps=reps,
                confidence_interval_size=CONFIDENCE,
            )
        low, high = float(bands["x"][0][0]), float(bands["x"][1][0])
    return CensoredMedian(float(np.median(data)), low, high, len(data), int(sum(reached)))


@dataclass(frozen=True)
class TargetSummary:
    """The time to target of one preset on one game, over its completed seeds."""

    preset: str
    game: str
    seeds: dict[int, SeedTarget]
    """Seed -> its outcome (completed runs only)."""
    env_steps: CensoredMedian
    seconds: CensoredMedian

    @property
    def reached(self) -> int:
        return self.env_steps.reached


def summarise_targets(
    preset: str, game: str, seeds: dict[int, SeedTarget], *, reps: int = BOOTSTRAP_REPS
) -> TargetSummary | None:
    """The medians of ``seeds`` (None when there is no seed to summarise)."""
    if not seeds:
        return None
    outcomes = list(seeds.values())
    reached = [s.reached for s in outcomes]
    return TargetSummary(
        preset,
        game,
        seeds,
        censored_median([s.env_steps for s in outcomes], reached, reps=reps),
        censored_median([s.seconds for s in outcomes], reached, reps=reps),
    )


def median_text(m: CensoredMedian, unit: str = "", digits: int = 3) -> str:
    """A median and its interval as text: ``1.2e+06 [9.8e+05, 1.5e+06]``, ``> cap`` when half
    or more seeds missed, ``>=`` before a median that counts a miss at its cap."""

    def num(x: float) -> str:
        return f"{x:.{digits}g}{unit}"

    if m.beyond_cap:
        return "> cap"
    text = (">= " if m.lower_bound else "") + num(m.value)
    if m.low is not None and m.high is not None:
        text += f" [{num(m.low)}, {num(m.high)}]"
    return text


def summary_line(summary: TargetSummary, target: float) -> str:
    """One console line: the medians with their intervals and how many seeds reached."""
    s = summary
    line = (
        f"time to target {target:g}: {s.preset} on {s.game}: {s.reached} of {s.env_steps.n} "
        f"seed(s) reached it; median env steps {median_text(s.env_steps)}, median training "
        f"time {median_text(s.seconds, ' s')} (95% CI)"
    )
    if s.env_steps.lower_bound:
        line += "; misses counted at their cap: lower bounds"
    return line
