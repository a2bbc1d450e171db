"""A picklable recipe for one worker's share of the run's envs.

Worker processes (decoupled actors, the play process, Hogwild workers) and Ray actors build
their envs themselves, from ``make_env_slice(count, seed, first_env)``: ``count`` envs, env
i seeded ``seed + i``, which are the run's envs ``first_env`` .. ``first_env + count - 1``
(fault injection's ``env.fault_envs`` names envs by that index).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rlperf.envs.vector import VectorEnv

EnvSliceFactory = Callable[[int, int, int], VectorEnv]
"""``(count, seed, first_env) -> VectorEnv``: :func:`rlperf.envs.make.make_env_slice` bound
to the run's env config and frame size."""


@dataclass
class EnvSlice:
    """A picklable call that builds one worker's envs."""

    factory: EnvSliceFactory
    count: int
    seed: int
    first_env: int

    def __call__(self) -> VectorEnv:
        return self.factory(self.count, self.seed, self.first_env)
