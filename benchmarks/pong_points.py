"""Pong point by point: does a checkpoint lose the point after one it won?

Plays games with a run's checkpoints (sampled actions, the run's evaluation env, as
``rlperf enjoy`` does) and reads the console's RAM after every agent step, so that each
point is recorded with:

- who won it;
- who the ball was served to (Pong serves toward the player who lost the point before);
- the agent's returns in it (the ball turning back from the agent's side);
- its length in agent steps;
- the policy's mean entropy (nats) while the ball was in play and in the pause before it;
- the critic's value of the last observation before the serve.

Each game also records its frame parity: whether the agent's steps fall on even or odd
emulator frames. With an even frameskip (4) and a random number of no-op frames at the start,
a game stays on one parity from start to end, and the two parities are two different games to
a policy: the console moves the agent's paddle on even frames only, so on one parity the paddle
answers an action a frame later than on the other.

Per checkpoint it prints the mean score, the games scored at or below 0, the games with a run
of at least 12 points that alternate (won, lost, won, ...), and the share of points lost
after a point the agent won and after one it lost. Pong is deterministic once the actions are:
a policy whose way of winning a point leads into a serve it then loses alternates for the rest
of a game (about 21-19), while a game that reaches a point won after a won point can repeat
that point to 21-0; its games then split between the two. ``--by-parity`` prints the scores of
the games on even and on odd frames apart; ``--values`` the critic's values before the serves by
parity; ``--returns`` the points served to the opponent after a win by the agent's returns in them;
``--entropy`` the policy's entropy in the rallies by parity and serve. ``--start-parity even`` (or
``odd``) plays games on that frame parity only (``env.start_parity``; rlperf's own Atari env).

    python benchmarks/pong_points.py RUN_DIR --checkpoints ckpt_00000200_000000204800 \
        ckpt_00000300_000000307200 --games 16 --json points.json
    python benchmarks/pong_points.py --from-json points.json --markdown

``--from-json`` prints the summaries from recorded games (one file or several) without
playing; ``--after-win`` adds, per checkpoint, the points after a win grouped by how that point
was won and the game's frame parity. RAM addresses (ball x 49, y 54; the agent's paddle 51):
the Atari Annotated RAM Interface's for Pong.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

BALL_X, BALL_Y = 49, 54
"""Pong RAM: the ball's position; y is 0 between points (x then keeps its last value)."""
AGENT_SIDE_X = 100
"""The ball turns back from the agent's (right) side beyond this x: an agent return."""
AGENT_Y, WORK_BYTE = 51, 4
"""Pong RAM: the agent's paddle as drawn (51, annotated), and a byte the console rewrites every
frame (4, not in the annotated map): 110 on even frames, a working value on odd ones. Recorded
at each serve; the games' frame parity, which it follows, is recorded apart."""
ALTERNATING_RUN = 12
"""Points in a row that alternate between won and lost, to count a game as caught in a cycle."""


def play_points(
    run: Path, checkpoint: str | None, games: int, seed: int | None, **env_keys: Any
) -> list[dict]:
    """``games`` games of ``run``'s checkpoint (its latest when None), each with its points;
    ``env_keys`` replace the run's env settings (``repeat_action_probability=0``: a run trained
    with sticky actions, played on the game without them; ``start_parity``: games on one frame
    parity only)."""
    from rlperf.config.validate import load_valid_config
    from rlperf.enjoy import load_agent
    from rlperf.envs.make import make_env
    from rlperf.models.catalog import frame_dim

    cfg = load_valid_config(run / "config.yaml")
    env_cfg = dataclasses.replace(cfg.env, **env_keys)
    env = make_env(
        env_cfg, frame_dim(cfg.env, cfg.model), cfg.seed + 10_000 if seed is None else seed,
        training=False,
    )  # fmt: skip
    path = None if checkpoint is None else run / "checkpoints" / checkpoint
    obs_shape, num_actions = tuple(env.observation_space.shape or ()), int(env.action_space.n)
    agent = load_agent(run, cfg, path, obs_shape, num_actions)
    readings = policy_readings(run, cfg, path, obs_shape, num_actions)
    played = []
    try:
        for _ in range(games):
            played.append(_one_game(env, agent, readings))
    finally:
        env.close()
    return [
        {"checkpoint": agent.checkpoint.name, "env_steps": agent.env_steps, **game}
        for game in played
    ]


