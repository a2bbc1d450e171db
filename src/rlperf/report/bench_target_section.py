"""The report's time-to-target section of a benchmark run with ``rlperf bench --target R``
(``bench.json``'s ``target``): per preset and game, every seed's env steps, training
seconds and command seconds to the target (or its cap, and where it ended, when it missed),
the medians over seeds with their 95 % bootstrap intervals, a figure of both, and each
preset against each other on a game (:mod:`~rlperf.report.target_comparison`). Several
benches with the same target given to one report are also compared with each other, preset
by preset (:func:`benches_compared`). The statistics are
:mod:`~rlperf.report.bench_target`'s; the runs are the bench section's cells
(:func:`~rlperf.report.bench_section.bench_cells`).
"""

from __future__ import annotations

import math
from itertools import combinations, product
from pathlib import Path
from typing import Any

from rlperf.report import bench_plots
from rlperf.report.bench_section import (
    BenchCell,
    Figure,
    Tables,
    bench_cells,
    bench_section,
)
from rlperf.report.bench_target import (
    CensoredMedian,
    TargetSummary,
    seed_target,
    summarise_targets,
    summary_line,
)
from rlperf.report.load import BenchData, Collection
from rlperf.report.render import Section
from rlperf.report.tables import Table
from rlperf.report.target_comparison import TargetComparison, compare_targets, pairwise


def bench_target(bench: BenchData) -> float | None:
    """The bench's ``--target`` (None: the runs trained to their budget)."""
    value = bench.spec.get("target")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def target_summaries(cells: list[BenchCell]) -> tuple[list[TargetSummary], list[str]]:
    """The time to target of every (preset, game) over its completed seeds, in the bench's
    order, and a note for each seed left out (a run that did not complete has no time)."""
    groups: dict[tuple[str, str], list[BenchCell]] = {}
    for c in cells:
        groups.setdefault((c.preset, c.game), []).append(c)
    summaries, notes = [], []
    for (preset, game), mine in groups.items():
        seeds = {}
        for c in mine:
            if c.run is None:
                why = c.status if c.status != "completed" else "no records in its run directory"
                notes.append(f"{preset} on {game} seed {c.seed} left out: {why}")
                continue
            ledger = c.run.ledger or {}
            seeds[c.seed] = seed_target(c.run.manifest, c.run.records, ledger.get("wall_s"))
        summary = summarise_targets(preset, game, seeds)
        if summary is not None:
            summaries.append(summary)
    return summaries, notes


def target_console_lines(bench: BenchData, col: Collection) -> list[str]:
    """One line per (preset, game) for the console after a bench (none without a target)."""
    target = bench_target(bench)
    if target is None:
        return []
    summaries, _ = target_summaries(bench_cells(bench, col))
    compared = pairwise([(s.preset, s) for s in summaries])
    return [summary_line(s, target) for s in summaries] + [
        f"time to target {target:g}: {c.text()}" for c in compared
    ]


def bench_sections(
    bench: BenchData, col: Collection, figure: Figure, tables: Tables
) -> list[Section]:
    """The bench's sections: its scores (:func:`bench_section`) and, when it ran with
    ``--target``, the time to the target (:func:`target_section`)."""
    sections = [bench_section(bench, col, figure, tables)]
    target = target_section(bench, col, figure, tables)
    if target is not None:
        sections.append(target)
    return sections


def _criteria(cells: list[BenchCell]) -> dict[str, str]:
    """Preset -> its runs' ``stop.target_reward_metric`` (what "reached" meant for it)."""
    out: dict[str, str] = {}
    for c in cells:
        if c.run is not None and c.preset not in out:
            out[c.preset] = str(c.run.get("stop.target_reward_metric", "mean100"))
    return out


