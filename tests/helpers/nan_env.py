"""A fake env for NaN-guard tests: CartPole whose reward turns NaN at one step.

Importing this module registers ``FakeNaNRewardCartPole-v0``; a run selects it with
``--env tests.helpers.nan_env:FakeNaNRewardCartPole-v0`` (gymnasium's module:id form).
"""

from __future__ import annotations

from typing import Any

import gymnasium
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

NAN_AT_STEP = 150


class FakeNaNRewardCartPole(CartPoleEnv):
    """CartPole whose ``NAN_AT_STEP``-th step (counted over the env's life) rewards NaN."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.steps_taken = 0

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = super().step(action)
        self.steps_taken += 1
        if self.steps_taken == NAN_AT_STEP:
            reward = float("nan")
        return obs, reward, terminated, truncated, info


gymnasium.register(
    "FakeNaNRewardCartPole-v0", entry_point=FakeNaNRewardCartPole, max_episode_steps=500
)