def policy_readings(
    run: Path, cfg: Any, path: Path | None, obs_shape: tuple[int, ...], num_actions: int
) -> Callable[[np.ndarray], tuple[float, float]]:
    """The entropy of the checkpoint's action distribution (nats) and its critic's value at an
    observation. A second copy of the network, so that the games themselves are exactly
    ``rlperf enjoy``'s."""
    import torch

    from rlperf.core.checkpoint import load_policy
    from rlperf.training.registry import acting_policy

    network = acting_policy(cfg, obs_shape, num_actions)
    load_policy(network, run, path, f"the run's network ({cfg.model.name})")
    network.eval()

    @torch.no_grad()
    def read(obs: np.ndarray) -> tuple[float, float]:
        logits, value = network(torch.from_numpy(obs).unsqueeze(0))
        entropy = torch.distributions.Categorical(logits=logits.float()).entropy()
        return float(entropy), float(value.float().reshape(-1)[0])

    return read


def _one_game(env: Any, agent: Any, readings: Callable[[np.ndarray], tuple[float, float]]) -> dict:
    """One game: its score, length and points (``env`` rlperf's AtariEnv, ``agent`` enjoy's)."""
    obs = env.reset()
    parity = env.frame_number() % 2
    points: list[dict] = []
    nats: dict[str, list[float]] = {"rally": [], "pause": []}
    steps = returns = 0
    served_to: str | None = None
    paddle: tuple[int, int] | None = None
    value: float | None = None
    prev_x = prev_dx = 0
    while True:
        nats_here, value_here = readings(obs)
        obs, reward, terminated, truncated, game_end = env.step(agent.act(obs, False))
        steps += 1
        ram = env.ram()
        x = int(ram[BALL_X]) if ram[BALL_Y] else 0
        nats["rally" if x else "pause"].append(nats_here)
        if x and paddle is None:
            paddle = (int(ram[AGENT_Y]), int(ram[WORK_BYTE]))
            value = value_here
        if x and prev_x:
            dx = x - prev_x
            if served_to is None and dx:
                served_to = "agent" if dx > 0 else "opponent"
            if dx < 0 < prev_dx and x > AGENT_SIDE_X:
                returns += 1
            prev_dx = dx or prev_dx
        prev_x = x
        if reward:
            points.append(
                {"won": reward > 0, "served_to": served_to, "returns": returns, "steps": steps,
                 "paddle_at_serve": paddle, "value_at_serve": value,
                 **{f"entropy_{k}": statistics.fmean(v) if v else None for k, v in nats.items()}}
            )  # fmt: skip
            nats = {"rally": [], "pause": []}
            steps = returns = prev_dx = 0
            served_to = paddle = value = None
        if game_end is not None:
            return {
                "score": float(game_end[0]), "length": int(game_end[1]),
                "frame_parity": "even" if parity == 0 else "odd", "points": points,
            }  # fmt: skip
        if terminated or truncated:
            obs = env.reset()


def longest_alternation(points: list[dict]) -> int:
    """The longest run of points in which each differs from the one before (won/lost)."""
    best = run = min(len(points), 1)
    for before, after in zip(points, points[1:], strict=False):
        run = run + 1 if before["won"] != after["won"] else 1
        best = max(best, run)
    return best


def loss_share_after(games: list[dict], won_before: bool) -> tuple[float, int]:
    """(share of points lost, points) among points that follow a point won (or lost)."""
    after = [
        point
        for game in games
        for before, point in zip(game["points"], game["points"][1:], strict=False)
        if before["won"] == won_before
    ]
    lost = sum(not p["won"] for p in after)
    return (lost / len(after) if after else float("nan")), len(after)


def figures(games: list[dict]) -> dict:
    """What the summary line and the table row print for the games of one checkpoint."""
    scores = [g["score"] for g in games]
    return {
        "scores": scores,
        "mean": statistics.mean(scores),
        "at_or_below_0": sum(s <= 0 for s in scores),
        "cycles": sum(longest_alternation(g["points"]) >= ALTERNATING_RUN for g in games),
        "after_win": loss_share_after(games, True),
        "after_loss": loss_share_after(games, False),
    }


def summary(games: list[dict]) -> str:
    """One line for the games of one checkpoint."""
    f = figures(games)
    (after_win, n_win), (after_loss, n_loss) = f["after_win"], f["after_loss"]
    return (
        f"{games[0]['checkpoint']}: mean {f['mean']:5.1f}, "
        f"at or below 0 {f['at_or_below_0']}/{len(games)}, "
        f"alternating runs >= {ALTERNATING_RUN} {f['cycles']}/{len(games)}; points lost after a "
        f"won point {after_win:.2f} (of {n_win}), after a lost one {after_loss:.2f} "
        f"(of {n_loss}); scores {sorted(int(s) for s in f['scores'])}"
    )


