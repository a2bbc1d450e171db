"""Google Research Football itself behind gymnasium's API, when the ``gfootball`` package is
importable (``scripts/install_gfootball.sh`` builds it).

gfootball 2.10 speaks the old gym API (``reset() -> obs``, ``step() -> (obs, reward, done,
info)``) and needs numpy < 2 and gym 0.25, so it normally lives in its own virtual
environment; in an environment where it imports, :func:`register` adds
``rlperf/GFootballEmptyGoalClose-v0``: the real ``academy_empty_goal_close`` with
``simple115v2`` observations (the fixed-position layout of the in-repo game) and the
``scoring`` reward, so the same preset trains on either.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import gymnasium
import numpy as np

GFOOTBALL_ENV_ID = "rlperf/GFootballEmptyGoalClose-v0"
GAME_DURATION = 400


def gfootball_available() -> bool:
    """True when the ``gfootball`` package can be imported here."""
    return importlib.util.find_spec("gfootball") is not None


class GFootballEnv(gymnasium.Env):
    """One gfootball game converted to gymnasium's five-tuple API.

    gfootball reports ``done`` both when a goal or the ball leaving play ends an academy
    episode and when the scenario's duration runs out; the latter is a time limit, so it
    becomes ``truncated`` (learners bootstrap through it) and the rest ``terminated``.
    """

    metadata = {"render_modes": []}

    def __init__(self, env_name: str = "academy_empty_goal_close") -> None:
        import gfootball.env as football_env  # imported here: an optional, separate build

        self._env = football_env.create_environment(
            env_name=env_name,
            representation="simple115v2",
            rewards="scoring",
            stacked=False,
            render=False,
        )
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (115,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(int(self._env.action_space.n))
        self._steps = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        inner = getattr(self._env, "unwrapped", self._env)
        if seed is not None and hasattr(inner, "seed"):  # gfootball seeds its engine this way
            inner.seed(seed)
        self._steps = 0
        return np.asarray(self._env.reset(), dtype=np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        obs, reward, done, info = self._env.step(int(action))
        self._steps += 1
        truncated = bool(done) and self._steps >= GAME_DURATION and float(reward) == 0.0
        terminated = bool(done) and not truncated
        return np.asarray(obs, dtype=np.float32), float(reward), terminated, truncated, dict(info)

    def close(self) -> None:
        self._env.close()


def register() -> bool:
    """Register :data:`GFOOTBALL_ENV_ID` when gfootball is importable; returns whether it is."""
    if not gfootball_available():
        return False
    if GFOOTBALL_ENV_ID not in gymnasium.registry:
        gymnasium.register(
            GFOOTBALL_ENV_ID, entry_point="rlperf.envs.gfootball_adapter:GFootballEnv"
        )
    return True
