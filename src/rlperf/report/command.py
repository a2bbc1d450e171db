"""The ``rlperf report`` subcommand."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from pathlib import Path

from rlperf.arguments import ArgumentParser
from rlperf.core.errors import UserInputError


def report_parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="rlperf report",
        description="Turn run, sweep and inference directories into DIR/index.html with PNG "
        "figures and CSV/Markdown tables (works offline).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Directories may be run directories (metrics.jsonl), sweep directories "
        "(sweep.jsonl), inference points (inference.json) or any directory holding them.",
        allow_abbrev=False,
    )
    p.add_argument("dirs", nargs="+", metavar="DIR", help="run, sweep or inference directories")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="where index.html goes")
    p.add_argument(
        "--baseline", help="configuration the speed-ups are measured against (default: the first)"
    )
    p.add_argument(
        "--target",
        help="target return for the time-to-target table (default: each run's stop.target_reward)",
    )
    p.add_argument("--title", help="page title")
    p.add_argument(
        "--check-browser",
        action="store_true",
        help="open the page in headless Chromium and check images and console",
    )
    return p


def cmd_report(argv: Sequence[str]) -> int:
    args = report_parser().parse_args(list(argv))
    target = None
    if args.target is not None:
        try:
            target = float(args.target)
        except ValueError:
            raise UserInputError(f"--target must be a number, got {args.target!r}") from None
    from rlperf.report.build import build_report

    result = build_report(
        [Path(d) for d in args.dirs],
        Path(args.output),
        baseline=args.baseline,
        target=target,
        title=args.title,
        command=shlex.join(["rlperf", "report", *argv]),
    )
    print(
        f"wrote {len(result.figures)} figure(s) and {len(result.tables)} table file(s) for "
        f"{len(result.summaries)} training configuration(s)"
    )
    print(f"report: {result.index}")
    if args.check_browser:
        return _browser_check(result.index)
    return 0


def _browser_check(index: Path) -> int:
    from rlperf.report.browser import BrowserError, check_page

    try:
        check = check_page(index)
    except BrowserError as exc:
        print(f"browser check: not done: {exc}")
        return 1
    print(f"browser check: {check.describe()}")
    for problem in check.console_errors + [f"image not loaded: {s}" for s in check.broken_images]:
        print(f"  {problem}")
    return 0 if check.ok else 1
