"""Types shared by every environment implementation and by the runners that step them.

A :class:`SingleEnv` is one game with all of its preprocessing built in; a vector of them
(:class:`rlperf.envs.vector.SyncVectorEnv` or a subprocess/EnvPool runner) batches them. The
contract is deliberately smaller than gymnasium's: no ``info`` dicts (building one per step
costs more than some games' emulation), and the end of a *true* game is reported explicitly
because training episodes and games differ once a lost life ends a training episode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import gymnasium
import numpy as np

EnvState = dict[str, Any]
"""An exact, serialisable snapshot of one env.

Values are ``np.ndarray`` (written into safetensors) or JSON-able scalars, lists, dicts and
strings (written into JSON). Raw bytes are stored as ``np.frombuffer(b, dtype=np.uint8)``
arrays; nothing is ever pickled. Every state holds the key ``"obs"``: the current observation,
so that a vector env can hand the batch of observations back after a restore.
"""

GameEnd = tuple[float, int] | tuple[float, int, tuple[int, ...]]
"""(true return, true length) of a finished game, plus its visited rooms where tracked."""
"""(true game return, true game length in agent steps) of a game that ended at this step."""


@dataclass(frozen=True)
class EpisodeEnd:
    """A finished TRUE game (not a training episode cut short by a lost life)."""

    env_index: int
    """Index of the env in its vector."""
    episode_return: float
    """Sum of the unclipped rewards of the whole game."""
    length: int
    """Number of agent steps (decisions) the game lasted."""
    rooms: tuple[int, ...] | None = None
    """Rooms visited in the game, for games that track them (Montezuma's Revenge)."""
    frame_parity: int | None = None
    """Parity (0 even, 1 odd) of the emulator frames the game's agent steps fell on, for
    Atari engines that know it (None elsewhere). At an even frame skip a game keeps the
    parity it starts on, and on Pong the two parities play as two games
    (docs/benchmarks-pong-cpu.md)."""


@runtime_checkable
class SingleEnv(Protocol):
    """One environment with its preprocessing, as the vector envs and runners see it.

    Observations returned by :meth:`reset` and :meth:`step` may be an internal buffer that
    the next call overwrites (that is how the Atari frame stack avoids a copy per step):
    callers that keep an observation must copy it.
    """

    observation_space: gymnasium.spaces.Box
    action_space: gymnasium.spaces.Discrete

    def reset(self, seed: int | None = None) -> np.ndarray:
        """Start the next (training) episode and return its first observation.

        ``seed`` re-seeds every random generator of the env; ``None`` continues their streams.
        """
        ...

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, GameEnd | None]:
        """Advance one agent step.

        Returns ``(obs, reward, terminated, truncated, game_end)``: ``reward`` is the training
        reward (clipped if configured), ``terminated`` is True when the training episode ended
        (a lost life counts under episodic life), ``truncated`` when a step limit cut the game,
        and ``game_end`` is ``(true return, true length)`` when a TRUE game ended at this step,
        else ``None``. After ``terminated or truncated`` the caller must call :meth:`reset`.
        """
        ...

    def get_state(self) -> EnvState:
        """Return an exact snapshot: restoring it reproduces the same future bit for bit."""
        ...

    def set_state(self, state: EnvState) -> None:
        """Restore a snapshot taken by :meth:`get_state` on an env built with the same config."""
        ...

    def close(self) -> None:
        """Release the emulator / simulator."""
        ...


PARITY_MARK = 4
"""Side in pixels of the corner block that ``env.mark_frame_parity`` paints."""


def paint_frame_parity(obs: np.ndarray, frame_numbers: np.ndarray | int) -> None:
    """Paint the top-left block of every frame in ``obs`` (``(..., C, H, W)``, in place)
    white where the game's emulator frame number is odd and black where it is even
    (``env.mark_frame_parity``): ``frame_numbers`` holds one number per leading index.

    At an even frameskip all of a game's agent steps fall on one frame parity, so one mark
    holds for every frame of its stack."""
    shade = (np.asarray(frame_numbers) % 2).astype(np.uint8) * 255
    obs[..., :PARITY_MARK, :PARITY_MARK] = shade.reshape(shade.shape + (1, 1, 1))


def rng_state(rng: np.random.Generator) -> dict[str, Any]:
    """JSON-able state of a numpy Generator (Python ints of any size survive JSON)."""
    return dict(rng.bit_generator.state)


def restore_rng(state: dict[str, Any]) -> np.random.Generator:
    """Rebuild a numpy Generator from :func:`rng_state`'s output."""
    name = state["bit_generator"]
    bit_generator_cls = getattr(np.random, name, None)
    if bit_generator_cls is None:
        raise ValueError(f"unknown numpy bit generator {name!r} in env state")
    bit_generator = bit_generator_cls()
    bit_generator.state = state
    return np.random.Generator(bit_generator)


def check_state_kind(state: EnvState, kind: str, env_id: str) -> None:
    """Refuse a snapshot taken from another kind of env or another game.

    Restoring e.g. a Pong emulator state into Breakout would "work" and silently produce
    garbage, so the mismatch is caught here with a message naming both sides.
    """
    got_kind, got_id = state.get("kind"), state.get("env_id")
    if got_kind != kind or got_id != env_id:
        raise ValueError(
            f"env state is for {got_kind}:{got_id}, cannot restore it into {kind}:{env_id}"
        )
