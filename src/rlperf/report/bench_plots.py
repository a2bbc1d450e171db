"""The benchmark section's figures (drawn like every report figure: Agg canvas, no pyplot).

The seeds of a preset are drawn as one line and a band: each seed's curve is interpolated
onto a common x grid over the range every seed covers, the line is their mean and the band
their minimum to maximum (with 2-5 seeds the range hides nothing, where a standard
deviation would pretend to a distribution).

The time to target draws every seed as a point (a miss hollow, at its cap) beside the
median and its interval: with 2-10 seeds the points themselves are the distribution.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rlperf.report.plots import _figure, _save

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from rlperf.report.bench_section import BenchCell
    from rlperf.report.bench_stats import Aggregates
    from rlperf.report.bench_target import CensoredMedian, TargetSummary

GRID_POINTS = 200
X_AXES = (
    ("time_total_s", "training time (s)"),
    ("timesteps_total", "env steps"),
)


def seed_band(
    curves: list[tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(x, mean, low, high) of several (x, y) curves over the x range all of them cover, or
    None when they share no range."""
    start = max(float(x[0]) for x, _ in curves)
    end = min(float(x[-1]) for x, _ in curves)
    if end < start:
        return None
    grid = np.linspace(start, end, GRID_POINTS) if end > start else np.array([start])
    ys = np.stack([np.interp(grid, x, y) for x, y in curves])
    return grid, ys.mean(axis=0), ys.min(axis=0), ys.max(axis=0)


def _curve(cell: BenchCell, x_key: str) -> tuple[np.ndarray, np.ndarray] | None:
    if cell.run is None:
        return None
    pts = [
        (float(r[x_key]), float(r["episode_reward_mean"]))
        for r in cell.run.records
        if isinstance(r.get("episode_reward_mean"), int | float)
        and isinstance(r.get(x_key), int | float)
    ]
    if not pts:
        return None
    xs, ys = zip(*pts, strict=True)
    return np.asarray(xs), np.asarray(ys)


def curves(cells: list[BenchCell], path: Path) -> Path:
    """Per game (a row) the score curve against training time and env steps, per preset."""
    games = list(dict.fromkeys(c.game for c in cells))
    presets = list(dict.fromkeys(c.preset for c in cells))
    fig = _figure(12, 2.8 * len(games) + 0.6)
    axes = np.atleast_2d(fig.subplots(len(games), 2, squeeze=False))
    colors = {p: f"C{i % 10}" for i, p in enumerate(presets)}
    for row, game in enumerate(games):
        for col, (x_key, x_label) in enumerate(X_AXES):
            ax = axes[row][col]
            drawn = False
            for preset in presets:
                found = [_curve(c, x_key) for c in cells if c.game == game and c.preset == preset]
                mine = [c for c in found if c is not None]
                band = seed_band(mine) if mine else None
                if band is None:
                    continue
                grid, mean, low, high = band
                ax.plot(grid, mean, color=colors[preset], label=f"{preset} ({len(mine)} seeds)")
                ax.fill_between(grid, low, high, color=colors[preset], alpha=0.2, linewidth=0)
                drawn = True
            ax.set_title(game, fontsize=10)
            ax.set_xlabel(x_label)
            ax.set_ylabel("mean return, last 100 games")
            ax.grid(alpha=0.3)
            if drawn:
                ax.legend(fontsize=7, loc="best")
            else:
                ax.text(0.5, 0.5, "no finished game yet", ha="center", transform=ax.transAxes)
    return _save(fig, path)


def aggregates(agg: Aggregates, kind: str, path: Path) -> Path:
    """IQM, median and mean per preset: the point and its 95 % interval."""
    from rlperf.report.bench_stats import METRICS

    presets = list(agg.metrics)
    fig = _figure(12, max(2.4, 0.5 * len(presets) + 1.4))
    axes = fig.subplots(1, len(METRICS), sharey=True)
    ys = np.arange(len(presets))
    for ax, metric in zip(axes, METRICS, strict=True):
        for y, preset in zip(ys, presets, strict=True):
            v = agg.metrics[preset][metric]
            ax.plot([v.low, v.high], [y, y], color=f"C{y % 10}", linewidth=8, alpha=0.45)
            ax.plot([v.value], [y], "|", color="black", markersize=14)
        ax.set_title(metric, fontsize=10)
        ax.set_xlabel(kind)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(ys, presets)
    axes[0].invert_yaxis()
    return _save(fig, path)


