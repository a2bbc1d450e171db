"""Env-only ceiling of a training command: how many agent steps per second its vector env
gives with random actions and nothing else (no network, no learner).

The envs are the ones ``rlperf train`` would build for the same arguments (the same engine,
preprocessing, number of envs and engine threads), all in this one process (a decoupled
run spreads them over its actor processes), so a run's SPS divided by this figure is the
share of the env stepping's own speed that training keeps. One JSON line:

    python benchmarks/gpu/env_ceiling.py --seconds 5 --repeats 3 -- \
        --preset atari-fast-gpu --env ALE/Pong-v5 env.num_envs=64

prints ``{"steps_per_s": median, "min": ..., "max": ..., "num_envs": ..., "threads": ...}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np

from rlperf.cli import build_train_config
from rlperf.envs.make import make_engine_envs
from rlperf.models.catalog import frame_dim


def measure(train_argv: list[str], seconds: float, repeats: int) -> dict[str, object]:
    """Median, min and max env steps/s over ``repeats`` runs of ``seconds`` each."""
    cfg, _ = build_train_config(train_argv)
    # all the run's envs in this one process, whichever runner would spread them over actors
    envs = make_engine_envs(cfg.env, frame_dim(cfg.env, cfg.model), cfg.seed)
    try:
        envs.reset(cfg.seed)
        n = envs.num_envs
        rng = np.random.default_rng(cfg.seed)
        actions = rng.integers(0, int(envs.single_action_space.n), size=(256, n))
        for row in actions[:8]:  # first steps: caches, thread start
            envs.step(row)
        rates = []
        for _ in range(repeats):
            steps, start = 0, time.perf_counter()
            while time.perf_counter() - start < seconds:
                envs.step(actions[steps % len(actions)])
                steps += 1
            rates.append(steps * n / (time.perf_counter() - start))
    finally:
        envs.close()
    return {
        "steps_per_s": statistics.median(rates),
        "min": min(rates),
        "max": max(rates),
        "num_envs": n,
        "engine": cfg.env.engine,
        "threads": getattr(envs, "num_threads", None),
        "cores": len(os.sched_getaffinity(0)),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=5.0, help="seconds per timed run")
    p.add_argument("--repeats", type=int, default=3, help="timed runs")
    p.add_argument("train_argv", nargs=argparse.REMAINDER, help="-- then rlperf train arguments")
    args = p.parse_args()
    argv = args.train_argv[1:] if args.train_argv[:1] == ["--"] else args.train_argv
    print(json.dumps(measure(argv, args.seconds, args.repeats)))


if __name__ == "__main__":
    main()
