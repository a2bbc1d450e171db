"""Fake env failures for fault tests (module-level so that spawned processes can import them)."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlperf.config.schema import EnvConfig
from rlperf.envs.make import make_env_slice
from rlperf.envs.vector import VecStep, VectorEnv


class FakeFailingVectorEnv:
    """A real vector env whose ``step`` raises ValueError at its ``raise_at``-th call."""

    def __init__(self, envs: VectorEnv, raise_at: int) -> None:
        self.envs = envs
        self.raise_at = raise_at
        self.steps = 0
        self.num_envs = envs.num_envs
        self.single_observation_space = envs.single_observation_space
        self.single_action_space = envs.single_action_space

    def reset(self, seed: int) -> np.ndarray:
        return self.envs.reset(seed)

    def step(self, actions: np.ndarray) -> VecStep:
        self.steps += 1
        if self.steps == self.raise_at:
            raise ValueError(f"injected failure at step {self.raise_at}")
        return self.envs.step(actions)

    def get_state(self) -> list[Any]:
        return self.envs.get_state()

    def set_state(self, states: list[Any]) -> np.ndarray:
        return self.envs.set_state(states)

    def close(self) -> None:
        self.envs.close()


def cartpole_failing_once(
    count: int, seed: int, first_env: int, *, raise_at: int, failing_seed: int
) -> VectorEnv:
    """CartPole envs for one actor; those built with ``failing_seed`` (the actor's first
    life, not its restarts) raise at step ``raise_at``."""
    envs = make_env_slice(EnvConfig(id="CartPole-v1"), 84, count, seed, first_env)
    return FakeFailingVectorEnv(envs, raise_at) if seed == failing_seed else envs
