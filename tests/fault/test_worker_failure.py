"""A killed env worker is restarted, or (restarts off) stops the run cleanly; nothing leaked."""

import json
import os
import signal
import subprocess
import time

import psutil

from tests.conftest import (
    read_metrics,
    rlperf_subprocess,
    shm_segments_of,
    start_training,
    wait_for_iterations,
)


def _env_workers(proc: subprocess.Popen) -> list[psutil.Process]:
    return [
        p
        for p in psutil.Process(proc.pid).children(recursive=True)
        if "spawn_main" in " ".join(p.cmdline()) and "resource_tracker" not in " ".join(p.cmdline())
    ]


def test_sigkilled_worker_is_restarted_and_the_run_finishes(runs_root):
    run_dir = runs_root / "restart"
    proc = start_training(
        "--preset",
        "cartpole",
        "--runner",
        "subprocess",
        "--num-workers",
        "2",
        "--runs-root",
        str(runs_root),
        "-s",
        "restart",
        "--no-progress",
        "-i",
        "12",
        "checkpoint.every=0",
        "runner.max_worker_restarts=3",
        "ppo.update_epochs=1",  # the restart is what is tested, not learning
    )
    wait_for_iterations(proc, run_dir, 3)
    workers = _env_workers(proc)
    assert len(workers) == 2
    os.kill(workers[1].pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "restarting env worker 1" in err and "SIGKILL" in err
    rows = read_metrics(run_dir)
    assert rows[-1]["iteration"] == 12
    assert rows[-1]["sys/worker_restarts"] == 1
    assert rows[-1]["sys/live_workers"] == 2
    assert rows[0]["sys/worker_restarts"] == 0
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    assert not psutil.pid_exists(workers[1].pid) or workers[1].status() == psutil.STATUS_ZOMBIE
    assert not [
        p
        for p in psutil.Process().children(recursive=True)
        if "spawn_main" in " ".join(p.cmdline())
    ]
    assert not shm_segments_of({proc.pid, *(w.pid for w in workers)})  # nothing left


def test_sigkilled_worker_stops_the_run_with_a_checkpoint_and_resume_continues(runs_root):
    run_dir = runs_root / "kill"
    proc = start_training(
        "--preset",
        "cartpole",
        "--runner",
        "subprocess",
        "--num-workers",
        "2",
        "--runs-root",
        str(runs_root),
        "-s",
        "kill",
        "--no-progress",
        "stop.total_timesteps=10000000",
        "checkpoint.every=0",
        "runner.restart_failed_workers=false",
    )
    wait_for_iterations(proc, run_dir, 3)
    workers = _env_workers(proc)
    assert len(workers) == 2
    os.kill(workers[1].pid, signal.SIGKILL)
    killed_at = time.monotonic()
    out, err = proc.communicate(timeout=60)
    assert time.monotonic() - killed_at < 10  # detected within seconds
    assert proc.returncode == 1
    assert "Traceback" not in err
    last_line = err.strip().splitlines()[-1]
    assert "worker 1" in last_line and "SIGKILL" in last_line and "checkpoint ckpt_" in last_line
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed" and manifest["stop_reason"].startswith("worker failure")
    done = read_metrics(run_dir)[-1]["iteration"]
    assert (run_dir / "checkpoints" / "latest").read_text().startswith(f"ckpt_{done:08d}_")
    assert not [
        p for p in psutil.Process().children(recursive=True) if p.pid in {w.pid for w in workers}
    ]
    assert not shm_segments_of({proc.pid, *(w.pid for w in workers)})  # nothing left

    resumed = rlperf_subprocess(
        "train", "--resume", str(run_dir), f"stop.iterations={done + 2}", "--no-progress"
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "episodes restart on resume" in resumed.stderr
    assert [r["iteration"] for r in read_metrics(run_dir)][-3:] == [done, done + 1, done + 2]
