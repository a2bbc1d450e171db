"""Build environments from an :class:`EnvConfig`.

Rules applied here:

* Atari games (ids whose gymnasium entry point is ALE's, e.g. ``ALE/Pong-v5`` or
  ``PongNoFrameskip-v4``) become an :class:`~rlperf.envs.atari.AtariEnv` with every Atari knob
  of the config.
* Any other id becomes a :class:`~rlperf.envs.classic.GymEnv`; the Atari-only knobs (dim,
  frame stack, frame skip, no-op/fire reset, episodic life, grayscale, sticky actions, action
  set) are ignored, and so is ``clip_rewards``: reward clipping is an Atari convention (game
  scores of very different scales), while classic-control rewards are already small and their
  exact values matter, so clipping applies to Atari only. The step limit follows
  :func:`rlperf.envs.classic.resolve_max_episode_steps`.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import re
from functools import lru_cache

import gymnasium

from rlperf.config.schema import EnvConfig
from rlperf.core.errors import ConfigError
from rlperf.envs.base import SingleEnv
from rlperf.envs.vector import SyncVectorEnv, VectorEnv

_ALE_ENTRY_POINT = "ale_py.env:AtariEnv"


@lru_cache(maxsize=1)
def _ale_available() -> bool:
    """Import ale_py once (it registers the ALE ids with gymnasium); False if not installed."""
    try:
        import ale_py
    except ImportError:
        return False
    gymnasium.register_envs(ale_py)
    return True


@lru_cache(maxsize=1)
def _register_rlperf_envs() -> None:
    """Register rlperf's own games (rlperf/FootballEmptyGoalClose-v0) with gymnasium, once,
    when an env id is first looked at (not as a side effect of importing a module)."""
    from rlperf.envs import football

    football.register()


def _split_module(env_id: str) -> tuple[str | None, str]:
    """Split gymnasium's ``module:Env-v0`` form into (module, registry id)."""
    if ":" in env_id:
        module, name = env_id.split(":", 1)
        return module, name
    return None, env_id


def is_atari(env_id: str) -> bool:
    """True if ``env_id`` is an ALE game (judged by its registered entry point)."""
    _ale_available()
    _register_rlperf_envs()
    spec = gymnasium.registry.get(_split_module(env_id)[1])
    if spec is None:
        return env_id.startswith("ALE/")
    return str(spec.entry_point) == _ALE_ENTRY_POINT


def _suggestions(env_id: str, known: list[str], limit: int = 3) -> list[str]:
    """Registered ids that look like ``env_id`` (case-insensitive, best first)."""
    query = env_id.lower()

    def score(name: str) -> float:
        # Also compare without the namespace so "Pong-v5" finds "ALE/Pong-v5" first.
        lower = name.lower()
        bare = lower.rsplit("/", 1)[-1]
        return max(
            difflib.SequenceMatcher(None, query, lower).ratio(),
            difflib.SequenceMatcher(None, query, bare).ratio(),
        )

    def version(name: str) -> int:
        match = re.search(r"-v(\d+)$", name)
        return int(match.group(1)) if match else -1

    scored = [(score(name), version(name), name) for name in known]
    close = [item for item in scored if item[0] >= 0.6]
    if not close:
        # Very short queries score low against long ids; fall back to substrings.
        close = [item for item in scored if query in item[2].lower()]
    # Best match first; among equals the newest version (ALE/Pong-v5 before Pong-v4).
    close.sort(key=lambda item: (-item[0], -item[1], item[2]))
    return [name for _, _, name in close[:limit]]


