"""stop.target_reward_metric=mean100+ema stops only once both the mean of the last 100 true
games and their EMA reach the target (source 003's criterion beside the usual one)."""

from pathlib import Path

from rlperf.config.schema import RunConfig
from rlperf.envs.base import EpisodeEnd
from rlperf.session import TrainingSession
from rlperf.telemetry.episodes import EpisodeStats


def session_with(returns: list[float], metric: str, tmp_path: Path) -> TrainingSession:
    cfg = RunConfig()
    cfg.stop.target_reward, cfg.stop.target_reward_metric = 17.0, metric
    session = TrainingSession(cfg, tmp_path / "run", command=["test"])
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
    session = session_with([], "mean100", tmp_path)
    session.cfg.stop.total_timesteps, session.cfg.stop.wall_time_s = 1000, 200.0
    session.env_steps, session.time_total_s = 250, 150.0
    assert session._fraction_left() == 0.75  # CleanRL's: env steps
    session.cfg.stop.anneal_over = "wall_time_s"
    assert session._fraction_left() == 0.25  # a deadline: seconds of training
    session.time_total_s = 260.0  # a resume past the old deadline stays at the end
    assert session._fraction_left() == 0.0
