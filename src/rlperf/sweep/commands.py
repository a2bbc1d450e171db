"""The ``rlperf sweep`` and ``rlperf tune`` subcommands.

Each parses its own arguments with the CLI's one-line-error parser; bad input (a sweep file,
an unknown key, a bad value, an output directory holding another sweep) raises
:class:`~rlperf.core.errors.UserInputError`: one line, exit code 2, before any point runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from rlperf.arguments import ArgumentParser, config_overrides, int_flag, positive_float_flag
from rlperf.sweep.execute import CpuShares
from rlperf.sweep.spec import available_sweeps

DEFAULT_ROOT = Path("runs") / "sweeps"


def sweep_parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="rlperf sweep",
        description="Run every point of a sweep (a base config plus a grid and/or a list of "
        "points), each in a fresh process; the same command again resumes.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"shipped sweeps: {', '.join(available_sweeps())}\n"
        "KEY=VALUE overrides apply to every point (e.g. stop.iterations=3).\n"
        "Output: DIR/sweep.jsonl (status per point), DIR/runs/<point>/, DIR/logs/; then\n"
        "  rlperf report DIR -o reports/NAME",
        allow_abbrev=False,
    )
    p.add_argument("sweep", metavar="SWEEP", help="a sweep file (.yaml) or a shipped sweep name")
    p.add_argument(
        "-o", "--output", metavar="DIR", help="output directory (default runs/sweeps/NAME)"
    )
    p.add_argument("--list", action="store_true", help="print the points and exit")
    p.add_argument("--timeout", metavar="S", help="seconds per attempt (overrides the file's)")
    p.add_argument("--retries", metavar="N", help="further attempts after a failure (default 1)")
    p.add_argument(
        "--parallel",
        metavar="N",
        help="points at once, each pinned to its own cores // N CPUs (default 1)",
    )
    return p


def cmd_sweep(argv: Sequence[str]) -> int:
    from rlperf.sweep.machine import Machine
    from rlperf.sweep.plan import plan_points
    from rlperf.sweep.run import format_table, listed_states, run_sweep
    from rlperf.sweep.spec import load_spec

    args, rest = sweep_parser().parse_known_args(list(argv))
    overrides = config_overrides(rest)
    spec = load_spec(args.sweep)
    timeout = positive_float_flag("--timeout", args.timeout)
    retries = int_flag("--retries", args.retries, 0)
    parallel = int_flag("--parallel", args.parallel) or 1
    CpuShares.check(parallel)
    if timeout is not None:
        spec.timeout_s = timeout
        for point in spec.points:
            point.pop("timeout_s", None)
    if retries is not None:
        spec.retries = retries
    machine = Machine.detect()
    points = plan_points(spec, overrides, machine)
    out = Path(args.output) if args.output else DEFAULT_ROOT / spec.name
    if args.list:
        states = listed_states(points, out)  # refuses, as a run would, before any output
        print(f"sweep {spec.name}: {len(points)} point(s) on this machine ({machine.describe()})")
        for point, state in zip(points, states.values(), strict=True):
            flags = f" [{'; '.join(point.flags)}]" if point.flags else ""
            print(f"  {point.name}: {state}{flags}")
        return 0
    print(f"sweep {spec.name}: {len(points)} point(s) -> {out} ({machine.describe()})", flush=True)
    result = run_sweep(spec, points, out, overrides=overrides, say=_say, parallel=parallel)
    print(format_table(result))
    print(f"sweep_dir: {out}")
    print(f"report: rlperf report {out} -o reports/{spec.name}")
    return result.exit_code


def _say(text: str) -> None:
    print(text, flush=True)


def cmd_tune(argv: Sequence[str]) -> int:
    from rlperf.sweep.tune import cmd_tune as run

    return run(argv)
