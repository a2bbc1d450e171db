"""Running normalisers for RND: observation statistics and the intrinsic-return scale.

Both are plain state (tensors and numbers) so they checkpoint exactly and resume bit for bit.
Statistics are kept in float64: a normaliser that sees billions of samples must not lose the
small per-batch contributions to rounding.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch


class RunningMeanStd:
    """Mean and variance of a stream of batches, per element of ``shape``.

    Batches are merged with the parallel-variance formula of Chan, Golub and LeVeque (1979):
    for counts n_a, n_b, means m_a, m_b and variances v_a, v_b (population variances),

        n = n_a + n_b,  delta = m_b - m_a
        m = m_a + delta n_b / n
        v = (v_a n_a + v_b n_b + delta^2 n_a n_b / n) / n

    which equals the mean and variance of all samples seen so far. ``count`` starts at a tiny
    epsilon (as in the RND paper's code) so the first merge needs no special case.
    """

    def __init__(self, shape: tuple[int, ...] = (), epsilon: float = 1e-4) -> None:
        self.mean = torch.zeros(shape, dtype=torch.float64)
        self.var = torch.ones(shape, dtype=torch.float64)
        self.count = float(epsilon)

    def update(self, batch: torch.Tensor) -> None:
        """Merge a batch (B, *shape) into the statistics."""
        x = batch.detach().to("cpu", torch.float64).reshape(-1, *self.mean.shape)
        n_b = x.shape[0]
        if n_b == 0:
            return
        mean_b = x.mean(0)
        var_b = x.var(0, unbiased=False)
        n_a = self.count
        n = n_a + n_b
        delta = mean_b - self.mean
        self.mean = self.mean + delta * (n_b / n)
        self.var = (self.var * n_a + var_b * n_b + delta.square() * (n_a * n_b / n)) / n
        self.count = n

    @property
    def std(self) -> torch.Tensor:
        return self.var.sqrt()

    def state_dict(self) -> dict[str, Any]:
        return {"mean": self.mean.clone(), "var": self.var.clone(), "count": self.count}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        mean = torch.as_tensor(state["mean"], dtype=torch.float64)
        if mean.shape != self.mean.shape:
            raise ValueError(
                f"normaliser state has shape {list(mean.shape)}, expected {list(self.mean.shape)}"
            )
        self.mean = mean.clone()
        self.var = torch.as_tensor(state["var"], dtype=torch.float64).clone()
        self.count = float(state["count"])


class DiscountedReturnFilter:
    """Per-env running discounted sum of intrinsic rewards, never reset at episode ends.

    RND divides intrinsic rewards by the standard deviation of this non-episodic return
    (Burda et al. 2018, sec. 2.4) rather than of the rewards themselves: the return is what
    the intrinsic value head predicts, so this keeps its targets on a stable scale.
    """

    def __init__(self, num_envs: int, gamma: float) -> None:
        self.gamma = gamma
        self.returns_N = torch.zeros(num_envs, dtype=torch.float64)

    def update(self, rewards_TN: torch.Tensor) -> torch.Tensor:
        """Advance through T steps of rewards (T, N); returns the running returns (T, N)."""
        rewards = rewards_TN.detach().to("cpu", torch.float64)
        if rewards.shape[1] != self.returns_N.shape[0]:
            # The batch's env count changed (e.g. a decoupled run resumed with other actors):
            # start the discounted sums afresh rather than mixing envs.
            self.returns_N = torch.zeros(rewards.shape[1], dtype=torch.float64)
        out = torch.empty_like(rewards)
        running = self.returns_N
        for t in range(rewards.shape[0]):
            running = running * self.gamma + rewards[t]
            out[t] = running
        self.returns_N = running
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"returns": self.returns_N.clone()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.returns_N = torch.as_tensor(state["returns"], dtype=torch.float64).clone()
