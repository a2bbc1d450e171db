"""Finding what a report is made of: training runs, sweeps and inference results.

A directory given to ``rlperf report`` can be

* a run directory (``metrics.jsonl``, written by ``rlperf train``);
* a sweep directory (``sweep.jsonl``, written by ``rlperf sweep``, ``rlperf tune`` or
  ``rlperf study``): its points in sweep order, and each point's latest status;
* an inference point (``inference.json``, written by an inference sweep);
* a benchmark directory (a sweep directory with ``bench.json``, written by ``rlperf bench``):
  its sweep, plus which preset, game and seed each point is;
* a time-to-target tune directory (``tune.json`` with ``objective: time-to-target``,
  written by ``rlperf tune --objective time-to-target``): its trials and their runs;
* any directory holding those further down (searched three levels deep), and per-game
  timing CSVs written by ``rlperf infer --time-output`` (named ``[MODEL__]BACKEND.csv``).
"""

from __future__ import annotations

import contextlib
import csv
import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rlperf.core.errors import UserInputError

BENCH_FILE = "bench.json"
"""What makes a sweep directory a benchmark (written by ``rlperf bench``)."""
SKIP_DIRS = {"checkpoints", "export", "superseded", "aside", "logs", "configs", "policy"}
MAX_DEPTH = 3
INFER_CSV_COLUMNS = [
    "episode",
    "steps",
    "total_model_time_ms",
    "mean_step_ms",
    "p50",
    "p99",
    "reward",
]
INFER_CSV_ENERGY = ["energy_j_per_call", "energy_source"]
"""Run-level energy columns that newer ``--time-output`` files add after the per-game ones."""


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl``; a torn last line (a killed run) is skipped."""
    out = []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return out
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            out.append(record)
    return out


def command_text(manifest: dict[str, Any], ledger: dict[str, Any] | None = None) -> str:
    """The command that produced a run: the sweep's (with its environment variables) when
    the run is a sweep point, else the manifest's."""
    if ledger and ledger.get("command"):
        return str(ledger["command"])
    argv = manifest.get("rlperf_command")
    if isinstance(argv, list) and argv:
        return shlex.join(str(a) for a in argv)
    return "unknown (no rlperf_command in manifest.json)"


def machine_text(manifest: dict[str, Any]) -> str:
    """The machine a run ran on, from its manifest: CPU model, cores, GPUs."""
    cpu = manifest.get("cpu") or {}
    model = cpu.get("model") or "unknown CPU"
    cores = cpu.get("available_cores")
    logical = cpu.get("logical_cores")
    core_text = (
        f"{cores} of {logical} cores"
        if cores and logical and cores != logical
        else f"{logical or cores or '?'} cores"
    )
    gpus = manifest.get("gpus") or []
    gpu_text = ", ".join(str(g.get("name", "GPU")) for g in gpus if isinstance(g, dict)) or "no GPU"
    return f"{model}, {core_text}, {gpu_text}"


@dataclass
class RunData:
    """One training run."""

    path: Path
    label: str
    config: dict[str, Any]
    manifest: dict[str, Any]
    records: list[dict[str, Any]]
    sweep: str | None = None
    ledger: dict[str, Any] | None = None
    """The sweep's latest record for this point (command, flags, settings)."""

    def get(self, key: str, default: Any = None) -> Any:
        """A dotted config key of the run (``runner.num_workers``)."""
        node: Any = self.config
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    @property
    def command(self) -> str:
        return command_text(self.manifest, self.ledger)

    @property
    def machine(self) -> str:
        return machine_text(self.manifest)


@dataclass
class InferenceData:
    """One inference measurement: a backend on a model."""

    path: Path
    label: str
    result: dict[str, Any]
    """inference.json's contents (or what a timing CSV gives)."""
    manifest: dict[str, Any]
    sweep: str | None = None
    ledger: dict[str, Any] | None = None

    @property
    def command(self) -> str:
        if self.result.get("command") and not self.ledger:
            return str(self.result["command"])
        return command_text(self.manifest, self.ledger)

    @property
    def machine(self) -> str:
        return machine_text(self.manifest)


@dataclass
class SweepData:
    """A sweep directory's points and their latest status."""

    path: Path
    name: str
    description: str
    points: dict[str, dict[str, Any]]
    """Point name -> latest ledger record, in the order the points first appeared."""
    baseline: str | None = None
    """The point the sweep file names as the speed-up baseline."""


@dataclass
class TuneData:
    """A time-to-target study: its summary (``tune.json``) and the label of each trial's run."""

    path: Path
    summary: dict[str, Any]
    run_labels: dict[int, str] = field(default_factory=dict)
    """Trial number -> the label of its run in the report's runs."""

    @property
    def trials(self) -> list[dict[str, Any]]:
        return list(self.summary.get("trials") or [])


