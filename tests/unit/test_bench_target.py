"""Time to target in a bench (``report/bench_target.py``): one seed's outcome from its
manifest, records and sweep timing, and the median over seeds with its bootstrap interval,
checked against values worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from rlperf.report.bench_target import (
    SeedTarget,
    censored_median,
    median_text,
    parity_split_steps,
    process_seconds,
    seed_target,
    summarise_targets,
    summary_line,
)

REACHED = {  # as the training session writes it when the criterion first reaches the target
    "metric": "mean100+ema",
    "value": 17.2,
    "iteration": 120,
    "env_steps": 480_000,
    "wall_time_s": 312.5,
}


def _records(final_mean: float | None, steps: int, seconds: float) -> list[dict]:
    return [
        {"episode_reward_mean": -20.0, "timesteps_total": steps // 2, "time_total_s": seconds / 2},
        {"episode_reward_mean": final_mean, "timesteps_total": steps, "time_total_s": seconds},
    ]


def test_a_reached_seed_takes_its_time_from_target_reached() -> None:
    manifest = {"target_reached": REACHED, "env_steps": 500_000, "time_total_s": 330.0}
    got = seed_target(manifest, _records(17.5, 500_000, 330.0), ledger_wall_s=351.25)
    assert got == SeedTarget(True, 480_000, 312.5, 351.25, "sweep", 17.2, 17.5)


def test_a_missed_seed_shows_its_cap_and_where_it_ended() -> None:
    manifest = {"target_reached": None, "env_steps": 1_200_000, "time_total_s": 901.5}
    got = seed_target(manifest, _records(12.25, 1_200_000, 901.5), ledger_wall_s=940.0)
    assert (got.reached, got.env_steps, got.seconds) == (False, 1_200_000, 901.5)
    assert (got.final_mean, got.value, got.process_s) == (12.25, None, 940.0)
    # a manifest without the final counters: the last record's
    bare = seed_target({}, _records(3.0, 700, 8.0))
    assert (bare.reached, bare.env_steps, bare.seconds, bare.final_mean) == (False, 700, 8.0, 3.0)


def test_command_seconds_prefer_the_sweep_then_the_manifest() -> None:
    manifest = {
        "started_utc": "2026-01-01T12:00:00+00:00",
        "ended_utc": "2026-01-01T12:07:30.5+00:00",
    }
    assert process_seconds(manifest, 455.0) == (455.0, "sweep")
    assert process_seconds(manifest) == (450.5, "manifest")
    assert process_seconds({**manifest, "ended_utc": None}) == (None, None)  # still running
    assert process_seconds({}) == (None, None)


def test_median_and_interval_of_known_values() -> None:
    # 7 seeds 10..70: the median is 40. A bootstrap median is <= x_k when 4 or more of the 7
    # draws are <= x_k: P = P(Binomial(7, k/7) >= 4) = 0.010 for 10 and 0.108 for 20, so the
    # 2.5 % percentile is 20 and (by symmetry) the 97.5 % one 60.
    m = censored_median([10, 20, 30, 40, 50, 60, 70], [True] * 7)
    assert (m.value, m.low, m.high) == (40.0, 20.0, 60.0)
    assert (m.n, m.reached, m.lower_bound, m.beyond_cap) == (7, 7, False, False)
    assert median_text(m) == "40 [20, 60]"
    # 2 seeds: a resample's median is a (1/4), b (1/4) or their mean (1/2): [a, b]
    two = censored_median([5.0, 9.0], [True, True])
    assert (two.value, two.low, two.high) == (7.0, 5.0, 9.0)
    same = censored_median([3.0, 3.0, 3.0], [True] * 3)
    assert same.low == same.value == same.high == 3.0
    one = censored_median([4.0], [True])
    assert (one.value, one.low, one.high) == (4.0, None, None)  # nothing to resample


def test_misses_count_at_their_cap_as_lower_bounds() -> None:
    m = censored_median([100, 200, 300, 900, 900], [True, True, True, False, False])
    assert m.value == 300.0 and (m.reached, m.missed) == (3, 2)
    assert m.lower_bound and not m.beyond_cap
    assert median_text(m, " s").startswith(">= 300 s [")


@pytest.mark.parametrize(
    ("reached", "beyond"),
    [([False] * 3, True), ([True, True, False, False], True), ([True, True, True, False], False)],
)
def test_half_or_more_missed_is_beyond_the_cap(reached: list[bool], beyond: bool) -> None:
    m = censored_median([900.0] * len(reached), reached)
    assert m.beyond_cap is beyond
    assert (median_text(m) == "> cap") is beyond


def test_the_interval_is_reproducible_and_leaves_numpys_generator_alone() -> None:
    values = [3.0, 9.0, 1.0, 7.0, 4.0, 8.0]
    np.random.seed(5)
    before = np.random.get_state()[1].copy()
    first = censored_median(values, [True] * 6)
    assert np.array_equal(np.random.get_state()[1], before)
    assert censored_median(values, [True] * 6) == first
    with pytest.raises(ValueError, match="no seeds"):
        censored_median([], [])


def test_summary_line_for_the_console() -> None:
    def seed(steps: int, seconds: float, reached: bool = True) -> SeedTarget:
        return SeedTarget(reached, steps, seconds, None, None, None, 0.0)

    seeds = {1: seed(400, 40.0), 2: seed(600, 60.0), 3: seed(1000, 90.0, reached=False)}
    s = summarise_targets("atari-fast", "ALE/Pong-v5", seeds)
    assert s is not None and s.reached == 2
    line = summary_line(s, 17.0)
    assert line.startswith("time to target 17: atari-fast on ALE/Pong-v5: 2 of 3 seed(s)")
    assert "median env steps >= 600 [" in line and "median training time >= 60 s [" in line
    assert line.endswith("misses counted at their cap: lower bounds")
    assert summarise_targets("a", "g", {}) is None


def test_a_seeds_games_split_by_frame_parity_are_counted_in_env_steps() -> None:
    def record(steps: int, even: float | None, odd: float | None) -> dict:
        return {
            "timesteps_total": steps,
            "parity/even_reward_mean": even,
            "parity/odd_reward_mean": odd,
        }

    records = [
        record(1_000, None, None),  # not ten games of each yet
        record(2_000, -20.0, -14.0),  # 6 apart: split
        record(3_000, -10.0, -6.0),  # 4 apart: together
        record(4_000, -5.0, 12.0),  # split
        record(5_000, 17.0, 17.5),
    ]
    assert parity_split_steps(records, 5_000) == 2_000
    assert parity_split_steps(records, 3_500) == 1_000 + 500  # a target inside a split iteration
    manifest = {"target_reached": {**REACHED, "env_steps": 5_000}}
    assert seed_target(manifest, records).parity_split_steps == 2_000
    # runs that recorded no parities: not known, rather than none
    assert parity_split_steps(_records(3.0, 700, 8.0), 700) is None
    assert seed_target({}, _records(3.0, 700, 8.0)).parity_split_steps is None
