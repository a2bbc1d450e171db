"""The PPO loss on hand-made minibatches, and one update through the runner contract."""

import dataclasses
import math

import pytest
import torch

from rlperf.algos.ppo import PPO
from rlperf.algos.surrogate import SurrogateBatch, SurrogateSettings, ppo_loss, surrogate_epochs
from rlperf.config.schema import ModelConfig, PPOConfig, RunConfig
from rlperf.core.errors import ConfigError
from rlperf.core.optim import LocalGradientStep
from rlperf.core.types import Progress, Rollout
from rlperf.models.catalog import build_model


def _cfg(**kw) -> PPOConfig:
    base = dict(
        norm_adv=False,
        vf_clip_coef=None,
        vf_loss_clip=None,
        ent_coef=0.0,
        vf_coef=0.5,
        clip_coef=0.2,
    )
    base.update(kw)
    return PPOConfig(**base)


def test_clipped_surrogate_by_hand():
    # ratio 1.5 with A=+1 is clipped to 1.2; ratio 0.5 with A=-1 is clipped to 0.8.
    new = torch.log(torch.tensor([1.5, 0.5, 1.1]))
    old = torch.zeros(3)
    adv = torch.tensor([1.0, -1.0, 2.0])
    zeros = torch.zeros(3)
    loss, parts = ppo_loss(_cfg(), new, zeros, zeros, old, zeros, adv, zeros, kl_coeff=0.0)
    expected_pg = -(1.2 * 1 + 0.8 * -1 + 1.1 * 2) / 3
    assert parts["policy_loss"].item() == pytest.approx(expected_pg, rel=1e-6)
    assert parts["clipfrac"].item() == pytest.approx(2 / 3)
    assert loss.item() == pytest.approx(expected_pg, rel=1e-6)


def test_value_clipping_and_rllib_clamp():
    new_v, old_v, ret = torch.tensor([2.0]), torch.tensor([0.0]), torch.tensor([3.0])
    z = torch.zeros(1)
    _, plain = ppo_loss(_cfg(), z, z, new_v, z, old_v, z, ret, 0.0)
    assert plain["value_loss"].item() == pytest.approx(0.5 * 1.0)
    # CleanRL clipping: prediction clipped to old +- 0.5 -> 0.5, error (0.5-3)^2 = 6.25 is the max
    _, clipped = ppo_loss(_cfg(vf_clip_coef=0.5), z, z, new_v, z, old_v, z, ret, 0.0)
    assert clipped["value_loss"].item() == pytest.approx(0.5 * 6.25)
    # RLlib: squared error clamped at vf_clip_param
    _, clamped = ppo_loss(_cfg(vf_loss_clip=0.25), z, z, new_v, z, old_v, z, ret, 0.0)
    assert clamped["value_loss"].item() == pytest.approx(0.5 * 0.25)


def test_entropy_bonus_and_kl_penalty_enter_the_loss():
    new = torch.log(torch.tensor([2.0]))
    z = torch.zeros(1)
    entropy = torch.tensor([0.7])
    base, parts = ppo_loss(_cfg(), new, entropy, z, z, z, z, z, 0.0)
    with_ent, _ = ppo_loss(_cfg(ent_coef=0.1), new, entropy, z, z, z, z, z, 0.0)
    assert with_ent.item() == pytest.approx(base.item() - 0.07)
    kl = (2.0 - 1) - math.log(2.0)
    assert parts["approx_kl"].item() == pytest.approx(kl, rel=1e-6)
    with_kl, _ = ppo_loss(_cfg(), new, entropy, z, z, z, z, z, 0.5)
    assert with_kl.item() == pytest.approx(base.item() + 0.5 * kl, rel=1e-6)


