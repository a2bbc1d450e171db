"""DQN's runners through the CLI and directly: every ladder rung trains a few hundred Pong
steps with records whose phases add up; the in-process runner interleaves one gradient step
per env step; the play process shuts down cleanly on success, error, SIGTERM and kills; a
resumed run continues and refills its replay."""

import functools
import json
import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from rlperf.cli import main
from rlperf.config.load import apply_dict, load_preset
from rlperf.config.schema import RunConfig
from rlperf.core.errors import ActorError
from rlperf.core.learner import Learner
from rlperf.core.nan_guard import NonFiniteGuard
from rlperf.core.types import Progress
from rlperf.envs.make import make_env_slice
from rlperf.models.catalog import build_model
from rlperf.runners.play_train import PlayTrainRunner
from rlperf.telemetry.timers import PhaseTimer
from rlperf.training import registry
from tests.conftest import read_metrics, start_training, wait_for_iterations
from tests.helpers.flaky_envs import cartpole_failing_once
from tests.unit.test_dqn import LADDER

PHASES = ("sample", "load", "learn", "update", "other")


def _spawned_children() -> list[psutil.Process]:
    return [
        p
        for p in psutil.Process().children(recursive=True)
        if "spawn_main" in " ".join(p.cmdline()) and "resource_tracker" not in " ".join(p.cmdline())
    ]


def _play_pid(run_dir: Path) -> int:
    manifest = json.loads((run_dir / "manifest.json").read_text())
    return next(p["pid"] for p in manifest["resources"]["processes"] if p["role"] == "play")


@pytest.mark.parametrize("rung", LADDER)
def test_every_ladder_rung_trains_a_few_hundred_pong_steps(runs_root, rung):
    code = main(
        [
            "train",
            "--algo",
            "dqn",
            "--env",
            "ALE/Pong-v5",
            "--preset",
            f"dqn-ladder/{rung}",
            "--runs-root",
            str(runs_root),
            "-s",
            "rung",
            "--no-progress",
            "dqn.learning_starts=96",
            "dqn.buffer_size=960",
            "dqn.steps_per_iteration=96",
            "stop.total_timesteps=192",  # one iteration to fill, one that learns
            # one learner thread: a second one stalls every op when other jobs share the cores
            "runner.torch_threads=1",
            "telemetry.warmup_iterations=1",
            "telemetry.tensorboard=false",
        ]
    )
    assert code == 0
    run_dir = runs_root / "rung"
    records = read_metrics(run_dir)
    assert [r["iteration"] for r in records] == [1, 2]
    assert records[-1]["timesteps_total"] == 192
    for r in records:
        phases = sum(r[f"{p}_time_ms"] for p in PHASES)
        assert phases == pytest.approx(1000 * r["time_this_iter_s"], rel=0.02)
        assert min(r[f"{p}_time_ms"] for p in PHASES) >= 0
        assert r["perf/fps"] > 0 and r["sys/proc_rss_mb"] > 0
    trained = records[-1]
    assert trained["perf/gradient_steps"] > 0 and trained["learn_time_ms"] > 0
    assert trained["losses/loss"] is not None and 0 < trained["losses/epsilon"] <= 1
    # 32 replayed samples per new transition on every rung (003's ratio)
    cfg = load_preset(f"dqn-ladder/{rung}")["dqn"]
    per_transition = cfg.get("batch_size", 32) / cfg.get("train_frequency", 1)
    assert per_transition == 32
    if rung in ("00-slow-grads", "01-baseline"):  # one gradient step per env step
        assert trained["perf/gradient_steps"] == 96
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    roles = [p["role"] for p in manifest["resources"]["processes"]]
    assert roles == (["learner", "play"] if rung >= "03" else ["learner"])
    assert not _spawned_children()


def test_dqn_fast_trains_pong_with_three_step_returns(runs_root):
    code = main(
        ["train", "--preset", "dqn-fast", "--env", "ALE/Pong-v5", "--runs-root", str(runs_root),
         "-s", "dqn-fast", "--no-progress", "dqn.learning_starts=256", "dqn.buffer_size=1024",
         "dqn.steps_per_iteration=256", "stop.total_timesteps=768", "runner.precision=fp32",
         "runner.torch_threads=1", "telemetry.warmup_iterations=1",
         "telemetry.tensorboard=false"]
    )  # fmt: skip
    assert code == 0
    records = read_metrics(runs_root / "dqn-fast")
    assert records[-1]["timesteps_total"] == 768
    # 8 replayed samples per env step: batch 32 every 4 env steps (the last iteration's)
    assert records[-1]["perf/gradient_steps"] == 256 // 4
    assert records[-1]["losses/loss"] is not None


def _cartpole_play_train(make_envs=None, **runner_keys):
    cfg = RunConfig()
    apply_dict(cfg, load_preset("dqn-cartpole"), "test")
    cfg.env.num_envs = 2
    cfg.runner.name = "play-train"
    cfg.dqn.learning_starts, cfg.dqn.steps_per_iteration = 64, 64
    for key, value in runner_keys.items():
        setattr(cfg.runner, key, value)
    spaces = registry.env_spaces(cfg, 84, None)
    algo = registry.make_algorithm(cfg, build_model(cfg.model, (4,), 2))
    runner = PlayTrainRunner(
        cfg.runner,
        algo,
        num_envs=2,
        obs_space=spaces.observation,
        frame_stack=1,
        frames_per_step=1,
        make_env_slice=make_envs or functools.partial(make_env_slice, cfg.env, 84),
        seed=1,
    )
    return runner, algo, runner.make_gradient_step(algo)


