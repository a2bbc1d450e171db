"""SIGKILL training at random moments and at named crash points, 13 times across three
runners: every time the newest complete checkpoint loads, the resume continues from it,
the record files have no torn or duplicated row, and no worker process outlives the kill
(the harness: ``kill_anywhere.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fault.kill_anywhere import kill_cycles

KILLS = {"inproc": 5, "subprocess": 4, "decoupled": 4}


@pytest.mark.parametrize("runner", sorted(KILLS))
def test_kill_and_resume_loses_nothing(runner: str, tmp_path: Path) -> None:
    _, stats = kill_cycles(tmp_path, runner, KILLS[runner], iterations=100, seed=7)
    assert stats.kills == KILLS[runner]  # the run outlived every planned kill
    # Each resume continues from a checkpoint, never from scratch or from the future.
    assert stats.resumed_iterations == sorted(stats.resumed_iterations)
    assert min(stats.resumed_iterations) >= 1
    assert stats.torn_rows >= 1  # the repair of a torn row was exercised
