"""Representative observations recorded from the game, for calibration and fidelity checks.

Observations come from an evaluation env built with the run's preprocessing (frame size,
grayscale, frame stack, frame skip), so an int8 model is calibrated on exactly what it will
see. Play is random (uniform actions) or the policy's own (actions sampled from its
distribution, which visits the states the agent really reaches); a finished game resets the
env and recording goes on. Files are plain ``.npy`` arrays written and read with
``allow_pickle=False``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from rlperf.config.schema import RunConfig
from rlperf.core.errors import UserInputError
from rlperf.models.policy import ActorCritic

PLAY_MODES = ("random", "policy")


def record_observations(
    cfg: RunConfig,
    dim: int,
    n: int,
    *,
    seed: int = 0,
    policy: ActorCritic | None = None,
) -> tuple[np.ndarray, int]:
    """``n`` observations of ``cfg``'s game, and how many episodes ended while recording.

    ``policy=None`` plays uniformly random actions; otherwise actions are sampled from the
    policy. The env is the evaluation env (true game ends, no reward clipping).
    """
    from rlperf.envs.make import make_env

    if n < 1:
        raise UserInputError(f"--n must be a positive integer, got {n}")
    env = make_env(cfg.env, dim, seed, training=False)
    rng = np.random.default_rng(seed)
    num_actions = int(env.action_space.n)
    obs = env.reset(seed=seed)
    out = np.empty((n, *obs.shape), dtype=obs.dtype)
    resets = 0
    generator = torch.Generator().manual_seed(seed)
    for i in range(n):
        out[i] = obs  # the env may reuse its buffer: copy now
        if policy is None:
            action = int(rng.integers(num_actions))
        else:
            with torch.no_grad():
                logits, _ = policy(torch.from_numpy(out[i : i + 1]))
            probs = logits.float().softmax(-1)
            action = int(torch.multinomial(probs, 1, generator=generator))
        obs, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            obs = env.reset()
            resets += 1
    close = getattr(env, "close", None)
    if close is not None:
        close()
    return out, resets


def save_observations(path: Path, obs: np.ndarray, force: bool = False) -> None:
    """Write ``obs`` to ``path`` (.npy, no pickle); an existing file needs ``force``."""
    path = Path(path)
    if path.suffix != ".npy":
        raise UserInputError(f"output {path} must end in .npy (a NumPy array file)")
    if path.exists() and not force:
        raise UserInputError(f"{path} already exists; pass --force to overwrite it")
    if not path.parent.exists():
        raise UserInputError(f"directory {path.parent} does not exist")
    tmp = path.with_name(f".{path.stem}.tmp-{os.getpid()}.npy")
    np.save(tmp, obs, allow_pickle=False)
    os.replace(tmp, path)


def load_observations(
    path: Path, obs_shape: tuple[int, ...] | None = None, obs_dtype: np.dtype | None = None
) -> np.ndarray:
    """A dataset written by :func:`save_observations`, checked against the run's observations.

    Raises :class:`UserInputError` for a missing file, a file that is not ``.npy`` (or holds
    pickled objects), or a shape/dtype that differs from ``obs_shape``/``obs_dtype``.
    """
    path = Path(path)
    if not path.is_file():
        raise UserInputError(f"dataset {path} does not exist; record one with `rlperf dataset`")
    if path.suffix != ".npy":
        raise UserInputError(f"dataset {path} is not a .npy file; record one with `rlperf dataset`")
    try:
        obs = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise UserInputError(
            f"dataset {path} is not a readable .npy array ({str(exc).splitlines()[0]})"
        ) from None
    if not isinstance(obs, np.ndarray):
        raise UserInputError(f"dataset {path} holds several arrays; expected one .npy array")
    if obs_dtype is not None and obs.dtype != obs_dtype:
        raise UserInputError(
            f"dataset {path} has dtype {obs.dtype}; this run's observations are {np.dtype(obs_dtype)}"
        )
    if obs_shape is not None and (
        obs.ndim != len(obs_shape) + 1 or obs.shape[1:] != tuple(obs_shape)
    ):
        raise UserInputError(
            f"dataset {path} has shape {obs.shape}; expected (N, {', '.join(map(str, obs_shape))})"
        )
    if len(obs) == 0:
        raise UserInputError(f"dataset {path} is empty")
    return obs
