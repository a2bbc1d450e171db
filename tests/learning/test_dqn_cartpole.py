"""DQN learns CartPole: with seed 1 the EMA of true returns (003's criterion) reaches 150
within 30k env steps (about 14k on this code; 10-20 s on 2 idle cores)."""

import json

from rlperf.cli import main


def test_dqn_reaches_an_ema_of_150_on_cartpole_within_30k_steps(runs_root):
    code = main(
        [
            "train",
            "--preset",
            "dqn-cartpole",
            "--seed",
            "1",
            "--runs-root",
            str(runs_root),
            "-s",
            "dqn",
            "--no-progress",
            "stop.total_timesteps=30000",
            "telemetry.tensorboard=false",
        ]
    )
    assert code == 0
    manifest = json.loads((runs_root / "dqn" / "manifest.json").read_text())
    assert manifest["stop_reason"] == "target_reward"
    reached = manifest["target_reached"]
    assert reached["metric"] == "ema" and reached["value"] >= 150
    assert reached["env_steps"] <= 30_000
