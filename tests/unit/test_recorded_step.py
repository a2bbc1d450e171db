"""runner.cuda_graph's recorded minibatch step, run on the CPU without a graph.

On a CPU :class:`GraphedCall` runs the recorded function directly, so everything but the
capture is checked here: the same minibatches and maths as the eager epochs, the tensor
learning rate and coefficients filled in place, one read per update, the guard after it,
checkpoints, and the config's refusals. tests/cuda checks the capture on a GPU.
"""

import dataclasses

import pytest
import torch

from rlperf.algos.ppo import PPO
from rlperf.config.schema import ModelConfig, PPOConfig, RunConfig
from rlperf.core.cuda_graph import GraphedCall
from rlperf.core.errors import ConfigError
from rlperf.core.nan_guard import NonFiniteError, NonFiniteGuard
from rlperf.core.optim import LocalGradientStep
from rlperf.core.types import Progress, Rollout
from rlperf.models.catalog import build_model
from rlperf.training.checks import check
from tests.unit.test_ppo import _rollout

CPU = torch.device("cpu")


def _trained(graphs: bool, kl_coeff: float = 0.0, updates: int = 2):
    torch.manual_seed(0)
    policy = build_model(ModelConfig(name="mlp"), (4,), 2)
    cfg = PPOConfig(
        num_steps=8, num_minibatches=4, update_epochs=3, kl_coeff=kl_coeff, ent_coef=0.05,
        anneal_lr=True, anneal_ent_coef=True, max_grad_norm=0.5,
    )  # fmt: skip
    algo = PPO(cfg, policy, seed=0)
    step = LocalGradientStep(policy, algo.optimizer_spec(), device=CPU, graphs=graphs)
    metrics = [
        algo.update(_rollout(), step, Progress(i, 32 * (i + 1), 1.0 - 0.4 * i))
        for i in range(updates)
    ]
    return policy, step, metrics


