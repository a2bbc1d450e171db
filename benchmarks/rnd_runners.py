"""RND on Montezuma's Revenge: the synchronous runner against the decoupled one.

Two measurements, each a real ``rlperf train`` in its own process (``--preset
rnd-montezuma-small`` unless ``--preset`` says otherwise):

``speed``   rounds of short runs, the runners interleaved within each round so machine
            drift hits both alike; per run the median SPS of its iterations (warm-up and
            normaliser-initialisation iterations left out) and the mean phase split; over
            the rounds the median, min-max and the ratio decoupled / inproc.
``learning`` one longer run per runner at the same budget of wall time, checkpoints along
            the way; the metrics at env-step milestones (intrinsic reward per step,
            extrinsic reward per rollout, true game score) side by side, and each kept
            checkpoint played for ``--games`` games (``rlperf enjoy``'s code) for the rooms
            it visits: rooms over time.

    python benchmarks/rnd_runners.py speed --seconds 90 --rounds 2 --cases inproc,inproc-1t,decoupled
    python benchmarks/rnd_runners.py learning --seconds 600 --games 1

Extra ``KEY=VALUE`` arguments go to every ``rlperf train``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

RUNNERS = ("inproc", "decoupled")
# speed cases: name -> (runner, extra overrides). The decoupled runner gives its learner the
# cores its actors leave (1 of 2 here); inproc-1t gives the synchronous learner the same.
CASES = {
    "inproc": ("inproc", []),
    "inproc-1t": ("inproc", ["runner.torch_threads=1"]),
    "decoupled": ("decoupled", []),
}
PHASES = ("sample", "load", "learn", "update", "other")
ACTOR_PHASES = ("env_step", "policy_forward", "actor_weight_sync", "actor_slot_wait")


def train(runs_root: Path, name: str, runner: str, seconds: float, preset: str,
          extra: list[str]) -> Path:  # fmt: skip
    cmd = [
        sys.executable, "-m", "rlperf", "train", "--preset", preset, "--runner", runner,
        f"stop.wall_time_s={seconds}", "stop.total_timesteps=null", "--no-progress",
        "--runs-root", str(runs_root), "-s", name, *extra,
    ]  # fmt: skip
    print("$", " ".join(cmd[1:]), flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return runs_root / name


def rows(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def learning_rows(run_dir: Path) -> list[dict[str, Any]]:
    """Iterations that trained (not warm-up, not normaliser initialisation)."""
    return [r for r in rows(run_dir) if not r["warmup"] and "charts/rnd_init_steps" not in r]


def summarise(run_dir: Path) -> dict[str, float]:
    rs = learning_rows(run_dir)
    if not rs:
        raise SystemExit(f"{run_dir}: no learning iterations; give it more --seconds")
    out = {"sps": statistics.median(r["SPS"] for r in rs), "iterations": float(len(rs))}
    wall = statistics.mean(r["time_this_iter_s"] for r in rs) * 1000
    out["wall_ms"] = wall
    for p in PHASES:
        out[p] = statistics.mean(r[f"{p}_time_ms"] for r in rs)
    for p in ACTOR_PHASES:
        values = [r[f"perf/{p}_time_ms"] for r in rs if r.get(f"perf/{p}_time_ms") is not None]
        if values:
            out[p] = statistics.mean(values)
    lags = [r["perf/policy_lag"] for r in rs if r.get("perf/policy_lag") is not None]
    if lags:
        out["lag"] = statistics.mean(lags)
    return out


def speed(args: argparse.Namespace) -> None:
    for spec in args.case:
        # NAME=RUNNER[,KEY=VALUE...]: a case of one's own (e.g. GPU placements)
        name, _, rest = spec.partition("=")
        runner, *overrides = rest.split(",")
        CASES[name] = (runner, overrides)
    cases = args.cases.split(",")
    results: dict[str, list[dict[str, float]]] = {c: [] for c in cases}
    for k in range(args.rounds):
        for case in cases if k % 2 == 0 else cases[::-1]:
            runner, extra = CASES[case]
            run = train(args.runs_root, f"speed-{case}-{k}", runner, args.seconds,
                        args.preset, [*extra, *args.extra])  # fmt: skip
            results[case].append(summarise(run))
    base = statistics.median(s["sps"] for s in results[cases[0]])
    print(f"\n| case | median SPS | min-max | runs | ratio to {cases[0]} |")
    print("| --- | --- | --- | --- | --- |")
    for case in cases:
        sps = [s["sps"] for s in results[case]]
        med = statistics.median(sps)
        print(f"| {case} | {med:,.0f} | {min(sps):,.0f}-{max(sps):,.0f} | {len(sps)} | "
              f"{med / base:.2f}x |")  # fmt: skip
    print("\nmean ms per iteration (learner phases add up to wall; actor phases are the")
    print("actor processes' own seconds for the rollouts of one batch, overlapping the learner)")
    print("\n| case | wall | sample | load | learn | update | other | env_step | "
          "policy_forward | lag |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for case in cases:
        s = results[case]

        def mean(key: str, s: list[dict[str, float]] = s) -> str:
            values = [x[key] for x in s if key in x]
            return f"{statistics.mean(values):,.0f}" if values else "-"

        lag = [x["lag"] for x in s if "lag" in x]
        print(f"| {case} | {mean('wall_ms')} | "
              + " | ".join(mean(p) for p in PHASES)
              + f" | {mean('env_step')} | {mean('policy_forward')} | "
              + (f"{statistics.mean(lag):.2f} |" if lag else "0 |"))  # fmt: skip


def rooms_of_checkpoints(run_dir: Path, games: int) -> list[tuple[int, list[int], float]]:
    """(env steps, rooms visited over ``games`` games, mean score) of each kept checkpoint."""
    from rlperf.enjoy import play

    out = []
    for ckpt in sorted((run_dir / "checkpoints").glob("ckpt_*")):
        env_steps = int(ckpt.name.split("_")[-1])
        results = play(run_dir, episodes=games, checkpoint=ckpt, report=lambda _: None)
        rooms = sorted({room for r in results for room in r.rooms or []})
        out.append((env_steps, rooms, statistics.mean(r.total_reward for r in results)))
    return out


def learning(args: argparse.Namespace) -> None:
    runs = {}
    for runner in RUNNERS:
        runs[runner] = train(
            args.runs_root, f"learn-{runner}", runner, args.seconds, args.preset,
            [f"checkpoint.every={args.checkpoint_every}", "checkpoint.keep=1000", *args.extra],
        )  # fmt: skip
    print("\n| runner | env steps | wall s | int reward / step | ext reward / rollout | "
          "game score (mean100) | games |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for runner, run in runs.items():
        rs = learning_rows(run)
        marks = [rs[int(i * (len(rs) - 1) / (args.milestones - 1))] for i in range(args.milestones)]
        for r in marks:
            score = r.get("episode_reward_mean")
            print(f"| {runner} | {r['timesteps_total']:,} | {r['time_total_s']:.0f} | "
                  f"{r['charts/int_reward_mean']:.3f} | {r['charts/ext_reward_per_rollout']:.2f} | "
                  f"{'-' if score is None else f'{score:.0f}'} | {r['episodes_total']} |")  # fmt: skip
    print(f"\nrooms visited by each checkpoint ({args.games} game(s) each, stochastic play)")
    print("\n| runner | env steps | rooms | score |")
    print("| --- | --- | --- | --- |")
    for runner, run in runs.items():
        for env_steps, rooms, score in rooms_of_checkpoints(run, args.games):
            print(f"| {runner} | {env_steps:,} | {{{', '.join(map(str, rooms))}}} | {score:g} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=["speed", "learning"])
    p.add_argument("--seconds", type=float, default=90, help="wall time of each training run")
    p.add_argument("--rounds", type=int, default=2, help="speed: rounds of every case")
    p.add_argument(
        "--cases", default="inproc,inproc-1t,decoupled", help="speed: " + ", ".join(CASES)
    )
    p.add_argument("--case", action="append", default=[], metavar="NAME=RUNNER[,KEY=VALUE...]",
                   help="speed: define a case (then name it in --cases)")  # fmt: skip
    p.add_argument("--preset", default="rnd-montezuma-small")
    p.add_argument("--runs-root", type=Path, default=Path(tempfile.mkdtemp(prefix="rnd-bench-")))
    p.add_argument("--checkpoint-every", type=int, default=40, help="learning: iterations")
    p.add_argument("--games", type=int, default=1, help="learning: games per checkpoint")
    p.add_argument("--milestones", type=int, default=5, help="learning: rows per runner")
    args, extra = p.parse_known_args()
    args.extra = extra  # KEY=VALUE overrides for every run
    args.runs_root.mkdir(parents=True, exist_ok=True)
    speed(args) if args.mode == "speed" else learning(args)


if __name__ == "__main__":
    main()
