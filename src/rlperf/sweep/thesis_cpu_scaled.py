"""The thesis's Table 3.3 scaled to the machine at hand and run on its CPUs.

Table 3.3 (``thesis-cpu``) asks whether restricting the CPUs of a training run changes its
time, CPU use and RAM: 8 rollout workers with no limit, with 9 CPUs declared to Ray
(``ray.init(num_cpus=9)``, which bounds Ray's scheduling only) and with the same 9 declared
and the run pinned to CPUs 0-8 (``os.sched_setaffinity``). Every one of its points uses a
GPU, and the restricted set was 9 CPUs of a 40-core machine: one per worker and one for the
driver, the fewest that fit.

Scaled: a restricted set of R = half the usable CPUs (at least 1), W = R - 1 workers (at
least 1) so that, as in the thesis, the workers and the driver just fit in it, and the
learner and the workers on the CPU. The three ways are the thesis's:

- ``no_cpu_limit``: nothing restricted (Ray declares the machine's CPUs);
- ``R_cpus_no_set_affinity``: ``runner.ray_num_cpus = R`` (``rlperf train -c R``);
- ``R_cpus_set_affinity``: the same and ``runner.cpu_affinity`` = the first R usable CPUs
  (``-a``), inherited by the worker processes.

On 2 vCPUs R = 1 and W = 1: the restricted set holds the worker and the driver on one CPU,
a tighter fit than the thesis's (its 9 CPUs gave each process its own), which the study's
report states. PPO with the thesis's RLlib settings (``rllib-2021``) on model 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from rlperf.sweep.machine import Machine

NAME = "thesis-cpu-scaled"


def restricted_cpus(machine: Machine) -> list[int]:
    """The first half of the usable CPUs (at least one): the scaled restricted set."""
    usable = sorted(machine.cpus)
    return usable[: max(1, len(usable) // 2)]


def scaled_cpu_spec(machine: Machine) -> dict[str, Any]:
    """The sweep spec of Table 3.3 scaled to ``machine`` (module docstring)."""
    cpus = restricted_cpus(machine)
    r = len(cpus)
    workers = max(1, r - 1)
    pinned = ",".join(map(str, cpus))
    return {
        "name": NAME,
        "description": (
            f"Thesis Table 3.3 scaled to this machine ({machine.describe()}): {workers} "
            f"rollout worker(s) on the CPU with no CPU limit, with {r} CPU(s) declared to Ray, "
            f"and with {r} declared and the run pinned to CPU(s) {pinned}."
        ),
        "presets": ["rllib-2021"],
        "base": {
            "env.id": "ALE/Pong-v5",
            "model.name": "thesis-1",
            "workers": workers,
            "runner.learner_device": "cpu",
            "runner.actor_device": "cpu",
            "stop": {"total_timesteps": None, "iterations": 20},
            "telemetry.warmup_iterations": 3,
            "checkpoint.every": 0,
        },
        "points": [
            {"name": f"no_cpu_limit_{workers}_workers"},
            {"name": f"{r}_cpus_no_set_affinity_{workers}_workers", "runner.ray_num_cpus": r},
            {
                "name": f"{r}_cpus_set_affinity_{workers}_workers",
                "runner.ray_num_cpus": r,
                "runner.cpu_affinity": pinned,
            },
        ],
        "timeout_s": 7200,
        "retries": 1,
    }


def write_scaled_cpu_spec(machine: Machine, directory: Path) -> Path:
    """``scaled_cpu_spec`` as ``DIR/thesis-cpu-scaled.yaml`` (the file ``rlperf sweep``
    reads, kept beside the sweep's records so the study can be rerun from it)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{NAME}.yaml"
    path.write_text(yaml.safe_dump(scaled_cpu_spec(machine), sort_keys=False))
    return path
