"""Unit tests for the peer-comparison harness (fast: no real training).

Run with ``pytest benchmarks/peers/test_compare.py`` (the repo's default ``testpaths`` only
cover ``tests/``, so name this file explicitly).
"""

from __future__ import annotations

import importlib.util
import json
import shlex
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent


def _load(name: str) -> ModuleType:
    """Import a sibling script by path: ``benchmarks/peers`` is not a package."""
    spec = importlib.util.spec_from_file_location(f"peers_{name}", HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered before exec so dataclasses can resolve the module of their annotations.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


compare = _load("compare")


def _it(i: int, steps: int, t: float, warmup: bool) -> dict[str, Any]:
    return {"iteration": i, "timesteps_total": steps, "time_total_s": t, "warmup": warmup}


def _write_metrics(run_dir: Path, lines: list[str]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "metrics.jsonl").write_text("\n".join(lines) + "\n")


# --- RESULT lines -----------------------------------------------------------------------


def test_result_line_last_one_wins() -> None:
    out = 'noise\nRESULT {"sps": 1.0}\nmore\nRESULT {"sps": 2.5, "system": "x"}\ntrailer\n'
    assert compare.parse_result_line(out) == {"sps": 2.5, "system": "x"}


def test_result_line_absent() -> None:
    assert compare.parse_result_line("run_dir: /tmp/x\nRESULTS are in\n") is None


def test_result_line_invalid_json_raises() -> None:
    with pytest.raises(ValueError):
        compare.parse_result_line("RESULT {not json}\n")
    with pytest.raises(ValueError):
        compare.parse_result_line("RESULT [1, 2]\n")


# --- run_dir lines ----------------------------------------------------------------------


def test_run_dir_parsing() -> None:
    out = "starting\nrun_dir: runs/first\n  run_dir:   /abs/path with space  \ndone\n"
    assert compare.parse_run_dir(out) == Path("/abs/path with space")
    assert compare.parse_run_dir("no dir here\nmy_run_dir: x\n") is None


# --- metrics.jsonl ----------------------------------------------------------------------


def test_steady_state_excludes_warmup() -> None:
    recs = [_it(1, 1024, 3.0, True), _it(2, 2048, 4.0, False), _it(3, 3072, 5.0, False)]
    got = compare.steady_state_from_metrics(recs)
    assert got["sps"] == pytest.approx((3072 - 1024) / (5.0 - 3.0))
    assert got["iterations"] == 3
    assert got["warmup_iterations"] == 1
    assert got["steady_timesteps"] == 2048
    assert got["steady_seconds"] == pytest.approx(2.0)


def test_steady_state_anchors_at_last_warmup_and_sorts() -> None:
    # Out of order, two warm-up iterations, plus an unrelated event record to ignore.
    recs = [
        _it(4, 4096, 7.0, False),
        {"event": "checkpoint", "time_total_s": 6.5},
        _it(2, 2048, 5.0, True),
        _it(1, 1024, 4.0, True),
        _it(3, 3072, 6.0, False),
    ]
    got = compare.steady_state_from_metrics(recs)
    assert got["sps"] == pytest.approx((4096 - 2048) / (7.0 - 5.0))
    assert got["warmup_iterations"] == 2


def test_steady_state_without_warmup_counts_from_zero() -> None:
    got = compare.steady_state_from_metrics([_it(1, 1000, 2.0, False), _it(2, 2000, 4.0, False)])
    assert got["sps"] == pytest.approx(500.0)


def test_steady_state_only_warmup_or_empty_gives_none() -> None:
    assert compare.steady_state_from_metrics([_it(1, 1024, 3.0, True)])["sps"] is None
    assert compare.steady_state_from_metrics([])["sps"] is None


def test_read_metrics_tolerates_truncated_last_line(tmp_path: Path) -> None:
    good = [json.dumps(_it(1, 8, 1.0, True)), "", json.dumps(_it(2, 16, 2.0, False))]
    _write_metrics(tmp_path, [*good, '{"iteration": 3, "timest'])
    assert [r["iteration"] for r in compare.read_metrics(tmp_path / "metrics.jsonl")] == [1, 2]


def test_read_metrics_rejects_corrupt_middle_line(tmp_path: Path) -> None:
    _write_metrics(tmp_path, [json.dumps(_it(1, 8, 1.0, True)), "garbage", "{}"])
    with pytest.raises(ValueError, match="metrics.jsonl:2"):
        compare.read_metrics(tmp_path / "metrics.jsonl")


def test_extract_result_prefers_result_line_then_run_dir(tmp_path: Path) -> None:
    _write_metrics(
        tmp_path / "runs" / "a",
        [json.dumps(_it(1, 100, 1.0, True)), json.dumps(_it(2, 300, 2.0, False))],
    )
    # Relative run_dir resolves against the command's working directory.
    result, source = compare.extract_result("run_dir: runs/a\n", tmp_path)
    assert source == "run_dir"
    assert result is not None and result["sps"] == pytest.approx(200.0)
    assert result["run_dir"] == str(tmp_path / "runs" / "a")

    result, source = compare.extract_result('run_dir: runs/a\nRESULT {"sps": 7}\n', tmp_path)
    assert (source, result) == ("result_line", {"sps": 7})
    assert compare.extract_result("nothing\n", tmp_path) == (None, "none")


# --- scheduling, templating, summary ----------------------------------------------------


def test_schedule_alternates_order() -> None:
    a, b, c = (compare.Case(n, "true") for n in "abc")
    order = [(r, case.name) for r, case in compare.schedule([a, b, c], 3)]
    assert order == [
        (0, "a"), (0, "b"), (0, "c"),
        (1, "c"), (1, "b"), (1, "a"),
        (2, "a"), (2, "b"), (2, "c"),
    ]  # fmt: skip


def test_case_parsing_and_render_keeps_other_braces() -> None:
    case = compare.parse_case('x = echo {seconds} ${HOME} {"k": 1} r{round}')
    assert case.name == "x"
    assert case.render(60.0, 2) == 'echo 60 ${HOME} {"k": 1} r2'
    with pytest.raises(Exception, match="NAME=COMMAND"):
        compare.parse_case("no-equals-sign")


def test_summarize_median_spread_ratio_and_failures() -> None:
    cases = [compare.Case("base", ""), compare.Case("new", "")]
    recs = [
        {"case": "base", "sps": 100.0},
        {"case": "new", "sps": 300.0},
        {"case": "base", "sps": 120.0},
        {"case": "new", "sps": 250.0},
        {"case": "base", "sps": 110.0},
        {"case": "new", "sps": None},
    ]
    rows = {r["case"]: r for r in compare.summarize(recs, cases, "base")}
    assert rows["base"] == {
        "case": "base",
        "median_sps": 110.0,
        "min_sps": 100.0,
        "max_sps": 120.0,
        "n": 3,
        "failed": 0,
        "ratio_to_baseline": 1.0,
    }
    assert rows["new"]["median_sps"] == pytest.approx(275.0)
    assert rows["new"]["n"] == 2 and rows["new"]["failed"] == 1
    assert rows["new"]["ratio_to_baseline"] == pytest.approx(2.5)
    assert "ratio" in compare.format_table(list(rows.values()), "base")


# --- end to end with fake programs --------------------------------------------------------


def test_main_end_to_end_with_fake_cases(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Both result paths through real subprocesses: RESULT line and run_dir metrics."""
    fake_rl = tmp_path / "fake_rlperf.py"
    fake_rl.write_text(
        "import json, pathlib, sys\n"
        "d = pathlib.Path(sys.argv[1]) / f'run{sys.argv[2]}'\n"
        "d.mkdir(parents=True)\n"
        "rows = [(1, 1024, 2.0, True), (2, 2048, 2.5, False), (3, 3072, 3.0, False)]\n"
        "with open(d / 'metrics.jsonl', 'w') as f:\n"
        "    for i, s, t, w in rows:\n"
        "        f.write(json.dumps({'iteration': i, 'timesteps_total': s,\n"
        "                            'time_total_s': t, 'warmup': w}) + '\\n')\n"
        "print('run_dir:', d)\n"
    )
    py = shlex.quote(sys.executable)
    out = tmp_path / "res" / "peers.jsonl"
    rc = compare.main(
        [
            "--case",
            f'peer={py} -c "print(\'RESULT {{\\"sps\\": 1000.0}}\')" # {{seconds}}',
            "--case",
            f"mine={py} {shlex.quote(str(fake_rl))} {shlex.quote(str(tmp_path))} {{round}}",
            "--case",
            f"broken={py} -c 'import sys; sys.exit(3)'",
            "--seconds",
            "1",
            "--rounds",
            "2",
            "--baseline",
            "peer",
            "--out",
            str(out),
            "--cwd",
            str(tmp_path),
        ]
    )
    assert rc == 1  # the broken case never produced an SPS
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["case"] for r in records] == ["peer", "mine", "broken", "broken", "mine", "peer"]
    assert len({r["session"] for r in records}) == 1
    mine = [r for r in records if r["case"] == "mine"]
    assert all(r["source"] == "run_dir" and r["sps"] == pytest.approx(2048.0) for r in mine)
    broken = [r for r in records if r["case"] == "broken"]
    assert all(r["returncode"] == 3 and r["sps"] is None and "error" in r for r in broken)
    table = capsys.readouterr().out
    assert "2.048x" in table  # mine's median 2048 / peer's 1000


# --- sb3_ppo timing summary (only where SB3 is installed, i.e. the peers venv) -----------


def test_sb3_steady_state_excludes_first_iteration() -> None:
    pytest.importorskip("stable_baselines3")
    sb3 = _load("sb3_ppo")
    stamps = [sb3.Stamp(10.0, 0), sb3.Stamp(14.0, 1024), sb3.Stamp(15.0, 2048)]
    stamps.append(sb3.Stamp(16.0, 3072))
    # Rollouts took 3 s (warm-up), then 0.25 s and 0.5 s of the 1 s steady iterations.
    got = sb3.steady_state(stamps, rollout_ends=[13.0, 14.25, 15.5])
    assert got["sps"] == pytest.approx(1024.0)
    assert got["steady_rollout_fraction"] == pytest.approx(0.375)
    assert (got["iterations"], got["timesteps"], got["seconds"]) == (3, 3072, 6.0)
    assert sb3.steady_state(stamps[:2])["sps"] is None
