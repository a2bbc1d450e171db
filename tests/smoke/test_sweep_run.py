"""Real sweeps: every point a real ``rlperf train`` process on CartPole with a tiny budget.

Failure isolation (a crash, a timeout, one retry each, the sweep goes on), skipped points,
and resuming a sweep whose process was killed mid-point.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlperf.cli import main
from rlperf.sweep.ledger import Ledger
from tests.conftest import read_metrics, rlperf_subprocess

REPO = Path(__file__).resolve().parents[2]
BASE = """\
presets: [cartpole]
base:
  stop: {iterations: 3, total_timesteps: null}
  telemetry.tensorboard: false
  runner.torch_threads: 1  # tiny MLP: one thread is fastest, and immune to a busy machine
  env.num_envs: 4
  ppo.num_steps: 32
retries: 1
"""


def write_sweep(tmp_path: Path, points: str) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(BASE + "points:\n" + points)
    return path


def history(sweep_dir: Path, point: str) -> list[str]:
    return [r["status"] for r in Ledger(sweep_dir).records() if r["point"] == point]


def test_failures_are_isolated_retried_once_and_recorded(tmp_path: Path) -> None:
    sweep = write_sweep(
        tmp_path,
        "  - {name: ok}\n"
        "  - {name: crash, env.id: 'tests.helpers.crashing_env:FakeCrashingCartPole-v0'}\n"
        "  - {name: needs-gpu, runner.learner_device: 'cuda:63'}\n"
        "  - {name: slow, timeout_s: 0.5, stop.iterations: 100000}\n"
        "  - {name: after, runner.name: subprocess, runner.num_workers: 2}\n",
    )
    out = tmp_path / "out"
    proc = rlperf_subprocess("sweep", str(sweep), "-o", str(out), timeout=240, cwd=REPO)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # a point failed; the sweep finished
    state = Ledger(out).latest()
    assert {p: r["status"] for p, r in state.items()} == {
        "ok": "completed",
        "crash": "failed",
        "needs-gpu": "skipped",
        "slow": "failed",
        "after": "completed",
    }
    assert "RuntimeError: fake crash after 40 steps" in state["crash"]["error"]
    assert state["crash"]["attempt"] == 2  # one retry
    assert history(out, "crash") == ["running", "failed", "running", "failed"]
    assert state["slow"]["error"] == "timed out after 0.5 s" and state["slow"]["attempt"] == 2
    assert state["needs-gpu"]["reason"].startswith("needs GPU: 64 GPUs, this machine has ")
    # the failed attempts' directories are kept aside, never reused
    aside = sorted(p.name.split(".")[0:2] for p in (out / "aside").iterdir())
    assert ["crash", "attempt1"] in aside and ["crash", "attempt2"] in aside
    rows = read_metrics(out / "runs" / "ok")
    assert len(rows) == 3 and rows[0]["warmup"] is True and not rows[1]["warmup"]
    assert (out / "runs" / "after" / "manifest.json").is_file()
    assert (out / "logs" / "crash.attempt2.log").is_file()
    summary = state["ok"]["summary"]
    assert summary["steady_iterations"] == 2 and summary["sps_median"] > 0
    assert "crash" in proc.stdout and "failed" in proc.stdout


def _wait(predicate, timeout: float, proc: subprocess.Popen) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.1)


def _dead(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "State:\tZ" in state


def test_killed_sweep_resumes_and_keeps_completed_points(tmp_path: Path) -> None:
    sweep = write_sweep(
        tmp_path, "  - {name: first}\n  - {name: long, stop.iterations: 60}\n  - {name: last}\n"
    )
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "rlperf", "sweep", str(sweep), "-o", str(out)]
    proc = subprocess.Popen(
        argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    long_metrics = out / "runs" / "long" / "metrics.jsonl"
    try:
        _wait(
            lambda: long_metrics.exists() and long_metrics.read_text().count("\n") >= 1, 120, proc
        )
    finally:
        proc.send_signal(signal.SIGKILL)  # the sweep dies mid-point, as on a power cut
        proc.communicate()
    pid = json.loads((out / "runs" / "long" / "manifest.json").read_text())["pid"]
    deadline = time.monotonic() + 10
    while not _dead(pid):  # the point's process dies with the sweep (PR_SET_PDEATHSIG)
        assert time.monotonic() < deadline, f"point process {pid} outlived the sweep"
        time.sleep(0.1)
    assert Ledger(out).latest()["long"]["status"] == "running"
    first_rows = (out / "runs" / "first" / "metrics.jsonl").read_bytes()

    again = rlperf_subprocess("sweep", str(sweep), "-o", str(out), timeout=240, cwd=REPO)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "first: completed earlier, skipped" in again.stdout
    assert (out / "runs" / "first" / "metrics.jsonl").read_bytes() == first_rows
    assert history(out, "first") == ["running", "completed"]
    assert history(out, "long") == ["running", "running", "completed"]
    assert len(read_metrics(out / "runs" / "long")) == 60
    assert [p.name.split(".")[:2] for p in (out / "aside").iterdir()] == [["long", "unfinished"]]
    assert Ledger(out).latest()["last"]["status"] == "completed"

    # Asking for other settings in the same directory would mix two sweeps: refused.
    assert main(["sweep", str(sweep), "-o", str(out), "seed=5"]) == 2


@pytest.mark.parametrize("algo", ["ppo"])
def test_tune_reports_the_fastest_and_runners_up(tmp_path: Path, algo: str) -> None:
    out = tmp_path / "tune"
    proc = rlperf_subprocess(
        "tune",
        "--algo",
        algo,
        "--env",
        "CartPole-v1",
        "--point-s",
        "4",
        "--max-points",
        "2",
        "-o",
        str(out),
        "runner.torch_threads=1",
        timeout=240,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads((out / "tune.json").read_text())
    ranking = [r["sps_median"] for r in result["ranking"]]
    assert len(ranking) == 2 and all(r and r > 0 for r in ranking)
    assert ranking == sorted(ranking, reverse=True)
    assert result["best"]["point"] == result["ranking"][0]["point"]
    assert "fastest: " in proc.stdout and "runners-up:" in proc.stdout
    assert result["command"].startswith(
        "rlperf train --preset cartpole --algo ppo --env CartPole-v1"
    )
    assert os.path.isdir(out / "runs")
