"""The acting loop alone: a preset's policy forward and its C++ vector env, step after step,
timed with the forward on one intra-op thread or on all of them.

An env step of ALE's vectorizer inside training can take far longer than the same step
alone (``benchmarks/engine_throughput.py``). This isolates the acting loop of a rollout
(forward at the learner's precision, sample, env step, copy of the frames) from the
learner, so the forward's threads are the only thing that changes between the cases.

Cases are interleaved (each round runs every case, in reversed order every other round)
on one env and one network. One JSON line per case: medians over the rounds of the env
step and the forward (ms per vector step) and of the acting loop's steps/s.

    python benchmarks/acting_threads.py --preset atari-fast --rounds 5
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import torch

from rlperf.config.load import apply_dict, load_preset
from rlperf.config.schema import RunConfig
from rlperf.core.resources import intra_op_threads
from rlperf.envs.ale_vector import AleVectorEnv
from rlperf.models.catalog import build_model, frame_dim
from rlperf.runners.collector import act_precision


def acting_round(
    envs: AleVectorEnv, policy: torch.nn.Module, obs: torch.Tensor, threads: int, steps: int
) -> tuple[float, float]:
    """Seconds spent in the env step and in the forward over ``steps`` vector steps, on
    ``threads`` intra-op threads (set around the whole loop, as the collector sets
    ``runner.act_threads`` around a rollout)."""
    env_s = forward_s = 0.0
    with intra_op_threads(threads):
        for _ in range(steps):
            start = time.perf_counter()
            with torch.no_grad(), act_precision("bf16", torch.device("cpu")):
                actions, _, _ = policy.act(obs)
            mid = time.perf_counter()
            result = envs.step(actions.numpy())
            obs.copy_(torch.from_numpy(result.obs))
            env_s += time.perf_counter() - mid
            forward_s += mid - start
    return env_s, forward_s


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="atari-fast")
    p.add_argument("--env-id", default="ALE/Pong-v5")
    p.add_argument("--steps", type=int, default=256, help="vector steps per case and round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--act-threads", default="all,1", help="comma list; 'all': the learner's")
    args = p.parse_args()
    cfg = RunConfig()
    apply_dict(cfg, load_preset(args.preset), args.preset)
    cfg.env.id = args.env_id
    dim = frame_dim(cfg.env, cfg.model)
    envs = AleVectorEnv(cfg.env, dim, seed=1)
    obs = torch.from_numpy(envs.reset(seed=1)).clone()
    policy = build_model(cfg.model, tuple(obs.shape[1:]), envs.single_action_space.n)
    policy.eval()
    cases = {
        name: torch.get_num_threads() if name == "all" else int(name)
        for name in args.act_threads.split(",")
    }
    for threads in cases.values():  # warm-up: kernel selection, the env's first games
        acting_round(envs, policy, obs, threads, 32)
    env_ms: dict[str, list[float]] = {c: [] for c in cases}
    forward_ms: dict[str, list[float]] = {c: [] for c in cases}
    rates: dict[str, list[float]] = {c: [] for c in cases}
    for r in range(args.rounds):
        for name in list(cases) if r % 2 == 0 else list(cases)[::-1]:
            env_s, forward_s = acting_round(envs, policy, obs, cases[name], args.steps)
            env_ms[name].append(1e3 * env_s / args.steps)
            forward_ms[name].append(1e3 * forward_s / args.steps)
            rates[name].append(args.steps * envs.num_envs / (env_s + forward_s))
    envs.close()
    base = statistics.median(rates[next(iter(cases))])
    for name, threads in cases.items():
        print(
            json.dumps(
                {
                    "case": f"act_threads={name}",
                    "threads": threads,
                    "preset": args.preset,
                    "machine": platform.processor() or platform.machine(),
                    "env_step_ms": round(statistics.median(env_ms[name]), 3),
                    "forward_ms": round(statistics.median(forward_ms[name]), 3),
                    "steps_per_s": round(statistics.median(rates[name])),
                    "min": round(min(rates[name])),
                    "max": round(max(rates[name])),
                    "n": len(rates[name]),
                    "ratio_to_first": round(statistics.median(rates[name]) / base, 3),
                }
            )
        )


if __name__ == "__main__":
    main()
