"""stop.target_reward_metric=mean100+ema stops only once both the mean of the last 100 true
games and their EMA reach the target (source 003's criterion beside the usual one)."""

from pathlib import Path

import pytest

from rlperf.config.schema import RunConfig
from rlperf.envs.base import EpisodeEnd
from rlperf.telemetry.episodes import EpisodeStats
from rlperf.training.resolve import resolve
from rlperf.training.session import TrainingSession
from rlperf.training.stop_criteria import target_share


def session_with(
    returns: list[float], metric: str, tmp_path: Path, **stop: object
) -> TrainingSession:
    cfg = RunConfig()
    cfg.stop.target_reward, cfg.stop.target_reward_metric = 17.0, metric
    for key, value in stop.items():
        setattr(cfg.stop, key, value)
    session = TrainingSession(resolve(cfg), tmp_path / "run", command=["test"])
    session.stats = EpisodeStats()
    session.stats.add([EpisodeEnd(0, r, 100) for r in returns])
    session.iteration = session.env_steps = 0
    session.time_total_s = 0.0
    session.target_reached = None
    return session


def test_both_criteria_must_hold(tmp_path):
    # 100 games at 20 after a long losing streak: the mean of 100 is 20, the EMA still low.
    games = [-21.0] * 200 + [20.0] * 100
    assert session_with(games, "mean100", tmp_path)._stop_reason() == "target_reward"
    both = session_with(games, "mean100+ema", tmp_path)
    assert both.stats.ema < 17 and both._stop_reason() is None
    # Once the EMA catches up, the run stops and records the lower of the two.
    later = session_with(games + [20.0] * 150, "mean100+ema", tmp_path)
    assert later._stop_reason() == "target_reward"
    assert later.target_reached["metric"] == "mean100+ema"
    assert later.target_reached["value"] == later.stats.ema


def test_the_mean_needs_a_full_window_also_with_the_ema(tmp_path):
    assert session_with([21.0] * 99, "mean100+ema", tmp_path)._stop_reason() is None


def test_schedules_run_down_the_step_budget_or_the_training_seconds(tmp_path):
    budget = {"total_timesteps": 1000, "wall_time_s": 200.0}
    session = session_with([], "mean100", tmp_path, **budget)
    session.env_steps, session.time_total_s = 250, 150.0
    assert session._progress_at(0).fraction_left == 0.75  # CleanRL's: env steps
    assert session._progress_at(50).fraction_left == 0.70  # steps taken in this iteration count
    session = session_with([], "mean100", tmp_path, anneal_over="wall_time_s", **budget)
    session.env_steps, session.time_total_s = 250, 150.0
    assert session._progress_at(0).fraction_left == 0.25  # a deadline: seconds of training
    session.time_total_s = 260.0  # a resume past the old deadline stays at the end
    assert session._progress_at(0).fraction_left == 0.0


def test_the_share_of_the_way_to_the_target_is_measured_from_the_first_100_games(tmp_path):
    # Pong's scale: the first 100 games at -20 (first_mean), then 100 at 10: 30 of the 37
    # points from -20 to the target 17
    games = [-20.0] * 100 + [10.0] * 100
    session = session_with(games, "mean100+ema", tmp_path)
    assert session.stats.first_mean == -20.0
    assert session._progress_at(0).target_share == pytest.approx(30 / 37)
    assert session_with(games[:99], "mean100", tmp_path)._progress_at(0).target_share is None
    # the first window is kept by a checkpoint; one written before it was kept has none
    resumed = EpisodeStats()
    resumed.load_state_dict(session.stats.state_dict())
    assert resumed.first_mean == -20.0 and resumed.total == 200
    old = session.stats.state_dict()
    del old["first_mean"]
    resumed = EpisodeStats()
    resumed.load_state_dict(old)
    assert target_share(resumed, 17.0) is None
    # no target, or one the first games already met: no share
    assert target_share(session.stats, None) is None
    assert target_share(session.stats, -25.0) is None


def test_the_session_reads_a_frozen_resolved_config(tmp_path):
    import dataclasses

    session = session_with([], "mean100", tmp_path, total_timesteps=1000)
    assert session.cfg.model.name == "nature"  # auto resolved for the Atari default
    with pytest.raises(dataclasses.FrozenInstanceError):
        session.cfg.stop.total_timesteps = 10


def test_the_first_budget_met_wins_and_the_eta_is_the_nearest():
    from rlperf.config.schema import StopConfig
    from rlperf.training.stop_criteria import Counters, eta_s, stop_reason

    stop = StopConfig(total_timesteps=1000, iterations=10, wall_time_s=60.0)
    assert stop_reason(stop, Counters(3, 500, 10.0), reward=None) is None
    assert stop_reason(stop, Counters(10, 500, 10.0), reward=None) == "iterations"
    assert stop_reason(stop, Counters(10, 1000, 61.0), reward=None) == "total_timesteps"
    stop.target_reward = 17.0
    assert stop_reason(stop, Counters(10, 1000, 61.0), reward=17.0) == "target_reward"
    assert stop_reason(stop, Counters(1, 10, 1.0), reward=16.9) is None
    # 500 steps left at 100 SPS (5 s), 7 iterations of 2 s (14 s), 50 s of wall time
    assert eta_s(stop, Counters(3, 500, 10.0), sps=100.0, iteration_s=2.0) == 5.0
    assert eta_s(StopConfig(total_timesteps=None), Counters(0, 0, 0.0), 1.0, 1.0) is None


def test_a_resume_keeps_a_reach_only_of_its_own_target():
    from rlperf.config.schema import StopConfig
    from rlperf.training.stop_criteria import reach_of_this_target

    reach = {"metric": "mean100", "target": 0.0, "value": 0.4, "env_steps": 550_000}
    same = StopConfig(target_reward=0.0, target_reward_metric="mean100")
    assert reach_of_this_target(reach, same) is reach  # a plain resume keeps its reach
    # A fork sent on to 10 has not reached 10, nor is its reach measured by another metric.
    assert reach_of_this_target(reach, StopConfig(target_reward=10.0)) is None
    other_metric = StopConfig(target_reward=0.0, target_reward_metric="mean100+ema")
    assert reach_of_this_target(reach, other_metric) is None
    assert reach_of_this_target(reach, StopConfig(target_reward=None)) is None
    # A reach written before the target was kept counts where its value meets the target.
    legacy = {"metric": "mean100", "value": 17.2, "env_steps": 800_000}
    assert reach_of_this_target(legacy, StopConfig(target_reward=17.0)) is legacy
    assert reach_of_this_target(legacy, StopConfig(target_reward=18.0)) is None


def test_a_reach_records_its_target(tmp_path):
    session = session_with([20.0] * 100, "mean100", tmp_path)
    assert session._stop_reason() == "target_reward"
    assert session.target_reached["target"] == 17.0
