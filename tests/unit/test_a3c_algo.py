"""A3C's segment loss against 002's loop, its schedule, switches, weight loading and pairing."""

import contextlib
import math

import pytest
import torch
from safetensors.torch import save_file

from rlperf.algos.a3c import A3C, load_matching_weights
from rlperf.config.schema import A3CConfig, ModelConfig, RunConfig, RunnerConfig
from rlperf.core.errors import ConfigError
from rlperf.core.types import Progress, Rollout, WorkerUpdates
from rlperf.models.catalog import build_model
from rlperf.training.checks import check_pairing
from rlperf.training.resolve import check

T, N, OBS, ACTIONS = 6, 1, 5, 4


class FakeStep:
    """A gradient step that only records the loss it is handed (no backward)."""

    def __init__(self):
        self.losses, self.lrs = [], []

    def __call__(self, loss, max_grad_norm=None):
        self.losses.append(float(loss.detach()))
        return 0.0

    def autocast(self):
        return contextlib.nullcontext()

    def set_learning_rate(self, lr):
        self.lrs.append(lr)


def rollout(seed=0, dones=None):
    g = torch.Generator().manual_seed(seed)
    return Rollout(
        obs_TN=torch.randn(T, N, OBS, generator=g),
        actions_TN=torch.randint(0, ACTIONS, (T, N), generator=g),
        logprobs_TN=torch.zeros(T, N),
        values_TN=torch.zeros(T, N),
        rewards_TN=torch.randn(T, N, generator=g),
        dones_TN=torch.zeros(T, N, dtype=torch.bool) if dones is None else dones,
        next_obs_N=torch.randn(N, OBS, generator=g),
        truncation_values_TN=torch.zeros(T, N),
    )


def policy():
    torch.manual_seed(0)
    return build_model(ModelConfig(name="mlp", hidden_sizes=[8]), (OBS,), ACTIONS)


def loss_of_002(net, batch, cfg):
    """Source 002's local_train loop, written out step by step (one env, no episode end)."""
    logprob, entropy, value = net.evaluate(batch.obs_TN[:, 0], batch.actions_TN[:, 0])
    with torch.no_grad():
        next_value = net.value(batch.next_obs_N)[0]
    gae = torch.zeros(())
    R = next_value
    actor = critic = ent = torch.zeros(())
    next_v = next_value
    for t in reversed(range(T)):
        reward = batch.rewards_TN[t, 0]
        gae = gae * cfg.gamma * cfg.gae_lambda
        gae = gae + reward + cfg.gamma * next_v.detach() - value[t].detach()
        next_v = value[t]
        actor = actor + logprob[t] * gae
        R = R * cfg.gamma + reward
        critic = critic + (R - value[t]) ** 2 / 2
        ent = ent + entropy[t]
    return float(-actor + critic - cfg.ent_coef * ent)


@pytest.mark.parametrize("gae_lambda", [1.0, 0.9])
def test_segment_loss_is_002s(gae_lambda):
    cfg = A3CConfig(num_local_steps=T, gae_lambda=gae_lambda)
    net = policy()
    algo = A3C(cfg, net, seed=0)
    step = FakeStep()
    batch = rollout()
    metrics = algo.update(batch, step, Progress(0, 0, 1.0))
    assert step.losses[0] == pytest.approx(loss_of_002(net, batch, cfg), rel=1e-5)
    assert metrics["losses/learning_rate"] == cfg.learning_rate
    assert math.isfinite(metrics["losses/value_loss"]) and metrics["losses/entropy"] > 0


def test_episode_end_inside_a_segment_stops_bootstrapping():
    """002 ends a segment at an episode's end; here a segment may hold several episodes, and
    nothing after an end may flow into the returns before it."""
    cfg = A3CConfig(num_local_steps=T, ent_coef=0.0)
    net = policy()
    dones = torch.zeros(T, N, dtype=torch.bool)
    dones[2] = True
    base, changed = rollout(1, dones), rollout(1, dones)
    changed.rewards_TN[3:] += 5.0  # only the second episode differs
    with torch.no_grad():
        _, _, value = net.evaluate(base.obs_TN[:, 0], base.actions_TN[:, 0])

    def critic_grad_of_first_episode(batch):
        net.zero_grad()
        A3C(cfg, net, seed=0)  # same config; compute the loss parts directly
        from rlperf.algos.returns import gae as gae_fn

        with torch.no_grad():
            nv = net.value(batch.next_obs_N)
        _, returns = gae_fn(batch.rewards_TN, value.reshape(T, N), dones, nv, cfg.gamma, 1.0)
        return returns[:3]

    assert torch.equal(critic_grad_of_first_episode(base), critic_grad_of_first_episode(changed))
    step_a, step_b = FakeStep(), FakeStep()
    A3C(cfg, net, seed=0).update(base, step_a, Progress(0, 0, 1.0))
    A3C(cfg, net, seed=0).update(changed, step_b, Progress(0, 0, 1.0))
    assert step_a.losses[0] != step_b.losses[0]  # the second episode's part did change


