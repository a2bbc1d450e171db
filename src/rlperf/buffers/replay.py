"""A replay buffer that stores each frame once.

An Atari observation is a stack of the last k frames, and consecutive observations share
k - 1 of them; storing (obs, next_obs) pairs would keep every frame 2k times. Here each env
has its own ring of single frames, written in the order the env produced them, and an
observation is gathered back as k consecutive slots of the ring (the next observation as
the k slots one further on). 100k Atari transitions of 84x84 take 100k x 7 KiB = 0.7 GB
instead of 5.6 GB. Frames keep their dtype: uint8 stays uint8 until the network scales it.

Episode boundaries. At the start of an episode the first observation's whole stack is
written (its k - 1 older frames as padding slots that are never sampled as transitions),
so a gathered stack never mixes two episodes, whatever the engine put in the first
observation (repeats of the first frame, zeros, or the frames before a lost life). A
transition that ended its episode by termination needs no next observation (nothing is
bootstrapped); one cut by a step limit gets its real final frame in the next slot.

Validity. ``valid[i, t]`` says slot t of env i starts a transition whose k + 1 frames are
all in the ring and belong together. Writing slot w invalidates slots w .. w + k - 1: the
oldest transitions whose stacks reach back to w. Sampling draws filled slots uniformly and
redraws the few invalid ones (padding, the newest slot of each env, the ring's seam).

n-step returns (Sutton 1988; Rainbow, Hessel et al. 2018, uses n = 3). With ``n_step`` n
a sampled slot s carries ``r_s + gamma r_(s+1) + ... + gamma^(m-1) r_(s+m-1)`` and the
observation at s + m to bootstrap from, discounted by ``gamma^m``: m is n, or less where
the episode terminated (nothing to bootstrap), was cut by a step limit (its final frame
follows) or where the env's newest frame is (the chain stops at the data there is). The
chain follows one env's ring, so it never crosses into another episode: a slot after a
termination is never reached, and a slot that is not ``valid`` ends it.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np


class ReplaySample(NamedTuple):
    """A batch of transitions; ``rewards`` are n-step returns and ``discounts`` the factor
    of the bootstrapped value (gamma^m; gamma for 1-step transitions)."""

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_obs: np.ndarray
    dones: np.ndarray
    """1.0 where the episode terminated within the transition's steps."""
    discounts: np.ndarray


