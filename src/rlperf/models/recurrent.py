"""A recurrent actor-critic for feature observations: source 002's LSTM variant.

002's pixel model ended its torso in an LSTM; for football's 115 features it tried two
64-unit layers followed by an LSTM of 256 units, with the actor and critic heads on its
output. An LSTM policy carries a state from step to step, so acting and learning differ
from the feed-forward models:

- acting goes step by step: :meth:`RecurrentActorCritic.step` takes the (h, c) state and
  returns the next one; the state of an env is zeroed when its episode ends;
- learning replays a whole segment from the state it started with
  (:meth:`RecurrentActorCritic.evaluate_sequence`), so gradients flow through time within
  the segment (truncated back-propagation through time, as in A3C).

A :class:`RecurrentRollout` carries that start state with the segment. The hogwild runner's
workers act this way; the synchronous runners and the deploy tools need ``act(obs)`` without
a state and do not run this model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from rlperf.core.errors import ConfigError
from rlperf.core.types import Rollout
from rlperf.models.policy import orthogonal_init

State = tuple[torch.Tensor, torch.Tensor]
"""(h, c), each (N, lstm_size)."""


@dataclass
class RecurrentRollout(Rollout):
    """A rollout of a recurrent policy: also the LSTM state before its first step, and after
    its last (for the bootstrap value)."""

    initial_h_N: torch.Tensor | None = None
    initial_c_N: torch.Tensor | None = None
    final_h_N: torch.Tensor | None = None
    final_c_N: torch.Tensor | None = None


class RecurrentActorCritic(nn.Module):
    """Linear layers (tanh), an LSTM cell, and logits and value heads on its output."""

    is_recurrent = True

    def __init__(
        self,
        obs_size: int,
        num_actions: int,
        hidden_sizes: tuple[int, ...] = (64, 64),
        lstm_size: int = 256,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        size = obs_size
        for h in hidden_sizes:
            layers += [nn.Linear(size, h), nn.Tanh()]
            size = h
        self.torso = nn.Sequential(*layers)
        self.lstm = nn.LSTMCell(size, lstm_size)
        self.logits_head = nn.Linear(lstm_size, num_actions)
        self.value_head = nn.Linear(lstm_size, 1)
        self.lstm_size = lstm_size
        orthogonal_init(self.torso, math.sqrt(2))
        orthogonal_init(self.logits_head, 0.01)
        orthogonal_init(self.value_head, 1.0)
        nn.init.zeros_(self.lstm.bias_ih)
        nn.init.zeros_(self.lstm.bias_hh)

    def initial_state(self, n: int) -> State:
        zeros = torch.zeros(n, self.lstm_size, device=self.logits_head.weight.device)
        return zeros, zeros.clone()

    def step(self, obs: torch.Tensor, state: State) -> tuple[torch.Tensor, torch.Tensor, State]:
        """One step for a batch of envs: (logits (N, A), value (N,), next state)."""
        h, c = self.lstm(self.torso(obs.float()), state)
        return self.logits_head(h), self.value_head(h).squeeze(-1), (h, c)

    @torch.no_grad()
    def act_step(
        self, obs: torch.Tensor, state: State, deterministic: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, State]:
        """Actions without autograd: (actions, logprobs, values, next state)."""
        logits, value, state = self.step(obs, state)
        logp_all = logits.log_softmax(-1)
        if deterministic:
            actions = logp_all.argmax(-1)
        else:
            gumbel = -torch.empty_like(logp_all).exponential_().log()
            actions = (logp_all + gumbel).argmax(-1)
        return actions, logp_all.gather(-1, actions.unsqueeze(-1)).squeeze(-1), value, state

    def evaluate_sequence(
        self,
        obs_TN: torch.Tensor,
        actions_TN: torch.Tensor,
        dones_TN: torch.Tensor,
        state: State,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, State]:
        """Replay a segment from ``state`` with gradients: (logprobs_TN, entropies_TN,
        values_TN, state after the last step). The state is zeroed after a step whose
        episode ended, exactly as when acting."""
        logprobs, entropies, values = [], [], []
        for t in range(obs_TN.shape[0]):
            logits, value, state = self.step(obs_TN[t], state)
            logp_all = logits.log_softmax(-1)
            logprobs.append(logp_all.gather(-1, actions_TN[t].long().unsqueeze(-1)).squeeze(-1))
            entropies.append(-(logp_all.exp() * logp_all).sum(-1))
            values.append(value)
            state = reset_ended(state, dones_TN[t])
        return torch.stack(logprobs), torch.stack(entropies), torch.stack(values), state

    def value_from(self, obs: torch.Tensor, state: State) -> torch.Tensor:
        """V(obs) given the state before it (the bootstrap value after a segment)."""
        return self.step(obs, state)[1]

    def act(self, obs: torch.Tensor, deterministic: bool = False) -> tuple[torch.Tensor, ...]:
        """Stateless acting is what the other runners and tools ask for: a user error here."""
        raise ConfigError(
            "model football-lstm acts step by step with a state: train it with --runner hogwild"
        )


def reset_ended(state: State, dones_N: torch.Tensor) -> State:
    """Zero the state of the envs whose episode ended (the next observation starts a new one)."""
    keep = (~dones_N.bool()).to(state[0].dtype).unsqueeze(-1)
    return state[0] * keep, state[1] * keep
