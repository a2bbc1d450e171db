"""Networks of Random Network Distillation (Burda et al. 2018).

- :class:`RNDPolicy`: the actor-critic with a second value head. The extrinsic head is the
  built model's own ``value_head`` (so runners, exporters and evaluation treat it like any
  actor-critic); the intrinsic head sits on the same value features.
- :class:`RNDNetworks`: a fixed random *target* network and a trained *predictor* that is
  deeper than the target (the paper's appendix A.4: predictor = target's convs plus two more
  fully connected layers), both on one normalised frame. The predictor's error is the
  intrinsic reward: large on observations unlike those it has been trained on.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from rlperf.models.conv import NATURE_CNN
from rlperf.models.policy import ActorCritic, network_input, orthogonal_init

EMBEDDING = 512
"""Output size of target and predictor on images (the paper's 512)."""
MLP_EMBEDDING = 64
"""Output size of target and predictor on feature observations."""


def _conv_stack(in_channels: int, hw: tuple[int, int]) -> tuple[nn.Sequential, int]:
    """The Nature-CNN convolutions with leaky ReLUs (as in the paper's RND networks)."""
    layers: list[nn.Module] = []
    channels, (h, w) = in_channels, hw
    for out_ch, (k, _), stride in NATURE_CNN:
        layers += [nn.Conv2d(channels, out_ch, k, stride), nn.LeakyReLU()]
        channels, h, w = out_ch, (h - k) // stride + 1, (w - k) // stride + 1
    layers.append(nn.Flatten())
    return nn.Sequential(*layers), channels * h * w


class RNDNetworks(nn.Module):
    """Target f (random, frozen) and predictor f_hat (trained) on normalised observations.

    ``input_shape`` is one frame, (C, H, W), or a feature vector, (D,). Inputs are expected
    already normalised (zero mean, unit variance, clipped): the algorithm owns that statistic.
    """

    def __init__(self, input_shape: tuple[int, ...]) -> None:
        super().__init__()
        self.input_shape = tuple(input_shape)
        if len(input_shape) == 3:
            target_convs, flat = _conv_stack(input_shape[0], (input_shape[1], input_shape[2]))
            predictor_convs, _ = _conv_stack(input_shape[0], (input_shape[1], input_shape[2]))
            self.target = nn.Sequential(target_convs, nn.Linear(flat, EMBEDDING))
            self.predictor = nn.Sequential(
                predictor_convs,
                nn.Linear(flat, EMBEDDING),
                nn.ReLU(),
                nn.Linear(EMBEDDING, EMBEDDING),
                nn.ReLU(),
                nn.Linear(EMBEDDING, EMBEDDING),
            )
        elif len(input_shape) == 1:
            d, e = input_shape[0], MLP_EMBEDDING
            self.target = nn.Sequential(nn.Linear(d, e), nn.LeakyReLU(), nn.Linear(e, e))
            self.predictor = nn.Sequential(
                nn.Linear(d, e), nn.LeakyReLU(), nn.Linear(e, e), nn.ReLU(), nn.Linear(e, e)
            )
        else:
            raise ValueError(f"RND networks take (C, H, W) or (D,) inputs, got {input_shape}")
        orthogonal_init(self.target, math.sqrt(2))
        orthogonal_init(self.predictor, math.sqrt(2))
        # The target is a fixed random function: never trained, so it holds no gradients and
        # the optimizer (built over trainable parameters) never sees it.
        for p in self.target.parameters():
            p.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(prediction, target embedding), both (B, E); the target carries no gradient."""
        with torch.no_grad():
            target = self.target(x)
        return self.predictor(x), target

    @torch.no_grad()
    def intrinsic_reward(self, x: torch.Tensor) -> torch.Tensor:
        """Prediction error per sample (B,): the mean squared distance of the embeddings."""
        prediction, target = self(x)
        return (prediction.float() - target.float()).square().mean(-1)


class RNDPolicy(ActorCritic):
    """An actor-critic with extrinsic and intrinsic value heads, and the RND networks.

    ``forward``/``act``/``evaluate``/``value`` are the actor-critic's, on the extrinsic
    head, so every runner acts with this network unchanged (the intrinsic value is only
    needed by the learner, which calls :meth:`evaluate_both`). The RND networks live in the
    same module so that one optimizer, one checkpoint entry and one weight publication cover
    them; actor processes receive them too but never run them.
    """

    def __init__(
        self,
        policy_torso: nn.Module,
        value_torso: nn.Module | None,
        features: int,
        num_actions: int,
        rnd_input_shape: tuple[int, ...],
        value_grad_scale: float = 1.0,
    ) -> None:
        super().__init__(policy_torso, value_torso, features, num_actions, value_grad_scale)
        self.int_value_head = nn.Linear(features, 1)
        orthogonal_init(self.int_value_head, 1.0)
        self.rnd = RNDNetworks(rnd_input_shape)

    @classmethod
    def from_actor_critic(cls, policy: ActorCritic, rnd_input_shape: tuple[int, ...]) -> RNDPolicy:
        """The torsos of a built model (``models.catalog.build_model``) with both value heads
        and RND networks for inputs of ``rnd_input_shape``."""
        head = policy.logits_head
        return cls(
            policy.policy_torso,
            policy.value_torso,
            head.in_features,
            head.out_features,
            rnd_input_shape,
            policy.value_grad_scale,
        )

    def values(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(extrinsic, intrinsic) value estimates, each (B,), float32."""
        hidden = self.value_features(network_input(obs))
        return (
            self.value_head(hidden).squeeze(-1).float(),
            self.int_value_head(hidden).squeeze(-1).float(),
        )

    def evaluate_both(
        self, obs: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(logprobs of ``actions``, entropies, extrinsic values, intrinsic values), with
        gradients, for the loss."""
        x = network_input(obs)
        hidden = self.policy_torso(x)
        value_hidden = self.value_features(x, hidden)
        logp_all = self.logits_head(hidden).float().log_softmax(-1)
        logprob = logp_all.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
        entropy = -(logp_all.exp() * logp_all).sum(-1)
        return (
            logprob,
            entropy,
            self.value_head(value_hidden).squeeze(-1).float(),
            self.int_value_head(value_hidden).squeeze(-1).float(),
        )


def rnd_input_shape(obs_shape: tuple[int, ...], frame_stack: int) -> tuple[int, ...]:
    """What the RND networks see: the newest frame of a stacked image observation (its
    channels are the last ``C / frame_stack``), or the whole feature vector."""
    if len(obs_shape) == 3:
        channels = obs_shape[0] // max(frame_stack, 1)
        return (channels, obs_shape[1], obs_shape[2])
    return tuple(obs_shape)
