"""A small top-down renderer for the football game: RGB frames drawn from the observation.

Drawing from the simple115 observation (not the simulator's state) means any recorded
observation can be turned into a frame, e.g. for a video of greedy play.
"""

from __future__ import annotations

import numpy as np

from rlperf.envs.football_pitch import GOAL_HALF_WIDTH, OBS_SLICES, PITCH_X, PITCH_Y

SCALE = 60
"""Pixels per pitch unit: a 2.2 x 0.94 area (pitch plus margins) becomes 132 x 56 pixels."""
_MARGIN_X, _MARGIN_Y = 0.1, 0.05
_GRASS = (40, 120, 40)
_LINE = (235, 235, 235)
_LEFT = (230, 60, 60)
_RIGHT = (60, 90, 230)
_BALL = (255, 255, 255)
_SHADOW = (20, 60, 20)


def _to_px(x: float, y: float) -> tuple[int, int]:
    col = int(round((x + PITCH_X + _MARGIN_X) * SCALE))
    row = int(round((y + PITCH_Y + _MARGIN_Y) * SCALE))
    return row, col


def _dot(frame: np.ndarray, x: float, y: float, radius: int, color: tuple[int, int, int]) -> None:
    row, col = _to_px(x, y)
    h, w, _ = frame.shape
    frame[
        max(row - radius, 0) : min(row + radius + 1, h),
        max(col - radius, 0) : min(col + radius + 1, w),
    ] = color


def render_frame(obs: np.ndarray) -> np.ndarray:
    """An (H, W, 3) uint8 picture of one simple115 observation."""
    h = int(round(2 * (PITCH_Y + _MARGIN_Y) * SCALE)) + 1
    w = int(round(2 * (PITCH_X + _MARGIN_X) * SCALE)) + 1
    frame = np.empty((h, w, 3), dtype=np.uint8)
    frame[:] = _GRASS
    top, left = _to_px(-PITCH_X, -PITCH_Y)
    bottom, right = _to_px(PITCH_X, PITCH_Y)
    frame[top, left : right + 1] = _LINE
    frame[bottom, left : right + 1] = _LINE
    frame[top : bottom + 1, left] = _LINE
    frame[top : bottom + 1, right] = _LINE
    mid = _to_px(0.0, 0.0)[1]
    frame[top : bottom + 1, mid] = _LINE
    for x in (-PITCH_X, PITCH_X):  # goals: a short bar behind each goal line
        r0, c = _to_px(x, -GOAL_HALF_WIDTH)
        r1, _ = _to_px(x, GOAL_HALF_WIDTH)
        c += 2 if x > 0 else -2
        frame[r0 : r1 + 1, c] = _LINE
    for block, color in (("left_team", _LEFT), ("right_team", _RIGHT)):
        xy = obs[OBS_SLICES[block]].reshape(11, 2)
        for x, y in xy:
            if x == -1.0 and y == -1.0:  # an absent player
                continue
            _dot(frame, float(x), float(y), 2, color)
    bx, by, bz = (float(v) for v in obs[OBS_SLICES["ball"]])
    _dot(frame, bx, by, 1, _SHADOW)
    # The ball is drawn higher up the picture the higher it flies (1 pixel per metre).
    _dot(frame, bx, by - bz / SCALE, 1, _BALL)
    return frame
