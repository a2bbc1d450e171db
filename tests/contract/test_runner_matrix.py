"""Every valid (algorithm x runner) pair trains through the CLI with the same records."""

import importlib.util
import json

import psutil
import pytest

from rlperf.cli import main
from tests.conftest import read_metrics


def _train_cartpole(runs_root, algo: str, runner: str, *extra: str) -> int:
    return main(
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
            *extra,
        ]
    )


VALID_PAIRS = [
    (algo, runner)
    for runner in ("inproc", "subprocess", "decoupled")
    for algo in ("ppo", "appo", "impala")
    if (algo, runner) != ("ppo", "decoupled")
]


@pytest.mark.parametrize(("algo", "runner"), VALID_PAIRS)
def test_two_iterations_of_every_valid_algorithm_runner_pair(runs_root, algo, runner):
    children_before = {p.pid for p in psutil.Process().children(recursive=True)}
    code = _train_cartpole(runs_root, algo, runner)
    assert code == 0
    records = read_metrics(runs_root / "run")
    assert [r["iteration"] for r in records] == [1, 2]
    for r in records:
        phases = sum(r[f"{p}_time_ms"] for p in ("sample", "load", "learn", "update", "other"))
        assert phases == pytest.approx(1000 * r["time_this_iter_s"], rel=0.02)
        assert r["perf/env_step_time_ms"] > 0 and r["losses/policy_loss"] is not None
        assert r.get("sys/live_workers") == (None if runner == "inproc" else 2)
        assert r["perf/actor_steps_per_s"] > 0 and r["perf/learner_samples_per_s"] > 0
        if runner == "decoupled":
            # lag bounded by the algorithm; the batch was read from actor processes
            bound = {"appo": 2, "impala": 4}[algo]
            assert 0 <= r["perf/policy_lag"] <= r["perf/policy_lag_max"] <= bound
    assert records[-1]["timesteps_total"] == 2 * 4 * {"ppo": 128, "appo": 128, "impala": 20}[algo]
    manifest = json.loads((runs_root / "run" / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    processes = manifest["resources"]["processes"]
    assert processes[0]["role"] == "learner"
    workers = {"inproc": [], "subprocess": ["env_worker"] * 2, "decoupled": ["actor"] * 2}
    assert [p["role"] for p in processes[1:]] == workers[runner]
    if runner == "decoupled":  # one torch thread per actor by default
        assert [p["torch_threads"] for p in processes[1:]] == [1, 1]
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


def test_an_algorithm_without_lag_correction_is_refused_by_the_decoupled_runner(runs_root, capsys):
    assert _train_cartpole(runs_root, "ppo", "decoupled") == 2
    err = capsys.readouterr().err
    assert "runner decoupled acts with a policy up to 1 updates old" in err
    assert "algorithm ppo tolerates 0" in err
    assert not (runs_root / "run" / "config.yaml").exists()


def test_decoupled_actors_step_a_cpp_engine(runs_root):
    code = main(
        [
            "train",
            "--preset",
            "cleanrl-atari",
            "--algo",
            "impala",
            "--runner",
            "decoupled",
            "--engine",
            "ale-vector",
            "--num-workers",
            "2",
            "--envs-per-worker",
            "2",
            "--runs-root",
            str(runs_root),
            "-s",
            "d",
            "-i",
            "3",
            "--no-progress",
            "telemetry.tensorboard=false",
        ]
    )
    assert code == 0
    records = read_metrics(runs_root / "d")
    assert records[-1]["timesteps_total"] == 3 * 4 * 20
    assert records[-1]["sys/live_workers"] == 2
