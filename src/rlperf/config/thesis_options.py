"""The thesis's resource options (train_ppo.py's ``-w``, ``-g`` and ``-d``) as config keys.

One definition for ``rlperf train``'s aliases and for the sweeps' ``workers`` key, so that a
thesis point planned by a sweep and the same point typed on the command line train the same
batch on the same devices.

RLlib 1.1's PPO sampled synchronously: each of ``num_workers`` rollout workers stepped
``num_envs_per_worker`` envs (1 by default) for one fragment of ``rollout_fragment_length``
steps per round, and rounds were gathered until the train batch was full, so the batch is
the configured one rounded **up** to whole rounds. Here the configured batch is
``env.num_envs x num_steps`` and the fragment is ``num_steps`` (the ``rllib-2021`` preset:
20 x 200 = 4000); with N workers each worker steps its envs for as many fragments as the
rounding gives. ``num_workers = 0`` was RLlib's local worker sampling alone: here the
learner's process (runner inproc) with one worker's envs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rlperf.config.schema import RunConfig
from rlperf.core.errors import ConfigError

THESIS_PRESET = "rllib-2021"
"""The preset that holds the thesis's PPO settings (its RLlib 1.1 defaults)."""
WORKERS_RUNNER = "rllib"
"""The runner of ``-w N`` (N >= 1): RLlib's rollout workers, each with its own policy copy."""
GPU_VISIBILITY = {"none": "", "gpu0": "0", "gpu1": "1", "both": "0,1"}
"""The thesis's ``-g`` values and the ``CUDA_VISIBLE_DEVICES`` each one sets."""
RAY_RESOURCE_STEP = 1e-4
"""Ray keeps fractional resources to four decimals: a GPU share is rounded down to it so that
the workers' shares fit on the GPUs they divide."""


@dataclass(frozen=True)
class GpuPlacement:
    """Where ``-g``/``-d`` put the learner and the workers."""

    visible: str
    """``CUDA_VISIBLE_DEVICES`` for the run."""
    learner_device: str
    actor_device: str
    actor_gpus: float
    """GPUs left to the workers (RLlib divided them equally among the workers)."""


def gpu_placement(gpu: str, driver_gpus: str | None) -> GpuPlacement:
    """``-g GPU -d DRIVER``: the learner goes on the first visible GPU when the driver gets
    any share of one, and the workers act on a GPU when the driver leaves some over."""
    visible = GPU_VISIBILITY[gpu]
    count = len(visible.split(",")) if visible else 0
    try:
        driver = float(driver_gpus) if driver_gpus is not None else 1.0
    except ValueError:
        raise ConfigError(f"--driver-gpus must be a number, got {driver_gpus!r}") from None
    if not 0 <= driver < math.inf:
        raise ConfigError(f"--driver-gpus must be zero or positive, got {driver_gpus}")
    if count == 0:
        return GpuPlacement(visible, "cpu", "cpu", 0.0)
    leftover = max(0.0, count - driver)
    # the workers act on the GPU the driver does not fill (the second when it takes a whole one)
    second = count == 2 and driver >= 1
    actor = "cpu" if leftover <= 1e-9 else ("cuda:1" if second else "cuda:0")
    return GpuPlacement(visible, "cuda:0" if driver > 0 else "cpu", actor, leftover)


def share_gpus(
    cfg: RunConfig, placement: GpuPlacement, workers: int, *, on_ray: bool, given: set[str]
) -> None:
    """``-d``'s rest divided equally among the workers (``runner.ray_num_gpus_per_actor``,
    rounded down to what Ray can hold) when they are Ray actors (``on_ray``: the runner's
    fact) acting on a GPU and the share was not given."""
    runner = cfg.runner
    if not on_ray or runner.actor_device == "cpu" or "runner.ray_num_gpus_per_actor" in given:
        return
    share = min(1.0, placement.actor_gpus / max(workers, 1))
    runner.ray_num_gpus_per_actor = math.floor(share / RAY_RESOURCE_STEP) * RAY_RESOURCE_STEP


def apply_workers(
    cfg: RunConfig,
    workers: int,
    *,
    given: set[str],
    envs_per_worker: int | None = None,
) -> str | None:
    """RLlib 1.1's ``num_workers = workers`` on ``cfg``: the runner, the envs per worker and
    the batch rounded up to whole rounds of fragments. ``given`` holds the keys the user set
    (a given runner, ``env.num_envs`` or horizon is kept, or refused when it cannot be).
    Returns a line saying how the batch changed, or None."""
    if workers < 0:
        raise ConfigError(f"-w/--workers must be 0 or more, got {workers}")
    runner = cfg.runner
    if workers == 0:
        if "runner.name" in given and runner.name != "inproc":
            raise ConfigError(
                f"-w 0 means the learner's process samples alone (runner inproc); runner "
                f"{runner.name} needs -w 1 or more"
            )
        runner.name, runner.num_workers = "inproc", 1
    else:
        if "runner.name" not in given:
            runner.name = WORKERS_RUNNER
        elif runner.name == "inproc":
            raise ConfigError(
                f"-w {workers}: runner inproc has no worker processes; use -w 0, or runner "
                f"{WORKERS_RUNNER}, subprocess, decoupled, ray or hogwild"
            )
        runner.num_workers = workers
    return _round_batch(cfg, max(workers, 1), given, envs_per_worker)


def _round_batch(
    cfg: RunConfig, workers: int, given: set[str], envs_per_worker: int | None
) -> str | None:
    envs_before = cfg.env.num_envs
    if "env.num_envs" in given:
        if envs_before % workers:
            raise ConfigError(
                f"-w {workers} must divide env.num_envs ({envs_before}): every worker steps "
                "the same number of envs"
            )
        per_worker = envs_before // workers
    else:
        per_worker = envs_per_worker or 1  # RLlib's num_envs_per_worker
    section = getattr(cfg, cfg.algo, None)
    envs = workers * per_worker
    cfg.env.num_envs = envs
    if not hasattr(section, "num_steps"):  # an algorithm without rollouts (DQN)
        return None
    if f"{cfg.algo}.num_steps" in given:
        return None
    fragment = int(section.num_steps)
    batch = envs_before * fragment
    rounds = math.ceil(batch / (envs * fragment))
    section.num_steps = rounds * fragment
    if envs * rounds * fragment == batch and envs == envs_before:
        return None
    return (
        f"{workers} worker(s) x {per_worker} env(s) x {rounds * fragment} steps = "
        f"{envs * rounds * fragment} steps per batch (configured {batch}: RLlib rounds the "
        f"train batch up to whole rounds of {fragment}-step fragments)"
    )
