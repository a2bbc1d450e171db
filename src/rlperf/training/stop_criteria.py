"""When a run stops, and when it is expected to: ``stop.*`` read against the run's counters.

Pure functions of the config section and the counters, so the loop, the console's ETA and
their tests share one reading of each criterion; the first criterion met wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlperf.config.schema import StopConfig
from rlperf.telemetry.episodes import EpisodeStats


@dataclass(frozen=True)
class Counters:
    """Where the run stands after an iteration."""

    iteration: int
    env_steps: int
    time_total_s: float


def reward_metric(stats: EpisodeStats, metric: str) -> float | None:
    """``stop.target_reward_metric`` of the games so far, or None while it is undefined."""
    if metric == "ema":
        return stats.ema
    # mean100 needs a full window: a lucky first episode must not end the run.
    if len(stats.returns) < stats.returns.maxlen:  # type: ignore[operator]
        return None
    mean = sum(stats.returns) / len(stats.returns)
    if metric == "mean100":
        return mean
    # mean100+ema: both must reach the target, i.e. the lower of the two.
    return None if stats.ema is None else min(mean, stats.ema)


def target_share(stats: EpisodeStats, target: float | None) -> float | None:
    """How much of the way from the run's first 100 games to ``target`` the mean of the last
    100 has covered (0 = no better than at first, 1 = at the target), or None without a
    target, before the 100th game, or with a target not above the first games' mean.

    A share is a game's own scale: a return of 10 is most of Pong's way from -21 to 17 and a
    tenth of Breakout's to 100."""
    mean = reward_metric(stats, "mean100")
    first = stats.first_mean
    if target is None or mean is None or first is None or target <= first:
        return None
    return (mean - first) / (target - first)


def stop_reason(stop: StopConfig, at: Counters, reward: float | None) -> str | None:
    """The first ``stop.*`` criterion met (``reward``: :func:`reward_metric`), or None."""
    if stop.target_reward is not None and reward is not None and reward >= stop.target_reward:
        return "target_reward"
    if stop.total_timesteps is not None and at.env_steps >= stop.total_timesteps:
        return "total_timesteps"
    if stop.iterations is not None and at.iteration >= stop.iterations:
        return "iterations"
    if stop.wall_time_s is not None and at.time_total_s >= stop.wall_time_s:
        return "wall_time_s"
    return None


def reach_of_this_target(
    recorded: dict[str, Any] | None, stop: StopConfig
) -> dict[str, Any] | None:
    """A checkpoint's ``target_reached`` if it records this run's target, else None.

    A resume (or a fork, ``--resume --seed``) may ask for another target or metric than the
    run it continues: a fork of a run that stopped at a mean of 0, sent on to 10, must neither
    report the reach of 0 as its own nor skip recording its reach of 10."""
    if (
        recorded is None
        or stop.target_reward is None
        or recorded.get("metric") != stop.target_reward_metric
    ):
        return None
    if "target" in recorded:
        return recorded if recorded["target"] == stop.target_reward else None
    # Written before the target was kept with the reach: the value it reached tells.
    value = recorded.get("value")
    return recorded if value is not None and value >= stop.target_reward else None


def eta_s(stop: StopConfig, at: Counters, sps: float, iteration_s: float) -> float | None:
    """Seconds until the nearest budget runs out at the current pace (None: no budget)."""
    etas = []
    if stop.total_timesteps and sps > 0:
        etas.append((stop.total_timesteps - at.env_steps) / sps)
    if stop.iterations:
        etas.append((stop.iterations - at.iteration) * iteration_s)
    if stop.wall_time_s:
        etas.append(stop.wall_time_s - at.time_total_s)
    return max(min(etas), 0.0) if etas else None
