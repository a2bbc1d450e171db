"""A3C with 2 Hogwild processes learns the in-repo empty-goal-close: the last 100 training
episodes score at least 90% of the time within 400k env steps (seed 1 needs about 100k)."""

import json

import psutil

from rlperf.cli import main
from tests.conftest import read_metrics


def test_a3c_scores_90_percent_on_empty_goal_close(runs_root):
    code = main(
        [
            "train",
            "--preset",
            "a3c-football-quick",
            "--seed",
            "1",
            "--runs-root",
            str(runs_root),
            "-s",
            "a3c",
            "--no-progress",
            "telemetry.tensorboard=false",
            "runner.eval_interval_s=0.5",
        ]
    )
    assert code == 0
    run_dir = runs_root / "a3c"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["stop_reason"] == "target_reward"
    reached = manifest["target_reached"]
    assert reached["value"] >= 0.9 and reached["env_steps"] <= 400_000
    rows = read_metrics(run_dir)
    last = rows[-1]
    # The workers' own timings and losses reach the run's records.
    assert last["perf/worker_learn_time_ms"] > 0 and last["perf/worker_sample_time_ms"] > 0
    assert last["losses/segments"] >= 2 and "worker0/policy_loss" in last
    # The evaluation process played greedy episodes with the shared model meanwhile.
    assert max(r.get("eval/greedy_episodes", 0) for r in rows) > 0
    processes = manifest["resources"]["processes"]
    assert sorted(p["role"] for p in processes) == ["evaluator", "learner", "worker", "worker"]
    # Success leaves no process behind (SIGTERM and a dead worker: tests/fault).
    children = [p["pid"] for p in processes if p["role"] != "learner"]
    assert not [c.pid for c in psutil.Process().children(recursive=True) if c.pid in children]
