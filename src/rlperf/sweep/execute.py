"""One attempt of one sweep point, in a fresh subprocess.

Isolation: every attempt is a new Python process (``rlperf train`` for training points,
``python -m rlperf.sweep.infer_point`` for inference points) in its own session, so nothing
one point loads, leaks or breaks reaches the next. It is pinned to the point's CPUs from
its first instruction, gets the point's thread counts and GPU visibility as environment
variables, dies with the sweep (``PR_SET_PDEATHSIG``), and is stopped after ``timeout_s``:
SIGTERM first (a training run then checkpoints and stops cleanly), SIGKILL to the whole
process group after a grace period. Its output goes to ``logs/<point>.attempt<N>.log``.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from rlperf.core.checkpoint import atomic_write_text
from rlperf.core.errors import UserInputError, describe_exit
from rlperf.core.signals import SignalScope
from rlperf.sweep.plan import PlannedPoint

GRACE_S = 30.0
"""Seconds a timed-out attempt gets to stop after SIGTERM before its group is SIGKILLed."""
RUNS_DIR = "runs"
CONFIGS_DIR = "configs"
LOGS_DIR = "logs"
INFERENCE_FILE = "inference.json"

_ERROR_LINE = re.compile(r"^(rlperf: |[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b)")


@dataclass
class AttemptResult:
    """How an attempt ended."""

    completed: bool
    exit_code: int | None
    wall_s: float
    error: str | None
    """One line: why it failed (None when it completed)."""
    interrupted: bool = False
    """The sweep itself was asked to stop during this attempt."""
    timed_out: bool = False


class SweepSignals(SignalScope):
    """SIGINT/SIGTERM for a running sweep or tune: remembered, and passed on to the process
    groups of the points running now (they do not share the terminal's group, so they would
    not get a Ctrl-C themselves). Installed from the main thread; children may be attached
    from any thread."""

    def __init__(self) -> None:
        super().__init__()
        self._children: set[subprocess.Popen[bytes]] = set()

    def attach(self, proc: subprocess.Popen[bytes]) -> None:
        self._children.add(proc)
        if self.received is not None:  # the signal came while this child was starting
            signal_group(proc, signal.SIGTERM)

    def detach(self, proc: subprocess.Popen[bytes]) -> None:
        self._children.discard(proc)

    def on_signal(self, signum: int) -> None:
        self.received = signal.Signals(signum).name
        for child in list(self._children):
            if child.poll() is None:
                signal_group(child, signum)


class CpuShares:
    """CPU shares for processes that run side by side (``rlperf sweep``/``bench``
    ``--parallel N``, parallel tune trials): ``N`` disjoint shares of ``cores // N`` CPUs each;
    a process holds one while it runs, so no two running processes share a CPU."""

    def __init__(self, cores: list[int], parallel: int) -> None:
        self._free: queue.Queue[list[int] | None] = queue.Queue()
        if parallel <= 1 or not cores:
            self._free.put(None)  # one process at a time, on every CPU
            return
        share = max(1, len(cores) // parallel)
        for i in range(parallel):
            self._free.put(cores[i * share : (i + 1) * share] or None)

    @staticmethod
    def check(parallel: int, flag: str = "--parallel") -> None:
        """UserInputError (one line) when ``parallel`` shares cannot each get a CPU of this
        process's own."""
        cores = len(os.sched_getaffinity(0))
        if parallel > cores:
            raise UserInputError(
                f"{flag} {parallel} needs at least {parallel} CPUs (one share each); this "
                f"process may use {cores}"
            )

    @contextlib.contextmanager
    def take(self) -> Iterator[list[int] | None]:
        """A share (None: every CPU) for as long as the block runs."""
        slot = self._free.get()
        try:
            yield slot
        finally:
            self._free.put(slot)


def signal_group(proc: subprocess.Popen[bytes], signum: int) -> None:
    """Send ``signum`` to ``proc``'s process group (it and the workers it started)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signum)


def run_dir_of(sweep_dir: Path, point: PlannedPoint) -> Path:
    return sweep_dir / RUNS_DIR / point.name


def point_command(point: PlannedPoint, sweep_dir: Path) -> list[str]:
    """The argv of the point's process (``sys.executable`` first)."""
    config = (
        sweep_dir / CONFIGS_DIR / f"{point.name}.{'yaml' if point.command == 'train' else 'json'}"
    )
    if point.command == "train":
        return [
            sys.executable,
            "-m",
            "rlperf",
            "train",
            "--preset",
            str(config),
            "--runs-root",
            str(sweep_dir / RUNS_DIR),
            "-s",
            point.name,
            "--no-progress",
        ]
    return [
        sys.executable,
        "-m",
        "rlperf.sweep.infer_point",
        str(config),
        str(run_dir_of(sweep_dir, point)),
    ]


def point_pinning(
    point: PlannedPoint, share: list[int] | None
) -> tuple[list[int] | None, dict[str, str]]:
    """The CPUs a point's process is pinned to and its environment variables: its own
    ``runner.cpu_affinity`` when it sets one, else the CPU share it runs in (``--parallel``),
    whose size then bounds OpenMP's and MKL's threads unless the point sets torch threads."""
    env = dict(point.env)
    if point.affinity or not share:
        return point.affinity, env
    if "OMP_NUM_THREADS" not in env:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(len(share))
    return share, env


