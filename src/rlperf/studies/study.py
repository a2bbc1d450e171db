"""``rlperf study quick``: the README's main job, from nothing to a report in minutes.

1. Training: the shipped ``quick`` sweep: PPO on Pong (ROMs ship with ale-py, nothing to
   download), one lever at a time from CleanRL's recipe (a bf16 learner, a C++ engine, the
   atari-fast preset's cheaper learned step), the same wall-clock budget each, every point
   in its own process, so the report shows which levers pay on this machine.
2. Inference: the policy of the run that got furthest is exported and quantized, then timed
   on every backend this machine has (points for the others are recorded as skipped), with
   fidelity against torch fp32.
3. The report: ``reports/quick/index.html``, whose path is printed; when Chromium is
   installed the page is opened headless to check that it renders.

Both halves are sweeps, so running the command again resumes: finished points are kept,
and only the report is rebuilt. ``--fresh`` moves an earlier study aside first.
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from rlperf.arguments import ArgumentParser, positive_float_flag
from rlperf.core.errors import UserInputError

STUDIES = ("quick", "thesis")
DEFAULT_REPORT = Path("reports") / "quick"
DEFAULT_RUNS = Path("runs") / "study-quick"
BACKENDS = ("torch", "onnx", "onnx-int8", "tflite", "tflite-int8", "edgetpu")
INFER_CALLS = 1000


def _steps(run_dir: Path) -> int:
    try:
        return int(json.loads((run_dir / "manifest.json").read_text()).get("env_steps") or 0)
    except (OSError, json.JSONDecodeError, ValueError):
        return 0


def run_quick(
    report_dir: Path = DEFAULT_REPORT,
    runs_dir: Path = DEFAULT_RUNS,
    *,
    budget_s: float | None = None,
    browser_check: bool = True,
    say: Callable[[str], None] = print,
) -> int:
    """The quick study; returns the exit code (0 when the report was written)."""
    from rlperf.report.browser import check_in_browser
    from rlperf.report.build import build_report
    from rlperf.sweep.machine import Machine
    from rlperf.sweep.plan import plan_points
    from rlperf.sweep.run import run_sweep
    from rlperf.sweep.spec import SweepSpec, load_spec

    machine = Machine.detect()
    spec = load_spec("quick")
    overrides = [("stop.wall_time_s", budget_s)] if budget_s is not None else []
    train_dir = runs_dir / "train"
    say(f"study quick: training ({len(spec.points)} runs) -> {train_dir} ({machine.describe()})")
    trained = run_sweep(
        spec, plan_points(spec, overrides, machine), train_dir, overrides=overrides, say=say
    )
    if trained.interrupted:
        return trained.exit_code
    done = [n for n, r in trained.statuses.items() if r["status"] == "completed"]
    if not done:
        say(f"study quick: no training run completed; see {train_dir / 'logs'}")
        return 1
    policy_run = max((train_dir / "runs" / n for n in done), key=_steps)
    say(f"study quick: inference of {policy_run} on {', '.join(BACKENDS)} and torch on a GPU")
    infer_spec = SweepSpec(
        name="quick-inference",
        source="rlperf study quick",
        description=f"the policy of {policy_run.name}, {INFER_CALLS} timed greedy calls per backend",
        command="infer",
        base={
            "infer.run": str(policy_run),
            "infer.steps": INFER_CALLS,
            "infer.calibration_observations": 200,
            "infer.fidelity_observations": 300,
        },
        points=[{"name": b, "infer.backend": b} for b in BACKENDS]
        + [{"name": "torch-cuda", "infer.backend": "torch", "infer.device": "cuda"}],
        timeout_s=900,
        retries=1,
    )
    infer_dir = runs_dir / "inference"
    inferred = run_sweep(infer_spec, plan_points(infer_spec, [], machine), infer_dir, say=say)
    if inferred.interrupted:
        return inferred.exit_code
    say("study quick: report")
    result = build_report(
        [train_dir, infer_dir],
        report_dir,
        title="rlperf quick study: PPO on Pong, precision, engine and compute per step, inference backends",
        command="rlperf study quick",
    )
    code = check_in_browser(result.index, say) if browser_check else 0
    failed = trained.count("failed") + inferred.count("failed")
    if failed:
        say(f"study quick: {failed} point(s) failed; the report shows which and why")
    print(f"report: {result.index}", flush=True)
    return code


def _move_aside(path: Path) -> Path | None:
    if not path.exists():
        return None
    target = path.with_name(f"{path.name}.{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}")
    shutil.move(str(path), str(target))
    return target


def cmd_study(argv: Sequence[str]) -> int:
    from rlperf.studies import thesis_study

    p = ArgumentParser(
        prog="rlperf study",
        description="A whole study in one command: its sweeps, then the report. Running it "
        "again resumes.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="quick: PPO on Pong, one lever at a time (fp32, bf16, a C++ engine, the atari-fast "
        "preset; 60 s of training each), inference on every available backend, then "
        "reports/quick/index.html (about 5 minutes on 2 idle cores)\n"
        "thesis: the thesis's experiment matrices (Tables 3.2, 3.3, 3.4, 4.1, Fig 3.3a and its "
        "worker trends), every point this machine's hardware allows, budgets scaled to its "
        "cores, then reports/thesis/index.html (about 20 minutes on 2 idle cores)",
        allow_abbrev=False,
    )
    p.add_argument("study", choices=STUDIES, help="which study")
    p.add_argument("-o", "--output", metavar="DIR", help="report directory (default reports/STUDY)")
    p.add_argument("--runs", metavar="DIR", help="where the runs go (default runs/study-STUDY)")
    p.add_argument(
        "--budget-s", metavar="S", help="quick: seconds of training per run (default 60)"
    )
    p.add_argument(
        "--parts",
        metavar="LIST",
        help=f"thesis: the parts to run, comma-separated (default all: {','.join(thesis_study.PARTS)})",
    )
    p.add_argument(
        "--fresh", action="store_true", help="move an earlier study aside and start over"
    )
    p.add_argument(
        "--no-browser-check", action="store_true", help="do not open the page in Chromium"
    )
    args = p.parse_args(list(argv))
    default_runs = {"quick": DEFAULT_RUNS, "thesis": thesis_study.DEFAULT_RUNS}[args.study]
    default_report = {"quick": DEFAULT_REPORT, "thesis": thesis_study.DEFAULT_REPORT}[args.study]
    runs = Path(args.runs) if args.runs else default_runs
    report = Path(args.output) if args.output else default_report
    say = lambda text: print(text, flush=True)  # noqa: E731
    if args.study == "thesis":
        if args.budget_s is not None:
            raise UserInputError("--budget-s is the quick study's; the thesis study scales its own")
        parts = _parts(args.parts, thesis_study.PARTS)
    elif args.parts is not None:
        raise UserInputError("--parts is the thesis study's; the quick study has no parts")
    if args.fresh:
        moved = _move_aside(runs)
        if moved is not None:
            print(f"study {args.study}: earlier study moved to {moved}")
    if args.study == "thesis":
        return thesis_study.run_thesis(
            report, runs, parts=parts, browser_check=not args.no_browser_check, say=say
        )
    return run_quick(
        report,
        runs,
        budget_s=positive_float_flag("--budget-s", args.budget_s),
        browser_check=not args.no_browser_check,
        say=say,
    )


def _parts(text: str | None, known: Sequence[str]) -> list[str]:
    if text is None:
        return list(known)
    parts = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in parts if p not in known]
    if unknown or not parts:
        raise UserInputError(
            f"--parts {text!r}: unknown part(s) {', '.join(unknown) or '(none given)'}; "
            f"parts: {', '.join(known)}"
        )
    return parts
