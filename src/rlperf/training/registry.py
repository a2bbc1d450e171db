"""The composition root: explicit name -> factory maps for algorithms, runners and models.

Nothing registers itself by being imported; adding an algorithm means its module in
``algos/``, its settings section in ``config/algorithms/`` (fields with ranges and docs,
facts and checks; one field of ``RunConfig``) and a line here; a runner, its class (with its
``name`` and ``facts``) and a line in ``RUNNER_PARTS``. :mod:`rlperf.training.checks` reads
the facts.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium
import torch

from rlperf.algos.a3c import A3C
from rlperf.algos.appo import APPO
from rlperf.algos.dqn import DQN, QNetwork
from rlperf.algos.impala import IMPALA
from rlperf.algos.ppo import PPO
from rlperf.algos.pqn import PQN, QPolicy
from rlperf.algos.rnd import RND
from rlperf.config.schema import RunConfig
from rlperf.core.errors import ConfigError
from rlperf.core.protocols import Algorithm
from rlperf.envs.make import is_atari, make_engine_envs, make_env_slice
from rlperf.envs.vector import VectorEnv
from rlperf.models.catalog import build_model, frame_dim
from rlperf.models.policy import ActorCritic
from rlperf.models.rnd import RNDPolicy
from rlperf.runners.base import Runner
from rlperf.runners.decoupled import DecoupledRunner, actor_engine_threads
from rlperf.runners.facts import RunnerFacts
from rlperf.runners.hogwild import HogwildRunner
from rlperf.runners.inproc import InProcRunner
from rlperf.runners.play_train import PlayTrainRunner
from rlperf.runners.ray_actors import RayRunner
from rlperf.runners.rllib_workers import RLlibWorkers
from rlperf.runners.subproc import SubprocRunner
from rlperf.runners.transitions import TransitionsRunner


def _rnd_input_shape(cfg: RunConfig, policy: ActorCritic) -> tuple[int, ...]:
    """What RND's target and predictor see: the newest frame (Atari) or the features."""
    if is_atari(cfg.env.id):
        dim = frame_dim(cfg.env, cfg.model)
        return (1 if cfg.env.grayscale else 3, dim, dim)
    first = next(m for m in policy.policy_torso.modules() if isinstance(m, torch.nn.Linear))
    return (first.in_features,)


def _rnd(cfg: RunConfig, policy: ActorCritic) -> RND:
    lagged = RUNNER_FACTS[cfg.runner.name].policy_lag > 0
    return RND(
        cfg.rnd,
        RNDPolicy.from_actor_critic(policy, _rnd_input_shape(cfg, policy)),
        seed=cfg.seed,
        num_envs=cfg.env.num_envs,
        use_vtrace=lagged if cfg.rnd.vtrace is None else cfg.rnd.vtrace,
    )


def acting_policy(cfg: RunConfig, obs_shape: tuple[int, ...], num_actions: int) -> ActorCritic:
    """The network an actor process acts with: the built model, or for RND the same
    two-headed module the learner trains (weights are published as one flat buffer)."""
    policy = build_model(cfg.model, obs_shape, num_actions)
    if cfg.algo == "rnd":
        return RNDPolicy.from_actor_critic(policy, _rnd_input_shape(cfg, policy))
    if cfg.algo == "pqn":
        return QPolicy.from_actor_critic(policy)  # type: ignore[return-value]
    return policy


ALGORITHMS: dict[str, Callable[[RunConfig, ActorCritic], Algorithm]] = {
    "ppo": lambda cfg, policy: PPO(cfg.ppo, policy, seed=cfg.seed),
    "appo": lambda cfg, policy: APPO(cfg.appo, policy, seed=cfg.seed),
    "a3c": lambda cfg, policy: A3C(cfg.a3c, policy, seed=cfg.seed),
    "impala": lambda cfg, policy: IMPALA(cfg.impala, policy, seed=cfg.seed),
    # DQN learns Q-values with the built model's policy torso (the Nature CNN by default).
    "dqn": lambda cfg, policy: DQN(
        cfg.dqn,
        QNetwork.from_actor_critic(policy),
        seed=cfg.seed,
        total_timesteps=cfg.stop.total_timesteps,
    ),
    # PQN learns Q-values with the built model's policy torso and acts epsilon-greedily on
    # them through the same calls as a policy.
    "pqn": lambda cfg, policy: PQN(cfg.pqn, QPolicy.from_actor_critic(policy), seed=cfg.seed),
    # RND wraps the built model's torsos with a second value head and its two networks.
    "rnd": _rnd,
}


@dataclass(frozen=True)
class EnvSpaces:
    """What the policy is built for: one env's observation and action spaces."""

    observation: gymnasium.Space[Any]
    action: gymnasium.spaces.Discrete


def _decoupled(
    cfg: RunConfig, envs: VectorEnv | None, algo: Algorithm, dim: int, spaces: EnvSpaces
) -> Runner:
    obs_shape = tuple(spaces.observation.shape or ())
    # each actor's slice of envs runs its own engine pool: unset, the pools share the cores
    env_threads = cfg.env.num_threads or actor_engine_threads(cfg.runner)
    actor_env = dataclasses.replace(cfg.env, num_threads=env_threads)
    return DecoupledRunner(
        cfg.runner,
        algo,
        num_envs=cfg.env.num_envs,
        obs_space=spaces.observation,
        make_env_slice=functools.partial(make_env_slice, actor_env, dim),
        make_policy=functools.partial(acting_policy, cfg, obs_shape, int(spaces.action.n)),
        seed=cfg.seed,
    )