def _rollout(T=8, N=4, obs_dim=4) -> Rollout:
    g = torch.Generator().manual_seed(0)
    return Rollout(
        obs_TN=torch.randn(T, N, obs_dim, generator=g),
        actions_TN=torch.randint(0, 2, (T, N), generator=g),
        logprobs_TN=torch.full((T, N), -0.69),
        values_TN=torch.zeros(T, N),
        rewards_TN=torch.ones(T, N),
        dones_TN=torch.zeros(T, N),
        next_obs_N=torch.randn(N, obs_dim, generator=g),
        truncation_values_TN=torch.zeros(T, N),
    )


def test_update_changes_weights_anneals_lr_and_adapts_kl():
    torch.manual_seed(0)
    policy = build_model(ModelConfig(name="mlp"), (4,), 2)
    cfg = PPOConfig(
        num_steps=8, num_minibatches=2, update_epochs=3, kl_coeff=0.2, kl_penalty_target=1e-9
    )
    algo = PPO(cfg, policy, seed=0)
    step = LocalGradientStep(policy, algo.optimizer_spec(), device=torch.device("cpu"))
    before = [p.detach().clone() for p in policy.parameters()]
    metrics = algo.update(_rollout(), step, Progress(iteration=0, env_steps=32, fraction_left=0.5))
    assert metrics["losses/learning_rate"] == pytest.approx(cfg.learning_rate * 0.5)
    assert metrics["losses/minibatches"] == 6
    assert any(not torch.equal(a, b) for a, b in zip(before, policy.parameters(), strict=True))
    assert algo.kl_coeff == pytest.approx(0.3)  # KL far above a tiny target: x1.5


def test_update_makes_rewarded_actions_more_likely():
    # Action 1 earns +1, action 0 earns -1: after one update p(action 1) must go up. A sign
    # error anywhere between rewards, GAE, advantages and the surrogate would lower it.
    torch.manual_seed(0)
    policy = build_model(ModelConfig(name="mlp"), (4,), 2)
    cfg = PPOConfig(
        num_steps=16,
        num_minibatches=2,
        update_epochs=4,
        learning_rate=1e-2,
        anneal_lr=False,
        ent_coef=0.0,
    )
    algo = PPO(cfg, policy, seed=0)
    step = LocalGradientStep(policy, algo.optimizer_spec(), device=torch.device("cpu"))
    batch = _rollout(T=16, N=4)
    actions, logprobs, values = policy.act(batch.obs_TN.reshape(64, 4))
    batch.actions_TN = actions.reshape(16, 4)
    batch.logprobs_TN = logprobs.reshape(16, 4)
    batch.values_TN = values.reshape(16, 4)
    batch.rewards_TN = batch.actions_TN.float() * 2 - 1
    batch.dones_TN = torch.ones(16, 4)  # one-step episodes: the advantage is r - V
    before = policy.evaluate(batch.obs_TN.reshape(64, 4), torch.ones(64))[0].exp().mean()
    metrics = algo.update(batch, step, Progress(0, 0, 1.0))
    after = policy.evaluate(batch.obs_TN.reshape(64, 4), torch.ones(64))[0].exp().mean()
    assert after > before + 0.05
    # the spread is the raw advantages', before the per-minibatch normalisation
    raw = (batch.rewards_TN - batch.values_TN).std()
    assert metrics["losses/advantage_std"] == pytest.approx(float(raw), rel=1e-5)


def test_minibatch_size_overrides_count():
    assert PPOConfig(num_minibatches=None, minibatch_size=10).minibatch(32) == 10
    assert PPOConfig(num_minibatches=None, minibatch_size=64).minibatch(32) == 32
    assert PPOConfig(num_minibatches=4).minibatch(32) == 8
    # precision=auto times one such minibatch of a rollout of 8 envs x 128 steps
    assert PPOConfig(num_minibatches=4).learner_batch_size(8) == 256


