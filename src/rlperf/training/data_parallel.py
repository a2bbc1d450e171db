"""Launching ``runner.num_learners`` data-parallel learner processes for one run.

The process that ``rlperf train`` started keeps the run directory's lock and spawns one
learner per rank; each builds the whole run (envs, runner, algorithm) with its own seeds,
joins the process group and trains with gradients averaged across ranks
(:mod:`rlperf.core.distributed`). Rank 0 writes the records, checkpoints and manifest; the
launcher returns rank 0's exit code. SIGTERM sent to the launcher is passed on to every
learner; Ctrl-C in a terminal reaches them all directly, so the launcher ignores SIGINT.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import warnings
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any, Protocol

import torch
import torch.multiprocessing as torch_mp

from rlperf.config.schema import RunConfig, freeze, thawed_copy
from rlperf.core import distributed
from rlperf.core.errors import UserInputError
from rlperf.core.protocols import Algorithm
from rlperf.core.resources import apply_cpu_resources
from rlperf.runners.base import Runner
from rlperf.training.checks import check_devices
from rlperf.training.resolve import ResolvedRun


class LearnerSession(Protocol):
    """What launching learners needs of a training session (``session.TrainingSession``,
    passed in rather than imported: the session imports this module)."""

    cfg: RunConfig
    run_dir: Path
    command: str
    progress: bool
    resume_state: dict[str, Any] | None
    exit_code: int

    def run(self) -> None: ...


PEER_EXIT_GRACE_S = 10.0
"""How long the other learners may take to stop after one exited with an error."""


def rank_config(cfg: RunConfig, rank: int) -> RunConfig:
    """The config learner ``rank`` builds its envs, runner and algorithm from: its own env
    seeds (after every lower rank's envs) and, on CUDA, its own GPU, checked to exist (the
    one place a rank's config is derived; the run's own config stays as checked)."""
    local = thawed_copy(cfg)
    local.seed = cfg.seed + rank * cfg.env.num_envs
    for key in ("learner_device", "actor_device"):
        if getattr(cfg.runner, key).startswith("cuda"):
            setattr(local.runner, key, f"cuda:{rank}")
    check_devices(local.runner)
    return freeze(local)


def make_gradient_step(algo: Algorithm, runner: Runner, cfg: RunConfig) -> Any:
    """The all-reducing gradient step, after making every rank's weights rank 0's."""
    distributed.broadcast_module(algo.policy)
    runner.sync_weights()  # an acting copy on another device follows the broadcast
    return distributed.DataParallelGradientStep.for_algorithm(
        algo, runner.learner_device, cfg.runner.precision
    )


def without_env_state(runner_state: dict[str, Any]) -> dict[str, Any]:
    """A runner state for ranks other than 0: the checkpoint's env snapshot is rank 0's."""
    return {**runner_state, "envs": None}


def _learner_main(
    rank: int, port: int, session_class: type[LearnerSession], session_args: dict[str, Any]
) -> None:
    cfg: RunConfig = session_args["run"].cfg
    # a learner is a process of its own: the run's CPUs apply in it too
    apply_cpu_resources(cfg.runner.cpu_affinity, cfg.runner.torch_threads)
    device = torch.device(rank_config(cfg, rank).runner.learner_device)
    distributed.init_rank(rank, cfg.runner.num_learners, port, device)
    try:
        with warnings.catch_warnings():
            if rank:  # episodes restarting on resume concern rank 0's report only
                warnings.simplefilter("ignore")
            session = session_class(**session_args, rank=rank)  # type: ignore[call-arg]
            session.run()
    except UserInputError as exc:
        print(f"rlperf: error: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    finally:
        distributed.destroy()
    raise SystemExit(session.exit_code)


def launch_learners(session: LearnerSession) -> int:
    """Run ``session``'s config on ``runner.num_learners`` learner processes; returns the
    exit code of rank 0."""
    world = session.cfg.runner.num_learners
    ctx = torch_mp.get_context("spawn")
    port = distributed.free_port()
    args = {
        # resolved once, in the launching process (precision=auto is refused with many learners)
        "run": ResolvedRun(session.cfg),
        "run_dir": session.run_dir,
        "command": session.command,
        "resume_from": _checkpoint_path(session),
        "progress": session.progress,
    }
    processes = [
        ctx.Process(
            target=_learner_main,
            args=(rank, port, type(session), args),
            name=f"rlperf-learner-{rank}",
        )
        for rank in range(world)
    ]
    previous = {
        signal.SIGINT: signal.signal(signal.SIGINT, signal.SIG_IGN),
        signal.SIGTERM: signal.signal(
            signal.SIGTERM, lambda signum, _frame: _forward(processes, signum)
        ),
    }
    try:
        for process in processes:
            process.start()
        _wait_all(processes)
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
                process.join()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    code = processes[0].exitcode
    return 1 if code is None else (128 - code if code < 0 else code)


def _checkpoint_path(session: LearnerSession) -> Path | None:
    state = session.resume_state
    return None if state is None else Path(state["_checkpoint_path"])


def _forward(processes: list[Any], signum: int) -> None:
    for process in processes:
        if process.is_alive() and process.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signum)


def _wait_all(processes: list[Any]) -> None:
    """Wait for every learner; once one fails, the others get a grace period, then SIGKILL
    (they would block forever in their next all-reduce)."""
    pending = list(processes)
    deadline: float | None = None
    while pending:
        timeout = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        ready = wait([p.sentinel for p in pending], timeout)
        if not ready:  # grace period over
            return
        for process in [p for p in pending if p.sentinel in ready]:
            process.join()
            pending.remove(process)
            if process.exitcode != 0 and deadline is None:
                deadline = time.monotonic() + PEER_EXIT_GRACE_S
