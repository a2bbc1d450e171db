"""RND's learner on a CUDA device (skipped without one): the update runs in fp32 and bf16,
its intrinsic rewards match the CPU's, and its state loads back on the CPU."""

import copy
import dataclasses
import math

import pytest
import torch

from rlperf.algos.rnd import RND
from rlperf.config.schema import ModelConfig, RNDConfig
from rlperf.core.optim import LocalGradientStep
from rlperf.core.types import Progress, Rollout
from rlperf.models.catalog import build_model
from rlperf.models.rnd import RNDPolicy

pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    pytest.mark.usefixtures("one_torch_thread"),  # tiny networks
]

T, N, ACTIONS = 8, 4, 18
CFG = RNDConfig(num_steps=T, num_init_steps=T, num_minibatches=2, update_epochs=2)
PROGRESS = Progress(iteration=0, env_steps=0, fraction_left=1.0)


def _batch(policy: RNDPolicy, device: torch.device) -> Rollout:
    g = torch.Generator().manual_seed(0)
    obs = torch.randint(0, 255, (T + 1, N, 4, 84, 84), dtype=torch.uint8, generator=g).to(device)
    actions, logprobs, values = policy.act(obs[:T].reshape(T * N, 4, 84, 84))
    return Rollout(
        obs_TN=obs[:T],
        actions_TN=actions.reshape(T, N),
        logprobs_TN=logprobs.reshape(T, N),
        values_TN=values.reshape(T, N),
        rewards_TN=(torch.rand(T, N, generator=g) < 0.05).float().to(device),
        dones_TN=torch.zeros(T, N, dtype=torch.bool, device=device),
        next_obs_N=obs[T],
        truncation_values_TN=torch.zeros(T, N, device=device),
    )


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_rnd_update_on_cuda(precision):
    torch.manual_seed(0)
    cpu_policy = RNDPolicy.from_actor_critic(
        build_model(ModelConfig(), (4, 84, 84), ACTIONS), (1, 84, 84)
    )
    policy = copy.deepcopy(cpu_policy).cuda()
    device = torch.device("cuda")
    algo = RND(CFG, policy, seed=0, num_envs=N, use_vtrace=True)
    step = LocalGradientStep(policy, algo.optimizer_spec(), device=device, precision=precision)
    batch = _batch(policy, device)
    assert algo.update(batch, step, PROGRESS) == {"charts/rnd_init_steps": float(T)}

    # the same normaliser and networks on the CPU give the same bonus
    cpu_algo = RND(CFG, cpu_policy, seed=0, num_envs=N, use_vtrace=True)
    cpu_algo.obs_rms.load_state_dict(algo.obs_rms.state_dict())
    frames = batch.obs_TN[:, :, -1:].reshape(T * N, 1, 84, 84)
    torch.testing.assert_close(
        algo.intrinsic_rewards(frames).cpu(),
        cpu_algo.intrinsic_rewards(frames.cpu()),
        rtol=1e-3,
        atol=1e-5,
    )

    metrics = algo.update(batch, step, PROGRESS)
    for key in (
        "losses/policy_loss",
        "losses/rnd_loss",
        "losses/value_loss_int",
        "charts/int_reward_mean",
    ):
        assert math.isfinite(metrics[key]), key
    assert all(p.is_cuda for p in policy.parameters())
    cpu_algo.load_state_dict(
        {k: v for k, v in algo.state_dict().items()}
        | {"policy": {k: v.cpu() for k, v in algo.state_dict()["policy"].items()}}
    )
    cpu_algo.update(_batch(cpu_policy, torch.device("cpu")), LocalGradientStep(
        cpu_policy, cpu_algo.optimizer_spec(), device=torch.device("cpu")), dataclasses.replace(PROGRESS))  # fmt: skip
