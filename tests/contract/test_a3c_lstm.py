"""The LSTM variant: replaying a segment reproduces acting exactly; it trains under hogwild."""

import dataclasses
import json

import numpy as np
import pytest
import torch

from rlperf.cli import main
from rlperf.config.schema import EnvConfig, ModelConfig
from rlperf.core.errors import ConfigError
from rlperf.core.types import Rollout
from rlperf.envs.football import ENV_ID
from rlperf.envs.make import make_vector_env
from rlperf.models.catalog import build_model
from rlperf.models.recurrent import RecurrentActorCritic, RecurrentRollout
from rlperf.runners.hogwild_worker import RecurrentCollector, _empty_rollout
from rlperf.telemetry.timers import PhaseTimer
from tests.conftest import read_metrics


def test_replay_of_a_segment_matches_acting_including_episode_ends():
    # One thread: a batch-of-2 LSTM step only loses time to a second thread on a busy machine.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _replay_matches_acting()
    finally:
        torch.set_num_threads(threads)


def _replay_matches_acting():
    torch.manual_seed(0)
    envs = make_vector_env(EnvConfig(id=ENV_ID, num_envs=2), 84, seed=3)
    policy = build_model(ModelConfig(name="football-lstm"), (115,), 19)
    assert isinstance(policy, RecurrentActorCritic)
    collector = RecurrentCollector(envs, policy, envs.reset(3))

    base = _empty_rollout(envs, 200)
    buf = RecurrentRollout(**{f.name: getattr(base, f.name) for f in dataclasses.fields(Rollout)})
    for _ in range(2):  # the second segment starts from a carried-over state
        collector.collect(buf, PhaseTimer())
    assert buf.dones_TN.any()  # an episode ended inside the segment
    assert buf.initial_h_N.abs().sum() > 0
    logprob, _, value, final = policy.evaluate_sequence(
        buf.obs_TN, buf.actions_TN, buf.dones_TN, (buf.initial_h_N, buf.initial_c_N)
    )
    torch.testing.assert_close(logprob.detach(), buf.logprobs_TN, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(value.detach(), buf.values_TN, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(final[0].detach(), buf.final_h_N)
    # Gradients flow through time within the segment.
    value[-1].sum().backward()
    assert policy.lstm.weight_hh.grad.abs().sum() > 0
    envs.close()
    with pytest.raises(ConfigError, match="hogwild"):
        policy.act(torch.zeros(1, 115))


def test_lstm_variant_trains_with_the_hogwild_runner(runs_root):
    code = main(
        [
            "train",
            "--preset",
            "a3c-football-quick",
            "--model",
            "football-lstm",
            "--runs-root",
            str(runs_root),
            "-s",
            "lstm",
            "--no-progress",
            "telemetry.tensorboard=false",
            "stop.total_timesteps=400",
            "stop.target_reward=null",
            "runner.eval_interval_s=0.2",
        ]  # fmt: skip
    )
    assert code == 0
    rows = read_metrics(runs_root / "lstm")
    assert rows[-1]["timesteps_total"] >= 400
    assert all(np.isfinite(r["losses/policy_loss"]) for r in rows)
    manifest = json.loads((runs_root / "lstm" / "manifest.json").read_text())
    assert manifest["status"] == "completed"
