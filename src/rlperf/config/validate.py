"""The ranges of a RunConfig's values, one key (or a few keys of one section) at a time.

Nothing here knows another part of rlperf: how a runner, an algorithm, an env and a model
fit together, and what this machine has, is checked from their facts tables by
:mod:`rlperf.training.checks`, which calls :func:`validate` first.
"""

from __future__ import annotations

import math
import re
import typing

from rlperf.config.load import coerce, get_key, iter_fields
from rlperf.config.schema import A3CConfig, RNDConfig, RunConfig, RunnerConfig
from rlperf.core.autoprecision import AUTO as AUTO_PRECISION
from rlperf.core.errors import ConfigError
from rlperf.core.shared_optim import SHARED_OPTIMIZERS

_DEVICE = re.compile(r"^(cpu|cuda(:\d+)?|mps)$")


def _positive(key: str, value: int | float | None) -> None:
    if value is None:
        return
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{key} must be positive and finite, got {value}")


def _validate_choices(cfg: RunConfig) -> None:
    """Every enumerated key holds one of its declared values (a config built in code, or an
    old config.yaml, never went through parsing)."""
    for key, hint, _doc in iter_fields():
        if typing.get_origin(hint) is typing.Literal:
            coerce(key, get_key(cfg, key), hint)


def validate(cfg: RunConfig) -> None:
    """Raise ConfigError on the first invalid value."""
    env, ppo, runner, stop = cfg.env, cfg.ppo, cfg.runner, cfg.stop
    _validate_choices(cfg)
    _validate_faults(cfg)
    for key, value in [
        ("env.num_envs", env.num_envs),
        ("env.num_threads", env.num_threads),
        ("env.frame_stack", env.frame_stack),
        ("env.frameskip", env.frameskip),
        ("env.dim", env.dim),
        ("env.max_episode_steps", env.max_episode_steps),
        ("ppo.num_steps", ppo.num_steps),
        ("ppo.num_minibatches", ppo.num_minibatches),
        ("ppo.minibatch_size", ppo.minibatch_size),
        ("ppo.update_epochs", ppo.update_epochs),
        ("ppo.learning_rate", ppo.learning_rate),
        ("ppo.clip_coef", ppo.clip_coef),
        ("ppo.vf_clip_coef", ppo.vf_clip_coef),
        ("ppo.vf_loss_clip", ppo.vf_loss_clip),
        ("ppo.max_grad_norm", ppo.max_grad_norm),
        ("ppo.kl_penalty_target", ppo.kl_penalty_target),
        ("ppo.target_kl", ppo.target_kl),
        ("ppo.lr_kl_target", ppo.lr_kl_target),
        ("ppo.lr_min", ppo.lr_min),
        ("ppo.lr_max", ppo.lr_max),
        ("runner.num_workers", runner.num_workers),
        ("runner.torch_threads", runner.torch_threads),
        ("runner.actor_threads", runner.actor_threads),
        ("runner.act_threads", runner.act_threads),
        ("runner.num_learners", runner.num_learners),
        ("runner.ray_num_cpus", runner.ray_num_cpus),
        ("runner.slots_per_actor", runner.slots_per_actor),
        ("runner.play_chunk_steps", runner.play_chunk_steps),
        ("runner.play_queue_chunks", runner.play_queue_chunks),
        ("stop.total_timesteps", stop.total_timesteps),
        ("stop.iterations", stop.iterations),
        ("stop.wall_time_s", stop.wall_time_s),
        ("telemetry.sysmon_interval_s", cfg.telemetry.sysmon_interval_s),
        ("checkpoint.keep", cfg.checkpoint.keep),
        ("stop.anneal_steps", stop.anneal_steps),
    ]:
        _positive(key, value)
    for key, value in [
        ("env.noop_max", env.noop_max),
        ("ppo.ent_coef", ppo.ent_coef),
        ("ppo.vf_coef", ppo.vf_coef),
        ("ppo.kl_coeff", ppo.kl_coeff),
        ("checkpoint.every", cfg.checkpoint.every),
        ("checkpoint.every_s", cfg.checkpoint.every_s),
        ("telemetry.warmup_iterations", cfg.telemetry.warmup_iterations),
        ("runner.max_worker_restarts", runner.max_worker_restarts),
    ]:
        if not math.isfinite(value) or value < 0:
            raise ConfigError(f"{key} must be zero or positive, got {value}")
    for key, value in [
        ("ppo.gamma", ppo.gamma),
        ("ppo.gae_lambda", ppo.gae_lambda),
        ("env.repeat_action_probability", env.repeat_action_probability),
    ]:
        if not 0.0 <= value <= 1.0:  # also false for nan
            raise ConfigError(f"{key} must be between 0 and 1, got {value}")
    if ppo.lr_min > ppo.lr_max:
        raise ConfigError(f"ppo.lr_min ({ppo.lr_min}) must not exceed ppo.lr_max ({ppo.lr_max})")
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
    if env.num_envs % runner.num_workers:
        raise ConfigError(
            f"env.num_envs ({env.num_envs}) must be divisible by runner.num_workers ({runner.num_workers})"
        )
    _validate_vtrace_algos(cfg)
    _validate_dqn(cfg)
    _validate_pqn(cfg)
    _validate_a3c(cfg.a3c)
    _validate_rnd(cfg.rnd)
    _validate_runner(cfg.runner)
    if (ppo.num_minibatches is None) == (ppo.minibatch_size is None):
        raise ConfigError(
            "set exactly one of ppo.num_minibatches and ppo.minibatch_size (the other to null)"
        )
    batch = env.num_envs * ppo.num_steps
    minibatch = ppo.minibatch_size or batch // (ppo.num_minibatches or 1)
    if not 2 <= minibatch <= batch:
        # One sample has no spread: per-minibatch advantage normalisation would divide by 0.
        raise ConfigError(
            f"a minibatch must hold 2 to {batch} samples (num_envs x num_steps), got {minibatch} "
            "from ppo.num_minibatches / ppo.minibatch_size"
        )
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
    if stop.anneal_steps is not None and stop.anneal_over != "wall_time_steps":
        raise ConfigError(
            f"stop.anneal_steps is read only with stop.anneal_over=wall_time_steps, not "
            f"{stop.anneal_over}; for a fixed step budget use stop.total_timesteps"
        )


