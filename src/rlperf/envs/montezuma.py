"""Montezuma's Revenge: which rooms the agent visits.

The pyramid has 24 rooms; the console keeps the current room number in RAM address 3
(0-based), which is how source 004's ``eval.py`` (and the RND paper) count exploration: the
set of rooms visited in a game. :class:`MontezumaEnv` is an :class:`AtariEnv` that reads that
byte after every step and keeps the set for the current game; snapshots include it.

The game's other settings used for RND (sticky actions 0.25, at most 4500 agent steps per
game, 18 actions) are ordinary env config: see the ``rnd-montezuma`` presets.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlperf.config.schema import EnvConfig
from rlperf.envs.atari import AtariEnv
from rlperf.envs.base import EnvState, GameEnd

ROOM_RAM_ADDRESS = 3
"""RAM byte holding the current room number."""


def is_montezuma(env_id: str) -> bool:
    """True for any Montezuma's Revenge id (ALE/MontezumaRevenge-v5, ...NoFrameskip-v4)."""
    return "montezumarevenge" in env_id.lower().replace("_", "").replace("-", "")


def room_from_ram(ram: np.ndarray) -> int:
    """The room number in a RAM snapshot (128 bytes)."""
    return int(ram[ROOM_RAM_ADDRESS])


class MontezumaEnv(AtariEnv):
    """An :class:`AtariEnv` that tracks the rooms visited in the current true game.

    ``visited_rooms`` is the set of the game in progress (it survives lost lives, as the game
    does); when a game ends, ``last_game_rooms`` keeps its set until the next one ends.
    """

    def __init__(self, cfg: EnvConfig, dim: int, seed: int, training: bool = True) -> None:
        super().__init__(cfg, dim, seed, training)
        self.visited_rooms: set[int] = set()
        self.last_game_rooms: set[int] = set()

    @property
    def room(self) -> int:
        """The room the player is in now."""
        return room_from_ram(self.ram())

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, GameEnd | None]:
        obs, reward, terminated, truncated, game_end = super().step(action)
        self.visited_rooms.add(self.room)
        if game_end is not None:
            self.last_game_rooms = set(self.visited_rooms)
            # The rooms travel with the game's end into the training records.
            game_end = (*game_end[:2], tuple(sorted(self.visited_rooms)))
        return obs, reward, terminated, truncated, game_end

    def _hard_reset(self) -> None:
        super()._hard_reset()
        self.visited_rooms = {self.room}

    def get_state(self) -> EnvState:
        state = super().get_state()
        state["visited_rooms"] = sorted(self.visited_rooms)
        state["last_game_rooms"] = sorted(self.last_game_rooms)
        return state

    def set_state(self, state: EnvState) -> None:
        super().set_state(state)
        rooms: Any = state.get("visited_rooms", [])
        self.visited_rooms = {int(r) for r in rooms}
        self.last_game_rooms = {int(r) for r in state.get("last_game_rooms", [])}
