"""Env wrappers for fault injection: an env that crashes or stalls on purpose.

``CrashingEnv`` wraps any :class:`~rlperf.envs.base.SingleEnv`. Each ``step`` (and/or
``reset``) raises with probability ``p_crash`` and sleeps ``stall_time_s`` with probability
``p_stall``, drawn from its own generator seeded with the env's seed, so a run's faults are
reproducible. ``make_env`` applies it to every gymnasium-engine env when ``env.fault_p_crash``
or ``env.fault_p_stall`` is above 0: a run's robustness (worker restarts, stall timeouts,
clean stops) can be tried from any config, e.g.
``rlperf train --preset cartpole --runner subprocess --num-workers 2 env.fault_p_crash=0.001``.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from rlperf.config.choices import FAULT_SITES
from rlperf.envs.base import EnvState, SingleEnv

_FAULT_STREAM = 0xFA17  # keeps the fault draws apart from the env's own random streams


class InjectedCrash(RuntimeError):
    """The failure a :class:`CrashingEnv` raises (a real exception, only its cause is fake)."""


class CrashingEnv:
    """``env`` with injected crashes and stalls at ``at`` (step, reset or both)."""

    def __init__(
        self,
        env: SingleEnv,
        *,
        p_crash: float,
        p_stall: float,
        stall_time_s: float,
        at: str,
        seed: int,
    ) -> None:
        if at not in FAULT_SITES:
            raise ValueError(f"unknown fault site {at!r}; valid: {', '.join(FAULT_SITES)}")
        self.env = env
        self.p_crash, self.p_stall, self.stall_time_s, self.at = p_crash, p_stall, stall_time_s, at
        self._rng = np.random.default_rng([seed, _FAULT_STREAM])
        self.calls = 0
        self.observation_space = env.observation_space
        self.action_space = env.action_space

    def _maybe_fail(self, site: str) -> None:
        self.calls += 1
        if self.at not in (site, "both"):
            return
        if self.p_stall and self._rng.random() < self.p_stall:
            time.sleep(self.stall_time_s)  # a hung emulator: the runner's timeout must notice
        if self.p_crash and self._rng.random() < self.p_crash:
            raise InjectedCrash(f"injected crash at {site} call {self.calls} (env.fault_p_crash)")

    def reset(self, seed: int | None = None) -> np.ndarray:
        if seed is not None:  # a restarted worker re-seeds its envs: new faults too
            self._rng = np.random.default_rng([seed, _FAULT_STREAM])
        self._maybe_fail("reset")
        return self.env.reset(seed=seed)

    def step(self, action: int) -> Any:
        self._maybe_fail("step")
        return self.env.step(action)

    def get_state(self) -> EnvState:
        return self.env.get_state()

    def set_state(self, state: EnvState) -> None:
        self.env.set_state(state)

    def close(self) -> None:
        self.env.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)  # anything else the wrapped env offers
