"""Two versions of rlperf's code on the hot paths, side by side: median SPS of short training
runs, each version in its own processes, alternating A B B A ... so machine drift hits both.

    python benchmarks/code_ab.py --a /path/to/old/checkout/src --b src --rounds 3

Each run is ``python -m rlperf train`` with ``PYTHONPATH`` at one version's ``src``; its score
is the median SPS of its iterations after warm-up. Prints every run, then per configuration
both medians (min, max) and the B/A ratio of each round and their median.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CONFIGS = {
    # PPO on Pong in one process (CleanRL's recipe)
    "ppo-inproc": ["--preset", "cleanrl-atari", "--env", "ALE/Pong-v5", "-i", "12"],
    # the same through two env worker processes
    "ppo-subprocess": [
        "--preset", "cleanrl-atari", "--env", "ALE/Pong-v5", "--engine", "gymnasium",
        "--runner", "subprocess", "--num-workers", "2", "-i", "12",
    ],
    # IMPALA with two actor processes overlapping the learner
    "impala-decoupled": [
        "--preset", "cleanrl-atari", "--env", "ALE/Pong-v5", "--algo", "impala",
        "--runner", "decoupled", "--num-workers", "2", "-i", "60",
    ],
    # DQN (source 003's rung 03): a play process feeding the trainer's replay, which
    # learns from its 500th transition on (about 50 env steps/s on 2 vCPUs: short iterations)
    "dqn-play-train": [
        "--preset", "dqn-ladder-03-play-train-processes", "-i", "8",
        "dqn.steps_per_iteration=250", "dqn.learning_starts=500", "dqn.buffer_size=20000",
        "telemetry.warmup_iterations=3",
    ],
    # DQN as `dqn-fast` on Pong (8 envs, batch 32 every 4 env steps), learning from the 5,000th
    # transition; the precision fixed (bf16 channels-last, one of auto's picks on AMX CPUs)
    # so that both versions skip auto's timing at start
    "dqn-fast": [
        "--preset", "dqn-fast", "--env", "ALE/Pong-v5", "dqn.learning_starts=5000",
        "stop.total_timesteps=33000", "runner.precision=bf16", "runner.channels_last=true",
        "telemetry.warmup_iterations=8",
    ],
    # A3C: two Hogwild workers learning into one shared model (the driver only follows)
    "a3c-hogwild": [
        "--preset", "a3c-football-quick", "stop.target_reward=null",
        "stop.total_timesteps=null", "stop.wall_time_s=20", "runner.eval_interval_s=0",
        "telemetry.warmup_iterations=2",
    ],
}  # fmt: skip


def median_sps(src: str, args: list[str]) -> float:
    """One training run with the code in ``src``: the median SPS after warm-up."""
    with tempfile.TemporaryDirectory() as root:
        cmd = [sys.executable, "-m", "rlperf", "train", *args, "--runs-root", root, "-s", "r"]
        cmd += ["--no-progress", "telemetry.tensorboard=false", "checkpoint.every=0", "seed=1"]
        done = subprocess.run(
            cmd, env={**os.environ, "PYTHONPATH": src}, capture_output=True, text=True
        )
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
        rows = [json.loads(line) for line in (Path(root) / "r" / "metrics.jsonl").open()]
    return statistics.median(r["SPS"] for r in rows if not r.get("warmup"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", required=True, help="the first version's src directory")
    parser.add_argument("--b", required=True, help="the second version's src directory")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated")
    args = parser.parse_args()
    versions = {"A": str(Path(args.a).resolve()), "B": str(Path(args.b).resolve())}
    configs = args.configs.split(",")
    sps: dict[tuple[str, str], list[float]] = {(c, v): [] for c in configs for v in versions}
    for r in range(args.rounds):
        for config in configs:
            order = ("A", "B") if r % 2 == 0 else ("B", "A")
            for version in order:
                value = median_sps(versions[version], CONFIGS[config])
                sps[(config, version)].append(value)
                print(f"round {r} {config} {version}: {value:.1f} SPS", flush=True)
    for config in configs:
        a, b = sps[(config, "A")], sps[(config, "B")]
        ratios = [y / x for x, y in zip(a, b, strict=True)]
        print(
            f"{config}: A median {statistics.median(a):.0f} ({min(a):.0f}-{max(a):.0f}), "
            f"B median {statistics.median(b):.0f} ({min(b):.0f}-{max(b):.0f}), "
            f"B/A per round {', '.join(f'{x:.3f}' for x in ratios)}, "
            f"median {statistics.median(ratios):.3f}"
        )


if __name__ == "__main__":
    main()
