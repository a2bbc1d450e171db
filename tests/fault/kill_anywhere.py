"""SIGKILL a training process at random moments, resume it, and check what it left behind.

Used by ``test_kill_anywhere.py`` and runnable on its own for more kills::

    python -m tests.fault.kill_anywhere --kills 30 --runner inproc --seed 1

Every cycle starts ``rlperf train`` (the first time fresh, then ``--resume``) and SIGKILLs
it (its worker processes die with it). The moments mix: early (start-up and the resume's
own repair of the records), inside the iteration loop (a checkpoint every iteration), right
after a row appears, and the named crash points of ``rlperf.core.faults`` (the process kills
itself between a checkpoint's two files, after the checkpoint is renamed into place but
before ``latest`` moves, or between the two record files' appends). A kill of a process
does not tear a line (each row is one ``write``), but a full disk or a power cut does: every
third kill the harness appends half a row to both record files to stand for one.

After each kill the newest complete checkpoint must load; complete rows must be iterations
1, 2, 3... with no gap or duplicate. The run is finally resumed to its end and checked
again: rows and checkpoint agree with the budget.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from rlperf.core.checkpoint import list_checkpoints, load_checkpoint
from rlperf.core.faults import CRASH_POINTS

RUNNER_ARGS = {
    "inproc": ["--preset", "cartpole"],
    "subprocess": ["--preset", "cartpole", "--runner", "subprocess", "--num-workers", "2"],
    "decoupled": [
        "--preset",
        "cartpole",
        "--algo",
        "impala",
        "--runner",
        "decoupled",
        "--num-workers",
        "2",
    ],
}
"""How each runner is started (CartPole: iterations of tens of milliseconds)."""

COMMON = [
    "--no-progress",
    "checkpoint.every=1",  # a checkpoint write in every iteration: kills land in them often
    "checkpoint.keep=2",
    "telemetry.tensorboard=false",
    "env.num_envs=4",
    "runner.torch_threads=1",
    "ppo.update_epochs=1",  # short iterations: the kills, not learning, are what is tested
]


@dataclass
class KillStats:
    """What the kills hit and what the checks saw."""

    kills: int = 0
    during_checkpoint_write: int = 0
    """Kills that left a half-written checkpoint directory (``.tmp-*``) behind."""
    torn_rows: int = 0
    """Kills after which a record file ended in a line without its newline (injected)."""
    crash_points: dict[str, int] = field(default_factory=dict)
    """Kills at each named crash point."""
    before_first_row: int = 0
    """Kills while the (resumed) process had not yet written a row."""
    resumed_iterations: list[int] = field(default_factory=list)
    """The checkpoint iteration each resume continued from."""


def _metric_rows(run_dir: Path) -> tuple[list[int], bool]:
    """Iterations of metrics.jsonl's complete rows, and whether a torn line ends the file."""
    data = (run_dir / "metrics.jsonl").read_bytes() if (run_dir / "metrics.jsonl").exists() else b""
    lines = data.split(b"\n")
    return [json.loads(line)["iteration"] for line in lines[:-1]], bool(lines[-1])


def _progress_rows(run_dir: Path) -> tuple[list[int], bool]:
    path = run_dir / "progress.csv"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    complete, _, torn = text.rpartition("\n")
    rows = list(csv.reader(io.StringIO(complete)))
    return [int(row[0]) for row in rows[1:]], bool(torn)


def check_records(run_dir: Path) -> bool:
    """Assert the complete rows of both record files are iterations 1..n (n the same in both
    or one behind: a kill can fall between the two appends); return whether a line is torn."""
    metrics, torn_m = _metric_rows(run_dir)
    progress, torn_p = _progress_rows(run_dir)
    assert metrics == list(range(1, len(metrics) + 1)), f"metrics.jsonl rows {metrics}"
    assert progress == list(range(1, len(progress) + 1)), f"progress.csv rows {progress}"
    assert abs(len(metrics) - len(progress)) <= 1, (len(metrics), len(progress))
    return torn_m or torn_p


def _wait_for(predicate, proc: subprocess.Popen, timeout: float) -> bool:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.01)
    return False


def _start(cmd: list[str], crash_at: str | None = None) -> subprocess.Popen:
    env = dict(os.environ)
    env.pop("RLPERF_CRASH_AT", None)
    if crash_at:
        env["RLPERF_CRASH_AT"] = crash_at
    return subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
    )


def _half_written(ckpts: Path) -> set[str]:
    """Checkpoint directories a killed write left half-done (cleaned by the next save)."""
    return {p.name for p in ckpts.glob(".tmp-*")} if ckpts.is_dir() else set()