def target_section(
    bench: BenchData, col: Collection, figure: Figure, tables: Tables
) -> Section | None:
    """Time to the bench's target per preset and game: every seed, the medians with their
    intervals, and a figure of both (None when the bench has no target)."""
    target = bench_target(bench)
    if target is None:
        return None
    cells = bench_cells(bench, col)
    runs = [c.run for c in cells if c.run is not None]
    budget = float(bench.spec.get("budget_s") or 0)
    criteria = _criteria(cells)
    sec = Section(
        f"bench-{bench.name}-target", f"Benchmark {bench.name}: time to target {target:g}"
    )
    sec.paragraphs.append(
        "Every run also stopped once its preset's criterion (stop.target_reward_metric: "
        + (", ".join(f"{p} {m}" for p, m in criteria.items()) or "-")
        + f") reached {target:g}; the budget of {budget / 60:g} minutes of training stayed the "
        "cap. Per seed: the env steps and the training seconds (time_total_s, start-up not "
        "counted) to the target, from target_reached in the run's manifest.json, and the whole "
        "rlperf train command from its start to its exit, as the bench timed its process "
        "(wall_s in sweep.jsonl; there is no timestamp at the target itself). A seed that "
        "missed the target shows 'not reached' with what it ran, its cap, and where it ended: "
        "the mean return of its last 100 games."
    )
    sec.paragraphs.append(
        "Per preset and game: the median env steps and training seconds to the target over "
        "the seeds, each with a 95 % bootstrap confidence interval (the seeds resampled with "
        "rliable: percentile interval, 2,000 resamples, fixed seed). Seeds that missed count "
        "at their cap, which is less than their true time: a median or interval with a miss "
        "is a lower bound (marked >=), and when half or more seeds missed the median is only "
        "known to be beyond the cap ('> cap', no interval)."
    )
    summaries, notes = target_summaries(cells)
    sec.items = notes
    sources = {s.process_source for t in summaries for s in t.seeds.values()}
    if "manifest" in sources:
        sec.items.append(
            "command seconds without a sweep timing are the manifest's started_utc to "
            "ended_utc: from just before the envs were built to the last manifest write "
            "(interpreter start and exit not counted)"
        )
    if None in sources:
        sec.items.append("command seconds: neither the sweep nor the manifest timed some runs")
    if not summaries:
        sec.paragraphs.append("No run has completed yet: no time to target.")
        return sec
    sec.figures.append(
        figure(
            f"bench_{bench.name}_time_to_target.png",
            lambda p: bench_plots.time_to_target(summaries, target, budget, p),
            f"Time to target {target:g} per game: each seed's env steps and training seconds "
            "to the target (filled: reached; hollow triangle: not reached, drawn at its cap), "
            "the median over seeds (black bar, misses at their cap) and its 95 % bootstrap "
            "interval (band).",
            "per game, two panels of seeds as points per preset with the median and interval",
            runs,
            commands=bench.commands,
        )
    )
    sec.tables += tables(
        _target_table(bench, target, summaries, criteria),
        _target_seeds_table(bench, target, cells, summaries),
    )
    compared = pairwise([(s.preset, s) for s in summaries])
    if compared:
        sec.paragraphs.append(COMPARISON_TEXT)
        sec.tables += tables(comparison_table(f"bench_{bench.name}_presets_compared", compared))
    return sec


COMPARISON_TEXT = (
    "Each preset against each earlier one on a game, seed by seed: in what share of the "
    "pairs (one seed of each) the first reached the target in fewer env steps, ties counted "
    "half. A seed that missed is only known to need more than its cap, so a pair it leaves "
    "open is undecided and the share becomes a range. p: a two-sided permutation test of "
    "that pairwise score under 'the presets do not differ' (exact over every split of the "
    "seeds up to 20,000 splits; without misses the exact Mann-Whitney test)."
)


def comparison_table(name: str, compared: list[TargetComparison]) -> Table:
    """One row per comparison: the pairs' outcome and the permutation test's p."""
    t = Table(
        name,
        "Time to target, arm against arm: share of seed pairs in which the first arm's "
        "seed reached it first (ties half; undecided pairs make a range)",
        [
            "arm",
            "against",
            "game",
            "seeds",
            "pairs first",
            "pairs against first",
            "ties",
            "undecided",
            "P(first) low",
            "P(first) high",
            "permutation p",
        ],
    )
    for c in compared:
        t.rows.append(
            [
                c.a,
                c.b,
                c.game,
                f"{c.seeds_a} vs {c.seeds_b}",
                c.a_first,
                c.b_first,
                c.ties,
                c.undecided,
                c.sooner_low,
                c.sooner_high,
                c.p_value,
            ]
        )
    return t


