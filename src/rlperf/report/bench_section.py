"""The report's benchmark section: every (preset, game, seed) run of an ``rlperf bench``
scored once (:func:`~rlperf.report.bench_scores.run_score`), normalised by the human and
random references where the game has them, and aggregated with rliable
(:mod:`~rlperf.report.bench_stats`).

Which scores are aggregated: the human-normalised scores of the games that have a
reference; games without one (CartPole-v1...) are named and left out of them. When no game
of the bench has a reference, the raw scores are aggregated instead and the section says
so (raw scores of different games are on different scales: only a one-game bench's raw
aggregates compare like with like). A preset is aggregated over its seeds that scored on
every aggregated game; the seeds left out and why are listed.

A bench run with ``--target R`` gets a second section, the time to the target
(:mod:`~rlperf.report.bench_target_section`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlperf.report import bench_plots
from rlperf.report.bench_scores import RunScore, reference, reference_sources, run_score
from rlperf.report.bench_stats import METRICS, Aggregates, aggregate
from rlperf.report.load import BenchData, Collection, RunData
from rlperf.report.render import FigureBlock, Section
from rlperf.report.tables import Table


@dataclass
class BenchCell:
    """One (preset, game, seed) point of a bench and what came of it."""

    point: str
    preset: str
    game: str
    """The env id."""
    seed: int
    status: str
    """The sweep ledger's latest status (only ``completed`` runs are scored)."""
    run: RunData | None = None
    score: RunScore | None = None

    @property
    def normalised(self) -> float | None:
        ref = reference(self.game)
        if ref is None or self.score is None or self.score.score is None:
            return None
        return ref.normalise(self.score.score)


