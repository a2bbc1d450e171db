"""Any non-Atari gymnasium environment (CartPole-v1, Acrobot-v1, ...) behind :class:`SingleEnv`."""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import gymnasium
import numpy as np

from rlperf.config.schema import EnvConfig
from rlperf.core.errors import ConfigError
from rlperf.envs.base import EnvState, GameEnd, check_state_kind, restore_rng, rng_state

_KIND = "gym"
_CONFIG_DEFAULT_MAX_STEPS = next(
    f.default for f in dataclasses.fields(EnvConfig) if f.name == "max_episode_steps"
)


def resolve_max_episode_steps(cfg: EnvConfig, registered: int | None) -> int | None:
    """Step limit of a non-Atari env.

    The EnvConfig default (27000 = 108k Atari frames) is an Atari notion, so while the user
    leaves it untouched the limit registered with gymnasium wins (CartPole-v1: 500) and the
    default applies only to envs that register none. Any other value is the user's choice and
    applies as given; unset (None) means no limit at all.
    """
    if cfg.max_episode_steps == _CONFIG_DEFAULT_MAX_STEPS and registered is not None:
        return registered
    return cfg.max_episode_steps


class GymEnv:
    """A gymnasium env with a Box observation and a Discrete action space; a :class:`SingleEnv`.

    Observations are ``float32`` arrays. Reward clipping follows ``cfg.clip_rewards`` (off
    when ``training`` is False); the factory in :mod:`rlperf.envs.make` never asks for it.
    Episodes and true games are the same thing here, so every episode end reports its
    return and length. Snapshots are exact for classic-control style envs that keep their
    whole dynamic state in ``unwrapped.state``; other envs raise ``NotImplementedError``.
    """

    def __init__(self, cfg: EnvConfig, seed: int, training: bool = True) -> None:
        """Create ``cfg.id``; the first :meth:`reset` without a seed uses ``seed``."""
        self.env_id = cfg.id
        name = cfg.id
        if ":" in name:
            # gymnasium's "module:Env-v0" form: importing the module registers the env.
            module, name = name.split(":", 1)
            importlib.import_module(module)
        spec = gymnasium.spec(name)
        limit = resolve_max_episode_steps(cfg, spec.max_episode_steps)
        # -1 tells gymnasium not to add the TimeLimit wrapper even if the spec registers one.
        self._env = gymnasium.make(
            name, max_episode_steps=-1 if limit is None else limit, disable_env_checker=True
        )
        obs_space, act_space = self._env.observation_space, self._env.action_space
        if not isinstance(obs_space, gymnasium.spaces.Box):
            raise ConfigError(
                f"{cfg.id}: only Box observation spaces are supported, got {obs_space}"
            )
        if not isinstance(act_space, gymnasium.spaces.Discrete):
            raise ConfigError(
                f"{cfg.id}: only Discrete action spaces are supported, got {act_space}"
            )
        self.observation_space = gymnasium.spaces.Box(
            obs_space.low.astype(np.float32), obs_space.high.astype(np.float32), dtype=np.float32
        )
        self.action_space = act_space
        self._action_start = int(act_space.start)
        self._time_limit = _find_time_limit(self._env)
        self._clip = cfg.clip_rewards and training
        self._next_seed: int | None = seed
        self._obs = np.zeros(self.observation_space.shape, dtype=np.float32)
        self._return = 0.0
        self._length = 0
        self._needs_reset = True
        self._has_reset = False

    def reset(self, seed: int | None = None) -> np.ndarray:
        """Start a new episode (``seed`` re-seeds the env's generator)."""
        if seed is None:
            seed, self._next_seed = self._next_seed, None
        else:
            self._next_seed = None
        obs, _ = self._env.reset(seed=seed)
        self._obs = np.asarray(obs, dtype=np.float32)
        self._return = 0.0
        self._length = 0
        self._needs_reset = False
        self._has_reset = True
        return self._obs

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, GameEnd | None]:
        """One env step; see :class:`SingleEnv` for the result."""
        if self._needs_reset:
            raise RuntimeError("GymEnv.step() called before reset() / after the episode ended")
        obs, reward, terminated, truncated, _ = self._env.step(self._action_start + int(action))
        reward = float(reward)
        self._obs = np.asarray(obs, dtype=np.float32)
        self._return += reward
        self._length += 1
        game_end: GameEnd | None = None
        if terminated or truncated:
            game_end = (self._return, self._length)
            self._needs_reset = True
        if self._clip:
            reward = float(np.sign(reward))
        return self._obs, reward, bool(terminated), bool(truncated), game_end

    def get_state(self) -> EnvState:
        """Exact snapshot of a classic-control env (simulator state, RNG, step counters)."""
        env = self._env.unwrapped
        sim_state: Any = getattr(env, "state", None)
        if self._has_reset and sim_state is None:
            raise NotImplementedError(self._unsupported())
        state: EnvState = {
            "kind": _KIND,
            "env_id": self.env_id,
            "obs": self._obs.copy(),
            "sim_state": None if sim_state is None else np.array(sim_state),
            "steps_beyond_terminated": getattr(env, "steps_beyond_terminated", None),
            "elapsed_steps": None if self._time_limit is None else self._time_limit._elapsed_steps,
            "rng": rng_state(env.np_random),
            "episode_return": self._return,
            "episode_length": self._length,
            "needs_reset": self._needs_reset,
            "has_reset": self._has_reset,
            "next_seed": self._next_seed,
        }
        return state

    def set_state(self, state: EnvState) -> None:
        """Restore a :meth:`get_state` snapshot taken from an env with the same config."""
        check_state_kind(state, _KIND, self.env_id)
        env = self._env.unwrapped
        if state["has_reset"] and not self._has_reset:
            # Satisfies gymnasium's reset-before-step check and creates the attributes some
            # envs only set in reset(); everything it changes is overwritten below.
            self._env.reset()
            self._has_reset = True
        if state["sim_state"] is not None:
            if not hasattr(env, "state"):
                raise NotImplementedError(self._unsupported())
            env.state = np.array(state["sim_state"])
        if state["steps_beyond_terminated"] is not None or hasattr(env, "steps_beyond_terminated"):
            env.steps_beyond_terminated = state["steps_beyond_terminated"]
        if self._time_limit is not None:
            self._time_limit._elapsed_steps = state["elapsed_steps"]
        env.np_random = restore_rng(state["rng"])
        self._obs = np.array(state["obs"], dtype=np.float32)
        self._return = float(state["episode_return"])
        self._length = int(state["episode_length"])
        self._needs_reset = bool(state["needs_reset"])
        self._next_seed = state["next_seed"]

    def close(self) -> None:
        """Close the underlying gymnasium env."""
        self._env.close()

    def _unsupported(self) -> str:
        return (
            f"{self.env_id}: exact env snapshots are only supported for envs that keep their "
            "whole dynamic state in `unwrapped.state` (gymnasium's classic-control envs)"
        )


def _find_time_limit(env: gymnasium.Env) -> gymnasium.wrappers.TimeLimit | None:
    """The TimeLimit wrapper in the chain, whose step counter is part of an exact snapshot."""
    while isinstance(env, gymnasium.Wrapper):
        if isinstance(env, gymnasium.wrappers.TimeLimit):
            return env
        env = env.env
    return None
