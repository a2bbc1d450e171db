"""Learner-only throughput: samples/s of one PPO update on a synthetic Pong-shaped batch.

No env is stepped: a fixed batch of random uint8 frames (num_envs x num_steps) goes through
the real PPO.update with the real gradient step, so this is the ceiling the learner sets on
end-to-end SPS. Variants (precision, memory layout, model) are interleaved round by round so
machine drift hits all alike; medians and min-max spread are printed, plus the ratio of
each variant to the first.

    python benchmarks/learner_throughput.py --model nature --variants fp32,fp32-cl,bf16-cl
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from rlperf.algos.ppo import PPO
from rlperf.config.load import apply_dict, load_preset
from rlperf.config.schema import ModelConfig, RunConfig
from rlperf.core.optim import LocalGradientStep
from rlperf.core.resources import retain_freed_memory
from rlperf.core.types import Progress, Rollout
from rlperf.models.catalog import MODELS, build_model

VARIANTS = {
    "fp32": ("fp32", False),
    "fp32-cl": ("fp32", True),
    "bf16": ("bf16", False),
    "bf16-cl": ("bf16", True),
}


def make_batch(cfg: RunConfig, dim: int, actions: int) -> Rollout:
    g = torch.Generator().manual_seed(0)
    T, N = cfg.ppo.num_steps, cfg.env.num_envs
    return Rollout(
        obs_TN=torch.randint(
            0, 255, (T, N, cfg.env.frame_stack, dim, dim), dtype=torch.uint8, generator=g
        ),
        actions_TN=torch.randint(0, actions, (T, N), generator=g),
        logprobs_TN=torch.full((T, N), -1.79),
        values_TN=torch.randn(T, N, generator=g),
        rewards_TN=torch.randn(T, N, generator=g).sign() * (torch.rand(T, N, generator=g) < 0.02),
        dones_TN=(torch.rand(T, N, generator=g) < 0.001).float(),
        next_obs_N=torch.randint(
            0, 255, (N, cfg.env.frame_stack, dim, dim), dtype=torch.uint8, generator=g
        ),
        truncation_values_TN=torch.zeros(T, N),
    )


def build(
    cfg: RunConfig, model: str, variant: str, dim: int, actions: int
) -> tuple[PPO, LocalGradientStep]:
    precision, channels_last = VARIANTS[variant]
    torch.manual_seed(0)
    policy = build_model(ModelConfig(name=model), (cfg.env.frame_stack, dim, dim), actions)
    if channels_last:
        policy.to(memory_format=torch.channels_last)
    algo = PPO(cfg.ppo, policy, seed=0)
    step = LocalGradientStep(
        policy, algo.optimizer_spec(), device=torch.device("cpu"), precision=precision
    )
    return algo, step


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="cleanrl-atari")
    p.add_argument("--model", default="nature")
    p.add_argument("--variants", default="fp32,fp32-cl,bf16,bf16-cl")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--no-retain-memory", action="store_true", help="leave glibc's malloc defaults")
    args = p.parse_args()
    if not args.no_retain_memory:
        retain_freed_memory()
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = RunConfig()
    apply_dict(cfg, load_preset(args.preset), args.preset)
    dim = MODELS[args.model if not args.model.isdigit() else f"thesis-{args.model}"].input_dim or 84
    actions = 6
    batch = make_batch(cfg, dim, actions)
    variants = args.variants.split(",")
    built = {v: build(cfg, args.model, v, dim, actions) for v in variants}
    samples = cfg.env.num_envs * cfg.ppo.num_steps * cfg.ppo.update_epochs
    for algo, step in built.values():  # warm-up: kernel selection, allocator
        algo.update(batch, step, Progress(0, 0, 1.0))
    results: dict[str, list[float]] = {v: [] for v in variants}
    for r in range(args.rounds):
        order = variants if r % 2 == 0 else variants[::-1]
        for v in order:
            algo, step = built[v]
            start = time.perf_counter()
            algo.update(batch, step, Progress(0, 0, 1.0))
            results[v].append(samples / (time.perf_counter() - start))
    base = statistics.median(results[variants[0]])
    for v in variants:
        med = statistics.median(results[v])
        print(
            json.dumps(
                {
                    "case": f"{args.model}/{v}",
                    "preset": args.preset,
                    "threads": torch.get_num_threads(),
                    "samples_per_s_median": round(med, 1),
                    "min": round(min(results[v]), 1),
                    "max": round(max(results[v]), 1),
                    "n": len(results[v]),
                    "ratio_to_first": round(med / base, 3),
                }
            )
        )


if __name__ == "__main__":
    main()