def _assert_no_workers_left(run_dir: Path) -> None:
    """The worker processes the killed run listed in its manifest die with it."""
    try:
        manifest = json.loads((run_dir / "manifest.json").read_text())
    except (OSError, json.JSONDecodeError):
        return
    pids = [p["pid"] for p in manifest.get("resources", {}).get("processes", [])[1:]]
    deadline = time.monotonic() + 10
    while True:
        alive = [pid for pid in pids if _alive(pid)]
        if not alive:
            return
        assert time.monotonic() < deadline, f"worker processes {alive} outlived the kill"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _tear(run_dir: Path) -> None:
    """Append half a row to both record files, as a write cut short by a full disk."""
    for name in ("metrics.jsonl", "progress.csv"):
        path = run_dir / name
        lines = path.read_bytes().split(b"\n")
        if len(lines) > 2:
            with path.open("ab") as f:
                f.write(lines[-2][: len(lines[-2]) // 2])


def kill_cycles(
    runs_root: Path, runner: str, kills: int, iterations: int, seed: int
) -> tuple[Path, KillStats]:
    """Run ``kills`` kill-and-resume cycles of one run, then finish it; return its directory
    and the statistics. Raises AssertionError on any broken invariant."""
    rng = random.Random(seed)
    run_dir = runs_root / f"kill-{runner}"
    base = [sys.executable, "-m", "rlperf", "train"]
    first = [*base, *RUNNER_ARGS[runner], "--runs-root", str(runs_root), "-s", run_dir.name]
    stats = KillStats()
    settings = [*COMMON, f"stop.iterations={iterations}", "stop.total_timesteps=null"]
    ckpts = run_dir / "checkpoints"
    for cycle in range(kills):
        if cycle == 0:
            proc = _start([*first, *settings])
            # The first kill waits for a checkpoint: before it there is nothing to resume.
            assert _wait_for(lambda: bool(list_checkpoints(ckpts)), proc, 120), proc.stderr
        rows_at_start = len(_metric_rows(run_dir)[0])
        tmp_before = _half_written(ckpts)
        kind = rng.random()
        crash_at = None
        if cycle > 0 and kind >= 0.6:
            point = CRASH_POINTS[int((kind - 0.6) / 0.4 * len(CRASH_POINTS))]
            crash_at = f"{point}:{rng.randint(1, 3)}"
        if cycle > 0:
            proc = _start([*base, "--resume", str(run_dir), "--no-progress"], crash_at)
        if crash_at:
            proc.wait(timeout=300)  # it kills itself at the crash point
            if proc.returncode == 0:
                break  # the run finished first
            assert proc.returncode == -signal.SIGKILL, proc.stderr.read() if proc.stderr else ""
            name = crash_at.split(":")[0]
            stats.crash_points[name] = stats.crash_points.get(name, 0) + 1
        else:
            if kind < 0.2:
                time.sleep(rng.uniform(0.2, 3.0))  # start-up, the resume's repair, or the loop
            else:
                _wait_for(lambda n=rows_at_start: len(_metric_rows(run_dir)[0]) > n, proc, 60)
                if kind < 0.45:
                    time.sleep(rng.uniform(0.0, 0.4))
            if proc.poll() is not None:
                # It ended before the kill: only a finished run is acceptable.
                assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
                break
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        stats.kills += 1
        _assert_no_workers_left(run_dir)
        if len(_metric_rows(run_dir)[0]) == rows_at_start:
            stats.before_first_row += 1
        if _half_written(ckpts) - tmp_before:
            stats.during_checkpoint_write += 1
        if stats.kills % 3 == 0:
            _tear(run_dir)
        if check_records(run_dir):
            stats.torn_rows += 1
        state = load_checkpoint(ckpts)  # the newest complete checkpoint loads
        stats.resumed_iterations.append(int(state["counters"]["iteration"]))
    # Finish the run and check that rows and checkpoint agree with the budget.
    done = subprocess.run(
        [*base, "--resume", str(run_dir), "--no-progress"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    metrics, torn_m = _metric_rows(run_dir)
    progress, torn_p = _progress_rows(run_dir)
    assert not torn_m and not torn_p
    assert metrics == progress == list(range(1, iterations + 1))
    assert load_checkpoint(ckpts)["counters"]["iteration"] == iterations
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed", manifest["status"]
    return run_dir, stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--runner", choices=sorted(RUNNER_ARGS), default="inproc")
    parser.add_argument("--iterations", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs-root", type=Path, default=Path("runs/kill-anywhere"))
    args = parser.parse_args()
    os.environ.setdefault("CI", "1")
    start = time.monotonic()
    _, stats = kill_cycles(args.runs_root, args.runner, args.kills, args.iterations, args.seed)
    print(
        json.dumps(
            {
                "runner": args.runner,
                "seed": args.seed,
                "kills": stats.kills,
                "during_checkpoint_write": stats.during_checkpoint_write,
                "torn_rows": stats.torn_rows,
                "crash_points": stats.crash_points,
                "before_first_row": stats.before_first_row,
                "resumed_from": stats.resumed_iterations,
                "seconds": round(time.monotonic() - start, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
