"""The score of a benchmark run, and its human-normalised value.

**The score** (:func:`run_score`, the one definition every preset is measured by): the mean
return of the last 100 true games (whole games to the game over, lives not counted as
ends; unclipped rewards) in the run's last record, i.e. at the end of its wall-clock
budget. It is the ``episode_reward_mean`` that every run records per iteration
(``telemetry/episodes.py``), so a preset cannot pick a friendlier measure: the same
statistic of the same true games, at the same point of every run. It is a training score,
played by the stochastic policy that is learning, not a separate greedy evaluation: a
benchmark of wall-clock budgets spends all of its budget on training, and every preset is
scored alike. A run that finished fewer than 100 games is scored over those it finished (the
table shows how many); a run that finished none has no score.

**Human normalisation**: ``(score - random) / (human - random)`` with the random and human
reference scores of the Atari-57 tables (``atari_reference.json``: Badia et al. 2020's
Agent57 appendix, the numbers DeepMind's dqn_zoo uses): 0 is random play, 1 a professional
human games tester. Games outside those tables (CartPole-v1...) have no reference.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

WINDOW = 100
"""Games in the score's window (the records' ``episode_reward_mean`` covers the last 100)."""
_ATARI_ID = re.compile(r"^(?:ALE/)?(?P<game>[A-Za-z]+?)(?:NoFrameskip|Deterministic)?-v\d+$")


@dataclass(frozen=True)
class RunScore:
    """A run's score at its budget."""

    score: float | None
    """Mean return of its last (up to) 100 true games; None when no game finished."""
    games: int
    """Games the score averages (at most :data:`WINDOW`)."""
    env_steps: int
    seconds: float
    """Training seconds at its last record."""


def run_score(records: list[dict[str, Any]]) -> RunScore:
    """The score of a run from its ``metrics.jsonl`` records (see the module's docstring)."""
    if not records:
        return RunScore(None, 0, 0, 0.0)
    last = records[-1]
    mean = last.get("episode_reward_mean")
    total = last.get("episodes_total")
    games = min(int(total), WINDOW) if isinstance(total, int | float) else 0
    score = float(mean) if isinstance(mean, int | float) and games > 0 else None
    return RunScore(
        score,
        games if score is not None else 0,
        int(last.get("timesteps_total") or 0),
        float(last.get("time_total_s") or 0.0),
    )


@dataclass(frozen=True)
class Reference:
    """A game's random and human reference scores."""

    game: str
    random: float
    human: float

    def normalise(self, score: float) -> float:
        """The human-normalised score: 0 = random play, 1 = the human tester."""
        return (score - self.random) / (self.human - self.random)


@cache
def _table() -> dict[str, Any]:
    text = resources.files("rlperf.report").joinpath("atari_reference.json").read_text()
    return json.loads(text)


def reference_sources() -> list[str]:
    """The citations of the reference table."""
    return list(_table()["sources"])


def game_name(env_id: str) -> str | None:
    """The Atari game an env id names (``ALE/Pong-v5``, ``PongNoFrameskip-v4`` -> ``Pong``),
    or None for other ids."""
    match = _ATARI_ID.match(env_id)
    if match is None or not env_id.startswith("ALE/") and "NoFrameskip" not in env_id:
        return None
    return match.group("game")


def reference(env_id: str) -> Reference | None:
    """The random and human scores of the game ``env_id`` plays, or None without one."""
    game = game_name(env_id)
    row = _table()["games"].get(game) if game else None
    if row is None:
        return None
    return Reference(str(game), float(row["random"]), float(row["human"]))