def profiles(agg: Aggregates, kind: str, path: Path) -> Path:
    """The fraction of runs above each threshold, per preset, with its 95 % band."""
    fig = _figure(8, 4.4)
    ax = fig.subplots()
    for i, (preset, profile) in enumerate(agg.profiles.items()):
        band = agg.profile_bands[preset]
        ax.plot(agg.taus, profile, color=f"C{i % 10}", label=preset)
        ax.fill_between(agg.taus, band[0], band[1], color=f"C{i % 10}", alpha=0.2, linewidth=0)
    ax.set_xlabel(f"{kind} threshold tau")
    ax.set_ylabel("fraction of runs with score > tau")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


TARGET_PANELS = (
    ("env_steps", "env steps to target"),
    ("seconds", "training seconds to target"),
)
SEED_ROW = (-0.38, -0.02)
"""Where a preset's seeds are spread in its row (above its median; equal times stay apart)."""
MEDIAN_ROW = 0.22
"""Where a preset's median and interval are drawn in its row, below its seeds."""


def _median_mark(ax: Axes, y: float, m: CensoredMedian, color: str) -> None:
    """The median as a black bar with its interval as a band; a median beyond the cap as a
    black arrowhead at the (lower-bound) median, labelled."""
    if m.beyond_cap:  # half or more missed: the median is a cap, not a time
        ax.plot([m.value], [y], ">", color="black", markersize=8)
        ax.annotate(
            "median > cap",
            xy=(m.value, y),
            xytext=(-8, 0),
            textcoords="offset points",
            ha="right",
            va="center",
            fontsize=8,
        )
        return
    if m.low is not None and m.high is not None:
        ax.plot(
            [m.low, m.high], [y, y], color=color, linewidth=8, alpha=0.35, solid_capstyle="butt"
        )
    ax.plot([m.value], [y], "|", color="black", markersize=14, markeredgewidth=2)


def _target_legend(fig: Figure) -> None:
    """The figure's key, below its panels: markers and lines are the same in every panel."""
    from matplotlib.lines import Line2D

    handles = [
        Line2D([], [], marker="o", linestyle="none", color="grey", label="seed: reached"),
        Line2D(
            [],
            [],
            marker=">",
            linestyle="none",
            markerfacecolor="none",
            color="grey",
            label="seed: not reached (drawn at its cap)",
        ),
        Line2D([], [], marker="|", linestyle="none", color="black", markersize=12, label="median"),
        Line2D([], [], color="grey", linewidth=8, alpha=0.35, label="95 % CI of the median"),
        Line2D([], [], color="grey", linestyle="--", label="budget (the cap)"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize=8)


def time_to_target(
    summaries: list[TargetSummary], target: float, budget_s: float, path: Path
) -> Path:
    """The figure of :func:`time_to_target_figure`, saved to ``path``."""
    return _save(time_to_target_figure(summaries, target, budget_s), path)


def time_to_target_figure(summaries: list[TargetSummary], target: float, budget_s: float) -> Figure:
    """Per game (a row): each seed's env steps and training seconds to the target, per
    preset, with the median over seeds and its 95 % interval."""
    games = list(dict.fromkeys(s.game for s in summaries))
    presets = list(dict.fromkeys(s.preset for s in summaries))
    colors = {p: f"C{i % 10}" for i, p in enumerate(presets)}
    fig = _figure(12, max(2.2, 0.75 * len(presets) + 1.2) * len(games) + 0.6)
    axes = fig.subplots(len(games), len(TARGET_PANELS), squeeze=False)
    for row, game in enumerate(games):
        mine = {s.preset: s for s in summaries if s.game == game}
        for col, (attr, label) in enumerate(TARGET_PANELS):
            ax = axes[row][col]
            for y, preset in enumerate(presets):
                s = mine.get(preset)
                if s is None:
                    continue
                color = colors[preset]
                seeds = list(s.seeds.values())
                offsets = np.linspace(*SEED_ROW, len(seeds)) if len(seeds) > 1 else [-0.2]
                for dy, seed in zip(offsets, seeds, strict=True):
                    x = float(getattr(seed, attr))
                    if seed.reached:
                        ax.plot([x], [y + dy], "o", color=color, markersize=6)
                    else:  # a lower bound: hollow, pointing past its cap
                        ax.plot([x], [y + dy], ">", markerfacecolor="none", color=color, ms=8)
                _median_mark(ax, y + MEDIAN_ROW, getattr(s, attr), color)
            if attr == "seconds" and budget_s > 0:
                ax.axvline(budget_s, color="grey", linestyle="--", linewidth=1)
            ax.set_yticks(range(len(presets)), presets)
            ax.set_ylim(len(presets) - 0.5, -0.5)  # first preset on top, as in the tables
            ax.set_title(f"{game}: target {target:g}", fontsize=10)
            ax.set_xlabel(label)
            # From zero, with room on the right: a seed at the far end stays a whole marker.
            ax.set_xlim(0, ax.get_xlim()[1] * 1.04)
            ax.grid(axis="x", alpha=0.3)
    _target_legend(fig)
    return fig