@pytest.mark.parametrize(
    ("kl_target", "factor"), [(1e-9, 1 / 1.5), (1e3, 1.5)], ids=["too-bold", "too-timid"]
)
def test_adaptive_learning_rate_follows_the_kl_and_is_checkpointed(kl_target, factor):
    torch.manual_seed(0)
    policy = build_model(ModelConfig(name="mlp"), (4,), 2)
    cfg = PPOConfig(num_steps=8, num_minibatches=2, anneal_lr=False, lr_kl_target=kl_target)
    algo = PPO(cfg, policy, seed=0)
    step = LocalGradientStep(policy, algo.optimizer_spec(), device=torch.device("cpu"))
    progress = Progress(iteration=0, env_steps=32, fraction_left=0.5)
    first = algo.update(_rollout(), step, progress)
    assert first["losses/learning_rate"] == pytest.approx(cfg.learning_rate)
    second = algo.update(_rollout(), step, progress)
    assert second["losses/learning_rate"] == pytest.approx(cfg.learning_rate * factor)
    assert step.optimizer.param_groups[0]["lr"] == pytest.approx(cfg.learning_rate * factor)

    resumed = PPO(cfg, build_model(ModelConfig(name="mlp"), (4,), 2), seed=0)
    resumed.load_state_dict(algo.state_dict())
    assert resumed.base_lr == pytest.approx(cfg.learning_rate * factor**2)


def test_a_resume_that_changes_the_rate_or_kl_coefficient_uses_the_new_values():
    # `rlperf train --resume DIR ppo.learning_rate=...` once trained on at the saved rate.
    torch.manual_seed(0)
    cfg = PPOConfig(num_steps=8, num_minibatches=2, kl_coeff=0.2, kl_penalty_target=1e-9)
    algo = PPO(cfg, build_model(ModelConfig(name="mlp"), (4,), 2), seed=0)
    step = LocalGradientStep(algo.policy, algo.optimizer_spec(), device=torch.device("cpu"))
    progress = Progress(iteration=0, env_steps=32, fraction_left=0.5)
    algo.update(_rollout(), step, progress)
    saved = algo.state_dict()
    assert algo.kl_coeff == pytest.approx(0.3)  # adapted: state a plain resume carries on

    same = PPO(cfg, build_model(ModelConfig(name="mlp"), (4,), 2), seed=0)
    same.load_state_dict(saved)
    assert same.kl_coeff == pytest.approx(0.3) and same.base_lr == cfg.learning_rate

    changed_cfg = PPOConfig(
        num_steps=8, num_minibatches=2, kl_coeff=0.05, kl_penalty_target=1e-9, learning_rate=1e-3
    )
    changed = PPO(changed_cfg, build_model(ModelConfig(name="mlp"), (4,), 2), seed=0)
    changed.load_state_dict(saved)
    assert changed.kl_coeff == pytest.approx(0.05)
    step = LocalGradientStep(changed.policy, changed.optimizer_spec(), device=torch.device("cpu"))
    metrics = changed.update(_rollout(), step, progress)
    assert metrics["losses/learning_rate"] == pytest.approx(1e-3 * 0.5)  # not 2.5e-4 * 0.5

    # With lr_kl_target the rate is state too, until a resume gives another start.
    adaptive = PPOConfig(num_steps=8, num_minibatches=2, lr_kl_target=1e3)
    algo = PPO(adaptive, build_model(ModelConfig(name="mlp"), (4,), 2), seed=0)
    algo.base_lr = 7e-4
    kept = PPO(adaptive, build_model(ModelConfig(name="mlp"), (4,), 2), seed=0)
    kept.load_state_dict(algo.state_dict())
    assert kept.base_lr == pytest.approx(7e-4)
    restarted_cfg = PPOConfig(num_steps=8, num_minibatches=2, lr_kl_target=1e3, learning_rate=1e-4)
    restarted = PPO(restarted_cfg, build_model(ModelConfig(name="mlp"), (4,), 2), seed=0)
    restarted.load_state_dict(algo.state_dict())
    assert restarted.base_lr == pytest.approx(1e-4)