def _hogwild(
    cfg: RunConfig, envs: VectorEnv | None, algo: Algorithm, dim: int, spaces: EnvSpaces
) -> Runner:
    return HogwildRunner(
        cfg.runner,
        algo,
        num_envs=cfg.env.num_envs,
        make_env_slice=functools.partial(make_env_slice, cfg.env, dim),
        seed=cfg.seed,
    )


def _ray(
    cfg: RunConfig, envs: VectorEnv | None, algo: Algorithm, dim: int, spaces: EnvSpaces
) -> Runner:
    # Ray itself is imported when the runner starts: an optional dependency (rlperf[ray])
    runner_class = RLlibWorkers if cfg.runner.name == RLlibWorkers.name else RayRunner
    obs_shape = tuple(spaces.observation.shape or ())
    return runner_class(
        cfg.runner,
        algo,
        num_envs=cfg.env.num_envs,
        make_env_slice=functools.partial(make_env_slice, cfg.env, dim),
        make_policy=functools.partial(acting_policy, cfg, obs_shape, int(spaces.action.n)),
        seed=cfg.seed,
    )


def _transition_args(cfg: RunConfig, spaces: EnvSpaces) -> dict[str, Any]:
    """What the transitions runners need beyond the algorithm: the replay's frame layout and
    frames per env step (for FPS)."""
    atari = is_atari(cfg.env.id)
    return {
        "num_envs": cfg.env.num_envs,
        "obs_space": spaces.observation,
        "frame_stack": cfg.env.frame_stack if atari else 1,
        "frames_per_step": cfg.env.mean_frameskip if atari else 1,
        "seed": cfg.seed,
    }


def _inproc(
    cfg: RunConfig, envs: VectorEnv | None, algo: Algorithm, dim: int, spaces: EnvSpaces
) -> Runner:
    if algo.data_spec.kind == "transitions":
        return TransitionsRunner(cfg.runner, envs, algo, **_transition_args(cfg, spaces))
    return InProcRunner(cfg.runner, envs, algo, seed=cfg.seed)


def _play_train(
    cfg: RunConfig, envs: VectorEnv | None, algo: Algorithm, dim: int, spaces: EnvSpaces
) -> Runner:
    return PlayTrainRunner(
        cfg.runner,
        algo,
        make_env_slice=functools.partial(make_env_slice, cfg.env, dim),
        **_transition_args(cfg, spaces),
    )


RunnerFactory = Callable[[RunConfig, VectorEnv | None, Algorithm, int, EnvSpaces], Runner]
RUNNER_PARTS: tuple[tuple[Any, RunnerFactory], ...] = (
    (InProcRunner, _inproc),  # with a transitions algorithm, a TransitionsRunner
    (
        SubprocRunner,
        lambda cfg, envs, algo, dim, spaces: SubprocRunner(cfg.runner, envs, algo, seed=cfg.seed),
    ),
    (DecoupledRunner, _decoupled),
    (PlayTrainRunner, _play_train),
    (RayRunner, _ray),
    (RLlibWorkers, _ray),
    (HogwildRunner, _hogwild),
)
"""Every runner: its class (which declares its ``name`` and ``facts``) and its factory."""
RUNNERS: dict[str, RunnerFactory] = {cls.name: build for cls, build in RUNNER_PARTS}
RUNNER_FACTS: dict[str, RunnerFacts] = {cls.name: cls.facts for cls, _ in RUNNER_PARTS}
"""What each runner declares about itself, by name (read by :mod:`rlperf.training.checks`)."""


def make_algorithm(cfg: RunConfig, policy: ActorCritic) -> Algorithm:
    """The algorithm of a checked ``cfg`` (see ``rlperf.training.resolve``), learning ``policy``."""
    return ALGORITHMS[cfg.algo](cfg, policy)


def make_envs(cfg: RunConfig, dim: int) -> VectorEnv | None:
    """The vector env the learner's process steps (through the runner and engine of ``cfg``);
    None for the decoupled and play-train runners, whose worker processes build their own."""
    if RUNNER_FACTS[cfg.runner.name].builds_own_envs:
        return None
    if cfg.runner.name == "subprocess":
        from rlperf.envs.subproc import make_subproc_vector_env

        timeout = (
            {}
            if cfg.runner.worker_timeout_s is None
            else {"step_timeout_s": cfg.runner.worker_timeout_s}
        )
        return make_subproc_vector_env(cfg.env, dim, cfg.seed, cfg.runner.num_workers, **timeout)
    return make_engine_envs(cfg.env, dim, cfg.seed)


def env_spaces(cfg: RunConfig, dim: int, envs: VectorEnv | None) -> EnvSpaces:
    """The spaces of ``envs``, or of one env of the configured engine built to look."""
    if envs is None:
        envs = make_env_slice(cfg.env, dim, 1, cfg.seed)
        try:
            return env_spaces(cfg, dim, envs)
        finally:
            envs.close()
    action = envs.single_action_space
    if not isinstance(action, gymnasium.spaces.Discrete):
        raise ConfigError(f"{cfg.env.id} has {action}; rlperf's policies need discrete actions")
    return EnvSpaces(envs.single_observation_space, action)


def make_runner(
    cfg: RunConfig, envs: VectorEnv | None, algo: Algorithm, dim: int, spaces: EnvSpaces
) -> Runner:
    return RUNNERS[cfg.runner.name](cfg, envs, algo, dim, spaces)
