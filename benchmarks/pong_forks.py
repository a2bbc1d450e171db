"""Branches forked from one checkpoint: how long each took to leave a stall.

A run resumed with another seed (``rlperf train --resume DIR --seed K``) forks at its
checkpoint: the weights, optimizer and counters are the checkpoint's, the draws after it
come from K (the manifest's ``branches`` says where). This prints, for every run folder
given (or found under a folder given), where it forked, the mean of 100 games there, and
the env steps from the fork to the first update of PPO's late phase (``ppo.late_phase_*``),
or where the branch stopped without one; for a fork below a mean of 0, also where the mean
reached 0 and the env steps from there to the late phase. With ``--until stop``, instead: the
env steps from the fork to the run's stop at its target, or where it ended without it, with
the mean of 100 and each frame parity's last 10 games there. Then the median of each group of
branches (the group is the folder name up to its last ``-``: ``fork-s14-ent0.02-101`` is in
``fork-s14-ent0.02``). A run resumed with its own seed has no fork in its manifest; it is read
from the branches' fork point (the same checkpoint; its games restart, as on any resume, so it
tells what the restart alone does). With ``--original RUN`` the unforked run's own late phase
is printed against the same fork point:

    python benchmarks/pong_forks.py docs/bench-pong-spread/bench-pong-stall-forks/runs \
        --original docs/bench-pong-spread/bench-pong-lateent-cand/runs/atari-fast-minsps2400-lateent0.003__ALE-Pong-v5__s14

Reads metrics.jsonl and manifest.json only.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from pong_climb import first_late_phase, first_reaching, read_records


def late_phase_steps(rows: list[dict]) -> int | None:
    """Env steps at the first record of the late phase (None: the run never began it)."""
    first = first_late_phase(rows)
    return None if first is None else first["timesteps_total"]


def mean100_at(rows: list[dict], env_steps: int) -> float | None:
    """The mean of the last 100 games at the record nearest ``env_steps``."""
    row = min(rows, key=lambda r: abs(r["timesteps_total"] - env_steps))
    return row.get("episode_reward_mean")


def stop_line(rows: list[dict], manifest: dict, at: int) -> tuple[int | None, str]:
    """(env steps from the fork to the run's stop at its target, or None; the printed tail)."""
    last = rows[-1]
    end = last["timesteps_total"]
    games = (
        f"mean of 100 {last['episode_reward_mean']:.2f}, last 10 games even"
        f" {last.get('parity/even_reward_mean')} / odd {last.get('parity/odd_reward_mean')}"
    )
    if manifest.get("stop_reason") == "target_reward":
        return (
            end - at,
            f"stopped at the target at {end / 1e3:,.0f} k, {(end - at) / 1e3:,.0f} k after ({games})",
        )
    return (
        None,
        f"no stop at the target by {end / 1e3:,.0f} k ({manifest.get('stop_reason')}; {games})",
    )


def median_with_misses(steps: list[int | None]) -> str:
    """The median with branches that never got there (None) ranked as the longest; when the
    median falls among those, it says so instead of giving a number."""
    ranked = sorted(steps, key=lambda s: float("inf") if s is None else s)
    middle = ranked[(len(ranked) - 1) // 2 : len(ranked) // 2 + 1]
    if any(s is None for s in middle):
        return "beyond the last record (at least half never got there)"
    return f"{statistics.median(middle) / 1e3:,.0f} k"


def branch_line(
    run: Path, resumed_at: int | None, until_stop: bool = False
) -> tuple[str, int | None, str]:
    """(group, env steps from the fork to the late phase, or with ``until_stop`` to the stop
    at the target, or None; the printed line). A run without a fork in its manifest was
    resumed with its own seed: ``resumed_at`` is where."""
    manifest = json.loads((run / "manifest.json").read_text())
    forks = manifest.get("branches") or []
    rows = read_records(run)
    if forks:
        at, how = (
            int(forks[-1]["env_steps"]),
            f"seed {forks[-1]['from_seed']} -> {forks[-1]['seed']}",
        )
    elif resumed_at is not None and rows[-1]["timesteps_total"] > resumed_at:
        at, how = resumed_at, f"resumed with its own seed {manifest.get('seed')}"
    else:
        return (
            "",
            None,
            f"{run.name}: not a branch (no fork in its manifest; a resume with its own seed needs --resumed-at)",
        )
    head = f"{run.name}: from {at / 1e3:,.0f} k ({how}, mean of 100 {mean100_at(rows, at):.2f}), "
    group = run.name.rsplit("-", 1)[0]
    if until_stop:
        steps, tail = stop_line(rows, manifest, at)
        return group, steps, head + tail
    late = late_phase_steps(rows)
    if late is None or late <= at:
        end = rows[-1]["timesteps_total"]
        return (
            group,
            None,
            head + f"no late phase by {end / 1e3:,.0f} k ({manifest.get('stop_reason')})",
        )
    line = head + f"late phase at {late / 1e3:,.0f} k, {(late - at) / 1e3:,.0f} k after"
    zero = first_reaching([r for r in rows if r["timesteps_total"] > at], 0.0)
    if zero is not None and mean100_at(rows, at) < 0:
        zero_at = zero["timesteps_total"]
        line += (
            f"; a mean of 0 at {zero_at / 1e3:,.0f} k, {(late - zero_at) / 1e3:,.0f} k before it"
        )
    return group, late - at, line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "folders", nargs="+", type=Path, help="branch run folders, or folders of them"
    )
    parser.add_argument("--original", type=Path, help="the unforked run, for its own late phase")
    parser.add_argument(
        "--resumed-at",
        type=int,
        help="where runs without a fork resumed (default: the branches' fork point, if one)",
    )
    parser.add_argument(
        "--until",
        choices=("late-phase", "stop"),
        default="late-phase",
        help="measure from the fork to the late phase (default) or to the stop at the target",
    )
    args = parser.parse_args()
    until_stop = args.until == "stop"
    runs: list[Path] = []
    for folder in args.folders:
        if not folder.is_dir():
            continue  # a shell glob's log files beside the run folders
        if (folder / "manifest.json").exists():
            runs.append(folder)
        else:
            runs += sorted(d for d in folder.iterdir() if (d / "manifest.json").exists())
    manifests = {run: json.loads((run / "manifest.json").read_text()) for run in runs}
    fork_points = {m["branches"][-1]["env_steps"] for m in manifests.values() if m.get("branches")}
    resumed_at = args.resumed_at or (next(iter(fork_points)) if len(fork_points) == 1 else None)
    groups: dict[str, list[int | None]] = {}
    for run in runs:
        group, steps, line = branch_line(run, resumed_at, until_stop)
        print(line)
        if group:
            groups.setdefault(group, []).append(steps)
    goal = "the stop at the target" if until_stop else "the late phase"
    for group, steps in groups.items():
        print(
            f"{group}: {len(steps)} branch(es), {sum(s is not None for s in steps)} got there;"
            f" median {median_with_misses(steps)} from the fork to {goal}"
        )
    if args.original:
        late = late_phase_steps(read_records(args.original))
        for at in sorted(fork_points):
            gap = "never" if late is None else f"{(late - at) / 1e3:,.0f} k after {at / 1e3:,.0f} k"
            print(f"{args.original.name} (unforked): late phase {gap}")


if __name__ == "__main__":
    main()
