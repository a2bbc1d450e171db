"""A run's ``manifest.json``: what ran, where, with what, and how it ended.

Written when a run starts, after its first iteration (when the worker processes have
reported their resources) and when it ends; reports and sweeps read it.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

from rlperf.config.schema import RunConfig
from rlperf.telemetry import system

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def run_manifest(
    cfg: RunConfig,
    *,
    command: str,
    status: str,
    started: str,
    stop_reason: str | None,
    target_reached: dict[str, Any] | None,
    iteration: int,
    env_steps: int,
    time_total_s: float,
    worker_processes: list[dict[str, Any]],
    precision_auto: dict[str, Any] | None,
    retained_memory: Any,
    gpu_phase_sync: bool,
    schedule: dict[str, Any] | None = None,
    branches: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The manifest of a run in ``status`` (running, completed, interrupted, failed);
    ``branches``: where a resume with another seed forked the run (see TrainingSession)."""
    runner = cfg.runner
    learner = {
        "role": "learner",
        "pid": os.getpid(),
        "torch_threads": torch.get_num_threads(),
        "cpu_affinity": sorted(os.sched_getaffinity(0)),
        "device": runner.learner_device,
    }
    return {
        "rlperf_command": command,
        "status": status,
        "stop_reason": stop_reason,
        "target_reached": target_reached,
        "started_utc": started,
        "ended_utc": None if status == "running" else datetime.now(UTC).isoformat(),
        "seed": cfg.seed,
        "branches": branches or [],
        "iteration": iteration,
        "env_steps": env_steps,
        "time_total_s": time_total_s,
        "schedule": schedule,
        "git_sha": system.git_sha(PACKAGE_DIR),
        "versions": system.package_versions(),
        "cpu": system.cpu_info(),
        "gpus": system.gpu_info(),
        "threads": system.thread_env(),
        "resources": {
            "learner_device": runner.learner_device,
            "actor_device": runner.actor_device,
            "torch_threads": torch.get_num_threads(),
            "cpu_affinity": sorted(os.sched_getaffinity(0)),
            "runner": runner.name,
            "engine": cfg.env.engine,
            "num_workers": runner.num_workers if runner.name != "inproc" else None,
            "processes": [learner, *worker_processes],
            "num_learners": runner.num_learners,
            "precision": runner.precision,
            "channels_last": runner.channels_last,
            "precision_auto": precision_auto,
            "retain_freed_memory": retained_memory,
            "gpu_phase_sync": gpu_phase_sync,
        },
        "pid": os.getpid(),
    }