@dataclass
class BenchMatrices:
    """The score matrices the aggregates are computed from, and what was left out."""

    normalised: bool
    games: list[str]
    matrices: dict[str, np.ndarray] = field(default_factory=dict)
    """Preset -> ``seeds x games``."""
    seeds: dict[str, list[int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def bench_cells(bench: BenchData, col: Collection) -> list[BenchCell]:
    """Every point of ``bench`` in its order, with its run and score when it completed."""
    statuses: dict[str, dict[str, Any]] = {}
    for sweep in col.sweeps:
        if sweep.path.resolve() == bench.path.resolve():
            statuses = sweep.points
    runs = {r.path.resolve(): r for r in col.runs}
    cells = []
    for name, point in bench.points.items():
        record = statuses.get(name, {})
        status = str(record.get("status", "not run"))
        run = runs.get((bench.path / str(record.get("run_dir", f"runs/{name}"))).resolve())
        cell = BenchCell(name, str(point["preset"]), str(point["game"]), int(point["seed"]), status)
        if run is not None and status == "completed":
            cell.run, cell.score = run, run_score(run.records)
        cells.append(cell)
    return cells


def bench_matrices(cells: list[BenchCell]) -> BenchMatrices:
    """The matrices to aggregate (see the module's docstring for which)."""
    games = list(dict.fromkeys(c.game for c in cells))
    with_ref = [g for g in games if reference(g) is not None]
    without = [g for g in games if reference(g) is None]
    normalised = bool(with_ref)
    out = BenchMatrices(normalised, with_ref if normalised else games)
    for game in without:
        if normalised:
            out.notes.append(
                f"no human/random reference for {game}: left out of the normalised aggregates"
            )
        else:
            out.notes.append(f"no human/random reference for {game}")
    if not normalised:
        out.notes.append(
            "no game of this bench has a human/random reference: the aggregates are of raw scores"
            + (" (on different scales per game)" if len(games) > 1 else "")
        )
    for preset in dict.fromkeys(c.preset for c in cells):
        mine = [c for c in cells if c.preset == preset]
        rows, seeds = [], []
        for seed in dict.fromkeys(c.seed for c in mine):
            by_game = {c.game: c for c in mine if c.seed == seed}
            values = [_value(by_game.get(g), normalised) for g in out.games]
            missing = [g for g, v in zip(out.games, values, strict=True) if v is None]
            if missing:
                out.notes.append(
                    f"{preset} seed {seed} left out of the aggregates: no score on "
                    + ", ".join(f"{g} ({_why(by_game.get(g))})" for g in missing)
                )
                continue
            rows.append(values)
            seeds.append(seed)
        if rows:
            out.matrices[preset] = np.asarray(rows, dtype=float)
            out.seeds[preset] = seeds
        else:
            out.notes.append(f"{preset} has no seed that scored on every game: not aggregated")
    return out


def _value(cell: BenchCell | None, normalised: bool) -> float | None:
    if cell is None or cell.score is None:
        return None
    return cell.normalised if normalised else cell.score.score


def _why(cell: BenchCell | None) -> str:
    if cell is None:
        return "not planned"
    if cell.status != "completed":
        return cell.status
    return "no game finished"


Figure = Callable[..., FigureBlock]
Tables = Callable[..., list[Table]]


def bench_section(bench: BenchData, col: Collection, figure: Figure, tables: Tables) -> Section:
    """The section of one bench: runs, curves, aggregates, improvement, profiles."""
    spec = bench.spec
    cells = bench_cells(bench, col)
    runs = [c.run for c in cells if c.run is not None]
    sec = Section(f"bench-{bench.name}", f"Benchmark {bench.name}")
    budget = float(spec.get("budget_s") or 0)
    sec.paragraphs.append(
        f"{len(spec.get('presets') or [])} preset(s) x {len(spec.get('games') or [])} game(s) x "
        f"{len(spec.get('seeds') or [])} seed(s), {budget / 60:g} minutes of training each, "
        f"every run its own rlperf train process ({_parallel_text(spec)}). The score of a run is "
        "the mean return of its last 100 true games (whole games, unclipped rewards; fewer "
        "when fewer finished) at the end of its budget, the same for every preset. "
        "Human-normalised: (score - random) / (human - random), references from "
        + "; ".join(reference_sources())
        + "."
    )
    matrices = bench_matrices(cells)
    sec.items = list(matrices.notes)
    commands = bench.commands
    sec.figures.append(
        figure(
            f"bench_{bench.name}_curves.png",
            lambda p: bench_plots.curves(cells, p),
            "Per game: the mean return of the last 100 games against training time and against "
            "env steps; line = the mean over seeds, band = the seeds' range.",
            "one row of two panels per game, a line and band per preset",
            runs,
            commands=commands,
        )
    )
    sec.tables += tables(_runs_table(bench, cells))
    if not matrices.matrices:
        sec.paragraphs.append("No preset has a complete set of scores yet: no aggregates.")
        return sec
    agg = aggregate(matrices.matrices, normalised=matrices.normalised)
    kind = "human-normalised score" if matrices.normalised else "raw score"
    sec.paragraphs.append(
        f"Aggregates of the {kind} over {', '.join(matrices.games)} with rliable: interquartile "
        "mean (IQM: the mean of the middle 50 % of all runs' scores), median and mean of the "
        "per-game means, each with a 95 % stratified-bootstrap confidence interval (runs "
        "resampled within each game, fixed bootstrap seed); P(X > Y) is the probability that a "
        "run of X beats a run of Y on a game picked at random (0.5 = no difference)."
    )
    sec.figures.append(
        figure(
            f"bench_{bench.name}_aggregates.png",
            lambda p: bench_plots.aggregates(agg, kind, p),
            f"IQM, median and mean {kind} per preset with 95 % confidence intervals.",
            "interval estimates per preset for three aggregate metrics",
            runs,
            commands=commands,
        )
    )
    sec.figures.append(
        figure(
            f"bench_{bench.name}_profiles.png",
            lambda p: bench_plots.profiles(agg, kind, p),
            f"Performance profiles: the fraction of runs whose {kind} exceeds tau, with 95 % "
            "bands.",
            "performance profile curves per preset",
            runs,
            commands=commands,
        )
    )
    sec.tables += tables(
        _aggregate_table(bench, agg, matrices, kind), _improvement_table(bench, agg)
    )
    return sec


def _parallel_text(spec: dict[str, Any]) -> str:
    parallel = int(spec.get("parallel") or 1)
    if parallel <= 1:
        return "one at a time"
    return f"{parallel} at once, each pinned to its own share of the CPUs"


def _runs_table(bench: BenchData, cells: list[BenchCell]) -> Table:
    t = Table(
        f"bench_{bench.name}_runs",
        "Every run: its score at the budget",
        [
            "preset",
            "game",
            "seed",
            "status",
            "score",
            "games scored",
            "human-normalised",
            "env steps",
            "training s",
        ],
    )
    for c in cells:
        s = c.score
        t.rows.append(
            [
                c.preset,
                c.game,
                c.seed,
                c.status,
                s.score if s else None,
                s.games if s else None,
                c.normalised,
                s.env_steps if s else None,
                s.seconds if s else None,
            ]
        )
    return t


def _aggregate_table(bench: BenchData, agg: Aggregates, m: BenchMatrices, kind: str) -> Table:
    headers = ["preset", "seeds"]
    for metric in METRICS:
        headers += [metric, f"{metric} 95% CI low", f"{metric} 95% CI high"]
    t = Table(f"bench_{bench.name}_aggregates", f"Aggregate {kind} (rliable)", headers)
    for preset, values in agg.metrics.items():
        row: list[Any] = [preset, ",".join(map(str, m.seeds[preset]))]
        for metric in METRICS:
            v = values[metric]
            row += [v.value, v.low, v.high]
        t.rows.append(row)
    return t


def _improvement_table(bench: BenchData, agg: Aggregates) -> Table:
    t = Table(
        f"bench_{bench.name}_improvement",
        "Probability of improvement P(X > Y) (rliable)",
        ["X", "Y", "P(X > Y)", "95% CI low", "95% CI high"],
    )
    for (x, y), v in agg.improvement.items():
        t.rows.append([x, y, v.value, v.low, v.high])
    if not t.rows:
        t.rows.append(["(one preset)", "-", None, None, None])
    return t
