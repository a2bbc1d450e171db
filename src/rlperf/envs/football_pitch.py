"""The football game's observation layout and pitch, shared by the game and its renderer.

Kept apart from :mod:`rlperf.envs.football` so that the renderer can read them without
importing the game (which imports the renderer for ``render()``).
"""

from __future__ import annotations

OBS_SLICES: dict[str, slice] = {
    "left_team": slice(0, 22),
    "left_team_direction": slice(22, 44),
    "right_team": slice(44, 66),
    "right_team_direction": slice(66, 88),
    "ball": slice(88, 91),
    "ball_direction": slice(91, 94),
    "ball_owned_team": slice(94, 97),
    "active": slice(97, 108),
    "game_mode": slice(108, 115),
}
"""The simple115 layout: 11 (x, y) pairs per team block, ball (x, y, z) and its per-step
displacement, owner one-hot over {none, left, right}, active player one-hot (11), game
mode one-hot (7)."""

# Pitch and goal, in gfootball units.
PITCH_X, PITCH_Y = 1.0, 0.42
GOAL_HALF_WIDTH = 0.044