def test_adaptive_learning_rate_stays_within_its_bounds():
    from rlperf.algos.ppo import adapt_learning_rate

    cfg = PPOConfig(lr_kl_target=0.01, lr_min=1e-5, lr_max=1e-3)
    assert adapt_learning_rate(9e-4, 0.0, cfg) == 1e-3
    assert adapt_learning_rate(1.2e-5, 1.0, cfg) == 1e-5
    assert adapt_learning_rate(5e-4, 0.01, cfg) == 5e-4  # inside the band: unchanged


def _updated_weights(cfg: PPOConfig, fraction_left: float) -> tuple[list[torch.Tensor], dict]:
    torch.manual_seed(0)
    policy = build_model(ModelConfig(name="mlp"), (4,), 2)
    algo = PPO(cfg, policy, seed=0)
    step = LocalGradientStep(policy, algo.optimizer_spec(), device=torch.device("cpu"))
    metrics = algo.update(_rollout(), step, Progress(0, 32, fraction_left))
    return [p.detach().clone() for p in policy.parameters()], metrics


def test_annealed_entropy_coefficient_is_the_one_the_loss_uses():
    annealed = PPOConfig(num_steps=8, num_minibatches=2, ent_coef=0.5, anneal_ent_coef=True)
    half, metrics = _updated_weights(annealed, 0.5)
    assert metrics["losses/ent_coef"] == pytest.approx(0.25)
    # At the end of the budget the bonus is gone: the update equals one without entropy.
    end, metrics = _updated_weights(annealed, 0.0)
    assert metrics["losses/ent_coef"] == 0.0
    without, _ = _updated_weights(dataclasses.replace(annealed, ent_coef=0.0), 0.0)
    assert all(torch.equal(a, b) for a, b in zip(end, without, strict=True))
    constant, _ = _updated_weights(dataclasses.replace(annealed, anneal_ent_coef=False), 0.5)
    halved, _ = _updated_weights(
        dataclasses.replace(annealed, anneal_ent_coef=False, ent_coef=0.25), 0.5
    )
    assert all(torch.equal(a, b) for a, b in zip(half, halved, strict=True))
    assert any(not torch.equal(a, b) for a, b in zip(half, constant, strict=True))


def test_an_entropy_bonus_annealed_over_a_fraction_ends_early():
    # over the first 40 % of the budget: at 20 % spent half the bonus is left, from 40 % on
    # none (the learning rate's schedule is the budget's, untouched)
    early = PPOConfig(
        num_steps=8, num_minibatches=2, ent_coef=0.5, anneal_ent_coef=True,
        ent_coef_anneal_fraction=0.4,
    )  # fmt: skip
    _, metrics = _updated_weights(early, 0.8)
    assert metrics["losses/ent_coef"] == pytest.approx(0.25)
    assert metrics["losses/learning_rate"] == pytest.approx(early.learning_rate * 0.8)
    for fraction_left in (0.6, 0.3, 0.0):
        _, metrics = _updated_weights(early, fraction_left)
        assert metrics["losses/ent_coef"] == 0.0
    # with a floor the bonus falls from 0.5 to 0.1 over the same fraction, then holds it
    floored = dataclasses.replace(early, ent_coef_end=0.1)
    _, metrics = _updated_weights(floored, 0.8)
    assert metrics["losses/ent_coef"] == pytest.approx(0.3)
    _, metrics = _updated_weights(floored, 0.0)
    assert metrics["losses/ent_coef"] == pytest.approx(0.1)


