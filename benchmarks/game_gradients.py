"""Do a Pong checkpoint's two games pull its weights the same way, or against each other?

With frameskip 4 each Pong game stays on one frame parity, and a run that stalls has learned
the game on one parity and not the other (``pong_points.py --by-parity``). Training on one
parity alone moves that game faster than training on both. Either the other game's updates
undo this one's (their gradients point against each other), or they only share the step.

The script plays a checkpoint's policy on each parity alone (``env.start_parity``, rlperf's
own Atari env; the run's training env, sampled actions) in independent segments of agent
steps, computes GAE advantages with the checkpoint's critic (the run's ``gamma`` and
``gae_lambda``), normalises them over both games' data together (as a minibatch that mixes
them does) and takes, per segment, the gradient of PPO's policy loss at the checkpoint (the
ratio at 1, so no clipping) and of its value loss (times ``vf_coef``).

Segments of one game are independent draws of that game's gradient, so the mean dot product
of two different segments' gradients estimates the squared norm of the game's expected
gradient, and the mean dot product across games the product of the two games' expected
gradients, both free of the segments' own noise. Their ratio, ``corr``, is the cosine of the
two games' expected gradients: near 1 the games agree, near 0 they are unrelated, below 0 an
update for one undoes the other. It is computed in two metrics: the plain dot product, and
Adam's (each coordinate divided by the checkpoint's sqrt(v) + eps, so that a step on one
game's gradient changes the other's loss by minus the learning rate times this product), and
with a bootstrap interval over segments. The control, one game's segments split in two halves
and read as two games, should read about 1; where it does not, the read needs more segments
(on Pong, 32-96 of 2,048 steps: the fewer, the smaller the policy's gradient).

    python benchmarks/game_gradients.py RUN_DIR --checkpoints ckpt_00000600_000000614400 \
        --segments 32 --steps 2048 --json gradients.json
    python benchmarks/game_gradients.py --from-json gradients*.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from parity_probe import load_player, recorded

PARITIES = ("even", "odd")
GROUPS = {
    "torso": ("policy_torso.",),
    "head": ("logits_head.", "value_head."),
    "all": ("",),
}
"""Parameter groups by name prefix: the shared torso, the loss's own head (the other head has
no gradient from it), and all weights."""
BOOTSTRAP = 2000
ADAM_BETA2 = 0.999
"""torch.optim.Adam's default, which rlperf's optimizer uses."""


def play_segment(
    cfg: Any, network: torch.nn.Module, parity: str, steps: int, seed: int
) -> dict[str, torch.Tensor]:
    """``steps`` agent steps of the network's sampled play on one frame parity, from a fresh
    game (the run's training env): observations, actions, old log-probs, values, rewards,
    dones, and the value of the observation after the last step."""
    from rlperf.envs.make import make_env
    from rlperf.models.catalog import frame_dim

    env_cfg = dataclasses.replace(cfg.env, start_parity=parity)
    env = make_env(env_cfg, frame_dim(cfg.env, cfg.model), seed, training=True)
    rows: dict[str, list] = {
        k: [] for k in ("obs", "actions", "logprobs", "values", "rewards", "dones")
    }
    try:
        obs = env.reset()
        for _ in range(steps):
            action, logprob, value = network.act(torch.from_numpy(obs)[None])
            rows["obs"].append(obs.copy())  # the env refills one buffer in place
            rows["actions"].append(int(action))
            rows["logprobs"].append(float(logprob))
            rows["values"].append(float(value))
            obs, reward, terminated, truncated, _end = env.step(int(action))
            rows["rewards"].append(reward)
            rows["dones"].append(float(terminated or truncated))
            if terminated or truncated:
                obs = env.reset()
        with torch.no_grad():
            next_value = network.value(torch.from_numpy(obs)[None]).float()
    finally:
        env.close()
    segment = {k: torch.tensor(np.asarray(v)) for k, v in rows.items()}
    segment["next_value"] = next_value
    return segment


def advantages(cfg: Any, segment: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE advantages and returns of one segment (one env: N = 1), as the learner computes."""
    from rlperf.algos.returns import gae

    adv, ret = gae(
        segment["rewards"].float()[:, None],
        segment["values"].float()[:, None],
        segment["dones"][:, None],
        segment["next_value"],
        cfg.ppo.gamma,
        cfg.ppo.gae_lambda,
    )
    return adv[:, 0], ret[:, 0]


def loss_gradients(
    network: torch.nn.Module, segment: dict, adv_norm: torch.Tensor, settings: Any
) -> dict[str, torch.Tensor]:
    """The flat gradients of the policy loss (-mean(A * logprob), PPO's at ratio 1) and of
    ``vf_coef`` x the value loss (the learner's :func:`value_error`) over one segment."""
    from rlperf.algos.surrogate import value_error

    obs, actions = segment["obs"], segment["actions"]
    params = list(network.parameters())
    grads = {}
    for name in ("policy", "value"):
        network.zero_grad(set_to_none=True)
        for chunk in torch.split(torch.arange(len(actions)), 512):
            logprob, _entropy, value = network.evaluate(obs[chunk], actions[chunk])
            if name == "policy":
                loss = -(adv_norm[chunk] * logprob).mean()
            else:
                old, target = segment["values"][chunk].float(), segment["returns"][chunk]
                loss = settings.vf_coef * value_error(value, old, target, settings)
            # Chunks weighted by their share, so the sum is the segment's mean.
            (loss * len(chunk) / len(actions)).backward()
        grads[name] = torch.cat(
            [(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params]
        ).double()
    network.zero_grad(set_to_none=True)
    return grads


def adam_scale(state: dict, network: torch.nn.Module, eps: float) -> torch.Tensor:
    """Per coordinate, 1 / (sqrt(v_hat) + eps) from the checkpoint's Adam state, in the order
    of the network's parameters."""
    opt = state["optimizer"]["state"]
    scales = []
    for index, (_name, p) in enumerate(network.named_parameters()):
        entry = opt[index] if index in opt else opt[str(index)]
        v = entry["exp_avg_sq"].double()
        if v.shape != p.shape:
            raise SystemExit(f"Adam state {index} has shape {tuple(v.shape)}, not {tuple(p.shape)}")
        v_hat = v / (1 - ADAM_BETA2 ** float(entry["step"]))
        scales.append((1.0 / (v_hat.sqrt() + eps)).reshape(-1))
    return torch.cat(scales)


def group_masks(network: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A boolean mask over the flat parameter vector per group of GROUPS."""
    names = [(n, p.numel()) for n, p in network.named_parameters()]
    return {
        group: torch.cat(
            [torch.full((size,), n.startswith(prefixes), dtype=torch.bool) for n, size in names]
        )
        for group, prefixes in GROUPS.items()
    }


def agreement(
    gram: np.ndarray, even: np.ndarray, odd: np.ndarray, rng: np.random.Generator
) -> dict:
    """From the Gram matrix of all segments' gradients and the rows of each game's segments:
    the norms of the games' expected gradients, their cosine (``corr``) with a 90 % bootstrap
    interval over segments, and the mean raw cosine of single segments across games."""

    def estimate(e: np.ndarray, o: np.ndarray) -> tuple[float, float, float]:
        # Only pairs of two different segments: a segment with itself adds its own noise.
        within_e = gram[np.ix_(e, e)][e[:, None] != e[None, :]].mean()
        within_o = gram[np.ix_(o, o)][o[:, None] != o[None, :]].mean()
        denom = np.sqrt(max(within_e, 0.0) * max(within_o, 0.0))
        cross = gram[np.ix_(e, o)].mean()
        return float(cross / denom) if denom > 0 else float("nan"), within_e, within_o

    corr, within_e, within_o = estimate(even, odd)
    draws = [
        estimate(rng.choice(even, len(even)), rng.choice(odd, len(odd)))[0]
        for _ in range(BOOTSTRAP)
    ]
    low, high = np.nanpercentile(draws, [5, 95])
    norms = np.sqrt(np.diag(gram))
    return {
        "corr": corr,
        "corr_90": [float(low), float(high)],
        "norm_even": float(np.sqrt(max(within_e, 0.0))),
        "norm_odd": float(np.sqrt(max(within_o, 0.0))),
        "raw_cos": float((gram[np.ix_(even, odd)] / np.outer(norms[even], norms[odd])).mean()),
    }


def read_checkpoint(run: Path, checkpoint: str, segments: int, steps: int) -> dict:
    """One checkpoint's record: per loss, metric and parameter group, :func:`agreement`."""
    from rlperf.algos.surrogate import SurrogateSettings
    from rlperf.config.validate import load_valid_config
    from rlperf.core.checkpoint import load_checkpoint

    cfg = load_valid_config(run / "config.yaml")
    state = load_checkpoint(run / "checkpoints" / checkpoint)
    env, _agent, network = load_player(run, checkpoint, cfg.seed)
    env.close()
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one observation at a time: more threads only contend
    played = {}
    for p_index, parity in enumerate(PARITIES):
        played[parity] = []
        for i in range(segments):
            seed = cfg.seed + 40_000 + 1_000 * p_index + i
            played[parity].append(play_segment(cfg, network, parity, steps, seed))
    torch.set_num_threads(threads)
    for segs in played.values():
        for seg in segs:
            seg["advantages"], seg["returns"] = advantages(cfg, seg)
    all_adv = torch.cat([s["advantages"] for segs in played.values() for s in segs])
    mean, std = all_adv.mean(), all_adv.std() + 1e-8
    settings = SurrogateSettings.of(cfg.ppo)
    grads = {
        parity: [loss_gradients(network, s, (s["advantages"] - mean) / std, settings)
                 for s in segs]
        for parity, segs in played.items()
    }  # fmt: skip
    # Weighting both gradients by the square root of Adam's scale makes their dot product
    # the Adam metric's.
    adam_weight = adam_scale(state, network, cfg.ppo.adam_eps).sqrt()
    masks = group_masks(network)
    rng = np.random.default_rng(0)
    readings = {}
    for loss in ("policy", "value"):
        for metric, weight in (("plain", None), ("adam", adam_weight)):
            for group, mask in masks.items():
                rows = np.stack(
                    [
                        (g[loss] * (1 if weight is None else weight))[mask].numpy()
                        for parity in PARITIES
                        for g in grads[parity]
                    ]
                )
                gram = rows @ rows.T
                even, odd = np.arange(segments), np.arange(segments, 2 * segments)
                readings[f"{loss}/{metric}/{group}"] = agreement(gram, even, odd, rng)
                # The control: one game's segments split in two halves read as two games
                # should agree (corr near 1), if the estimate is sound.
                for parity, own in zip(PARITIES, (even, odd), strict=True):
                    half = segments // 2
                    readings[f"{loss}/{metric}/{group}/control_{parity}"] = agreement(
                        gram, own[:half], own[half:], rng
                    )
    return {
        "run": run.name,
        "checkpoint": checkpoint,
        "env_steps": int(state["counters"]["env_steps"]),
        "segments": segments,
        "steps": steps,
        "reward_per_step": {
            parity: float(torch.cat([s["rewards"] for s in segs]).float().mean())
            for parity, segs in played.items()
        },
        "readings": readings,
    }


def print_rows(records: list[dict], metric: str) -> None:
    """One markdown row per record and loss: corr [interval] per group, the games' norms."""
    groups = list(GROUPS)
    print(f"metric: {metric}")
    print(
        "| run | env steps | loss | " + " | ".join(groups)
        + " | norm even / odd (all) | control even / odd (all) |"
    )  # fmt: skip
    print("| --- | --- | --- | " + " | ".join("---" for _ in groups) + " | --- | --- |")
    for r in records:
        for loss in ("policy", "value"):
            cells = []
            for group in groups:
                a = r["readings"][f"{loss}/{metric}/{group}"]
                cells.append(f"{a['corr']:.2f} [{a['corr_90'][0]:.2f}, {a['corr_90'][1]:.2f}]")
            a = r["readings"][f"{loss}/{metric}/all"]
            ce, co = (r["readings"][f"{loss}/{metric}/all/control_{x}"]["corr"] for x in PARITIES)
            print(
                f"| {r['run']} | {r['env_steps']:,} | {loss} | " + " | ".join(cells)
                + f" | {a['norm_even']:.3g} / {a['norm_odd']:.3g} | {ce:.2f} / {co:.2f} |"
            )  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path, nargs="?", help="a run directory with checkpoints")
    p.add_argument("--checkpoints", nargs="+", help="checkpoint names")
    p.add_argument("--segments", type=int, default=32, help="independent segments per parity")
    p.add_argument("--steps", type=int, default=2048, help="agent steps per segment")
    p.add_argument("--json", type=Path, help="write the records here")
    p.add_argument("--from-json", nargs="+", type=Path, help="print recorded results instead")
    args = p.parse_args()
    if args.from_json:
        records = recorded(p, args.from_json, "readings", "checkpoints and their readings")
    else:
        if args.run is None or not args.checkpoints:
            p.error("give a run directory and --checkpoints, or --from-json")
        if args.segments < 4:
            p.error(
                f"--segments {args.segments}: give at least 4 (pairs of segments in each half of a game)"
            )
        records = [
            read_checkpoint(args.run, c, args.segments, args.steps) for c in args.checkpoints
        ]
        if args.json:
            args.json.write_text(json.dumps(records) + "\n")
    for metric in ("plain", "adam"):
        print_rows(records, metric)


if __name__ == "__main__":
    main()
