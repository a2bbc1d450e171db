"""A RunConfig's values against what its sections declare: each enumerated key one of its
values, each numeric key in its declared range (``config.section.declared_ranges``), each
algorithm's own checks (``AlgorithmSection.check``), and the few rules that tie sections
together.

Nothing here knows another part of rlperf: how a runner, an algorithm, an env and a model
fit together, and what this machine has, is checked from their facts tables by
:mod:`rlperf.training.checks`, which calls :func:`validate` first.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path

from rlperf.config.load import coerce, get_key, iter_fields, load_config_file
from rlperf.config.schema import RunConfig, RunnerConfig, algorithm_sections
from rlperf.config.section import declared_ranges
from rlperf.core.autoprecision import AUTO as AUTO_PRECISION
from rlperf.core.errors import ConfigError

_DEVICE = re.compile(r"^(cpu|cuda(:\d+)?|mps)$")


def _validate_choices(cfg: RunConfig) -> None:
    """Every enumerated key holds one of its declared values (a config built in code, or an
    old config.yaml, never went through parsing)."""
    for key, hint, _doc in iter_fields():
        if typing.get_origin(hint) is typing.Literal:
            coerce(key, get_key(cfg, key), hint)


def validate(cfg: RunConfig) -> None:
    """Raise ConfigError on the first invalid value."""
    env, runner, stop = cfg.env, cfg.runner, cfg.stop
    _validate_choices(cfg)
    for key, declared in declared_ranges(RunConfig).items():
        value = get_key(cfg, key)
        if value is not None:
            declared.check(key, value)
    for section in algorithm_sections(cfg):
        section.check(cfg)
    _validate_faults(cfg)
    if not 0 <= cfg.seed < 2**32:
        raise ConfigError(f"seed must be between 0 and 2**32 - 1, got {cfg.seed}")
    if cfg.model.hidden_sizes is not None and (
        not cfg.model.hidden_sizes or min(cfg.model.hidden_sizes) < 1
    ):
        raise ConfigError(
            f"model.hidden_sizes must be a non-empty list of positive sizes, got {cfg.model.hidden_sizes}"
        )
    if env.frameskip_max is not None:
        if env.frameskip_max < env.frameskip:
            raise ConfigError(
                f"env.frameskip_max ({env.frameskip_max}) must be at least env.frameskip "
                f"({env.frameskip}): a step repeats frameskip..frameskip_max frames"
            )
        if env.engine != "gymnasium":
            raise ConfigError(
                f"env.frameskip_max (a random frameskip per step) needs env.engine=gymnasium; "
                f"{env.engine} repeats a fixed env.frameskip"
            )
    if env.max_pool and env.max_pool_frames > max(env.frameskip, 2):
        raise ConfigError(
            f"env.max_pool_frames must be 2 to env.frameskip ({env.frameskip}), got "
            f"{env.max_pool_frames}: the max is taken over a skip's last frames"
        )
    if env.num_envs % runner.num_workers:
        raise ConfigError(
            f"env.num_envs ({env.num_envs}) must be divisible by runner.num_workers ({runner.num_workers})"
        )
    _validate_runner(cfg.runner)
    if runner.precision == AUTO_PRECISION and runner.num_learners > 1:
        raise ConfigError(
            "runner.precision=auto times one learner; with runner.num_learners > 1 set fp32 or bf16 "
            "(rlperf doctor shows both figures)"
        )
    for key, dev in [
        ("runner.learner_device", runner.learner_device),
        ("runner.actor_device", runner.actor_device),
    ]:
        if not _DEVICE.match(dev):
            raise ConfigError(f"{key} must be cpu, cuda, cuda:N or mps, got {dev!r}")
    if all(
        v is None
        for v in (stop.total_timesteps, stop.iterations, stop.wall_time_s, stop.target_reward)
    ):
        raise ConfigError(
            "no stop criterion: set stop.total_timesteps, stop.iterations, stop.wall_time_s or stop.target_reward"
        )
    if stop.anneal_over == "wall_time_s" and not stop.wall_time_s:
        raise ConfigError(
            "stop.anneal_over=wall_time_s needs stop.wall_time_s (the seconds the schedules run down)"
        )
    if stop.anneal_over == "wall_time_steps" and not (stop.wall_time_s or stop.anneal_steps):
        raise ConfigError(
            "stop.anneal_over=wall_time_steps needs stop.wall_time_s (the seconds whose env steps "
            "the schedules run down) or stop.anneal_steps (those env steps, given)"
        )
    if stop.anneal_over == "wall_time_steps" and not stop.anneal_steps and runner.num_learners > 1:
        raise ConfigError(
            "stop.anneal_over=wall_time_steps measures one learner's rate; with "
            "runner.num_learners > 1 give the budget as stop.anneal_steps"
        )
    if stop.anneal_min_sps is not None and stop.anneal_over != "wall_time_steps":
        raise ConfigError(
            f"stop.anneal_min_sps is read only with stop.anneal_over=wall_time_steps, not "
            f"{stop.anneal_over}"
        )
    if stop.anneal_steps is not None and stop.anneal_over != "wall_time_steps":
        raise ConfigError(
            f"stop.anneal_steps is read only with stop.anneal_over=wall_time_steps, not "
            f"{stop.anneal_over}; for a fixed step budget use stop.total_timesteps"
        )


def load_valid_config(path: Path) -> RunConfig:
    """A saved config.yaml (a run directory's), parsed and validated: a file edited by hand
    is refused in one line before an env or a network is built from it."""
    cfg = load_config_file(path)
    validate(cfg)
    return cfg


def _validate_faults(cfg: RunConfig) -> None:
    env = cfg.env
    if env.fault_envs is not None:
        outside = sorted(i for i in env.fault_envs if not 0 <= i < env.num_envs)
        if outside or not env.fault_envs:
            raise ConfigError(
                f"env.fault_envs names envs {outside} outside the run's 0..{env.num_envs - 1}"
            )
    if (env.fault_p_crash or env.fault_p_stall) and env.engine != "gymnasium":
        raise ConfigError(
            f"fault injection wraps gymnasium-engine envs; engine {env.engine} steps its games in C++"
        )


def _validate_runner(cfg: RunnerConfig) -> None:
    if not cfg.ray_num_gpus_per_actor >= 0:
        raise ConfigError(
            f"runner.ray_num_gpus_per_actor must be 0 or more, got {cfg.ray_num_gpus_per_actor}"
        )