def test_the_late_phase_starts_at_the_return_and_holds():
    # bonus 0.5 and the full rate until the mean of 100 games reaches 10; from then on the
    # late bonus 0.1 (annealed like the early one) and half the rate, even when the mean dips
    cfg = PPOConfig(
        num_steps=8, num_minibatches=2, ent_coef=0.5, anneal_ent_coef=True,
        late_phase_return=10.0, late_phase_ent_coef=0.1, late_phase_lr_scale=0.5,
    )  # fmt: skip
    torch.manual_seed(0)
    policy = build_model(ModelConfig(name="mlp"), (4,), 2)
    algo = PPO(cfg, policy, seed=0)
    step = LocalGradientStep(policy, algo.optimizer_spec(), device=torch.device("cpu"))

    def update(env_steps: int, mean: float | None) -> dict[str, float]:
        return algo.update(_rollout(), step, Progress(0, env_steps, 0.5, mean))

    for env_steps, mean in ((32, None), (64, 9.9)):
        early = update(env_steps, mean)
        assert early["losses/ent_coef"] == pytest.approx(0.25)
        assert early["losses/learning_rate"] == pytest.approx(cfg.learning_rate * 0.5)
        assert early["losses/late_phase"] == 0.0
    for env_steps, mean in ((96, 10.0), (128, 3.0)):
        late = update(env_steps, mean)
        assert late["losses/ent_coef"] == pytest.approx(0.05)
        assert late["losses/learning_rate"] == pytest.approx(cfg.learning_rate * 0.25)
        assert step.optimizer.param_groups[0]["lr"] == pytest.approx(cfg.learning_rate * 0.25)
        assert late["losses/late_phase"] == 1.0
    assert algo.late_phase_since == 96

    # a resumed run continues in the late phase, whatever the mean of its first update
    resumed = PPO(cfg, build_model(ModelConfig(name="mlp"), (4,), 2), seed=0)
    resumed.load_state_dict(algo.state_dict())
    assert resumed.late_phase_since == 96
    state = algo.state_dict()
    del state["late_phase_since"]  # a checkpoint from before the late phase existed
    resumed.load_state_dict(state)
    assert resumed.late_phase_since is None


def test_the_late_phase_can_start_at_a_share_of_the_way_to_the_target():
    cfg = PPOConfig(
        num_steps=8, num_minibatches=2, late_phase_target_share=0.8, late_phase_lr_scale=0.5
    )
    torch.manual_seed(0)
    policy = build_model(ModelConfig(name="mlp"), (4,), 2)
    algo = PPO(cfg, policy, seed=0)
    step = LocalGradientStep(policy, algo.optimizer_spec(), device=torch.device("cpu"))
    # a high mean return alone does not start it: the share does
    for env_steps, share, late in (
        (32, None, 0.0),
        (64, 0.79, 0.0),
        (96, 0.8, 1.0),
        (128, 0.1, 1.0),
    ):
        progress = Progress(0, env_steps, 1.0, mean_return_100=50.0, target_share=share)
        metrics = algo.update(_rollout(), step, progress)
        assert metrics["losses/late_phase"] == late
        assert metrics["losses/learning_rate"] == pytest.approx(cfg.learning_rate * (1 - late / 2))
    assert algo.late_phase_since == 96


def test_a_late_phase_at_a_share_without_a_target_never_starts():
    cfg = RunConfig()
    cfg.ppo.late_phase_target_share = 0.8
    cfg.ppo.late_phase_lr_scale = 0.5
    cfg.ppo.check(cfg)  # accepted: a preset carries the key to games without a target
    torch.manual_seed(0)
    policy = build_model(ModelConfig(name="mlp"), (4,), 2)
    algo = PPO(
        PPOConfig(
            num_steps=8, num_minibatches=2, late_phase_target_share=0.8, late_phase_lr_scale=0.5
        ),
        policy,
        seed=0,
    )
    step = LocalGradientStep(policy, algo.optimizer_spec(), device=torch.device("cpu"))
    # without a target the session reports no share (target_share is None), however high
    # the return
    for env_steps in (32, 64, 96):
        progress = Progress(0, env_steps, 1.0, mean_return_100=50.0, target_share=None)
        metrics = algo.update(_rollout(), step, progress)
        assert metrics["losses/late_phase"] == 0.0
    assert algo.late_phase_since is None


