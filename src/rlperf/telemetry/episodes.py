"""True game returns: the window the thesis's episode_reward_* columns summarise, and 003's EMA."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from rlperf.envs.base import EpisodeEnd

EMA_ALPHA = 0.98  # source 003's smoothing of episode rewards


@dataclass
class EpisodeStats:
    """True game returns: the last 100 for summaries, an EMA for 003's stop criterion."""

    returns: deque[float] = field(default_factory=lambda: deque(maxlen=100))
    lengths: deque[int] = field(default_factory=lambda: deque(maxlen=100))
    ema: float | None = None
    total: int = 0

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

    def summary(self) -> dict[str, float | None]:
        n = len(self.returns)
        return {
            "episode_reward_min": min(self.returns) if n else None,
            "episode_reward_mean": sum(self.returns) / n if n else None,
            "episode_reward_max": max(self.returns) if n else None,
            "episode_len_mean": sum(self.lengths) / n if n else None,
            "episode_reward_ema": self.ema,
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "returns": list(self.returns),
            "lengths": list(self.lengths),
            "ema": self.ema,
            "total": self.total,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.returns.extend(state["returns"])
        self.lengths.extend(state["lengths"])
        self.ema, self.total = state["ema"], state["total"]
