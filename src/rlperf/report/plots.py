"""The report's figures as PNG files.

Figures are drawn on matplotlib's Agg canvas directly (``Figure`` + ``FigureCanvasAgg``),
never through ``pyplot``: no global backend switch, no display needed, nothing kept alive
between figures. Every axis names its quantity and unit. Configurations are horizontal
bars (their labels are long sweep point names), in the order the report lists them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from rlperf.report.analysis import ModelComparison, ScalingCurve
from rlperf.report.load import InferenceData, RunData
from rlperf.report.summary import PHASES, RunSummary

DPI = 100
COLORS = {
    "sample": "#4c72b0",
    "load": "#dd8452",
    "learn": "#55a868",
    "update": "#c44e52",
    "other": "#8c8c8c",
}
PHASE_TEXT = {
    "sample": "sample: acting and env steps",
    "load": "load: batch to the learner",
    "learn": "learn: gradient steps",
    "update": "update: weights to the actors",
    "other": "other: the rest",
}
TIMED = ("sample", "load", "learn", "update")
"""The phases the thesis timed (``other`` is rlperf's remainder of the iteration)."""
GPU_COLORS = ("#55a868", "#8172b3", "#da8bc3", "#ccb974")


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, format="png", dpi=DPI)
    return path


def _bar_height(n: int) -> float:
    return max(2.6, 0.32 * n + 1.4)


def _hbars(ax, labels: list[str], values: list[float | None], color: str, unit: str) -> None:  # noqa: ANN001
    ys = list(range(len(labels)))
    shown = [v if v is not None else 0.0 for v in values]
    ax.barh(ys, shown, color=color)
    ax.set_yticks(ys, labels)
    if not ax.yaxis_inverted():  # first configuration on top, as in the tables (the axis
        ax.invert_yaxis()  # may be shared: inverting it twice would undo it)
    top = max(shown) if shown else 0.0
    for y, v in zip(ys, values, strict=True):
        text = "n/a" if v is None else f"{v:,.3g}"
        ax.text((v or 0.0) + top * 0.01, y, text, va="center", fontsize=8)
    ax.set_xlim(0, top * 1.18 if top > 0 else 1)
    ax.set_xlabel(unit)
    ax.grid(axis="x", alpha=0.3)


def _grouped(
    ax,  # noqa: ANN001
    labels: list[str],
    rows: list[dict[Any, float]],
    series: list[tuple[Any, str, str]],
    unit: str,
    missing: str,
) -> None:
    """One group of bars per label, a bar per series (key, legend name, colour) with its
    value written beside it; a label whose row has none of the keys shows ``missing`` instead
    of bars, so that "not measured" never reads as zero."""
    ys = list(range(len(labels)))
    height = 0.8 / max(1, len(series))  # no series (no GPU at all): every label is missing
    top = max((row[key] for row in rows for key, _, _ in series if key in row), default=0.0)
    for k, (key, name, color) in enumerate(series):
        offsets = [y - 0.4 + height * (k + 0.5) for y in ys]
        values = [row.get(key) for row in rows]
        ax.barh(offsets, [v or 0.0 for v in values], height=height, color=color, label=name)
        for y, v in zip(offsets, values, strict=True):
            if v is not None:
                ax.text(v + top * 0.01, y, f"{v:,.3g}", va="center", fontsize=7)
    for y, row in zip(ys, rows, strict=True):
        if not any(key in row for key, _, _ in series):
            ax.text(top * 0.01, y, missing, va="center", fontsize=8, style="italic")
    ax.set_yticks(ys, labels)
    if not ax.yaxis_inverted():  # first on top; a shared axis must not be inverted twice
        ax.invert_yaxis()
    ax.set_xlim(0, top * 1.18 if top > 0 else 1)
    ax.set_xlabel(unit)
    ax.grid(axis="x", alpha=0.3)


def _stacked(ax, labels: list[str], rows: list[dict[str, float]], share: bool = False) -> None:  # noqa: ANN001
    """One bar per label, its phases stacked; with ``share`` the rows are percentages and
    segments of at least 8% say theirs."""
    ys = list(range(len(labels)))
    start = [0.0] * len(labels)
    for phase in PHASES:
        values = [row.get(phase, 0.0) for row in rows]
        ax.barh(ys, values, left=start, color=COLORS[phase], label=phase)
        for y, v, x0 in zip(ys, values, start, strict=True):
            if share and v >= 8:
                ax.text(
                    x0 + v / 2, y, f"{v:.0f}%", ha="center", va="center", fontsize=7, color="white"
                )
        start = [a + b for a, b in zip(start, values, strict=True)]
    ax.set_yticks(ys, labels)
    if not ax.yaxis_inverted():  # first on top; a shared axis must not be inverted twice
        ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)


