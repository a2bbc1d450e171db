"""Every valid (algorithm x runner) pair trains through the CLI with the same records."""

import importlib.util
import json

import psutil
import pytest

from rlperf.cli import main
from tests.conftest import read_metrics


@pytest.mark.parametrize("runner", ["inproc", "subprocess"])
@pytest.mark.parametrize("algo", ["ppo", "appo", "impala"])
def test_two_iterations_of_every_algorithm_on_every_runner(runs_root, algo, runner):
    children_before = {p.pid for p in psutil.Process().children(recursive=True)}
    code = main(
        [
            "train",
            "--algo",
            algo,
            "--runner",
            runner,
            "--env",
            "CartPole-v1",
            "--model",
            "mlp",
            "--num-workers",
            "2",
            "--envs-per-worker",
            "2",
            "--runs-root",
            str(runs_root),
            "-s",
            "run",
            "-i",
            "2",
            "--no-progress",
            "telemetry.tensorboard=false",
        ]
    )
    assert code == 0
    records = read_metrics(runs_root / "run")
    assert [r["iteration"] for r in records] == [1, 2]
    for r in records:
        phases = sum(r[f"{p}_time_ms"] for p in ("sample", "load", "learn", "update", "other"))
        assert phases == pytest.approx(1000 * r["time_this_iter_s"], rel=0.02)
        assert r["perf/env_step_time_ms"] > 0 and r["losses/policy_loss"] is not None
        assert r.get("sys/live_workers") == (2 if runner == "subprocess" else None)
    assert records[-1]["timesteps_total"] == 2 * 4 * {"ppo": 128, "appo": 128, "impala": 20}[algo]
    manifest = json.loads((runs_root / "run" / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    leftover = [
        p
        for p in psutil.Process().children(recursive=True)
        if p.pid not in children_before and "resource_tracker" not in " ".join(p.cmdline())
    ]
    assert not leftover  # worker processes are gone (multiprocessing's tracker lives on by design)


@pytest.mark.parametrize(
    "engine",
    [
        "ale-vector",
        pytest.param(
            "envpool",
            marks=pytest.mark.skipif(
                importlib.util.find_spec("envpool") is None, reason="envpool not installed"
            ),
        ),
    ],
)
def test_cpp_engines_train_pong(runs_root, engine):
    code = main(
        [
            "train",
            "--preset",
            "cleanrl-atari",
            "--engine",
            engine,
            "--runs-root",
            str(runs_root),
            "-s",
            "e",
            "-i",
            "2",
            "--no-progress",
            "env.num_envs=4",
            "ppo.num_steps=16",
            "ppo.num_minibatches=2",
            "telemetry.tensorboard=false",
        ]
    )
    assert code == 0
    records = read_metrics(runs_root / "e")
    assert records[-1]["timesteps_total"] == 128
