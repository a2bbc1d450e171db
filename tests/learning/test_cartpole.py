"""PPO learns CartPole: the mean of the last 100 true episodes reaches 475 within 150k steps,
with the learner's precision chosen by timing (runner.precision=auto)."""

import json

from rlperf.cli import main


def test_ppo_solves_cartpole_within_150k_steps(runs_root):
    code = main(
        [
            "train",
            "--algo",
            "ppo",
            "--env",
            "CartPole-v1",
            "--preset",
            "cartpole",
            "--seed",
            "1",
            "--runs-root",
            str(runs_root),
            "-s",
            "cartpole",
            "--no-progress",
            "stop.total_timesteps=150000",
            "stop.target_reward=475",
            "telemetry.tensorboard=false",
            "runner.precision=auto",
        ]
    )
    assert code == 0
    manifest = json.loads((runs_root / "cartpole" / "manifest.json").read_text())
    auto = manifest["resources"]["precision_auto"]
    assert set(auto["samples_per_s"]) == {"fp32", "bf16"}  # an MLP has no layout to time
    assert manifest["resources"]["precision"] == auto["precision"]
    assert manifest["stop_reason"] == "target_reward"
    reached = manifest["target_reached"]
    assert reached["value"] >= 475 and reached["env_steps"] <= 150_000
