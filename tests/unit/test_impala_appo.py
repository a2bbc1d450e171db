"""IMPALA and APPO updates through the runner contract, on hand-made CartPole-shaped rollouts."""

import copy

import pytest
import torch

from rlperf.algos.appo import APPO
from rlperf.algos.impala import IMPALA
from rlperf.algos.ppo import PPO
from rlperf.algos.returns import gae
from rlperf.config.load import field_docs
from rlperf.config.schema import APPOConfig, IMPALAConfig, ModelConfig, PPOConfig, RunConfig
from rlperf.core.optim import LocalGradientStep
from rlperf.core.types import Progress, Rollout
from rlperf.models.catalog import build_model
from rlperf.models.policy import ActorCritic

CPU = torch.device("cpu")


def _policy(seed: int = 0) -> ActorCritic:
    torch.manual_seed(seed)
    return build_model(ModelConfig(name="mlp"), (4,), 2)


def _on_policy_rollout(policy: ActorCritic, T: int = 8, N: int = 4, seed: int = 0) -> Rollout:
    """Actions, log-probs and values from ``policy`` itself; random rewards and episode ends."""
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(T, N, 4, generator=g)
    actions, logprobs, values = policy.act(obs.reshape(T * N, 4))
    dones = (torch.rand(T, N, generator=g) < 0.25).float()
    truncated = dones * (torch.rand(T, N, generator=g) < 0.5).float()
    return Rollout(
        obs_TN=obs,
        actions_TN=actions.reshape(T, N),
        logprobs_TN=logprobs.reshape(T, N),
        values_TN=values.reshape(T, N),
        rewards_TN=torch.randn(T, N, generator=g),
        dones_TN=dones,
        next_obs_N=torch.randn(N, 4, generator=g),
        truncation_values_TN=truncated * torch.randn(T, N, generator=g),
    )


def _bandit_rollout(policy: ActorCritic, T: int = 16, N: int = 4) -> Rollout:
    """One-step episodes: action 1 earns +1, action 0 earns -1."""
    batch = _on_policy_rollout(policy, T, N)
    batch.rewards_TN = batch.actions_TN.float() * 2 - 1
    batch.dones_TN = torch.ones(T, N)
    batch.truncation_values_TN = torch.zeros(T, N)
    return batch


def _p_action_1(policy: ActorCritic, batch: Rollout) -> float:
    obs = batch.obs_TN.reshape(-1, 4)
    with torch.no_grad():
        return float(policy.evaluate(obs, torch.ones(obs.shape[0]))[0].exp().mean())


def _params(policy: ActorCritic) -> list[torch.Tensor]:
    return [p.detach().clone() for p in policy.parameters()]


def _make(algo_name: str, policy: ActorCritic, **kw):
    if algo_name == "impala":
        algo = IMPALA(IMPALAConfig(**kw), policy, seed=0)
    else:
        algo = APPO(APPOConfig(**kw), policy, seed=0)
    return algo, LocalGradientStep(policy, algo.optimizer_spec(), device=CPU)


# ---------------------------------------------------------------- configuration


@pytest.mark.parametrize("cls", [IMPALAConfig, APPOConfig])
def test_every_field_has_a_docstring_for_help(cls):
    assert set(field_docs(cls)) == set(cls.__dataclass_fields__)
    assert all(field_docs(cls).values())


def test_run_config_holds_both():
    cfg = RunConfig()
    assert isinstance(cfg.impala, IMPALAConfig) and isinstance(cfg.appo, APPOConfig)


def test_data_specs_declare_lag_and_horizon():
    policy = _policy()
    impala = IMPALA(IMPALAConfig(num_steps=20, max_policy_lag=4), policy, seed=0)
    appo = APPO(APPOConfig(num_steps=64, max_policy_lag=2), policy, seed=0)
    assert (impala.data_spec.kind, impala.data_spec.horizon) == ("rollout", 20)
    assert impala.data_spec.max_policy_lag == 4 and impala.data_spec.needs_logprob
    assert (appo.data_spec.horizon, appo.data_spec.max_policy_lag) == (64, 2)