def phase_times(
    summaries: list[RunSummary],
    path: Path,
    title: str = "Time per iteration by phase (mean over steady iterations)",
) -> Path:
    """Mean time per iteration of each phase, one panel per phase (thesis Figures 4.4-4.8;
    drawn for the GPU runs alone, Figure 4.7)."""
    labels = [s.label for s in summaries]
    fig = _figure(12, 2 * _bar_height(len(labels)))
    axes = fig.subplots(2, 2, sharey=True)
    for ax, phase in zip(axes.flat, TIMED, strict=True):
        _hbars(
            ax,
            labels,
            [s.phase_ms.get(phase) for s in summaries],
            COLORS[phase],
            "ms per iteration",
        )
        ax.set_title(PHASE_TEXT[phase], fontsize=10)
    fig.suptitle(title)
    return _save(fig, path)


def phase_breakdown(summaries: list[RunSummary], path: Path) -> Path:
    """Stacked phases per configuration: milliseconds (left) and percent (right) (thesis
    Figure 4.9)."""
    labels = [s.label for s in summaries]
    fig = _figure(12, _bar_height(len(labels)) + 0.8)
    left, right = fig.subplots(1, 2, sharey=True)
    _stacked(left, labels, [s.phase_ms for s in summaries])
    _stacked(right, labels, [s.phase_pct for s in summaries], share=True)
    left.set_xlabel("ms per iteration")
    left.set_title("Iteration time", fontsize=10)
    right.set_xlim(0, 100)
    right.set_xlabel("% of the iteration")
    right.set_title("Share of each phase", fontsize=10)
    right.legend(loc="lower right", fontsize=8, ncols=5, bbox_to_anchor=(1.0, 1.06), frameon=False)
    return _save(fig, path)