def table_row(label: str, games: list[dict]) -> str:
    """The games of one checkpoint as a Markdown table row (the docs' table)."""
    f = figures(games)
    return (
        f"| {label}, {games[0]['env_steps']:,} | {f['mean']:.1f} | {f['at_or_below_0']} | "
        f"{f['cycles']} | {f['after_win'][0]:.2f} | {f['after_loss'][0]:.2f} |"
    )


def parity_row(label: str, games: list[dict]) -> str:
    """The scores of one checkpoint's games on even and on odd frames, a Markdown table row:
    games, mean and range for each parity (records without a parity print "-")."""
    cells = []
    for parity in ("even", "odd"):
        scores = [g["score"] for g in games if g.get("frame_parity") == parity]
        cells.append(
            f"{len(scores)}, {statistics.mean(scores):.1f} ({min(scores):.0f} to {max(scores):.0f})"
            if scores
            else "-"
        )
    return f"| {label}, {games[0]['env_steps']:,} | {cells[0]} | {cells[1]} |"


def serve_groups(games: list[dict], field: str) -> Iterator[tuple[str, str, list[dict]]]:
    """Per frame parity and serve (to the agent, to the opponent), the points that record
    ``field``; groups without any are left out."""
    for parity in ("even", "odd"):
        for served_to in ("agent", "opponent"):
            points = [
                p
                for g in games
                if g.get("frame_parity") == parity
                for p in g["points"]
                if p["served_to"] == served_to and p.get(field) is not None
            ]
            if points:
                yield parity, served_to, points


def values_by_parity(games: list[dict]) -> list[str]:
    """Per frame parity and serve: the points, the share won and the critic's median value
    before the serve, then per parity the value at each game's first serve (records without
    values print nothing). Does the critic tell the two games apart where the points are won
    alike, and where the screen shows the same score?"""
    lines = []
    for parity, served_to, points in serve_groups(games, "value_at_serve"):
        won = sum(p["won"] for p in points) / len(points)
        value = statistics.median(p["value_at_serve"] for p in points)
        lines.append(
            f"{parity} frames, served to the {served_to}: {len(points)} points, "
            f"{won:.2f} won; the critic's median value before the serve {value:.3f}"
        )
    for parity in ("even", "odd"):
        # The first serve of a game is the one point both games show alike (0:0); later the
        # score on the screen differs with the games' fortunes, and the critic reads it.
        first = [
            g["points"][0]["value_at_serve"]
            for g in games
            if g.get("frame_parity") == parity
            and g["points"]
            and g["points"][0].get("value_at_serve") is not None
        ]
        if first:
            lines.append(
                f"{parity} frames, the first serve (0:0): {len(first)} games; the critic's "
                f"median value {statistics.median(first):.3f} ({min(first):.3f} to {max(first):.3f})"
            )
    return lines


def serves_after_a_win(game: dict) -> list[tuple[dict, dict]]:
    """A game's points served to the opponent after a point the agent won, each with that won
    point before it."""
    return [
        (before, point)
        for before, point in zip(game["points"], game["points"][1:], strict=False)
        if before["won"] and point["served_to"] == "opponent"
    ]