@dataclass
class BenchData:
    """A benchmark (``rlperf bench``): its sweep's runs are (preset, game, seed) points."""

    path: Path
    spec: dict[str, Any]
    """``bench.json``: name, command, presets, games, seeds, budget_s, points."""
    alias: str = ""
    """Set by ``collect`` when another bench of the report has the same name."""

    @property
    def name(self) -> str:
        """Names the bench's sections and table and figure files in a report."""
        return self.alias or str(self.spec.get("name") or self.path.name)

    @property
    def command(self) -> str:
        return str(self.spec.get("command") or f"rlperf bench (in {self.path})")

    @property
    def commands(self) -> list[str]:
        """Every command that gave the bench runs (another preset or more seeds given to
        its directory later), in order; a bench.json from before the list: its command."""
        commands = self.spec.get("commands")
        if isinstance(commands, list) and commands:
            return [str(c) for c in commands]
        return [self.command]

    @property
    def points(self) -> dict[str, dict[str, Any]]:
        """Point name -> {preset, game (the env id), seed}, in the bench's order."""
        points = self.spec.get("points")
        return dict(points) if isinstance(points, dict) else {}


@dataclass
class Collection:
    """Everything found in the directories given to a report."""

    runs: list[RunData] = field(default_factory=list)
    inference: list[InferenceData] = field(default_factory=list)
    sweeps: list[SweepData] = field(default_factory=list)
    tunes: list[TuneData] = field(default_factory=list)
    benches: list[BenchData] = field(default_factory=list)

    def empty(self) -> bool:
        return not (self.runs or self.inference or self.sweeps or self.tunes)


