"""How observations enter the network: two measured choices of the input path.

1. Learner: the 1/255 of uint8 frames applied to the batch before the first conv (a float32
   copy of every minibatch, cast down again under bf16 autocast) against folded into the
   first conv's weight (``InputScaledConv2d``; frames go straight to the compute dtype).
   Samples/s of one real ``PPO.update`` on a synthetic Pong-shaped batch, as
   ``learner_throughput.py``.
2. Acting: one batched policy forward (``num_envs`` observations) under ``torch.no_grad``
   against ``torch.inference_mode``.

Cases alternate round by round (order reversed every other round) in one process so drift
hits both; medians, min-max and the ratio are printed as JSON lines.

    python benchmarks/input_path.py --precision bf16 --rounds 10
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from collections.abc import Callable

import torch
from learner_throughput import build, make_batch

import rlperf.models.policy as policy_module
from rlperf.config.load import apply_dict, load_preset
from rlperf.config.schema import RunConfig
from rlperf.core.resources import retain_freed_memory
from rlperf.core.types import Progress
from rlperf.models.conv import InputScaledConv2d

FRAME_SCALE = 1.0 / 255.0
_FOLDED_INPUT = policy_module.network_input


def _scale_before_network(obs: torch.Tensor) -> torch.Tensor:
    """The input path before folding: a float32 copy of the batch, scaled."""
    return obs.float() * FRAME_SCALE


def _use_input_path(model: torch.nn.Module, folded: bool) -> None:
    """Switch ``model`` (and the module-level input function) to one of the two paths."""
    policy_module.network_input = _FOLDED_INPUT if folded else _scale_before_network
    for layer in model.modules():
        if isinstance(layer, InputScaledConv2d):
            layer.input_scale = FRAME_SCALE if folded else None


def _interleave(cases: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {name: [] for name in cases}
    names = list(cases)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            results[name].append(cases[name]())
    return results


def _report(kind: str, unit: str, results: dict[str, list[float]], higher_is_better: bool) -> None:
    names = list(results)
    base = statistics.median(results[names[0]])
    for name, values in results.items():
        med = statistics.median(values)
        ratio = med / base if higher_is_better else base / med
        print(
            json.dumps(
                {
                    "benchmark": kind,
                    "case": name,
                    unit: round(med, 3),
                    "min": round(min(values), 3),
                    "max": round(max(values), 3),
                    "n": len(values),
                    "speedup_vs_first": round(ratio, 3),
                }
            )
        )


def learner(cfg: RunConfig, precision: str, rounds: int) -> None:
    batch = make_batch(cfg, 84, 6)
    variant = f"{precision}-cl"
    built = {"scaled-input": build(cfg, "nature", variant, 84, 6)}
    built["folded"] = build(cfg, "nature", variant, 84, 6)
    samples = cfg.env.num_envs * cfg.ppo.num_steps * cfg.ppo.update_epochs

    def run(name: str) -> float:
        algo, step = built[name]
        _use_input_path(algo.policy, folded=name == "folded")
        start = time.perf_counter()
        algo.update(batch, step, Progress(0, 0, 1.0))
        return samples / (time.perf_counter() - start)

    for name in built:  # warm-up: kernel selection, allocator
        run(name)
    results = _interleave({name: (lambda n=name: run(n)) for name in built}, rounds)
    _report(f"learner/{precision}", "samples_per_s", results, higher_is_better=True)


def acting(cfg: RunConfig, rounds: int, calls: int = 50) -> None:
    algo, _ = build(cfg, "nature", "fp32-cl", 84, 6)
    model = algo.policy
    _use_input_path(model, folded=True)
    obs = torch.randint(0, 256, (cfg.env.num_envs, 4, 84, 84), dtype=torch.uint8)
    modes: dict[str, Callable[[], contextlib.AbstractContextManager]] = {
        "no_grad": torch.no_grad,
        "inference_mode": torch.inference_mode,
    }

    def run(mode: str) -> float:
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            with modes[mode]():
                model(obs)
            times.append(time.perf_counter() - start)
        return statistics.median(times) * 1e3

    for mode in modes:
        run(mode)
    results = _interleave({mode: (lambda m=mode: run(m)) for mode in modes}, rounds)
    _report(f"acting/batch{cfg.env.num_envs}", "ms_per_forward", results, higher_is_better=False)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="cleanrl-atari")
    p.add_argument("--precision", default="bf16", choices=["fp32", "bf16"])
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--only", choices=["learner", "acting"], default=None)
    args = p.parse_args()
    retain_freed_memory()
    torch.set_num_threads(args.threads)
    cfg = RunConfig()
    apply_dict(cfg, load_preset(args.preset), args.preset)
    if args.only in (None, "learner"):
        learner(cfg, args.precision, args.rounds)
    if args.only in (None, "acting"):
        acting(cfg, args.rounds)


if __name__ == "__main__":
    main()
