"""The time-to-target section of a bench report (``rlperf bench --target``), built from a
fake bench directory: every seed's row, the medians with their intervals, the figure, the
console lines; and no such section for a bench without a target."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from matplotlib.axes import Axes

from rlperf.report.bench_plots import time_to_target_figure
from rlperf.report.bench_section import bench_cells
from rlperf.report.bench_target_section import (
    bench_sections,
    benches_compared,
    distinct_names,
    target_console_lines,
    target_summaries,
)
from rlperf.report.build import build_report
from rlperf.report.load import RunData, collect
from tests.helpers.report_fakes import fake_bench_run, write_fake_bench

GAME = "ALE/Pong-v5"
FIGURE = "bench_fake-bench_time_to_target.png"


def _hit(env_steps: int, seconds: float) -> dict:
    return {
        "metric": "mean100+ema",
        "value": 17.1,
        "iteration": 9,
        "env_steps": env_steps,
        "wall_time_s": seconds,
    }


def _run(
    label: str, steps: int, secs: float, final: float, hit: dict | None, **times: str
) -> RunData:
    """A fake completed run of the bench: ``final`` is its last mean of 100 games."""
    rewards = [-20.0, -5.0, final]
    return fake_bench_run(
        label,
        env_id=GAME,
        env_steps=steps,
        seconds=secs,
        rewards=rewards,
        target=17.0,
        target_reached=hit,
        **times,
    )


def fake_target_bench(root: Path, target: float | None = 17.0, folder: str = "bench") -> Path:
    """Presets fast (3 of 3 seeds reach 17; seed 4 failed) and slow (1 of 3) on Pong."""
    points = {
        "fast__s1": (
            "fast",
            1,
            "completed",
            _run("a", 420_000, 330.0, 17.4, _hit(400_000, 300.0)),
            321.5,
        ),
        "slow__s1": (
            "slow",
            1,
            "completed",
            _run("b", 820_000, 720.0, 17.2, _hit(800_000, 700.0)),
            735.0,
        ),
        "fast__s2": (
            "fast",
            2,
            "completed",
            _run("c", 610_000, 460.0, 17.9, _hit(600_000, 450.0)),
            470.0,
        ),
        "slow__s2": ("slow", 2, "completed", _run("d", 1_000_000, 901.5, 12.5, None), 930.0),
        # no sweep timing: the manifest's start and end give the command's seconds (420 s)
        "fast__s3": (
            "fast",
            3,
            "completed",
            _run(
                "e",
                510_000,
                390.0,
                17.0,
                _hit(500_000, 380.0),
                started_utc="2026-01-01T12:00:00+00:00",
                ended_utc="2026-01-01T12:07:00+00:00",
            ),
            None,
        ),
        "slow__s3": ("slow", 3, "completed", _run("f", 1_100_000, 902.0, 9.0, None), 940.0),
        "fast__s4": ("fast", 4, "failed", None, 12.0),
    }
    spec = {
        "name": "fake-bench",
        "command": "rlperf bench --presets fast,slow --suite ALE/Pong-v5 --target 17",
        "presets": ["fast", "slow"],
        "suite": GAME,
        "games": [GAME],
        "seeds": [1, 2, 3, 4],
        "budget_s": 900.0,
        "target": target,
        "parallel": 1,
        "points": {
            name: {"preset": preset, "game": GAME, "seed": seed}
            for name, (preset, seed, *_) in points.items()
        },
    }
    ledger = {
        name: (status, run, {} if wall is None else {"wall_s": wall})
        for name, (_, _, status, run, wall) in points.items()
    }
    return write_fake_bench(root / folder, spec, ledger)


def _csv(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text())))


def test_time_to_target_tables_figure_and_console(tmp_path: Path) -> None:
    bench = fake_target_bench(tmp_path)
    out = tmp_path / "report"
    result = build_report([bench], out)
    page = (out / "index.html").read_text()
    assert "Benchmark fake-bench: time to target 17" in page
    assert "fast mean100+ema" in page  # the preset's own criterion is named
    assert "fast on ALE/Pong-v5 seed 4 left out: failed" in page
    assert "manifest&#x27;s started_utc to ended_utc" in page  # fast s3's command seconds
    assert FIGURE in {p.name for p in result.figures}
    assert (out / FIGURE).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    summary = {r["preset"]: r for r in _csv(out / "bench_fake-bench_time_to_target.csv")}
    fast, slow = summary["fast"], summary["slow"]
    assert (fast["seeds"], fast["reached"], fast["bound"]) == ("3", "3", "exact")
    assert fast["criterion"] == "mean100+ema"
    assert float(fast["median env steps"]) == 500_000 and float(fast["median training s"]) == 380
    # 3 seeds: the percentile interval of the bootstrap median spans the lowest to highest
    assert float(fast["env steps 95% CI low"]) == 400_000
    assert float(fast["env steps 95% CI high"]) == 600_000
    assert float(fast["training s 95% CI low"]) == 300
    assert float(fast["training s 95% CI high"]) == 450
    # 2 of 3 missed: the median is a cap, not a time
    assert (slow["reached"], slow["bound"], slow["median env steps"]) == ("1", "> cap", "> cap")
    assert slow["median training s"] == "> cap" and slow["env steps 95% CI low"] == ""

    seeds = {
        (r["preset"], r["seed"]): r for r in _csv(out / "bench_fake-bench_time_to_target_seeds.csv")
    }
    assert [(p, s) for p, s in seeds] == [
        ("fast", "1"),
        ("fast", "2"),
        ("fast", "3"),
        ("fast", "4"),
        ("slow", "1"),
        ("slow", "2"),
        ("slow", "3"),
    ]  # each preset's seeds together
    one = seeds[("fast", "1")]
    assert one["target"] == "reached"
    assert (float(one["env steps"]), float(one["training s"])) == (400_000, 300)
    assert float(one["command s (start to exit)"]) == 321.5
    assert float(one["value at target"]) == 17.1
    assert float(seeds[("fast", "3")]["command s (start to exit)"]) == 420  # from the manifest
    missed = seeds[("slow", "2")]
    assert missed["target"] == "not reached" and missed["value at target"] == ""
    assert (float(missed["env steps"]), float(missed["training s"])) == (1_000_000, 901.5)
    assert float(missed["final mean return (last 100 games)"]) == 12.5
    # these fake runs recorded no frame parities: not known, so the cell is empty
    assert missed["env steps with the two frame parities' games over 5 points apart"] == ""
    assert seeds[("fast", "4")]["status"] == "failed" and seeds[("fast", "4")]["target"] == ""

    col = collect([bench])
    lines = target_console_lines(col.benches[0], col)
    assert lines == [
        "time to target 17: fast on ALE/Pong-v5: 3 of 3 seed(s) reached it; median env steps "
        "5e+05 [4e+05, 6e+05], median training time 380 s [300 s, 450 s] (95% CI)",
        "time to target 17: slow on ALE/Pong-v5: 1 of 3 seed(s) reached it; median env steps "
        "> cap, median training time > cap (95% CI); misses counted at their cap: lower bounds",
        # Every fast seed reached 17 before every slow one (before the misses' caps too). Of
        # the 20 splits of the six seeds into two arms only one puts the three latest
        # together: two-sided p = 2 x 1/20.
        "time to target 17: slow vs fast on ALE/Pong-v5: slow first in 0.00 of 9 seed pairs; "
        "permutation p = 0.1 (two-sided, misses censored)",
    ]
    compared = _csv(out / "bench_fake-bench_presets_compared.csv")
    assert [(r["arm"], r["against"], r["seeds"], r["undecided"]) for r in compared] == [
        ("slow", "fast", "3 vs 3", "0")
    ]


def test_benches_given_together_are_compared_preset_by_preset(tmp_path: Path) -> None:
    default = fake_target_bench(tmp_path, folder="default")
    arm = fake_target_bench(tmp_path, folder="arm")
    untargeted = fake_target_bench(tmp_path, target=None, folder="plain")
    col = collect([default, arm, untargeted])
    section = benches_compared(col.benches, col, lambda *tables: list(tables))
    assert section is not None and section.title == "Benchmarks compared: time to target"
    (table,) = section.tables
    rows = [dict(zip(table.headers, row, strict=True)) for row in table.rows]
    # the later bench's presets against the earlier's; none within a bench, none untargeted
    assert [(r["arm"], r["against"]) for r in rows] == [
        ("arm: fast", "default: fast"),
        ("arm: fast", "default: slow"),
        ("arm: slow", "default: fast"),
        ("arm: slow", "default: slow"),
    ]
    same = rows[0]  # the same seeds: as many pairs one way as the other, p = 1
    assert (same["pairs first"], same["pairs against first"], same["ties"]) == (3, 3, 3)
    assert same["P(first) low"] == 0.5 and same["permutation p"] == 1.0
    # slow's two misses leave open their pairs with each other: 2 x 2
    assert rows[3]["undecided"] == 4
    one = collect([default])
    assert benches_compared(one.benches, one, lambda *tables: list(tables)) is None


def test_benches_in_folders_of_one_name_get_labels_that_tell_them_apart(tmp_path: Path) -> None:
    monday = fake_target_bench(tmp_path / "monday")
    tuesday = fake_target_bench(tmp_path / "tuesday")
    col = collect([monday, tuesday])
    section = benches_compared(col.benches, col, lambda *tables: list(tables))
    assert section is not None
    rows = [dict(zip(section.tables[0].headers, r, strict=True)) for r in section.tables[0].rows]
    assert rows[0]["arm"] == "tuesday/bench: fast" and rows[0]["against"] == "monday/bench: fast"
    assert distinct_names([Path("a/x"), Path("b/y")]) == ["x", "y"]
    assert distinct_names([Path("same"), Path("same")]) == ["same", "same"]


def test_the_figure_draws_each_seed_and_the_median(tmp_path: Path) -> None:
    col = collect([fake_target_bench(tmp_path)])
    summaries, _ = target_summaries(bench_cells(col.benches[0], col))
    fig = time_to_target_figure(summaries, 17.0, 900.0)
    steps, seconds = fig.axes

    def drawn(ax: Axes, marker: str, hollow: bool = False) -> list[tuple[float, int]]:
        """(x, row) of every ``marker`` drawn (row: the preset's, 0 fast, 1 slow)."""
        return sorted(
            (float(x), round(y))
            for line in ax.get_lines()
            if line.get_marker() == marker and (line.get_markerfacecolor() == "none") == hollow
            for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)
        )

    assert drawn(steps, "o") == [(400_000, 0), (500_000, 0), (600_000, 0), (800_000, 1)]
    assert drawn(steps, ">", hollow=True) == [(1_000_000, 1), (1_100_000, 1)]  # at their cap
    assert drawn(steps, "|") == [(500_000, 0)]  # fast's median; slow's is beyond the cap
    assert drawn(steps, ">") == [(1_000_000, 1)]  # slow: the arrow at its (capped) median
    assert "median > cap" in [t.get_text() for t in steps.texts]
    bands = [list(line.get_xdata()) for line in steps.get_lines() if line.get_linewidth() == 8]
    assert bands == [[400_000, 600_000]]  # fast's 95 % interval
    assert drawn(seconds, "o") == [(300, 0), (380, 0), (450, 0), (700, 1)]
    assert drawn(seconds, ">", hollow=True) == [(901.5, 1), (902, 1)]
    budget = [line for line in seconds.get_lines() if line.get_linestyle() == "--"]
    assert [list(line.get_xdata()) for line in budget] == [[900, 900]]


