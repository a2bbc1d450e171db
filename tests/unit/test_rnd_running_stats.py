"""RND's normalisers against slow references: per-sample Welford and a plain loop."""

import numpy as np
import pytest
import torch

from rlperf.algos.running_stats import DiscountedReturnFilter, RunningMeanStd

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny networks


def _welford(samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Welford's one-sample-at-a-time mean and population variance (the reference)."""
    mean = np.zeros(samples.shape[1:])
    m2 = np.zeros(samples.shape[1:])
    for n, x in enumerate(samples, start=1):
        delta = x - mean
        mean = mean + delta / n
        m2 = m2 + delta * (x - mean)
    return mean, m2 / len(samples)


def test_batched_merges_equal_welford_over_all_samples():
    rng = np.random.default_rng(0)
    # Batches of different sizes and shifting distributions, as the observations drift.
    batches = [rng.normal(loc=i, scale=1 + i, size=(n, 3, 2)) for i, n in enumerate([7, 1, 50, 13])]
    rms = RunningMeanStd((3, 2), epsilon=0.0)
    for b in batches:
        rms.update(torch.from_numpy(b))
    mean, var = _welford(np.concatenate(batches))
    np.testing.assert_allclose(rms.mean.numpy(), mean, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(rms.var.numpy(), var, rtol=1e-10)
    assert rms.count == 71


def test_epsilon_count_is_a_tiny_prior_at_zero_mean_unit_variance():
    rms = RunningMeanStd((), epsilon=1e-4)
    rms.update(torch.full((1000,), 3.0))
    # The prior weighs 1e-4 against 1000 samples.
    assert abs(float(rms.mean) - 3.0) < 1e-6
    assert float(rms.var) < 1e-6


def test_state_round_trip_continues_identically():
    rng = np.random.default_rng(1)
    a = RunningMeanStd((4,))
    a.update(torch.from_numpy(rng.normal(size=(20, 4))))
    b = RunningMeanStd((4,))
    b.load_state_dict(a.state_dict())
    more = torch.from_numpy(rng.normal(size=(9, 4)))
    a.update(more)
    b.update(more)
    assert torch.equal(a.mean, b.mean) and torch.equal(a.var, b.var) and a.count == b.count


def test_discounted_return_filter_runs_across_rollouts_and_never_resets():
    rewards = np.arange(12, dtype=np.float64).reshape(6, 2)
    f = DiscountedReturnFilter(num_envs=2, gamma=0.9)
    out = torch.cat(
        [f.update(torch.from_numpy(rewards[:4])), f.update(torch.from_numpy(rewards[4:]))]
    )
    expected = np.zeros_like(rewards)
    running = np.zeros(2)
    for t in range(6):
        running = 0.9 * running + rewards[t]
        expected[t] = running
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12)
    g = DiscountedReturnFilter(num_envs=2, gamma=0.9)
    g.load_state_dict(f.state_dict())
    assert torch.equal(g.update(torch.ones(1, 2)), f.update(torch.ones(1, 2)))