def _validate_vtrace_algos(cfg: RunConfig) -> None:
    impala, appo = cfg.impala, cfg.appo
    for key, value in [
        ("impala.num_steps", impala.num_steps),
        ("impala.num_minibatches", impala.num_minibatches),
        ("impala.learning_rate", impala.learning_rate),
        ("impala.optimizer_eps", impala.optimizer_eps),
        ("impala.rho_bar", impala.rho_bar),
        ("impala.c_bar", impala.c_bar),
        ("impala.max_grad_norm", impala.max_grad_norm),
        ("appo.num_steps", appo.num_steps),
        ("appo.num_minibatches", appo.num_minibatches),
        ("appo.update_epochs", appo.update_epochs),
        ("appo.learning_rate", appo.learning_rate),
        ("appo.clip_coef", appo.clip_coef),
        ("appo.rho_bar", appo.rho_bar),
        ("appo.c_bar", appo.c_bar),
        ("appo.max_grad_norm", appo.max_grad_norm),
    ]:
        _positive(key, value)
    for key, value in [
        ("impala.gamma", impala.gamma),
        ("appo.gamma", appo.gamma),
        ("impala.rmsprop_alpha", impala.rmsprop_alpha),
    ]:
        if not 0.0 <= value <= 1.0:
            raise ConfigError(f"{key} must be between 0 and 1, got {value}")
    for key, value in [
        ("impala.max_policy_lag", impala.max_policy_lag),
        ("appo.max_policy_lag", appo.max_policy_lag),
    ]:
        if value < 0:
            raise ConfigError(f"{key} must be zero or positive, got {value}")
    if cfg.algo == "impala" and impala.num_minibatches > cfg.env.num_envs:
        raise ConfigError(
            f"impala.num_minibatches ({impala.num_minibatches}) exceeds env.num_envs ({cfg.env.num_envs}): "
            "IMPALA minibatches are slices of whole env trajectories"
        )
    if cfg.algo == "appo" and cfg.env.num_envs * appo.num_steps // appo.num_minibatches < 2:
        raise ConfigError(
            "an APPO minibatch must hold at least 2 samples (num_envs x num_steps / num_minibatches)"
        )


