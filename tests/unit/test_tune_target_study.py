"""The machinery of ``rlperf tune --objective time-to-target`` without training: rungs,
reading a trial's progress, the SQLite study's definition check, requeueing cut-off trials,
the directory lock, and the command line's one-line errors."""

import json
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from rlperf.cli import main
from rlperf.core.errors import UserInputError
from rlperf.sweep.search_space import Param, SearchSpace
from rlperf.sweep.tune_target import _directory_lock, _open_study, requeue_cut_off
from rlperf.sweep.tune_trial import TargetTune, read_progress, rungs


def test_rungs_double_up_to_the_longest_trial() -> None:
    assert rungs(60, 480) == [60, 120, 240, 480]
    assert rungs(60, 400) == [60, 120, 240, 400]
    assert rungs(30, 30) == [30]


def _write_records(run_dir: Path, rows: list[dict], stop_reason: str | None = None) -> None:
    run_dir.mkdir(parents=True)
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if stop_reason:
        manifest = {"status": "completed", "stop_reason": stop_reason}
        (run_dir / "manifest.json").write_text(json.dumps(manifest))


def test_progress_is_the_first_time_the_lower_of_mean_and_ema_reached_the_target(
    tmp_path: Path,
) -> None:
    rows = [
        {"time_total_s": 5.0, "episodes_total": 1, "episode_reward_mean": 21.0},  # 1 game
        {"time_total_s": 10.0},  # no game finished yet
        {"time_total_s": 20.0, "episode_reward_mean": 18.0, "episode_reward_ema": 16.0},
        {"time_total_s": 30.0, "episode_reward_mean": 17.5, "episode_reward_ema": 17.1},
        {"time_total_s": 40.0, "episode_reward_mean": 16.0, "episode_reward_ema": 17.5},
    ]
    _write_records(tmp_path / "run", rows)
    both = read_progress(tmp_path / "run", 17.0, "mean100+ema")
    assert (both.trained_s, both.hit_s, both.metric, both.ended) == (40.0, 30.0, 16.0, False)
    mean = read_progress(tmp_path / "run", 17.0, "mean100")
    assert mean.hit_s == 20.0
    _write_records(tmp_path / "ended", rows[:3], stop_reason="total_timesteps")
    ended = read_progress(tmp_path / "ended", 17.0, "mean100+ema")
    assert ended.ended and ended.hit_s is None and ended.metric == 16.0
    assert read_progress(tmp_path / "missing", 1.0, "mean100").trained_s == 0.0


def _tune(out: Path, target: float = 475.0) -> TargetTune:
    space = SearchSpace((Param("ppo.update_epochs", 1, 4),), "test")
    return TargetTune(out, ["cartpole"], {"env.id": "CartPole-v1"}, space, target, [5, 10], 2)


def test_a_directory_holding_another_study_is_refused(tmp_path: Path) -> None:
    study, _ = _open_study(_tune(tmp_path))
    assert study.user_attrs["definition"]["target"] == 475.0
    _open_study(_tune(tmp_path))  # the same study: continued
    with pytest.raises(UserInputError, match="holds a study with another target"):
        _open_study(_tune(tmp_path, target=400.0))


def test_trials_cut_off_are_requeued_once_with_their_parameters_and_run(tmp_path: Path) -> None:
    study, storage = _open_study(_tune(tmp_path))
    killed = study.ask({"ppo.update_epochs": optuna.distributions.IntDistribution(1, 4)})
    killed.set_user_attr("run_dir", "trials/trial-0000")
    killed.set_user_attr("overhead_s", 2.5)
    done = study.ask({"ppo.update_epochs": optuna.distributions.IntDistribution(1, 4)})
    study.tell(done, 12.0)
    signalled = study.ask({"ppo.update_epochs": optuna.distributions.IntDistribution(1, 4)})
    signalled.set_user_attr("interrupted", True)
    study.tell(signalled, state=TrialState.FAIL)

    assert requeue_cut_off(study, storage) == [0, 2]
    states = {t.number: t.state for t in study.trials}
    assert states[0] == TrialState.FAIL and states[1] == TrialState.COMPLETE
    waiting = [t for t in study.trials if t.state == TrialState.WAITING]
    assert [w.user_attrs["resumes"] for w in waiting] == [0, 2]
    assert waiting[0].user_attrs["run_dir"] == "trials/trial-0000"
    assert waiting[0].user_attrs["overhead_s"] == 2.5
    assert waiting[0].system_attrs["fixed_params"] == study.trials[0].params
    assert requeue_cut_off(study, storage) == []  # never queued twice


def test_one_tune_at_a_time_per_directory(tmp_path: Path) -> None:
    with (
        _directory_lock(tmp_path),
        pytest.raises(UserInputError, match="another rlperf tune"),
        _directory_lock(tmp_path),
    ):
        pass
    with _directory_lock(tmp_path):  # released
        pass


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ([], "needs --target R"),
        (["--target", "high"], "--target must be a number"),
        (["--target", "475", "--budget", "2 hours"], "--budget must be a duration"),
        (["--target", "475", "--rung", "2m", "--max-trial", "1m"], "must be at least --rung"),
        (["--target", "475", "--parallel", "999"], "needs a CPU per trial"),
        (["--target", "475", "--trials", "0"], "--trials must be a positive integer, got 0"),
        (["--target", "475", "--space", "nowhere.yaml"], "cannot read it"),
        (["--target", "475", "--algo", "a3c"], "no default search space"),
        (
            ["--target", "475", "stop.anneal_over=wall_time_s", "stop.wall_time_s=60"],
            "add stop.anneal_over=total_timesteps",
        ),
    ],
)
def test_bad_time_to_target_flags_exit_2_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    argv = ["tune", "--objective", "time-to-target", "--env", "CartPole-v1", "-o", str(tmp_path)]
    assert main([*argv, *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "study.db").exists()


def test_an_unknown_objective_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", "--objective", "reward", "--env", "CartPole-v1"]) == 2
    assert "--objective must be sps or time-to-target" in capsys.readouterr().err


def test_parallel_trials_each_get_their_own_cpus() -> None:
    from rlperf.sweep.execute import CpuShares

    slots = CpuShares(list(range(8)), parallel=3)
    with slots.take() as a, slots.take() as b, slots.take() as c:
        assert [a, b, c] == [[0, 1], [2, 3], [4, 5]]  # 8 // 3 CPUs each, none shared
    with CpuShares([0, 1], parallel=1).take() as only:
        assert only is None  # one trial at a time: not pinned, every CPU
