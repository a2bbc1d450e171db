"""rlperf enjoy: plays the checkpoint of every algorithm; prints scores (and on Montezuma's
Revenge the rooms); writes videos that can be read back frame by frame."""

import shutil

import cv2
import pytest
import torch
from PIL import Image

from rlperf.cli import main
from rlperf.enjoy import play

CARTPOLE = {
    "ppo": ["--preset", "cartpole", "ppo.num_steps=16", "ppo.update_epochs=1"],
    "appo": ["--algo", "appo", "--env", "CartPole-v1", "--model", "mlp", "appo.num_steps=16"],
    "impala": ["--algo", "impala", "--env", "CartPole-v1", "--model", "mlp"],
    "dqn": ["--preset", "dqn-cartpole", "dqn.learning_starts=64", "dqn.steps_per_iteration=128"],
    "pqn": ["--preset", "pqn-cartpole", "pqn.num_steps=8"],
    "rnd": ["--algo", "rnd", "--env", "CartPole-v1", "--model", "mlp", "rnd.num_steps=16", "rnd.num_init_steps=0"],
}  # fmt: skip
COMMON = ["--no-progress", "telemetry.tensorboard=false", "telemetry.sysmon=false", "-i", "1"]


@pytest.fixture(autouse=True)
def one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("algo", list(CARTPOLE))
def test_enjoy_plays_every_algorithm(runs_root, algo, capsys):
    args = ["train", *CARTPOLE[algo], *COMMON, "--runs-root", str(runs_root), "-s", algo]
    assert main(args) == 0
    capsys.readouterr()
    assert main(["enjoy", str(runs_root / algo), "--episodes", "2", "--greedy"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("checkpoint ") and "greedy play" in lines[0]
    assert [line.split(":")[0] for line in lines[1:3]] == ["episode 1", "episode 2"]
    assert all("total reward" in line for line in lines[1:3])
    results = play(runs_root / algo, episodes=1, report=lambda _: None)
    assert results[0].total_reward == results[0].length > 0  # CartPole: +1 per step
    assert results[0].rooms is None
    if algo in ("dqn", "pqn"):  # Q-networks: export and deploy serve actor-critics only
        assert main(["export", str(runs_root / algo), "--format", "onnx"]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert f"is a {algo} run" in line and "rlperf enjoy" in line


@pytest.fixture(scope="module")
def montezuma_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    code = main(
        [
            "train",
            "--preset",
            "rnd-montezuma-small",
            "env.num_envs=2",
            "rnd.num_steps=16",
            "rnd.num_init_steps=16",
            "rnd.minibatch_size=16",
            "rnd.update_epochs=1",
            # Games end after 150 agent steps, so playing one is quick.
            "env.max_episode_steps=150",
            "runner.torch_threads=1",
            *COMMON[:-2],
            "-i",
            "2",
            "--runs-root",
            str(root),
            "-s",
            "mz",
        ]
    )
    assert code == 0
    return root / "mz"


@pytest.mark.parametrize("suffix", [".gif", ".mp4"])
def test_enjoy_writes_a_readable_video_and_prints_rooms(montezuma_run, tmp_path, suffix, capsys):
    video = tmp_path / f"game{suffix}"
    assert main(["enjoy", str(montezuma_run), "--video", str(video)]) == 0
    out = capsys.readouterr().out
    assert "episode 1: total reward 0, 150 steps, visited rooms: {1" in out
    assert "All visited rooms: {1" in out and "sticky actions 0.25" in out
    frames = 151  # the first screen, then one per agent step
    if suffix == ".gif":
        with Image.open(video) as gif:
            assert gif.n_frames == frames and gif.size == (160, 210)
    else:
        capture = cv2.VideoCapture(str(video))
        count = 0
        while True:
            ok, frame = capture.read()
            if not ok:
                break
            assert frame.shape == (210, 160, 3)
            count += 1
        capture.release()
        assert count == frames


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--video", "out.avi"], "use .mp4 or .gif"),
        (["--episodes", "0"], "--episodes must be >= 1"),
        (["--greedy", "--stochastic"], "not allowed with"),
    ],
)
def test_enjoy_bad_input_is_one_line_and_exit_2(montezuma_run, tmp_path, args, needle, capsys):
    assert main(["enjoy", str(montezuma_run), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err


def test_enjoy_on_a_missing_run_directory(tmp_path, capsys):
    assert main(["enjoy", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_enjoy_refuses_a_hand_edited_config_in_one_line(montezuma_run, tmp_path, capsys):
    # A copy of the run whose config.yaml says frame_stack 0: refused by the validator
    # before an env or a network is built from it, and the run itself is left as it was.
    edited = tmp_path / "edited"
    shutil.copytree(montezuma_run, edited)
    config = edited / "config.yaml"
    config.write_text(config.read_text().replace("frame_stack: 4", "frame_stack: 0"))
    assert main(["enjoy", str(edited)]) == 2
    err = capsys.readouterr().err.strip()
    assert "env.frame_stack must be positive" in err and "\n" not in err
