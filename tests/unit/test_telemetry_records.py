"""Phase timers add up; sinks write what resume can truncate without torn or repeated rows."""

import csv
import json

import pytest

from rlperf.telemetry import timers
from rlperf.telemetry.sinks import CsvSink, JsonlSink, truncate_records
from rlperf.telemetry.timers import PHASES, PhaseTimer


class FakeClock:
    """A fake ``time`` module for the timers: its ``perf_counter`` moves only when the test
    advances it, so each phase's seconds are exact whatever the machine's load."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def test_phases_and_other_add_up_to_the_wall_time(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(timers, "time", clock)
    timer = PhaseTimer()
    clock.now += 5.0  # before the first lap: not in the next one
    timer.lap()
    with timer.phase("sample"), timer.phase("env_step"):
        clock.now += 0.02
    with timer.phase("learn"):
        clock.now += 0.03
    clock.now += 0.01  # unaccounted work lands in "other"
    times = timer.lap()
    assert abs(sum(times[p] for p in (*PHASES, "other")) - times["wall"]) < 1e-9
    # each phase holds its own time, and "other" only the unaccounted one
    assert times["sample"] == pytest.approx(0.02) and times["env_step"] == pytest.approx(0.02)
    assert times["learn"] == pytest.approx(0.03) and times["other"] == pytest.approx(0.01)
    assert times["wall"] == pytest.approx(0.06)
    assert timer.lap()["sample"] == 0.0  # a new lap starts empty


def _write(run_dir, iterations):
    j, c = JsonlSink(run_dir / "metrics.jsonl"), CsvSink(run_dir / "progress.csv")
    for i in iterations:
        rec = {
            "iteration": i,
            "timesteps_total": 10 * i,
            "episode_reward_mean": None,
            "losses/x": 0.5,
        }
        j.write(rec)
        c.write(rec)
    j.close()
    c.close()


def test_truncate_then_append_gives_one_header_and_no_duplicates(tmp_path):
    _write(tmp_path, [1, 2, 3, 4])
    with (tmp_path / "metrics.jsonl").open("a") as f:
        f.write('{"iteration": 5, "timest')  # a torn line from a killed process
    truncate_records(tmp_path, last_iteration=2, removed_to=tmp_path / "aside")
    _write(tmp_path, [3, 4])
    # the abandoned rows (and the torn line) are kept aside, with the CSV header
    aside_rows = list(csv.DictReader((tmp_path / "aside" / "progress.csv").open()))
    assert [r["iteration"] for r in aside_rows] == ["3", "4"]
    aside_lines = (tmp_path / "aside" / "metrics.jsonl").read_text().splitlines()
    assert len(aside_lines) == 3 and aside_lines[-1].startswith('{"iteration": 5')
    rows = list(csv.DictReader((tmp_path / "progress.csv").open()))
    assert [r["iteration"] for r in rows] == ["1", "2", "3", "4"]
    assert rows[0]["episode_reward_mean"] == ""  # absent, not 0
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["iteration"] for line in lines] == [1, 2, 3, 4]
    assert json.loads(lines[0])["episode_reward_mean"] is None


def test_csv_has_the_thesis_columns_first(tmp_path):
    _write(tmp_path, [1])
    header = (tmp_path / "progress.csv").read_text().splitlines()[0].split(",")
    assert header[:5] == [
        "iteration",
        "episode_reward_min",
        "episode_reward_mean",
        "episode_reward_max",
        "episode_len_mean",
    ]
    assert "losses/x" in header


def test_console_summary_shows_sps_eta_reward_and_phase_split():
    from rlperf.telemetry.console import summary_line

    record = {
        "iteration": 7,
        "timesteps_total": 7168,
        "SPS": 512.4,
        "episode_reward_mean": -20.5,
        "time_this_iter_s": 2.0,
        "sample_time_ms": 500.0,
        "load_time_ms": 0.0,
        "learn_time_ms": 1400.0,
        "update_time_ms": 0.0,
        "other_time_ms": 100.0,
    }
    line = summary_line(record, eta_s=3725)
    assert "iter 7" in line and "7,168" in line and "SPS 512" in line and "ETA 1:02:05" in line
    assert (
        "reward -20.50" in line
        and "sample 25%" in line
        and "learn 70%" in line
        and "other 5%" in line
    )


def test_live_panel_renders_the_phase_split():
    import io

    from rich.console import Console

    from rlperf.telemetry.console import panel

    record = {
        "iteration": 1,
        "timesteps_total": 1024,
        "SPS": 600.0,
        "episode_reward_mean": None,
        "time_this_iter_s": 1.0,
        "sample_time_ms": 250.0,
        "load_time_ms": 0.0,
        "learn_time_ms": 750.0,
        "update_time_ms": 0.0,
        "other_time_ms": 0.0,
        "sys/proc_cpu_percent": 190.0,
        "sys/ram_percent": 4.0,
    }
    out = io.StringIO()
    Console(file=out, width=200).print(panel(record, None, "title"))
    text = out.getvalue()
    assert "[sample 25% load 0% learn 75% update 0% other 0%]" in text
    assert "reward -" in text and "CPU (process tree) 190%" in text


def test_episode_stats_window_and_ema():
    from rlperf.envs.base import EpisodeEnd
    from rlperf.telemetry.episodes import EMA_ALPHA, EpisodeStats

    stats = EpisodeStats()
    stats.add([EpisodeEnd(0, float(r), 10) for r in range(150)])
    summary = stats.summary()
    assert summary["episode_reward_min"] == 50 and summary["episode_reward_max"] == 149
    assert summary["episode_reward_mean"] == sum(range(50, 150)) / 100
    ema = 0.0
    for r in range(1, 150):
        ema = EMA_ALPHA * ema + (1 - EMA_ALPHA) * r
    assert stats.ema == ema and stats.total == 150
