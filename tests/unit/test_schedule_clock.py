"""The schedules' clock: which budget anneal_lr/anneal_ent_coef run down, and the measured
step budget of stop.anneal_over=wall_time_steps (held, measured, recorded, resumed)."""

import pytest

from rlperf.core.schedule_clock import RATE_ITERATIONS, ScheduleClock


def _run(clock: ScheduleClock, iterations: int, steps: int, seconds: float) -> list[float]:
    """Feed ``iterations`` equal iterations; the fraction each one's update saw."""
    env_steps, time_s, seen = 0, 0.0, []
    for it in range(1, iterations + 1):
        seen.append(clock.fraction_left(env_steps, it - 1, time_s))
        env_steps += steps
        time_s += seconds
        clock.observe(it, steps, seconds, env_steps, time_s)
    return seen


def test_the_step_budget_is_what_the_deadline_buys_at_the_measured_rate():
    clock = ScheduleClock("wall_time_steps", wall_time_s=100.0, warmup_iterations=1)
    seen = _run(clock, 1 + RATE_ITERATIONS, steps=100, seconds=0.5)  # 200 steps/s
    assert seen == [1.0] * (1 + RATE_ITERATIONS)  # held while the rate is measured
    done_s = (1 + RATE_ITERATIONS) * 0.5
    assert clock.rate == 200.0
    assert clock.anneal_steps == (1 + RATE_ITERATIONS) * 100 + round(200 * (100 - done_s))
    assert clock.fraction_left(10_000, 99, 50.0) == pytest.approx(0.5)
    assert clock.fraction_left(10**9, 99, 50.0) == 0.0
    described = clock.describe()
    assert described["anneal_steps_from"] == "measured" and described["measured_sps"] == 200.0
    assert described["replay_with"] == f"stop.anneal_steps={clock.anneal_steps}"


def test_the_warmup_is_left_out_of_the_rate():
    clock = ScheduleClock("wall_time_steps", wall_time_s=100.0, warmup_iterations=2)
    clock.observe(1, 100, 10.0, 100, 10.0)  # a slow first iteration
    clock.observe(2, 100, 10.0, 200, 20.0)
    assert clock.measured_iterations == 0 and clock.rate == 0.0


def test_a_given_budget_holds_as_long_as_a_measured_one_and_is_kept():
    given = ScheduleClock("wall_time_steps", wall_time_s=100.0, anneal_steps=20_000)
    measured = ScheduleClock("wall_time_steps", wall_time_s=100.0)
    a = _run(given, 1 + RATE_ITERATIONS + 5, steps=100, seconds=0.5)
    b = _run(measured, 1 + RATE_ITERATIONS + 5, steps=100, seconds=0.5)
    assert a[: 1 + RATE_ITERATIONS] == b[: 1 + RATE_ITERATIONS] == [1.0] * (1 + RATE_ITERATIONS)
    assert given.anneal_steps == 20_000 and given.describe()["anneal_steps_from"] == "config"
    assert a[-1] == 1.0 - (RATE_ITERATIONS + 5) * 100 / 20_000


def test_a_resumed_clock_continues_the_measured_budget_or_the_measurement():
    clock = ScheduleClock("wall_time_steps", wall_time_s=100.0)
    _run(clock, 1 + RATE_ITERATIONS, steps=100, seconds=0.5)
    resumed = ScheduleClock("wall_time_steps", wall_time_s=100.0)
    resumed.load_state_dict(clock.state_dict())
    assert resumed.anneal_steps == clock.anneal_steps and not resumed.holding
    halfway = ScheduleClock("wall_time_steps", wall_time_s=100.0)
    _run(halfway, 5, steps=100, seconds=0.5)
    again = ScheduleClock("wall_time_steps", wall_time_s=100.0)
    again.load_state_dict(halfway.state_dict())
    assert again.holding and again.measured_iterations == 4 and again.anneal_steps is None


@pytest.mark.parametrize(
    ("clock", "expected"),
    [
        (ScheduleClock("total_timesteps", total_timesteps=1000), 0.75),
        (ScheduleClock("total_timesteps", total_timesteps=None, iterations=10), 0.6),
        (ScheduleClock("total_timesteps"), 1.0),
        (ScheduleClock("wall_time_s", wall_time_s=200.0), 0.25),
    ],
)
def test_the_other_clocks(clock, expected):
    assert clock.fraction_left(250, 4, 150.0) == pytest.approx(expected)
    assert clock.describe() == {"anneal_over": clock.anneal_over}


# The steps of the rate iterations, then 200 steps/s for the rest of a 100 s deadline.
MEASURED_BUDGET = (1 + RATE_ITERATIONS) * 100 + round(200 * (100 - (1 + RATE_ITERATIONS) * 0.5))


@pytest.mark.parametrize(
    ("min_sps", "budget", "source"),
    [(300.0, 300 * 100, "floor"), (150.0, MEASURED_BUDGET, "measured")],
)
def test_a_rate_floor_lengthens_the_budget_of_a_slow_run_only(min_sps, budget, source):
    clock = ScheduleClock("wall_time_steps", wall_time_s=100.0, min_sps=min_sps)
    _run(clock, 1 + RATE_ITERATIONS, steps=100, seconds=0.5)  # measures 200 steps/s
    assert clock.rate == 200.0  # the measurement itself is recorded as measured
    assert clock.anneal_steps == budget
    described = clock.describe()
    assert described["min_sps"] == min_sps and described["budget_rate_from"] == source
    assert described["measured_sps"] == 200.0


def test_every_run_slower_than_the_floor_gets_the_same_budget():
    """The rate iterations of two runs never take the same seconds; below the floor their
    budgets (and so their schedules) are still one number."""
    budgets = set()
    for seconds in (0.5, 0.61, 0.9):  # 200, ~164 and ~111 steps/s against a floor of 300
        clock = ScheduleClock("wall_time_steps", wall_time_s=100.0, min_sps=300.0)
        _run(clock, 1 + RATE_ITERATIONS, steps=100, seconds=seconds)
        budgets.add(clock.anneal_steps)
        assert clock.describe()["budget_rate_from"] == "floor"
    assert budgets == {30_000}
