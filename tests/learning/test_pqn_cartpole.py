"""PQN learns CartPole: the mean of the last 100 episodes reaches 475 within 100k env steps
(seed 1 reached it at 69.6k), with epsilon decayed over its share of the budget and Q(lambda)
returns from the acting network's own Q-values."""

import json

import pytest

from rlperf.cli import main
from tests.conftest import read_metrics


def test_pqn_solves_cartpole_within_100k_steps(runs_root):
    code = main(
        [
            "train", "--preset", "pqn-cartpole", "--seed", "1", "--runs-root", str(runs_root),
            "-s", "pqn", "--no-progress", "stop.total_timesteps=100000",
            "stop.target_reward=475", "telemetry.tensorboard=false",
        ]
    )  # fmt: skip
    assert code == 0
    manifest = json.loads((runs_root / "pqn" / "manifest.json").read_text())
    assert manifest["stop_reason"] == "target_reward"
    reached = manifest["target_reached"]
    assert reached["value"] >= 475 and reached["env_steps"] <= 100_000
    records = read_metrics(runs_root / "pqn")
    epsilons = [r["losses/epsilon"] for r in records]
    # decays from 1 over a fifth of 100k steps, then holds at end_e
    assert epsilons[0] == 1.0 and epsilons == sorted(epsilons, reverse=True)
    assert epsilons[-1] == pytest.approx(0.05)
