"""A read-only or full disk under the run directory: one line, exit code 2, the last
checkpoint intact, and once there is space again the run resumes from it.

The disks are small tmpfs mounts made by the test (root only; skipped where mounting is
not permitted)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlperf.cli import main
from rlperf.core.checkpoint import load_checkpoint
from tests.conftest import read_metrics, rlperf_subprocess


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs", str(mount)], capture_output=True
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _remount(mount: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(mount)], check=True)


# One epoch per iteration: the disk, not learning, is what is tested.
TRAIN = (
    "--preset",
    "cartpole",
    "--no-progress",
    "telemetry.tensorboard=false",
    "ppo.update_epochs=1",
)


def test_a_full_disk_stops_the_run_cleanly_and_it_resumes(small_disk: Path) -> None:
    run_dir = small_disk / "run"
    done = rlperf_subprocess(
        "train", *TRAIN, "--runs-root", str(small_disk), "-s", "run", "-i", "400",
        "checkpoint.every=5",
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"rlperf: error: cannot write the run directory {run_dir}")
    assert "No space left on device" in line and "the last complete checkpoint is" in line
    last = Path(line.rsplit(" ", 1)[1])
    state = load_checkpoint(last)  # intact
    _remount(small_disk, "size=20m")
    resumed = rlperf_subprocess(
        "train", "--resume", str(run_dir), "--no-progress", "stop.iterations=40"
    )
    assert resumed.returncode == 0, resumed.stderr
    rows = [r["iteration"] for r in read_metrics(run_dir)]
    assert rows == list(range(1, 41))
    assert state["counters"]["iteration"] < 40


def test_a_read_only_disk_is_one_line_and_nothing_changes(small_disk: Path) -> None:
    first = rlperf_subprocess(
        "train", *TRAIN, "--runs-root", str(small_disk), "-s", "run", "-i", "2"
    )
    assert first.returncode == 0, first.stderr
    run_dir = small_disk / "run"
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    _remount(small_disk, "ro")
    for args in (
        ("--resume", str(run_dir), "stop.iterations=4"),
        (*TRAIN, "--runs-root", str(small_disk), "-s", "other", "-i", "2"),
    ):
        done = rlperf_subprocess("train", "--no-progress", *args)
        assert done.returncode == 2, done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert "Read-only file system" in line, line
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize(
    ("command", "what"),
    [
        (["train", "--preset", "cartpole", "-i", "1", "--runs-root", "/proc/rlperf-runs"], "run"),
        (["sweep", "quick", "-o", "/proc/rlperf-sweep"], "sweep"),
    ],
    ids=["train", "sweep"],
)
def test_an_output_directory_that_cannot_be_created_is_one_line(command, what, capsys) -> None:
    assert main(command) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"rlperf: error: cannot create the {what} directory /proc/rlperf-")
