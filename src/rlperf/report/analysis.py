"""Comparisons across configurations: scaling curves and their knee, speed-ups against a
baseline, the GPU runs apart from the CPU-only ones, the same configurations across models,
and the time each run took to reach a reward target."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlperf.report.load import RunData
from rlperf.report.summary import PHASES, RunSummary, frames_per_step

KNEE_FRACTION = 0.9
"""The knee of a scaling curve: the smallest x whose median SPS reaches this fraction of
the curve's best. Past it, more workers or envs buy at most 10% more throughput."""


@dataclass
class ScalingCurve:
    """SPS of configurations that differ only in worker processes or envs."""

    group: str
    """What the configurations share (runner, engine, model, devices...)."""
    axis: str
    """``workers`` or ``envs``."""
    points: list[tuple[int, RunSummary]]
    """(x, summary), x ascending."""

    @property
    def knee(self) -> tuple[int, RunSummary] | None:
        scored = [(x, s) for x, s in self.points if s.sps_median is not None]
        if not scored:
            return None
        best = max(s.sps_median for _, s in scored)  # type: ignore[type-var]
        for x, s in scored:
            if s.sps_median >= KNEE_FRACTION * best:  # type: ignore[operator]
                return x, s
        return None


def _group_key(s: RunSummary, axis: str) -> tuple[Any, ...]:
    key: tuple[Any, ...] = (
        s.algo,
        s.env_id,
        s.model,
        s.runner,
        s.engine,
        s.learner_device,
        s.actor_device,
        s.precision,
        s.torch_threads,
    )
    if axis == "envs":
        key += (s.workers,)
    return key


def _group_label(s: RunSummary, axis: str) -> str:
    parts = [s.runner, s.engine, s.model]
    if s.learner_device != "cpu" or s.actor_device != "cpu":
        parts.append(f"learner {s.learner_device}, actors {s.actor_device}")
    if s.precision != "fp32":
        parts.append(s.precision)
    if s.torch_threads:
        parts.append(f"{s.torch_threads} threads")
    if axis == "envs" and s.workers:
        parts.append(f"{s.workers} workers")
    return ", ".join(parts)


def scaling_curves(summaries: list[RunSummary]) -> list[ScalingCurve]:
    """Curves of SPS against workers (worker runners) and against envs (in process), one
    per group of configurations that differ only in that; groups with one x are left out."""
    curves = []
    for axis in ("workers", "envs"):
        groups: dict[tuple[Any, ...], dict[int, RunSummary]] = {}
        for s in summaries:
            if s.sps_median is None:
                continue
            if axis == "workers" and s.workers is None:
                continue
            x = s.workers if axis == "workers" else s.num_envs
            assert x is not None
            groups.setdefault(_group_key(s, axis), {}).setdefault(x, s)
        for by_x in groups.values():
            if len(by_x) < 2:
                continue
            points = sorted(by_x.items())
            curves.append(ScalingCurve(_group_label(points[0][1], axis), axis, points))
    # a worker sweep changes num_envs too: keep the envs curve only if no workers curve has
    # the same configurations
    seen = {id(s) for c in curves if c.axis == "workers" for _, s in c.points}
    return [c for c in curves if c.axis == "workers" or not all(id(s) in seen for _, s in c.points)]


@dataclass
class SpeedUp:
    """One configuration against the baseline: ratios > 1 mean faster than the baseline."""

    label: str
    sps: float | None
    phases: dict[str, float | None]
    """Baseline phase time / this phase time."""


def speedups(summaries: list[RunSummary], baseline: str) -> list[SpeedUp]:
    """Speed-up of every configuration over ``baseline`` (a label)."""
    base = next(s for s in summaries if s.label == baseline)
    out = []
    for s in summaries:
        sps = s.sps_median / base.sps_median if s.sps_median and base.sps_median else None
        phases: dict[str, float | None] = {}
        for p in PHASES:
            a, b = base.phase_ms.get(p), s.phase_ms.get(p)
            phases[p] = a / b if a and b else None
        out.append(SpeedUp(s.label, sps, phases))
    return out


def accelerator_runs(summaries: list[RunSummary]) -> list[RunSummary]:
    """The runs with their learner or actors off the CPU, when CPU-only runs are beside them
    (else none): the CPU-only runs' phases dwarf theirs, so the thesis drew them again on
    their own (its Figure 4.7)."""
    accelerated = [s for s in summaries if not s.cpu_only]
    if len(accelerated) in (0, len(summaries)):
        return []
    return accelerated


