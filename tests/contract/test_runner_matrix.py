"""The algorithm x runner matrix through the CLI, generated from ``RUNNER_FACTS``: every
valid pair trains two iterations with the same records, every other pair is refused in one
line before anything is written."""

import importlib.util
import json

import psutil
import pytest

from rlperf.cli import main
from rlperf.training import registry
from rlperf.training.registry import RUNNER_FACTS
from tests.conftest import read_metrics
from tests.contract.test_runner_facts import DATA, allowed

ALGO_ARGS = {
    "dqn": ["--preset", "dqn-cartpole", "--env", "CartPole-v1", "--model", "mlp"],
    "rnd": ["--preset", "rnd-montezuma-small"],
}
"""What each algorithm trains on here: CartPole with an MLP unless it needs another game."""
WORKERS = {"inproc": 2, "subprocess": 2, "decoupled": 2, "hogwild": 2, "play-train": 1}
ROLES = {
    "subprocess": "env_worker",
    "decoupled": "actor",
    "hogwild": "worker",
    "play-train": "play",
}


def _train(runs_root, algo: str, runner: str, *extra: str) -> int:
    argv = ALGO_ARGS.get(algo, ["--env", "CartPole-v1", "--model", "mlp"])
    return main(
        [
            "train", *argv, "--algo", algo, "--runner", runner,
            "--num-workers", str(WORKERS.get(runner, 2)), "--envs-per-worker", "2",
            "--runs-root", str(runs_root), "-s", "run", "-i", "2", "--no-progress",
            "telemetry.tensorboard=false", *extra,
        ]
    )  # fmt: skip


def _pairs(valid: bool) -> list[tuple[str, str]]:
    """Every (algorithm, runner) that RUNNER_FACTS allows (or refuses). The Ray runners'
    pairs train in tests/contract/test_ray_runner.py on the cluster those tests share."""
    return [
        (algo, runner)
        for algo in registry.ALGORITHMS
        for runner in RUNNER_FACTS
        if not RUNNER_FACTS[runner].on_ray and allowed(algo, runner) == valid
    ]


@pytest.mark.parametrize(("algo", "runner"), _pairs(valid=True))
def test_two_iterations_of_every_valid_algorithm_runner_pair(runs_root, algo, runner):
    children_before = {p.pid for p in psutil.Process().children(recursive=True)}
    assert _train(runs_root, algo, runner) == 0
    records = read_metrics(runs_root / "run")
    assert [r["iteration"] for r in records] == [1, 2]
    workers = 0 if runner == "inproc" else WORKERS[runner]
    for r in records:
        phases = sum(r[f"{p}_time_ms"] for p in ("sample", "load", "learn", "update", "other"))
        assert phases == pytest.approx(1000 * r["time_this_iter_s"], rel=0.02)
        assert r["perf/env_step_time_ms"] > 0
        assert r.get("sys/live_workers") == (workers or None)
        assert r["perf/actor_steps_per_s"] > 0 and r["perf/learner_samples_per_s"] > 0
        if runner == "decoupled":  # it drops rollouts above the algorithm's bound
            bound = DATA[algo][1]
            assert 0 <= r["perf/policy_lag"] <= r["perf/policy_lag_max"] <= bound
    assert any(k.startswith("losses/") and v is not None for k, v in records[-1].items())
    if algo in ("ppo", "appo", "impala"):
        per_iteration = {"ppo": 128, "appo": 128, "impala": 20}[algo] * 4
        assert records[-1]["timesteps_total"] == 2 * per_iteration
    else:
        assert records[-1]["timesteps_total"] > records[0]["timesteps_total"] > 0
    manifest = json.loads((runs_root / "run" / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    roles = [p["role"] for p in manifest["resources"]["processes"]]
    assert roles[0] == "learner"
    assert sorted(r for r in roles[1:] if r != "evaluator") == [ROLES.get(runner)] * workers
    if runner == "decoupled":  # one torch thread per actor by default
        threads = [p["torch_threads"] for p in manifest["resources"]["processes"][1:]]
        assert threads == [1, 1]
    leftover = [
        p
        for p in psutil.Process().children(recursive=True)
        if p.pid not in children_before and "resource_tracker" not in " ".join(p.cmdline())
    ]
    assert not leftover  # worker processes are gone (multiprocessing's tracker lives on by design)


@pytest.mark.parametrize(("algo", "runner"), _pairs(valid=False))
def test_every_invalid_pair_is_refused_in_one_line(runs_root, capsys, algo, runner):
    assert _train(runs_root, algo, runner) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("rlperf: error:") and runner in line
    assert not (runs_root / "run" / "config.yaml").exists()


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
    assert _train(runs_root, "ppo", "decoupled") == 2
    err = capsys.readouterr().err
    assert "runner decoupled acts with a policy up to 1 updates old" in err
    assert "algorithm ppo tolerates 0" in err


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
