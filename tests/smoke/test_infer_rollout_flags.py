"""``rlperf infer`` runs the thesis's Table 3.4 commands as written (rollout_with_time.py's
flags); each flag it cannot honour is one line and exit code 2."""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import pytest

from rlperf.cli import main
from rlperf.deploy.policy import load_run_policy
from rlperf.deploy.rollout_flags import apply_rollout_flags, split_checkpoint
from tests.conftest import needs_export_extra

pytestmark = needs_export_extra


def _checkpoint(run: Path) -> Path:
    return next((run / "checkpoints").glob("ckpt_*"))


def test_r8_as_the_thesis_wrote_it(pong_run: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # --gpu sets it; restored after the test
    videos = tmp_path / "videos"
    videos.mkdir()
    times = tmp_path / "model1_0_workers_no_gpus"  # the thesis's name, no .csv
    resources = {"num_gpus": 0, "num_gpus_per_worker": 0, "num_workers": 8}
    args = [
        "infer", str(_checkpoint(pong_run)), "--run=PPO", "--env=Pong-v0", "--no-render",
        "--steps=60", "--gpu=none", f"--config={json.dumps(resources)}",
        f"--time-output={times}", "--save-info", f"--video-dir={videos}",
    ]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "num_workers 8" in out and "rlperf starts none" in out  # said, not silently dropped
    assert "on cpu" in out and "60 calls of batch 1" in out
    steps = list(csv.DictReader((tmp_path / "model1_0_workers_no_gpus.steps.csv").open()))
    assert len(steps) == 60 and {"action", "reward", "model_time_ms"} <= set(steps[0])
    assert list(csv.DictReader(times.open()))[0]["steps"] == "60"
    video = videos / "game-000.mp4"  # the game in progress at the step budget is kept
    assert video.is_file() and video.stat().st_size > 1000
    assert main(args) == 2  # the files exist: nothing is overwritten without --force


def test_a_gym_id_of_the_same_game_plays_its_dynamics(pong_run: Path) -> None:
    policy = load_run_policy(pong_run)
    assert policy.cfg.env.id == "ALE/Pong-v5" and policy.cfg.env.frameskip_max is None
    flags = argparse.Namespace(
        run="ppo", env="Pong-v0", config=None, gpu=None, device=None, step_output=None,
        save_info=False, time_output=None, video_dir=None, force=False,
    )  # fmt: skip
    setup = apply_rollout_flags(flags, policy)
    env = policy.cfg.env  # Pong-v0: sticky actions 0.25 and a frameskip drawn from 2..4
    assert (env.frameskip, env.frameskip_max, env.repeat_action_probability) == (2, 4, 0.25)
    assert env.id == "ALE/Pong-v5" and env.dim == load_run_policy(pong_run).cfg.env.dim
    assert setup.device == "cpu" and setup.notes == []


def test_a_checkpoint_path_names_its_run(pong_run: Path, tmp_path: Path) -> None:
    checkpoint = _checkpoint(pong_run)
    assert split_checkpoint(str(checkpoint)) == (str(pong_run), checkpoint)
    assert split_checkpoint(str(pong_run)) == (str(pong_run), None)
    assert split_checkpoint("shipped:pong") == ("shipped:pong", None)
    assert split_checkpoint(str(tmp_path / "nope")) == (str(tmp_path / "nope"), None)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--run=IMPALA"], "--run IMPALA: this run was trained with PPO; valid: PPO"),
        (["--env=Breakout-v0"], "--env Breakout-v0: this run was trained on ALE/Pong-v5"),
        (["--config", '{"num_cpus": 1}'], "--config: unknown keys ['num_cpus']; valid:"),
        (["--config", "num_gpus=1"], "--config is not JSON"),
        (["--config", '{"num_gpus": -1}'], "--config num_gpus must be a number >= 0"),
        (["--gpu=none", "--config", '{"num_gpus": 1}'], "--gpu none hides them"),
        (["--gpu=none", "--device=cuda"], "--device cuda contradicts --gpu none"),
        (["--save-info"], "--save-info writes beside --time-output"),
        (["--video-dir={missing}"], "not a directory"),
        (["--gpu=bogus"], "invalid choice: 'bogus'"),
    ],
)
def test_flags_it_cannot_honour_are_one_line_exit_2(
    pong_run: Path, tmp_path: Path, capsys, monkeypatch, flags, message
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    fill = str(tmp_path / "nope")
    args = ["infer", str(pong_run), "--steps=3", *[f.replace("{missing}", fill) for f in flags]]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_videos_already_there_are_kept(pong_run: Path, tmp_path: Path, capsys) -> None:
    (tmp_path / "game-000.mp4").write_bytes(b"an earlier game")
    assert main(["infer", str(pong_run), "--steps=3", f"--video-dir={tmp_path}"]) == 2
    assert "holds videos already" in capsys.readouterr().err
    assert (tmp_path / "game-000.mp4").read_bytes() == b"an earlier game"


def test_a_gpu_the_machine_lacks_is_named(pong_run: Path, capsys, monkeypatch) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: gpu0 exists")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert main(["infer", str(pong_run), "--steps=3", "--gpu=gpu0"]) == 2
    assert "--gpu gpu0: CUDA sees 0 of the 1 GPU(s)" in capsys.readouterr().err
