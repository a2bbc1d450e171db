"""V-trace against a slow NumPy reference written straight from the IMPALA paper's eq. (1)."""

import math

import numpy as np
import pytest
import torch

from rlperf.algos.returns import gae, vtrace


def vtrace_reference(
    behaviour_logp,
    target_logp,
    rewards,
    values,
    dones,
    next_value,
    gamma,
    rho_bar,
    c_bar,
    truncation_values=None,
    lam=1.0,
):
    """Espeholt et al. 2018, eq. (1), as an explicit sum:

    v_s = V(x_s) + sum_{t=s}^{s+n-1} gamma^{t-s} (prod_{i=s}^{t-1} c_i) rho_t delta_t,
    delta_t = r_t + gamma V(x_{t+1}) - V(x_t),

    the sum ending at the rollout's end (V(x_T) = next_value) or at the first episode end,
    where V(x_{t+1}) is replaced by the truncation value (0 for a real end). The policy
    gradient advantage is rho_s (r_s + gamma v_{s+1} - V(x_s)) with the same cut.
    """
    T, N = rewards.shape
    trunc = np.zeros((T, N)) if truncation_values is None else truncation_values
    ratios = np.exp(target_logp - behaviour_logp)
    rho = np.minimum(rho_bar, ratios)
    c = lam * np.minimum(c_bar, ratios)
    values_ext = np.concatenate([values, next_value[None]], axis=0)

    def bootstrap(next_v, t, n):
        return trunc[t, n] if dones[t, n] else next_v

    vs = np.zeros((T, N))
    for n in range(N):
        for s in range(T):
            total = 0.0
            for t in range(s, T):
                c_prod = 1.0
                for i in range(s, t):
                    c_prod *= c[i, n]
                delta = rewards[t, n] + gamma * bootstrap(values_ext[t + 1, n], t, n) - values[t, n]
                total += gamma ** (t - s) * c_prod * rho[t, n] * delta
                if dones[t, n]:
                    break  # nothing after an episode end belongs to x_s's return
            vs[s, n] = values[s, n] + total
    vs_ext = np.concatenate([vs, next_value[None]], axis=0)
    pg = np.zeros((T, N))
    for n in range(N):
        for s in range(T):
            target = rewards[s, n] + gamma * bootstrap(vs_ext[s + 1, n], s, n)
            pg[s, n] = rho[s, n] * (target - values[s, n])
    return vs, pg


def _random_inputs(seed, T=13, N=5, log_ratio_scale=1.5):
    rng = np.random.default_rng(seed)
    behaviour = np.log(rng.uniform(0.05, 1.0, size=(T, N)))
    # Target log-probs spread around the behaviour's: ratios from ~0.05 to ~20.
    target = behaviour + rng.normal(scale=log_ratio_scale, size=(T, N))
    rewards = rng.normal(size=(T, N))
    values = rng.normal(size=(T, N))
    dones = (rng.random((T, N)) < 0.2).astype(np.float64)
    # A third of the episode ends are step-limit cuts with a bootstrap value.
    truncated = dones * (rng.random((T, N)) < 0.35)
    truncation_values = truncated * rng.normal(size=(T, N))
    next_value = rng.normal(size=N)
    return behaviour, target, rewards, values, dones, next_value, truncation_values


def _t(*arrays):
    return [torch.tensor(a) for a in arrays]


