"""A fake env for sweep tests: CartPole that raises after a few steps, so a sweep point fails
at run time (after its config passed every check), the way a real crash does.

Importing this module registers ``FakeCrashingCartPole-v0``; a point selects it with
``env.id: tests.helpers.crashing_env:FakeCrashingCartPole-v0`` (gymnasium's module:id form).
"""

from __future__ import annotations

from typing import Any

import gymnasium
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

CRASH_AFTER_STEPS = 40


class FakeCrashingCartPole(CartPoleEnv):
    """CartPole whose ``step`` raises RuntimeError after ``CRASH_AFTER_STEPS`` steps."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.steps_taken = 0

    def step(self, action: Any) -> Any:
        self.steps_taken += 1
        if self.steps_taken > CRASH_AFTER_STEPS:
            raise RuntimeError(f"fake crash after {CRASH_AFTER_STEPS} steps")
        return super().step(action)


if "FakeCrashingCartPole-v0" not in gymnasium.registry:
    gymnasium.register(
        "FakeCrashingCartPole-v0",
        entry_point=f"{__name__}:FakeCrashingCartPole",
        max_episode_steps=500,
    )
