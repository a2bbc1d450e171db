"""Runs given to an existing bench directory join its bench.json: every point of both, each
command once, and a refusal when the runs would not compare (the end-to-end case is in
tests/smoke/test_bench.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlperf.cli import main
from rlperf.core.errors import UserInputError
from rlperf.studies.bench import BenchPlan, extended_record

PONG, BREAKOUT = "ALE/Pong-v5", "ALE/Breakout-v5"


def _record(presets: list[str], games: list[str], seeds: list[int], **kw) -> dict:
    plan = BenchPlan("pong-bench", presets, ",".join(games), games, seeds, 900.0, **kw)
    return plan.record(f"rlperf bench --presets {','.join(presets)} seeds {seeds}")


def test_more_seeds_of_one_preset_and_another_game_join_the_bench() -> None:
    bench = _record(["a", "b"], [PONG], [1, 2], target=17.0)
    more = _record(["b"], [PONG, BREAKOUT], [3], target=17.0)
    joined = extended_record(bench, {**more, "name": "other-name"}, Path("runs/x"))
    assert joined["name"] == "pong-bench"  # the bench keeps its name and first command
    assert joined["command"] == bench["command"]
    assert joined["commands"] == [bench["command"], more["command"]]
    assert joined["presets"] == ["a", "b"] and joined["seeds"] == [1, 2, 3]
    assert joined["games"] == [PONG, BREAKOUT] and joined["suite"] == f"{PONG},{BREAKOUT}"
    assert list(joined["points"]) == [*bench["points"], *more["points"]]
    assert joined["points"]["b__ALE-Breakout-v5__s3"] == {
        "preset": "b", "game": BREAKOUT, "seed": 3
    }  # fmt: skip
    # the same command again (a resume) is recorded once; a bench.json from before the
    # list of commands counts its one command
    again = extended_record(joined, more, Path("runs/x"))
    assert again["commands"] == joined["commands"] and again["points"] == joined["points"]
    old = {k: v for k, v in bench.items() if k != "commands"}
    assert extended_record(old, more, Path("runs/x"))["commands"] == joined["commands"]


@pytest.mark.parametrize(
    ("change", "flag"),
    [({"budget_s": 600.0}, "--minutes"), ({"target": None}, "--target"), ({"parallel": 2}, "--parallel")],
)  # fmt: skip
def test_runs_that_would_not_compare_are_refused(change: dict, flag: str) -> None:
    bench = _record(["a"], [PONG], [1], target=17.0)
    other = {**_record(["a"], [PONG], [2], target=17.0), **change}
    with pytest.raises(UserInputError, match=f"share {flag} ") as refused:
        extended_record(bench, other, Path("runs/x"))
    assert "--minutes 15, --target 17, --parallel 1" in str(refused.value)


def test_a_directory_whose_bench_json_is_not_a_bench_is_refused_and_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bench"
    out.mkdir()
    args = ["bench", "--presets", "cartpole", "--suite", "CartPole-v1", "--minutes", "1"]
    for text, problem in (("{not json", "cannot be read"), ('{"points": {}}', "no budget_s")):
        (out / "bench.json").write_text(text)
        assert main([*args, "-o", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("rlperf: error: ") and problem in err and "\n" not in err
        assert (out / "bench.json").read_text() == text and sorted(out.iterdir()) == [
            out / "bench.json"
        ]
    (out / "bench.json").write_text(json.dumps(_record(["cartpole"], ["CartPole-v1"], [1])))
    assert main([*args, "-o", str(out), "--list"]) == 2  # --list refuses as a run would
    assert "share --minutes" in capsys.readouterr().err