def phases_by_model_figure(comparison: ModelComparison) -> Figure:
    """One panel per model with its phase times per configuration, (a), (b), ..., and a last
    panel comparing the models' mean iteration, split into phases (thesis Figures 4.4-4.6)."""
    models = list(comparison.runs)
    panels = len(models) + 1
    cols = 2 if panels <= 4 else 3
    rows = -(-panels // cols)
    most = max(len(runs) for runs in comparison.runs.values())
    fig = _figure(6 * cols, rows * _bar_height(2 * most))
    axes = list(fig.subplots(rows, cols, squeeze=False).flat)
    series = [(p, p, COLORS[p]) for p in TIMED]
    for n, (ax, model) in enumerate(zip(axes, models, strict=False)):
        runs = comparison.runs[model]
        _grouped(
            ax,
            [c for c, _ in runs],
            [s.phase_ms for _, s in runs],
            series,
            "ms per iteration",
            "no phases recorded",
        )
        ax.set_title(f"({chr(ord('a') + n)}) {model}", fontsize=10)
    last = axes[len(models)]
    _stacked(last, models, [comparison.mean_phase_ms(m) for m in models])
    last.set_xlabel("ms per iteration, mean over configurations")
    common = comparison.common
    over = (
        f"the {len(common)} configurations every model ran"
        if common
        else "each model's own configurations (none shared)"
    )
    last.set_title(
        f"({chr(ord('a') + len(models))}) models compared: mean over {over}", fontsize=10
    )
    # one legend for all panels, below them: inside a panel it would hide bars
    fig.legend(*last.get_legend_handles_labels(), loc="outside lower center", ncols=5, fontsize=8)
    for ax in axes[panels:]:
        ax.set_axis_off()
    fig.suptitle("Time per iteration by phase and model (mean over steady iterations)")
    return fig


def phases_by_model(comparison: ModelComparison, path: Path) -> Path:
    """:func:`phases_by_model_figure` as a PNG."""
    return _save(phases_by_model_figure(comparison), path)


def memory_figure(summaries: list[RunSummary]) -> Figure:
    """Memory per configuration: the run's resident RAM (left) and each GPU's memory in use
    (right; "no GPU" where NVML measured none) (thesis Figure 4.3)."""
    labels = [s.label for s in summaries]
    gpus = sorted({i for s in summaries for i in s.gpu_mem_mb})
    fig = _figure(12, _bar_height(len(labels) * max(1, len(gpus))))
    ram, gpu = fig.subplots(1, 2, sharey=True)
    _hbars(ram, labels, [s.rss_mb for s in summaries], "#937860", "resident MiB")
    ram.set_title("RAM of the run's processes", fontsize=10)
    series = [(i, f"GPU {i}", GPU_COLORS[n % len(GPU_COLORS)]) for n, i in enumerate(gpus)]
    _grouped(gpu, labels, [s.gpu_mem_mb for s in summaries], series, "MiB in use (NVML)", "no GPU")
    gpu.set_title("GPU memory in use (all processes')", fontsize=10)
    if len(gpus) > 1:
        gpu.legend(fontsize=8, loc="lower right")
    fig.suptitle("Memory per configuration (mean over steady iterations)")
    return fig


def memory(summaries: list[RunSummary], path: Path) -> Path:
    """:func:`memory_figure` as a PNG."""
    return _save(memory_figure(summaries), path)


def utilisation(summaries: list[RunSummary], path: Path) -> Path:
    """CPU, RAM and (where measured) GPU use per configuration (thesis Figures 4.1-4.3, 4.10)."""
    labels = [s.label for s in summaries]
    gpus = sorted({i for s in summaries for i in s.gpu_util})
    panels = [
        ("CPU use, whole machine", "% of all cores", [s.cpu_percent for s in summaries], "#4c72b0"),
        (
            "CPU use of the run's processes",
            "% of one core",
            [s.proc_cpu_percent for s in summaries],
            "#64b5cd",
        ),
        ("RAM use, whole machine", "% of RAM", [s.ram_percent for s in summaries], "#dd8452"),
        ("Memory of the run's processes", "resident MiB", [s.rss_mb for s in summaries], "#937860"),
    ]
    for i in gpus:
        panels.append(
            (f"GPU {i} use", "% busy (NVML)", [s.gpu_util.get(i) for s in summaries], "#55a868")
        )
    cols = 2
    rows = (len(panels) + 1) // cols
    fig = _figure(12, rows * _bar_height(len(labels)))
    axes = fig.subplots(rows, cols, sharey=True, squeeze=False)
    for ax, (title, unit, values, color) in zip(axes.flat, panels, strict=False):
        _hbars(ax, labels, values, color, unit)
        ax.set_title(title, fontsize=10)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_axis_off()
    note = "" if gpus else "; no GPU utilisation recorded (no GPU, or NVML not installed)"
    fig.suptitle(f"Resource use (mean over steady iterations{note})")
    return _save(fig, path)


def scaling(curves: list[ScalingCurve], path: Path) -> Path:
    """SPS against worker processes or envs, with the knee marked."""
    fig = _figure(12, 4.2)
    axes = fig.subplots(1, len({c.axis for c in curves}), squeeze=False)[0]
    by_axis = {axis: [c for c in curves if c.axis == axis] for axis in ("workers", "envs")}
    for ax, (axis, group) in zip(axes, [(a, g) for a, g in by_axis.items() if g], strict=True):
        for curve in group:
            xs = [x for x, _ in curve.points]
            med = [s.sps_median or 0.0 for _, s in curve.points]
            low = [
                m - (s.sps[0] if s.sps else m) for m, (_, s) in zip(med, curve.points, strict=True)
            ]
            high = [
                (s.sps[2] if s.sps else m) - m for m, (_, s) in zip(med, curve.points, strict=True)
            ]
            line = ax.errorbar(xs, med, yerr=[low, high], marker="o", capsize=3, label=curve.group)
            knee = curve.knee
            if knee is not None:
                ax.axvline(knee[0], color=line.lines[0].get_color(), ls="--", alpha=0.6)
                ax.annotate(
                    f"knee: {knee[0]}",
                    (knee[0], knee[1].sps_median or 0.0),
                    textcoords="offset points",
                    xytext=(6, -14),
                    fontsize=8,
                )
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted({x for c in group for x, _ in c.points}))
        ax.get_xaxis().set_major_formatter("{x:.0f}")
        ax.set_xlabel("env worker processes" if axis == "workers" else "envs stepped together")
        ax.set_ylabel("env steps per second (median, IQR bars)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title(f"Throughput against {axis}", fontsize=10)
    return _save(fig, path)


def learning_curves(runs: list[RunData], path: Path) -> Path:
    """Mean reward of the last 100 games against env steps and against training time."""
    fig = _figure(12, 4.2)
    by_steps, by_time = fig.subplots(1, 2, sharey=True)
    for run in runs:
        pts = [
            (r["timesteps_total"], r["time_total_s"], r["episode_reward_mean"])
            for r in run.records
            if isinstance(r.get("episode_reward_mean"), int | float)
        ]
        if not pts:
            continue
        steps, secs, reward = zip(*pts, strict=True)
        line = by_steps.plot(steps, reward, label=run.label)[0]
        by_time.plot(secs, reward, color=line.get_color(), label=run.label)
    by_steps.set_xlabel("env steps")
    by_time.set_xlabel("training time (s)")
    by_steps.set_ylabel("mean return of the last 100 games")
    by_steps.set_title("Against env steps", fontsize=10)
    by_time.set_title("Against wall-clock time", fontsize=10)
    for ax in (by_steps, by_time):
        ax.grid(alpha=0.3)
    if by_steps.get_lines():
        by_time.legend(fontsize=7, loc="best")
    else:
        for ax in (by_steps, by_time):
            ax.text(
                0.5,
                0.5,
                "no game finished within these runs\n(a Pong game lasts about 800+ steps per env)",
                ha="center",
                va="center",
                transform=ax.transAxes,
            )
    return _save(fig, path)


@dataclass(frozen=True)
class InferenceRow:
    """One inference point as Figure 4.12 draws it (ms; None where not recorded)."""

    label: str
    p50_ms: float | None
    p99_ms: float | None
    first_call_ms: float | None
    first_episode_mean_ms: float | None


def inference_rows(items: list[InferenceData]) -> list[InferenceRow]:
    """One row per inference point, in the order found (never merged by backend: R1..R8 of
    one model on one backend are different experiments)."""

    def get(item: InferenceData, key: str) -> float | None:
        value = item.result.get(key)
        return None if value is None else float(value)

    rows = []
    for i in items:
        backend = _backend_name(i)
        label = i.label if backend.split()[0] in i.label else f"{i.label} [{backend}]"
        rows.append(
            InferenceRow(
                label,
                get(i, "p50_ms"),
                get(i, "p99_ms"),
                get(i, "first_call_ms"),
                get(i, "first_episode_mean_ms"),
            )
        )
    return rows


def draw_inference(ax, rows: list[InferenceRow]) -> None:  # noqa: ANN001 - a matplotlib Axes
    """Horizontal bars of the steady p50 with p99 whiskers, and markers for the first call
    and the first game, one row per point, on ``ax``."""
    ys = list(range(len(rows)))
    p50 = [r.p50_ms or 0.0 for r in rows]
    whisker = [max(0.0, r.p99_ms - r.p50_ms) if r.p50_ms and r.p99_ms else 0.0 for r in rows]
    ax.barh(ys, p50, xerr=[[0.0] * len(rows), whisker], capsize=3, color="#4c72b0",
            label="steady calls: p50 bar, p99 whisker")  # fmt: skip
    for attr, marker, color, text in (
        ("first_episode_mean_ms", "o", "#dd8452", "first game: mean per call, warm-up included"),
        ("first_call_ms", "x", "#c44e52", "first call (cold)"),
    ):
        pts = [(getattr(r, attr), y) for r, y in zip(rows, ys, strict=True) if getattr(r, attr)]
        if pts:
            xs, yy = zip(*pts, strict=True)
            ax.scatter(xs, yy, marker=marker, color=color, zorder=3, label=text)
    ax.set_yticks(ys, [r.label for r in rows])
    ax.invert_yaxis()  # first point on top, as in the tables
    values = [v for r in rows for v in (r.p50_ms, r.p99_ms, r.first_call_ms) if v]
    if values and max(values) > 50 * min(values):  # a cold first call can be 1000x a step
        ax.set_xscale("log")
    ax.set_xlabel("model time per call (ms)")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")


def inference(items: list[InferenceData], path: Path) -> Path:
    """Model time per call of every inference point, one row each (thesis Figure 4.12, the
    latencies of Table 4.1): the steady p50 and p99 beside the first call and the first
    game, which pay the one-off costs the steady figures leave out."""
    rows = inference_rows(items)
    fig = _figure(12, _bar_height(len(rows)))
    ax = fig.subplots()
    draw_inference(ax, rows)
    ax.set_title("Inference latency of every point: steady, first call, first game", fontsize=10)
    return _save(fig, path)


def _backend_name(item: InferenceData) -> str:
    r = item.result
    name = str(r.get("backend", "?"))
    if r.get("device") not in (None, "cpu"):
        name += f" ({r['device']})"
    if r.get("batch_size", 1) != 1:
        name += f" x{r['batch_size']}"
    if r.get("threads", 1) != 1:
        name += f" {r['threads']}t"
    return name