class ReplayBuffer:
    """Transitions of ``num_envs`` envs, each env's frames in a ring of ``capacity / num_envs``
    slots (slots also hold the k - 1 padding frames of each episode start, so the number of
    transitions is slightly below ``capacity``)."""

    def __init__(
        self,
        capacity: int,
        num_envs: int,
        obs_shape: tuple[int, ...],
        obs_dtype: np.dtype | type,
        frame_stack: int,
        seed: int,
        n_step: int = 1,
        gamma: float = 0.99,
    ) -> None:
        """``frame_stack`` k: observations are k frames stacked on axis 0 (each frame
        ``obs_shape[0] / k`` channels); 1 for observations that are not stacks.
        ``n_step``: steps summed per sampled transition, discounted by ``gamma``."""
        k = frame_stack
        if k < 1 or obs_shape[0] % k:
            raise ValueError(f"observations of shape {obs_shape} are not a stack of {k} frames")
        if n_step < 1:
            raise ValueError(f"n_step must be at least 1, not {n_step}")
        self.num_envs = num_envs
        self.frame_stack = k
        self.n_step = n_step
        self.gamma = gamma
        self.obs_shape = tuple(obs_shape)
        self.slots = math.ceil(capacity / num_envs)
        if self.slots < 4 * k:
            raise ValueError(
                f"replay capacity {capacity} is too small for {num_envs} envs of {k}-frame stacks"
            )
        frame_shape = (obs_shape[0] // k, *obs_shape[1:])
        N, C = num_envs, self.slots
        # np.zeros maps pages lazily: resident memory grows with the fill, not at creation.
        self.frames = np.zeros((N, C, *frame_shape), dtype=obs_dtype)
        self.actions = np.zeros((N, C), dtype=np.int64)
        self.rewards = np.zeros((N, C), dtype=np.float32)
        self.terminal = np.zeros((N, C), dtype=bool)
        self.valid = np.zeros((N, C), dtype=bool)
        self.head = np.zeros(N, dtype=np.int64)
        """Next slot to write, per env."""
        self.filled = np.zeros(N, dtype=np.int64)
        """Slots written at least once, per env (rings fill from slot 0)."""
        self.pending = np.full(N, -1, dtype=np.int64)
        """Slot of each env's last transition while its next frame is still to come, else -1."""
        self.added = 0
        """Transitions added over the buffer's life."""
        self.rng = np.random.default_rng(seed)
        self._ahead = np.arange(0, k)
        self._window = np.arange(-k + 1, 2)  # the k frames of obs, then the next one

    # ------------------------------------------------------------------ writing

    def _write(self, i: int, frame: np.ndarray) -> int:
        w = int(self.head[i])
        self.frames[i, w] = frame
        self.valid[i, (w + self._ahead) % self.slots] = False
        self.head[i] = (w + 1) % self.slots
        self.filled[i] = min(self.filled[i] + 1, self.slots)
        return w

    def add(
        self,
        obs_N: np.ndarray,
        actions_N: np.ndarray,
        rewards_N: np.ndarray,
        terminated_N: np.ndarray,
        truncated_N: np.ndarray,
        final_obs: dict[int, np.ndarray] | None = None,
    ) -> None:
        """One step of every env: the observations acted on, the actions, the (training)
        rewards, and how episodes ended; ``final_obs[i]`` is env i's final observation when
        a step limit cut its episode (a vector env's ``VecStep.final_obs``).

        Calls must follow each env's steps in order: after a step that did not end the
        episode, the next call's observation is that step's next observation.
        """
        k, c = self.frame_stack, self.frames.shape[2]  # c: leading size of one frame
        for i in range(self.num_envs):
            obs = obs_N[i]
            if self.pending[i] < 0:  # a new episode: the whole stack, oldest frame first
                for j in range(k - 1):
                    self._write(i, obs[j * c : (j + 1) * c])
            s = self._write(i, obs[-c:])
            if self.pending[i] >= 0:  # that frame completes the previous transition
                self.valid[i, self.pending[i]] = True
            self.actions[i, s] = actions_N[i]
            self.rewards[i, s] = rewards_N[i]
            self.terminal[i, s] = bool(terminated_N[i])
            if terminated_N[i]:
                self.valid[i, s] = True
                self.pending[i] = -1
            elif truncated_N[i]:
                self._write(i, final_obs[i][-c:])  # type: ignore[index]
                self.valid[i, s] = True
                self.pending[i] = -1
            else:
                self.pending[i] = s
        self.added += self.num_envs

    def end_episodes(self) -> None:
        """Every env's next observation starts a new episode (its producer was restarted):
        the last transition of each env, still waiting for its next frame, is dropped."""
        self.pending[:] = -1

    # ------------------------------------------------------------------ reading

    def __len__(self) -> int:
        """Transitions that can be sampled now."""
        return int(self.valid.sum())

    @property
    def nbytes(self) -> int:
        """Bytes of the buffer's arrays (allocated; resident only once written)."""
        arrays = (self.frames, self.actions, self.rewards, self.terminal, self.valid)
        return sum(a.nbytes for a in arrays)

    def sample(self, batch_size: int) -> ReplaySample:
        """``batch_size`` transitions drawn uniformly with replacement (see
        :class:`ReplaySample`)."""
        if len(self) == 0:
            raise ValueError("cannot sample from a replay buffer without transitions")
        envs = np.empty(0, dtype=np.int64)
        slots = np.empty(0, dtype=np.int64)
        ends = np.cumsum(self.filled)
        while envs.size < batch_size:
            flat = self.rng.integers(0, ends[-1], size=2 * (batch_size - envs.size) + 8)
            env = np.searchsorted(ends, flat, side="right")
            slot = flat - (ends[env] - self.filled[env])
            keep = self.valid[env, slot]
            envs = np.concatenate([envs, env[keep]])
            slots = np.concatenate([slots, slot[keep]])
        envs, slots = envs[:batch_size], slots[:batch_size]
        shape = (batch_size, *self.obs_shape)
        actions, rewards = self.actions[envs, slots], self.rewards[envs, slots]
        dones = self.terminal[envs, slots]
        if self.n_step == 1:
            # One gather of k + 1 frames per transition; obs and next_obs are views into it.
            window = (slots[:, None] + self._window) % self.slots
            frames = self.frames[envs[:, None], window]  # (B, k + 1, *frame_shape)
            discounts = np.full(batch_size, self.gamma, dtype=np.float32)
            return ReplaySample(
                frames[:, :-1].reshape(shape), actions, rewards,
                frames[:, 1:].reshape(shape), dones.astype(np.float32), discounts,
            )  # fmt: skip
        rewards, steps, dones = self._n_step_chains(envs, slots, rewards, dones)
        stack = self._window[:-1]  # the k frames of one observation
        obs = self.frames[envs[:, None], (slots[:, None] + stack) % self.slots]
        later = (slots + steps)[:, None] + stack
        next_obs = self.frames[envs[:, None], later % self.slots]
        discounts = (self.gamma**steps).astype(np.float32)
        return ReplaySample(
            obs.reshape(shape), actions, rewards, next_obs.reshape(shape),
            dones.astype(np.float32), discounts,
        )  # fmt: skip

    def _n_step_chains(
        self, envs: np.ndarray, slots: np.ndarray, rewards: np.ndarray, dones: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The n-step returns of the transitions at ``slots``, the steps m each one sums and
        whether its episode terminated within them."""
        returns = rewards.astype(np.float64)
        steps = np.ones(slots.shape, dtype=np.int64)
        dones = dones.copy()
        # slots written after s in this lap of the ring: beyond them lies older data
        written_after = (self.head[envs] - slots - 1) % self.slots
        going = ~dones
        for j in range(1, self.n_step):
            slot = (slots + j) % self.slots
            going &= (j <= written_after) & self.valid[envs, slot]
            returns += np.where(going, self.gamma**j * self.rewards[envs, slot], 0.0)
            steps[going] = j + 1
            ended = going & self.terminal[envs, slot]
            dones |= ended
            going &= ~ended
        return returns.astype(np.float32), steps, dones
