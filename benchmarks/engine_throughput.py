"""Env-only throughput of the Atari vector engines: agent steps per second, random actions.

Cases (8 envs each, default ``EnvConfig`` preprocessing: 84x84 grayscale, frame skip 4 with
max-pool, 4-frame stack, no-op/fire reset, episodic life, reward clipping):

* ``rlperf_sync``: rlperf's :class:`SyncVectorEnv` of :class:`AtariEnv` (one process).
* ``gymnasium_async``: gymnasium's ``AsyncVectorEnv`` (one subprocess per env) of
  ``AtariPreprocessing`` + ``FrameStackObservation`` — the reference of the issue.
* ``envpool_sync``: :class:`EnvPoolVectorEnv`, ``--threads`` C++ threads.
* ``envpool_async``: :class:`EnvPoolAsync`, batches of ``--batch`` envs (rows returned count).
* ``ale_sync``: :class:`AleVectorEnv` (ALE's C++ vectorizer), ``--threads`` threads.
* with ``--raw``: the bare ``envpool`` and ``AtariVectorEnv`` objects (no rlperf bookkeeping),
  to show what the wrappers cost.

Every case is built first, then the timed runs are interleaved (each round runs every case
once, in reversed order every other round), so a load change on a shared machine hits all
cases alike. One JSON line per case:
median and min/max steps/s over ``--repeats`` runs, and the median's ratio to
``gymnasium_async``.

    python benchmarks/engine_throughput.py --steps 4000 --repeats 5
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import statistics
import time
from collections.abc import Callable

import numpy as np

from rlperf.config.schema import EnvConfig
from rlperf.envs.ale_vector import AleVectorEnv, atari_rom_name
from rlperf.envs.make import make_vector_env

DIM = 84
Case = tuple[Callable[[], float], Callable[[], None]]
"""(run_once -> env steps per second, close)."""


def _vector_case(vec, num_envs: int, steps: int, seed: int) -> Case:
    """A case for anything with the SyncVectorEnv interface."""
    vec.reset(seed)
    n_actions = int(vec.single_action_space.n)
    rows = np.random.default_rng(seed).integers(0, n_actions, size=(steps // num_envs, num_envs))

    def run_once() -> float:
        step = vec.step
        start = time.perf_counter()
        for row in rows:
            step(row)
        return len(rows) * num_envs / (time.perf_counter() - start)

    return run_once, vec.close


def rlperf_sync(env_id: str, num_envs: int, steps: int, seed: int, **_: int) -> Case:
    cfg = EnvConfig(id=env_id, num_envs=num_envs)
    return _vector_case(make_vector_env(cfg, DIM, seed), num_envs, steps, seed)


def gymnasium_async(env_id: str, num_envs: int, steps: int, seed: int, **_: int) -> Case:
    import ale_py
    import gymnasium
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    def make_one() -> gymnasium.Env:
        gymnasium.register_envs(ale_py)
        env = gymnasium.make(env_id, frameskip=1, repeat_action_probability=0.0)
        return FrameStackObservation(AtariPreprocessing(env, screen_size=DIM), 4)

    envs = gymnasium.vector.AsyncVectorEnv([make_one] * num_envs)
    envs.reset(seed=seed)
    n_actions = int(envs.single_action_space.n)
    rows = np.random.default_rng(seed).integers(0, n_actions, size=(steps // num_envs, num_envs))

    def run_once() -> float:
        start = time.perf_counter()
        for row in rows:
            envs.step(row)
        return len(rows) * num_envs / (time.perf_counter() - start)

    return run_once, envs.close


def envpool_sync(env_id: str, num_envs: int, steps: int, seed: int, threads: int, **_) -> Case:
    from rlperf.envs.envpool_env import EnvPoolVectorEnv

    cfg = EnvConfig(id=env_id, num_envs=num_envs)
    vec = EnvPoolVectorEnv(cfg, DIM, seed, num_threads=threads)
    return _vector_case(vec, num_envs, steps, seed)


def envpool_async(
    env_id: str, num_envs: int, steps: int, seed: int, threads: int, batch: int, **_: int
) -> Case:
    from rlperf.envs.envpool_env import EnvPoolAsync

    cfg = EnvConfig(id=env_id, num_envs=num_envs)
    pool = EnvPoolAsync(cfg, DIM, seed, batch_size=batch, num_threads=threads)
    pool.reset(seed)
    rng = np.random.default_rng(seed)
    n_actions = int(pool.single_action_space.n)
    state = {"last": pool.recv()}  # the reply the next send answers

    def run_once() -> float:
        done = 0
        last = state["last"]
        start = time.perf_counter()
        while done < steps:
            pool.send(rng.integers(0, n_actions, size=len(last.env_ids)), last.env_ids)
            last = pool.recv()
            done += len(last.env_ids)
        rate = done / (time.perf_counter() - start)
        state["last"] = last
        return rate

    return run_once, pool.close


def ale_sync(env_id: str, num_envs: int, steps: int, seed: int, threads: int, **_: int) -> Case:
    cfg = EnvConfig(id=env_id, num_envs=num_envs)
    vec = AleVectorEnv(cfg, DIM, seed, num_threads=threads)
    return _vector_case(vec, num_envs, steps, seed)


def envpool_raw(env_id: str, num_envs: int, steps: int, seed: int, threads: int, **_) -> Case:
    """Bare EnvPool, next-step autoreset, no bookkeeping (same knobs as envpool_sync)."""
    import envpool

    from rlperf.envs.envpool_env import envpool_task_id
    from rlperf.envs.envpool_options import envpool_options

    cfg = EnvConfig(id=env_id, num_envs=num_envs)
    pool = envpool.make(
        envpool_task_id(env_id),
        env_type="gymnasium",
        num_envs=num_envs,
        batch_size=num_envs,
        num_threads=threads,
        seed=seed,
        **envpool_options(cfg, DIM, training=True),
    )
    pool.reset()
    rows = np.random.default_rng(seed).integers(
        0, pool.action_space.n, size=(steps // num_envs, num_envs)
    )
    rows = rows.astype(np.int32)

    def run_once() -> float:
        start = time.perf_counter()
        for row in rows:
            pool.step(row)
        return len(rows) * num_envs / (time.perf_counter() - start)

    return run_once, pool.close


def ale_raw(env_id: str, num_envs: int, steps: int, seed: int, threads: int, **_: int) -> Case:
    """Bare AtariVectorEnv with ALE-side life-loss flag and clipping (no bookkeeping)."""
    from ale_py.vector_env import AtariVectorEnv

    envs = AtariVectorEnv(
        game=atari_rom_name(env_id),
        num_envs=num_envs,
        num_threads=threads,
        episodic_life=False,
        life_loss_info=True,
        reward_clipping=True,
        autoreset_mode="SameStep",
    )
    envs.reset(seed=seed)
    rows = np.random.default_rng(seed).integers(
        0, envs.single_action_space.n, size=(steps // num_envs, num_envs)
    )

    def run_once() -> float:
        start = time.perf_counter()
        for row in rows:
            envs.step(row)
        return len(rows) * num_envs / (time.perf_counter() - start)

    return run_once, envs.close


def main() -> None:
    """Build the cases, run interleaved repeats, print one JSON line per case."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="ALE/Pong-v5")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2, help="C++ engine worker threads")
    parser.add_argument("--batch", type=int, default=4, help="EnvPool async batch size")
    parser.add_argument("--steps", type=int, default=4000, help="env steps per timed run")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--raw", action="store_true", help="also time the bare C++ engines")
    args = parser.parse_args()

    builders: dict[str, Callable[..., Case]] = {
        "rlperf_sync": rlperf_sync,
        "gymnasium_async": gymnasium_async,
    }
    has_envpool = importlib.util.find_spec("envpool") is not None
    if has_envpool:
        builders["envpool_sync"] = envpool_sync
        builders["envpool_async"] = envpool_async
    builders["ale_sync"] = ale_sync
    if args.raw:
        if has_envpool:
            builders["envpool_raw"] = envpool_raw
        builders["ale_raw"] = ale_raw

    knobs = {"threads": args.threads, "batch": args.batch}
    cases = {
        name: build(args.env_id, args.num_envs, args.steps, args.seed, **knobs)
        for name, build in builders.items()
    }
    for run_once, _ in cases.values():
        run_once()  # warm-up: page faults, lazy imports, subprocess start
    rates: dict[str, list[float]] = {name: [] for name in cases}
    names = list(cases)
    for round_index in range(args.repeats):
        # Order reversed every round so slow drift does not favour the cases that run first.
        for name in names if round_index % 2 == 0 else names[::-1]:
            rates[name].append(cases[name][0]())
    for _, close in cases.values():
        close()

    reference = statistics.median(rates["gymnasium_async"])
    for name, values in rates.items():
        median = statistics.median(values)
        print(
            json.dumps(
                {
                    "case": name,
                    "env_id": args.env_id,
                    "num_envs": args.num_envs,
                    "threads": args.threads
                    if name not in ("rlperf_sync", "gymnasium_async")
                    else None,
                    "batch": args.batch if name == "envpool_async" else args.num_envs,
                    "steps_per_s_median": round(median, 1),
                    "steps_per_s_min": round(min(values), 1),
                    "steps_per_s_max": round(max(values), 1),
                    "vs_gymnasium_async": round(median / reference, 2),
                    "repeats": len(values),
                    "steps": args.steps,
                    "python": platform.python_version(),
                }
            ),
            flush=True,
        )
    if not has_envpool:
        print(json.dumps({"case": "envpool_*", "skipped": "envpool is not installed"}))


if __name__ == "__main__":
    main()
