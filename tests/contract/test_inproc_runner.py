"""The in-process runner honours the runner contract: shapes, episode ends, weight sync."""

import torch

from rlperf.algos.ppo import PPO
from rlperf.config.schema import EnvConfig, ModelConfig, PPOConfig, RunnerConfig
from rlperf.core.types import Progress
from rlperf.envs.make import make_vector_env
from rlperf.models.catalog import build_model
from rlperf.runners.inproc import InProcRunner
from rlperf.telemetry.timers import PhaseTimer


def _setup(actor_device: str = "cpu", act_threads: int | None = None):
    torch.manual_seed(0)
    envs = make_vector_env(EnvConfig(id="CartPole-v1", num_envs=3), dim=84, seed=0)
    policy = build_model(ModelConfig(name="mlp"), (4,), 2)
    algo = PPO(PPOConfig(num_steps=50, num_minibatches=2, update_epochs=1), policy, seed=0)
    # "cpu:0" is a distinct torch.device from "cpu": it exercises the separate acting copy
    # that a GPU learner with CPU actors uses, on a machine without a GPU.
    cfg = RunnerConfig(actor_device=actor_device, act_threads=act_threads)
    runner = InProcRunner(cfg, envs, algo, seed=0)
    return runner, algo


def test_collect_fills_a_time_major_rollout_and_reports_true_episodes():
    runner, _ = _setup()
    timer = PhaseTimer()
    batch, episodes = runner.collect(timer)
    assert batch.obs_TN.shape == (50, 3, 4) and batch.next_obs_N.shape == (3, 4)
    assert batch.dones_TN.sum() == len(episodes) > 0  # CartPole: every done is a true game end
    assert all(0 <= e.env_index < 3 for e in episodes)
    times = timer.lap()
    assert times["policy_forward"] > 0 and times["env_step"] > 0
    # the logged log-probs are the acting policy's
    logp, _, _ = runner.actor.evaluate(batch.obs_TN[0], batch.actions_TN[0])
    torch.testing.assert_close(logp, batch.logprobs_TN[0])
    runner.close()


def test_separate_actor_copy_follows_the_learner_only_after_sync():
    runner, algo = _setup(actor_device="cpu:0")
    assert runner.actor is not runner.learner
    batch, _ = runner.collect(PhaseTimer())
    step = runner.make_gradient_step(algo)
    algo.update(runner.load(batch), step, Progress(0, 150, 1.0))
    pairs = list(zip(runner.actor.parameters(), runner.learner.parameters(), strict=True))
    assert any(not torch.equal(a, b) for a, b in pairs)
    runner.sync_weights()
    assert all(torch.equal(a, b) for a, b in pairs)
    runner.close()


def test_act_threads_apply_while_acting_and_the_learner_keeps_its_own():
    runner, _ = _setup(act_threads=1)
    seen: list[int] = []
    act = runner.actor.act

    def recording_act(obs):
        seen.append(torch.get_num_threads())
        return act(obs)

    runner.actor.act = recording_act  # type: ignore[method-assign]
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        runner.collect(PhaseTimer())
        assert seen == [1] * 50
        assert torch.get_num_threads() == 2  # restored for the update
    finally:
        torch.set_num_threads(before)
        runner.close()
