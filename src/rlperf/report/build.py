"""``rlperf report``: run, sweep and inference directories in; ``index.html``, PNG figures and
CSV/Markdown tables out.

Sections follow the thesis's analysis: per-phase time per configuration (its Figures
4.4-4.8; the GPU runs again on their own, 4.7; a panel per model and the models compared,
4.4-4.6) and the stacked breakdown (4.9); CPU, RAM and GPU use (4.1-4.3, 4.10) and memory
per configuration (4.3); then what the thesis did not have: throughput against workers or
envs with the knee marked, speed-ups against a baseline, learning curves against env steps
and wall-clock time, time to a target reward, energy per million frames; the inference
latency table (Table 4.1's shape) with fidelity columns; and a diagnosis per configuration.
A benchmark (``rlperf bench``) adds its section: scores per game, rliable's aggregates
(and with ``--target``, the time to the target per preset and game).
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rlperf.core.errors import UserInputError, make_output_dir
from rlperf.report import plots
from rlperf.report.analysis import (
    accelerator_runs,
    model_comparison,
    scaling_curves,
    speedups,
    time_to_target,
)
from rlperf.report.bench_target_section import bench_sections, benches_compared
from rlperf.report.diagnose import diagnose
from rlperf.report.load import Collection, InferenceData, RunData, collect
from rlperf.report.render import FigureBlock, Section, render_page
from rlperf.report.summary import PHASES, RunSummary, summarise
from rlperf.report.table_builders import (
    inference_tables,
    phase_table,
    resource_table,
    summary_table,
    sweep_table,
)
from rlperf.report.tables import Table
from rlperf.report.tune_section import tune_section

INDEX = "index.html"


@dataclass
class ReportResult:
    """What a report wrote."""

    index: Path
    figures: list[Path] = field(default_factory=list)
    tables: list[Path] = field(default_factory=list)
    summaries: list[RunSummary] = field(default_factory=list)


def _prov(items: list[RunData] | list[InferenceData]) -> tuple[list[str], list[str]]:
    return [i.command for i in items], [i.machine for i in items if i.manifest]


def _sweep_baseline(col: Collection, labels: list[str]) -> str | None:
    """The baseline a sweep file names, as this report labels it, if that point ran."""
    for sweep in col.sweeps:
        if sweep.baseline is None:
            continue
        for label in (sweep.baseline, f"{sweep.name}/{sweep.baseline}"):
            if label in labels:
                return label
    return None


def _check_output(out_dir: Path, inputs: list[Path]) -> None:
    for marker in ("metrics.jsonl", "sweep.jsonl", "inference.json", "config.yaml"):
        if (out_dir / marker).exists():
            raise UserInputError(
                f"output {out_dir} holds {marker}: it is a run or sweep directory; give another -o DIR"
            )
    resolved = out_dir.resolve()
    for path in inputs:
        if resolved == Path(path).resolve():
            raise UserInputError(
                f"output {out_dir} is one of the input directories; give another -o DIR"
            )
    if out_dir.exists() and not out_dir.is_dir():
        raise UserInputError(f"output {out_dir} exists and is not a directory")


def build_report(
    paths: list[Path],
    out_dir: Path,
    *,
    baseline: str | None = None,
    target: float | None = None,
    title: str | None = None,
    command: str | None = None,
) -> ReportResult:
    """Read ``paths``, write the report into ``out_dir``; UserInputError on bad input."""
    out_dir = Path(out_dir)
    _check_output(out_dir, paths)
    col = collect([Path(p) for p in paths])
    summaries = [summarise(r) for r in col.runs]
    labels = [s.label for s in summaries]
    if baseline is None:
        baseline = _sweep_baseline(col, labels)
    if baseline is not None and baseline not in labels:
        raise UserInputError(
            f"baseline {baseline!r} is not a configuration of this report; valid: {', '.join(labels) or 'none'}"
        )
    make_output_dir(out_dir, "report directory")
    result = ReportResult(out_dir / INDEX, summaries=summaries)
    sections: list[Section] = []
    run_machines = [r.machine for r in col.runs if r.manifest]

    def figure(
        name: str, draw: Any, caption: str, alt: str, items: Any, commands: Any = None
    ) -> FigureBlock:
        """Draw a figure; under it the commands of ``items`` (or ``commands``: one command
        that ran them all) and their machines."""
        path = draw(out_dir / name)
        result.figures.append(path)
        cmds, machines = _prov(items)
        return FigureBlock(name, alt, caption, commands or cmds, machines)

    def tables(*ts: Table) -> list[Table]:
        for t in ts:
            result.tables += t.write(out_dir)
        return list(ts)

    if summaries:
        overview = Section("overview", "Configurations")
        overview.paragraphs.append(
            f"{len(summaries)} training configuration(s). Warm-up iterations (marked in each "
            "run's records) are left out of every number: the thesis discarded its first 3-4 "
            "GPU iterations by hand. SPS = env steps per second; FPS = emulator frames per second "
            "(env steps x frameskip)."
        )
        for sweep in col.sweeps:
            if sweep.description:
                overview.paragraphs.append(f"Sweep {sweep.name}: {sweep.description}")
        overview.tables = tables(summary_table(summaries))
        sections.append(overview)
    if col.sweeps:
        status = Section("sweeps", "Sweep status")
        status.paragraphs.append(
            "Every point of every sweep with its latest status. Points that need hardware this "
            "machine lacks are skipped, not failed; flagged points ran with more worker "
            "processes than cores."
        )
        status.tables = tables(sweep_table(col))
        sections.append(status)
    for bench in col.benches:
        sections += bench_sections(bench, col, figure, tables)
    across = benches_compared(col.benches, col, tables)
    if across is not None:
        sections.append(across)
    if summaries:
        phases = Section("phases", "Time per phase")
        phases.paragraphs.append(
            "sample = acting and env stepping, load = moving the batch to the learner, learn = "
            "the gradient steps, update = sending weights to the actors, other = the rest of "
            "the iteration. They add up to the iteration's wall time."
        )
        phases.figures.append(
            figure(
                "phase_times.png",
                lambda p: plots.phase_times(summaries, p),
                "Mean milliseconds per iteration of each phase (thesis Figures 4.4-4.8).",
                "bar charts of sample, load, learn and update time per configuration",
                col.runs,
            )
        )
        phases.figures += _phase_figures(summaries, col, figure)
        phases.figures.append(
            figure(
                "phase_breakdown.png",
                lambda p: plots.phase_breakdown(summaries, p),
                "Iteration time split into phases, in milliseconds and in percent (thesis Figure 4.9).",
                "stacked bars of the phase split per configuration",
                col.runs,
            )
        )
        phases.tables = tables(phase_table(summaries))
        sections.append(phases)

        res = Section("resources", "CPU, RAM and GPU use")
        res.figures.append(
            figure(
                "utilisation.png",
                lambda p: plots.utilisation(summaries, p),
                "Mean whole-machine CPU and RAM use, the run's resident memory and, where "
                "measured, GPU use (thesis Figures 4.1-4.3 and 4.10).",
                "bar charts of CPU, RAM and GPU use per configuration",
                col.runs,
            )
        )
        res.figures.append(
            figure(
                "memory.png",
                lambda p: plots.memory(summaries, p),
                "Memory per configuration: the run's resident RAM and each GPU's memory in use "
                "(every process's, as nvidia-smi shows it), 'no GPU' where NVML measured none "
                "(thesis Figure 4.3).",
                "bar charts of RAM and GPU memory per configuration",
                col.runs,
            )
        )
        res.tables = tables(resource_table(summaries))
        sections.append(res)

        sections.append(_scaling_section(summaries, col, baseline or labels[0], figure, tables))
        sections.append(_learning_section(summaries, col, target, figure, tables))
    for tune in col.tunes:
        sections.append(tune_section(tune, col, figure, tables))
    if col.inference:
        inf = Section("inference", "Inference latency and fidelity")
        inf.paragraphs.append(
            "Each call is timed alone (input copy and (de)quantization included, env step "
            "excluded); the warm-up calls before the steady ones are timed and kept apart (the "
            "first call, and the first game with them counted in it). Energy per call is the "
            "energy over the games (RAPL CPU package, NVML GPUs) divided by the calls. "
            "Fidelity compares each backend's greedy action, logits and value with torch fp32 "
            "on recorded game observations; the thesis's int8 policy lost every game and "
            "nothing checked it."
        )
        latency, fid = inference_tables(col.inference)
        inf.figures.append(
            figure(
                "inference_latency.png",
                lambda p: plots.inference(col.inference, p),
                "Model time per call of every inference point: steady p50 and p99, the first "
                "call and the first game (thesis Figure 4.12, Table 4.1).",
                "one horizontal bar per inference point with first-call and first-game markers",
                col.inference,
            )
        )
        inf.tables = tables(latency, fid)
        sections.append(inf)
    if summaries:
        diag = Section("diagnosis", "Diagnosis")
        diag.paragraphs.append(
            "What bounds each configuration, from its phase split and the learner's and "
            "actors' rates (perf/learner_samples_per_s, perf/actor_steps_per_s)."
        )
        diag.items = [f"{s.label}: {diagnose(s)}" for s in summaries]
        sections.append(diag)
    prov = Section("provenance", "Commands and machines")
    prov_table = Table(
        "runs",
        "Where every number comes from",
        ["configuration", "command", "machine", "directory"],
    )
    for item in [*col.runs, *col.inference]:
        prov_table.rows.append([item.label, item.command, item.machine, str(item.path)])
    prov.tables = tables(prov_table)
    sections.append(prov)

    machines = list(dict.fromkeys(run_machines + [i.machine for i in col.inference if i.manifest]))
    meta = [
        f"Generated {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')} by rlperf {_version()}"
        + (f" with: {command}" if command else ""),
        "Machine: " + ("; ".join(machines) if machines else "unknown"),
    ]
    page = render_page(title or "rlperf report", meta, sections)
    result.index.write_text(page, encoding="utf-8")
    return result


def _phase_figures(summaries, col, figure) -> list[FigureBlock]:  # noqa: ANN001
    """The phase times again for the GPU runs alone (when CPU-only runs are beside them) and
    by model (when the runs span several models)."""
    out = []
    accelerated = accelerator_runs(summaries)
    if accelerated:
        labels = {s.label for s in accelerated}
        out.append(
            figure(
                "phase_times_gpu.png",
                lambda p: plots.phase_times(
                    accelerated,
                    p,
                    "Time per iteration by phase, GPU runs only (CPU-only runs left out)",
                ),
                "The same for the runs with their learner or actors on a GPU, without the CPU-only "
                "runs, whose times would dwarf theirs (thesis Figure 4.7).",
                "bar charts of sample, load, learn and update time of the GPU runs",
                [r for r in col.runs if r.label in labels],
            )
        )
    comparison = model_comparison(summaries)
    if comparison is not None:
        out.append(
            figure(
                "phase_times_by_model.png",
                lambda p: plots.phases_by_model(comparison, p),
                "Phase times per configuration, one panel per model, and the models compared by "
                "their mean iteration over the configurations they all ran (thesis Figures 4.4-4.6).",
                "grouped bars of phase times per configuration for each model, and stacked bars per model",
                col.runs,
            )
        )
    return out


def _scaling_section(summaries, col, baseline, figure, tables) -> Section:  # noqa: ANN001
    sec = Section("scaling", "Scaling and speed-up")
    curves = scaling_curves(summaries)
    if curves:
        sec.paragraphs.append(
            "Median SPS (bars: interquartile range) of configurations that differ only in "
            "their worker processes or envs. The knee is the smallest count reaching 90% of "
            "the best throughput: past it, more workers buy little."
        )
        sec.figures.append(
            figure(
                "scaling.png",
                lambda p: plots.scaling(curves, p),
                "Throughput against workers / envs, knee dashed.",
                "line chart of SPS against workers or envs",
                [
                    r
                    for r in col.runs
                    if any(r.label == s.label for c in curves for _, s in c.points)
                ],
            )
        )
        knee = Table(
            "scaling", "Throughput curves", ["curve", "axis", "count", "SPS median", "knee"]
        )
        for c in curves:
            k = c.knee
            for x, s in c.points:
                knee.rows.append(
                    [c.group, c.axis, x, s.sps_median, "knee" if k and k[0] == x else ""]
                )
        sec.tables += tables(knee)
    else:
        sec.paragraphs.append(
            "No configurations differ only in worker processes or envs, so there is no scaling "
            "curve (the workers sweep makes one)."
        )
    if len(summaries) > 1:
        ups = speedups(summaries, baseline)
        t = Table(
            "speedup",
            f"Speed-up against {baseline} (> 1 = faster; per phase: baseline time / this time)",
            ["configuration", "SPS speed-up", *[f"{p}" for p in PHASES]],
        )
        for u in ups:
            t.rows.append([u.label, u.sps, *[u.phases[p] for p in PHASES]])
        sec.tables += tables(t)
    return sec


def _learning_section(summaries, col, target, figure, tables) -> Section:  # noqa: ANN001
    sec = Section("learning", "Learning, time to target, energy")
    sec.figures.append(
        figure(
            "learning_curves.png",
            lambda p: plots.learning_curves(col.runs, p),
            "Mean return of the last 100 true games against env steps and against training time.",
            "learning curves per configuration",
            col.runs,
        )
    )
    hits = time_to_target(col.runs, target)
    if hits:
        t = Table(
            "time_to_target",
            "Time to the target return",
            ["configuration", "metric", "target", "env steps", "frames", "training s", "best"],
        )
        for h in hits:
            t.rows.append([h.label, h.metric, h.target, h.env_steps, h.frames, h.wall_s, h.best])
        sec.tables += tables(t)
        missing = [h.label for h in hits if h.env_steps is None]
        if missing:
            sec.paragraphs.append(f"Target not reached by: {', '.join(missing)}.")
    else:
        sec.paragraphs.append(
            "No target return was set (stop.target_reward in the runs, or --target R): no time-to-target table."
        )
    energy = Table(
        "energy",
        "Energy per million frames (CPU package by RAPL, GPUs by NVML)",
        [
            "configuration",
            "CPU J per million frames",
            "GPU J per million frames",
            "frames per env step",
        ],
    )
    for s in summaries:
        energy.rows.append(
            [s.label, s.energy_j_per_mframes, s.gpu_energy_j_per_mframes, s.frameskip]
        )
    if any(
        s.energy_j_per_mframes is not None or s.gpu_energy_j_per_mframes is not None
        for s in summaries
    ):
        sec.tables += tables(energy)
    else:
        sec.paragraphs.append(
            "Energy was not measured: no run could read the RAPL energy counters "
            "(/sys/class/powercap; usually root only, absent in many VMs) or a GPU's (NVML)."
        )
    return sec


def _version() -> str:
    try:
        return importlib.metadata.version("rlperf")
    except importlib.metadata.PackageNotFoundError:
        return "(source tree)"