def test_a_bench_without_target_has_no_time_to_target(tmp_path: Path) -> None:
    col = collect([fake_target_bench(tmp_path, target=None)])
    (bench,) = col.benches

    drawn: list[str] = []

    def figure(name: str, *args: object, **kwargs: object) -> str:
        drawn.append(name)  # the bench section's own figures, not drawn here
        return name

    sections = bench_sections(bench, col, figure, lambda *tables: list(tables))
    assert [s.title for s in sections] == ["Benchmark fake-bench"]
    assert drawn and FIGURE not in drawn
    assert target_console_lines(bench, col) == []


def test_benches_of_one_name_keep_their_own_files_in_a_report(tmp_path: Path) -> None:
    # the same command run in two folders: both benches are named "fake-bench"
    first = fake_target_bench(tmp_path, folder="first")
    second = fake_target_bench(tmp_path, target=None, folder="second")
    out = tmp_path / "report"
    build_report([first, second], out)
    page = (out / "index.html").read_text()
    assert "Benchmark fake-bench__1-first: time to target 17" in page
    assert "Benchmark fake-bench__2-second" in page
    # the first's time to target is not overwritten by the second (which has no target)
    assert (out / "bench_fake-bench__1-first_time_to_target.csv").is_file()
    assert not (out / "bench_fake-bench__2-second_time_to_target.csv").exists()
    assert (out / "bench_fake-bench__1-first_runs.csv").is_file()
    assert (out / "bench_fake-bench__2-second_runs.csv").is_file()
    assert not (out / "bench_fake-bench_runs.csv").exists()
    assert [b.name for b in collect([first]).benches] == ["fake-bench"]  # alone: unchanged
