"""RLlib PPO on Pong with CleanRL's ``ppo_atari`` hyperparameters, timed.

Peer side of rlperf's side-by-side benchmark, like ``sb3_ppo.py``: trains stock RLlib PPO
(new API stack) for a wall-clock budget and reports steady-state environment steps per
second. It runs in the isolated venv made by ``benchmarks/peers/setup_rllib.sh``::

    benchmarks/.venv-rllib/bin/python benchmarks/peers/rllib_ppo.py --seconds 60 --threads 2

The last stdout line is ``RESULT {json}`` (parsed by ``compare.py``).

Layout: ``num_env_runners=0`` and ``num_learners=0``, i.e. one Python process samples the
8 envs (gymnasium vector env, stepped sequentially) and runs the update, with
``torch.set_num_threads(--threads)``. That is the closest match to "8 in-process envs, 2
torch threads" on a 2-core machine; remote env runners would add processes that compete for
the same two cores. Ray's own daemons (GCS, raylet) still run beside it, part of RLlib's cost.

Timing model: one ``algo.train()`` call is one iteration (a 1024-step batch plus its PPO
update). The wall clock is stamped before the first call and after each call, the env-step
counter is RLlib's ``num_env_steps_sampled_lifetime``; the first iteration is warm-up and
excluded, as in ``sb3_ppo.py``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import sys
import time
from typing import Any

ENV_ID = "ALE/Pong-v5"
N_ENVS = 8
N_STEPS = 128
WARMUP_ITERATIONS = 1
# CleanRL's default horizon, only used to shape the linear learning-rate schedule.
NOMINAL_TOTAL_TIMESTEPS = 10_000_000


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options; defaults reproduce the cleanrl-atari comparison setting."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60.0, help="wall-clock training budget")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--env-id", default=ENV_ID)
    return p.parse_args(argv)


def make_env(config: dict[str, Any]):
    """ALE env with frameskip 1 and no sticky actions, wrapped by RLlib's Atari wrapper."""
    import ale_py
    import gymnasium as gym
    from ray.rllib.env.wrappers.atari_wrappers import wrap_atari_for_new_api_stack

    gym.register_envs(ale_py)
    env = gym.make(
        config.get("env_id", ENV_ID),
        frameskip=1,
        repeat_action_probability=0.0,
        full_action_space=False,
    )
    # RLlib's wrapper: 84x84 gray, frame skip 4 with max-pool, noop reset 30, episodic
    # life, fire reset, 4-frame stack. Reward clipping is the env runner's clip_rewards.
    return wrap_atari_for_new_api_stack(env, dim=84, framestack=4)


def build_config(env_id: str, seed: int):
    """PPOConfig with CleanRL ppo_atari hyperparameters, single process."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    return (
        PPOConfig()
        .environment(
            "rlperf_peer_atari",
            env_config={"env_id": env_id},
            clip_rewards=True,  # sign of the reward
        )
        .framework("torch")
        .env_runners(
            num_env_runners=0,  # sample in the main process
            num_envs_per_env_runner=N_ENVS,
            rollout_fragment_length=N_STEPS,
        )
        .learners(num_learners=0, num_gpus_per_learner=0)
        .training(
            train_batch_size_per_learner=N_ENVS * N_STEPS,
            minibatch_size=256,
            num_epochs=4,
            lr=[[0, 2.5e-4], [NOMINAL_TOTAL_TIMESTEPS, 0.0]],
            gamma=0.99,
            lambda_=0.95,
            clip_param=0.1,
            vf_clip_param=10.0,  # RLlib default; its vf clip is absolute, not CleanRL's
            entropy_coeff=0.01,
            vf_loss_coeff=0.5,
            use_kl_loss=False,  # CleanRL has no KL penalty
            grad_clip=0.5,
            grad_clip_by="global_norm",
        )
        .rl_module(
            model_config=DefaultModelConfig(
                # Nature CNN convolutions ("valid" padding: 84 -> 20 -> 9 -> 7, RLlib's
                # default is "same"); RLlib's catalog puts the 512 hidden layer in
                # each head (actor and critic) rather than in the shared trunk.
                conv_filters=[[32, 8, 4, "valid"], [64, 4, 2, "valid"], [64, 3, 1, "valid"]],
                conv_activation="relu",
                head_fcnet_hiddens=[512],
                head_fcnet_activation="relu",
                vf_share_layers=True,
            )
        )
        .debugging(seed=seed, log_level="ERROR")
        .reporting(metrics_num_episodes_for_smoothing=10)
    )


def steady_state(stamps: list[tuple[float, int]], warmup: int = WARMUP_ITERATIONS):
    """Totals and steady-state SPS from ``(time, env_steps)`` stamps at iteration ends.

    ``stamps[0]`` is the start of training (0 steps), ``stamps[k]`` the end of iteration k.
    """
    iterations = max(len(stamps) - 1, 0)
    out: dict[str, Any] = {
        "iterations": iterations,
        "timesteps": stamps[-1][1] - stamps[0][1] if stamps else 0,
        "seconds": stamps[-1][0] - stamps[0][0] if stamps else 0.0,
        "warmup_iterations": min(warmup, iterations),
        "sps": None,
        "steady_timesteps": 0,
        "steady_seconds": 0.0,
    }
    if iterations > warmup:
        (t0, s0), (t1, s1) = stamps[warmup], stamps[-1]
        out.update(sps=(s1 - s0) / (t1 - t0), steady_timesteps=s1 - s0, steady_seconds=t1 - t0)
    if out["seconds"] > 0:
        out["sps_including_warmup"] = out["timesteps"] / out["seconds"]
    return out


def main(argv: list[str] | None = None) -> int:
    """Train for the budget, print one ``RESULT`` line to stdout."""
    args = parse_args(argv)
    import ray
    import torch
    from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME
    from ray.tune.registry import register_env

    torch.set_num_threads(args.threads)
    t_setup = time.perf_counter()
    ray.init(
        num_cpus=args.threads,
        include_dashboard=False,
        log_to_driver=False,
        logging_level="ERROR",
    )
    register_env("rlperf_peer_atari", make_env)
    algo = build_config(args.env_id, args.seed).build_algo()
    # Building can reset the thread count (Ray sets OMP_NUM_THREADS for workers); pin again.
    torch.set_num_threads(args.threads)
    setup_s = time.perf_counter() - t_setup

    stamps: list[tuple[float, int]] = [(time.perf_counter(), 0)]
    timers: dict[str, float] = {}
    while stamps[-1][0] - stamps[0][0] < args.seconds:
        result = algo.train()
        steps = int(result[ENV_RUNNER_RESULTS][NUM_ENV_STEPS_SAMPLED_LIFETIME])
        stamps.append((time.perf_counter(), steps))
        timers = {k: round(v, 3) for k, v in result.get("timers", {}).items() if "timer" in k}
        print(f"iteration {len(stamps) - 1}: {steps} env steps {timers}", file=sys.stderr)
    algo.stop()
    ray.shutdown()

    summary = steady_state(stamps)
    out: dict[str, Any] = {
        "system": "rllib",
        "version": importlib.metadata.version("ray"),
        "sps": summary.pop("sps"),
        **summary,
        "threads": args.threads,
        "torch_threads_effective": torch.get_num_threads(),
        "seed": args.seed,
        "env_id": args.env_id,
        "num_envs": N_ENVS,
        "num_env_runners": 0,
        "timers_last": timers,
        "torch": torch.__version__,
        "setup_s": setup_s,
    }
    print("RESULT " + json.dumps(out), flush=True)
    return 0 if out["sps"] is not None else 2


if __name__ == "__main__":
    sys.exit(main())
