"""Running a sweep: every point in order, resumable, one failure never stopping the rest.

The output directory::

    DIR/sweep.yaml         the spec as run (file or preset, plus the command line's overrides)
    DIR/sweep.jsonl        the status history of every point (see ledger.py)
    DIR/configs/<point>.*  the resolved config each point's process reads
    DIR/runs/<point>/      the point's run directory (training) or inference results
    DIR/logs/<point>.attempt<N>.log   the output of each attempt
    DIR/aside/             directories of failed or interrupted attempts, kept, never reused

Points run one at a time, or ``parallel`` at once, each in its own share of the CPUs.
Running the same command again resumes: completed points are skipped (their data is never
touched), everything else runs again. A completed point whose resolved config differs from
the one now asked for stops the sweep before anything runs: that directory holds another
sweep's results. Settings that a newer rlperf added, at their defaults, are no difference:
defaults keep what ran before, so a sweep stays resumable across an upgrade.
"""

from __future__ import annotations

import os
import shutil
import statistics
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from rlperf.config.load import dump_config, load_config_file
from rlperf.core.checkpoint import atomic_write_text
from rlperf.core.errors import ConfigError, make_output_dir
from rlperf.sweep.execute import (
    CONFIGS_DIR,
    LOGS_DIR,
    CpuShares,
    SweepSignals,
    display_command,
    run_attempt,
    run_dir_of,
)
from rlperf.sweep.ledger import Ledger
from rlperf.sweep.plan import PlannedPoint
from rlperf.sweep.spec import SweepSpec

SPEC_FILE = "sweep.yaml"
ASIDE_DIR = "aside"
EXIT_INTERRUPTED = 130


@dataclass
class SweepResult:
    """What happened to each point in this invocation (and before, for skipped-as-done)."""

    sweep_dir: Path
    statuses: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Point name -> its latest ledger record."""
    interrupted: str | None = None
    """The signal that stopped the sweep, if one did."""

    def count(self, status: str) -> int:
        return sum(1 for r in self.statuses.values() if r["status"] == status)

    @property
    def exit_code(self) -> int:
        """0 when every point completed or was skipped, 1 when one failed, 130 (or 128 + the
        signal) when the sweep was interrupted."""
        if self.interrupted:
            return EXIT_INTERRUPTED if self.interrupted == "SIGINT" else 143
        return 1 if self.count("failed") else 0


def steady_summary(run_dir: Path) -> dict[str, Any]:
    """Median SPS and iteration time of a run's records without its warm-up iterations."""
    import json

    path = run_dir / "metrics.jsonl"
    rows = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    steady = [r for r in rows if not r.get("warmup")]
    if not steady:
        return {"iterations": len(rows), "steady_iterations": 0}
    return {
        "iterations": len(rows),
        "steady_iterations": len(steady),
        "sps_median": statistics.median(float(r["SPS"]) for r in steady),
        "iteration_s_median": statistics.median(float(r["time_this_iter_s"]) for r in steady),
        "timesteps_total": rows[-1].get("timesteps_total"),
    }


