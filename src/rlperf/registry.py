"""The composition root: explicit name -> factory maps for algorithms, runners and models.

Nothing registers itself by being imported; adding an algorithm or a runner means adding a
line here (and a row in runners/compat.py).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable

import torch

from rlperf.algos.appo import APPO
from rlperf.algos.impala import IMPALA
from rlperf.algos.ppo import PPO
from rlperf.config.schema import RunConfig
from rlperf.core.errors import ConfigError
from rlperf.core.protocols import Algorithm
from rlperf.envs.make import is_atari, make_vector_env, validate_env_id
from rlperf.envs.vector import VectorEnv
from rlperf.models.catalog import MODELS, resolve_model_name
from rlperf.models.policy import ActorCritic
from rlperf.runners.base import Runner
from rlperf.runners.compat import check_compatible, check_engine
from rlperf.runners.inproc import InProcRunner, SubprocRunner

ALGORITHMS: dict[str, Callable[[RunConfig, ActorCritic], Algorithm]] = {
    "ppo": lambda cfg, policy: PPO(cfg.ppo, policy, seed=cfg.seed),
    "appo": lambda cfg, policy: APPO(cfg.appo, policy, seed=cfg.seed),
    "impala": lambda cfg, policy: IMPALA(cfg.impala, policy, seed=cfg.seed),
}

RUNNERS: dict[str, Callable[[RunConfig, VectorEnv, Algorithm], Runner]] = {
    "inproc": lambda cfg, envs, algo: InProcRunner(cfg.runner, envs, algo, seed=cfg.seed),
    "subprocess": lambda cfg, envs, algo: SubprocRunner(cfg.runner, envs, algo, seed=cfg.seed),
}

ENGINES = ("gymnasium", "envpool", "ale-vector")


def _check_name(kind: str, name: str, valid: list[str]) -> None:
    if name not in valid:
        close = difflib.get_close_matches(name, valid, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(f"unknown {kind} {name!r}{hint}; valid: {', '.join(valid)}")


def resolve_dim(cfg: RunConfig) -> int:
    """The Atari frame size: env.dim, else the model's designed input size, else 84."""
    spec = MODELS[resolve_model_name(cfg.model.name)]
    if cfg.env.dim is not None and spec.kind == "conv" and spec.input_dim != cfg.env.dim:
        raise ConfigError(
            f"model {cfg.model.name} is designed for {spec.input_dim}x{spec.input_dim} inputs but env.dim is "
            f"{cfg.env.dim}; leave env.dim unset or pick a model for that size (see `rlperf models`)"
        )
    return cfg.env.dim or spec.input_dim or 84


def check_devices(cfg: RunConfig) -> None:
    """The learner and actor devices exist on this machine."""
    for key, name in (
        ("runner.learner_device", cfg.runner.learner_device),
        ("runner.actor_device", cfg.runner.actor_device),
    ):
        device = torch.device(name)
        if device.type == "cuda":
            count = torch.cuda.device_count() if torch.cuda.is_available() else 0
            if count == 0:
                raise ConfigError(
                    f"{key}={name} but torch sees no CUDA device (torch {torch.__version__}); use cpu"
                )
            if device.index is not None and device.index >= count:
                raise ConfigError(
                    f"{key}={name} but only {count} CUDA device(s) are visible (cuda:0..cuda:{count - 1})"
                )
        elif device.type == "mps" and not torch.backends.mps.is_available():
            raise ConfigError(f"{key}={name} but MPS is not available here; use cpu")


def check_names(cfg: RunConfig) -> None:
    """Validate every name in ``cfg`` against what exists (algorithm, runner, model, env,
    devices)."""
    check_devices(cfg)
    _check_name("algorithm", cfg.algo, list(ALGORITHMS))
    _check_name("runner", cfg.runner.name, list(RUNNERS))
    _check_name("engine", cfg.env.engine, list(ENGINES))
    check_engine(cfg.runner.name, cfg.env.engine)
    cfg.model.name = resolve_model_name(cfg.model.name)
    validate_env_id(cfg.env.id)
    spec = MODELS[cfg.model.name]
    if cfg.env.engine != "gymnasium" and not is_atari(cfg.env.id):
        raise ConfigError(
            f"engine {cfg.env.engine} runs Atari games only; {cfg.env.id} needs engine gymnasium"
        )
    if is_atari(cfg.env.id) and spec.kind == "mlp":
        raise ConfigError(
            f"model mlp cannot read the image observations of {cfg.env.id}; use nature or thesis-1..6"
        )
    if not is_atari(cfg.env.id) and spec.kind != "mlp":
        raise ConfigError(
            f"model {cfg.model.name} needs Atari images; {cfg.env.id} has feature observations: use --model mlp"
        )
    resolve_dim(cfg)


def make_algorithm(cfg: RunConfig, policy: ActorCritic) -> Algorithm:
    algo = ALGORITHMS[cfg.algo](cfg, policy)
    check_compatible(cfg.algo, cfg.runner.name, algo.data_spec)
    return algo


def make_envs(cfg: RunConfig, dim: int) -> VectorEnv:
    """The vector env the runner and engine of ``cfg`` step (C++ engines imported on demand:
    they are optional dependencies)."""
    if cfg.runner.name == "subprocess":
        from rlperf.envs.subproc import make_subproc_vector_env

        return make_subproc_vector_env(cfg.env, dim, cfg.seed, cfg.runner.num_workers)
    if cfg.env.engine == "envpool":
        try:
            from rlperf.envs.envpool_env import EnvPoolVectorEnv
        except ImportError as exc:
            raise ConfigError(
                f"engine envpool needs the envpool package ({exc}); pip install 'rlperf[envpool]'"
            ) from None
        return EnvPoolVectorEnv(cfg.env, dim, cfg.seed)
    if cfg.env.engine == "ale-vector":
        from rlperf.envs.ale_vector import AleVectorEnv

        return AleVectorEnv(cfg.env, dim, cfg.seed)
    return make_vector_env(cfg.env, dim, cfg.seed)


def make_runner(cfg: RunConfig, envs: VectorEnv, algo: Algorithm) -> Runner:
    return RUNNERS[cfg.runner.name](cfg, envs, algo)
