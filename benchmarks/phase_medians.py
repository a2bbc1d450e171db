"""Where each run's iterations went: per run folder, the medians over its non-warm-up
iterations of the phases (sample, env step, policy forward, learn), the iteration itself and
the machine's CPU use, one JSON line per run.

    python benchmarks/phase_medians.py /tmp/bench-omp3/r* > phases.jsonl

The arms of a ``benchmarks/peers/compare.py`` comparison compared phase by phase: a change
that shortens the env step can lengthen the learn phase, which SPS alone does not show.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

PHASES = {
    "sample_ms": "sample_time_ms",
    "env_step_ms": "perf/env_step_time_ms",
    "forward_ms": "perf/policy_forward_time_ms",
    "learn_ms": "learn_time_ms",
    "cpu_percent": "sys/cpu_percent",
}


def phase_medians(run_dir: Path) -> dict[str, object]:
    """The medians of :data:`PHASES` and of the iteration (ms) over ``run_dir``'s iterations
    after warm-up; a key its records lack is left out."""
    with open(run_dir / "metrics.jsonl") as f:
        rows = [r for r in map(json.loads, f) if "iteration" in r and not r.get("warmup")]
    out: dict[str, object] = {"run": run_dir.name, "iterations": len(rows)}
    if not rows:
        return out
    out["iteration_ms"] = round(1e3 * statistics.median(r["time_this_iter_s"] for r in rows), 1)
    for name, key in PHASES.items():
        values = [r[key] for r in rows if r.get(key) is not None]
        if values:
            out[name] = round(statistics.median(values), 1)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dirs", nargs="+", type=Path)
    args = p.parse_args()
    for run_dir in sorted(args.run_dirs):
        print(json.dumps(phase_medians(run_dir)))


if __name__ == "__main__":
    main()
