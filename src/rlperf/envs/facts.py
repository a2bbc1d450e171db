"""What rlperf knows about each kind of environment, in one table.

The third facts table beside the runners' (each runner class declares its own) and the
algorithms' (declared by their sections in ``config/algorithms/``). :func:`check_env` holds
the env settings against it (the config checker, :mod:`rlperf.training.checks`, calls it
before anything is built); the model checks and ``model.name=auto`` read its rows.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Literal

from rlperf.config.choices import Engine, ResizeInterpolation
from rlperf.config.schema import START_PARITY_GAP, EnvConfig
from rlperf.core.errors import ConfigError
from rlperf.envs.make import is_atari, validate_env_id

ENGINES: frozenset[str] = frozenset(typing.get_args(Engine))
"""Every env engine: gymnasium (Python envs), envpool and ale-vector (ALE in C++ threads)."""

Observation = Literal["image", "features"]


@dataclass(frozen=True)
class EnvFacts:
    """One kind of environment's observations, engines and default model."""

    observation: Observation
    """image: stacked frames for the conv models; features: a flat vector for the MLPs."""
    engines: frozenset[str]
    """Env engines that can step it."""
    default_model: str
    """What ``model.name=auto`` builds for it."""


ENV_FACTS: dict[str, EnvFacts] = {
    # ALE games: every engine; the Nature CNN unless a model is named
    "atari": EnvFacts("image", ENGINES, "nature"),
    # source 002's football games (rlperf's own and gfootball's): its 115 features, its MLP
    "football": EnvFacts("features", frozenset({"gymnasium"}), "football-mlp"),
    # any other gymnasium id (classic control and the like): a flat observation vector
    "features": EnvFacts("features", frozenset({"gymnasium"}), "mlp"),
}


@dataclass(frozen=True)
class EngineFacts:
    """What one env engine implements of the env settings; the config checks refuse the
    rest before anything is built (its builder trusts a checked config)."""

    resize_interpolations: frozenset[str]
    """The frame resizes it implements (``env.resize_interpolation``)."""
    unpooled_frames: bool
    """It can keep a skip's last frame as it is (``env.max_pool=false``) instead of the max
    of the last two."""
    longer_pools: bool
    """It can take the max over more than a skip's last two frames (``env.max_pool_frames``)."""
    parity_marks: bool
    """It knows each game's emulator frame number, so it can paint the frame parity into
    the observation (``env.mark_frame_parity``)."""
    chosen_start_parity: bool
    """It can start every game on a chosen frame parity (``env.start_parity``)."""
    package: str
    """The package it needs installed (the C++ engines are optional dependencies)."""
    extra: str
    """What to ``pip install`` for it."""


ENGINE_FACTS: dict[str, EngineFacts] = {
    # rlperf's own Atari env: OpenCV's resizes, pooling optional
    "gymnasium": EngineFacts(
        resize_interpolations=frozenset(typing.get_args(ResizeInterpolation)),
        unpooled_frames=True,
        longer_pools=True,
        parity_marks=True,
        chosen_start_parity=True,
        package="gymnasium",
        extra="rlperf",
    ),
    # EnvPool always max-pools the last two frames of a skip; its resize is area or linear
    "envpool": EngineFacts(
        resize_interpolations=frozenset({"area", "linear"}),
        unpooled_frames=False,
        longer_pools=False,
        parity_marks=False,
        chosen_start_parity=False,
        package="envpool",
        extra="rlperf[envpool]",
    ),
    # ale-py's C++ vector env resizes with INTER_AREA only; its info holds the frame numbers
    "ale-vector": EngineFacts(
        resize_interpolations=frozenset({"area"}),
        unpooled_frames=True,
        longer_pools=False,
        parity_marks=True,
        chosen_start_parity=False,
        package="ale_py",
        extra="rlperf[atari]",
    ),
}


def env_kind(env_id: str) -> str:
    """The row of :data:`ENV_FACTS` that ``env_id`` belongs to."""
    if is_atari(env_id):
        return "atari"
    if "football" in env_id.lower():
        return "football"
    return "features"


def env_facts(env_id: str) -> EnvFacts:
    """What rlperf knows about ``env_id``'s kind of environment."""
    return ENV_FACTS[env_kind(env_id)]


def check_env(env: EnvConfig) -> EnvFacts:
    """Refuse (one line) env settings that no run of ``env.id`` can have: an unregistered id,
    an engine that cannot step its kind of env or lacks a frame setting asked; returns the
    kind's facts. Machine-independent: whether the engine is installed is checked apart."""
    validate_env_id(env.id)
    if env.num_threads is not None and env.engine == "gymnasium":
        raise ConfigError(
            "env.num_threads sets the threads of the C++ engines (envpool, ale-vector); "
            "engine gymnasium steps its envs without them: set env.engine or unset env.num_threads"
        )
    kind = env_kind(env.id)
    facts = ENV_FACTS[kind]
    if env.engine not in facts.engines:
        raise ConfigError(
            f"engine {env.engine} cannot step {env.id} ({kind} envs run on engine "
            f"{', '.join(sorted(facts.engines))}); the C++ engines run Atari games only"
        )
    engine = ENGINE_FACTS[env.engine]
    if env.resize_interpolation not in engine.resize_interpolations:
        raise ConfigError(
            f"env.resize_interpolation={env.resize_interpolation} is not implemented by engine "
            f"{env.engine}; valid: {', '.join(sorted(engine.resize_interpolations))}, or engine "
            "gymnasium"
        )
    if not env.max_pool and env.frameskip >= 2 and not engine.unpooled_frames:
        raise ConfigError(
            f"env.max_pool=false is not implemented by engine {env.engine} (it always "
            "max-pools the last two frames of a skip); use engine gymnasium or ale-vector"
        )
    if env.max_pool and env.max_pool_frames != 2 and not engine.longer_pools:
        raise ConfigError(
            f"env.max_pool_frames={env.max_pool_frames} is not implemented by engine "
            f"{env.engine} (it max-pools the last two frames of a skip); use engine gymnasium"
        )
    if env.mark_frame_parity and not engine.parity_marks:
        raise ConfigError(
            f"env.mark_frame_parity is not implemented by engine {env.engine} (it does not "
            "report the games' frame numbers); use engine gymnasium or ale-vector"
        )
    steering = env.start_parity_share != 1.0 or env.start_parity_gap != START_PARITY_GAP
    if steering and env.start_parity != "lagging":
        raise ConfigError(
            "env.start_parity_share / env.start_parity_gap steer env.start_parity=lagging; "
            f"set it (got env.start_parity={env.start_parity})"
        )
    if env.start_parity_share < 0.5:
        raise ConfigError(
            f"env.start_parity_share must be 0.5 to 1, got {env.start_parity_share}: the games "
            "not steered start as the no-ops fall, half of them on the lagging parity already"
        )
    if env.start_parity != "any":
        if not engine.chosen_start_parity:
            raise ConfigError(
                f"env.start_parity={env.start_parity} is not implemented by engine {env.engine} "
                "(its resets are its own); use engine gymnasium"
            )
        if env.frameskip % 2 or env.frameskip_max:
            # An odd or random skip moves each game from one parity to the other as it goes.
            raise ConfigError(
                f"env.start_parity={env.start_parity} needs an even env.frameskip without "
                f"env.frameskip_max (got frameskip {env.frameskip}, frameskip_max "
                f"{env.frameskip_max}): only then does a game stay on the parity it starts on"
            )
    return facts