@pytest.mark.parametrize(
    "gamma,rho_bar,c_bar,lam",
    [
        (0.99, 1.0, 1.0, 1.0),  # the paper's setting
        (0.9, 2.0, 1.0, 1.0),  # rho_bar > c_bar
        (0.99, 0.5, 0.5, 1.0),  # truncation below 1: most ratios clipped
        (0.95, 1.0, 0.7, 0.9),  # lambda folded into c
        (0.99, math.inf, math.inf, 1.0),  # untruncated importance sampling
        (0.9, 1.0, 2.0, 1.0),  # c_bar > rho_bar (outside the paper's assumption, still defined)
    ],
)
def test_vtrace_matches_numpy_reference(gamma, rho_bar, c_bar, lam):
    for seed in range(3):
        mu, pi, r, v, d, nv, trunc = _random_inputs(seed)
        ratios = np.exp(pi - mu)
        # The data must exercise the truncation: ratios on both sides of each bar.
        if math.isfinite(rho_bar):
            assert (ratios > rho_bar).any() and (ratios < rho_bar).any()
        assert d.any() and (trunc != 0).any()
        vs, pg = vtrace(*_t(mu, pi, r, v, d, nv), gamma, rho_bar, c_bar, torch.tensor(trunc), lam)
        ref_vs, ref_pg = vtrace_reference(mu, pi, r, v, d, nv, gamma, rho_bar, c_bar, trunc, lam)
        np.testing.assert_allclose(vs.numpy(), ref_vs, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(pg.numpy(), ref_pg, rtol=1e-10, atol=1e-10)


def test_without_truncation_values_is_the_same_as_zeros():
    mu, pi, r, v, d, nv, _ = _random_inputs(7)
    vs, pg = vtrace(*_t(mu, pi, r, v, d, nv), 0.99)
    ref_vs, ref_pg = vtrace_reference(mu, pi, r, v, d, nv, 0.99, 1.0, 1.0)
    np.testing.assert_allclose(vs.numpy(), ref_vs, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(pg.numpy(), ref_pg, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("lam", [1.0, 0.95])
def test_on_policy_vtrace_is_the_td_lambda_return(lam):
    # pi == mu, rho_bar = c_bar = 1: every weight is 1 (times lambda), so v_s is the n-step
    # TD(lambda) return, i.e. GAE's returns; for lambda = 1 the pg advantage is GAE(1)'s.
    _, pi, r, v, d, nv, trunc = _random_inputs(3)
    logp, r, v, d, nv, trunc = _t(pi, r, v, d, nv, trunc)
    vs, pg = vtrace(logp, logp.clone(), r, v, d, nv, 0.99, 1.0, 1.0, trunc, lambda_=lam)
    adv, returns = gae(r, v, d, nv, 0.99, lam, trunc)
    torch.testing.assert_close(vs, returns, rtol=1e-10, atol=1e-10)
    if lam == 1.0:
        torch.testing.assert_close(pg, adv, rtol=1e-10, atol=1e-10)


def test_pg_advantage_definition_by_hand():
    # T=2, one env, no episode end. pi/mu = 3 at t=0 (rho clipped to 1), 0.5 at t=1.
    gamma = 0.9
    mu = torch.log(torch.tensor([[0.2], [0.4]]))
    pi = torch.log(torch.tensor([[0.6], [0.2]]))
    r = torch.tensor([[1.0], [2.0]])
    v = torch.tensor([[0.5], [1.0]])
    d = torch.zeros(2, 1)
    nv = torch.tensor([4.0])
    vs, pg = vtrace(mu.double(), pi.double(), r.double(), v.double(), d, nv.double(), gamma)
    rho0, rho1 = 1.0, 0.5
    c0 = 1.0
    delta1 = rho1 * (2.0 + gamma * 4.0 - 1.0)
    v1 = 1.0 + delta1
    delta0 = rho0 * (1.0 + gamma * 1.0 - 0.5)
    v0 = 0.5 + delta0 + gamma * c0 * (v1 - 1.0)
    assert vs[:, 0].tolist() == pytest.approx([v0, v1])
    # A_s = rho_s (r_s + gamma v_{s+1} - V(x_s)), v_T = V(x_T) = next value.
    assert pg[0, 0].item() == pytest.approx(rho0 * (1.0 + gamma * v1 - 0.5))
    assert pg[1, 0].item() == pytest.approx(rho1 * (2.0 + gamma * 4.0 - 1.0))


def test_episode_end_cuts_bootstrap_and_trace_truncation_bootstraps():
    zeros = torch.zeros(2, 1)
    r = torch.tensor([[1.0], [1.0]])
    d = torch.tensor([[1.0], [0.0]])
    vs, pg = vtrace(zeros, zeros, r, zeros, d, torch.tensor([100.0]), gamma=1.0)
    # The 100 after step 1 must not leak into step 0 (neither through v_1 nor the trace).
    assert vs[:, 0].tolist() == pytest.approx([1.0, 101.0])
    assert pg[:, 0].tolist() == pytest.approx([1.0, 101.0])
    # A step-limit cut at step 0 bootstraps from the final observation's value instead.
    trunc = torch.tensor([[5.0], [0.0]])
    vs, pg = vtrace(
        zeros, zeros, r, zeros, d, torch.tensor([100.0]), 1.0, truncation_values_TN=trunc
    )
    assert vs[:, 0].tolist() == pytest.approx([6.0, 101.0])
    assert pg[:, 0].tolist() == pytest.approx([6.0, 101.0])


def test_infinite_ratio_with_untruncated_traces_still_cuts_at_an_episode_end():
    mu = torch.tensor([[-1e4], [0.0]])  # pi/mu overflows to inf at t=0
    pi = torch.zeros(2, 1)
    r = torch.zeros(2, 1)
    v = torch.zeros(2, 1)
    d = torch.tensor([[1.0], [0.0]])
    vs, _ = vtrace(mu, pi, r, v, d, torch.tensor([1.0]), 0.99, rho_bar=1.0, c_bar=math.inf)
    assert torch.isfinite(vs).all()


def test_outputs_carry_no_gradient():
    mu, pi, r, v, d, nv, trunc = _t(*_random_inputs(1))
    pi.requires_grad_(True)
    v.requires_grad_(True)
    vs, pg = vtrace(mu, pi, r, v, d, nv, 0.99, truncation_values_TN=trunc)
    assert not vs.requires_grad and not pg.requires_grad
    assert vs.dtype == r.dtype


def test_float32_inputs_give_float32_outputs():
    mu, pi, r, v, d, nv, trunc = (t.float() for t in _t(*_random_inputs(2)))
    vs, pg = vtrace(mu, pi, r, v, d, nv, 0.99, truncation_values_TN=trunc)
    assert vs.dtype == pg.dtype == torch.float32
