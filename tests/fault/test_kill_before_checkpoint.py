"""A killed run loses little: checkpoints also come by training seconds, and --resume of a
run killed before its first checkpoint trains it again from its config.yaml."""

import json
import signal

from rlperf.core.checkpoint import list_checkpoints
from tests.conftest import read_metrics, rlperf_subprocess, start_training, wait_for_iterations

CARTPOLE = ["--preset", "cartpole", "--no-progress", "runner.torch_threads=1"]


def test_a_run_killed_before_its_first_checkpoint_resumes_from_its_config(runs_root):
    run_dir = runs_root / "killed"
    proc = start_training(
        *CARTPOLE,
        "--runs-root",
        str(runs_root),
        "-s",
        "killed",
        "checkpoint.every=0",
        "checkpoint.every_s=0",
        "stop.total_timesteps=100000000",
        "ppo.learning_rate=0.001",
    )
    try:
        wait_for_iterations(proc, run_dir, 3)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert not list_checkpoints(run_dir / "checkpoints")
    killed_rows = len(read_metrics(run_dir))

    resumed = rlperf_subprocess("train", "--resume", str(run_dir), "-i", "2", "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    assert "has no checkpoint yet" in resumed.stderr and "config.yaml" in resumed.stderr
    assert [r["iteration"] for r in read_metrics(run_dir)] == [1, 2]
    assert "learning_rate: 0.001" in (run_dir / "config.yaml").read_text()
    (aside,) = (run_dir / "superseded").iterdir()
    assert len(read_metrics(aside)) == killed_rows  # what the killed run recorded is kept
    assert json.loads((aside / "manifest.json").read_text())["status"] == "running"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["iteration"] == 2
    assert list_checkpoints(run_dir / "checkpoints")  # the end of the run saved one


def test_checkpoints_come_by_training_seconds_or_count_whichever_first(runs_root):
    def checkpoints(name, *keys):
        done = rlperf_subprocess(
            "train", *CARTPOLE, "--runs-root", str(runs_root), "-s", name, "-i", "4",
            "checkpoint.keep=10", *keys,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return [p.name[5:13] for p in list_checkpoints(runs_root / name / "checkpoints")]

    # every_s below one iteration's seconds: one after every iteration
    assert checkpoints("by_time", "checkpoint.every=0", "checkpoint.every_s=1e-6") == [
        f"{i:08d}" for i in (1, 2, 3, 4)
    ]
    assert checkpoints("by_count", "checkpoint.every=3", "checkpoint.every_s=0") == [
        "00000003",
        "00000004",
    ]
