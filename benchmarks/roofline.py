"""The roofline of PPO on Pong on this machine, and rlperf's fraction of it.

Three ceilings are measured in isolation, each using the whole machine:

* ``env``: env-only steps/s of the fastest Atari engine (ALE's C++ vector env and EnvPool,
  ``--threads`` threads, random actions, the preset's preprocessing);
* ``act``: acting-only steps/s: the policy's batched forward + sampling on ``num_envs``
  observations under ``torch.inference_mode`` at the run's precision;
* ``learn``: learner-only env steps/s: the real PPO update of one rollout (samples/s of the
  update divided by ``update_epochs``, since every env step is learned from that often).

A synchronous trainer does all three for every env step, so the machine's bound is
``1 / (1/env + 1/act + 1/learn)``: what training would reach if every phase ran at its
isolated speed and nothing else cost anything. Overlapping phases on separate cores cannot
beat it either, since each ceiling was measured with every core. ``end_to_end`` is
``rlperf train`` for ``--seconds`` (steady SPS, warm-up excluded); its ratio to the bound is
rlperf's fraction of the roofline. Rounds interleave all four, so drift hits all alike.

    python benchmarks/roofline.py --rounds 3 --seconds 60 --precision bf16
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "peers"))
import compare  # noqa: E402  (benchmarks/peers/compare.py: steady SPS of a run directory)
import engine_throughput  # noqa: E402
import learner_throughput  # noqa: E402

from rlperf.config.load import apply_dict, load_preset  # noqa: E402
from rlperf.config.schema import ModelConfig, RunConfig  # noqa: E402
from rlperf.core.resources import retain_freed_memory  # noqa: E402
from rlperf.core.types import Progress  # noqa: E402
from rlperf.models.catalog import build_model  # noqa: E402

ENGINES = ("ale_sync", "envpool_sync")


def env_ceiling(env_id: str, num_envs: int, threads: int, steps: int) -> dict[str, float]:
    """Steps/s of each engine (one timed run each, after one warm-up run)."""
    rates = {}
    for name in ENGINES:
        run_once, close = getattr(engine_throughput, name)(
            env_id=env_id, num_envs=num_envs, steps=steps, seed=0, threads=threads, batch=num_envs
        )
        run_once()
        rates[name] = run_once()
        close()
    return rates


class Acting:
    """The acting step alone: forward + sampling of ``num_envs`` observations."""

    def __init__(self, cfg: RunConfig, precision: str, actions: int = 6) -> None:
        shape = (cfg.env.frame_stack, 84, 84)
        self.policy = build_model(ModelConfig(name=cfg.model.name), shape, actions)
        self.policy.to(memory_format=torch.channels_last).eval()
        self.obs = torch.randint(0, 255, (cfg.env.num_envs, *shape), dtype=torch.uint8)
        self.bf16 = precision == "bf16"

    def steps_per_s(self, forwards: int = 200) -> float:
        start = time.perf_counter()
        with (
            torch.inference_mode(),
            torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16),
        ):
            for _ in range(forwards):
                self.policy.act(self.obs)
        return forwards * self.obs.shape[0] / (time.perf_counter() - start)


class Learning:
    """The learner alone: the real PPO update of one rollout-sized synthetic batch."""

    def __init__(self, cfg: RunConfig, precision: str, actions: int = 6) -> None:
        variant = "bf16-cl" if precision == "bf16" else "fp32-cl"
        self.algo, self.step = learner_throughput.build(cfg, cfg.model.name, variant, 84, actions)
        self.batch = learner_throughput.make_batch(cfg, 84, actions)
        self.env_steps = cfg.env.num_envs * cfg.ppo.num_steps
        self.algo.update(self.batch, self.step, Progress(0, 0, 1.0))  # warm-up

    def steps_per_s(self) -> float:
        start = time.perf_counter()
        self.algo.update(self.batch, self.step, Progress(0, 0, 1.0))
        return self.env_steps / (time.perf_counter() - start)


def end_to_end(args: argparse.Namespace, runs_root: str, round_index: int) -> float:
    """Steady SPS of ``rlperf train`` with the same preset and precision."""
    name = f"roofline-{round_index}"
    cmd = [
        sys.executable, "-m", "rlperf", "train", "--preset", args.preset, "--env", args.env_id,
        "--no-progress", "--runs-root", runs_root, "-s", name,
        f"stop.wall_time_s={args.seconds}", f"runner.torch_threads={args.threads}",
        f"runner.precision={args.precision}", "telemetry.tensorboard=false",
    ]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=args.seconds * 3 + 300)
    records = compare.read_metrics(Path(runs_root) / name / "metrics.jsonl")
    return float(compare.steady_state_from_metrics(records)["sps"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="cleanrl-atari")
    p.add_argument("--env-id", default="ALE/Pong-v5")
    p.add_argument("--precision", default="bf16", choices=("fp32", "bf16"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=60.0, help="end-to-end training per round")
    p.add_argument("--env-steps", type=int, default=8000, help="env steps per engine timing")
    args = p.parse_args()
    retain_freed_memory()
    torch.set_num_threads(args.threads)
    cfg = RunConfig()
    apply_dict(cfg, load_preset(args.preset), args.preset)
    if cfg.model.name == "auto":
        cfg.model.name = "nature"
    acting, learning = Acting(cfg, args.precision), Learning(cfg, args.precision)
    samples: dict[str, list[float]] = {"env": [], "act": [], "learn": [], "end_to_end": []}
    engines: dict[str, list[float]] = {name: [] for name in ENGINES}
    with tempfile.TemporaryDirectory(prefix="roofline") as runs_root:
        for r in range(args.rounds):
            rates = env_ceiling(args.env_id, cfg.env.num_envs, args.threads, args.env_steps)
            for name, rate in rates.items():
                engines[name].append(rate)
            samples["env"].append(max(rates.values()))
            samples["act"].append(acting.steps_per_s())
            samples["learn"].append(learning.steps_per_s())
            samples["end_to_end"].append(end_to_end(args, runs_root, r))
            print(json.dumps({"round": r, **{k: round(v[-1], 1) for k, v in samples.items()}}))
    med = {k: statistics.median(v) for k, v in samples.items()}
    bound = 1.0 / (1.0 / med["env"] + 1.0 / med["act"] + 1.0 / med["learn"])
    summary = {
        "machine": platform.processor() or platform.machine(),
        "preset": args.preset,
        "precision": args.precision,
        "threads": args.threads,
        "rounds": args.rounds,
        **{f"{k}_median": round(v, 1) for k, v in med.items()},
        **{f"{k}_min_max": [round(min(v), 1), round(max(v), 1)] for k, v in samples.items()},
        **{f"engine_{k}_median": round(statistics.median(v), 1) for k, v in engines.items()},
        "bound_sps": round(bound, 1),
        "fraction_of_bound": round(med["end_to_end"] / bound, 3),
        "time_share": {
            k: round((1.0 / med[k]) / (1.0 / bound), 3) for k in ("env", "act", "learn")
        },
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
