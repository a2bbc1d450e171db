"""An in-repo football academy game with gfootball's ``simple115`` observations.

Google Research Football ships only a source package that compiles a C++ engine, so rlperf
carries a small, fast, deterministic stand-in for its ``academy_empty_goal_close`` scenario:
one attacker starts with the ball just outside the opponent's box, in front of an empty
goal; a goal scores +1 and ends the episode, as do the ball leaving the pitch and the
scenario's 400-step limit (registered with gymnasium as the env's ``max_episode_steps``).

What is taken from gfootball, exactly:

- coordinates: the pitch spans x in [-1, 1] and y in [-0.42, 0.42] (y grows downwards, so
  "top" is negative y); the opponent's goal is at x = 1 between posts at y = +-0.044;
- the 115-float observation in the fixed-position layout (gfootball's ``simple115v2``): see
  :data:`~rlperf.envs.football_pitch.OBS_SLICES`; absent players are filled with -1 as gfootball does;
- the 19-action default set (:data:`ACTIONS`), with sticky movement directions (a direction
  holds until another direction or ``release_direction``) and sprint/dribble toggles;
- the scenario's start, as gfootball 2.10.2 reports it: the left keeper at (-1.011, 0),
  the attacker at (0.758, 0) with the ball at his feet (0.77, 0, 0.111), nobody owning it
  until his first step; the right team's only player, its keeper, stands far away at
  (-1.011, 0), so the goal at x = 1 is empty.

What is simplified (this is not gfootball's engine): the ball rolls in straight lines with
friction and a simple vertical bounce; a shot leaves in the attacker's facing direction with
an angular error that grows with the distance to the goal; passes go to the only team-mate
(the keeper), who keeps the ball when it reaches him; players reach their speed at once (no
acceleration) and the far-away opponent never moves. The dynamics are chosen so that the
scenario is as learnable as the real one: from the start, a shot while facing the goal or
a dribble into it scores.

Every random draw comes from the env's ``np_random`` (gymnasium seeding), so a seed fixes an
episode. The whole dynamic state is one float64 array, ``unwrapped.state``, which is what
rlperf's env snapshots (:class:`rlperf.envs.classic.GymEnv`) save and restore.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium
import numpy as np

from rlperf.envs.football_pitch import GOAL_HALF_WIDTH, PITCH_X, PITCH_Y

ENV_ID = "rlperf/FootballEmptyGoalClose-v0"
GAME_DURATION = 400
"""Steps of gfootball's academy scenarios (their ``game_duration``)."""

ACTIONS = (
    "idle",
    "left",
    "top_left",
    "top",
    "top_right",
    "right",
    "bottom_right",
    "bottom",
    "bottom_left",
    "long_pass",
    "high_pass",
    "short_pass",
    "shot",
    "sprint",
    "release_direction",
    "release_sprint",
    "sliding",
    "dribble",
    "release_dribble",
)
"""gfootball's default action set, in its order (action i is ACTIONS[i])."""

_DIAG = math.sqrt(0.5)
_DIRECTIONS = {
    1: (-1.0, 0.0),
    2: (-_DIAG, -_DIAG),
    3: (0.0, -1.0),
    4: (_DIAG, -_DIAG),
    5: (1.0, 0.0),
    6: (_DIAG, _DIAG),
    7: (0.0, 1.0),
    8: (-_DIAG, _DIAG),
}

# The goal's height and the ball's resting height, in metres as gfootball reports z.
GOAL_HEIGHT = 2.44
BALL_REST_Z = 0.11
KEEPER_X = -1.011
"""Both keepers stand here (gfootball's left keeper, and the right team's far away)."""
START_X, START_BALL_X = 0.758, 0.77
START_JITTER_Y = 0.02
"""The attacker and ball start at y = u, u uniform in +-0.02 (gfootball: 0; a little variety,
so a policy must look at the observation rather than replay one sequence)."""

# Per-step kinematics (gfootball runs 10 steps per second).
RUN_SPEED, SPRINT_SPEED, DRIBBLE_SPEED = 0.008, 0.012, 0.006
"""Per step; gfootball's attacker reaches about 0.007 running within a few steps."""
CONTROL_RADIUS = 0.015
"""A free ball this close to the attacker (and below 1 m) becomes his."""
KICK_COOLDOWN = 5
"""Steps after a kick during which the kicker cannot take the ball back."""
SHOT_SPEED = 0.06
SHOT_ERROR = (0.02, 0.08)
"""Shot direction error: gaussian, std = a + b x distance to the goal centre (radians)."""
PASS_SPEED = {9: 0.05, 10: 0.04, 11: 0.035}
HIGH_PASS_LIFT = 0.6
GROUND_FRICTION, AIR_DRAG, GRAVITY = 0.97, 0.995, 0.098

