"""Per-configuration numbers of a training run, warm-up iterations left out.

The thesis averaged its 20 iterations by hand after discarding the first 3 or 4 of every
GPU experiment; here every record marked ``warmup: true`` (the first
``telemetry.warmup_iterations`` of each process) is left out of every summary. A run with
only warm-up iterations is summarised from them, and says so (``warmup_only``).

Throughput is a median with its interquartile range (robust to a slow iteration); phase
times are means, so that the five phases add up to the mean iteration time, as in the
thesis's stacked breakdowns.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from typing import Any

from rlperf.report.load import RunData

PHASES = ("sample", "load", "learn", "update", "other")
_GPU_KEY = re.compile(r"^sys/gpu(\d+)_(util_percent|mem_percent|mem_mb|power_w)$")
_GPU_ENERGY_KEY = re.compile(r"^energy/gpu\d+_joules$")


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def _quartiles(values: list[float]) -> tuple[float, float, float] | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0], values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], statistics.median(values), q[2]


@dataclass
class RunSummary:
    """What the report shows for one configuration."""

    label: str
    status: str
    algo: str
    env_id: str
    model: str
    runner: str
    engine: str
    workers: int | None
    """Env worker or actor processes (None for the in-process runner)."""
    num_envs: int
    learner_device: str
    actor_device: str
    precision: str
    torch_threads: int | None
    frameskip: float
    """Emulator frames per env step (1 for non-Atari games): frames = env steps x this."""
    iterations: int = 0
    steady: int = 0
    warmup_only: bool = False
    sps: tuple[float, float, float] | None = None
    """(first quartile, median, third quartile) of SPS over steady iterations."""
    iteration_s: float | None = None
    """Mean iteration time over steady iterations (= the sum of the mean phases)."""
    phase_ms: dict[str, float] = field(default_factory=dict)
    learner_sps: float | None = None
    """Median perf/learner_samples_per_s: samples the learner gets through per second of learn."""
    actor_sps: float | None = None
    """Median perf/actor_steps_per_s: env steps the actors produce per second of sample."""
    cpu_percent: float | None = None
    """Whole-machine CPU use, % of all cores."""
    proc_cpu_percent: float | None = None
    """CPU use of the run's own processes, % of one core (200 = two cores busy)."""
    ram_percent: float | None = None
    rss_mb: float | None = None
    gpu_util: dict[int, float] = field(default_factory=dict)
    gpu_mem: dict[int, float] = field(default_factory=dict)
    gpu_mem_mb: dict[int, float] = field(default_factory=dict)
    """Mean NVML memory in use per GPU, MiB (every process's, as nvidia-smi shows it)."""
    gpu_power_w: dict[int, float] = field(default_factory=dict)
    energy_j_per_mframes: float | None = None
    """CPU package energy (RAPL) per million frames."""
    gpu_energy_j_per_mframes: float | None = None
    """Energy of all GPUs (NVML) per million frames."""
    timesteps: int = 0
    wall_s: float = 0.0
    final_reward: float | None = None
    best_reward: float | None = None
    flags: list[str] = field(default_factory=list)
    command: str = ""
    machine: str = ""
    cpu: dict[str, Any] = field(default_factory=dict)

    @property
    def sps_median(self) -> float | None:
        return self.sps[1] if self.sps else None

    @property
    def cpu_only(self) -> bool:
        """Whether the learner and the actors both ran on the CPU."""
        return self.learner_device == "cpu" and self.actor_device == "cpu"

    @property
    def others_cpu_percent(self) -> float | None:
        """Whole-machine CPU (% of all cores) used by processes other than the run's: work
        that competed with it for the cores."""
        cores = int(self.cpu.get("available_cores") or self.cpu.get("logical_cores") or 0)
        if self.cpu_percent is None or self.proc_cpu_percent is None or not cores:
            return None
        return max(0.0, self.cpu_percent - self.proc_cpu_percent / cores)

    @property
    def phase_pct(self) -> dict[str, float]:
        total = sum(self.phase_ms.values())
        if total <= 0:
            return {}
        return {p: 100.0 * v / total for p, v in self.phase_ms.items()}


def steady_records(run: RunData) -> tuple[list[dict[str, Any]], bool]:
    """(records to summarise, whether they are warm-up records only)."""
    steady = [r for r in run.records if not r.get("warmup")]
    if steady:
        return steady, False
    return list(run.records), bool(run.records)


def _steps(record: dict[str, Any]) -> float:
    """Env steps of one iteration (SPS is steps / wall time of the iteration)."""
    sps, wall = _num(record.get("SPS")), _num(record.get("time_this_iter_s"))
    return sps * wall if sps is not None and wall is not None else 0.0