def test_rmsprop_alpha_reaches_the_optimizer():
    policy = _policy()
    _, step = _make("impala", policy, rmsprop_alpha=0.9, optimizer_eps=0.01)
    opt = step.optimizer
    assert isinstance(opt, torch.optim.RMSprop)
    assert (opt.param_groups[0]["alpha"], opt.param_groups[0]["eps"]) == (0.9, 0.01)
    _, step = _make("impala", policy, optimizer="adam")
    assert isinstance(step.optimizer, torch.optim.Adam)


# ---------------------------------------------------------------- updates


@pytest.mark.parametrize("algo_name", ["impala", "appo"])
def test_update_changes_weights_and_anneals_lr(algo_name):
    policy = _policy()
    algo, step = _make(algo_name, policy, num_steps=8, num_minibatches=2)
    before = _params(policy)
    metrics = algo.update(_on_policy_rollout(policy), step, Progress(0, 32, fraction_left=0.5))
    assert any(not torch.equal(a, b) for a, b in zip(before, policy.parameters(), strict=True))
    assert metrics["losses/learning_rate"] == pytest.approx(algo.cfg.learning_rate * 0.5)
    for name in ("policy_loss", "value_loss", "entropy", "mean_rho", "rho_clipfrac", "grad_norm"):
        assert f"losses/{name}" in metrics
    assert all(isinstance(v, float) for v in metrics.values())
    expected_steps = 2 if algo_name == "impala" else 2 * algo.cfg.update_epochs
    assert metrics["losses/minibatches"] == expected_steps


@pytest.mark.parametrize("algo_name", ["impala", "appo"])
def test_update_makes_rewarded_actions_more_likely(algo_name):
    # A sign error anywhere between rewards, V-trace, advantages and the loss would lower it.
    policy = _policy()
    algo, step = _make(algo_name, policy, learning_rate=1e-2, anneal_lr=False, ent_coef=0.0)
    batch = _bandit_rollout(policy)
    before = _p_action_1(policy, batch)
    algo.update(batch, step, Progress(0, 0, 1.0))
    assert _p_action_1(policy, batch) > before + 0.05


@pytest.mark.parametrize("algo_name", ["impala", "appo"])
def test_rho_truncation_shows_in_the_metrics(algo_name):
    policy = _policy()
    batch = _bandit_rollout(policy)
    algo, step = _make(algo_name, policy, anneal_lr=False)
    on_policy = algo.update(copy.deepcopy(batch), step, Progress(0, 0, 1.0))
    assert on_policy["losses/mean_rho"] == pytest.approx(1.0, abs=1e-5)
    assert on_policy["losses/rho_clipfrac"] < 0.1
    assert on_policy["losses/behaviour_kl"] == pytest.approx(0.0, abs=1e-5)

    # A behaviour policy that gave the taken actions probability 0.02 where the target gives
    # about 0.5: pi/mu ~ 25, every weight truncated at rho_bar = 1.
    policy = _policy()
    algo, step = _make(algo_name, policy, anneal_lr=False)
    batch.logprobs_TN = torch.full_like(batch.logprobs_TN, torch.log(torch.tensor(0.02)).item())
    lagged = algo.update(batch, step, Progress(0, 0, 1.0))
    assert lagged["losses/mean_rho"] > 20
    assert lagged["losses/rho_clipfrac"] == 1.0
    assert lagged["losses/behaviour_kl"] > 1.0


def test_rho_truncation_bounds_the_policy_gradient():
    # With every rho truncated at rho_bar, the update is the same whatever mu was beyond it:
    # a behaviour policy 50x or 1000x less likely than pi gives identical weights.
    results = []
    for mu in (0.01, 0.0005):
        policy = _policy()
        batch = _bandit_rollout(policy)
        batch.logprobs_TN = torch.full_like(batch.logprobs_TN, torch.log(torch.tensor(mu)).item())
        algo, step = _make("impala", policy, anneal_lr=False)
        algo.update(batch, step, Progress(0, 0, 1.0))
        results.append(_params(policy))
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b)


