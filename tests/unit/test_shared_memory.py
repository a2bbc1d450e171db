"""Versioned shared weights and rollout slots of the decoupled runner."""

import threading
import time

import torch
from torch import nn

from rlperf.core.types import Rollout
from rlperf.runners.shared_memory import (
    RolloutSlots,
    SharedPolicyWeights,
    empty_batch,
    gather_rollouts,
)


def _net(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))


def test_pull_copies_the_published_weights_and_their_version():
    learner, actor = _net(0), _net(1)
    weights = SharedPolicyWeights(learner)
    assert weights.version == 0
    assert weights.publish(learner) == 1
    assert actor(torch.ones(1, 4)).tolist() != learner(torch.ones(1, 4)).tolist()
    assert weights.pull(actor, have=-1) == 1
    for a, b in zip(actor.state_dict().values(), learner.state_dict().values(), strict=True):
        assert torch.equal(a, b)


def test_pull_skips_the_copy_when_the_version_is_current():
    learner, actor = _net(0), _net(1)
    weights = SharedPolicyWeights(learner)
    version = weights.pull(actor, have=-1)  # version 0: the zero-filled buffer
    with torch.no_grad():
        actor[0].weight.fill_(7.0)
    assert weights.pull(actor, have=version) == version
    assert torch.all(actor[0].weight == 7.0)


def test_pull_waits_while_a_publication_is_in_progress():
    learner, actor = _net(0), _net(1)
    weights = SharedPolicyWeights(learner)
    weights.publish(learner)
    weights.seq += 1  # a writer has started (odd sequence) and not finished

    def finish() -> None:
        time.sleep(0.2)
        weights.seq += 1

    threading.Thread(target=finish).start()
    start = time.monotonic()
    assert weights.pull(actor, have=-1) == 2
    assert time.monotonic() - start >= 0.15


def test_slots_are_views_and_gather_concatenates_along_the_env_axis():
    slots = RolloutSlots(3, num_steps=5, num_envs=2, obs_shape=(4,), obs_dtype=torch.uint8)
    assert slots.data.obs_TN.is_shared()
    slots[1].rewards_TN.fill_(1.0)
    slots[2].rewards_TN.fill_(2.0)
    slots[2].next_obs_N.fill_(9)
    assert slots.data.rewards_TN[0].sum() == 0 and slots.data.rewards_TN[1].sum() == 10
    out = empty_batch(slots[0], num_envs=4)
    batch = gather_rollouts([slots[1], slots[2]], out)
    assert isinstance(batch, Rollout) and batch.obs_TN.shape == (5, 4, 4)
    assert batch.rewards_TN[:, :2].eq(1).all() and batch.rewards_TN[:, 2:].eq(2).all()
    assert batch.next_obs_N.shape == (4, 4) and batch.next_obs_N[2:].eq(9).all()
