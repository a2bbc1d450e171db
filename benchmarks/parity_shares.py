"""Each frame-parity game's share of a Pong run's data, window by window.

At an even frame skip every env plays a game on one frame parity until the game ends, so a
rollout's data is split between the two games (the even-frame and the odd-frame one) as the
envs are; a run records that split as ``parity/odd_share`` (the share of an iteration's steps
on odd frames). This prints, for each run folder given, per window of iterations: the env
steps at its end, the mean of 100 games, the last ten games' mean on each parity
(``parity/even_reward_mean``, ``parity/odd_reward_mean``) and the odd-frame game's mean share
over the window. Then, over ``--stretch A B`` (env steps), the mean share of the parity ahead
at the run's last record (the game that leads at its end):

    python benchmarks/parity_shares.py runs/share-gym2-s12 runs/share-gym2-s9 --window 50 \
        --stretch 204800 409600

Reads metrics.jsonl only.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pong_climb import read_records


def share_records(run: Path) -> list[dict]:
    """The run's records that carry a share (runs from before the record have none)."""
    return [r for r in read_records(run) if r.get("parity/odd_share") is not None]


def leading_parity(rows: list[dict]) -> int | None:
    """The parity whose last ten games' mean is the higher at the last record (None: tied
    or not known)."""
    last = rows[-1]
    even, odd = last.get("parity/even_reward_mean"), last.get("parity/odd_reward_mean")
    if even is None or odd is None or even == odd:
        return None
    return int(odd > even)


def stretch_share(rows: list[dict], parity: int, start: int, end: int) -> float:
    """The mean share of ``parity``'s game over the records with env steps in (start, end]."""
    odd = [r["parity/odd_share"] for r in rows if start < r["timesteps_total"] <= end]
    if not odd:
        raise SystemExit(f"no records between {start} and {end} env steps")
    mean_odd = sum(odd) / len(odd)
    return mean_odd if parity == 1 else 1.0 - mean_odd


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--window", type=int, default=50, help="iterations per window")
    parser.add_argument("--stretch", type=int, nargs=2, metavar=("A", "B"))
    args = parser.parse_args()
    for run in args.runs:
        rows = share_records(run)
        if not rows:
            raise SystemExit(f"{run}: no record carries parity/odd_share")
        print(f"{run}")
        print("  env steps | mean of 100 | even / odd last ten | odd share")
        for start in range(0, len(rows), args.window):
            window = rows[start : start + args.window]
            last = window[-1]
            share = sum(r["parity/odd_share"] for r in window) / len(window)
            print(
                f"  {last['timesteps_total']:>9,} | {_fmt(last['episode_reward_mean']):>11} | "
                f"{_fmt(last.get('parity/even_reward_mean')):>5} / "
                f"{_fmt(last.get('parity/odd_reward_mean')):<5} | {share:.3f}"
            )
        if args.stretch:
            ahead = leading_parity(rows)
            if ahead is None:
                print("  neither parity ahead at the last record")
                continue
            share = stretch_share(rows, ahead, *args.stretch)
            name = ("even", "odd")[ahead]
            print(
                f"  ahead at the end: {name}; its share over {args.stretch[0]:,}-"
                f"{args.stretch[1]:,}: {share:.3f}"
            )


if __name__ == "__main__":
    main()