def _load_run(
    path: Path, label: str, sweep: str | None = None, ledger: dict | None = None
) -> RunData:
    try:
        config = yaml.safe_load((path / "config.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        config = {}
    return RunData(
        path=path,
        label=label,
        config=config if isinstance(config, dict) else {},
        manifest=_read_json(path / "manifest.json"),
        records=read_records(path / "metrics.jsonl"),
        sweep=sweep,
        ledger=ledger,
    )


def _load_inference(
    path: Path, label: str, sweep: str | None = None, ledger: dict | None = None
) -> InferenceData:
    return InferenceData(
        path=path,
        label=label,
        result=_read_json(path / "inference.json"),
        manifest=_read_json(path / "manifest.json"),
        sweep=sweep,
        ledger=ledger,
    )


def _csv_energy(row: list[str]) -> dict[str, Any]:
    """The energy record of a ``--time-output`` row's run-level columns."""
    joules, source = row
    if not joules:
        return {"joules_per_call": None, "source": None, "reason": source}
    return {"joules_per_call": float(joules), "source": source, "reason": None}


def _load_infer_csv(path: Path) -> InferenceData | None:
    """A ``rlperf infer --time-output`` file as one inference measurement (per-game rows
    combined: calls = steps summed, mean = model time / calls, p50/p99 = medians of the
    per-game values; the first game's mean kept apart; the run's energy per call when the
    file has it)."""
    try:
        with path.open(newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError):
        return None
    if not rows or len(rows) < 2:
        return None
    if rows[0] not in (INFER_CSV_COLUMNS, INFER_CSV_COLUMNS + INFER_CSV_ENERGY):
        return None
    n = len(INFER_CSV_COLUMNS)
    try:
        games = [dict(zip(INFER_CSV_COLUMNS, map(float, r[:n]), strict=True)) for r in rows[1:]]
        energy = _csv_energy(rows[1][n:]) if len(rows[0]) > n else None
    except ValueError:
        return None
    calls = sum(g["steps"] for g in games)
    model, _, backend = path.stem.rpartition("__")
    p50 = sorted(g["p50"] for g in games)
    p99 = sorted(g["p99"] for g in games)
    result = {
        "model": model or "?",
        "backend": backend,
        "calls": int(calls),
        "mean_ms": sum(g["total_model_time_ms"] for g in games) / calls if calls else None,
        "p50_ms": p50[len(p50) // 2],
        "p99_ms": p99[len(p99) // 2],
        "mean_return": sum(g["reward"] for g in games) / len(games),
        "episodes_finished": len(games),
        "energy": energy,
        "fidelity": None,
        "source": "rlperf infer --time-output",
    }
    return InferenceData(path, path.stem, result, {})


def latest_statuses(path: Path) -> dict[str, dict[str, Any]]:
    """Each point's latest record in a ``sweep.jsonl`` (read here, not through the sweep
    package: reports sit below sweeps and read only their files)."""
    state: dict[str, dict[str, Any]] = {}
    for record in read_records(path):
        if "point" in record and "status" in record:
            state[str(record["point"])] = record
    return state


def _load_sweep(path: Path, col: Collection) -> None:
    spec: dict[str, Any] = {}
    with contextlib.suppress(OSError, yaml.YAMLError, UnicodeDecodeError):
        spec = yaml.safe_load((path / "sweep.yaml").read_text(encoding="utf-8")) or {}
    name = str(spec.get("name") or path.name)
    points = latest_statuses(path / "sweep.jsonl")
    baseline = spec.get("baseline")
    col.sweeps.append(
        SweepData(
            path,
            name,
            str(spec.get("description") or ""),
            points,
            str(baseline) if baseline is not None else None,
        )
    )
    for point, record in points.items():
        run_dir = path / str(record.get("run_dir") or Path("runs") / point)
        if (run_dir / "metrics.jsonl").is_file():
            col.runs.append(_load_run(run_dir, point, name, record))
        elif (run_dir / "inference.json").is_file():
            col.inference.append(_load_inference(run_dir, point, name, record))


def _load_tune(path: Path, summary: dict[str, Any], col: Collection) -> None:
    """A time-to-target tune: every trial's run once (a trial resumed after a kill shares
    its run directory with the trial it resumes; the later one labels it)."""
    tune = TuneData(path, summary)
    by_dir: dict[str, int] = {}
    for trial in tune.trials:
        if trial.get("run_dir"):
            by_dir[str(trial["run_dir"])] = int(trial["number"])
    for run_dir, number in by_dir.items():
        if (path / run_dir / "metrics.jsonl").is_file():
            label = f"trial-{number:04d}"
            col.runs.append(_load_run(path / run_dir, label, "tune"))
            for trial in tune.trials:
                if trial.get("run_dir") == run_dir:
                    tune.run_labels[int(trial["number"])] = label
    col.tunes.append(tune)


def _walk(path: Path, col: Collection, depth: int) -> None:
    summary = _read_json(path / "tune.json") if (path / "tune.json").is_file() else {}
    if summary.get("objective") == "time-to-target":
        _load_tune(path, summary, col)
        return
    if (path / "sweep.jsonl").is_file():
        _load_sweep(path, col)
        if (path / BENCH_FILE).is_file():
            col.benches.append(BenchData(path, _read_json(path / BENCH_FILE)))
        return
    if (path / "metrics.jsonl").is_file():
        col.runs.append(_load_run(path, path.name))
        return
    if (path / "inference.json").is_file():
        col.inference.append(_load_inference(path, path.name))
        return
    for csv_file in sorted(path.glob("*.csv")):
        found = _load_infer_csv(csv_file)
        if found is not None:
            col.inference.append(found)
    if depth <= 0:
        return
    for child in sorted(p for p in path.iterdir() if p.is_dir()):
        if child.name not in SKIP_DIRS and not child.name.startswith("."):
            _walk(child, col, depth - 1)


def collect(paths: list[Path]) -> Collection:
    """Everything in ``paths``; UserInputError for a missing directory or one with nothing
    a report can use."""
    col = Collection()
    for path in paths:
        path = Path(path)
        if not path.exists():
            raise UserInputError(
                f"{path} does not exist; give run directories (metrics.jsonl) or sweep directories (sweep.jsonl)"
            )
        if not path.is_dir():
            raise UserInputError(f"{path} is not a directory; give run or sweep directories")
        before = (len(col.runs), len(col.inference), len(col.sweeps), len(col.tunes))
        _walk(path, col, MAX_DEPTH)
        if (len(col.runs), len(col.inference), len(col.sweeps), len(col.tunes)) == before:
            raise UserInputError(
                f"{path} holds no run (metrics.jsonl), sweep (sweep.jsonl) or inference result "
                "(inference.json) within 3 levels"
            )
    _unique_labels(col)
    return col


def _unique_labels(col: Collection) -> None:
    """Labels name configurations in every figure: make them unique (prefix the sweep when
    several sweeps are mixed, then number what still collides)."""
    # The same bench command run twice (say on two days) names both benches alike, and their
    # files would overwrite each other's: number them and add their folders.
    by_name: dict[str, list[BenchData]] = {}
    for bench in col.benches:
        by_name.setdefault(bench.name, []).append(bench)
    for name, benches in by_name.items():
        if len(benches) > 1:
            for k, bench in enumerate(benches, 1):
                bench.alias = f"{name}__{k}-{bench.path.name}"
    for items in (col.runs, col.inference):
        sweeps = {i.sweep for i in items}
        if len(sweeps) > 1:
            for i in items:
                if i.sweep:
                    i.label = f"{i.sweep}/{i.label}"
        seen: dict[str, int] = {}
        for i in items:
            n = seen.get(i.label, 0) + 1
            seen[i.label] = n
            if n > 1:
                i.label = f"{i.label}#{n}"