@pytest.mark.parametrize(
    ("knobs", "match"),
    [
        ({"late_phase_return": 10.0, "late_phase_target_share": 0.8}, "at most one of"),
        ({"late_phase_ent_coef": 0.001}, "need ppo.late_phase_return"),
        ({"late_phase_lr_scale": 0.5}, "need ppo.late_phase_return"),
        (
            {"late_phase_return": 10.0, "late_phase_ent_coef": 0.001, "ent_coef_end": 0.002},
            "not be below ppo.ent_coef_end",
        ),
    ],
)
def test_late_phase_settings_that_cannot_work_are_refused(knobs: dict, match: str):
    with pytest.raises(ConfigError, match=match):
        PPOConfig(**knobs).check(RunConfig())


def test_a_bonus_floor_above_the_bonus_is_refused():
    with pytest.raises(ConfigError, match="ppo.ent_coef_end"):
        PPOConfig(ent_coef=0.001, ent_coef_end=0.01).check(RunConfig())


def test_explained_variance_is_left_out_while_every_return_is_the_same():
    # gamma 0 turns every return into its reward: all 1.0, so the explained variance is
    # undefined and a logged nan would stop a healthy run under nan_policy=raise. Rewards that
    # differ give it back.
    torch.manual_seed(0)
    policy = build_model(ModelConfig(name="mlp"), (4,), 2)
    algo = PPO(PPOConfig(num_steps=8, num_minibatches=2, gamma=0.0), policy, seed=0)
    step = LocalGradientStep(policy, algo.optimizer_spec(), device=torch.device("cpu"))
    progress = Progress(iteration=0, env_steps=32, fraction_left=1.0)
    constant = algo.update(_rollout(), step, progress)
    assert "losses/explained_variance" not in constant
    assert all(math.isfinite(v) for v in constant.values())
    varied = dataclasses.replace(_rollout(), rewards_TN=torch.arange(32.0).reshape(8, 4))
    assert math.isfinite(algo.update(varied, step, progress)["losses/explained_variance"])


def test_advantages_normalised_over_the_batch_once():
    # norm_adv_over=batch is the whole batch normalised once, then no per-minibatch scaling:
    # the same weights as raw advantages that were normalised beforehand, and other weights
    # than per-minibatch normalisation (whose minibatches of small advantages are scaled up).
    g = torch.Generator().manual_seed(1)
    obs = torch.randn(32, 4, generator=g)
    adv = torch.cat([torch.randn(16, generator=g) * 0.01, torch.randn(16, generator=g)])

    def trained(norm_adv: bool, over: str, advantages: torch.Tensor) -> list[torch.Tensor]:
        torch.manual_seed(0)
        policy = build_model(ModelConfig(name="mlp"), (4,), 2)
        with torch.no_grad():
            actions, logprobs, values = policy.act(obs)
        cfg = PPOConfig(num_steps=8, num_minibatches=2, norm_adv=norm_adv, norm_adv_over=over)
        step = LocalGradientStep(
            policy, PPO(cfg, policy, seed=0).optimizer_spec(), device=torch.device("cpu")
        )
        data = SurrogateBatch(obs, actions, logprobs, values, advantages, values + adv)
        generator = torch.Generator().manual_seed(0)
        surrogate_epochs(SurrogateSettings.of(cfg), policy, step, generator, data, 16)
        return [p.detach().clone() for p in policy.parameters()]

    over_batch = trained(True, "batch", adv)
    prenormalised = trained(False, "minibatch", (adv - adv.mean()) / (adv.std() + 1e-8))
    per_minibatch = trained(True, "minibatch", adv)
    assert all(torch.equal(a, b) for a, b in zip(over_batch, prenormalised, strict=True))
    assert any(not torch.allclose(a, b) for a, b in zip(over_batch, per_minibatch, strict=True))
