"""What Ray costs: the ray runner against the subprocess runner, and actor throughput vs actors.

Two measurements, each printed as JSON lines (median, min and max over the rounds):

``--part runners``: ``rlperf train`` with the same config (algorithm, env, envs, workers,
rollout length) on ``--runner subprocess`` (env worker processes, shared memory) and on
``--runner ray`` (Ray actors on a private local Ray), run one after the other in interleaved
rounds (subprocess, ray, subprocess, ray, ...) so that a change in machine load hits both
alike. ``--algo impala --runners decoupled ray`` compares Ray with the decoupled runner
(actor processes and shared memory): the same architecture, so the ratio is the cost of
Ray's transport alone. The SPS of one run is the median of its iterations after the first two (warm-up,
Ray's actor start); the ratio is ray / subprocess. The ray run's wall time includes starting
Ray (reported as ``start_s``, outside the SPS).

``--part actors``: actor-side throughput vs the number of Ray actors. One local Ray; for each
actor count a RayRunner (real envs, real policy, synchronous mode) collects rollouts and
publishes weights in a loop without learning; counts are timed in interleaved rounds.
Reported: env steps/s of the whole collection (``collect_steps_per_s``: batch env steps /
wall time of collect + publish) and the runner's ``perf/actor_steps_per_s`` (one actor's
rate while busy).

    python benchmarks/ray_overhead.py --part runners --env-id CartPole-v1 --rounds 3
    python benchmarks/ray_overhead.py --part runners --algo impala --runners decoupled ray
    python benchmarks/ray_overhead.py --part actors --env-id CartPole-v1 --actors 1 2 4
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ATARI_PPO = ["--model", "nature", "ppo.num_minibatches=4", "ppo.update_epochs=1"]
MLP_PPO = ["--model", "mlp", "ppo.num_minibatches=4", "ppo.update_epochs=4"]
ROLLOUT_KEY = {"ppo": "ppo.num_steps", "appo": "appo.num_steps", "impala": "impala.num_steps"}


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 1),
        "min": round(min(values), 1),
        "max": round(max(values), 1),
    }


def _train(args: argparse.Namespace, runner: str, root: Path, name: str) -> tuple[float, float]:
    """One ``rlperf train`` run; returns (median SPS after warm-up, wall seconds)."""
    model = ATARI_PPO if args.env_id.startswith("ALE/") else MLP_PPO
    if args.algo != "ppo":  # keep only the model flag; the algorithm's defaults otherwise
        model = model[:2]
    cmd = [
        sys.executable,
        "-m",
        "rlperf",
        "train",
        "--algo",
        args.algo,
        "--env",
        args.env_id,
        *model,
        "--runner",
        runner,
        "--num-workers",
        str(args.num_workers),
        "--runs-root",
        str(root),
        "--save-name",
        name,
        "--no-progress",
        f"env.num_envs={args.num_envs}",
        f"{ROLLOUT_KEY[args.algo]}={args.num_steps}",
        f"stop.iterations={args.iterations}",
        "telemetry.tensorboard=false",
        "checkpoint.every=0",
        # The same learner threads for both: unset, the decoupled and ray runners take the
        # cores their actors leave while the others take every core, and on a small machine
        # that difference alone outweighs the runners' own.
        f"runner.torch_threads={args.torch_threads}",
    ]
    if runner == "ray":
        cmd.append(f"runner.ray_num_cpus_per_actor={args.cpus_per_actor}")
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{runner} run failed:\n{done.stderr[-3000:]}")
    rows = [json.loads(line) for line in (root / name / "metrics.jsonl").read_text().splitlines()]
    return statistics.median(r["SPS"] for r in rows[2:]), wall


def part_runners(args: argparse.Namespace) -> None:
    sps: dict[str, list[float]] = {name: [] for name in args.runners}
    walls: dict[str, list[float]] = {name: [] for name in args.runners}
    with tempfile.TemporaryDirectory(prefix="rlray-bench") as tmp:
        for round_ in range(args.rounds):
            for runner in sps:
                value, wall = _train(args, runner, Path(tmp), f"{runner}-{round_}")
                sps[runner].append(value)
                walls[runner].append(wall)
    base = statistics.median(sps[args.runners[0]])
    for runner, values in sps.items():
        print(
            json.dumps(
                {
                    "part": "runners",
                    "runner": runner,
                    "algo": args.algo,
                    "env_id": args.env_id,
                    "num_envs": args.num_envs,
                    "num_workers": args.num_workers,
                    "num_steps": args.num_steps,
                    "iterations": args.iterations,
                    "torch_threads": args.torch_threads,
                    "sps": _summary(values),
                    f"ratio_vs_{args.runners[0]}": round(statistics.median(values) / base, 3),
                    "wall_s": _summary(walls[runner]),
                    "rounds": len(values),
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                }
            ),
            flush=True,
        )


def part_actors(args: argparse.Namespace) -> None:
    import functools

    import ray
    import torch

    from rlperf.config.schema import RunConfig
    from rlperf.models.catalog import build_model, frame_dim
    from rlperf.runners.ray_actors import RayRunner
    from rlperf.telemetry.timers import PhaseTimer
    from rlperf.training import registry

    torch.set_num_threads(1)
    cfg = RunConfig()
    cfg.env.id = args.env_id
    cfg.env.num_envs = args.num_envs
    cfg.model.name = "nature" if args.env_id.startswith("ALE/") else "mlp"
    cfg.ppo.num_steps = args.num_steps
    dim = frame_dim(cfg.env, cfg.model)
    spaces = registry.env_spaces(cfg, dim, None)
    obs_shape = tuple(spaces.observation.shape or ())
    make_policy = functools.partial(build_model, cfg.model, obs_shape, int(spaces.action.n))
    ray.init(
        address="local",
        num_cpus=os.cpu_count(),
        include_dashboard=False,
        logging_level="WARNING",
    )
    runners: dict[int, RayRunner] = {}
    try:
        for count in args.actors:
            cfg.runner.num_workers = count
            cfg.runner.name = "ray"
            # Every count's actors exist at once; they reserve a share of a CPU each.
            cfg.runner.ray_num_cpus_per_actor = (os.cpu_count() or 1) / sum(args.actors)
            algo = registry.make_algorithm(cfg, make_policy())
            runners[count] = RayRunner(
                cfg.runner,
                algo,
                num_envs=args.num_envs,
                make_env_slice=functools.partial(registry.make_env_slice, cfg.env, dim),
                make_policy=make_policy,
                seed=cfg.seed,
            )
        timer = PhaseTimer()
        collect_rates: dict[int, list[float]] = {c: [] for c in runners}
        actor_rates: dict[int, list[float]] = {c: [] for c in runners}
        for runner in runners.values():  # warm-up: first rollouts, first weight fetches
            for _ in range(2):
                runner.collect(timer)
                runner.sync_weights()
        for _ in range(args.rounds):
            for count, runner in runners.items():
                steps, busy = 0, []
                start = time.perf_counter()
                for _ in range(args.collects):
                    batch, _ = runner.collect(timer)
                    runner.sync_weights()
                    steps += batch.num_steps * batch.num_envs
                    busy.append(runner.worker_metrics()["perf/actor_steps_per_s"])
                collect_rates[count].append(steps / (time.perf_counter() - start))
                actor_rates[count].append(statistics.median(busy))
                timer.lap()
        one = statistics.median(collect_rates[min(runners)])
        for count in runners:
            print(
                json.dumps(
                    {
                        "part": "actors",
                        "actors": count,
                        "env_id": args.env_id,
                        "num_envs": args.num_envs,
                        "num_steps": args.num_steps,
                        "collect_steps_per_s": _summary(collect_rates[count]),
                        "speedup_vs_fewest": round(
                            statistics.median(collect_rates[count]) / one, 3
                        ),
                        "actor_steps_per_s": _summary(actor_rates[count]),
                        "rounds": args.rounds,
                        "collects_per_round": args.collects,
                        "cpus": os.cpu_count(),
                    }
                ),
                flush=True,
            )
    finally:
        for runner in runners.values():
            runner.close()
        ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["runners", "actors"], required=True)
    parser.add_argument("--env-id", default="CartPole-v1")
    parser.add_argument("--algo", default="ppo", choices=sorted(ROLLOUT_KEY))
    parser.add_argument(
        "--runners",
        nargs=2,
        default=["subprocess", "ray"],
        help="runners: the baseline, then the one compared with it",
    )
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--num-workers", type=int, default=2, help="runners: workers / actors")
    parser.add_argument("--num-steps", type=int, default=128)
    parser.add_argument("--iterations", type=int, default=30, help="runners: per run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cpus-per-actor", type=float, default=1.0, help="runners: ray actors")
    parser.add_argument("--torch-threads", type=int, default=1, help="runners: the learner's")
    parser.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--collects", type=int, default=20, help="actors: collects per round")
    args = parser.parse_args()
    if args.part == "runners":
        part_runners(args)
    else:
        part_actors(args)


if __name__ == "__main__":
    main()