def benches_compared(benches: list[BenchData], col: Collection, tables: Tables) -> Section | None:
    """Every preset of every bench against those of the benches before it, on the games
    they share, when two or more benches ran to the same target (an arm run on another day
    against the recorded seeds of the default). None when there is nothing to compare."""
    by_target: dict[float, list[list[tuple[str, TargetSummary]]]] = {}
    names = distinct_names([bench.path for bench in benches])
    for bench, name in zip(benches, names, strict=True):
        target = bench_target(bench)
        if target is not None:
            summaries, _ = target_summaries(bench_cells(bench, col))
            arms = [(f"{name}: {s.preset}", s) for s in summaries]
            by_target.setdefault(target, []).append(arms)
    compared: dict[float, list[TargetComparison]] = {}
    for target, groups in by_target.items():
        found = [
            compare_targets(a, b, label_a, label_b)
            for earlier, later in combinations(groups, 2)
            for (label_a, a), (label_b, b) in product(later, earlier)
            if a.game == b.game
        ]
        if found:
            compared[target] = found
    if not compared:
        return None
    sec = Section("benches-compared", "Benchmarks compared: time to target")
    sec.paragraphs.append(
        "The presets of benches given to this report together, each against those of the "
        "benches before it (in the order given), when they ran to the same target. "
        + COMPARISON_TEXT
    )
    for target, found in compared.items():
        sec.tables += tables(comparison_table(f"benches_compared_target{target:g}", found))
    return sec


def distinct_names(paths: list[Path]) -> list[str]:
    """Each path's last part, or as many of its last parts as tell it from the others
    (``monday/bench`` and ``tuesday/bench``): a label that names one bench only."""
    for depth in range(1, max((len(p.parts) for p in paths), default=0) + 1):
        names = ["/".join(p.parts[-depth:]) for p in paths]
        if len(set(names)) == len(names):
            return names
    return [str(p) for p in paths]  # the same folder given twice


def _median_cells(m: CensoredMedian) -> list[Any]:
    """A median and its interval as table cells: ``> cap`` and no interval when half or
    more seeds missed (the numbers would be caps, not times)."""
    if m.beyond_cap:
        return ["> cap", None, None]
    return [m.value, m.low, m.high]


def _target_table(
    bench: BenchData, target: float, summaries: list[TargetSummary], criteria: dict[str, str]
) -> Table:
    t = Table(
        f"bench_{bench.name}_time_to_target",
        f"Time to target {target:g}: median over seeds with 95 % bootstrap CI (misses at "
        "their cap: lower bounds)",
        [
            "preset",
            "game",
            "criterion",
            "seeds",
            "reached",
            "median env steps",
            "env steps 95% CI low",
            "env steps 95% CI high",
            "median training s",
            "training s 95% CI low",
            "training s 95% CI high",
            "bound",
        ],
    )
    for s in summaries:
        m = s.env_steps
        bound = "> cap" if m.beyond_cap else "lower bound" if m.lower_bound else "exact"
        t.rows.append(
            [
                s.preset,
                s.game,
                criteria.get(s.preset),
                m.n,
                s.reached,
                *_median_cells(s.env_steps),
                *_median_cells(s.seconds),
                bound,
            ]
        )
    return t


def _target_seeds_table(
    bench: BenchData, target: float, cells: list[BenchCell], summaries: list[TargetSummary]
) -> Table:
    t = Table(
        f"bench_{bench.name}_time_to_target_seeds",
        f"Time to target {target:g}, every seed: to the target, or what it ran (its cap) "
        "when not reached",
        [
            "preset",
            "game",
            "seed",
            "status",
            "target",
            "env steps",
            "training s",
            "command s (start to exit)",
            "value at target",
            "final mean return (last 100 games)",
            "env steps with the two frame parities' games over 5 points apart",
        ],
    )
    outcomes = {(s.preset, s.game, seed): o for s in summaries for seed, o in s.seeds.items()}
    # The bench's points go seed by seed; the table keeps each preset and game's seeds together.
    order = {pair: i for i, pair in enumerate(dict.fromkeys((c.preset, c.game) for c in cells))}
    for c in sorted(cells, key=lambda c: (order[(c.preset, c.game)], c.seed)):
        o = outcomes.get((c.preset, c.game, c.seed))
        if o is None:
            t.rows.append([c.preset, c.game, c.seed, c.status, None, *[None] * 6])
            continue
        t.rows.append(
            [
                c.preset,
                c.game,
                c.seed,
                c.status,
                "reached" if o.reached else "not reached",
                o.env_steps,
                o.seconds,
                o.process_s,
                o.value,
                o.final_mean,
                o.parity_split_steps,
            ]
        )
    return t
