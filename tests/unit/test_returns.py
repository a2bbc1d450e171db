"""GAE against a slow NumPy reference written straight from the paper's definition."""

import numpy as np
import pytest
import torch

from rlperf.algos.returns import gae


def gae_reference(rewards, values, dones, next_value, gamma, lam, truncation_values=None):
    """A_t = sum_l (gamma*lambda)^l delta_{t+l}, the sum cut at the first episode end; a
    truncated end still bootstraps from the value of its final observation."""
    T, N = rewards.shape
    trunc = np.zeros((T, N)) if truncation_values is None else truncation_values
    values_ext = np.concatenate([values, next_value[None]], axis=0)
    adv = np.zeros((T, N))
    for n in range(N):
        for t in range(T):
            total, weight = 0.0, 1.0
            for k in range(t, T):
                not_done = 1.0 - dones[k, n]
                future = values_ext[k + 1, n] * not_done + trunc[k, n]
                delta = rewards[k, n] + gamma * future - values_ext[k, n]
                total += weight * delta
                if dones[k, n]:
                    break
                weight *= gamma * lam
            adv[t, n] = total
    return adv, adv + values


@pytest.mark.parametrize("gamma,lam", [(0.99, 0.95), (0.9, 1.0), (0.5, 0.0)])
def test_gae_matches_numpy_reference(gamma, lam):
    rng = np.random.default_rng(0)
    T, N = 17, 5
    rewards = rng.normal(size=(T, N))
    values = rng.normal(size=(T, N))
    dones = (rng.random((T, N)) < 0.2).astype(np.float64)
    next_value = rng.normal(size=N)
    adv, ret = gae(
        torch.tensor(rewards),
        torch.tensor(values),
        torch.tensor(dones),
        torch.tensor(next_value),
        gamma,
        lam,
    )
    ref_adv, ref_ret = gae_reference(rewards, values, dones, next_value, gamma, lam)
    np.testing.assert_allclose(adv.numpy(), ref_adv, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ret.numpy(), ref_ret, rtol=1e-10, atol=1e-10)


def test_gae_does_not_bootstrap_across_an_episode_end():
    rewards = torch.tensor([[1.0], [1.0]])
    values = torch.tensor([[0.0], [0.0]])
    dones = torch.tensor([[1.0], [0.0]])
    adv, _ = gae(rewards, values, dones, torch.tensor([100.0]), gamma=1.0, gae_lambda=1.0)
    assert adv[0, 0].item() == pytest.approx(1.0)  # the 100 after step 1 must not leak into step 0
    assert adv[1, 0].item() == pytest.approx(101.0)
