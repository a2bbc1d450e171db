"""Atari (ALE) games with DeepMind-style preprocessing in a single class.

Everything a chain of gymnasium wrappers would do (no-op/fire reset, frame skip with
max-pooling, episodic life, reward clipping, grayscale, resize, frame stack, sticky actions,
step limit) happens here, driving the ALE interface directly: each wrapper layer costs a
Python call, an ``info`` dict and often an array copy per step, which adds up to a large share
of a step whose emulation takes only a few hundred microseconds.
"""

from __future__ import annotations

import ale_py
import cv2
import gymnasium
import numpy as np

from rlperf.config.schema import EnvConfig
from rlperf.envs.base import (
    EnvState,
    GameEnd,
    check_state_kind,
    paint_frame_parity,
    restore_rng,
    rng_state,
)

gymnasium.register_envs(ale_py)

_KIND = "atari"
_NOOP = 0  # ALE's NOOP action id, legal in every game.

RESIZE_INTERPOLATIONS = {
    # INTER_AREA averages every source pixel (no aliasing) and is the DeepMind-style default;
    # INTER_LINEAR samples 4 pixels per output pixel and is ~7x faster on a 210x160 frame
    # (48 vs 6.4 us here), the "faster resize" of source 003's tweaked wrappers.
    "area": cv2.INTER_AREA,
    "linear": cv2.INTER_LINEAR,
    "nearest": cv2.INTER_NEAREST,
}