def _inference_summary(run_dir: Path) -> dict[str, Any]:
    import json

    try:
        data = json.loads((run_dir / "inference.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return {k: data.get(k) for k in ("backend", "device", "calls", "p50_ms", "p99_ms")}


def _set_aside(path: Path, sweep_dir: Path, label: str) -> Path | None:
    """Move a directory an unfinished attempt left behind out of the way (kept, not deleted)."""
    if not path.exists():
        return None
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    target = sweep_dir / ASIDE_DIR / f"{path.name}.{label}.{stamp}"
    target.parent.mkdir(parents=True, exist_ok=True)
    n = 1
    while target.exists():
        n += 1
        target = target.with_name(f"{path.name}.{label}.{stamp}-{n}")
    shutil.move(str(path), str(target))
    return target


def check_resume(points: list[PlannedPoint], sweep_dir: Path) -> None:
    """ConfigError when ``sweep_dir`` holds a completed point whose config differs from the
    one now planned (its data would be mixed with another sweep's)."""
    state = Ledger(sweep_dir).latest()
    for point in points:
        record = state.get(point.name)
        done = record is not None and record["status"] == "completed"
        same = record is not None and record.get("fingerprint") == point.fingerprint()
        if done and not same and not _same_but_for_added_defaults(point, sweep_dir):
            raise ConfigError(
                f"{sweep_dir} already holds a completed point {point.name} run with another "
                "config; give another output directory (-o) or the same sweep and overrides"
            )


def _same_but_for_added_defaults(point: PlannedPoint, sweep_dir: Path) -> bool:
    """Whether the config a completed training point ran with, read by this rlperf (which
    gives keys added since their defaults), is the config now planned for it."""
    saved = sweep_dir / CONFIGS_DIR / f"{point.name}.yaml"
    if point.command != "train" or not saved.is_file():
        return False
    try:
        # A key removed since, or a value no longer valid, is a difference.
        return dump_config(load_config_file(saved)) == point.config_text()
    except ConfigError:
        return False


def listed_states(points: list[PlannedPoint], sweep_dir: Path) -> dict[str, str]:
    """What running the sweep in ``sweep_dir`` would do with each point, for ``--list``:
    ``completed`` (kept), ``skipped: WHY`` or ``runs``. Reads the ledger, writes nothing;
    raises the ConfigError that running it would (:func:`check_resume`)."""
    check_resume(points, sweep_dir)
    state = Ledger(sweep_dir).latest()
    listed: dict[str, str] = {}
    for point in points:
        record = state.get(point.name)
        if point.skip:
            listed[point.name] = f"skipped: {point.skip}"
        elif record is not None and record["status"] == "completed":
            listed[point.name] = "completed"
        else:
            listed[point.name] = "runs"
    return listed


def _write_spec(spec: SweepSpec, overrides: list[tuple[str, Any]], sweep_dir: Path) -> None:
    path = sweep_dir / SPEC_FILE
    data = {**spec.to_dict(), "overrides": {k: v for k, v in overrides}}
    if path.exists():
        try:
            old = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError:
            old = {}
        if old.get("name") not in (None, spec.name):
            raise ConfigError(
                f"{sweep_dir} holds sweep {old.get('name')!r}, not {spec.name!r}; give another output directory (-o)"
            )
    atomic_write_text(path, yaml.safe_dump(data, sort_keys=False))


def run_sweep(
    spec: SweepSpec,
    points: list[PlannedPoint],
    sweep_dir: Path,
    *,
    overrides: list[tuple[str, Any]] = (),  # type: ignore[assignment]
    say: Callable[[str], None] = print,
    parallel: int = 1,
    cpus: list[int] | None = None,
) -> SweepResult:
    """Run (or resume) every point of a planned sweep in ``sweep_dir``.

    One point at a time by default. With ``parallel`` N > 1, N points run at once, each
    pinned to its own share of ``cpus`` (default: this process's), ``len(cpus) // N`` CPUs
    (:class:`~rlperf.sweep.execute.CpuShares`); a point that sets ``runner.cpu_affinity``
    keeps its own."""
    sweep_dir = Path(sweep_dir)
    if sweep_dir.exists() and not sweep_dir.is_dir():
        raise ConfigError(f"output {sweep_dir} exists and is not a directory")
    ledger = Ledger(sweep_dir)
    check_resume(points, sweep_dir)
    make_output_dir(sweep_dir, "sweep directory")
    _write_spec(spec, list(overrides), sweep_dir)
    result = SweepResult(sweep_dir)
    state = ledger.latest()
    shares = CpuShares(sorted(cpus if cpus is not None else os.sched_getaffinity(0)), parallel)
    found: dict[str, dict[str, Any]] = {}
    with SweepSignals() as signals:

        def run_one(head: str, point: PlannedPoint) -> dict[str, Any] | None:
            with shares.take() as share:
                if signals.received:  # stopped while this point waited for a share
                    return None
                return _run_point(point, sweep_dir, ledger, signals, head, say, share)

        todo: list[tuple[str, PlannedPoint]] = []
        for i, point in enumerate(points, 1):
            head = f"[{i}/{len(points)}] {point.name}"
            record = state.get(point.name)
            if record and record["status"] == "completed":
                say(f"{head}: completed earlier, skipped")
                found[point.name] = record
            elif point.skip:
                if not (
                    record and record["status"] == "skipped" and record.get("reason") == point.skip
                ):
                    record = ledger.append(
                        point.name, "skipped", reason=point.skip, fingerprint=point.fingerprint()
                    )
                say(f"{head}: skipped: {point.skip}")
                found[point.name] = record
            else:
                todo.append((head, point))
        if parallel <= 1:
            for head, point in todo:
                if signals.received:  # a Ctrl-C between two points stops before the next one
                    break
                found[point.name] = run_one(head, point)  # type: ignore[assignment]
        else:
            with ThreadPoolExecutor(parallel, thread_name_prefix="sweep-point") as pool:
                futures = [(p.name, pool.submit(run_one, head, p)) for head, p in todo]
                for name, future in futures:
                    record = future.result()
                    if record is not None:
                        found[name] = record
        result.statuses = {p.name: found[p.name] for p in points if p.name in found}
        if signals.received:
            result.interrupted = signals.received
            say(f"sweep stopped by {signals.received}; run the same command to resume")
    return result


def _run_point(
    point: PlannedPoint,
    sweep_dir: Path,
    ledger: Ledger,
    signals: SweepSignals,
    head: str,
    say: Callable[[str], None],
    share: list[int] | None = None,
) -> dict[str, Any]:
    """Every attempt of one point (the first plus ``retries``), in CPU ``share`` when given;
    its final ledger record."""
    fingerprint = point.fingerprint()
    run_dir = run_dir_of(sweep_dir, point)
    # Whatever an earlier, unfinished attempt left is kept aside, never resumed into: a
    # measurement must come from one uninterrupted process.
    _set_aside(run_dir, sweep_dir, "unfinished")
    if point.flags:
        say(f"{head}: note: {'; '.join(point.flags)}")
    record: dict[str, Any] = {}
    for k in range(1 + point.retries):
        attempt = ledger.attempts(point.name) + 1
        log = sweep_dir / LOGS_DIR / f"{point.name}.attempt{attempt}.log"
        command = display_command(point, sweep_dir, share)
        ledger.append(
            point.name,
            "running",
            attempt=attempt,
            command=command,
            run_dir=os.path.relpath(run_dir, sweep_dir),
            fingerprint=fingerprint,
            flags=point.flags,
        )
        say(f"{head}: running (attempt {attempt}): {command}")
        outcome = run_attempt(point, sweep_dir, attempt, signals, log, share)
        common = {
            "attempt": attempt,
            "command": command,
            "run_dir": os.path.relpath(run_dir, sweep_dir),
            "log": os.path.relpath(log, sweep_dir),
            "wall_s": round(outcome.wall_s, 2),
            "fingerprint": fingerprint,
            "flags": point.flags,
            "note": point.note,
            "settings": point.settings,
        }
        if outcome.completed:
            summary = (
                steady_summary(run_dir) if point.command == "train" else _inference_summary(run_dir)
            )
            record = ledger.append(point.name, "completed", summary=summary, **common)
            say(f"{head}: completed in {outcome.wall_s:.0f} s {_short(summary)}")
            return record
        if outcome.interrupted:
            record = ledger.append(point.name, "interrupted", error=outcome.error, **common)
            return record
        record = ledger.append(
            point.name, "failed", error=outcome.error, exit_code=outcome.exit_code, **common
        )
        say(f"{head}: failed (attempt {attempt}): {outcome.error}")
        _set_aside(run_dir, sweep_dir, f"attempt{attempt}")
        if outcome.exit_code == 2 and not outcome.timed_out:
            break  # bad input: the same config fails the same way again
        if k < point.retries:
            say(f"{head}: retrying")
    return record


def _short(summary: dict[str, Any]) -> str:
    if "sps_median" in summary:
        return f"(median {summary['sps_median']:.0f} SPS over {summary['steady_iterations']} steady iterations)"
    if "p50_ms" in summary and summary["p50_ms"] is not None:
        return f"(p50 {summary['p50_ms']:.3f} ms per call)"
    return "(no steady iterations)"


def format_table(result: SweepResult) -> str:
    """A plain-text table of every point's status, for the end of ``rlperf sweep``."""
    rows = [("point", "status", "result")]
    for name, record in result.statuses.items():
        status = record["status"]
        if status == "completed":
            text = _short(record.get("summary") or {}).strip("()")
        elif status == "skipped":
            text = record.get("reason", "")
        else:
            text = record.get("error") or ""
        flags = record.get("flags") or []
        if flags:
            text = f"{text} [{'; '.join(flags)}]"
        rows.append((name, status, text))
    width = [max(len(r[i]) for r in rows) for i in range(2)]
    return "\n".join(f"{r[0]:<{width[0]}}  {r[1]:<{width[1]}}  {r[2]}" for r in rows)