@pytest.mark.parametrize("kl_coeff", [0.0, 0.2])
def test_recorded_epochs_learn_as_the_eager_ones(kl_coeff):
    eager_policy, _, eager = _trained(graphs=False, kl_coeff=kl_coeff)
    policy, step, recorded = _trained(graphs=True, kl_coeff=kl_coeff)
    for a, b in zip(eager_policy.parameters(), policy.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    for e, r in zip(eager, recorded, strict=True):
        for key in ("losses/policy_loss", "losses/approx_kl", "losses/grad_norm",
                    "losses/entropy", "losses/value_loss", "losses/learning_rate",
                    "losses/ent_coef", "losses/kl_coeff"):  # fmt: skip
            assert r[key] == pytest.approx(e[key], rel=1e-4, abs=1e-7), key
        assert r["losses/minibatches"] == e["losses/minibatches"] == 12
        assert r["perf/learner_graphed"] == 0.0  # nothing captured on a CPU
    # the schedule reached the optimizer's own tensor, filled in place
    lr = step.optimizer.param_groups[0]["lr"]
    assert isinstance(lr, torch.Tensor) and float(lr) == pytest.approx(
        recorded[-1]["losses/learning_rate"]
    )
    assert len(step.programs) == 1  # one recorded step, kept across updates


def test_a_non_finite_loss_is_found_once_per_update():
    torch.manual_seed(0)
    policy = build_model(ModelConfig(name="mlp"), (4,), 2)
    algo = PPO(PPOConfig(num_steps=8, num_minibatches=2, update_epochs=1), policy, seed=0)
    step = LocalGradientStep(policy, algo.optimizer_spec(), device=CPU, graphs=True)
    step.guard = NonFiniteGuard("raise")
    bad = _rollout()
    bad.rewards_TN[0, 0] = float("nan")
    with pytest.raises(NonFiniteError, match=r"\(\d+ of the update's minibatch steps"):
        algo.update(bad, step, Progress(0, 32, 1.0))
    warn = NonFiniteGuard("warn")
    step.guard = warn
    algo.update(bad, step, Progress(1, 64, 1.0))
    assert warn.found_total == 1


def step_spec(policy):
    return PPO(PPOConfig(), policy, seed=0).optimizer_spec()


def test_checkpoint_keeps_a_number_and_the_step_gets_its_tensor_back():
    policy, step, _ = _trained(graphs=True)
    state = step.state_dict()
    assert isinstance(state["param_groups"][0]["lr"], float)
    assert isinstance(step.optimizer.param_groups[0]["lr"], torch.Tensor)  # untouched
    other = LocalGradientStep(policy, step_spec(policy), device=CPU, graphs=True)
    other.load_state_dict(state)
    lr = other.optimizer.param_groups[0]["lr"]
    assert isinstance(lr, torch.Tensor) and float(lr) == pytest.approx(
        state["param_groups"][0]["lr"]
    )


def test_a_checkpoint_from_another_device_keeps_this_steps_implementation():
    # a GPU run's recorded step saved capturable Adam; resumed on a CPU it must not be
    policy, step, _ = _trained(graphs=False)
    state = step.state_dict()
    for group in state["param_groups"]:
        group.update(capturable=True, foreach=False)
    resumed = LocalGradientStep(policy, step_spec(policy), device=CPU, graphs=True)
    resumed.load_state_dict(state)
    group = resumed.optimizer.param_groups[0]
    assert group["capturable"] is False and group["foreach"] is False
    assert float(group["lr"]) == pytest.approx(state["param_groups"][0]["lr"])
    policy(torch.zeros(2, 4))[0].sum().backward()
    resumed.optimizer.step()  # steps on the CPU


def test_graphed_call_on_a_cpu_just_calls():
    calls = []
    graphed = GraphedCall(lambda: calls.append(1), CPU)
    for _ in range(5):
        graphed()
    assert len(calls) == 5 and not graphed.graphed and graphed.failure is None


def _cfg(**changes) -> RunConfig:
    cfg = RunConfig()
    cfg.env.id = "ALE/Pong-v5"
    cfg.runner.learner_device = "cuda"
    cfg.runner.actor_device = "cuda"
    cfg.runner.cuda_graph = True
    for key, value in changes.items():
        section, name = key.split("__")
        target = cfg if section == "run" else getattr(cfg, section)
        setattr(target, name, value)
    return cfg


def test_the_config_refuses_what_a_recorded_step_cannot_do():
    check(_cfg(), on_this_machine=False)  # ppo on a CUDA learner: fine
    check(_cfg(runner__learner_device="cpu", runner__actor_device="cpu"))  # runs unrecorded
    refusals = {
        "algorithm ppo, appo, pqn, not dqn": dataclasses.replace(_cfg(), algo="dqn"),
        "runner.num_learners=1": _cfg(runner__num_learners=2),
        "runner.compile=false": _cfg(runner__compile=True),
        "nan_policy raise, warn or none": _cfg(run__nan_policy="skip_update"),
        "unset ppo.target_kl": _cfg(ppo__target_kl=0.02),
    }
    for words, cfg in refusals.items():
        with pytest.raises(
            ConfigError, match=r"^runner.cuda_graph needs .*" + words.replace(".", r"\.")
        ):
            check(cfg, on_this_machine=False)


def test_recorded_acting_on_a_cpu_acts_as_the_eager_collector():
    from rlperf.config.schema import EnvConfig
    from rlperf.envs.make import make_vector_env
    from rlperf.runners.collector import RolloutCollector
    from rlperf.telemetry.timers import PhaseTimer

    rollouts = []
    for graphed in (False, True):
        envs = make_vector_env(EnvConfig(id="CartPole-v1", num_envs=4), 84, 0)
        torch.manual_seed(0)
        policy = build_model(ModelConfig(name="mlp"), (4,), 2)
        collector = RolloutCollector(envs, policy, CPU, "fp32", envs.reset(0), graphed=graphed)
        buf = Rollout.allocate(16, 4, (4,), torch.float32)
        collector.collect(buf, PhaseTimer())
        rollouts.append(buf)
        envs.close()
    eager, recorded = rollouts
    torch.testing.assert_close(recorded.actions_TN, eager.actions_TN, rtol=0, atol=0)
    torch.testing.assert_close(recorded.logprobs_TN, eager.logprobs_TN)
    torch.testing.assert_close(recorded.obs_TN, eager.obs_TN)


def test_a_failed_capture_falls_back_to_eager_calls(monkeypatch, capsys):
    # A fake CUDA: the warm-up runs in place of the side stream, and the capture raises as
    # torch does on an operation a graph cannot record.
    calls = []
    graphed = GraphedCall(lambda: calls.append(1), CPU)
    graphed.capture = True
    monkeypatch.setattr(GraphedCall, "_on_side_stream", lambda self: self.fn())

    def failing_graph(graph):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(torch.cuda, "CUDAGraph", lambda: object())
    monkeypatch.setattr(torch.cuda, "graph", failing_graph)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    for _ in range(6):
        graphed()
    assert len(calls) == 6  # every call did its work, the failed capture's included
    assert not graphed.graphed and "not permitted" in graphed.failure
    assert "runner.cuda_graph: capture failed" in capsys.readouterr().err
