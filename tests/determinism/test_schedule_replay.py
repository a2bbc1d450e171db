"""A run whose schedules follow env steps replays: the step budget that
stop.anneal_over=wall_time_steps measured, given back as stop.anneal_steps, gives the same
run update for update, and a late phase keyed to the return (which starts where the mean
of 100 games first reaches it) starts at the same update of the replay. Below the rate floor
(stop.anneal_min_sps) two runs of a seed agree without being given the budget."""

import json

import torch

from rlperf.core.schedule_clock import RATE_ITERATIONS
from tests.conftest import read_metrics, rlperf_subprocess
from tests.determinism.test_resume import COMMON, _weights

HELD = 1 + RATE_ITERATIONS  # the warm-up iteration and the rate iterations
ITERATIONS = HELD + 4


def _train(runs_root, name, *extra):
    done = rlperf_subprocess(
        "train",
        "--preset",
        "cartpole",
        *COMMON,
        "--runs-root",
        str(runs_root),
        "-s",
        name,
        "-i",
        str(ITERATIONS),
        "stop.wall_time_s=600",
        "stop.anneal_over=wall_time_steps",
        # reached once the window of 100 games is full (mean ~70 by then): the late phase
        # begins mid-run, with the annealing
        "ppo.late_phase_return=25",
        "ppo.late_phase_lr_scale=0.5",
        *extra,
    )
    assert done.returncode == 0, done.stderr
    return runs_root / name


LOSSES = ("losses/learning_rate", "losses/policy_loss", "losses/value_loss")


def _assert_same_run(first, second, keys):
    """The two runs recorded the same ``keys`` at every iteration and end with the same weights."""
    a, b = read_metrics(first), read_metrics(second)
    for key in keys:
        assert [r[key] for r in a] == [r[key] for r in b], key
    wa, wb = _weights(first), _weights(second)
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_a_measured_step_budget_replays_the_run(runs_root):
    measured = _train(runs_root, "measured")
    schedule = json.loads((measured / "manifest.json").read_text())["schedule"]
    assert schedule["anneal_steps_from"] == "measured" and schedule["measured_sps"] > 0
    budget = schedule["anneal_steps"]
    assert schedule["replay_with"] == f"stop.anneal_steps={budget}"

    replay = _train(runs_root, "replay", f"stop.anneal_steps={budget}")
    assert json.loads((replay / "manifest.json").read_text())["schedule"]["anneal_steps"] == budget

    a = read_metrics(measured)
    rates = [r["losses/learning_rate"] for r in a]
    assert len(set(rates[:HELD])) == 1  # held while the rate was measured
    assert rates[HELD] < rates[0] and rates[-1] < rates[HELD]  # then annealed over env steps
    late = [r["losses/late_phase"] for r in a]
    start = late.index(1.0)
    assert start > 0 and set(late[start:]) == {1.0}  # the late phase begins and holds
    assert 0.45 < rates[start] / rates[start - 1] <= 0.5  # at half the rate
    _assert_same_run(measured, replay, (*LOSSES, "losses/late_phase"))


def test_below_the_rate_floor_two_runs_of_a_seed_agree(runs_root):
    floor = "stop.anneal_min_sps=1000000"  # far above any machine's CartPole rate
    first, second = (_train(runs_root, name, floor) for name in ("floor-1", "floor-2"))
    for run in (first, second):
        schedule = json.loads((run / "manifest.json").read_text())["schedule"]
        assert schedule["budget_rate_from"] == "floor"
        assert schedule["anneal_steps"] == 600 * 1_000_000  # stop.wall_time_s at the floor
    _assert_same_run(first, second, LOSSES)