def test_switches_time_penalty_reward_standardisation_and_value_clamp():
    net = policy()
    batch = rollout(2)
    losses = {}
    for name, cfg in {
        "plain": A3CConfig(num_local_steps=T),
        "penalty": A3CConfig(num_local_steps=T, time_penalty=0.01),
        "standardised": A3CConfig(num_local_steps=T, standardize_rewards=True),
        "clamped": A3CConfig(num_local_steps=T, value_clip=1e-3),
    }.items():
        step = FakeStep()
        A3C(cfg, net, seed=0).update(batch, step, Progress(0, 0, 1.0))
        losses[name] = step.losses[0]
    assert len(set(losses.values())) == 4  # every switch changes the loss
    assert batch.rewards_TN.abs().sum() > 0  # and the batch itself was left alone


def test_learning_rate_drop_schedule_and_driver_side_update():
    cfg = A3CConfig(learning_rate=1e-4, lr_drop_steps=1000, lr_drop_factor=0.1)
    algo = A3C(cfg, policy(), seed=0)
    step = FakeStep()
    done = WorkerUpdates(metrics={"losses/policy_loss": 0.5}, segments=2)
    before = algo.follow_workers(done, step, Progress(3, 999, 1.0))
    after = algo.follow_workers(done, step, Progress(4, 1000, 1.0))
    assert step.lrs == [1e-4, pytest.approx(1e-5)] and not step.losses  # no gradient step
    assert before["losses/policy_loss"] == 0.5 and before["losses/segments"] == 2.0
    assert after["losses/learning_rate"] == pytest.approx(1e-5)


def test_partial_weight_loading_reports_what_was_skipped(tmp_path, capsys):
    source = build_model(ModelConfig(name="mlp", hidden_sizes=[8]), (OBS,), ACTIONS + 1)
    tensors = {k: v.contiguous() for k, v in source.state_dict().items()}
    tensors["extra.weight"] = torch.ones(2)
    save_file(tensors, str(tmp_path / "w.safetensors"))
    target = policy()
    torso_before = target.policy_torso[0].weight.clone()
    report = load_matching_weights(target, str(tmp_path / "w.safetensors"))
    assert "policy_torso.0.weight" in report["loaded"]
    assert torch.equal(target.policy_torso[0].weight, source.policy_torso[0].weight)
    assert not torch.equal(target.policy_torso[0].weight, torso_before)
    assert set(report["shape_mismatch"]) == {"logits_head.weight", "logits_head.bias"}
    assert report["not_in_model"] == ["extra.weight"]
    assert "loaded" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="init_weights"):
        load_matching_weights(target, str(tmp_path / "missing.safetensors"))


def test_weights_from_a_run_directory_are_verified_like_a_resume(tmp_path):
    from rlperf.core.checkpoint import save_checkpoint

    source = policy()
    state = {"algorithm": {"policy": {k: v.clone() for k, v in source.state_dict().items()}}}
    ckpt = save_checkpoint(tmp_path / "run" / "checkpoints", "ckpt_000001", state, keep=2)
    target = policy()
    report = load_matching_weights(target, str(tmp_path / "run"))
    assert report["not_in_file"] == [] and report["loaded"]
    assert torch.equal(target.policy_torso[0].weight, source.policy_torso[0].weight)
    tensors = ckpt / "state.safetensors"
    data = bytearray(tensors.read_bytes())
    data[-1] ^= 0xFF  # one flipped byte: the recorded SHA-256 no longer matches
    tensors.write_bytes(bytes(data))
    with pytest.raises(ConfigError, match="a3c.init_weights: checkpoint .* is corrupted"):
        load_matching_weights(target, str(tmp_path / "run"))


def test_bad_values_and_pairings_are_config_errors():
    with pytest.raises(ConfigError, match="a3c.optimizer"):
        check(RunConfig(algo="a3c", a3c=A3CConfig(optimizer="sgd")))
    with pytest.raises(ConfigError, match="a3c.gae_lambda"):
        check(RunConfig(algo="a3c", a3c=A3CConfig(gae_lambda=1.5)))
    for runner in ("hogwild", "inproc"):  # inproc: synchronous A3C = A2C
        check_pairing(RunConfig(algo="a3c", runner=RunnerConfig(name=runner)))
    with pytest.raises(ConfigError, match="hogwild"):
        check(RunConfig(algo="ppo", runner=RunnerConfig(name="hogwild")))
    with pytest.raises(ConfigError, match="a3c learns in one process"):
        check_pairing(RunConfig(algo="a3c", runner=RunnerConfig(num_learners=2)))
    # a path that names nothing is refused by the checks, before a model is built
    with pytest.raises(ConfigError, match="a3c.init_weights: nowhere.safetensors does not exist"):
        check(RunConfig(algo="a3c", a3c=A3CConfig(init_weights="nowhere.safetensors")))
