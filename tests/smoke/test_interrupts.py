"""SIGINT/SIGTERM stop cleanly with a checkpoint; a corrupted checkpoint is a clear error."""

import json
import signal

import pytest

from rlperf.cli import main
from tests.conftest import read_metrics, start_training, wait_for_iterations


@pytest.mark.parametrize(
    ("sig", "runner"),
    [(signal.SIGINT, "inproc"), (signal.SIGTERM, "inproc"), (signal.SIGINT, "decoupled")],
)
def test_signal_finishes_the_iteration_and_checkpoints(runs_root, sig, runner):
    run_dir = runs_root / "sig"
    proc = start_training(
        "--preset",
        "cartpole",
        "--runner",
        runner,
        "--algo",
        "impala" if runner == "decoupled" else "ppo",
        "--runs-root",
        str(runs_root),
        "-s",
        "sig",
        "--no-progress",
        "stop.total_timesteps=10000000",
        "checkpoint.every=0",
    )
    wait_for_iterations(proc, run_dir, 3)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig.value, err  # the shell convention for a signal
    assert "received: stopping after this iteration" in err
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["stop_reason"] == f"signal {sig.name}"
    last = read_metrics(run_dir)[-1]["iteration"]
    latest = (run_dir / "checkpoints" / "latest").read_text().strip()
    assert latest.startswith(f"ckpt_{last:08d}_")  # the checkpoint holds the last logged iteration


def _train(capsys, *argv: str) -> tuple[int, str]:
    """``rlperf train ARGV`` in this process (no signals involved): exit code and stderr."""
    capsys.readouterr()
    code = main(["train", *argv])
    return code, capsys.readouterr().err


def test_resume_from_a_corrupted_checkpoint_names_the_previous(runs_root, capsys):
    args = [
        "--preset",
        "cartpole",
        "--runs-root",
        str(runs_root),
        "-s",
        "c",
        "--no-progress",
        "checkpoint.every=1",
        "ppo.update_epochs=1",
    ]
    assert _train(capsys, *args, "-i", "3")[0] == 0
    root = runs_root / "c" / "checkpoints"
    newest = root / (root / "latest").read_text().strip()
    (newest / "state.safetensors").write_bytes(b"garbage")
    code, err = _train(capsys, "--resume", str(runs_root / "c"), "-i", "4", "--no-progress")
    assert code == 2
    assert err.startswith("rlperf: error: checkpoint") and "corrupted" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    previous = sorted(p for p in root.iterdir() if p.name.startswith("ckpt_"))[-2]
    code, err = _train(
        capsys,
        "--resume",
        str(runs_root / "c"),
        "--checkpoint",
        str(previous),
        "-i",
        "2",  # two more after the checkpoint's two
        "--no-progress",
    )
    assert code == 0, err
    assert [r["iteration"] for r in read_metrics(runs_root / "c")] == [1, 2, 3, 4]


def test_resume_naming_an_older_checkpoint_keeps_the_abandoned_line(runs_root, capsys):
    args = ["--preset", "cartpole", "--runs-root", str(runs_root), "-s", "r", "--no-progress"]
    args += ["ppo.update_epochs=1"]
    assert _train(capsys, *args, "checkpoint.every=1", "-i", "3")[0] == 0
    first = sorted((runs_root / "r" / "checkpoints").glob("ckpt_*"))[0]
    code, err = _train(capsys, "--resume", str(first), "-i", "1", "--no-progress")
    assert code == 0, err
    assert [r["iteration"] for r in read_metrics(runs_root / "r")] == [1, 2]
    (aside,) = (runs_root / "r" / "superseded").iterdir()
    assert [r["iteration"] for r in read_metrics(aside)] == [2, 3]  # the old rows 2 and 3
    assert sorted(p.name[:13] for p in (aside / "checkpoints").iterdir()) == [
        "ckpt_00000002",
        "ckpt_00000003",
    ]


def test_a_checkpoint_of_another_run_is_refused(runs_root, capsys):
    args = ["--preset", "cartpole", "--runs-root", str(runs_root), "--no-progress", "-i", "1"]
    assert _train(capsys, *args, "-s", "a")[0] == 0
    assert _train(capsys, *args, "-s", "b")[0] == 0
    other = next((runs_root / "b" / "checkpoints").glob("ckpt_*"))
    code, err = _train(capsys, "--resume", str(runs_root / "a"), "--checkpoint", str(other))
    assert code == 2 and "is not inside the run directory" in err