def configuration_name(s: RunSummary) -> str:
    """A run's label without its model: what runs of different models share when a sweep
    crosses a model grid with its points (``model=thesis-1__Exp1-...`` -> ``Exp1-...``).
    A label that is nothing but the model names the model's one configuration, ``default``."""
    prefix, _, label = s.label.rpartition("/")  # the sweep, in a report mixing sweeps
    name = "__".join(p for p in label.split("__") if p != f"model={s.model}") or "default"
    return f"{prefix}/{name}" if prefix else name


@dataclass
class ModelComparison:
    """The runs of several models, by model and configuration (thesis Figures 4.4-4.6)."""

    runs: dict[str, list[tuple[str, RunSummary]]]
    """Model -> (configuration name, summary), models and runs in report order."""

    @property
    def common(self) -> list[str]:
        """The configurations every model ran, in report order."""
        names = [[c for c, _ in runs] for runs in self.runs.values()]
        return [c for c in names[0] if all(c in other for other in names[1:])]

    def mean_phase_ms(self, model: str) -> dict[str, float]:
        """A model's mean time per phase over the configurations every model ran (over all
        of its own when they share none), so that the models are compared like for like."""
        common = set(self.common)
        runs = [s for c, s in self.runs[model] if c in common or not common]
        return {p: sum(s.phase_ms.get(p, 0.0) for s in runs) / len(runs) for p in PHASES}


def model_comparison(summaries: list[RunSummary]) -> ModelComparison | None:
    """The runs grouped by model, or None when they are all of one model."""
    runs: dict[str, list[tuple[str, RunSummary]]] = {}
    for s in summaries:
        runs.setdefault(s.model, []).append((configuration_name(s), s))
    return ModelComparison(runs) if len(runs) > 1 else None


@dataclass
class TimeToTarget:
    """When a run's reward metric first reached the target (None: not reached)."""

    label: str
    target: float
    metric: str
    """``mean100`` (mean of the last 100 true games), ``ema`` (003's moving average) or
    ``mean100+ema`` (the lower of the two)."""
    env_steps: int | None
    wall_s: float | None
    best: float | None
    frames_per_step: float = 1

    @property
    def frames(self) -> float | None:
        return None if self.env_steps is None else self.env_steps * self.frames_per_step


REWARD_RECORD_KEYS = {
    "mean100": ("episode_reward_mean",),
    "ema": ("episode_reward_ema",),
    "mean100+ema": ("episode_reward_mean", "episode_reward_ema"),
}
"""stop.target_reward_metric -> the record fields the session compares with the target (all
must reach it, so their minimum is the metric)."""


MEAN_WINDOW = 100
"""Games in the ``mean100`` window: like the session's stop rule, the mean counts only once
this many games have finished (a lucky first game must not count as reaching a target)."""


def reward_metric(record: dict[str, Any], metric: str) -> float | None:
    """A record's value of ``stop.target_reward_metric`` (the lower of the fields it names),
    or None when a field is missing or the mean's window is not yet full."""
    keys = REWARD_RECORD_KEYS.get(metric, ("episode_reward_mean",))
    values = [record.get(key) for key in keys]
    if not all(isinstance(v, int | float) for v in values):
        return None
    games = record.get("episodes_total")
    if "episode_reward_mean" in keys and isinstance(games, int) and games < MEAN_WINDOW:
        return None
    return float(min(values))  # type: ignore[type-var]


def time_to_target(runs: list[RunData], target: float | None) -> list[TimeToTarget]:
    """Env steps and training seconds until the run's target metric (``stop.target_reward_metric``:
    the mean of the last 100 games, or their EMA) first reached the target (each run's own
    ``stop.target_reward`` when ``target`` is None; runs without one are left out)."""
    out = []
    for run in runs:
        goal = target if target is not None else run.get("stop.target_reward")
        if goal is None:
            continue
        metric = str(run.get("stop.target_reward_metric", "mean100"))
        hit = None
        best = None
        for r in run.records:
            value = reward_metric(r, metric)
            if value is not None:
                best = value if best is None else max(best, value)
                if hit is None and value >= goal:
                    hit = r
        out.append(
            TimeToTarget(
                run.label,
                float(goal),
                metric,
                int(hit["timesteps_total"]) if hit else None,
                float(hit["time_total_s"]) if hit else None,
                best,
                frames_per_step(run),
            )
        )
    return out