def after_a_win(games: list[dict]) -> list[str]:
    """Points served to the opponent after a won point, grouped by how that point was won (on
    whose serve) and the game's frame parity: points and points lost, largest group first."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for game in games:
        parity = game.get("frame_parity")
        for before, point in serves_after_a_win(game) if parity is not None else []:
            groups.setdefault((before["served_to"], parity), []).append(point)
    lines = []
    for (won_on, parity), points in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        nats = [p["entropy_rally"] for p in points if p.get("entropy_rally") is not None]
        values = [p["value_at_serve"] for p in points if p.get("value_at_serve") is not None]
        lines.append(
            f"after a point won on the {won_on}'s serve, {parity} frames: "
            f"{len(points)} points, {sum(not p['won'] for p in points)} lost"
            + (f", policy entropy in the rally {statistics.median(nats):.2f} nats" if nats else "")
            # whether the critic tells this serve from the other (a situation it knows is lost)
            + (
                f", the critic's median value at the serve {statistics.median(values):.2f}"
                if values
                else ""
            )
        )
    return lines


def returns_after_a_win(games: list[dict]) -> list[str]:
    """Per frame parity, the points served to the opponent after a won point by the agent's
    returns in them: how many were won and lost with no return, one, and more. A point won with
    one return is the ball the opponent cannot reach; one lost with one return is a ball the
    opponent sent back and the agent then missed."""
    lines = []
    for parity in ("even", "odd"):
        points = [
            point
            for game in games
            if game.get("frame_parity") == parity
            for _, point in serves_after_a_win(game)
        ]
        if not points:
            continue
        cells = []
        for bucket, label in enumerate(("no return", "one", "more")):
            group = [p for p in points if min(p["returns"], 2) == bucket]
            won = sum(p["won"] for p in group)
            cells.append(f"{label} {won} won / {len(group) - won} lost")
        lines.append(f"{parity} frames, served to the opponent after a win: " + "; ".join(cells))
    return lines


def entropy_by_parity(games: list[dict]) -> list[str]:
    """Per frame parity and serve: the points and the policy's median entropy while the ball
    was in play (records without it print nothing). Is the game a policy loses played more
    surely than the one it wins, so that its random variation cannot find the winning return?"""
    return [
        f"{parity} frames, served to the {served_to}: {len(points)} points; the policy's "
        f"median entropy in the rally {statistics.median(p['entropy_rally'] for p in points):.2f} nats"
        for parity, served_to, points in serve_groups(games, "entropy_rally")
    ]


def print_summaries(
    games: list[dict],
    label: str,
    markdown: bool = False,
    after_win: bool = False,
    by_parity: bool = False,
    values: bool = False,
    returns: bool = False,
    entropy: bool = False,
) -> None:
    """A line (or a table row) per checkpoint, in env-step order; with ``by_parity`` the row of
    scores by frame parity instead; with ``after_win`` the checkpoint's points after a win
    follow, grouped (records without a parity print none); with ``values`` the critic's values
    before the serves by parity; with ``returns`` those points by the agent's returns in them;
    with ``entropy`` the policy's entropy in the rallies by parity."""
    by_checkpoint: dict[str, list[dict]] = {}
    for game in sorted(games, key=lambda g: g["env_steps"] or 0):
        by_checkpoint.setdefault(game["checkpoint"], []).append(game)
    for played in by_checkpoint.values():
        if by_parity:
            print(parity_row(label, played))
        else:
            print(table_row(label, played) if markdown else f"{label}  {summary(played)}")
        for line in after_a_win(played) if after_win else []:
            print(f"    {line}")
        for line in values_by_parity(played) if values else []:
            print(f"    {line}")
        for line in returns_after_a_win(played) if returns else []:
            print(f"    {line}")
        for line in entropy_by_parity(played) if entropy else []:
            print(f"    {line}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", nargs="?", type=Path, help="a run directory with checkpoints")
    p.add_argument("--checkpoints", nargs="*", default=[None], help="names (default: latest)")
    p.add_argument("--games", type=int, default=16)
    p.add_argument("--seed", type=int, default=None, help="env seed (default: run's + 10000)")
    p.add_argument(
        "--sticky", type=float, default=None, help="play with this repeat_action_probability"
    )
    p.add_argument(
        "--start-parity", choices=("any", "even", "odd"), help="play games on this parity only"
    )
    p.add_argument("--json", type=Path, help="write the games played here")
    p.add_argument("--from-json", nargs="+", type=Path, help="print recorded games instead")
    p.add_argument("--markdown", action="store_true", help="print Markdown table rows")
    p.add_argument("--after-win", action="store_true", help="also group the points after a win")
    p.add_argument(
        "--by-parity", action="store_true", help="scores of games on even and odd frames (rows)"
    )
    p.add_argument("--values", action="store_true", help="also the critic's values by parity")
    p.add_argument(
        "--returns", action="store_true", help="also the points after a win by the returns in them"
    )
    p.add_argument("--entropy", action="store_true", help="also the rallies' entropy by parity")
    args = p.parse_args()

    def show(games: list[dict], label: str) -> None:
        print_summaries(
            games, label, args.markdown, args.after_win, args.by_parity, args.values,
            args.returns, args.entropy,
        )  # fmt: skip

    if args.from_json:
        for path in args.from_json:
            record = json.loads(path.read_text())
            games = record.get("games") if isinstance(record, dict) else None
            if not isinstance(games, list) or "run" not in record:
                p.error(f"{path} is not a record of this script's --json (a run and its games)")
            show(games, record["run"])
        return
    if args.run is None:
        p.error("give a run directory or --from-json")
    env_keys = {
        key: value
        for key, value in (
            ("repeat_action_probability", args.sticky),
            ("start_parity", args.start_parity),
        )
        if value is not None
    }
    games = [
        g
        for c in args.checkpoints
        for g in play_points(args.run, c, args.games, args.seed, **env_keys)
    ]
    show(games, args.run.name)
    if args.json:
        args.json.write_text(json.dumps({"run": args.run.name, "games": games}) + "\n")


if __name__ == "__main__":
    main()
