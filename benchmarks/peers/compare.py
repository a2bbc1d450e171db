"""Interleaved side-by-side throughput comparison of training commands.

Runs each named command ("case") for the same wall-clock budget, ``--rounds`` times,
interleaved (A B, then B A, ...) so that slow drift on a shared machine (thermal, other
users' jobs) lands on every case alike instead of on whichever ran last. Each run's
steady-state SPS (env steps per second, warm-up excluded) comes from either

* the last ``RESULT {json}`` line on its stdout (key ``sps``), as ``sb3_ppo.py`` prints, or
* when there is no RESULT line, a ``run_dir: PATH`` line (as rlperf prints): SPS is then
  computed from ``PATH/metrics.jsonl`` over the non-warm-up iterations.

Example (from the repo root)::

    python benchmarks/peers/compare.py --seconds 60 --rounds 3 --baseline sb3 \\
        --case sb3="benchmarks/.venv-peers/bin/python benchmarks/peers/sb3_ppo.py \\
                    --seconds {seconds} --threads 2" \\
        --case rlperf="rlperf train --preset cleanrl-atari --seconds {seconds}"

In a command, ``{seconds}`` is replaced by the budget and ``{round}`` by the round number
(0-based). Commands run through ``/bin/sh`` so environment assignments such as
``OMP_NUM_THREADS=2 cmd`` work. Raw results are appended, one JSON object per run, to
``--out`` (default ``benchmarks/results/peers.jsonl``).

Only the standard library is used, so this runs under any Python 3.11 (rlperf's venv, the
peers venv or the system interpreter).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESULT_PREFIX = "RESULT "
RUN_DIR_RE = re.compile(r"^\s*run_dir:\s*(?P<path>\S.*?)\s*$")
DEFAULT_OUT = Path("benchmarks/results/peers.jsonl")
# Characters of a failed run's output kept in the JSONL record, enough to see the error.
TAIL_CHARS = 4000


@dataclass(frozen=True)
class Case:
    """A named command template to benchmark."""

    name: str
    command: str

    def render(self, seconds: float, round_index: int) -> str:
        """Substitute ``{seconds}`` and ``{round}``.

        Plain replacement rather than ``str.format`` so that other braces in a command
        (shell ``${VAR}``, JSON arguments) are left alone.
        """
        secs = f"{seconds:g}"
        return self.command.replace("{seconds}", secs).replace("{round}", str(round_index))


def parse_case(spec: str) -> Case:
    """Parse ``NAME=COMMAND`` as given to ``--case``."""
    name, sep, command = spec.partition("=")
    name, command = name.strip(), command.strip()
    if not sep or not name or not command:
        raise argparse.ArgumentTypeError(f"--case expects NAME=COMMAND, got {spec!r}")
    return Case(name, command)


def parse_result_line(stdout: str) -> dict[str, Any] | None:
    """Return the JSON object of the last ``RESULT {json}`` line, or None if there is none.

    The last one wins because a program may print intermediate results; a RESULT line that
    is not valid JSON is an error in the program under test, so it raises ``ValueError``.
    """
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            payload = json.loads(line[len(RESULT_PREFIX) :])
            if not isinstance(payload, dict):
                raise ValueError(f"RESULT payload is not a JSON object: {line!r}")
            return payload
    return None


def parse_run_dir(stdout: str) -> Path | None:
    """Return the path from the last ``run_dir: PATH`` line of a run's stdout, if any."""
    for line in reversed(stdout.splitlines()):
        match = RUN_DIR_RE.match(line)
        if match:
            return Path(match.group("path"))
    return None


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """Read per-iteration records from a ``metrics.jsonl`` file.

    Blank lines are skipped, and so is an unparsable *last* line: a run killed mid-write
    leaves a truncated final record, which should not lose the iterations before it. A bad
    line anywhere else means the file is corrupt and raises ``ValueError``.
    """
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    records: list[dict[str, Any]] = []
    for i, line in enumerate(lines):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if i == len(lines) - 1:
                break
            raise ValueError(f"{path}:{i + 1}: invalid JSON: {exc}") from exc
        if isinstance(record, dict):
            records.append(record)
    return records


