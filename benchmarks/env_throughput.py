"""Raw Atari env throughput: agent steps per second with random actions, no learner.

Cases: a single :class:`AtariEnv` and a :class:`SyncVectorEnv` of 8, both with the default
``EnvConfig`` preprocessing (84x84 grayscale, frame skip 4 with max-pool, 4-frame stack,
no-op/fire reset, episodic life, reward clipping). ``--reference`` adds gymnasium's own
``AtariPreprocessing`` + ``FrameStackObservation`` chain for comparison. Each case prints one
JSON line with the median and spread (min, max) of steps/s over ``--repeats`` timed runs.

    python benchmarks/env_throughput.py --steps 2000 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable

import numpy as np

from rlperf.config.schema import EnvConfig
from rlperf.envs.atari import AtariEnv
from rlperf.envs.make import make_vector_env

DIM = 84


def _summary(case: str, rates: list[float], **extra: object) -> str:
    return json.dumps(
        {
            "case": case,
            "steps_per_s_median": round(statistics.median(rates), 1),
            "steps_per_s_min": round(min(rates), 1),
            "steps_per_s_max": round(max(rates), 1),
            "repeats": len(rates),
            **extra,
            "python": platform.python_version(),
        }
    )


def _repeat(run_once: Callable[[], float], repeats: int) -> list[float]:
    run_once()  # warm-up: first-touch page faults, lazy imports, ROM caches
    return [run_once() for _ in range(repeats)]


def bench_single(env_id: str, steps: int, repeats: int, seed: int) -> str:
    """Steps/s of one AtariEnv, resets included as they happen."""
    env = AtariEnv(EnvConfig(id=env_id), DIM, seed=seed)
    actions = np.random.default_rng(seed).integers(0, env.action_space.n, size=steps).tolist()
    env.reset()

    def run_once() -> float:
        step, reset = env.step, env.reset
        start = time.perf_counter()
        for action in actions:
            _, _, terminated, truncated, _ = step(action)
            if terminated or truncated:
                reset()
        return steps / (time.perf_counter() - start)

    rates = _repeat(run_once, repeats)
    env.close()
    return _summary("rlperf_single", rates, env_id=env_id, steps=steps)


def bench_vector(env_id: str, num_envs: int, steps: int, repeats: int, seed: int) -> str:
    """Env steps/s (vector steps x num_envs) of a SyncVectorEnv."""
    vec = make_vector_env(EnvConfig(id=env_id, num_envs=num_envs), DIM, seed=seed)
    n_actions = int(vec.single_action_space.n)
    vec_steps = max(1, steps // num_envs)
    actions = np.random.default_rng(seed).integers(0, n_actions, size=(vec_steps, num_envs))
    vec.reset(seed=seed)

    def run_once() -> float:
        start = time.perf_counter()
        for row in actions:
            vec.step(row)
        return vec_steps * num_envs / (time.perf_counter() - start)

    rates = _repeat(run_once, repeats)
    vec.close()
    return _summary(
        f"rlperf_sync_vector_{num_envs}", rates, env_id=env_id, steps=vec_steps * num_envs
    )


def bench_gymnasium_reference(env_id: str, steps: int, repeats: int, seed: int) -> str:
    """gymnasium's AtariPreprocessing + FrameStackObservation, the usual wrapper chain."""
    import ale_py
    import gymnasium
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    gymnasium.register_envs(ale_py)
    env = gymnasium.make(env_id, frameskip=1, repeat_action_probability=0.0)
    env = FrameStackObservation(AtariPreprocessing(env, screen_size=DIM), 4)
    actions = np.random.default_rng(seed).integers(0, env.action_space.n, size=steps).tolist()
    env.reset(seed=seed)

    def run_once() -> float:
        start = time.perf_counter()
        for action in actions:
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                env.reset()
        return steps / (time.perf_counter() - start)

    rates = _repeat(run_once, repeats)
    env.close()
    return _summary("gymnasium_reference_single", rates, env_id=env_id, steps=steps)


def main() -> None:
    """Run the cases and print one JSON line each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="ALE/Pong-v5")
    parser.add_argument("--steps", type=int, default=2000, help="env steps per timed run")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reference", action="store_true", help="also time gymnasium's chain")
    args = parser.parse_args()
    print(bench_single(args.env_id, args.steps, args.repeats, args.seed), flush=True)
    print(bench_vector(args.env_id, args.num_envs, args.steps, args.repeats, args.seed), flush=True)
    if args.reference:
        print(bench_gymnasium_reference(args.env_id, args.steps, args.repeats, args.seed))


if __name__ == "__main__":
    main()
