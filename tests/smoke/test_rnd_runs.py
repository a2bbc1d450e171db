"""RND through the CLI: a few iterations on Montezuma's Revenge with each runner, and an
interrupted run that resumes to exactly the uninterrupted one (normalisers included)."""

import math

import pytest
import torch
from safetensors.torch import load_file

from rlperf.cli import main
from rlperf.core.checkpoint import resolve_checkpoint
from tests.conftest import read_metrics

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny networks

TINY_MONTEZUMA = [
    "--preset",
    "rnd-montezuma-small",
    "env.num_envs=2",
    "rnd.num_steps=16",
    "rnd.num_init_steps=16",
    "rnd.minibatch_size=16",
    "rnd.update_epochs=1",
    "runner.torch_threads=1",
    "telemetry.tensorboard=false",
    "telemetry.sysmon=false",
    "--no-progress",
]


@pytest.mark.parametrize("runner", ["inproc", "subprocess", "decoupled"])
def test_few_iterations_on_montezuma(runs_root, runner):
    extra = ["--runner", runner] + (["runner.num_workers=2"] if runner != "inproc" else [])
    extra.append("env.max_episode_steps=20")  # games end within each rollout: rooms are logged
    code = main(["train", *TINY_MONTEZUMA, *extra, "--runs-root", str(runs_root), "-s", "m", "-i", "3"])  # fmt: skip
    assert code == 0
    rows = read_metrics(runs_root / "m")
    assert [r["iteration"] for r in rows] == [1, 2, 3]
    assert rows[0]["charts/rnd_init_steps"] == 16  # the first rollout only initialises
    for r in rows[1:]:
        assert r["charts/int_reward_mean"] > 0 and math.isfinite(r["losses/rnd_loss"])
        assert math.isfinite(r["losses/value_loss_int"]) and r["losses/minibatches"] == 2
        if runner == "decoupled":  # V-trace was used on the lagged data
            assert r["losses/mean_rho"] > 0 and r["perf/policy_lag_max"] <= 2
    # Every runner carries the rooms of finished games into the records (the start room is 1).
    assert rows[-1]["rooms/visited_count"] >= 1 and "1" in rows[-1]["rooms_visited"].split()
    assert rows[-1]["rooms/per_game_mean"] >= 1
    weights = load_file(str(resolve_checkpoint(runs_root / "m") / "state.safetensors"))
    for key in ("algorithm.obs_rms.mean", "algorithm.policy.int_value_head.weight"):
        assert key in weights
    assert weights["algorithm.obs_rms.mean"].shape == (1, 84, 84)


def test_resumed_run_equals_uninterrupted_run(runs_root):
    common = [
        "train",
        "--algo",
        "rnd",
        "--env",
        "CartPole-v1",
        "--model",
        "mlp",
        "env.num_envs=4",
        "rnd.num_steps=32",
        "rnd.num_init_steps=32",
        "runner.torch_threads=1",
        "checkpoint.every=0",
        "telemetry.tensorboard=false",
        "telemetry.sysmon=false",
        "--no-progress",
        "--runs-root",
        str(runs_root),
    ]
    assert main([*common, "-s", "straight", "-i", "5"]) == 0
    assert main([*common, "-s", "split", "-i", "3"]) == 0
    assert (
        main(["train", "--resume", str(runs_root / "split"), "stop.iterations=5", "--no-progress"])
        == 0
    )
    a = load_file(str(resolve_checkpoint(runs_root / "straight") / "state.safetensors"))
    b = load_file(str(resolve_checkpoint(runs_root / "split") / "state.safetensors"))
    algo_keys = [k for k in a if k.startswith("algorithm.")]
    assert any("obs_rms" in k for k in algo_keys) and any("predictor" in k for k in algo_keys)
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    ra, rb = read_metrics(runs_root / "straight"), read_metrics(runs_root / "split")
    assert [r["charts/int_reward_mean"] for r in ra[1:]] == [
        r["charts/int_reward_mean"] for r in rb[1:]
    ]


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("rnd.update_proportion=0", "rnd.update_proportion must be in (0, 1]"),
        ("runner.num_learners=2", "runner.num_learners=1"),
        ("rnd.num_minibatches=4", "exactly one of rnd.num_minibatches"),
    ],
)
def test_bad_rnd_config_is_refused_before_anything_is_written(runs_root, capsys, override, needle):
    code = main(["train", "--preset", "rnd-montezuma-small", override, "--runs-root", str(runs_root), "-i", "1"])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err
    assert not runs_root.exists()
