"""What the linear schedules (``anneal_lr``, ``anneal_ent_coef``) count down: env steps,
iterations, seconds of training, or env steps measured from seconds.

Three clocks, chosen by ``stop.anneal_over``:

- ``total_timesteps``: env steps of ``stop.total_timesteps`` (CleanRL), or iterations of
  ``stop.iterations`` when no step budget is set. Replays exactly.
- ``wall_time_s``: seconds of training of ``stop.wall_time_s``. The schedule ends at the
  deadline on any machine, but a few milliseconds' difference changes the learning rate of
  every update, so a seed never replays a run, and on a slower day the schedule runs down
  in fewer env steps.
- ``wall_time_steps``: the env steps that ``stop.wall_time_s`` buys at the rate measured
  over the run's first iterations. The schedule holds at its start value while the rate is
  measured (a fixed number of iterations, so the hold is the same in every run), then runs
  down over env steps; the budget is recorded in the manifest and the checkpoint, and
  giving it back as ``stop.anneal_steps`` replays the run step for step. With
  ``stop.anneal_min_sps`` the budget is never below what the whole deadline buys at that
  floor, so a slow day does not shorten the schedule (it may then end after the deadline),
  and every run slower than the floor gets the same budget: there a seed replays a run
  without being given it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

RATE_ITERATIONS = 16
"""Iterations after the warm-up over which ``wall_time_steps`` measures the env steps per
second (about 10 s of a 1,024-step Atari iteration on 2 CPU cores): long enough to average
out a slow iteration, short enough that the held schedule costs ~1 % of the budget."""


@dataclass
class ScheduleClock:
    """The share of the schedule's budget still ahead, from the run's counters."""

    anneal_over: str
    """``total_timesteps``, ``wall_time_s`` or ``wall_time_steps`` (``stop.anneal_over``)."""
    total_timesteps: int | None = None
    iterations: int | None = None
    wall_time_s: float | None = None
    warmup_iterations: int = 1
    """Iterations left out of the rate (allocator, kernel selection, first-game resets)."""
    anneal_steps: int | None = None
    """The env-step budget of ``wall_time_steps``: given (a replay) or measured."""
    min_sps: float | None = None
    """The floor on the rate the budget is computed from (``stop.anneal_min_sps``)."""
    measured_steps: int = 0
    measured_seconds: float = 0.0
    measured_iterations: int = 0

    def __post_init__(self) -> None:
        self.given = self.anneal_steps is not None
        """Whether the step budget came from the config rather than a measurement."""

    @property
    def holding(self) -> bool:
        """Whether a ``wall_time_steps`` schedule still holds at its start value: in the
        warm-up and rate iterations, the same in a measured run and its replay."""
        return self.anneal_over == "wall_time_steps" and self.measured_iterations < RATE_ITERATIONS

    def fraction_left(self, env_steps: int, iteration: int, time_total_s: float) -> float:
        """1.0 at the start of the budget, 0.0 at its end.

        The schedule deliberately ignores the other stop criteria: a run stopped early (by
        ``-i``, a signal or a target) and resumed later continues the same schedule."""
        if self.anneal_over == "wall_time_s" and self.wall_time_s:
            return max(1.0 - time_total_s / self.wall_time_s, 0.0)
        if self.anneal_over == "wall_time_steps":
            if self.holding or not self.anneal_steps:
                return 1.0
            return max(1.0 - env_steps / self.anneal_steps, 0.0)
        return budget_fraction_left(env_steps, iteration, self.total_timesteps, self.iterations)

    def observe(
        self, iteration: int, steps: int, seconds: float, env_steps: int, time_total_s: float
    ) -> bool:
        """Count a finished iteration (``iteration`` is 1-based) towards the rate; returns
        True when this iteration fixed the step budget (the manifest should say so)."""
        if not self.holding or iteration <= self.warmup_iterations:
            return False
        self.measured_steps += steps
        self.measured_seconds += seconds
        self.measured_iterations += 1
        if self.holding or self.given:
            return False
        # The steps the run will have reached at its deadline at the measured rate.
        remaining_s = max((self.wall_time_s or 0.0) - time_total_s, 0.0)
        measured = env_steps + round(self.rate * remaining_s)
        self.anneal_steps = max(measured, self.floor_steps, env_steps + 1)
        return True

    @property
    def rate(self) -> float:
        """Env steps per second of training over the rate iterations (0 before any)."""
        return self.measured_steps / self.measured_seconds if self.measured_seconds > 0 else 0.0

    @property
    def floor_steps(self) -> int:
        """The env steps the whole deadline buys at ``stop.anneal_min_sps`` (0 without one).

        Taken over the whole deadline rather than the seconds left after the rate iterations,
        whose length varies by milliseconds from run to run: a budget set by the floor is then
        the same number in every run, and so is the schedule."""
        return round((self.min_sps or 0.0) * (self.wall_time_s or 0.0))

    @property
    def budget_rate_from(self) -> str:
        """``floor`` when ``stop.anneal_min_sps`` set the step budget, else ``measured``."""
        return "floor" if self.floor_steps and self.anneal_steps == self.floor_steps else "measured"

    def describe(self) -> dict[str, Any]:
        """The schedule's budget for the manifest: what a replay needs to give back."""
        out: dict[str, Any] = {"anneal_over": self.anneal_over}
        if self.anneal_over == "wall_time_steps":
            out.update(
                anneal_steps=self.anneal_steps,
                anneal_steps_from="config" if self.given else "measured",
                held_iterations=self.warmup_iterations + RATE_ITERATIONS,
                measured_sps=round(self.rate, 1) if self.measured_seconds else None,
                min_sps=self.min_sps,
                budget_rate_from=None if self.given else self.budget_rate_from,
                measured_iterations=self.measured_iterations,
                replay_with=(
                    f"stop.anneal_steps={self.anneal_steps}" if self.anneal_steps else None
                ),
            )
        return out

    def state_dict(self) -> dict[str, Any]:
        return {
            "anneal_steps": self.anneal_steps,
            "measured_steps": self.measured_steps,
            "measured_seconds": self.measured_seconds,
            "measured_iterations": self.measured_iterations,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue the checkpoint's schedule; a budget given in the config wins (a resume
        may set stop.anneal_steps on purpose)."""
        if not self.given and state.get("anneal_steps") is not None:
            self.anneal_steps = int(state["anneal_steps"])
        self.measured_steps = int(state.get("measured_steps", 0))
        self.measured_seconds = float(state.get("measured_seconds", 0.0))
        self.measured_iterations = int(state.get("measured_iterations", 0))


def budget_fraction_left(
    env_steps: int, iteration: int, total_timesteps: int | None, iterations: int | None
) -> float:
    """Share of the run's budget still ahead, for annealing schedules: ``total_timesteps``,
    or ``iterations`` when no step budget is set; 1.0 without either (wall time and target
    rewards are not predictable)."""
    if total_timesteps:
        return max(1.0 - env_steps / total_timesteps, 0.0)
    if iterations:
        return max(1.0 - iteration / iterations, 0.0)
    return 1.0
