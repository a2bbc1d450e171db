"""Atari vector envs on EnvPool (C++ thread pool of ALE emulators with built-in preprocessing).

Two classes:

* :class:`EnvPoolVectorEnv` — synchronous (``batch_size == num_envs``) with exactly the
  interface and autoreset contract of :class:`~rlperf.envs.vector.SyncVectorEnv`.
* :class:`EnvPoolAsync` — EnvPool's asynchronous ``send``/``recv`` (``batch_size <
  num_envs``) for runners that overlap acting with emulation.

**Autoreset.** EnvPool resets an env on the call *after* the one that reported it done (the
action sent then is ignored and the reply is the first observation of the next episode).
rlperf's runners expect SAME-STEP autoreset (the step that ends an episode reports
``done=True`` together with the next episode's first observation), so both classes send the
finished envs straight back to EnvPool (with a dummy action) and merge the reset reply into
the finishing transition. Since EnvPool replies with the final observation on the done step,
``final_obs`` of truncations comes for free. The extra round trip costs only on steps where an
env finished.

**Episodic life.** EnvPool's own ``episodic_life`` is used: a lost life ends the training
episode and the next reset is a *soft* one (random no-ops and FIRE, same game); the game's
step counter and the true return carry on. True game returns are summed here from
``info["reward"]`` (EnvPool's unclipped per-step reward); a true game ends when
``info["terminated"]`` (ALE's game over) is set or the step limit hits.

Knob mapping and semantic differences from :class:`~rlperf.envs.atari.AtariEnv` are tabulated
in ``docs/engines.md``. Importing this module requires ``envpool`` (an optional dependency:
``pip install 'rlperf[envpool]'``).

Long because both classes share the autoreset and observation handling that makes EnvPool
interchangeable with the other engines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import gymnasium
import numpy as np

from rlperf.config.schema import EnvConfig
from rlperf.core.errors import ConfigError
from rlperf.envs.ale_vector import (
    GameTracker,
    atari_observation_space,
    atari_rom_name,
    camel_game_name,
    default_num_threads,
    no_snapshots,
)
from rlperf.envs.base import EnvState, EpisodeEnd
from rlperf.envs.envpool_options import envpool_options
from rlperf.envs.vector import VecStep

try:
    import envpool
except ImportError as exc:  # an optional dependency; the config checks refuse it first
    raise ImportError(
        "the EnvPool engine needs envpool (tested with 1.2.5): pip install 'rlperf[envpool]'"
    ) from exc

_ENGINE = "EnvPool"


def envpool_task_id(env_id: str) -> str:
    """EnvPool's id (``Pong-v5``) for a gymnasium Atari id (``ALE/Pong-v5``,
    ``PongNoFrameskip-v4``); the version does not matter since every knob is set explicitly."""
    task = camel_game_name(atari_rom_name(env_id)) + "-v5"
    if task not in envpool.list_all_envs():
        raise ConfigError(f"EnvPool has no Atari game for {env_id!r} (looked for {task!r})")
    return task


class _EnvPoolBase:
    """Pool construction, reseeding and the per-row bookkeeping shared by both classes."""

    def __init__(
        self,
        cfg: EnvConfig,
        dim: int,
        seed: int,
        batch_size: int,
        num_threads: int | None,
        training: bool,
    ) -> None:
        self.env_id = cfg.id
        self.num_envs = cfg.num_envs
        self.batch_size = batch_size
        self._task = envpool_task_id(cfg.id)
        self._options = envpool_options(cfg, dim, training)
        self.num_threads = num_threads or cfg.num_threads or default_num_threads(batch_size)
        """The pool's worker threads."""
        self._episodic = bool(self._options["episodic_life"])
        self._max_steps = int(self._options["max_episode_steps"])
        self._pool: Any = None
        self._seed = seed
        self._build(seed)
        self.single_observation_space = atari_observation_space(cfg, dim)
        self.single_action_space = gymnasium.spaces.Discrete(int(self._pool.action_space.n))
        self._ids = np.arange(self.num_envs, dtype=np.int32)
        self._lives = np.zeros(self.num_envs, dtype=np.int64)
        self._games = GameTracker(self.num_envs)

    def _build(self, seed: int) -> None:
        """(Re)create the pool with env ``i`` seeded ``seed + i``: EnvPool fixes seeds at
        construction (its ``reset(seed=...)`` is ignored), so reseeding means rebuilding."""
        if self._pool is not None:
            self._pool.close()
        self._pool = envpool.make(
            self._task,
            env_type="gymnasium",
            num_envs=self.num_envs,
            batch_size=self.batch_size,
            num_threads=self.num_threads,
            env_seed=[int(seed) + i for i in range(self.num_envs)],
            **self._options,
        )
        self._seed = seed
        self._fresh = True  # no env of this pool has been reset or stepped yet

    def _reseed(self, seed: int) -> None:
        """Make the next reset start every env's random streams from ``seed + i``."""
        if not self._fresh or seed != self._seed:
            self._build(seed)
        self._fresh = False
        self._games.restart()

    def _classify(
        self,
        ids: np.ndarray,
        term: np.ndarray,
        trunc: np.ndarray,
        info: dict[str, Any],
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """rlperf's flags for rows that are real steps of envs ``ids``.

        Returns ``(done, terminations, truncations, game_end)``, one entry per row, and
        counts the step in the true games.
        """
        self._games.add(info["reward"], ids)
        lives = info["lives"]
        game_over = info["terminated"].astype(bool)
        done = term | trunc
        # EnvPool's trunc is set at the step limit even on a game over there; rlperf calls
        # that terminated (truncated means "did not really end").
        limit = done & ~game_over & (info["elapsed_step"] >= self._max_steps)
        life_lost = (lives > 0) & (lives < self._lives[ids]) if self._episodic else False
        terminations = done & (game_over | life_lost | ~limit)
        self._lives[ids] = lives
        return done, terminations, limit, game_over | limit

    def _after_reset(
        self, ids: np.ndarray, info: dict[str, Any], game_ended: np.ndarray
    ) -> list[EpisodeEnd]:
        """Bookkeeping for reset replies of envs ``ids``; returns games that ended unseen.

        A soft reset (after a lost life) plays random no-ops, and if the last life is lost
        there EnvPool silently starts a new game (lives go back up): report the old one.
        """
        lives = info["lives"]
        restarted = ~game_ended & (lives > self._lives[ids])
        self._lives[ids] = lives
        return self._games.finish(ids[restarted]) if restarted.any() else []

    def get_state(self) -> list[EnvState]:
        """Not supported: EnvPool cannot snapshot its envs."""
        raise no_snapshots(_ENGINE)

    def set_state(self, states: Sequence[EnvState]) -> np.ndarray:
        """Not supported: EnvPool cannot restore its envs."""
        raise no_snapshots(_ENGINE)

    def close(self) -> None:
        """Stop the worker threads (idempotent)."""
        if self._pool is not None:
            self._pool.close()
            # EnvPool joins its C++ threads when the pool object is destroyed.
            self._pool = None


class EnvPoolVectorEnv(_EnvPoolBase):
    """``cfg.num_envs`` Atari envs stepped by EnvPool synchronously; a drop-in replacement of
    :class:`~rlperf.envs.vector.SyncVectorEnv` (same-step autoreset, ``final_obs`` for
    truncations, :class:`EpisodeEnd` per TRUE game with its unclipped return).

    ``reset(seed)`` seeds env ``i`` with ``seed + i`` and replays identical trajectories for
    identical seeds and actions (the pool is rebuilt when needed, see :meth:`reset`).
    Snapshots raise :class:`NotImplementedError`. Observations are written into one buffer of
    this object, valid until the next :meth:`reset`/:meth:`step`.
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
        """Build the pool for ``cfg.id`` with env ``i`` seeded ``seed + i``.

        ``num_threads``: EnvPool worker threads (default ``env.num_threads``, else one per
        usable core, at most ``num_envs``); ``training=False`` turns episodic life and reward clipping off.
        """
        super().__init__(cfg, dim, seed, cfg.num_envs, num_threads, training)
        shape = self.single_observation_space.shape
        self._obs = np.zeros((self.num_envs, *shape), dtype=np.uint8)

    def reset(self, seed: int) -> np.ndarray:
        """Start a new game in every env, env ``i`` seeded ``seed + i``.

        The pool built by the constructor is used as is for the first reset with the
        constructor's seed; any other reset rebuilds it (EnvPool cannot reseed in place).
        """
        self._reseed(seed)
        obs, info = self._pool.reset()
        ids = info["env_id"]
        self._obs[ids] = obs
        self._lives[ids] = info["lives"]
        return self._obs

    def step(self, actions: np.ndarray) -> VecStep:
        """Apply ``actions[i]`` to env ``i``; finished envs autoreset in the same step."""
        n = self.num_envs
        pool = self._pool
        pool.send(np.asarray(actions, dtype=np.int32).reshape(n), self._ids)
        obs, rew, term, trunc, info = pool.recv()
        ids = info["env_id"]
        self._obs[ids] = obs
        done_rows, term_rows, trunc_rows, end_rows = self._classify(ids, term, trunc, info)
        rewards = np.empty(n, dtype=np.float32)
        rewards[ids] = rew
        terminations = np.empty(n, dtype=bool)
        terminations[ids] = term_rows
        truncations = np.empty(n, dtype=bool)
        truncations[ids] = trunc_rows
        episodes: list[EpisodeEnd] = []
        final_obs: dict[int, np.ndarray] = {}
        if end_rows.any():
            episodes = self._games.finish(ids[end_rows])
        if done_rows.any():
            for row in np.flatnonzero(trunc_rows & ~term_rows).tolist():
                final_obs[int(ids[row])] = obs[row].copy()
            done_ids = ids[done_rows].astype(np.int32)
            game_ended = end_rows[done_rows]
            # EnvPool resets a done env on its next send (the action is ignored): do it now.
            pool.send(np.zeros(len(done_ids), dtype=np.int32), done_ids)
            reset_obs, _, _, _, reset_info = pool.recv()
            reset_ids = reset_info["env_id"]
            self._obs[reset_ids] = reset_obs
            by_id = dict(zip(done_ids.tolist(), game_ended.tolist(), strict=True))
            ended = np.array([by_id[i] for i in reset_ids.tolist()], dtype=bool)
            episodes += self._after_reset(reset_ids, reset_info, ended)
        return VecStep(self._obs, rewards, terminations, truncations, episodes, final_obs)


@dataclass
class AsyncStep:
    """One :meth:`EnvPoolAsync.recv` result: a transition per returned env (``k`` rows)."""

    obs: np.ndarray
    """uint8 (k, *obs_shape): next observation; for an env whose episode ended, the first
    observation of its next episode (same-step autoreset, as :class:`VecStep`)."""
    rewards: np.ndarray
    """float32 (k,) training rewards (clipped if configured); 0 on a row that only carries
    the first observation after :meth:`EnvPoolAsync.reset`."""
    terminations: np.ndarray
    """bool (k,) training episode terminated (a lost life counts under episodic life)."""
    truncations: np.ndarray
    """bool (k,) episode cut by the step limit."""
    env_ids: np.ndarray
    """int32 (k,) which env each row belongs to; send their next actions with these ids."""
    episodes: list[EpisodeEnd] = field(default_factory=list)
    """True games that ended, ``env_index`` being the env id."""
    final_obs: dict[int, np.ndarray] = field(default_factory=dict)
    """Final observation of each env truncated (not terminated) in this batch, by env id."""


class EnvPoolAsync(_EnvPoolBase):
    """EnvPool's asynchronous mode: ``num_envs`` envs, replies in batches of whichever envs
    finish first, so a runner can compute actions for one batch while others emulate.

    Protocol::

        pool.reset(seed)                 # every env starts a game
        while ...:
            step = pool.recv()           # rows for up to batch_size envs (at least one)
            pool.send(actions_for(step.obs), step.env_ids)

    Every env returned by :meth:`recv` must be sent an action before the following
    :meth:`recv` (otherwise fewer than ``batch_size`` envs may remain in flight and EnvPool
    waits forever). The first reply of each env after :meth:`reset` carries only its first
    observation (reward 0, no flags).

    Autoreset is same-step, as in :class:`EnvPoolVectorEnv`: a finished env is sent back at
    once with a dummy action and its row is held until EnvPool returns the new episode's first
    observation, so a :meth:`recv` may return fewer than ``batch_size`` rows. Episodic life,
    true returns, seeding and the knob mapping are those of :class:`EnvPoolVectorEnv`.
    """

    def __init__(
        self,
        cfg: EnvConfig,
        dim: int,
        seed: int,
        *,
        batch_size: int,
        num_threads: int | None = None,
        training: bool = True,
    ) -> None:
        """Build the pool; ``1 <= batch_size < cfg.num_envs`` (equal would be sync mode: use
        :class:`EnvPoolVectorEnv`). Other arguments as :class:`EnvPoolVectorEnv`."""
        if not 1 <= batch_size < cfg.num_envs:
            raise ConfigError(
                f"EnvPoolAsync needs 1 <= batch_size < num_envs, got batch_size={batch_size}, "
                f"num_envs={cfg.num_envs} (batch_size == num_envs: use EnvPoolVectorEnv)"
            )
        super().__init__(cfg, dim, seed, batch_size, num_threads, training)
        # Envs whose next reply is a reset (a first observation), and the finishing
        # transition each of them still owes the caller.
        self._awaiting_first = np.zeros(self.num_envs, dtype=bool)
        self._held: dict[int, _Held] = {}

    def reset(self, seed: int) -> None:
        """Start a new game in every env (env ``i`` seeded ``seed + i``); collect the first
        observations with :meth:`recv`."""
        self._reseed(seed)
        self._held.clear()
        self._awaiting_first[:] = True
        self._pool.async_reset()

    def send(self, actions: np.ndarray, env_ids: np.ndarray) -> None:
        """Queue ``actions[j]`` for env ``env_ids[j]`` (the ids a :meth:`recv` returned)."""
        self._pool.send(
            np.asarray(actions, dtype=np.int32).reshape(-1),
            np.asarray(env_ids, dtype=np.int32).reshape(-1),
        )

    def recv(self) -> AsyncStep:
        """Wait for the next batch and return its transitions (1 to ``batch_size`` rows)."""
        while True:
            obs, rew, term, trunc, info = self._pool.recv()
            ids = info["env_id"].astype(np.int32)
            n_rows = len(ids)
            first = self._awaiting_first[ids]
            rewards = np.where(first, 0.0, rew).astype(np.float32)
            terminations = np.zeros(n_rows, dtype=bool)
            truncations = np.zeros(n_rows, dtype=bool)
            emit = np.ones(n_rows, dtype=bool)
            episodes: list[EpisodeEnd] = []
            final_obs: dict[int, np.ndarray] = {}

            if not first.all():
                rows = np.flatnonzero(~first)
                row_info = {k: v[rows] for k, v in info.items() if isinstance(v, np.ndarray)}
                done, terms, truncs, ends = self._classify(
                    ids[rows], term[rows], trunc[rows], row_info
                )
                terminations[rows] = terms
                truncations[rows] = truncs
                if done.any():
                    finished = self._games.finish(ids[rows[ends]]) if ends.any() else []
                    by_env = {end.env_index: end for end in finished}
                    for row in rows[done].tolist():
                        env = int(ids[row])
                        truncated_only = truncations[row] and not terminations[row]
                        self._held[env] = _Held(
                            float(rewards[row]),
                            bool(terminations[row]),
                            bool(truncations[row]),
                            obs[row].copy() if truncated_only else None,
                            by_env.get(env),
                        )
                        emit[row] = False
                    back = ids[rows[done]]
                    self._awaiting_first[back] = True
                    # EnvPool resets a done env on its next send; the action is ignored.
                    self._pool.send(np.zeros(len(back), dtype=np.int32), back)

            if first.any():
                rows = np.flatnonzero(first)
                # Rows answering reset() have no transition: nothing to check for them.
                game_ended = np.ones(len(rows), dtype=bool)
                for j, row in enumerate(rows.tolist()):
                    env = int(ids[row])
                    held = self._held.pop(env, None)
                    if held is None:
                        continue
                    rewards[row] = held.reward
                    terminations[row] = held.terminated
                    truncations[row] = held.truncated
                    game_ended[j] = held.episode is not None
                    if held.final_obs is not None:
                        final_obs[env] = held.final_obs
                    if held.episode is not None:
                        episodes.append(held.episode)
                episodes += self._after_reset(ids[rows], {"lives": info["lives"][rows]}, game_ended)
                self._awaiting_first[ids[rows]] = False

            if emit.any():
                return AsyncStep(
                    obs[emit],
                    rewards[emit],
                    terminations[emit],
                    truncations[emit],
                    ids[emit],
                    episodes,
                    final_obs,
                )


class _Held(NamedTuple):
    """The transition of an async env that finished, waiting for its reset reply."""

    reward: float
    terminated: bool
    truncated: bool
    final_obs: np.ndarray | None
    episode: EpisodeEnd | None
