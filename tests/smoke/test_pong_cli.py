"""Two PPO iterations on real Pong through the CLI, for each of the thesis's input sizes."""

import csv
import json
from datetime import datetime

import pytest

from rlperf.cli import main
from tests.conftest import read_metrics

THESIS_COLUMNS = [
    "iteration",
    "episode_reward_min",
    "episode_reward_mean",
    "episode_reward_max",
    "episode_len_mean",
    "episodes_this_iter",
    "timesteps_total",
    "sample_time_ms",
    "load_time_ms",
    "learn_time_ms",
    "update_time_ms",
    "time_this_iter_s",
    "time_total_s",
    "SPS",
]
LOSS_COLUMNS = [
    "losses/policy_loss",
    "losses/value_loss",
    "losses/entropy",
    "losses/approx_kl",
    "losses/clipfrac",
    "losses/explained_variance",
    "losses/learning_rate",
]


@pytest.mark.parametrize("model,dim", [("thesis-1", 84), ("thesis-4", 168), ("thesis-3", 252)])
def test_two_iterations_of_pong_write_a_complete_run_directory(runs_root, capsys, model, dim):
    code = main(
        [
            "train",
            "--algo",
            "ppo",
            "--env",
            "ALE/Pong-v5",
            "--preset",
            "cleanrl-atari",
            "--model",
            model,
            "--runs-root",
            str(runs_root),
            "-s",
            f"pong{dim}",
            "-i",
            "2",
            "--no-progress",
            "env.num_envs=2",
            "ppo.num_steps=16",
            "ppo.num_minibatches=2",
            "ppo.update_epochs=1",
        ]
    )
    assert code == 0
    run_dir = runs_root / f"pong{dim}"
    assert f"run_dir: {run_dir}" in capsys.readouterr().out
    assert {"config.yaml", "manifest.json", "metrics.jsonl", "progress.csv", "checkpoints"} <= {
        p.name for p in run_dir.iterdir()
    }
    assert any(p.name.startswith("events.out.tfevents") for p in run_dir.iterdir())

    with (run_dir / "progress.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["iteration"] for r in rows] == ["1", "2"]
    assert set(THESIS_COLUMNS + LOSS_COLUMNS) <= set(rows[0])
    assert rows[1]["timesteps_total"] == "64"

    records = read_metrics(run_dir)
    assert records[0]["warmup"] is True and records[1]["warmup"] is False
    for r in records:
        phases = sum(r[f"{p}_time_ms"] for p in ("sample", "load", "learn", "update", "other"))
        assert phases == pytest.approx(1000 * r["time_this_iter_s"], rel=0.02)
        assert r["sys/cpu_percent"] is not None and "energy/joules" in r

    # iteration times are laps of one clock: they add up to the run's training time, which
    # fits inside the process's own start-to-end wall time
    assert sum(r["time_this_iter_s"] for r in records) == pytest.approx(records[-1]["time_total_s"])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    started = datetime.fromisoformat(manifest["started_utc"])
    ended = datetime.fromisoformat(manifest["ended_utc"])
    assert records[-1]["time_total_s"] < (ended - started).total_seconds()
    assert manifest["status"] == "completed" and manifest["stop_reason"] == "iterations"
    assert manifest["cpu"]["isa"] and manifest["versions"]["torch"]
    latest = (run_dir / "checkpoints" / "latest").read_text().strip()
    assert (run_dir / "checkpoints" / latest / "state.safetensors").is_file()
    import yaml

    assert yaml.safe_load((run_dir / "config.yaml").read_text())["model"]["name"] == model


def test_existing_run_directory_is_never_overwritten(runs_root, capsys):
    args = [
        "train",
        "--preset",
        "cartpole",
        "--runs-root",
        str(runs_root),
        "-s",
        "same",
        "-i",
        "1",
        "--no-progress",
    ]
    assert main(args) == 0
    before = (runs_root / "same" / "metrics.jsonl").read_text()
    assert main(args) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert (runs_root / "same" / "metrics.jsonl").read_text() == before