def _validate_faults(cfg: RunConfig) -> None:
    env = cfg.env
    for key, p in (
        ("env.fault_p_crash", env.fault_p_crash),
        ("env.fault_p_stall", env.fault_p_stall),
    ):
        if not 0.0 <= p <= 1.0:
            raise ConfigError(f"{key} must be a probability in [0, 1], got {p}")
    if cfg.runner.worker_timeout_s is not None and not cfg.runner.worker_timeout_s > 0:
        raise ConfigError(
            f"runner.worker_timeout_s must be > 0 seconds (or null), got {cfg.runner.worker_timeout_s}"
        )
    if env.fault_stall_time_s < 0:
        raise ConfigError(f"env.fault_stall_time_s must be >= 0, got {env.fault_stall_time_s}")
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


def _validate_dqn(cfg: RunConfig) -> None:
    dqn = cfg.dqn
    for key, value in [
        ("dqn.buffer_size", dqn.buffer_size),
        ("dqn.batch_size", dqn.batch_size),
        ("dqn.train_frequency", dqn.train_frequency),
        ("dqn.steps_per_iteration", dqn.steps_per_iteration),
        ("dqn.learning_rate", dqn.learning_rate),
        ("dqn.adam_eps", dqn.adam_eps),
        ("dqn.target_network_frequency", dqn.target_network_frequency),
        ("dqn.max_grad_norm", dqn.max_grad_norm),
    ]:
        _positive(key, value)
    for key, value in [
        ("dqn.learning_starts", dqn.learning_starts),
        ("dqn.exploration_steps", dqn.exploration_steps),
    ]:
        if value is not None and value < 0:
            raise ConfigError(f"{key} must be zero or positive, got {value}")
    for key, value in [
        ("dqn.gamma", dqn.gamma),
        ("dqn.start_e", dqn.start_e),
        ("dqn.end_e", dqn.end_e),
        ("dqn.exploration_fraction", dqn.exploration_fraction),
    ]:
        if not 0.0 <= value <= 1.0:
            raise ConfigError(f"{key} must be between 0 and 1, got {value}")
    if cfg.algo != "dqn":
        return
    if dqn.exploration_steps is None and not cfg.stop.total_timesteps:
        raise ConfigError(
            "dqn.exploration_fraction needs stop.total_timesteps; set dqn.exploration_steps instead"
        )
    if dqn.learning_starts > dqn.buffer_size:
        raise ConfigError(
            f"dqn.learning_starts ({dqn.learning_starts}) exceeds dqn.buffer_size ({dqn.buffer_size}): "
            "training would never start"
        )
    stack = cfg.env.frame_stack
    if dqn.buffer_size < 4 * stack * cfg.env.num_envs:
        raise ConfigError(
            f"dqn.buffer_size ({dqn.buffer_size}) is too small: at least 4 x env.frame_stack x env.num_envs"
        )


