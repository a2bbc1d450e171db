"""``rlperf bench`` end to end: two presets (a shipped one and a file) x two seeds on CartPole,
seconds each, interrupted after the first run and resumed without rerunning what finished,
ending in a report with the bench section; bad input; parallel runs in CPU shares."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlperf.arguments import config_overrides
from rlperf.cli import main
from rlperf.studies.bench import _parser, plan_from_args
from rlperf.sweep.ledger import Ledger
from rlperf.sweep.machine import Machine
from rlperf.sweep.plan import plan_points
from tests.conftest import rlperf_subprocess

REPO = Path(__file__).resolve().parents[2]
TINY = [
    "telemetry.tensorboard=false",
    "runner.torch_threads=1",  # tiny MLP: one thread is fastest, and immune to a busy machine
    "env.num_envs=4",
    "ppo.num_steps=32",
]


def _bench_args(tmp_path: Path, *extra: str) -> list[str]:
    other = tmp_path / "cartpole-slow.yaml"  # a preset given as a file
    other.write_text("extends: cartpole\nppo: {learning_rate: 1.0e-4}\n")
    return [
        "bench",
        "--presets",
        f"cartpole,{other}",
        "--suite",
        "CartPole-v1",
        "--seeds",
        "2",
        "--minutes",
        "0.04",
        "-o",
        str(tmp_path / "bench"),
        "--report",
        str(tmp_path / "report"),
        *extra,
        *TINY,
    ]


def _statuses(out: Path) -> dict[str, list[str]]:
    history: dict[str, list[str]] = {}
    for record in Ledger(out).records():
        history.setdefault(record["point"], []).append(record["status"])
    return history


def test_killed_bench_resumes_without_rerunning_and_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _bench_args(tmp_path)
    out = tmp_path / "bench"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlperf", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:  # interrupt once a run has completed and the next one is running
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline, "no run completed in time"
            records = Ledger(out).records()
            done = [r for r in records if r["status"] == "completed"]
            running = records[-1] if records and records[-1]["status"] == "running" else None
            if done and running and (out / running["run_dir"] / "manifest.json").exists():
                break  # the next run has started training
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, output
    assert "run the same command to resume" in output
    first = _statuses(out)
    finished = sorted(p for p, h in first.items() if h[-1] == "completed")
    assert finished and len(finished) < 4
    assert any(h[-1] == "interrupted" for h in first.values())
    assert main([*args, "--list"]) == 0  # what a resume would do, read from the ledger
    listed = dict(line.strip().split(": ", 1) for line in capsys.readouterr().out.splitlines()[1:])
    assert listed == {p: "completed" if p in finished else "runs" for p in listed}
    assert len(listed) == 4
    stamps = {
        p: [(out / "runs" / p / f).stat().st_mtime_ns for f in ("metrics.jsonl", "manifest.json")]
        for p in finished
    }

    again = rlperf_subprocess(*args, timeout=300, cwd=REPO)
    assert again.returncode == 0, again.stdout + again.stderr
    for point in finished:
        assert f"{point}: completed earlier, skipped" in again.stdout
        after = [
            (out / "runs" / point / f).stat().st_mtime_ns
            for f in ("metrics.jsonl", "manifest.json")
        ]
        assert after == stamps[point], f"{point} was touched by the resumed bench"
    history = _statuses(out)
    assert sorted(history) == sorted(
        f"{p}__CartPole-v1__s{s}" for p in ("cartpole", "cartpole-slow") for s in (1, 2)
    )
    for point, statuses in history.items():
        assert statuses.count("completed") == 1, (point, statuses)
        assert statuses[-1] == "completed"
    for point in finished:
        assert history[point] == ["running", "completed"]
    assert [p.name.split(".")[1] for p in (out / "aside").iterdir()] == ["unfinished"]

    bench = json.loads((out / "bench.json").read_text())
    assert bench["seeds"] == [1, 2] and bench["budget_s"] == pytest.approx(2.4)
    assert bench["command"].startswith("rlperf bench --presets cartpole,")
    page = (tmp_path / "report" / "index.html").read_text()
    assert "Benchmark games__cartpole+cartpole-slow" in page
    assert "no human/random reference for CartPole-v1" in page
    assert "the aggregates are of raw scores" in page
    assert "bench_games__cartpole+cartpole-slow_profiles.png" in page
    assert "rlperf bench --presets" in page  # the command under the bench figures
    runs = (tmp_path / "report" / "bench_games__cartpole+cartpole-slow_runs.csv").read_text()
    assert runs.count("completed") == 4
    aggregates = tmp_path / "report" / "bench_games__cartpole+cartpole-slow_aggregates.csv"
    rows = aggregates.read_text().splitlines()
    assert rows[0].startswith("preset,seeds,IQM,IQM 95% CI low,IQM 95% CI high")
    assert len(rows) == 3  # one row per preset
    poi = tmp_path / "report" / "bench_games__cartpole+cartpole-slow_improvement.csv"
    assert len(poi.read_text().splitlines()) == 3  # both ordered pairs

    # A third seed of one preset joins the bench in its directory; the report holds all five
    # runs, and the one command added. A budget other than the bench's is refused first.
    more = [*args[:2], str(tmp_path / "cartpole-slow.yaml"), *args[3 : -len(TINY)]]
    more += ["--start-seed", "3", *TINY]
    more[more.index("--seeds") + 1] = "1"
    other_budget = list(more)
    other_budget[other_budget.index("--minutes") + 1] = "0.05"
    before = (out / "bench.json").read_text()
    assert main(other_budget) == 2
    err = capsys.readouterr().err
    assert "holds a bench with --minutes 0.04, no --target, --parallel 1" in err
    assert "this command gives --minutes 0.05" in err and "another -o DIR" in err
    assert (out / "bench.json").read_text() == before  # nothing changed
    assert main(more) == 0
    joined = json.loads((out / "bench.json").read_text())
    assert joined["name"] == bench["name"] and joined["command"] == bench["command"]
    assert len(joined["commands"]) == 2 and "--start-seed 3" in joined["commands"][1]
    assert joined["presets"] == bench["presets"] and joined["seeds"] == [1, 2, 3]
    assert len(joined["points"]) == 5 and "cartpole-slow__CartPole-v1__s3" in joined["points"]
    runs = (tmp_path / "report" / "bench_games__cartpole+cartpole-slow_runs.csv").read_text()
    assert runs.count("completed") == 5
    assert len(aggregates.read_text().splitlines()) == 3  # still one row per preset
    assert "--start-seed 3" in (tmp_path / "report" / "index.html").read_text()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--suite", "atari99"], "unknown suite"),
        (["seed=4"], "seed is set by the bench"),
        (["--parallel", "999"], "--parallel 999 needs at least 999 CPUs"),
        (["--minutes", "0"], "--minutes must be a positive number"),
        (["--presets", "cartpole,no-such-preset"], "unknown preset 'no-such-preset'"),
        (["stop.target_reward=5"], "stop.target_reward is set by the bench"),
        (["--stop.target_reward", "5", "--target", "5"], "stop.target_reward is set by the bench"),
        (["--target", "nan"], "--target must be a finite number, got 'nan'"),
        (["--target=-inf"], "--target must be a finite number, got '-inf'"),
        (["--target", "seventeen"], "--target must be a number, got 'seventeen'"),
        (["--start-seed", "-1"], "--start-seed must be an integer >= 0, got -1"),
        (["--start-seed", "nine"], "--start-seed must be an integer >= 0, got 'nine'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    args = _bench_args(tmp_path)
    for flag_value in zip(extra[::2], extra[1::2], strict=False):
        if flag_value[0] in args:  # replace the flag's value
            args[args.index(flag_value[0]) + 1] = flag_value[1]
    if extra[0] not in args:
        args += extra
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rlperf: error: ") and message in err and "\n" not in err
    assert not (tmp_path / "bench").exists()  # nothing ran, nothing was written


def test_target_stops_every_run_at_it_with_its_presets_own_criterion(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _bench_args(tmp_path, "--target", "-5")  # a return may be negative
    args[args.index("--presets") + 1] = "cartpole,dqn-cartpole"  # dqn-cartpole: 150 on its EMA
    parsed, rest = _parser().parse_known_args(args[1:])
    plan = plan_from_args(parsed)
    assert plan.target == -5.0 and plan.name == "games__cartpole+dqn-cartpole__target-5"
    assert plan.record("rlperf bench ...")["target"] == -5.0  # bench.json: what the report reads
    points = plan_points(plan.spec(), config_overrides(rest), Machine.detect())
    criteria = {p.name.split("__")[0]: p.cfg.stop.target_reward_metric for p in points}
    assert criteria == {"cartpole": "mean100", "dqn-cartpole": "ema"}  # each preset's own
    for point in points:
        assert point.cfg.stop.target_reward == -5.0  # not dqn-cartpole's own 150
        assert point.cfg.stop.wall_time_s == pytest.approx(2.4)  # the budget stays the cap

    assert main([*args, "--list"]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "run(s) of 0.04 min or to target -5 (each preset's stop.target_reward_metric)" in head
    assert not (tmp_path / "bench").exists()  # --list writes nothing

    untargeted, _ = _parser().parse_known_args(_bench_args(tmp_path)[1:])
    plain = plan_from_args(untargeted)
    assert plain.target is None and plain.record("x")["target"] is None
    assert "stop.target_reward" not in plain.spec().base


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs for 2 shares")
def test_parallel_runs_each_get_their_own_cpus(tmp_path: Path) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    share = len(cpus) // 2
    args = _bench_args(tmp_path, "--parallel", "2")
    args[args.index("--seeds") + 1] = "1"
    proc = rlperf_subprocess(*args, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    running = [r for r in Ledger(tmp_path / "bench").records() if r["status"] == "running"]
    pins = sorted(r["command"].split("taskset -c ")[1].split()[0] for r in running)
    expected = sorted(",".join(map(str, cpus[i * share : (i + 1) * share])) for i in range(2))
    assert pins == expected  # two disjoint shares, one per run
    for r in running:
        assert "OMP_NUM_THREADS=1" in r["command"]  # the points set torch_threads=1


def test_start_seed_runs_the_seeds_from_it_in_a_directory_of_their_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _bench_args(tmp_path)
    first, rest = _parser().parse_known_args(args[1:])
    later, _ = _parser().parse_known_args([*args[1:], "--start-seed", "9"])
    plan, more = plan_from_args(first), plan_from_args(later)
    assert plan.seeds == [1, 2] and more.seeds == [9, 10]
    assert sorted({p["seed"] for p in more.points().values()}) == [9, 10]
    # The points keep the usual names, so seed 9 pairs with seed 9 of another bench.
    assert "cartpole__CartPole-v1__s9" in more.points()
    assert more.name == f"{plan.name}__from-s9"  # its default directory is not seeds 1..N's
    points = plan_points(more.spec(), config_overrides(rest), Machine.detect())
    assert sorted(p.cfg.seed for p in points) == [9, 9, 10, 10]
    assert main([*args[: -len(TINY)], "--start-seed", "9", "--list", *TINY]) == 0
    listed = capsys.readouterr().out
    assert "cartpole__CartPole-v1__s10: runs" in listed and "__s1:" not in listed