def display_command(point: PlannedPoint, sweep_dir: Path, share: list[int] | None = None) -> str:
    """The command as a person would type it (env variables first, ``rlperf``/``python``)."""
    argv = point_command(point, sweep_dir)
    shown = ["rlperf", *argv[3:]] if argv[2] == "rlperf" else ["python", *argv[1:]]
    affinity, env = point_pinning(point, share)
    prefix = [f"{k}={v}" for k, v in sorted(env.items())]
    if affinity:
        prefix.append(f"taskset -c {','.join(map(str, affinity))}")
    return " ".join([*prefix, shlex.join(shown)])


def child_setup(affinity: list[int] | None):  # noqa: ANN201 - a callable for Popen
    """Popen's ``preexec_fn``: die with the parent, pinned to ``affinity`` from the start."""

    def setup() -> None:
        from rlperf.core.resources import die_with_parent

        die_with_parent()
        if affinity:
            os.sched_setaffinity(0, affinity)

    return setup


def error_line(log: Path, limit: int = 300) -> str | None:
    """The most telling line of a failed attempt's output: the last ``rlperf: ...`` or
    exception line, else the last non-empty line."""
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return None
    for line in reversed(lines):
        if _ERROR_LINE.match(line):
            return line[:limit]
    return lines[-1][:limit] if lines else None


def _outcome(point: PlannedPoint, run_dir: Path) -> str | None:
    """None when the point's output says it completed, else what is wrong with it."""
    if point.command == "infer":
        return None if (run_dir / INFERENCE_FILE).is_file() else f"no {INFERENCE_FILE} written"
    try:
        manifest = json.loads((run_dir / "manifest.json").read_text())
    except (OSError, json.JSONDecodeError):
        return "no readable manifest.json"
    status = manifest.get("status")
    if status != "completed":
        return f"run ended with status {status}: {manifest.get('stop_reason')}"
    return None


class ProcessEnd(NamedTuple):
    """How a supervised process ended."""

    exit_code: int | None
    wall_s: float
    timed_out: bool


def run_process(
    argv: list[str],
    env: dict[str, str],
    log_to: Path,
    timeout_s: float,
    affinity: list[int] | None,
    signals: SweepSignals,
) -> ProcessEnd:
    """Run ``argv`` in its own process group with ``env`` on top of this process's, output to
    ``log_to``, pinned to ``affinity``, dying with this process; stopped after ``timeout_s``
    (SIGTERM, then SIGKILL to the group after ``GRACE_S``). Whatever it leaves behind in its
    group is killed when it ends."""
    log_to.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    timed_out = False
    with log_to.open("wb") as log:
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **env},
            start_new_session=True,  # its own process group: a timeout kills its workers too
            preexec_fn=child_setup(affinity),  # noqa: PLW1509 - nothing else runs in between
        )
        signals.attach(proc)
        try:
            deadline = start + timeout_s
            while proc.poll() is None:
                if signals.received is None and time.monotonic() > deadline:
                    timed_out = True
                    signal_group(proc, signal.SIGTERM)
                    try:
                        proc.wait(GRACE_S)
                    except subprocess.TimeoutExpired:
                        signal_group(proc, signal.SIGKILL)
                        proc.wait()
                    break
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(0.2)
        finally:
            signals.detach(proc)
            if proc.poll() is None:  # an exception in this loop: leave nothing running
                signal_group(proc, signal.SIGKILL)
                proc.wait()
            signal_group(proc, signal.SIGKILL)  # workers the process left behind, if any
    return ProcessEnd(proc.returncode, time.monotonic() - start, timed_out)


def run_attempt(
    point: PlannedPoint,
    sweep_dir: Path,
    attempt: int,
    signals: SweepSignals,
    log_to: Path,
    share: list[int] | None = None,
) -> AttemptResult:
    """Run one attempt of ``point`` to its end (completion, failure, timeout or a signal),
    in CPU ``share`` when it is given (see :func:`point_pinning`)."""
    config = point_command(point, sweep_dir)
    config_path = Path(config[5] if point.command == "train" else config[3])
    config_path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(config_path, point.config_text())
    (sweep_dir / RUNS_DIR).mkdir(parents=True, exist_ok=True)
    affinity, env = point_pinning(point, share)
    env["CI"] = os.environ.get("CI", "1")
    code, wall, timed_out = run_process(config, env, log_to, point.timeout_s, affinity, signals)
    run_dir = run_dir_of(sweep_dir, point)
    if signals.received is not None:
        return AttemptResult(False, code, wall, f"sweep stopped by {signals.received}", True)
    if timed_out:
        return AttemptResult(
            False, code, wall, f"timed out after {point.timeout_s:g} s", timed_out=True
        )
    if code != 0:
        line = error_line(log_to) or ""
        return AttemptResult(False, code, wall, f"{describe_exit(code)}: {line}".rstrip(": "))
    problem = _outcome(point, run_dir)
    return AttemptResult(problem is None, code, wall, problem)
