"""Synchronous, in-process vector of :class:`SingleEnv` — the interface the runners step.

Other vector envs (subprocess, EnvPool) are to implement the same small interface: ``num_envs``,
``single_observation_space``, ``single_action_space``, ``reset``, ``step``, ``get_state``,
``set_state`` and ``close``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import gymnasium
import numpy as np

from rlperf.core.errors import EnvError
from rlperf.envs.base import EnvState, EpisodeEnd, SingleEnv


@dataclass
class VecStep:
    """The result of one step of every env in a vector."""

    obs: np.ndarray
    """(N, *obs_shape) observations after the step; for an env whose episode ended, the first
    observation of its next episode (same-step autoreset). A buffer owned by the vector env."""
    rewards: np.ndarray
    """float32 (N,) training rewards (clipped if configured)."""
    terminations: np.ndarray
    """bool (N,) training episode terminated (a lost life counts under episodic life)."""
    truncations: np.ndarray
    """bool (N,) episode cut by a step limit."""
    episodes: list[EpisodeEnd]
    """True games that ended during this step, with their unclipped returns."""
    final_obs: dict[int, np.ndarray]
    """Final observation of each env truncated (not terminated) at this step, by env index:
    the episode did not really end there, so learners bootstrap from its value."""
    frame_parity: np.ndarray | None = None
    """int8 (N,) frame parity of the game each of ``obs`` belongs to (see
    :attr:`~rlperf.envs.base.EpisodeEnd.frame_parity`); None where the engine does not know."""


class VectorEnv(Protocol):
    """What runners step: :class:`SyncVectorEnv`, ``SubprocVectorEnv``, the C++ engines."""

    num_envs: int
    single_observation_space: gymnasium.spaces.Box
    single_action_space: gymnasium.spaces.Discrete

    def reset(self, seed: int) -> np.ndarray: ...

    def step(self, actions: np.ndarray) -> VecStep: ...

    def get_state(self) -> list[EnvState]: ...

    def set_state(self, states: Sequence[EnvState]) -> np.ndarray: ...

    def close(self) -> None: ...


class SyncVectorEnv:
    """Steps N envs one after the other in the calling process.

    Autoreset is SAME-STEP: when env ``i`` terminates or truncates, it is reset inside
    :meth:`step` and ``obs[i]`` is the first observation of its next (pseudo-)episode; the final
    observation of a terminated episode is discarded; that of a truncated one (a step limit,
    not a real end) is returned in :attr:`VecStep.final_obs` so learners can bootstrap from it.

    Observations are written into ONE preallocated ``(N, *obs_shape)`` array of the
    observation space's dtype (``uint8`` for Atari), returned by :meth:`reset`, :meth:`step`
    and :meth:`set_state`: it is valid until the next of these calls, so callers that keep
    observations must copy them (the rollout buffer does exactly that, once).
    """

    def __init__(self, envs: Sequence[SingleEnv]) -> None:
        """Take ownership of ``envs`` (all built from the same config)."""
        if not envs:
            raise ValueError("SyncVectorEnv needs at least one env")
        self.envs: list[SingleEnv] = list(envs)
        self.num_envs = len(self.envs)
        self.single_observation_space: gymnasium.spaces.Box = self.envs[0].observation_space
        self.single_action_space: gymnasium.spaces.Discrete = self.envs[0].action_space
        space = self.single_observation_space
        self._obs = np.zeros((self.num_envs, *space.shape), dtype=space.dtype)
        # Atari envs count their game's emulator frames; then each step reports the parities.
        self._frame_numbers = [getattr(env, "frame_number", None) for env in self.envs]
        self._parity: np.ndarray | None = (
            np.zeros(self.num_envs, dtype=np.int8) if None not in self._frame_numbers else None
        )

    def reset(self, seed: int) -> np.ndarray:
        """Reset every env, env ``i`` with ``seed + i``; returns the observation buffer."""
        for i, env in enumerate(self.envs):
            self._obs[i] = env.reset(seed=seed + i)
            self._note_parity(i)
        return self._obs

    def step(self, actions: np.ndarray) -> VecStep:
        """Apply ``actions[i]`` to env ``i``, autoresetting finished envs in the same step."""
        n = self.num_envs
        rewards = np.zeros(n, dtype=np.float32)
        terminations = np.zeros(n, dtype=bool)
        truncations = np.zeros(n, dtype=bool)
        episodes: list[EpisodeEnd] = []
        final_obs: dict[int, np.ndarray] = {}
        # Python ints index the envs' action tables faster than numpy scalars.
        action_list = np.asarray(actions).reshape(n).tolist()
        obs_buffer = self._obs
        i = 0
        try:
            for i, env in enumerate(self.envs):
                obs, reward, terminated, truncated, game_end = env.step(action_list[i])
                rewards[i] = reward
                if game_end is not None:
                    # As noted at its start: a game over can cut the last skip short.
                    parity = None if self._parity is None else int(self._parity[i])
                    episodes.append(EpisodeEnd(i, *game_end, frame_parity=parity))
                if terminated or truncated:
                    terminations[i] = terminated
                    truncations[i] = truncated
                    if truncated and not terminated:
                        final_obs[i] = obs.copy()  # env.step returns a buffer reset() overwrites
                    obs = env.reset()
                    self._note_parity(i)
                obs_buffer[i] = obs
        except Exception as exc:
            # The session stops on a WorkerError cleanly (checkpoint, one line); the
            # original exception stays chained for debugging.
            raise EnvError(f"env {i} raised {type(exc).__name__}: {exc}") from exc
        parity = None if self._parity is None else self._parity.copy()
        return VecStep(obs_buffer, rewards, terminations, truncations, episodes, final_obs, parity)

    def start_games_on(self, parity: int | None, share: float = 1.0) -> None:
        """Start ``share`` of every env's next games on frame parity ``parity`` (None: as the
        no-ops fall; see :meth:`~rlperf.envs.atari.AtariEnv.start_on`). Atari envs only."""
        for env in self.envs:
            env.start_on(parity, share)  # type: ignore[attr-defined]

    def _note_parity(self, i: int) -> None:
        """Record the frame parity of the game env ``i`` has just started (Atari envs)."""
        if self._parity is not None:
            self._parity[i] = self._frame_numbers[i]() % 2  # type: ignore[misc]

    def get_state(self) -> list[EnvState]:
        """Exact snapshots of every env, in order."""
        return [env.get_state() for env in self.envs]

    def set_state(self, states: Sequence[EnvState]) -> np.ndarray:
        """Restore every env; returns the observation buffer filled with their current obs."""
        if len(states) != self.num_envs:
            raise ValueError(f"got {len(states)} env states for {self.num_envs} envs")
        for i, (env, state) in enumerate(zip(self.envs, states, strict=True)):
            env.set_state(state)
            self._obs[i] = state["obs"]
            self._note_parity(i)  # mid-game the frame count keeps the game's parity
        return self._obs

    def close(self) -> None:
        """Close every env."""
        for env in self.envs:
            env.close()
