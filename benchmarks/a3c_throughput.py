"""A3C on the football game: Hogwild steps/s for 1, 2, 4 processes, and learning per second
beside PPO on the synchronous in-process runner.

Every case is a real ``rlperf train`` in a fresh process (as a user runs it), writing its
run directory under ``--out``; the numbers come from its ``metrics.jsonl``.

- ``throughput``: A3C (preset a3c-football-quick: football-mlp, 50-step segments, shared
  Adam) with W Hogwild processes, one game each, for ``--seconds`` of training and no
  evaluation process. Cases run in interleaved rounds (w1, w2, w4, w1, ...) so that a change
  in machine load hits every case alike; per case: the median and spread (min, max) over
  rounds of each run's median SPS over its iterations (warm-up iterations left out).
- ``learning``: A3C with 2 processes against PPO (runner inproc, 8 envs x 128 steps, the
  same network) from the same seed until the mean of the last 100 training episodes
  reaches ``--target`` or ``--max-seconds`` pass: the curve (wall seconds, env steps, mean
  return) every few iterations, and the time and steps to the target.

    python benchmarks/a3c_throughput.py --seconds 20 --repeats 3
    python benchmarks/a3c_throughput.py --only learning --seeds 1 2
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ENV = "rlperf/FootballEmptyGoalClose-v0"


def _train(out: Path, name: str, *args: str) -> list[dict]:
    cmd = [
        sys.executable, "-m", "rlperf", "train", "--runs-root", str(out), "-s", name,
        "--no-progress", "telemetry.tensorboard=false", "checkpoint.every=0", *args,
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    rows = (out / name / "metrics.jsonl").read_text().splitlines()
    return [json.loads(r) for r in rows]


def throughput(out: Path, workers: list[int], seconds: float, repeats: int) -> None:
    results: dict[int, list[float]] = {w: [] for w in workers}
    for rnd in range(repeats):
        for w in workers:
            rows = _train(
                out, f"tp_w{w}_r{rnd}", "--preset", "a3c-football-quick",
                "--num-workers", str(w), f"env.num_envs={w}", "runner.eval_interval_s=0",
                "stop.target_reward=null", "stop.total_timesteps=null",
                f"stop.wall_time_s={seconds}",
            )  # fmt: skip
            # Steady rate: env steps over wall time after the warm-up iteration (which holds
            # the workers' start-up). Iterations end when W reports are in, and reports that
            # were already queued make some iterations near-instant, so the per-iteration SPS
            # is noisy; the steady rate over the run is what is compared.
            steady = [(b["timesteps_total"] - a["timesteps_total"], b["time_this_iter_s"])
                      for a, b in itertools.pairwise(rows) if not b["warmup"]]  # fmt: skip
            mean_rate = sum(s for s, _ in steady) / sum(t for _, t in steady)
            sps = [r["SPS"] for r in rows if not r["warmup"]]
            results[w].append(mean_rate)
            print(
                json.dumps(
                    {
                        "case": f"hogwild_w{w}",
                        "round": rnd,
                        "median_iter_sps": statistics.median(sps),
                        "mean_sps": mean_rate,
                        "env_steps": rows[-1]["timesteps_total"],
                    }  # fmt: skip
                ),
                flush=True,
            )
    base = statistics.median(results[workers[0]])
    for w in workers:
        med = statistics.median(results[w])
        print(
            json.dumps(
                {
                    "case": f"hogwild_w{w}",
                    "summary": True,
                    "sps_median": round(med),
                    "sps_min": round(min(results[w])),
                    "sps_max": round(max(results[w])),
                    f"ratio_vs_w{workers[0]}": round(med / base, 2),
                }  # fmt: skip
            ),
            flush=True,
        )


def learning(out: Path, seeds: list[int], target: float, max_seconds: float) -> None:
    cases = {
        "a3c_hogwild_w2": ["--preset", "a3c-football-quick", "runner.eval_interval_s=0"],
        "ppo_inproc": [
            "--algo",
            "ppo",
            "--runner",
            "inproc",
            "--env",
            ENV,
            "--model",
            "football-mlp",
            "env.num_envs=8",
            "ppo.num_steps=128",
            "ppo.anneal_lr=false",
            "runner.torch_threads=1",
        ],  # fmt: skip
    }
    for seed in seeds:
        for name, args in cases.items():
            rows = _train(
                out, f"learn_{name}_s{seed}", *args, "--seed", str(seed),
                f"stop.target_reward={target}", "stop.total_timesteps=null",
                f"stop.wall_time_s={max_seconds}",
            )  # fmt: skip
            step = max(1, len(rows) // 12)
            curve = [
                (
                    round(r["time_total_s"], 1),
                    r["timesteps_total"],
                    round(r["episode_reward_mean"], 2),
                )
                for r in rows[::step] + rows[-1:]
            ]
            last = rows[-1]
            reached = last["episode_reward_mean"] >= target and len(rows) > 1
            print(
                json.dumps(
                    {
                        "case": name,
                        "seed": seed,
                        "reached": reached,
                        "seconds": round(last["time_total_s"], 1),
                        "env_steps": last["timesteps_total"],
                        "curve_s_steps_mean100": curve,
                    }  # fmt: skip
                ),
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["throughput", "learning"])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument(
        "--seconds", type=float, default=20.0, help="training seconds per throughput run"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--target", type=float, default=0.9)
    parser.add_argument("--max-seconds", type=float, default=180.0)
    parser.add_argument(
        "--out", type=Path, default=None, help="run directories (default: a temp dir)"
    )
    args = parser.parse_args()
    print(
        json.dumps(
            {
                "machine": platform.processor() or platform.machine(),
                "cpus": len(os.sched_getaffinity(0)),
                "loadavg_1m": os.getloadavg()[0],
            }  # fmt: skip
        ),
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        if args.only in (None, "throughput"):
            throughput(out, args.workers, args.seconds, args.repeats)
        if args.only in (None, "learning"):
            learning(out, args.seeds, args.target, args.max_seconds)


if __name__ == "__main__":
    main()
