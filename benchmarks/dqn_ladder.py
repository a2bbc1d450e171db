"""FPS of every rung of the DQN speed ladder (source 003) on this machine, side by side.

Each rung (``--preset dqn-ladder/NN-name``) trains DQN on Pong for the same wall-clock
budget, ``--rounds`` times, interleaved (A B C, then C B A) with
``benchmarks/peers/compare.py``'s schedule so that drift on a shared machine lands on every
rung alike. The replay is filled with ``--learning-starts`` transitions first (003 uses
10k; the fill is acting only and is marked warm-up), so the figures are training speed:

- FPS: the median over the run's post-warm-up iterations of ``perf/fps`` (frames per
  second, frames = env steps x frameskip 4, as 003 counts them), and the steady SPS (env
  steps per second) from the iterations' totals;
- the ratio of the rung's median FPS to ``01-baseline``'s;
- memory: the largest ``sys/proc_rss_mb`` (trainer plus play process) of the run, at the
  replay fill the budget reached (a full 100k replay adds up to 0.7 GB of frames).

Example (from the repo root; ~15 minutes)::

    .venv/bin/python benchmarks/dqn_ladder.py --seconds 60 --rounds 2

Raw records are appended to ``--out`` (one JSON object per run), the table is printed in
Markdown for docs/dqn.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
import compare  # noqa: E402  (benchmarks/peers/compare.py: schedule and run_case)

RUNGS = [
    "00-slow-grads",
    "01-baseline",
    "02-n-envs",
    "03-play-train-processes",
    "04-tweaked-wrappers",
    "05-native-engine",
]
BASELINE = "01-baseline"


def rung_command(
    rung: str, runs_root: Path, learning_starts: int, steps_per_iteration: int, extra: str
) -> str:
    """The ``rlperf train`` command of one rung; ``{seconds}`` and ``{round}`` are filled in
    by compare.Case.render."""
    warmup = math.ceil(learning_starts / steps_per_iteration) + 1
    return (
        f"{sys.executable} -m rlperf train --algo dqn --env ALE/Pong-v5 "
        f"--preset dqn-ladder/{rung} --runs-root {runs_root} -s {rung}__r{{round}} "
        f"--no-progress stop.wall_time_s={{seconds}} dqn.learning_starts={learning_starts} "
        f"dqn.steps_per_iteration={steps_per_iteration} telemetry.warmup_iterations={warmup} "
        f"telemetry.tensorboard=false checkpoint.every=0 {extra}"
    ).strip()


def summarize_run(run_dir: Path) -> dict[str, Any]:
    """Median FPS, RSS and CPU of one run's post-warm-up training iterations."""
    rows = compare.read_metrics(run_dir / "metrics.jsonl")
    steady = [r for r in rows if not r.get("warmup") and r.get("perf/gradient_steps", 0) > 0]
    fps = [r["perf/fps"] for r in steady if r.get("perf/fps")]
    rss = [r["sys/proc_rss_mb"] for r in rows if r.get("sys/proc_rss_mb") is not None]
    cpu = [r["sys/proc_cpu_percent"] for r in steady if r.get("sys/proc_cpu_percent") is not None]
    return {
        "median_fps": statistics.median(fps) if fps else None,
        "iterations_measured": len(fps),
        "rss_mb_max": max(rss) if rss else None,
        "proc_cpu_percent": statistics.mean(cpu) if cpu else None,
        "replay_transitions": rows[-1].get("perf/replay_transitions") if rows else None,
    }


def table(records: list[dict[str, Any]], rungs: list[str]) -> str:
    rows = []
    for rung in rungs:
        runs = [r for r in records if r["case"] == rung and r.get("median_fps")]
        fps = [r["median_fps"] for r in runs]
        sps = [r["sps"] for r in runs if r.get("sps")]
        rss = [r["rss_mb_max"] for r in runs if r.get("rss_mb_max")]
        rows.append((rung, fps, sps, rss))
    base = next((statistics.median(f) for r, f, _, _ in rows if r == BASELINE and f), None)
    out = [
        "| rung | FPS (median) | min-max | SPS | x 01 | RSS MiB | runs |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for rung, fps, sps, rss in rows:
        if not fps:
            out.append(f"| {rung} | - | - | - | - | - | 0 |")
            continue
        med = statistics.median(fps)
        ratio = f"{med / base:.2f}x" if base else "-"
        out.append(
            f"| {rung} | {med:.0f} | {min(fps):.0f}-{max(fps):.0f} | "
            f"{statistics.median(sps):.1f} | {ratio} | {max(rss):.0f} | {len(fps)} |"
        )
    out.append("FPS = frames/s (env steps x frameskip 4); SPS = env steps/s; ratio to 01-baseline")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60.0, help="training budget per run")
    p.add_argument("--rounds", type=int, default=2, help="runs per rung (interleaved)")
    p.add_argument("--rungs", default=",".join(RUNGS), help="comma-separated rungs")
    p.add_argument("--learning-starts", type=int, default=2000, help="replay fill (warm-up)")
    p.add_argument("--steps-per-iteration", type=int, default=500, help="env steps per record")
    p.add_argument("--extra", default="", help="overrides added to every rung's command")
    p.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=RUNG OVERRIDES",
        help="an extra case: a rung with overrides, e.g. '05+bf16=05-native-engine "
        "runner.precision=bf16' (repeatable; reported after the rungs)",
    )
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/dqn_ladder.jsonl"))
    p.add_argument("--runs-root", type=Path, help="keep the runs here (default: a temp dir)")
    args = p.parse_args(argv)
    rungs = [r for r in args.rungs.split(",") if r]
    runs_root = args.runs_root or Path(tempfile.mkdtemp(prefix="dqn-ladder-"))
    cases = [
        compare.Case(
            rung,
            rung_command(
                rung, runs_root, args.learning_starts, args.steps_per_iteration, args.extra
            ),
        )
        for rung in rungs
    ]
    for spec in args.variant:
        name, _, rest = spec.partition("=")
        rung, _, overrides = rest.strip().partition(" ")
        command = rung_command(
            rung, runs_root, args.learning_starts, args.steps_per_iteration, args.extra
        )
        cases.append(
            compare.Case(name, f"{command} {overrides}".replace(f"-s {rung}__", f"-s {name}__"))
        )
    session = {"session": uuid.uuid4().hex[:12], "host": platform.node(), "cpus": os.cpu_count()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    records: list[dict[str, Any]] = []
    plan = compare.schedule(cases, args.rounds)
    for i, (r, case) in enumerate(plan):
        print(f"[{i + 1}/{len(plan)}] round {r} {case.name} ...", file=sys.stderr, flush=True)
        record = {
            **session,
            **compare.run_case(case, r, args.seconds, 3 * args.seconds + 300, Path.cwd()),
        }
        run_dir = (record.get("result") or {}).get("run_dir")
        if run_dir:
            record.update(summarize_run(Path(run_dir)))
        record["loadavg_after"] = os.getloadavg()[0]
        records.append(record)
        with args.out.open("a") as f:
            f.write(json.dumps(record) + "\n")
        fps = record.get("median_fps")
        status = f"{fps:.0f} FPS" if fps else record.get("error", "no FPS")
        print(
            f"    {case.name}: {status} (load {record['loadavg_before']:.1f} -> "
            f"{record['loadavg_after']:.1f})",
            file=sys.stderr,
            flush=True,
        )
        time.sleep(1.0)
    print(table(records, [c.name for c in cases]))
    print(f"raw results appended to {args.out} (session {session['session']})")
    return 0 if all(r.get("median_fps") for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
