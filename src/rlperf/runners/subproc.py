"""The synchronous runner over env worker processes (``runner.name=subprocess``).

The in-process runner's loop, with the envs stepped by ``SubprocVectorEnv`` workers, which
this runner restarts when one fails.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

import numpy as np

from rlperf.config.schema import RunnerConfig
from rlperf.core.errors import WorkerError
from rlperf.core.protocols import Algorithm
from rlperf.core.types import Rollout
from rlperf.envs.subproc import SubprocVectorEnv
from rlperf.envs.vector import VectorEnv
from rlperf.runners.facts import RunnerFacts
from rlperf.runners.inproc import InProcRunner
from rlperf.runners.supervisor import RestartBudget


class SubprocRunner(InProcRunner):
    """The synchronous runner over envs stepped in worker processes (``SubprocVectorEnv``).

    Observations land in shared memory that the rollout copies once; the workers emulate
    while this process waits, so it pays off when env stepping, not learning, dominates.
    """

    name = "subprocess"
    # the C++ engines run their own thread pools: behind worker processes they would only
    # add copies
    facts: ClassVar[RunnerFacts] = RunnerFacts(
        frozenset({"rollout"}),
        0,
        frozenset({"gymnasium"}),
        builds_own_envs=False,
        data_parallel=True,
        compile=True,
        rnd=True,
    )

    def __init__(self, cfg: RunnerConfig, envs: VectorEnv, algo: Algorithm, *, seed: int) -> None:
        if not isinstance(envs, SubprocVectorEnv):
            raise TypeError(f"the subprocess runner steps a SubprocVectorEnv, got {type(envs)}")
        super().__init__(cfg, envs, algo, seed=seed)
        self.workers_envs = envs  # the same envs, typed: worker restarts, pids, live count
        self.seed = seed
        self.budget = RestartBudget(cfg)

    def _recover(self, exc: WorkerError, t: int, buf: Rollout) -> np.ndarray:
        """Restart the failed worker (runner.restart_failed_workers) and end step ``t``.

        The step that failed is treated as ended for EVERY env: reward 0 and done 1 at
        ``t`` (no bootstrap across it), and the next observations are the current buffer:
        the restarted worker's envs start new episodes, the others continue from where their
        completed (but discarded) step left them. Cost: one lost transition per env, and the
        episode ends reported by that step are not counted. The restart seed,
        ``seed + restarts * num_envs``, gives every restart its own env seeds.
        """
        w = getattr(exc, "worker_index", None)
        if w is None or not self.budget.take(f"env worker {w}", exc):
            raise exc
        seed = self.seed + self.budget.used * self.envs.num_envs
        obs = self.workers_envs.restart_worker(w, seed=seed)
        buf.rewards_TN[t] = 0.0
        buf.dones_TN[t] = 1.0
        buf.truncation_values_TN[t] = 0.0
        return obs

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), **self.budget.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.budget.load_state_dict(state)  # the budget is per run: it carries over a resume
        super().load_state_dict(state)

    def process_resources(self) -> list[dict[str, Any]]:
        # Env workers run no torch; their thread pools are capped at 1 (subproc_worker).
        out = []
        for w, pid in enumerate(self.workers_envs.worker_pids):
            try:
                affinity: list[int] | None = sorted(os.sched_getaffinity(pid))
            except (OSError, TypeError):  # the worker is gone (or never started)
                affinity = None
            out.append({"role": "env_worker", "index": w, "pid": pid, "cpu_affinity": affinity})
        return out

    def worker_metrics(self) -> dict[str, float]:
        return {
            "sys/live_workers": float(self.workers_envs.live_workers),
            "sys/worker_restarts": float(self.budget.used),
        }