def steady_state_from_metrics(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Steady-state SPS from per-iteration metrics, excluding warm-up iterations.

    Each record holds cumulative ``timesteps_total`` and ``time_total_s`` at the end of
    iteration ``iteration`` and a ``warmup`` flag. The measured window runs from the end of
    the last warm-up iteration (or from zero if none is flagged) to the end of the last
    iteration::

        sps = (timesteps_last - timesteps_warm) / (time_last - time_warm)

    Records without the iteration keys (other event types a run may log) are ignored.
    ``sps`` is None when no iteration follows the warm-up.
    """
    keys = ("iteration", "timesteps_total", "time_total_s")
    its = sorted((r for r in records if all(k in r for k in keys)), key=lambda r: r["iteration"])
    warm = [r for r in its if r.get("warmup")]
    # Anchor at the end of the *last* warm-up iteration so that a warm-up flag on a later
    # iteration (e.g. a re-warm after a checkpoint) is still excluded with all before it.
    anchor_steps, anchor_time = (
        (warm[-1]["timesteps_total"], warm[-1]["time_total_s"]) if warm else (0, 0.0)
    )
    steady = [r for r in its if not r.get("warmup")]
    if warm:
        steady = [r for r in steady if r["iteration"] > warm[-1]["iteration"]]
    out: dict[str, Any] = {
        "sps": None,
        "iterations": len(its),
        "warmup_iterations": len(its) - len(steady),
        "timesteps": its[-1]["timesteps_total"] if its else 0,
        "seconds": its[-1]["time_total_s"] if its else 0.0,
        "steady_timesteps": 0,
        "steady_seconds": 0.0,
    }
    if steady:
        last = steady[-1]
        steps = last["timesteps_total"] - anchor_steps
        seconds = last["time_total_s"] - anchor_time
        if seconds > 0:
            out.update(sps=steps / seconds, steady_timesteps=steps, steady_seconds=seconds)
    return out


def extract_result(stdout: str, cwd: Path) -> tuple[dict[str, Any] | None, str]:
    """Find a run's result: its RESULT line, else its run directory's metrics.

    Returns ``(result, source)`` with source ``"result_line"``, ``"run_dir"`` or ``"none"``.
    A relative ``run_dir`` is taken relative to the directory the command ran in.
    """
    result = parse_result_line(stdout)
    if result is not None:
        return result, "result_line"
    run_dir = parse_run_dir(stdout)
    if run_dir is None:
        return None, "none"
    if not run_dir.is_absolute():
        run_dir = cwd / run_dir
    result = steady_state_from_metrics(read_metrics(run_dir / "metrics.jsonl"))
    result["run_dir"] = str(run_dir)
    return result, "run_dir"


def schedule(cases: Sequence[Case], rounds: int) -> list[tuple[int, Case]]:
    """Interleaved run order: given order in even rounds, reversed in odd rounds.

    Reversing (rather than rotating) means each case runs first and last equally often
    over two rounds, and back-to-back runs of the same case at round edges share any
    warm-cache advantage evenly.
    """
    order: list[tuple[int, Case]] = []
    for r in range(rounds):
        seq = cases if r % 2 == 0 else list(reversed(cases))
        order.extend((r, c) for c in seq)
    return order


def run_case(
    case: Case, round_index: int, seconds: float, timeout: float, cwd: Path
) -> dict[str, Any]:
    """Run one case to completion and return its raw JSONL record."""
    command = case.render(seconds, round_index)
    record: dict[str, Any] = {
        "case": case.name,
        "round": round_index,
        "command": command,
        "budget_s": seconds,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        # Load average before the run: a high value flags a run disturbed by other jobs.
        "loadavg_before": os.getloadavg()[0],
    }
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            command,
            shell=True,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        stdout, stderr, rc = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        stderr = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        rc = None
        record["error"] = f"timed out after {timeout:g}s"
    record.update(returncode=rc, wall_s=time.perf_counter() - t0)

    try:
        result, source = extract_result(stdout, cwd)
    except (OSError, ValueError) as exc:
        result, source = None, "error"
        record.setdefault("error", f"could not read result: {exc}")
    record.update(source=source, result=result)
    sps = result.get("sps") if result else None
    record["sps"] = float(sps) if isinstance(sps, int | float) else None
    if record["sps"] is None:
        record.setdefault("error", f"no SPS (source={source}, returncode={rc})")
        record["stdout_tail"] = stdout[-TAIL_CHARS:]
        record["stderr_tail"] = stderr[-TAIL_CHARS:]
    return record


def summarize(records: Sequence[dict], cases: Sequence[Case], baseline: str) -> list[dict]:
    """Per case: median SPS, min-max spread, n, failures, ratio to the baseline median."""
    rows: list[dict[str, Any]] = []
    for case in cases:
        sps = [r["sps"] for r in records if r["case"] == case.name and r["sps"] is not None]
        failed = sum(1 for r in records if r["case"] == case.name and r["sps"] is None)
        rows.append(
            {
                "case": case.name,
                "median_sps": statistics.median(sps) if sps else None,
                "min_sps": min(sps) if sps else None,
                "max_sps": max(sps) if sps else None,
                "n": len(sps),
                "failed": failed,
            }
        )
    base = next((r["median_sps"] for r in rows if r["case"] == baseline), None)
    for row in rows:
        med = row["median_sps"]
        row["ratio_to_baseline"] = med / base if med is not None and base else None
    return rows


def format_table(rows: Sequence[dict], baseline: str) -> str:
    """Human-readable summary table."""

    def num(x: float | None, fmt: str) -> str:
        return format(x, fmt) if x is not None else "-"

    header = f"{'case':<16} {'median SPS':>11} {'min-max':>19} {'n':>3} {'fail':>4} {'ratio':>7}"
    lines = [header, "-" * len(header)]
    for r in rows:
        spread = f"{num(r['min_sps'], '.1f')}-{num(r['max_sps'], '.1f')}"
        ratio = num(r["ratio_to_baseline"], ".3f") + ("x" if r["ratio_to_baseline"] else "")
        lines.append(
            f"{r['case']:<16} {num(r['median_sps'], '.1f'):>11} {spread:>19} "
            f"{r['n']:>3} {r['failed']:>4} {ratio:>7}"
        )
    lines.append(f"ratio = case median / median of baseline '{baseline}'")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="See benchmarks/peers/README.md.",
    )
    p.add_argument(
        "--case",
        dest="cases",
        action="append",
        type=parse_case,
        required=True,
        metavar="NAME=COMMAND",
        help="named command; {seconds} and {round} are substituted (repeatable)",
    )
    p.add_argument("--seconds", type=float, default=60.0, help="budget passed to each run")
    p.add_argument("--rounds", type=int, default=3, help="runs per case")
    p.add_argument("--baseline", help="case the ratios are relative to (default: first case)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSONL file to append to")
    p.add_argument(
        "--timeout",
        type=float,
        help="kill a run after this many seconds (default: 2 x budget + 300 s for setup)",
    )
    p.add_argument("--pause", type=float, default=0.0, help="seconds to sleep between runs")
    p.add_argument("--cwd", type=Path, default=Path.cwd(), help="directory commands run in")
    p.add_argument("--dry-run", action="store_true", help="print the schedule and exit")
    args = p.parse_args(argv)
    names = [c.name for c in args.cases]
    if len(set(names)) != len(names):
        p.error(f"case names must be unique: {names}")
    if args.baseline is None:
        args.baseline = names[0]
    elif args.baseline not in names:
        p.error(f"--baseline {args.baseline!r} is not one of {names}")
    if args.rounds < 1:
        p.error("--rounds must be >= 1")
    if args.timeout is None:
        args.timeout = 2 * args.seconds + 300
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the interleaved schedule, append raw records, print the summary."""
    args = parse_args(argv)
    plan = schedule(args.cases, args.rounds)
    if args.dry_run:
        for r, case in plan:
            print(f"round {r}: {case.name}: {case.render(args.seconds, r)}")
        return 0

    # One id per invocation so the appended JSONL can be grouped back into sessions.
    session = {
        "session": uuid.uuid4().hex[:12],
        "host": platform.node(),
        "cpu_count": os.cpu_count(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    records: list[dict] = []
    for i, (r, case) in enumerate(plan):
        if i and args.pause > 0:
            time.sleep(args.pause)
        print(f"[{i + 1}/{len(plan)}] round {r} {case.name} ...", file=sys.stderr, flush=True)
        record = {**session, **run_case(case, r, args.seconds, args.timeout, args.cwd)}
        records.append(record)
        # Append as we go so an interrupted comparison keeps the runs it finished.
        with args.out.open("a") as f:
            f.write(json.dumps(record) + "\n")
        status = f"{record['sps']:.1f} SPS" if record["sps"] is not None else record["error"]
        print(f"    {case.name}: {status} ({record['wall_s']:.1f}s)", file=sys.stderr, flush=True)

    rows = summarize(records, args.cases, args.baseline)
    print(format_table(rows, args.baseline))
    print(f"raw results appended to {args.out} (session {session['session']})")
    return 0 if all(r["n"] > 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
