"""A SIGKILLed actor of the decoupled runner is restarted, or (restarts off) stops the run
cleanly with a checkpoint; afterwards no process and no shared memory is left behind."""

import json
import os
import signal
import time
from pathlib import Path

import psutil

from tests.conftest import read_metrics, shm_segments_of, start_training, wait_for_iterations


def _actor_pids(run_dir: Path) -> list[int]:
    manifest = json.loads((run_dir / "manifest.json").read_text())
    return [p["pid"] for p in manifest["resources"]["processes"] if p["role"] == "actor"]


def _spawned_children() -> list[psutil.Process]:
    return [
        p
        for p in psutil.Process().children(recursive=True)
        if "spawn_main" in " ".join(p.cmdline()) and "resource_tracker" not in " ".join(p.cmdline())
    ]


def _start(runs_root: Path, name: str, *extra: str):
    return start_training(
        "--preset",
        "cartpole",
        "--algo",
        "impala",
        "--runner",
        "decoupled",
        "--num-workers",
        "2",
        "--runs-root",
        str(runs_root),
        "-s",
        name,
        "--no-progress",
        "checkpoint.every=0",
        *extra,
    )


def test_sigkilled_actor_is_restarted_and_the_run_finishes(runs_root):
    run_dir = runs_root / "restart"
    proc = _start(runs_root, "restart", "-i", "400", "runner.max_worker_restarts=2")
    wait_for_iterations(proc, run_dir, 3)
    actors = _actor_pids(run_dir)
    assert len(actors) == 2
    os.kill(actors[1], signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "restarting actor 1" in err and "SIGKILL" in err
    rows = read_metrics(run_dir)
    assert rows[-1]["iteration"] == 400
    assert rows[-1]["sys/worker_restarts"] == 1 and rows[-1]["sys/live_workers"] == 2
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "completed"
    assert not _spawned_children()
    assert not shm_segments_of({proc.pid, *actors, *_actor_pids(run_dir)})  # nothing left


def test_sigkilled_actor_stops_the_run_cleanly_with_a_checkpoint(runs_root):
    run_dir = runs_root / "kill"
    proc = _start(
        runs_root,
        "kill",
        "stop.total_timesteps=100000000",
        "runner.restart_failed_workers=false",
    )
    wait_for_iterations(proc, run_dir, 3)
    actors = _actor_pids(run_dir)
    os.kill(actors[0], signal.SIGKILL)
    killed_at = time.monotonic()
    out, err = proc.communicate(timeout=60)
    assert time.monotonic() - killed_at < 10  # detected within seconds
    assert proc.returncode == 1
    assert "Traceback" not in err
    last_line = err.strip().splitlines()[-1]
    assert "actor 0" in last_line and "SIGKILL" in last_line and "checkpoint ckpt_" in last_line
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed" and manifest["stop_reason"].startswith("worker failure")
    done = read_metrics(run_dir)[-1]["iteration"]
    assert (run_dir / "checkpoints" / "latest").read_text().startswith(f"ckpt_{done:08d}_")
    assert not _spawned_children()
    assert not shm_segments_of({proc.pid, *actors, *_actor_pids(run_dir)})  # nothing left


def test_sigkilled_learner_leaves_no_actor_behind(runs_root):
    run_dir = runs_root / "learner"
    proc = _start(runs_root, "learner", "stop.total_timesteps=100000000")
    wait_for_iterations(proc, run_dir, 3)
    actors = _actor_pids(run_dir)
    proc.kill()
    proc.wait(timeout=30)
    deadline = time.monotonic() + 10
    while any(psutil.pid_exists(pid) for pid in actors) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = [pid for pid in actors if psutil.pid_exists(pid)]
    assert not [p for p in alive if psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert not shm_segments_of({proc.pid, *actors, *_actor_pids(run_dir)})  # nothing left