def frames_per_step(run: RunData) -> float:
    """Emulator frames per env step: the (mean) frameskip of Atari games, 1 for anything else."""
    from rlperf.envs.make import is_atari

    env_id = str(run.get("env.id", "?"))
    try:
        atari = is_atari(env_id)
    except Exception:  # noqa: BLE001 - an id this installation does not know: treat as non-Atari
        atari = env_id.startswith("ALE/")
    if not atari:
        return 1
    low = int(run.get("env.frameskip", 4))
    return (low + int(run.get("env.frameskip_max") or low)) / 2


def summarise(run: RunData) -> RunSummary:
    """The :class:`RunSummary` of one run."""
    env_id = str(run.get("env.id", "?"))
    runner = str(run.get("runner.name", "inproc"))
    threads = run.get("runner.torch_threads")
    s = RunSummary(
        label=run.label,
        status=str(run.manifest.get("status", "unknown")),
        algo=str(run.get("algo", "?")),
        env_id=env_id,
        model=str(run.get("model.name", "?")),
        runner=runner,
        engine=str(run.get("env.engine", "gymnasium")),
        workers=int(run.get("runner.num_workers", 1)) if runner != "inproc" else None,
        num_envs=int(run.get("env.num_envs", 0) or 0),
        learner_device=str(run.get("runner.learner_device", "cpu")),
        actor_device=str(run.get("runner.actor_device", "cpu")),
        precision=str(run.get("runner.precision", "fp32")),
        torch_threads=int(threads) if isinstance(threads, int) else None,
        frameskip=frames_per_step(run),
        iterations=len(run.records),
        flags=list((run.ledger or {}).get("flags") or []),
        command=run.command,
        machine=run.machine,
        cpu=dict(run.manifest.get("cpu") or {}),
    )
    rows, s.warmup_only = steady_records(run)
    s.steady = 0 if s.warmup_only else len(rows)
    if run.records:
        last = run.records[-1]
        s.timesteps = int(_num(last.get("timesteps_total")) or 0)
        s.wall_s = _num(last.get("time_total_s")) or 0.0
        rewards = [_num(r.get("episode_reward_mean")) for r in run.records]
        present = [r for r in rewards if r is not None]
        s.final_reward = present[-1] if present else None
        s.best_reward = max(present) if present else None
    if not rows:
        return s
    s.sps = _quartiles([v for v in (_num(r.get("SPS")) for r in rows) if v is not None])
    for phase in PHASES:
        value = _mean([_num(r.get(f"{phase}_time_ms")) for r in rows])
        if value is not None:
            s.phase_ms[phase] = value
    s.iteration_s = _mean([_num(r.get("time_this_iter_s")) for r in rows])
    learner = [v for v in (_num(r.get("perf/learner_samples_per_s")) for r in rows) if v]
    actor = [v for v in (_num(r.get("perf/actor_steps_per_s")) for r in rows) if v]
    s.learner_sps = statistics.median(learner) if learner else None
    s.actor_sps = statistics.median(actor) if actor else None
    s.cpu_percent = _mean([_num(r.get("sys/cpu_percent")) for r in rows])
    s.proc_cpu_percent = _mean([_num(r.get("sys/proc_cpu_percent")) for r in rows])
    s.ram_percent = _mean([_num(r.get("sys/ram_percent")) for r in rows])
    s.rss_mb = _mean([_num(r.get("sys/proc_rss_mb")) for r in rows])
    by_kind = {
        "util_percent": s.gpu_util,
        "mem_percent": s.gpu_mem,
        "mem_mb": s.gpu_mem_mb,
        "power_w": s.gpu_power_w,
    }
    for key in sorted({k for r in rows for k in r if _GPU_KEY.match(k)}):
        m = _GPU_KEY.match(key)
        assert m is not None
        value = _mean([_num(r.get(key)) for r in rows])
        if value is not None:
            by_kind[m.group(2)][int(m.group(1))] = value
    s.energy_j_per_mframes = _joules_per_mframes(rows, ["energy/joules"], s.frameskip)
    gpu_keys = sorted({k for r in rows for k in r if _GPU_ENERGY_KEY.match(k)})
    s.gpu_energy_j_per_mframes = _joules_per_mframes(rows, gpu_keys, s.frameskip)
    return s


def _joules_per_mframes(
    rows: list[dict[str, Any]], keys: list[str], frameskip: int
) -> float | None:
    """Joules of ``keys`` summed per million frames, over the rows where all of them were read."""
    measured = []
    for r in rows:
        joules = [_num(r.get(k)) for k in keys]
        if keys and all(j is not None for j in joules):
            measured.append((r, sum(j for j in joules if j is not None)))
    frames = sum(_steps(r) for r, _ in measured) * frameskip
    if not measured or frames <= 0:
        return None
    return sum(j for _, j in measured) / frames * 1e6
