"""PQN's maths and acting network: Q(lambda) returns against the paper's recursion written
out independently, epsilon-greedy acting, the exploration schedule, LayerNorm torsos, and
an update that fits its targets."""

import pytest
import torch
from torch import nn

from rlperf.algos.pqn import PQN, QPolicy, q_lambda_loss
from rlperf.algos.returns import q_lambda_returns
from rlperf.config.schema import ModelConfig, PQNConfig
from rlperf.core.errors import ConfigError
from rlperf.core.nan_guard import NonFiniteError, NonFiniteGuard
from rlperf.core.optim import LocalGradientStep
from rlperf.core.types import Progress, Rollout
from rlperf.models.catalog import build_model, check_model_settings


def _reference_q_lambda(rewards, max_q, dones, next_max_q, gamma, lam, truncation):
    """The targets as the paper's Algorithm 1 states them, step by step backwards: the
    one-step target, then lambda times the correction towards the next return."""
    T = rewards.shape[0]
    out = torch.zeros_like(rewards)
    following = next_max_q.clone()  # G_{t+1}
    following_q = next_max_q.clone()  # max_a Q(s_{t+1}, a)
    for t in reversed(range(T)):
        d = dones[t].float()
        one_step = rewards[t] + gamma * (1 - d) * following_q + gamma * truncation[t]
        target = one_step + gamma * lam * (1 - d) * (following - following_q)
        out[t] = target
        following, following_q = target, max_q[t]
    return out


def test_q_lambda_returns_follow_the_papers_recursion():
    g = torch.Generator().manual_seed(0)
    T, N = 9, 5
    rewards = torch.randn(T, N, generator=g)
    max_q = torch.randn(T, N, generator=g)
    dones = torch.rand(T, N, generator=g) < 0.2
    truncation = torch.where(
        dones & (torch.rand(T, N, generator=g) < 0.5), torch.randn(T, N, generator=g), 0.0
    )
    next_max_q = torch.randn(N, generator=g)
    for lam in (0.0, 0.65, 1.0):
        got = q_lambda_returns(rewards, max_q, dones, next_max_q, 0.99, lam, truncation)
        want = _reference_q_lambda(rewards, max_q, dones, next_max_q, 0.99, lam, truncation)
        torch.testing.assert_close(got, want)


def test_lambda_zero_gives_one_step_q_learning_targets_and_truncation_bootstraps():
    rewards = torch.tensor([[1.0], [0.0], [2.0]])
    max_q = torch.tensor([[5.0], [3.0], [4.0]])
    dones = torch.tensor([[False], [True], [False]])
    truncation = torch.tensor([[0.0], [7.0], [0.0]])  # step 1 was cut by a step limit
    got = q_lambda_returns(rewards, max_q, dones, torch.tensor([6.0]), 0.5, 0.0, truncation)
    # r_0 + g max Q(s_1); r_1 + g Q(final obs of the cut episode); r_2 + g max Q(s_T)
    assert got[:, 0].tolist() == [1.0 + 0.5 * 3.0, 0.0 + 0.5 * 7.0, 2.0 + 0.5 * 6.0]


def _policy(num_actions: int = 4) -> QPolicy:
    torch.manual_seed(0)
    return QPolicy(nn.Sequential(nn.Linear(3, 8), nn.Tanh()), 8, num_actions)


def test_acting_is_greedy_at_epsilon_zero_and_uniform_at_one():
    policy = _policy()
    obs = torch.randn(2000, 3)
    q = policy(obs)
    policy.epsilon.fill_(0.0)
    actions, logprobs, values = policy.act(obs)
    assert torch.equal(actions, q.argmax(-1)) and torch.allclose(values, q.max(-1).values)
    assert torch.allclose(logprobs, torch.zeros_like(logprobs))
    policy.epsilon.fill_(1.0)
    actions, logprobs, _ = policy.act(obs)
    counts = torch.bincount(actions, minlength=4).float() / len(actions)
    assert torch.allclose(counts, torch.full((4,), 0.25), atol=0.04)
    assert torch.allclose(logprobs, torch.full_like(logprobs, -torch.log(torch.tensor(4.0))))
    greedy, _, _ = policy.act(obs, deterministic=True)
    assert torch.equal(greedy, q.argmax(-1))
    # the protocol's evaluate: the same rule's log-probabilities and entropy, Q(s, a)
    log_p, entropy, q_taken = policy.evaluate(obs, actions)
    assert torch.allclose(log_p, logprobs) and torch.allclose(
        q_taken, q.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
    )
    assert torch.allclose(entropy, torch.full_like(entropy, torch.log(torch.tensor(4.0))))
    policy.epsilon.fill_(0.0)
    assert torch.allclose(policy.evaluate(obs, actions)[1], torch.zeros(len(obs)), atol=1e-6)


def test_epsilon_travels_with_the_weights():
    policy, copy = _policy(), _policy()
    policy.epsilon.fill_(0.3)
    copy.load_state_dict(policy.state_dict())
    assert float(copy.epsilon) == pytest.approx(0.3)


def test_layer_norm_sits_after_every_hidden_layer_of_the_image_and_mlp_torsos():
    nips = build_model(ModelConfig(name="nips", layer_norm=True), (4, 64, 64), 6)
    norms = [m for m in nips.policy_torso.modules() if isinstance(m, nn.LayerNorm)]
    assert [tuple(n.normalized_shape) for n in norms] == [(16, 15, 15), (32, 6, 6), (256,)]
    mlp = build_model(ModelConfig(name="mlp", layer_norm=True), (4,), 2)
    assert sum(isinstance(m, nn.LayerNorm) for m in mlp.policy_torso.modules()) == 2
    plain = build_model(ModelConfig(name="nips"), (4, 64, 64), 6)
    assert not any(isinstance(m, nn.LayerNorm) for m in plain.modules())
    with pytest.raises(ConfigError, match="model.layer_norm applies to nature, nips and mlp"):
        check_model_settings(ModelConfig(name="thesis-1", layer_norm=True), "thesis-1")