# The dynamic state as one float64 array (what snapshots save).
_FIELDS = [
    "px",
    "py",
    "pdx",
    "pdy",
    "fx",
    "fy",
    "mx",
    "my",
    "sprint",
    "dribble",
    "bx",
    "by",
    "bz",
    "bvx",
    "bvy",
    "bvz",
    "owner",
    "cooldown",
    "steps",
]
_I = {name: i for i, name in enumerate(_FIELDS)}
OWNER_NONE, OWNER_ATTACKER, OWNER_KEEPER = 0.0, 1.0, 2.0


class FootballEmptyGoalClose(gymnasium.Env):
    """gfootball's ``academy_empty_goal_close`` with ``simple115`` observations and the
    ``scoring`` reward (see the module docstring for what is and is not the same)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, render_mode: str | None = None) -> None:
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.render_mode = render_mode
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (115,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(len(ACTIONS))
        self._s = np.zeros(len(_FIELDS), dtype=np.float64)
        self._obs = np.full(115, -1.0, dtype=np.float32)

    # ------------------------------------------------------------------ state

    @property
    def state(self) -> np.ndarray:
        """The whole dynamic state (a copy): attacker, ball, owner, toggles, step count."""
        return self._s.copy()

    @state.setter
    def state(self, value: np.ndarray) -> None:
        value = np.asarray(value, dtype=np.float64)
        if value.shape != self._s.shape:
            raise ValueError(f"football state has {self._s.shape[0]} values, got {value.shape}")
        self._s[:] = value
        self._write_obs()

    # ------------------------------------------------------------------ gymnasium API

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        s = self._s
        s[:] = 0.0
        y = float(self.np_random.uniform(-START_JITTER_Y, START_JITTER_Y))
        s[_I["px"]], s[_I["py"]] = START_X, y
        s[_I["fx"]] = 1.0  # facing the opponent's goal
        s[_I["bx"]], s[_I["by"]], s[_I["bz"]] = START_BALL_X, y, BALL_REST_Z
        s[_I["owner"]] = OWNER_NONE  # the attacker takes it with his first step
        self._write_obs()
        return self._obs.copy(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        a = int(action)
        if not 0 <= a < len(ACTIONS):
            raise ValueError(f"action must be in 0..{len(ACTIONS) - 1}, got {action!r}")
        s = self._s
        s[_I["steps"]] += 1
        self._apply_action(a)
        self._move_attacker()
        reward, terminated = self._move_ball()
        self._write_obs()
        return self._obs.copy(), reward, terminated, False, {}

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        from rlperf.envs.football_render import render_frame

        return render_frame(self._obs)

    # ------------------------------------------------------------------ dynamics

    def _apply_action(self, a: int) -> None:
        s = self._s
        if a in _DIRECTIONS:
            s[_I["mx"]], s[_I["my"]] = _DIRECTIONS[a]
        elif a == 14:  # release_direction
            s[_I["mx"]] = s[_I["my"]] = 0.0
        elif a == 13:
            s[_I["sprint"]] = 1.0
        elif a == 15:
            s[_I["sprint"]] = 0.0
        elif a == 17:
            s[_I["dribble"]] = 1.0
        elif a == 18:
            s[_I["dribble"]] = 0.0
        elif a in (9, 10, 11, 12) and s[_I["owner"]] == OWNER_ATTACKER:
            self._kick(a)

    def _kick(self, a: int) -> None:
        s = self._s
        px, py = s[_I["px"]], s[_I["py"]]
        if a == 12:  # shot: the facing direction, less accurate from further away
            distance = math.hypot(PITCH_X - px, py)
            error = self.np_random.normal(0.0, SHOT_ERROR[0] + SHOT_ERROR[1] * distance)
            angle = math.atan2(s[_I["fy"]], s[_I["fx"]]) + float(error)
            speed, vz = SHOT_SPEED, 0.0
        else:  # passes go to the only team-mate, the keeper
            angle = math.atan2(0.0 - py, KEEPER_X - px)
            speed, vz = PASS_SPEED[a], (HIGH_PASS_LIFT if a == 10 else 0.0)
        s[_I["bvx"]], s[_I["bvy"]], s[_I["bvz"]] = (
            speed * math.cos(angle),
            speed * math.sin(angle),
            vz,
        )
        s[_I["owner"]] = OWNER_NONE
        s[_I["cooldown"]] = KICK_COOLDOWN

    def _move_attacker(self) -> None:
        s = self._s
        mx, my = s[_I["mx"]], s[_I["my"]]
        if mx == 0.0 and my == 0.0:
            s[_I["pdx"]] = s[_I["pdy"]] = 0.0
            return
        if s[_I["dribble"]] and s[_I["owner"]] == OWNER_ATTACKER:
            speed = DRIBBLE_SPEED
        elif s[_I["sprint"]]:
            speed = SPRINT_SPEED
        else:
            speed = RUN_SPEED
        dx, dy = mx * speed, my * speed
        # Players may run a little beyond the lines (as in gfootball), not off into nowhere.
        s[_I["px"]] = min(max(s[_I["px"]] + dx, -1.1), 1.1)
        s[_I["py"]] = min(max(s[_I["py"]] + dy, -0.5), 0.5)
        s[_I["pdx"]], s[_I["pdy"]] = dx, dy
        s[_I["fx"]], s[_I["fy"]] = mx, my

    def _move_ball(self) -> tuple[float, bool]:
        """Advance the ball; returns (reward, episode ended)."""
        s = self._s
        x0, y0 = s[_I["bx"]], s[_I["by"]]
        owner = s[_I["owner"]]
        if owner == OWNER_ATTACKER:  # carried just ahead of the attacker's feet
            x = s[_I["px"]] + 0.005 * s[_I["fx"]]
            y = s[_I["py"]] + 0.005 * s[_I["fy"]]
            z, vz = BALL_REST_Z, 0.0
        elif owner == OWNER_KEEPER:
            x, y, z, vz = KEEPER_X, 0.0, BALL_REST_Z, 0.0
        else:
            vx, vy, vz = s[_I["bvx"]], s[_I["bvy"]], s[_I["bvz"]]
            x, y, z = x0 + vx, y0 + vy, s[_I["bz"]] + vz
            if z > BALL_REST_Z:
                vz -= GRAVITY
                drag = AIR_DRAG
            else:
                z, vz = BALL_REST_Z, (-0.5 * vz if vz < -0.2 else 0.0)
                drag = GROUND_FRICTION
            s[_I["bvx"]], s[_I["bvy"]] = vx * drag, vy * drag
        s[_I["bx"]], s[_I["by"]], s[_I["bz"]], s[_I["bvz"]] = x, y, z, vz
        if owner != OWNER_NONE:
            s[_I["bvx"]], s[_I["bvy"]] = x - x0, y - y0
        # A goal: the ball crosses the goal line between the posts, under the bar.
        if x > PITCH_X and x0 <= PITCH_X:
            t = (PITCH_X - x0) / (x - x0)
            y_line = y0 + t * (y - y0)
            if abs(y_line) < GOAL_HALF_WIDTH and z < GOAL_HEIGHT:
                return 1.0, True
        if abs(x) > PITCH_X or abs(y) > PITCH_Y:
            return 0.0, True  # out of play ends the academy episode
        if owner == OWNER_NONE:
            if s[_I["cooldown"]] > 0:
                s[_I["cooldown"]] -= 1
            elif z < 1.0 and math.hypot(x - s[_I["px"]], y - s[_I["py"]]) < CONTROL_RADIUS:
                s[_I["owner"]] = OWNER_ATTACKER
            if s[_I["owner"]] == OWNER_NONE and z < 1.0 and math.hypot(x - KEEPER_X, y) < 0.02:
                s[_I["owner"]] = OWNER_KEEPER
        return 0.0, False

    # ------------------------------------------------------------------ observation

    def _write_obs(self) -> None:
        s, o = self._s, self._obs
        # Left team: keeper (player 0, never moves) and the attacker (player 1); right team:
        # its keeper, far away. The other slots stay -1, as gfootball backfills absent players.
        o[0], o[1] = KEEPER_X, 0.0
        o[2], o[3] = s[_I["px"]], s[_I["py"]]
        o[22], o[23] = 0.0, 0.0
        o[24], o[25] = s[_I["pdx"]], s[_I["pdy"]]
        o[44], o[45] = KEEPER_X, 0.0
        o[66], o[67] = 0.0, 0.0
        o[88], o[89], o[90] = s[_I["bx"]], s[_I["by"]], s[_I["bz"]]
        o[91], o[92], o[93] = s[_I["bvx"]], s[_I["bvy"]], s[_I["bvz"]]
        owned = s[_I["owner"]] != OWNER_NONE
        o[94], o[95], o[96] = (0.0, 1.0, 0.0) if owned else (1.0, 0.0, 0.0)
        o[97:108] = 0.0
        o[98] = 1.0  # the attacker is always the controlled player
        o[108:115] = 0.0
        o[108] = 1.0  # game mode: normal play


def register() -> None:
    """Register :data:`ENV_ID` with gymnasium, and gfootball's own game as
    ``rlperf/GFootballEmptyGoalClose-v0`` when gfootball is importable (idempotent; called by
    rlperf.envs.make)."""
    from rlperf.envs import gfootball_adapter

    if ENV_ID not in gymnasium.registry:
        gymnasium.register(
            ENV_ID,
            entry_point="rlperf.envs.football:FootballEmptyGoalClose",
            max_episode_steps=GAME_DURATION,
        )
    gfootball_adapter.register()
