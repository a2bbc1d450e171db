"""Does a Pong checkpoint see which frame parity its game is on?

With frameskip 4 and random no-op starts each Pong game stays on one frame parity, and the two
parities are two games to a policy (``pong_points.py --by-parity``). This probe asks whether the
network's torso tells them apart where the screen gives nothing else away: it plays games with
a run's checkpoint (sampled actions, the run's evaluation env) up to the first point of each,
while the score still reads 0:0, and records at every step the torso's features (the layer the
policy and value heads read), the last frame of the observation and its difference from the
frame before, with the game's parity. A logistic regression per input predicts the parity,
cross-validated over games (a game is in the training folds or the held-out one, never both,
so a probe cannot learn a game instead of its parity). The held-out accuracy against the
majority share is the answer: the torso's accuracy is what the network knows; the pixels'
accuracy bounds what a linear read of the screen gives away. ``--random`` plays uniformly
random actions instead, so that the pixels' accuracy is the screen's alone and not the
policy's different play on the two games.

    python benchmarks/parity_probe.py RUN_DIR --checkpoint ckpt_00000300_000000307200 \
        --games 150 --json probe.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

FOLDS = 5
"""Cross-validation folds over games."""


def load_player(run: Path, checkpoint: str | None, seed: int) -> tuple:
    """A checkpoint of ``run`` (its latest when None) ready to play: the run's evaluation env
    seeded with ``seed``, the agent that acts (sampled or greedy actions) and the policy's
    network in eval mode, for reading its layers."""
    from rlperf.config.validate import load_valid_config
    from rlperf.core.checkpoint import load_policy
    from rlperf.enjoy import load_agent
    from rlperf.envs.make import make_env
    from rlperf.models.catalog import frame_dim
    from rlperf.training.registry import acting_policy

    cfg = load_valid_config(run / "config.yaml")
    env = make_env(cfg.env, frame_dim(cfg.env, cfg.model), seed, training=False)
    path = None if checkpoint is None else run / "checkpoints" / checkpoint
    obs_shape, num_actions = tuple(env.observation_space.shape or ()), int(env.action_space.n)
    agent = load_agent(run, cfg, path, obs_shape, num_actions)
    network = acting_policy(cfg, obs_shape, num_actions)
    load_policy(network, run, path, f"the run's network ({cfg.model.name})")
    network.eval()
    return env, agent, network


def recorded(parser: argparse.ArgumentParser, paths: list[Path], key: str, holds: str) -> list:
    """The records in the ``--json`` files ``paths`` of a script whose records each carry
    ``key``; a file that is not one ends the script through ``parser`` with a one-line error
    (``holds``: what such a record holds, for the message)."""
    records = []
    for path in paths:
        loaded = json.loads(path.read_text())
        if not isinstance(loaded, list) or not all(key in r for r in loaded):
            parser.error(f"{path} is not a record of this script's --json ({holds})")
        records += loaded
    return records


def play_first_points(
    run: Path, checkpoint: str | None, games: int, seed: int | None, random_actions: bool
) -> dict[str, np.ndarray]:
    """Per agent step up to each game's first point: torso features, last frame, last frame
    minus the one before (absolute), the game's parity (1 = odd) and the game's index."""
    from rlperf.config.validate import load_valid_config
    from rlperf.models.policy import network_input

    if seed is None:
        seed = load_valid_config(run / "config.yaml").seed + 20_000
    env, agent, network = load_player(run, checkpoint, seed)
    num_actions = int(env.action_space.n)
    rng = np.random.default_rng(0)
    rows: dict[str, list] = {"torso": [], "frame": [], "change": [], "parity": [], "game": []}
    try:
        for game in range(games):
            obs = env.reset()
            parity = env.frame_number() % 2
            while True:
                with torch.no_grad():
                    torso = network.policy_torso(network_input(torch.from_numpy(obs)[None]))
                frames = obs.astype(np.float32)  # (stack, dim, dim), the latest frame last
                rows["torso"].append(torso.float().numpy()[0])
                rows["frame"].append(frames[-1].ravel())
                rows["change"].append(np.abs(frames[-1] - frames[-2]).ravel())
                rows["parity"].append(parity)
                rows["game"].append(game)
                action = int(rng.integers(num_actions)) if random_actions else agent.act(obs, False)
                obs, reward, terminated, truncated, game_end = env.step(action)
                if reward or terminated or truncated or game_end is not None:
                    break  # the score no longer reads 0:0; the next game starts from a reset
    finally:
        env.close()
    return {k: np.asarray(v) for k, v in rows.items()}


def fit_logistic(x: torch.Tensor, y: torch.Tensor, l2: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Weights and bias of an L2-regularised logistic regression of ``y`` (0/1) on ``x``."""
    w = torch.zeros(x.shape[1], requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    optimiser = torch.optim.LBFGS([w, b], max_iter=300)

    def loss() -> torch.Tensor:
        optimiser.zero_grad()
        value = torch.nn.functional.binary_cross_entropy_with_logits(x @ w + b, y)
        value = value + l2 * (w * w).sum()
        value.backward()
        return value

    optimiser.step(loss)
    return w.detach(), b.detach()


def grouped_accuracy(x: np.ndarray, y: np.ndarray, groups: np.ndarray, l2: float) -> list[float]:
    """Held-out accuracy of a logistic regression in each of FOLDS folds over ``groups``
    (inputs standardised on the training folds)."""
    names = np.unique(groups)
    np.random.default_rng(0).shuffle(names)
    accuracies = []
    for fold in range(FOLDS):
        held_out = np.isin(groups, names[fold::FOLDS])
        mean, std = x[~held_out].mean(0), x[~held_out].std(0) + 1e-6
        w, b = fit_logistic(
            torch.tensor((x[~held_out] - mean) / std, dtype=torch.float32),
            torch.tensor(y[~held_out], dtype=torch.float32),
            l2,
        )
        test_x = torch.tensor((x[held_out] - mean) / std, dtype=torch.float32)
        predicted = (test_x @ w + b > 0).numpy()
        accuracies.append(float((predicted == y[held_out].astype(bool)).mean()))
    return accuracies


def probe(rows: dict[str, np.ndarray]) -> dict:
    """The majority share and each input's held-out accuracies (mean and per fold)."""
    y, groups = rows["parity"], rows["game"]
    result: dict = {
        "steps": int(len(y)),
        "games": int(len(np.unique(groups))),
        "odd_games": int(sum(y[groups == g][0] for g in np.unique(groups))),
        "majority": float(max(y.mean(), 1 - y.mean())),
    }
    # Pixels are many more inputs than the torso's features for the same steps: more shrinkage.
    for name, l2 in (("torso", 1e-3), ("frame", 1e-2), ("change", 1e-2)):
        folds = grouped_accuracy(rows[name], y, groups, l2)
        result[name] = {"accuracy": float(np.mean(folds)), "folds": folds}
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path, help="a run directory with checkpoints")
    p.add_argument("--checkpoint", default=None, help="name (default: latest)")
    p.add_argument("--games", type=int, default=150)
    p.add_argument("--seed", type=int, default=None, help="env seed (default: run's + 20000)")
    p.add_argument("--random", action="store_true", help="uniformly random actions")
    p.add_argument("--json", type=Path, help="write the result here")
    args = p.parse_args()
    result = probe(play_first_points(args.run, args.checkpoint, args.games, args.seed, args.random))
    result = {"run": args.run.name, "checkpoint": args.checkpoint, "random": args.random, **result}
    print(
        f"{args.run.name} {args.checkpoint or 'latest'}{' (random actions)' if args.random else ''}: "
        f"{result['steps']} steps of {result['games']} games ({result['odd_games']} odd) before "
        f"their first point; majority {result['majority']:.3f}; held-out accuracy: torso "
        f"{result['torso']['accuracy']:.3f}, last frame {result['frame']['accuracy']:.3f}, "
        f"its change {result['change']['accuracy']:.3f}"
    )
    if args.json:
        args.json.write_text(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