def _rollout(T: int, N: int, generator: torch.Generator) -> Rollout:
    batch = Rollout.allocate(T, N, (3,), torch.float32)
    batch.obs_TN.copy_(torch.randn(T, N, 3, generator=generator))
    batch.actions_TN.copy_(torch.randint(0, 4, (T, N), generator=generator))
    batch.rewards_TN.copy_(torch.randn(T, N, generator=generator))
    batch.next_obs_N.copy_(torch.randn(N, 3, generator=generator))
    return batch


def test_updates_fit_the_q_lambda_targets_and_set_the_next_epsilon():
    cfg = PQNConfig(num_steps=16, num_minibatches=4, update_epochs=4, learning_rate=1e-2,
                    q_lambda=0.0, gamma=0.0, start_e=1.0, end_e=0.1, exploration_fraction=0.5)  # fmt: skip
    policy = _policy()
    algo = PQN(cfg, policy, seed=1)
    step = LocalGradientStep(policy, algo.optimizer_spec(), device=torch.device("cpu"))
    batch = _rollout(16, 8, torch.Generator().manual_seed(2))
    # gamma 0: every target is the step's reward, here a function of the observation and
    # the action that the network can fit, so the loss must fall towards them
    batch.rewards_TN.copy_(batch.obs_TN[..., 0] + (batch.actions_TN == 1).float())

    def fit() -> float:
        with torch.no_grad():
            q = policy(batch.obs_TN).gather(-1, batch.actions_TN.unsqueeze(-1)).squeeze(-1)
            return float(q_lambda_loss(q, batch.rewards_TN))

    start = fit()
    for i in range(30):
        metrics = algo.update(batch, step, Progress(i, i * 128, 1.0 - 0.01 * i))
    end = fit()
    assert end < 0.5 * start
    assert metrics["losses/minibatches"] == 16
    # after 29 % of the budget, epsilon is 29/50 of the way from 1.0 to 0.1
    assert float(policy.epsilon) == pytest.approx(1.0 - 0.9 * 0.29 / 0.5)


def test_a_resumed_pqn_draws_the_same_minibatches():
    cfg = PQNConfig(num_steps=8, num_minibatches=2, update_epochs=2)
    a, b = PQN(cfg, _policy(), seed=3), PQN(cfg, _policy(), seed=3)
    step_a = LocalGradientStep(a.policy, a.optimizer_spec(), device=torch.device("cpu"))
    batch = _rollout(8, 4, torch.Generator().manual_seed(4))
    a.update(batch, step_a, Progress(0, 0, 1.0))
    b.load_state_dict(a.state_dict())
    assert torch.equal(a.generator.get_state(), b.generator.get_state())
    for pa, pb in zip(a.policy.state_dict().values(), b.policy.state_dict().values(), strict=True):
        assert torch.equal(pa, pb)


def _pqn_updates(graphs: bool, updates: int = 3):
    cfg = PQNConfig(num_steps=8, num_minibatches=4, update_epochs=2, anneal_lr=True)
    policy = _policy()
    algo = PQN(cfg, policy, seed=5)
    step = LocalGradientStep(policy, algo.optimizer_spec(), device=torch.device("cpu"),
                             graphs=graphs)  # fmt: skip
    batch = _rollout(8, 4, torch.Generator().manual_seed(6))
    metrics = [algo.update(batch, step, Progress(i, i * 32, 1.0 - 0.3 * i)) for i in range(updates)]
    return policy, step, metrics


def test_the_recorded_minibatch_step_learns_as_the_eager_one():
    # runner.cuda_graph with RAdam: on a CPU the recorded step runs without a capture, so
    # everything but the capture is checked here (tests/cuda: the capture on a GPU)
    eager_policy, _, eager = _pqn_updates(graphs=False)
    policy, step, recorded = _pqn_updates(graphs=True)
    for a, b in zip(eager_policy.parameters(), policy.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    for e, r in zip(eager, recorded, strict=True):
        for key in ("losses/td_loss", "losses/q_values", "losses/grad_norm",
                    "losses/learning_rate", "losses/epsilon", "losses/minibatches"):  # fmt: skip
            assert r[key] == pytest.approx(e[key], rel=1e-4, abs=1e-7), key
        assert r["perf/learner_graphed"] == 0.0  # nothing captured on a CPU
    assert isinstance(step.optimizer, torch.optim.RAdam)
    assert float(step.optimizer.param_groups[0]["lr"]) == pytest.approx(
        recorded[-1]["losses/learning_rate"]
    )
    assert len(step.programs) == 1  # one recorded step, kept across updates


def test_the_recorded_step_finds_a_non_finite_loss_once_per_update():
    cfg = PQNConfig(num_steps=8, num_minibatches=2, update_epochs=1)
    algo = PQN(cfg, _policy(), seed=0)
    step = LocalGradientStep(algo.policy, algo.optimizer_spec(), device=torch.device("cpu"),
                             graphs=True)  # fmt: skip
    step.guard = NonFiniteGuard("raise")
    bad = _rollout(8, 4, torch.Generator().manual_seed(7))
    bad.rewards_TN[0, 0] = float("nan")
    with pytest.raises(NonFiniteError, match=r"\(\d+ of the update's minibatch steps"):
        algo.update(bad, step, Progress(0, 32, 1.0))
