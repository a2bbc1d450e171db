"""Resume equivalence: N+M iterations in one process == N, a new process, resume, M more."""

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file

from rlperf.core.checkpoint import resolve_checkpoint
from tests.conftest import read_metrics, rlperf_subprocess

COMMON = [
    "--no-progress",
    "runner.torch_threads=1",
    "stop.total_timesteps=1000000",
    "checkpoint.every=0",
]


def _weights(run_dir):
    tensors = load_file(str(resolve_checkpoint(run_dir) / "state.safetensors"))
    return {k: v for k, v in tensors.items() if k.startswith("algorithm.policy.")}


@pytest.mark.parametrize(
    "env_args",
    [
        ["--preset", "cartpole"],
        ["--preset", "pqn-cartpole"],  # epsilon, RAdam's state and the exploration draws
        [
            "--preset",
            "cleanrl-atari",
            "--env",
            "ALE/Pong-v5",
            "env.num_envs=2",
            "ppo.num_steps=32",
            "ppo.update_epochs=1",
            "env.repeat_action_probability=0.25",
        ],
    ],
    ids=["cartpole", "pqn-cartpole", "pong-sticky"],
)
def test_resumed_run_ends_with_identical_parameters(runs_root, env_args):
    straight = rlperf_subprocess(
        "train", *env_args, *COMMON, "--runs-root", str(runs_root), "-s", "straight", "-i", "5"
    )
    assert straight.returncode == 0, straight.stderr
    first = rlperf_subprocess(
        "train", *env_args, *COMMON, "--runs-root", str(runs_root), "-s", "split", "-i", "3"
    )
    assert first.returncode == 0, first.stderr
    resumed = rlperf_subprocess(
        "train", "--resume", str(runs_root / "split"), "stop.iterations=5", "--no-progress"
    )
    assert resumed.returncode == 0, resumed.stderr

    a, b = _weights(runs_root / "straight"), _weights(runs_root / "split")
    assert a.keys() == b.keys() and a
    for key in a:
        assert torch.equal(a[key], b[key]), key

    rows = read_metrics(runs_root / "split")
    assert [r["iteration"] for r in rows] == [1, 2, 3, 4, 5]
    straight_rows = read_metrics(runs_root / "straight")
    assert [r["timesteps_total"] for r in rows] == [r["timesteps_total"] for r in straight_rows]
    assert rows[-1]["losses/learning_rate"] == straight_rows[-1]["losses/learning_rate"]
    assert rows[-1]["episode_reward_mean"] == straight_rows[-1]["episode_reward_mean"]
    csv_lines = (runs_root / "split" / "progress.csv").read_text().splitlines()
    assert len(csv_lines) == 6 and csv_lines.count(csv_lines[0]) == 1  # one header, five rows


def test_inproc_and_subprocess_runners_learn_identically(runs_root):
    """The same seed gives the same batches whichever runner steps the envs, so the same weights."""
    common = [
        "--preset",
        "cartpole",
        *COMMON,
        "--runs-root",
        str(runs_root),
        "-i",
        "3",
        "--num-workers",
        "2",
    ]
    for runner in ("inproc", "subprocess"):
        result = rlperf_subprocess("train", *common, "--runner", runner, "-s", runner)
        assert result.returncode == 0, result.stderr
    a, b = _weights(runs_root / "inproc"), _weights(runs_root / "subprocess")
    assert a.keys() == b.keys() and a
    for key in a:
        assert torch.equal(a[key], b[key]), key
    rows_a, rows_b = read_metrics(runs_root / "inproc"), read_metrics(runs_root / "subprocess")
    assert [r["episode_reward_mean"] for r in rows_a] == [r["episode_reward_mean"] for r in rows_b]


def test_a_resume_with_another_seed_forks_the_run(runs_root):
    """Same checkpoint, same seed: the original line; another seed: other draws from there on,
    recorded as a branch, the rows before the checkpoint kept as they were."""
    cartpole = ["--preset", "cartpole", *COMMON, "--runs-root", str(runs_root)]
    first = rlperf_subprocess("train", *cartpole, "--seed", "1", "-s", "base", "-i", "3")
    assert first.returncode == 0, first.stderr
    shutil.copytree(runs_root / "base", runs_root / "fork")
    # The fork also sets a knob: its branch says which, from what to what.
    for name, seed, knobs in (("base", "1", []), ("fork", "2", ["ppo.ent_coef=0.02"])):
        resumed = rlperf_subprocess(
            "train",
            "--resume",
            str(runs_root / name),
            "--seed",
            seed,
            "stop.iterations=5",
            *knobs,
            "--no-progress",
        )
        assert resumed.returncode == 0, resumed.stderr

    base, fork = read_metrics(runs_root / "base"), read_metrics(runs_root / "fork")
    assert [r["iteration"] for r in fork] == [1, 2, 3, 4, 5]
    assert [r["losses/policy_loss"] for r in fork[:3]] == [
        r["losses/policy_loss"] for r in base[:3]
    ]
    a, b = _weights(runs_root / "base"), _weights(runs_root / "fork")
    assert any(not torch.equal(a[key], b[key]) for key in a)

    manifests = [
        json.loads((runs_root / n / "manifest.json").read_text()) for n in ("base", "fork")
    ]
    assert manifests[0]["branches"] == []
    steps = fork[2]["timesteps_total"]
    assert manifests[1]["branches"] == [
        {
            "from_seed": 1, "seed": 2, "iteration": 3, "env_steps": steps,
            "changed": {"stop.iterations": [3, 5], "ppo.ent_coef": [0.0, 0.02]},
        }
    ]  # fmt: skip
    assert manifests[1]["seed"] == 2


def test_a_resume_with_a_higher_target_drops_the_reach_of_the_lower(runs_root):
    """A run stopped at its target and sent on to a higher one has not reached that one."""
    cartpole = ["--preset", "cartpole", *COMMON, "--runs-root", str(runs_root)]
    low = ["stop.target_reward_metric=ema", "stop.target_reward=5"]
    first = rlperf_subprocess("train", *cartpole, "-s", "reach", *low)
    assert first.returncode == 0, first.stderr
    manifest = json.loads((runs_root / "reach" / "manifest.json").read_text())
    assert manifest["stop_reason"] == "target_reward"
    assert manifest["target_reached"]["target"] == 5
    resumed = rlperf_subprocess(
        "train",
        "--resume",
        str(runs_root / "reach"),
        "stop.target_reward=1000000",
        f"stop.iterations={manifest['iteration'] + 2}",
        "--no-progress",
    )
    assert resumed.returncode == 0, resumed.stderr
    manifest = json.loads((runs_root / "reach" / "manifest.json").read_text())
    assert manifest["stop_reason"] == "iterations"
    assert manifest["target_reached"] is None
