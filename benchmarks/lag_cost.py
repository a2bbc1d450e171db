"""The cost of policy lag: learning curves per env step, synchronous vs decoupled runner.

Trains the same algorithm and hyperparameters on the ``inproc`` runner (no lag) and on the
``decoupled`` runner (actors trail the learner), for several seeds, and prints the mean of
the last 100 episode returns at fixed env-step milestones, plus each run's wall time, SPS
and measured policy lag. A decoupled runner is worth its speed only if its curve per env
step stays close to the synchronous one.

    python benchmarks/lag_cost.py --algo appo --preset cartpole --steps 100000 --seeds 1 2 3

Runs one after the other (never in parallel: they would compete for the cores).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def train(args: argparse.Namespace, runner: str, seed: int, runs_root: Path) -> list[dict]:
    name = f"{runner}-s{seed}"
    cmd = [
        sys.executable,
        "-m",
        "rlperf",
        "train",
        "--preset",
        args.preset,
        "--algo",
        args.algo,
        "--runner",
        runner,
        "--num-workers",
        str(args.num_workers),
        "--seed",
        str(seed),
        "--runs-root",
        str(runs_root),
        "-s",
        name,
        "--no-progress",
        f"stop.total_timesteps={args.steps}",
        "telemetry.tensorboard=false",
        "checkpoint.every=0",
        *args.override,
    ]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    lines = (runs_root / name / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def reward_at(rows: list[dict], steps: int) -> float | None:
    """Mean return of the last 100 episodes as logged at the first iteration >= steps."""
    for row in rows:
        if row["timesteps_total"] >= steps:
            return row["episode_reward_mean"]
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", default="appo")
    parser.add_argument("--preset", default="cartpole")
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--milestones", type=int, default=4, help="points on the curve")
    parser.add_argument("override", nargs="*", help="extra key=value config overrides")
    args = parser.parse_args()
    marks = [args.steps * (i + 1) // args.milestones for i in range(args.milestones)]
    with tempfile.TemporaryDirectory() as tmp:
        results = {
            runner: [train(args, runner, seed, Path(tmp)) for seed in args.seeds]
            for runner in ("inproc", "decoupled")
        }
    print(f"{args.algo} on {args.preset}, seeds {args.seeds}: mean100 return (median over seeds)")
    print("runner     " + "".join(f"{m:>10,}" for m in marks) + "    wall s   SPS   lag")
    for runner, runs in results.items():
        cells = []
        for m in marks:
            values = [v for v in (reward_at(rows, m) for rows in runs) if v is not None]
            cells.append(f"{statistics.median(values):>10.1f}" if values else f"{'-':>10}")
        wall = statistics.median(rows[-1]["time_total_s"] for rows in runs)
        sps = statistics.median(
            rows[-1]["timesteps_total"] / rows[-1]["time_total_s"] for rows in runs
        )
        lag = statistics.median(
            statistics.mean(r.get("perf/policy_lag", 0.0) for r in rows) for rows in runs
        )
        print(f"{runner:<11}" + "".join(cells) + f"{wall:>10.1f}{sps:>6.0f}{lag:>6.2f}")


if __name__ == "__main__":
    main()
