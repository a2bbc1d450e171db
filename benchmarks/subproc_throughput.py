"""SyncVectorEnv against SubprocVectorEnv: Atari env steps per second with random actions.

Cases: ``sync`` (all envs stepped in this process) and ``subproc_w<W>`` (the same envs split
over W worker processes, frames through shared memory) for each ``--workers`` value. Actions
are drawn in the parent beforehand, as a runner would hand them over; no learner runs. The
cases are timed in interleaved rounds (sync, w1, w2, sync, w1, w2, ...) so that a change in
machine load hits every case alike. Each case prints one JSON line with the median and the
spread (min, max) of env steps/s (vector steps x num_envs) over ``--repeats`` rounds.

    python benchmarks/subproc_throughput.py --steps 2000 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import numpy as np

from rlperf.config.schema import EnvConfig
from rlperf.envs.make import make_vector_env
from rlperf.envs.subproc import SubprocVectorEnv, make_subproc_vector_env
from rlperf.envs.vector import SyncVectorEnv

DIM = 84
VecEnv = SyncVectorEnv | SubprocVectorEnv


def _time_steps(vec: VecEnv, actions: np.ndarray) -> float:
    """Env steps/s of stepping ``vec`` through every row of ``actions``."""
    step = vec.step
    start = time.perf_counter()
    for row in actions:
        step(row)
    return actions.size / (time.perf_counter() - start)


def main() -> None:
    """Build every case, time them in interleaved rounds, print one JSON line per case."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="ALE/Pong-v5")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=2000, help="env steps per timed run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    cfg = EnvConfig(id=args.env_id, num_envs=args.num_envs)
    vec_steps = max(1, args.steps // args.num_envs)
    rng = np.random.default_rng(args.seed)
    cases: dict[str, VecEnv] = {"sync": make_vector_env(cfg, DIM, seed=args.seed)}
    start_s: dict[str, float] = {}
    for w in args.workers:
        t0 = time.perf_counter()
        cases[f"subproc_w{w}"] = make_subproc_vector_env(cfg, DIM, seed=args.seed, num_workers=w)
        start_s[f"subproc_w{w}"] = time.perf_counter() - t0
    try:
        n_actions = int(cases["sync"].single_action_space.n)
        for vec in cases.values():
            vec.reset(seed=args.seed)
            # Warm-up: first-touch page faults, lazy imports, caches.
            _time_steps(vec, rng.integers(0, n_actions, size=(20, args.num_envs)))
        rates: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.repeats):
            for name, vec in cases.items():
                actions = rng.integers(0, n_actions, size=(vec_steps, args.num_envs))
                rates[name].append(_time_steps(vec, actions))
    finally:
        for vec in cases.values():
            vec.close()

    sync_median = statistics.median(rates["sync"])
    for name, values in rates.items():
        median = statistics.median(values)
        record = {
            "case": name,
            "env_id": args.env_id,
            "num_envs": args.num_envs,
            "steps_per_s_median": round(median, 1),
            "steps_per_s_min": round(min(values), 1),
            "steps_per_s_max": round(max(values), 1),
            "speedup_vs_sync": round(median / sync_median, 3),
            "repeats": len(values),
            "steps": vec_steps * args.num_envs,
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        }
        if name in start_s:
            record["start_s"] = round(start_s[name], 2)
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