def _validate_pqn(cfg: RunConfig) -> None:
    pqn = cfg.pqn
    for key, value in [
        ("pqn.num_steps", pqn.num_steps),
        ("pqn.num_minibatches", pqn.num_minibatches),
        ("pqn.update_epochs", pqn.update_epochs),
        ("pqn.learning_rate", pqn.learning_rate),
        ("pqn.optimizer_eps", pqn.optimizer_eps),
        ("pqn.max_grad_norm", pqn.max_grad_norm),
        ("pqn.reward_scale", pqn.reward_scale),
    ]:
        _positive(key, value)
    for key, value in [
        ("pqn.gamma", pqn.gamma),
        ("pqn.q_lambda", pqn.q_lambda),
        ("pqn.start_e", pqn.start_e),
        ("pqn.end_e", pqn.end_e),
        ("pqn.exploration_fraction", pqn.exploration_fraction),
    ]:
        if not 0.0 <= value <= 1.0:
            raise ConfigError(f"{key} must be between 0 and 1, got {value}")
    if pqn.max_policy_lag < 0:
        raise ConfigError(f"pqn.max_policy_lag must be zero or positive, got {pqn.max_policy_lag}")
    if cfg.algo == "pqn" and cfg.env.num_envs * pqn.num_steps < pqn.num_minibatches:
        raise ConfigError(
            f"pqn.num_minibatches ({pqn.num_minibatches}) exceeds the batch "
            f"(env.num_envs x pqn.num_steps = {cfg.env.num_envs * pqn.num_steps})"
        )


def _validate_a3c(cfg: A3CConfig) -> None:
    for key in (
        "num_local_steps",
        "learning_rate",
        "optimizer_eps",
        "max_grad_norm",
        "value_clip",
        "lr_drop_steps",
    ):
        value = getattr(cfg, key)
        if value is not None and not value > 0:
            raise ConfigError(f"a3c.{key} must be positive, got {value}")
    for key in ("gamma", "gae_lambda", "lr_drop_factor"):
        value = getattr(cfg, key)
        if not 0.0 <= value <= 1.0:
            raise ConfigError(f"a3c.{key} must be between 0 and 1, got {value}")
    for key in ("ent_coef", "vf_coef", "time_penalty"):
        value = getattr(cfg, key)
        if not value >= 0:
            raise ConfigError(f"a3c.{key} must be zero or positive, got {value}")
    if cfg.optimizer not in SHARED_OPTIMIZERS:
        raise ConfigError(
            f"a3c.optimizer must be one of {', '.join(SHARED_OPTIMIZERS)}, got {cfg.optimizer!r}"
        )


def _validate_rnd(cfg: RNDConfig) -> None:
    if (cfg.num_minibatches is None) == (cfg.minibatch_size is None):
        raise ConfigError(
            "set exactly one of rnd.num_minibatches and rnd.minibatch_size (the other to null)"
        )
    if not 0.0 < cfg.update_proportion <= 1.0:
        raise ConfigError(f"rnd.update_proportion must be in (0, 1], got {cfg.update_proportion}")
    if cfg.ext_coef < 0 or cfg.int_coef < 0 or cfg.ext_coef == cfg.int_coef == 0:
        raise ConfigError(
            f"rnd.ext_coef and rnd.int_coef must be >= 0 and not both 0, got "
            f"{cfg.ext_coef} and {cfg.int_coef}"
        )
    if cfg.num_steps < 1 or cfg.update_epochs < 1 or cfg.num_init_steps < 0:
        raise ConfigError(
            "rnd.num_steps and rnd.update_epochs must be >= 1 and rnd.num_init_steps >= 0"
        )
    if cfg.obs_clip <= 0:
        raise ConfigError(f"rnd.obs_clip must be > 0, got {cfg.obs_clip}")


def _validate_runner(cfg: RunnerConfig) -> None:
    if cfg.eval_interval_s < 0:
        raise ConfigError(
            f"runner.eval_interval_s must be zero or positive, got {cfg.eval_interval_s}"
        )
    if not cfg.ray_num_cpus_per_actor > 0:
        raise ConfigError(
            f"runner.ray_num_cpus_per_actor must be positive (fractions such as 0.5 are fine), "
            f"got {cfg.ray_num_cpus_per_actor}"
        )
    if not cfg.ray_num_gpus_per_actor >= 0:
        raise ConfigError(
            f"runner.ray_num_gpus_per_actor must be 0 or more, got {cfg.ray_num_gpus_per_actor}"
        )
