"""Phase timers add up; sinks write what resume can truncate without torn or repeated rows."""

import csv
import json
import time

from rlperf.telemetry.sinks import CsvSink, JsonlSink, truncate_records
from rlperf.telemetry.timers import PHASES, PhaseTimer


def test_phases_and_other_add_up_to_the_wall_time():
    timer = PhaseTimer()
    timer.lap()
    with timer.phase("sample"), timer.phase("env_step"):
        time.sleep(0.02)
    with timer.phase("learn"):
        time.sleep(0.03)
    time.sleep(0.01)  # unaccounted work lands in "other"
    times = timer.lap()
    assert abs(sum(times[p] for p in (*PHASES, "other")) - times["wall"]) < 1e-9
    assert times["other"] >= 0.009 and times["sample"] >= 0.02 and times["env_step"] >= 0.02
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
    truncate_records(tmp_path, last_iteration=2)
    _write(tmp_path, [3, 4])
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