class AtariEnv:
    """One ALE game with all preprocessing built in; implements :class:`SingleEnv`.

    Observations are ``uint8`` arrays of shape ``(frame_stack, dim, dim)`` (grayscale) or
    ``(3 * frame_stack, dim, dim)`` (RGB, channels of one frame adjacent), oldest frame first.
    The returned array is an internal buffer that the next ``step``/``reset`` overwrites.

    Semantics worth knowing:

    * Sticky actions are drawn here, per emulator frame, from the env's own seeded
      ``np.random.Generator`` (ALE's own sticky actions are switched off): ALE keeps the
      previously executed action outside its serialisable state, so with ALE-side sticky
      actions a restored snapshot would not continue identically.
    * Under episodic life a lost life returns ``terminated=True`` while the game goes on; the
      following :meth:`reset` is a soft reset (one no-op step, then FIRE if the game needs
      it) and the true return and length keep accumulating until the real game over.
    * The true game return includes rewards collected during reset no-ops / FIRE presses
      (the score of the game); the true length counts agent steps only.
    * ``max_episode_steps`` counts agent steps of the true game, across lives.
    * With ``frameskip == 1`` there is only one frame per step, so ``max_pool`` has no effect.
    """

    def __init__(self, cfg: EnvConfig, dim: int, seed: int, training: bool = True) -> None:
        """Build the emulator for ``cfg.id``.

        ``dim`` is the output frame size (``cfg.dim`` may be unset, the model decides);
        ``training=False`` turns episodic life and reward clipping off, for evaluation.
        """
        self.env_id = cfg.id
        self._env = gymnasium.make(
            cfg.id,
            frameskip=1,
            # Sticky actions are implemented in _advance(), see the class docstring.
            repeat_action_probability=0.0,
            full_action_space=cfg.full_action_space,
            # The step limit is applied here in agent steps; ALE's frame limit would end
            # games behind our back.
            max_num_frames_per_episode=None,
            disable_env_checker=True,
        )
        self._ale = self._env.unwrapped.ale
        ale = self._ale
        action_set = ale.getLegalActionSet() if cfg.full_action_space else ale.getMinimalActionSet()
        self._actions: list[int] = [a.value for a in action_set]
        self.action_meanings: list[str] = [a.name for a in action_set]
        """Names of the agent's actions (NOOP, FIRE, ...), in action-index order."""

        self._frameskip = cfg.frameskip
        self._frameskip_max = cfg.frameskip_max or cfg.frameskip
        self._pool = cfg.max_pool and cfg.frameskip >= 2
        self._pool_frames = cfg.max_pool_frames if self._pool else 1
        self._mark_parity = cfg.mark_frame_parity
        # lagging: as any until the run steers it (start_on)
        self._start_parity = {"any": None, "even": 0, "odd": 1, "lagging": None}[cfg.start_parity]
        self._start_parity_share = 1.0
        self._sticky = float(cfg.repeat_action_probability)
        self._noop_max = cfg.noop_max
        self._episodic_life = cfg.episodic_life and training
        self._clip = cfg.clip_rewards and training
        self._max_steps = cfg.max_episode_steps
        self._fire_actions: tuple[int, ...] = ()
        if cfg.fire_reset and "FIRE" in self.action_meanings:
            fire = self._actions[self.action_meanings.index("FIRE")]
            # DeepMind-style: FIRE launches the game, a second action makes sure games that
            # wait for the button release start too.
            self._fire_actions = (fire, self._actions[2]) if len(self._actions) > 2 else (fire,)

        height, width = ale.getScreenDims()
        channels = 1 if cfg.grayscale else 3
        raw_shape = (height, width) if cfg.grayscale else (height, width, 3)
        self._grab = ale.getScreenGrayscale if cfg.grayscale else ale.getScreenRGB
        self._raw_prev = np.zeros(raw_shape, dtype=np.uint8)
        self._raw_more = np.zeros(raw_shape, dtype=np.uint8)  # a third frame or more to pool
        self._raw_last = np.zeros(raw_shape, dtype=np.uint8)
        self._resized = None if cfg.grayscale else np.zeros((dim, dim, 3), dtype=np.uint8)
        self._dsize = (dim, dim)
        self._interpolation = RESIZE_INTERPOLATIONS[cfg.resize_interpolation]
        self._stack = np.zeros((cfg.frame_stack * channels, dim, dim), dtype=np.uint8)
        # Same memory seen as (frame, channel, H, W) so shifting works for gray and RGB alike.
        self._frames = self._stack.reshape(cfg.frame_stack, channels, dim, dim)

        self.observation_space = gymnasium.spaces.Box(0, 255, self._stack.shape, np.uint8)
        self.action_space = gymnasium.spaces.Discrete(len(self._actions))

        self._rng = np.random.default_rng(seed)
        self._last_action = _NOOP
        self._lives = 0
        self._game_return = 0.0
        self._game_length = 0
        self._needs_reset = True
        self._game_over = True

    # ------------------------------------------------------------------ SingleEnv API

    def reset(self, seed: int | None = None) -> np.ndarray:
        """Start the next training episode: a soft reset after a lost life, else a new game.

        A ``reset`` in the middle of a game abandons it without reporting its return.
        """
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        if seed is None and self._needs_reset and not self._game_over:
            self._soft_reset()
        else:
            self._hard_reset()
        self._needs_reset = False
        self._game_over = False
        return self._stack

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, GameEnd | None]:
        """Repeat ``action`` for ``frameskip`` frames; see :class:`SingleEnv` for the result."""
        if self._needs_reset:
            raise RuntimeError("AtariEnv.step() called before reset() / after the episode ended")
        reward = self._advance(self._actions[action])
        self._frames[:-1] = self._frames[1:]
        self._write_frame()
        self._game_return += reward
        self._game_length += 1

        ale = self._ale
        game_over = ale.game_over()
        lives = ale.lives()
        life_lost = lives < self._lives
        self._lives = lives
        terminated = game_over or (self._episodic_life and life_lost)
        truncated = (
            not game_over and self._max_steps is not None and self._game_length >= self._max_steps
        )
        game_end: GameEnd | None = None
        if game_over or truncated:
            game_end = (float(self._game_return), self._game_length)
            self._game_over = True
        if terminated or truncated:
            self._needs_reset = True
        if self._clip:
            reward = (reward > 0) - (reward < 0)
        return self._stack, float(reward), terminated, truncated, game_end

    def get_state(self) -> EnvState:
        """Exact snapshot: emulator (with its RNG), frame stack, counters, flags, our RNG."""
        ale_state = self._ale.cloneState(include_rng=True).serialize()
        return {
            "kind": _KIND,
            "env_id": self.env_id,
            "ale": np.frombuffer(ale_state, dtype=np.uint8).copy(),
            "obs": self._stack.copy(),
            "lives": int(self._lives),
            "last_action": int(self._last_action),
            "game_return": float(self._game_return),
            "game_length": int(self._game_length),
            "needs_reset": bool(self._needs_reset),
            "game_over": bool(self._game_over),
            "rng": rng_state(self._rng),
        }

    def set_state(self, state: EnvState) -> None:
        """Restore a :meth:`get_state` snapshot taken from an env with the same config."""
        check_state_kind(state, _KIND, self.env_id)
        obs = np.asarray(state["obs"])
        if obs.shape != self._stack.shape or obs.dtype != self._stack.dtype:
            raise ValueError(
                f"env state observation is {obs.dtype}{list(obs.shape)}, this env produces "
                f"{self._stack.dtype}{list(self._stack.shape)} (different dim/frame_stack/color?)"
            )
        ale_bytes = np.ascontiguousarray(state["ale"], dtype=np.uint8).tobytes()
        self._ale.restoreState(ale_py.ALEState(ale_bytes))
        self._stack[...] = obs
        self._lives = int(state["lives"])
        self._last_action = int(state["last_action"])
        self._game_return = float(state["game_return"])
        self._game_length = int(state["game_length"])
        self._needs_reset = bool(state["needs_reset"])
        self._game_over = bool(state["game_over"])
        self._rng = restore_rng(state["rng"])

    def close(self) -> None:
        """Release the emulator."""
        self._env.close()

    def ram(self) -> np.ndarray:
        """The console's 128 bytes of RAM now: a game's state (positions, scores, rooms) for
        analyses that need more than the screen."""
        return self._ale.getRAM()

    def start_on(self, parity: int | None, share: float = 1.0) -> None:
        """Start the next games on frame parity ``parity`` (0 even, 1 odd), or on the one the
        random no-ops give (None): ``env.start_parity=lagging``'s steering. With ``share``
        below 1 a game starts on it with that probability (the others as the no-ops fall,
        half of them on it too: ``share`` 0.5 steers nothing)."""
        self._start_parity = parity
        self._start_parity_share = share

    def frame_number(self) -> int:
        """Emulator frames since the current game's console reset (no-ops and FIRE included):
        its parity is the phase at which this game's agent steps meet the console's frames."""
        return int(self._ale.getEpisodeFrameNumber())

    def screen_rgb(self) -> np.ndarray:
        """The current full-size RGB screen (H, W, 3) uint8, as a player sees it (for videos)."""
        return self._ale.getScreenRGB()

    # ------------------------------------------------------------------ internals

    def _advance(self, ale_action: int) -> int:
        """Emulate one agent step and leave its (max-pooled) screen in ``_raw_last``."""
        act = self._ale.act
        k = self._frameskip
        if self._frameskip_max > k:  # Pong-v0's random skip, from the snapshotted generator
            k = int(self._rng.integers(k, self._frameskip_max + 1))
        # The frames before the last that the max takes in (none without pooling).
        pool_from = k - self._pool_frames
        reward = 0
        if self._sticky > 0.0:
            # One vectorised draw per step instead of one Python-level draw per frame.
            keep_previous = (self._rng.random(k) < self._sticky).tolist()
            current = self._last_action
            for i in range(k):
                if not keep_previous[i]:
                    current = ale_action
                reward += act(current)
                if pool_from <= i < k - 1:
                    self._pool_frame(i == pool_from)
            self._last_action = current
        else:
            # ALE refuses to emulate past game over, so no per-frame terminal check is needed.
            for i in range(k):
                reward += act(ale_action)
                if pool_from <= i < k - 1:
                    self._pool_frame(i == pool_from)
            self._last_action = ale_action
        self._grab(self._raw_last)
        if self._pool:
            np.maximum(self._raw_prev, self._raw_last, out=self._raw_last)
        return reward

    def _pool_frame(self, first: bool) -> None:
        """Take the screen into ``_raw_prev``, the max of the skip's frames before its last."""
        if first:
            self._grab(self._raw_prev)
        else:
            self._grab(self._raw_more)
            np.maximum(self._raw_prev, self._raw_more, out=self._raw_prev)

    def _write_frame(self) -> None:
        """Resize ``_raw_last`` into the newest slot of the frame stack (once per step)."""
        if self._resized is None:
            cv2.resize(
                self._raw_last,
                self._dsize,
                dst=self._frames[-1, 0],
                interpolation=self._interpolation,
            )
        else:
            cv2.resize(
                self._raw_last, self._dsize, dst=self._resized, interpolation=self._interpolation
            )
            self._frames[-1] = self._resized.transpose(2, 0, 1)
        if self._mark_parity:
            paint_frame_parity(self._frames[-1], self.frame_number())

    def _fill_stack(self) -> None:
        """Fill every slot of the stack with the current frame (start of an episode)."""
        self._write_frame()
        self._frames[:-1] = self._frames[-1]

    def _press_fire(self) -> bool:
        """Press FIRE (and the follow-up action) in games that need it; False on game over."""
        for ale_action in self._fire_actions:
            self._game_return += self._advance(ale_action)
            if self._ale.game_over():
                return False
        return True

    def _hard_reset(self) -> None:
        """Start a new game: console reset, random no-ops, FIRE."""
        ale = self._ale
        parity = self._start_parity
        share = self._start_parity_share
        # Drawn only for a share below 1, so runs on one parity keep their no-op draws.
        if parity is not None and share < 1.0 and self._rng.random() >= 2.0 * share - 1.0:
            parity = None
        # A game that ends during its own start sequence (never seen in practice) is restarted.
        for _ in range(100):
            ale.reset_game()
            self._last_action = _NOOP
            self._game_return = 0.0
            self._game_length = 0
            if self._noop_max > 0:
                for _ in range(int(self._rng.integers(1, self._noop_max + 1))):
                    self._game_return += ale.act(_NOOP)
                if ale.game_over():
                    continue
            # FIRE's steps add an even number of frames at the even frameskip this needs.
            if parity is not None and self.frame_number() % 2 != parity:
                self._game_return += ale.act(_NOOP)
            if self._press_fire():
                break
        if not self._fire_actions:
            self._grab(self._raw_last)
        self._lives = ale.lives()
        self._fill_stack()

    def _soft_reset(self) -> None:
        """Continue the game after a lost life (episodic life): one no-op step, then FIRE."""
        self._game_return += self._advance(_NOOP)
        # Losing the last life raises game over, which takes the hard path, so the game cannot
        # end here; if a ROM still manages it, a new game starts and the old one goes unreported.
        if self._ale.game_over() or not self._press_fire():
            self._hard_reset()
            return
        self._lives = self._ale.lives()
        self._fill_stack()