def validate_env_id(env_id: str) -> None:
    """Raise :class:`ConfigError` with a one-line message if ``env_id`` is not registered.

    The message names the id and suggests close registered ids. Nothing of gymnasium's own
    errors (or tracebacks) leaks out: only the registry is consulted, no env is built.
    """
    if not isinstance(env_id, str) or not env_id.strip():
        raise ConfigError(f"env.id must be a non-empty gymnasium id, got {env_id!r}")
    ale = _ale_available()
    _register_rlperf_envs()
    module, name = _split_module(env_id)
    if module is not None:
        try:
            importlib.import_module(module)
        except Exception as exc:  # any import failure is the user's module, not our bug
            raise ConfigError(
                f"unknown environment id {env_id!r}: cannot import module {module!r} "
                f"({type(exc).__name__}: {exc})"
            ) from None
    if name in gymnasium.registry:
        return
    message = f"unknown environment id {env_id!r}"
    suggestions = _suggestions(name, list(gymnasium.registry))
    if suggestions:
        message += "; did you mean " + ", ".join(repr(s) for s in suggestions) + "?"
    if not ale and name.startswith("ALE/"):
        message += " (Atari games need the 'atari' extra: pip install 'rlperf[atari]')"
    raise ConfigError(message)


def make_env(
    cfg: EnvConfig, dim: int, seed: int, training: bool = True, index: int | None = None
) -> SingleEnv:
    """One env for ``cfg.id`` (see the module docstring for which knobs apply).

    ``dim`` is the Atari frame size (ignored otherwise); ``training=False`` builds an
    evaluation env (no episodic life, no reward clipping). ``index`` is the env's place
    among the run's envs, which ``cfg.fault_envs`` selects by. ``cfg.id`` must be
    registered: callers check it once (:func:`validate_env_id`), not once per env.
    """
    env: SingleEnv
    if is_atari(cfg.id):
        from rlperf.envs.atari import AtariEnv
        from rlperf.envs.montezuma import MontezumaEnv, is_montezuma

        # Montezuma's Revenge also reports the rooms each game visited.
        env = (MontezumaEnv if is_montezuma(cfg.id) else AtariEnv)(cfg, dim, seed, training)
    else:
        from rlperf.envs.classic import GymEnv

        env = GymEnv(dataclasses.replace(cfg, clip_rewards=False), seed, training)
    targeted = cfg.fault_envs is None or index in cfg.fault_envs
    if training and targeted and (cfg.fault_p_crash or cfg.fault_p_stall):
        from rlperf.envs.wrappers import CrashingEnv

        env = CrashingEnv(
            env,
            p_crash=cfg.fault_p_crash,
            p_stall=cfg.fault_p_stall,
            stall_time_s=cfg.fault_stall_time_s,
            at=cfg.fault_at,
            seed=seed,
        )
    return env


def make_vector_env(
    cfg: EnvConfig, dim: int, seed: int, training: bool = True, first_env: int = 0
) -> SyncVectorEnv:
    """``cfg.num_envs`` copies of :func:`make_env` in a :class:`SyncVectorEnv`; env i gets
    ``seed + i`` (the same seeds :meth:`SyncVectorEnv.reset` uses) and is the run's env
    ``first_env + i``."""
    validate_env_id(cfg.id)
    return SyncVectorEnv(
        [make_env(cfg, dim, seed + i, training, first_env + i) for i in range(cfg.num_envs)]
    )


def make_engine_envs(cfg: EnvConfig, dim: int, seed: int, first_env: int = 0) -> VectorEnv:
    """``cfg.num_envs`` envs stepped by ``cfg.engine`` in this process; env i gets ``seed + i``.

    The C++ engines are imported on demand: they are optional dependencies.
    """
    if cfg.engine == "envpool":
        from rlperf.envs.envpool_env import EnvPoolVectorEnv  # installed: checked

        return EnvPoolVectorEnv(cfg, dim, seed)
    if cfg.engine == "ale-vector":
        from rlperf.envs.ale_vector import AleVectorEnv

        return AleVectorEnv(cfg, dim, seed)
    return make_vector_env(cfg, dim, seed, first_env=first_env)


def make_env_slice(
    cfg: EnvConfig, dim: int, count: int, seed: int, first_env: int = 0
) -> VectorEnv:
    """:func:`make_engine_envs` for ``count`` of the run's envs, from env ``first_env`` on
    (one worker's share)."""
    return make_engine_envs(dataclasses.replace(cfg, num_envs=count), dim, seed, first_env)
