"""Compute per learned env step: FLOPs of each network next to its measured learner speed.

For every network and input size: the forward FLOPs of one observation (counted by torch's
``FlopCounterMode``, multiply-add = 2 FLOPs), the FLOPs one env step costs PPO (one acting
forward plus ``epochs`` passes of forward and backward, the backward counted as measured by
the same counter), and the learner's samples/s on a minibatch (forward, backward, clipping,
Adam: ``rlperf.core.autoprecision.time_learner_step``, the timing ``precision=auto`` uses),
in interleaved rounds; medians with min-max.

    python benchmarks/compute_per_step.py --cases nature:84,nips:84,nips:64 --epochs 2
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
from torch.utils.flop_counter import FlopCounterMode

from rlperf.config.schema import ModelConfig
from rlperf.core.autoprecision import Variant, time_learner_step
from rlperf.models.catalog import build_model


def count_flops(net: torch.nn.Module, obs: torch.Tensor, backward: bool) -> int:
    """FLOPs of a forward (and backward) pass of ``net`` on ``obs``."""
    with FlopCounterMode(display=False) as counter:
        logits, value = net(obs)
        if backward:
            (logits.float().mean() + value.float().mean()).backward()
    return counter.get_total_flops()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default="nature:84,nips:84,nips:64", help="model:dim,...")
    p.add_argument("--epochs", type=int, default=2, help="PPO update epochs per env step")
    p.add_argument("--minibatch", type=int, default=256)
    p.add_argument("--precision", default="fp32", choices=("fp32", "bf16"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=float, default=2.0, help="timing per case and round")
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    cases = {}
    for case in args.cases.split(","):
        name, dim = case.split(":")
        net = build_model(ModelConfig(name=name), (4, int(dim), int(dim)), 6)
        one = torch.zeros(1, 4, int(dim), int(dim), dtype=torch.uint8)
        fwd = count_flops(net, one, backward=False)
        train = count_flops(net, one, backward=True)
        net.zero_grad(set_to_none=True)
        obs = torch.randint(0, 256, (args.minibatch, 4, int(dim), int(dim)), dtype=torch.uint8)
        cases[case] = (net, obs, fwd, train)
    variant = Variant(args.precision, True)
    timings: dict[str, list[float]] = {c: [] for c in cases}
    order = list(cases)
    for r in range(args.rounds):
        for c in order if r % 2 == 0 else order[::-1]:
            net, obs, _, _ = cases[c]
            timings[c].append(
                time_learner_step(net, obs, torch.device("cpu"), variant, args.seconds)
            )
    base = statistics.median(timings[order[0]])
    for c in order:
        _, _, fwd, train = cases[c]
        med = statistics.median(timings[c])
        print(
            json.dumps(
                {
                    "case": c,
                    "forward_mflops": round(fwd / 1e6, 2),
                    "train_mflops_per_sample": round(train / 1e6, 2),
                    "ppo_mflops_per_env_step": round((fwd + args.epochs * train) / 1e6, 2),
                    "epochs": args.epochs,
                    "learner_samples_per_s": round(med, 1),
                    "min": round(min(timings[c]), 1),
                    "max": round(max(timings[c]), 1),
                    "learner_env_steps_per_s": round(med / args.epochs, 1),
                    "ratio_to_first": round(med / base, 3),
                    "precision": args.precision,
                    "minibatch": args.minibatch,
                    "threads": torch.get_num_threads(),
                }
            )
        )


if __name__ == "__main__":
    main()
