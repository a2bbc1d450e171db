"""Atari vector env on ALE's own C++ vectorizer (``ale_py.vector_env.AtariVectorEnv``).

:class:`AleVectorEnv` has exactly the interface of :class:`~rlperf.envs.vector.SyncVectorEnv`
(``num_envs``, spaces, ``reset``, ``step`` -> :class:`~rlperf.envs.vector.VecStep`,
``get_state``/``set_state``, ``close``), so runners can swap it in. Emulation, frame skip,
max-pool, resize and frame stack run in C++ worker threads; Python only does per-step
bookkeeping on ``(N,)`` arrays.

The mapping of every :class:`~rlperf.config.schema.EnvConfig` knob, and where ALE's
semantics differ from :class:`~rlperf.envs.atari.AtariEnv`, is tabulated in
``docs/engines.md``. The essentials:

* ALE's own ``episodic_life`` would *restart the game* at each lost life, so it stays off;
  rlperf's episodic life is ``life_loss_info``: a lost life reports ``terminated=True`` while
  the game simply goes on (no soft reset: no no-op step, no FIRE press, no stack refill).
* ALE's reward clipping is off and rewards are clipped here, because ALE reports no unclipped
  reward and the true game return must be unclipped.
* Autoreset is ALE's ``SameStep`` mode, which is exactly rlperf's contract: the observation
  of a finished env is the first of its next game and ``info["final_obs"]`` holds the last.
* ALE's step limit counts emulator frames, so ``max_episode_steps * frameskip`` is passed.

This module also holds the helpers shared with :mod:`rlperf.envs.envpool_env` (game name
resolution, knob validation, true-game bookkeeping).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

import gymnasium
import numpy as np

from rlperf.config.schema import EnvConfig
from rlperf.core.errors import ConfigError
from rlperf.envs.base import EnvState, EpisodeEnd, paint_frame_parity
from rlperf.envs.vector import VecStep

NO_STEP_LIMIT = 1 << 30
"""Stand-in for "no limit" in the C++ engines, which take an ``int`` limit and compute
``limit + 1`` internally (so ``INT_MAX`` would overflow)."""


# ---------------------------------------------------------------------------- shared helpers


def atari_rom_name(env_id: str) -> str:
    """The ALE ROM name (snake_case, e.g. ``ms_pacman``) of a gymnasium Atari id.

    Accepts ``ALE/MsPacman-v5``, ``MsPacmanNoFrameskip-v4`` and the like. The gymnasium
    registry (filled by ``ale_py``) is asked first; without ``ale_py`` the name is parsed.
    """
    try:
        import ale_py

        gymnasium.register_envs(ale_py)
        spec = gymnasium.registry.get(env_id.split(":", 1)[-1])
        if spec is not None and isinstance(spec.kwargs.get("game"), str):
            return spec.kwargs["game"]
    except ImportError:
        pass
    name = env_id.split(":", 1)[-1].rsplit("/", 1)[-1]
    name = re.sub(r"-v\d+$", "", name)
    name = re.sub(r"(NoFrameskip|Deterministic)$", "", name)
    if not name or not name[0].isalpha():
        raise ConfigError(f"cannot tell which Atari game {env_id!r} is")
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def camel_game_name(rom: str) -> str:
    """``ms_pacman`` -> ``MsPacman`` (the spelling of EnvPool's task ids)."""
    return "".join(part.capitalize() for part in rom.split("_"))


def default_num_threads(num_envs: int) -> int:
    """One worker thread per usable core, never more than there are envs."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(num_envs, cores))


def atari_observation_space(cfg: EnvConfig, dim: int) -> gymnasium.spaces.Box:
    """rlperf's Atari observation: uint8 ``(frame_stack * channels, dim, dim)``, channel-first,
    the channels of one frame adjacent, oldest frame first (as :class:`AtariEnv`)."""
    channels = 1 if cfg.grayscale else 3
    return gymnasium.spaces.Box(0, 255, (cfg.frame_stack * channels, dim, dim), np.uint8)


class GameTracker:
    """Unclipped return and agent-step length of the TRUE game each env is playing.

    The engines report per-step unclipped rewards but no game totals, and under episodic life
    a training episode is only part of a game, so the totals are kept here, vectorised.
    """

    def __init__(self, num_envs: int) -> None:
        """All counters at zero."""
        self.returns = np.zeros(num_envs, dtype=np.float64)
        self.lengths = np.zeros(num_envs, dtype=np.int64)

    def add(self, raw_rewards: np.ndarray, env_ids: np.ndarray | slice = slice(None)) -> None:
        """Count one agent step with these unclipped rewards for ``env_ids``."""
        self.returns[env_ids] += raw_rewards
        self.lengths[env_ids] += 1

    def restart(self, env_ids: np.ndarray | slice = slice(None)) -> None:
        """Zero the counters of ``env_ids`` (a new game starts without a report)."""
        self.returns[env_ids] = 0.0
        self.lengths[env_ids] = 0

    def finish(
        self, env_ids: Sequence[int] | np.ndarray, frame_parity: np.ndarray | None = None
    ) -> list[EpisodeEnd]:
        """Report the games of ``env_ids`` as ended and restart their counters;
        ``frame_parity`` holds every env's game parity where the engine knows it."""
        ends = [
            EpisodeEnd(
                int(i),
                float(self.returns[i]),
                int(self.lengths[i]),
                frame_parity=None if frame_parity is None else int(frame_parity[i]),
            )
            for i in env_ids
        ]
        self.returns[env_ids] = 0.0
        self.lengths[env_ids] = 0
        return ends


def no_snapshots(engine: str) -> NotImplementedError:
    """The error both C++ engines raise for ``get_state``/``set_state``."""
    return NotImplementedError(
        f"{engine} cannot snapshot or restore its emulators (their state lives in C++ worker "
        "threads with no serialisation API); use the 'sync' engine (SyncVectorEnv of "
        "AtariEnv) for exact checkpoints of env state"
    )


# ---------------------------------------------------------------------------- the vector env


class AleVectorEnv:
    """``cfg.num_envs`` copies of an Atari game stepped by ALE's C++ vectorizer, synchronously.

    Same interface and autoreset contract as :class:`~rlperf.envs.vector.SyncVectorEnv`:
    same-step autoreset, ``final_obs`` for truncations, :class:`EpisodeEnd` for TRUE game ends
    with the unclipped return and the length in agent steps. ``reset(seed)`` seeds env ``i``
    with ``seed + i`` (ALE reloads the ROM with that seed, so a reset with the same seed
    replays the same trajectories). Snapshots are not supported.

    The observation array returned by :meth:`reset`/:meth:`step` is fresh from ALE each call
    for grayscale frames (no copy), and a buffer of this object for RGB (ALE stacks RGB frames
    channel-last, so they are transposed into rlperf's channel-first layout).
    """

    def __init__(
        self,
        cfg: EnvConfig,
        dim: int,
        seed: int,
        *,
        num_threads: int | None = None,
        training: bool = True,
    ) -> None:
        """Build the vectorizer for ``cfg.id``.

        ``dim`` is the frame size; ``seed`` is accepted for parity with the other engines but
        unused, because ALE seeds its envs at :meth:`reset` (which takes one); ``num_threads`` the
        C++ worker threads (default: ``env.num_threads``, else one per usable core, at most
        ``num_envs``), and
        ``training=False`` turns episodic life and reward clipping off (evaluation).
        """
        try:
            from ale_py.vector_env import AtariVectorEnv
        except ImportError as exc:
            raise ImportError(
                "AleVectorEnv needs ale-py's vector env (ale-py >= 0.11; tested with 0.12.1): "
                "pip install -U 'ale-py>=0.12'"
            ) from exc

        self.env_id = cfg.id
        self.num_envs = cfg.num_envs
        self._frameskip = cfg.frameskip
        self._clip = cfg.clip_rewards and training
        self._max_steps = cfg.max_episode_steps if cfg.max_episode_steps else NO_STEP_LIMIT
        self._grayscale = cfg.grayscale
        self.num_threads = num_threads or cfg.num_threads or default_num_threads(cfg.num_envs)
        """The C++ worker threads."""
        self._env = AtariVectorEnv(
            game=atari_rom_name(cfg.id),
            num_envs=cfg.num_envs,
            batch_size=cfg.num_envs,
            num_threads=self.num_threads,
            img_height=dim,
            img_width=dim,
            grayscale=cfg.grayscale,
            stack_num=cfg.frame_stack,
            frameskip=cfg.frameskip,
            maxpool=cfg.max_pool,
            noop_max=cfg.noop_max,
            use_fire_reset=cfg.fire_reset,
            # ALE's episodic_life restarts the whole game at a lost life; life_loss_info only
            # flags it, which is rlperf's "training episode ends, the game goes on".
            episodic_life=False,
            life_loss_info=cfg.episodic_life and training,
            # Clipped here: ALE reports no unclipped reward to build true returns from.
            reward_clipping=False,
            repeat_action_probability=float(cfg.repeat_action_probability),
            full_action_space=cfg.full_action_space,
            # ALE's limit counts frames (elapsed_steps_ grows once per emulated frame).
            max_num_frames_per_episode=min(self._max_steps * cfg.frameskip, NO_STEP_LIMIT),
            autoreset_mode="SameStep",
        )
        self.single_observation_space = atari_observation_space(cfg, dim)
        self.single_action_space = gymnasium.spaces.Discrete(int(self._env.single_action_space.n))
        shape = self.single_observation_space.shape
        self._obs = np.zeros((self.num_envs, *shape), dtype=np.uint8)
        self._games = GameTracker(self.num_envs)
        self._lives = np.zeros(self.num_envs, dtype=np.int64)
        self._frame_numbers = np.zeros(self.num_envs, dtype=np.int64)
        self._mark_parity = cfg.mark_frame_parity
        self._order = np.arange(self.num_envs)
        self._closed = False

    # ------------------------------------------------------------------ vector API

    def reset(self, seed: int) -> np.ndarray:
        """Start a new game in every env, env ``i`` seeded with ``seed + i``."""
        obs, info = self._env.reset(seed=int(seed))
        self._games.restart()
        self._remember(info)
        return self._marked(self._to_rlperf(obs, info["env_id"]), self._frame_numbers)

    def step(self, actions: np.ndarray) -> VecStep:
        """Apply ``actions[i]`` to env ``i``; finished envs autoreset in the same step."""
        acts = np.asarray(actions, dtype=np.int32).reshape(self.num_envs)
        obs, raw, term, trunc, info = self._env.step(acts)
        env_ids = info["env_id"]
        if not np.array_equal(env_ids, self._order):
            # Sync mode returns envs in order; this keeps a surprise from corrupting rows.
            order = np.argsort(env_ids)
            obs, raw, term, trunc = obs[order], raw[order], term[order], trunc[order]
            info = {k: (v[order] if isinstance(v, np.ndarray) else v) for k, v in info.items()}
        raw = raw.astype(np.float32)
        self._games.add(raw)
        lives = info["lives"]
        frames = info["episode_frame_number"]
        # ALE resets an env (same step) on game over or at its frame limit; the info of a
        # reset env is already that of its new game. A game over is told from a lost life
        # (which does not reset) by the reset: the episode frame count restarts and lives
        # go back up, where a lost life leaves lives > 0 and below the previous count.
        limit = self._games.lengths >= self._max_steps
        life_lost = (lives > 0) & (lives < self._lives) & (frames > self._frame_numbers)
        game_end = limit | (term & ~life_lost)
        # ALE reports truncated only when not also terminated, as rlperf does for final_obs;
        # a life lost exactly at the limit therefore reads terminated only (see the docs).
        truncations = np.asarray(trunc, dtype=bool) & ~term
        terminations = np.asarray(term, dtype=bool)
        final_obs: dict[int, np.ndarray] = {}
        if truncations.any():
            last = info["final_obs"]
            for i in np.flatnonzero(truncations).tolist():
                # a game keeps its parity: the last step's frame number marks its final frame
                final_obs[i] = self._marked(self._frame_to_rlperf(last[i]), self._frame_numbers[i])
        episodes = (
            # the frames before this step are still the ended game's
            self._games.finish(np.flatnonzero(game_end), self._frame_numbers % 2)
            if game_end.any()
            else []
        )
        self._lives[:] = lives
        self._frame_numbers[:] = frames
        rewards = np.sign(raw) if self._clip else raw
        return VecStep(
            self._marked(self._to_rlperf(obs, None), frames),
            rewards.astype(np.float32, copy=False),
            terminations,
            truncations,
            episodes,
            final_obs,
            (frames % 2).astype(np.int8),
        )

    def get_state(self) -> list[EnvState]:
        """Not supported: ALE's vectorizer cannot snapshot its envs."""
        raise no_snapshots("AleVectorEnv (ALE's C++ vectorizer)")

    def set_state(self, states: Sequence[EnvState]) -> np.ndarray:
        """Not supported: ALE's vectorizer cannot restore its envs."""
        raise no_snapshots("AleVectorEnv (ALE's C++ vectorizer)")

    def close(self) -> None:
        """Stop the worker threads (idempotent)."""
        if not self._closed:
            self._closed = True
            self._env.close()
            # The C++ vectorizer joins its threads when the last reference goes.
            del self._env

    # ------------------------------------------------------------------ internals

    def _remember(self, info: dict[str, np.ndarray]) -> None:
        """Lives and episode frame counts after a full reset, in env order."""
        order = np.argsort(info["env_id"])
        self._lives[:] = info["lives"][order]
        self._frame_numbers[:] = info["episode_frame_number"][order]

    def _to_rlperf(self, obs: np.ndarray, env_ids: np.ndarray | None) -> np.ndarray:
        """Batch of ALE observations in env order and rlperf's layout."""
        if env_ids is not None and not np.array_equal(env_ids, self._order):
            obs = obs[np.argsort(env_ids)]
        if self._grayscale:
            return obs  # (N, stack, H, W) already; a fresh array from ALE each call
        n, stack, height, width, _ = obs.shape
        np.copyto(self._obs.reshape(n, stack, 3, height, width), obs.transpose(0, 1, 4, 2, 3))
        return self._obs

    def _marked(self, obs: np.ndarray, frame_numbers: np.ndarray | int) -> np.ndarray:
        """``obs`` with its frame parity painted in when ``env.mark_frame_parity`` is on."""
        if self._mark_parity:
            paint_frame_parity(obs, frame_numbers)
        return obs

    def _frame_to_rlperf(self, obs: np.ndarray) -> np.ndarray:
        """One env's ALE observation as an owned array in rlperf's layout."""
        if self._grayscale:
            return np.array(obs, copy=True)
        stack, height, width, _ = obs.shape
        return np.ascontiguousarray(obs.transpose(0, 3, 1, 2)).reshape(stack * 3, height, width)