def test_impala_on_policy_is_an_a2c_step():
    # No lag, rho_bar = c_bar = 1: V-trace targets are n-step returns and its advantages
    # GAE(lambda=1)'s, so IMPALA's step equals A2C's on the same batch with the same optimizer.
    cfg = IMPALAConfig(num_steps=8, ent_coef=0.01, max_grad_norm=0.5, anneal_lr=False)
    policy = _policy()
    batch = _on_policy_rollout(policy)
    ref = copy.deepcopy(policy)

    algo = IMPALA(cfg, policy, seed=0)
    step = LocalGradientStep(policy, algo.optimizer_spec(), device=CPU)
    algo.update(batch, step, Progress(0, 0, 1.0))

    ref_step = LocalGradientStep(ref, algo.optimizer_spec(), device=CPU)
    ref_step.set_learning_rate(cfg.learning_rate)
    T, N = batch.num_steps, batch.num_envs
    logprob, entropy, value = ref.evaluate(
        batch.obs_TN.reshape(T * N, 4), batch.actions_TN.reshape(-1)
    )
    with torch.no_grad():
        next_value = ref.value(batch.next_obs_N)
    adv, returns = gae(
        batch.rewards_TN,
        value.detach().reshape(T, N),
        batch.dones_TN,
        next_value,
        cfg.gamma,
        1.0,
        batch.truncation_values_TN,
    )
    loss = (
        -(adv.reshape(-1) * logprob).mean()
        + cfg.vf_coef * 0.5 * ((returns.reshape(-1) - value) ** 2).mean()
        - cfg.ent_coef * entropy.mean()
    )
    ref_step(loss, cfg.max_grad_norm)
    for a, b in zip(policy.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_appo_on_policy_is_ppo_with_lambda_one():
    # No lag, rho_bar = c_bar = 1: APPO is PPO with GAE(lambda=1) and no value clipping.
    shared = dict(
        num_steps=8,
        num_minibatches=2,
        update_epochs=3,
        learning_rate=1e-3,
        clip_coef=0.2,
        ent_coef=0.01,
        vf_coef=0.5,
        max_grad_norm=0.5,
        norm_adv=True,
    )
    policy = _policy()
    batch = _on_policy_rollout(policy)
    ref = copy.deepcopy(policy)

    appo = APPO(APPOConfig(**shared), policy, seed=3)
    step = LocalGradientStep(policy, appo.optimizer_spec(), device=CPU)
    appo.update(batch, step, Progress(0, 0, 0.7))

    ppo = PPO(
        PPOConfig(**shared, gae_lambda=1.0, vf_clip_coef=None, vf_loss_clip=None), ref, seed=3
    )
    ref_step = LocalGradientStep(ref, ppo.optimizer_spec(), device=CPU)
    ppo.update(batch, ref_step, Progress(0, 0, 0.7))
    for a, b in zip(policy.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_impala_minibatches_split_whole_trajectories():
    policy = _policy()
    algo, step = _make("impala", policy, num_steps=8, num_minibatches=3)
    metrics = algo.update(_on_policy_rollout(policy, N=4), step, Progress(0, 0, 1.0))
    assert metrics["losses/minibatches"] == 3
    algo, step = _make("impala", policy, num_steps=8, num_minibatches=5)
    with pytest.raises(ValueError, match="num_minibatches"):
        algo.update(_on_policy_rollout(policy, N=4), step, Progress(0, 0, 1.0))


def test_state_dict_round_trip():
    policy = _policy()
    appo, step = _make("appo", policy, num_steps=8)
    state = copy.deepcopy(appo.state_dict())
    expected = torch.randperm(10, generator=appo.generator)
    appo.update(_on_policy_rollout(policy), step, Progress(0, 0, 1.0))
    appo.load_state_dict(state)
    assert torch.equal(torch.randperm(10, generator=appo.generator), expected)
    for a, b in zip(policy.state_dict().values(), state["policy"].values(), strict=True):
        assert torch.equal(a, b)

    impala, step = _make("impala", _policy(1), num_steps=8)
    impala.load_state_dict(state)
    for a, b in zip(impala.policy.state_dict().values(), state["policy"].values(), strict=True):
        assert torch.equal(a, b)