def _iterate(runner, algo, step, n):
    """``n`` iterations as the session drives them (progress from the runner's env steps)."""
    metrics = []
    learner = Learner(
        algo, step, NonFiniteGuard("raise"), lambda ahead: Progress(0, runner.env_steps, 1.0)
    )
    for _ in range(n):
        runner.run_iteration(learner, PhaseTimer())
        metrics.append(runner.worker_metrics())
    return metrics


def test_the_play_process_acts_with_published_weights_and_a_bounded_queue():
    runner, algo, step = _cartpole_play_train(play_queue_chunks=3)
    try:
        metrics = _iterate(runner, algo, step, 6)
        # the play process is at most the queue (3 chunks) plus the chunk it fills ahead
        time.sleep(0.5)
        assert len(runner._ready) <= 3
    finally:
        runner.close()
    assert runner.env_steps == 6 * 64
    assert metrics[-1]["perf/gradient_steps"] > 0 and metrics[-1]["sys/live_workers"] == 1
    assert metrics[-1]["perf/policy_lag_max"] >= 0
    assert runner.workers.live() == 0 and not _spawned_children()


def test_an_env_error_in_the_play_process_names_it_and_the_cause():
    failing = functools.partial(cartpole_failing_once, raise_at=30, failing_seed=1)
    runner, algo, step = _cartpole_play_train(failing, restart_failed_workers=False)
    try:
        with pytest.raises(ActorError) as info:
            _iterate(runner, algo, step, 10)
    finally:
        runner.close()
    message = str(info.value)
    assert "play process (envs 0..1" in message
    assert "ValueError: injected failure at step 30" in message
    assert "actor-side traceback" in "".join(info.value.__notes__)
    assert not _spawned_children()


def test_an_env_error_in_the_play_process_restarts_it_and_training_goes_on():
    failing = functools.partial(cartpole_failing_once, raise_at=30, failing_seed=1)
    runner, algo, step = _cartpole_play_train(failing, max_worker_restarts=1)
    try:
        metrics = _iterate(runner, algo, step, 6)
    finally:
        runner.close()
    assert metrics[-1]["sys/worker_restarts"] == 1 and metrics[-1]["sys/live_workers"] == 1
    assert not _spawned_children()


def _start_cartpole(runs_root: Path, name: str, *extra: str):
    return start_training(
        "--preset",
        "dqn-cartpole",
        "--runner",
        "play-train",
        "--runs-root",
        str(runs_root),
        "-s",
        name,
        "--no-progress",
        "dqn.steps_per_iteration=200",
        "dqn.learning_starts=200",
        "stop.target_reward=null",
        "stop.total_timesteps=100000000",
        "telemetry.tensorboard=false",
        *extra,
    )


def _gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return True
        time.sleep(0.1)
    return False


def test_sigterm_stops_the_trainer_and_the_play_process_with_a_checkpoint(runs_root):
    run_dir = runs_root / "term"
    proc = _start_cartpole(runs_root, "term")
    wait_for_iterations(proc, run_dir, 3)
    play = _play_pid(run_dir)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM.value, err
    assert "Traceback" not in err
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["stop_reason"] == "signal SIGTERM"
    last = read_metrics(run_dir)[-1]["iteration"]
    assert (run_dir / "checkpoints" / "latest").read_text().startswith(f"ckpt_{last:08d}_")
    assert _gone(play)


def test_a_killed_play_process_is_restarted_and_a_killed_trainer_takes_it_along(runs_root):
    run_dir = runs_root / "kill"
    proc = _start_cartpole(runs_root, "kill")
    wait_for_iterations(proc, run_dir, 2)
    first = _play_pid(run_dir)
    os.kill(first, signal.SIGKILL)
    deadline = time.monotonic() + 60
    rows = 0
    while time.monotonic() < deadline and rows < 1:
        time.sleep(0.2)
        rows = sum(r.get("sys/worker_restarts", 0) >= 1 for r in read_metrics(run_dir))
    assert rows >= 1 and proc.poll() is None  # restarted, still training
    second = psutil.Process(proc.pid).children()
    play = [p.pid for p in second if "spawn_main" in " ".join(p.cmdline())]
    assert play and first not in play
    proc.kill()  # SIGKILL: no clean-up code runs in the trainer
    proc.communicate(timeout=30)
    assert all(_gone(pid) for pid in play)


def test_a_resumed_dqn_run_continues_and_refills_its_replay(runs_root, capsys):
    args = [
        "--preset",
        "dqn-cartpole",
        "--runs-root",
        str(runs_root),
        "-s",
        "resume",
        "--no-progress",
        "dqn.steps_per_iteration=200",
        "dqn.learning_starts=300",
        "stop.target_reward=null",
        "telemetry.tensorboard=false",
        "checkpoint.every=1",
    ]
    assert main(["train", *args, "-i", "3"]) == 0
    run_dir = runs_root / "resume"
    before = read_metrics(run_dir)
    assert main(["train", "--resume", str(run_dir), "stop.iterations=5", "--no-progress"]) == 0
    records = read_metrics(run_dir)
    assert [r["iteration"] for r in records] == [1, 2, 3, 4, 5]
    assert records[3]["timesteps_total"] == 800
    # the algorithm's counters continue; the empty replay refills 300 transitions first
    assert records[3]["losses/gradient_steps"] == before[-1]["losses/gradient_steps"]
    assert records[3]["perf/gradient_steps"] == 0 and records[4]["perf/gradient_steps"] > 0
    assert records[3]["losses/epsilon"] < before[0]["losses/epsilon"]
    assert "replay buffer is not checkpointed" in capsys.readouterr().err
