"""True game returns: the window the thesis's episode_reward_* columns summarise, and 003's EMA."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from rlperf.envs.base import EpisodeEnd

EMA_ALPHA = 0.98  # source 003's smoothing of episode rewards
PARITY_WINDOW = 10
"""Games kept per frame parity. Far fewer than the summary's 100: on Pong at a stall
(sixteen envs, games of about 2,600 agent steps) ten games of each parity take about 55,000
env steps, and what reads them (``ppo.parity_balance_gap``, ``env.start_parity=lagging``)
has to follow the two games within a stage of a few hundred thousand."""


@dataclass
class EpisodeStats:
    """True game returns: the last 100 for summaries, an EMA for 003's stop criterion."""

    returns: deque[float] = field(default_factory=lambda: deque(maxlen=100))
    lengths: deque[int] = field(default_factory=lambda: deque(maxlen=100))
    ema: float | None = None
    total: int = 0
    rooms_per_game: deque[int] = field(default_factory=lambda: deque(maxlen=100))
    """Rooms visited by each of the last 100 games that track rooms (Montezuma's Revenge)."""
    rooms_seen: set[int] = field(default_factory=set)
    """Every room any game of the run visited."""
    first_mean: float | None = None
    """Mean return of the run's first 100 games (None before the 100th): its score before it
    had learned much, from which a share of the way to a target is measured."""
    parity_returns: tuple[deque[float], deque[float]] = field(
        default_factory=lambda: (deque(maxlen=PARITY_WINDOW), deque(maxlen=PARITY_WINDOW))
    )
    """The last returns of the games on even and on odd frames (engines that tell)."""

    def add(self, episodes: list[EpisodeEnd]) -> None:
        for ep in episodes:
            self.returns.append(ep.episode_return)
            self.lengths.append(ep.length)
            self.ema = (
                ep.episode_return
                if self.ema is None
                else EMA_ALPHA * self.ema + (1 - EMA_ALPHA) * ep.episode_return
            )
            self.total += 1
            if self.total == self.returns.maxlen:
                self.first_mean = sum(self.returns) / self.total
            if ep.rooms is not None:
                self.rooms_per_game.append(len(ep.rooms))
                self.rooms_seen.update(ep.rooms)
            if ep.frame_parity is not None:
                self.parity_returns[ep.frame_parity].append(ep.episode_return)

    def parity_means(self) -> tuple[float | None, float | None]:
        """Mean return of the last :data:`PARITY_WINDOW` games on even and on odd frames;
        None for a parity with fewer games than that."""

        def mean(games: deque[float]) -> float | None:
            return sum(games) / len(games) if len(games) == PARITY_WINDOW else None

        even, odd = self.parity_returns
        return mean(even), mean(odd)

    def summary(self) -> dict[str, Any]:
        n = len(self.returns)
        return {
            "episode_reward_min": min(self.returns) if n else None,
            "episode_reward_mean": sum(self.returns) / n if n else None,
            "episode_reward_max": max(self.returns) if n else None,
            "episode_len_mean": sum(self.lengths) / n if n else None,
            "episode_reward_ema": self.ema,
            **self._room_summary(),
            **self._parity_summary(),
        }

    def _parity_summary(self) -> dict[str, Any]:
        even, odd = self.parity_means()
        if even is None and odd is None:
            return {}
        return {"parity/even_reward_mean": even, "parity/odd_reward_mean": odd}

    def _room_summary(self) -> dict[str, Any]:
        if not self.rooms_seen:
            return {}
        n = len(self.rooms_per_game)
        return {
            "rooms/per_game_mean": sum(self.rooms_per_game) / n,
            "rooms/per_game_max": max(self.rooms_per_game),
            "rooms/visited_count": len(self.rooms_seen),
            "rooms_visited": " ".join(map(str, sorted(self.rooms_seen))),
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "returns": list(self.returns),
            "lengths": list(self.lengths),
            "ema": self.ema,
            "total": self.total,
            "rooms_per_game": list(self.rooms_per_game),
            "rooms_seen": sorted(self.rooms_seen),
            "first_mean": self.first_mean,
            "parity_returns": [list(games) for games in self.parity_returns],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.returns.extend(state["returns"])
        self.lengths.extend(state["lengths"])
        self.ema, self.total = state["ema"], state["total"]
        # Checkpoints written before rooms were tracked have neither key.
        self.rooms_per_game.extend(state.get("rooms_per_game", []))
        self.rooms_seen.update(state.get("rooms_seen", []))
        # Checkpoints written before it was kept have none: a share of the way to a target
        # stays undefined for such a run rather than measured from a later window.
        self.first_mean = state.get("first_mean")
        # Checkpoints from before games were told by parity hold none: the windows refill.
        saved = state.get("parity_returns", [[], []])
        for games, returns in zip(self.parity_returns, saved, strict=True):
            games.extend(returns)
