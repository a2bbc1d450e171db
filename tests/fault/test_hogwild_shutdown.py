"""The hogwild runner leaves no process behind on SIGTERM and when a worker dies (success:
tests/learning/test_a3c_empty_goal.py)."""

import json
import os
import signal
import time
from pathlib import Path

import psutil

from tests.conftest import start_training, wait_for_iterations


def _child_pids(run_dir: Path) -> dict[str, list[int]]:
    manifest = json.loads((run_dir / "manifest.json").read_text())
    out: dict[str, list[int]] = {}
    for p in manifest["resources"]["processes"]:
        out.setdefault(p["role"], []).append(p["pid"])
    return out


def _gone(pids: list[int], timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = []
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    alive.append(pid)
            except psutil.NoSuchProcess:
                pass
        if not alive:
            return True
        time.sleep(0.1)
    return False


def _start(runs_root: Path, name: str, *extra: str):
    return start_training(
        "--preset",
        "a3c-football-quick",
        "--runs-root",
        str(runs_root),
        "-s",
        name,
        "--no-progress",
        "telemetry.tensorboard=false",
        "runner.eval_interval_s=0.2",
        *extra,
    )


def test_sigterm_stops_cleanly_with_a_checkpoint(runs_root):
    run_dir = runs_root / "term"
    proc = _start(runs_root, "term", "stop.total_timesteps=100000000", "stop.target_reward=null")
    wait_for_iterations(proc, run_dir, 2, timeout=120)
    pids = _child_pids(run_dir)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM.value, err
    assert "Traceback" not in err
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    assert (run_dir / "checkpoints" / "latest").is_file()
    assert _gone(pids["worker"] + pids["evaluator"])


def test_a_killed_worker_stops_the_run_and_the_others(runs_root):
    # With restarts off (restarts: tests/fault/test_crashing_envs.py).
    run_dir = runs_root / "kill"
    proc = _start(
        runs_root, "kill", "stop.total_timesteps=100000000", "stop.target_reward=null",
        "runner.restart_failed_workers=false",
    )  # fmt: skip
    wait_for_iterations(proc, run_dir, 2, timeout=120)
    pids = _child_pids(run_dir)
    os.kill(pids["worker"][1], signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "worker 1" in err and "SIGKILL" in err and "Traceback" not in err
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "worker 1" in manifest["stop_reason"]
    assert _gone(pids["worker"] + pids["evaluator"])
