"""Stable-Baselines3 PPO on Pong with CleanRL's ``ppo_atari`` hyperparameters, timed.

This is the peer side of rlperf's side-by-side benchmark: it trains stock SB3 PPO for a
wall-clock budget and reports steady-state environment steps per second. It runs in the
isolated venv made by ``benchmarks/peers/setup.sh``::

    benchmarks/.venv-peers/bin/python benchmarks/peers/sb3_ppo.py --seconds 60 --threads 2

The last stdout line is ``RESULT {json}`` (parsed by ``compare.py``).

Timing model: one *iteration* is one rollout (``n_steps * n_envs`` = 1024 env steps) plus
its PPO update. The callback stamps ``(time, num_timesteps)`` at every rollout start, which
is exactly the end of the previous iteration (SB3's ``learn`` loop is rollout -> log ->
train -> next rollout). Stamp 0 is the start of training, stamp k the end of iteration k.
Steady-state SPS is measured from stamp 1 to the last stamp, so the first iteration
(allocations, first-call kernel selection, env resets' noop/fire steps) is excluded as
warm-up, the same rule rlperf applies to its own ``warmup`` iterations.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import sys
import time
from dataclasses import dataclass
from typing import Any

import ale_py
import gymnasium as gym
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_atari_env
from stable_baselines3.common.utils import LinearSchedule
from stable_baselines3.common.vec_env import DummyVecEnv, VecFrameStack

ENV_ID = "ALE/Pong-v5"
N_ENVS = 8
N_STEPS = 128
WARMUP_ITERATIONS = 1
# CleanRL's default horizon; only used to shape the linear learning-rate schedule, since a
# timed run stops long before it. Throughput does not depend on the learning rate.
NOMINAL_TOTAL_TIMESTEPS = 10_000_000


@dataclass
class Stamp:
    """Wall-clock time and SB3 step counter at an iteration boundary."""

    t: float
    timesteps: int


class TimedStop(BaseCallback):
    """Stamps iteration boundaries and stops training once the wall-clock budget is spent.

    The budget is checked only at rollout starts so that every measured iteration is a
    complete rollout + update; the stop itself happens on the first env step of the next
    rollout (``_on_step`` returning False), and that partial rollout is not measured.
    """

    def __init__(self, seconds: float) -> None:
        super().__init__(verbose=0)
        self.seconds = seconds
        self.stamps: list[Stamp] = []
        # Rollout k's end time; with stamps[k] (its start) this splits each iteration into
        # collection (env stepping + inference) and update, to see which side dominates.
        self.rollout_ends: list[float] = []
        self._stop = False

    def _on_rollout_start(self) -> None:
        now = time.perf_counter()
        self.stamps.append(Stamp(now, int(self.model.num_timesteps)))
        if now - self.stamps[0].t >= self.seconds:
            self._stop = True

    def _on_rollout_end(self) -> None:
        self.rollout_ends.append(time.perf_counter())

    def _on_step(self) -> bool:
        return not self._stop


def steady_state(
    stamps: list[Stamp],
    rollout_ends: list[float] | None = None,
    warmup: int = WARMUP_ITERATIONS,
) -> dict[str, Any]:
    """Summarise iteration-boundary stamps into totals and steady-state SPS.

    ``stamps[0]`` is the start of training, ``stamps[k]`` the end of iteration ``k``;
    ``rollout_ends[k]``, if given, the time rollout ``k + 1`` finished (before its update).
    SPS is ``None`` when the budget did not cover at least one post-warm-up iteration.
    """
    iterations = max(len(stamps) - 1, 0)
    out: dict[str, Any] = {
        "iterations": iterations,
        "timesteps": stamps[-1].timesteps - stamps[0].timesteps if stamps else 0,
        "seconds": stamps[-1].t - stamps[0].t if stamps else 0.0,
        "warmup_iterations": min(warmup, iterations),
        "sps": None,
        "steady_timesteps": 0,
        "steady_seconds": 0.0,
    }
    if iterations > warmup:
        first, last = stamps[warmup], stamps[-1]
        steady_steps = last.timesteps - first.timesteps
        steady_seconds = last.t - first.t
        out.update(
            sps=steady_steps / steady_seconds,
            steady_timesteps=steady_steps,
            steady_seconds=steady_seconds,
        )
        if rollout_ends is not None and len(rollout_ends) >= iterations:
            collect = sum(rollout_ends[k] - stamps[k].t for k in range(warmup, iterations))
            out["steady_rollout_fraction"] = collect / steady_seconds
    if out["seconds"] > 0:
        out["sps_including_warmup"] = out["timesteps"] / out["seconds"]
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options; defaults reproduce the cleanrl-atari comparison setting."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60.0, help="wall-clock training budget")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--env-id", default=ENV_ID)
    return p.parse_args(argv)


def build_model(env_id: str, seed: int) -> PPO:
    """SB3 PPO with CleanRL ppo_atari hyperparameters on an in-process 8-env Atari stack."""
    # ale-py >= 0.9 no longer registers ALE/* ids on import of gymnasium alone.
    gym.register_envs(ale_py)
    # v5 defaults are frameskip=4 and sticky actions 0.25; turning both off makes v5 behave
    # like the NoFrameskip-v4 ids that SB3's AtariWrapper (and CleanRL) expect, so the
    # wrapper owns the 4-frame skip + max-pool.
    venv = make_atari_env(
        env_id,
        n_envs=N_ENVS,
        seed=seed,
        env_kwargs={
            "frameskip": 1,
            "repeat_action_probability": 0.0,
            "full_action_space": False,
        },
        # AtariWrapper defaults already match CleanRL: noop_max=30, frame_skip=4 (max over
        # the last two frames), episodic life, fire reset, 84x84 gray, reward clipping.
        vec_env_cls=DummyVecEnv,  # in-process, like rlperf's in-process runner
    )
    venv = VecFrameStack(venv, n_stack=4)
    return PPO(
        "CnnPolicy",  # NatureCNN extractor + 512 hidden, shared by actor and critic
        venv,
        learning_rate=LinearSchedule(2.5e-4, 0.0, 1.0),
        n_steps=N_STEPS,
        batch_size=256,  # 1024 / 4 minibatches
        n_epochs=4,
        gamma=0.99,
        gae_lambda=0.95,
        clip_range=0.1,
        # clip_range_vf left at SB3's default None: no value clipping (CleanRL clips it).
        normalize_advantage=True,
        ent_coef=0.01,
        vf_coef=0.5,
        max_grad_norm=0.5,
        seed=seed,
        device="cpu",
        verbose=0,
    )


def main(argv: list[str] | None = None) -> int:
    """Train for the budget, print progress to stderr and one ``RESULT`` line to stdout."""
    args = parse_args(argv)
    torch.set_num_threads(args.threads)

    t0 = time.perf_counter()
    model = build_model(args.env_id, args.seed)
    setup_s = time.perf_counter() - t0

    timer = TimedStop(seconds=args.seconds)
    model.learn(total_timesteps=NOMINAL_TOTAL_TIMESTEPS, callback=timer)
    model.get_env().close()

    summary = steady_state(timer.stamps, timer.rollout_ends)
    result: dict[str, Any] = {
        "system": "sb3",
        "version": importlib.metadata.version("stable-baselines3"),
        "sps": summary.pop("sps"),
        **summary,
        "threads": args.threads,
        "seed": args.seed,
        "env_id": args.env_id,
        "num_envs": N_ENVS,
        "torch": torch.__version__,
        "setup_s": setup_s,
    }
    if result["sps"] is None:
        print(
            f"budget of {args.seconds}s finished only {result['iterations']} iteration(s); "
            f"need more than {WARMUP_ITERATIONS} for a steady-state SPS",
            file=sys.stderr,
        )
    print("RESULT " + json.dumps(result), flush=True)
    return 0 if result["sps"] is not None else 2


if __name__ == "__main__":
    sys.exit(main())
