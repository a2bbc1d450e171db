"""Actor-critic policies for discrete actions: torso(s) + a logits head + a value head."""

from __future__ import annotations

import math

import torch
from torch import nn


def orthogonal_init(module: nn.Module, gain: float) -> None:
    """Orthogonal weights and zero biases on every Conv2d/Linear in ``module``.

    The standard for PPO on Atari (Engstrom et al. 2020 list it among the implementation
    details that matter): sqrt(2) in the torso, 0.01 for logits (a near-uniform initial
    policy), 1.0 for the value head.
    """
    for m in module.modules():
        if isinstance(m, nn.Conv2d | nn.Linear):
            nn.init.orthogonal_(m.weight, gain)
            nn.init.zeros_(m.bias)


def network_input(obs: torch.Tensor) -> torch.Tensor:
    """``obs`` as a network's first layer takes it: in the autocast dtype inside an autocast
    region, else float32.

    Raw uint8 frames go straight to bf16/fp16, where 0..255 are exact, rather than through a
    float32 copy of the batch that autocast would cast down again; their 1/255 scaling is
    folded into the first conv's weight (``models.conv.InputScaledConv2d``).
    """
    device_type = obs.device.type
    if torch.is_autocast_enabled(device_type):
        return obs.to(torch.get_autocast_dtype(device_type))
    return obs.float()


def scale_gradient(x: torch.Tensor, scale: float) -> torch.Tensor:
    """``x`` unchanged going forward; the gradient flowing back through it times ``scale``."""
    if scale == 1.0 or not x.requires_grad:
        return x
    if scale == 0.0:
        return x.detach()
    frozen = x.detach()
    # frozen + scale * 0 is x exactly, whatever the dtype; only the gradient sees the scale.
    return frozen + scale * (x - frozen)


class ActorCritic(nn.Module):
    """A policy and a value function over discrete actions.

    Observations enter as they come from the env (uint8 frames stay uint8 until here) and
    are scaled inside the torsos' first layer, so exported graphs take the raw observation.
    With ``value_torso=None`` the value head shares the policy torso (``vf_share_layers=True``)
    and ``value_grad_scale`` weighs the value loss's gradient where it enters that torso
    (``model.vf_torso_grad_scale``; 1 = plain sharing, 0 = the torso learns from the policy alone).
    """

    def __init__(
        self,
        policy_torso: nn.Module,
        value_torso: nn.Module | None,
        features: int,
        num_actions: int,
        value_grad_scale: float = 1.0,
    ) -> None:
        super().__init__()
        self.policy_torso = policy_torso
        self.value_torso = value_torso
        self.value_grad_scale = value_grad_scale
        self.logits_head = nn.Linear(features, num_actions)
        self.value_head = nn.Linear(features, 1)
        orthogonal_init(self.policy_torso, math.sqrt(2))
        if self.value_torso is not None:
            orthogonal_init(self.value_torso, math.sqrt(2))
        orthogonal_init(self.logits_head, 0.01)
        orthogonal_init(self.value_head, 1.0)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(logits (B, A), value (B,))."""
        x = network_input(obs)
        hidden = self.policy_torso(x)
        value_hidden = self.value_features(x, hidden)
        return self.logits_head(hidden), self.value_head(value_hidden).squeeze(-1)

    def value_features(
        self, x: torch.Tensor, policy_hidden: torch.Tensor | None = None
    ) -> torch.Tensor:
        """What the value heads read from the network input ``x``: the value torso's features,
        or the shared torso's (``policy_hidden`` when already computed) with the value's
        gradient into the torso scaled by ``value_grad_scale``."""
        if self.value_torso is not None:
            return self.value_torso(x)
        hidden = self.policy_torso(x) if policy_hidden is None else policy_hidden
        return scale_gradient(hidden, self.value_grad_scale)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """Value estimates (B,) without computing logits when the towers are separate."""
        return self.value_head(self.value_features(network_input(obs))).squeeze(-1)

    @torch.no_grad()
    def act(
        self, obs: torch.Tensor, deterministic: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sample actions; returns (actions, logprobs, values), computed without autograd."""
        logits, value = self(obs)
        logp_all = logits.float().log_softmax(-1)
        if deterministic:
            actions = logp_all.argmax(-1)
        else:
            # Gumbel-max sampling is one fused elementwise op + argmax, cheaper than
            # torch.distributions.Categorical's validation and multinomial for small batches.
            gumbel = -torch.empty_like(logp_all).exponential_().log()
            actions = (logp_all + gumbel).argmax(-1)
        return actions, logp_all.gather(-1, actions.unsqueeze(-1)).squeeze(-1), value.float()

    def evaluate(
        self, obs: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(logprobs of ``actions``, entropies, values) with gradients, for the loss."""
        logits, value = self(obs)
        logp_all = logits.float().log_softmax(-1)
        logprob = logp_all.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
        entropy = -(logp_all.exp() * logp_all).sum(-1)
        return logprob, entropy, value.float()
