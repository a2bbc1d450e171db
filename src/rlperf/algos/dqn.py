"""Deep Q-Networks (Mnih et al. 2015, "Human-level control through deep reinforcement
learning"), with the options of source 003's Pong runs.

Reads top to bottom: the Q-network, the exploration schedule and the epsilon-greedy
behaviour, the TD target and loss, then the update: one gradient step per row of the
batch's G axis, and a target-network copy every ``target_network_frequency`` env steps.

The algorithm never steps an env. It declares transitions (``DataSpec.kind``) with its
replay size, batch size, train frequency and learning start; the runner keeps the replay,
interleaves env steps with gradient steps as asked, and acts through :attr:`DQN.behaviour`.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from rlperf.config.schema import DQNConfig
from rlperf.config.section import ANY_POLICY_LAG
from rlperf.core.protocols import GradientStep, OptimizerSpec
from rlperf.core.types import DataSpec, Progress, Transitions
from rlperf.models.policy import ActorCritic, network_input

LOSS_EMA_ALPHA = 0.98
"""Smoothing of ``losses/avg_loss`` (source 003 smooths the loss as it smooths rewards)."""


# ---------------------------------------------------------------- the network


class QNetwork(nn.Module):
    """Q(s, .) for discrete actions: a torso from ``models/`` and one linear layer.

    With the Nature-CNN torso this is the Nature paper's network. Observations enter as the
    env gives them (uint8 frames) and are scaled inside, like the actor-critic's.
    """

    def __init__(self, torso: nn.Module, features: int, num_actions: int) -> None:
        super().__init__()
        self.torso = torso
        self.q_head = nn.Linear(features, num_actions)

    @classmethod
    def from_actor_critic(cls, policy: ActorCritic) -> QNetwork:
        """The policy torso of a built model (``models.catalog.build_model``) with a Q head
        in place of the logits and value heads."""
        head = policy.logits_head
        return cls(policy.policy_torso, head.in_features, head.out_features)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Action values (B, A)."""
        return self.q_head(self.torso(network_input(obs)))


def _maybe_no_grad(enabled: bool) -> contextlib.AbstractContextManager[Any]:
    """torch.no_grad() unless the run measures the cost of building graphs (rung 00)."""
    return torch.no_grad() if enabled else contextlib.nullcontext()


# ---------------------------------------------------------------- exploration


def linear_epsilon(elapsed: float, start_e: float, end_e: float, duration: float) -> float:
    """Epsilon decayed linearly from ``start_e`` to ``end_e`` over ``duration``, then held at
    ``end_e``: ``elapsed`` and ``duration`` in env steps (DQN), or as shares of the run's
    budget (PQN)."""
    if duration <= 0:
        return end_e
    return start_e + (end_e - start_e) * min(elapsed / duration, 1.0)


class EpsilonGreedy:
    """The behaviour policy: a uniformly random action with probability epsilon, else the
    greedy action of :attr:`network` (implements ``core.protocols.Behaviour``)."""

    def __init__(self, network: QNetwork, cfg: DQNConfig, exploration_steps: int, seed: int):
        self.network = network
        self.start_e, self.end_e = cfg.start_e, cfg.end_e
        self.exploration_steps = exploration_steps
        self.no_grad = cfg.no_grad
        self.generator = torch.Generator().manual_seed(seed)

    def epsilon(self, env_steps: int) -> float:
        return linear_epsilon(env_steps, self.start_e, self.end_e, self.exploration_steps)

    def act(self, obs: torch.Tensor, env_steps: int) -> torch.Tensor:
        eps = self.epsilon(env_steps)
        # The network is evaluated even when every action will be random, as in 003: the
        # ladder measures a fixed amount of work per step.
        with _maybe_no_grad(self.no_grad):
            q = self.network(obs)
        greedy = q.argmax(-1).cpu()
        n, num_actions = greedy.shape[0], q.shape[-1]
        explore = torch.rand(n, generator=self.generator) < eps
        random = torch.randint(num_actions, (n,), generator=self.generator)
        return torch.where(explore, random, greedy)

    def state_dict(self) -> dict[str, Any]:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.generator.set_state(state["generator"])

    def __getstate__(self) -> dict[str, Any]:
        # torch.multiprocessing cannot send a Generator to a spawned process (its state
        # tensor fails to rebuild there); its state travels as plain bytes instead.
        state = dict(self.__dict__)
        state["generator"] = bytes(self.generator.get_state().numpy())
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        generator = torch.Generator()
        generator.set_state(torch.frombuffer(bytearray(state["generator"]), dtype=torch.uint8))
        self.__dict__.update({**state, "generator": generator})


# ---------------------------------------------------------------- the loss


def td_target(
    online: nn.Module,
    target: nn.Module,
    rewards: torch.Tensor,
    next_obs: torch.Tensor,
    dones: torch.Tensor,
    discounts: torch.Tensor | float,
    double_q: bool,
) -> torch.Tensor:
    """r + discount (1 - done) Q_target(s', a*): a* = argmax of Q_target (DQN) or of the
    online network (double DQN, which removes the max's upward bias). The discount is gamma
    for a one-step transition, gamma^m for an m-step return ``r`` (s' then m steps on).
    Detached."""
    # Cast once for both passes (uint8 frames to the autocast dtype, or float32).
    next_in = network_input(next_obs)
    next_q = target(next_in)
    best = (online(next_in) if double_q else next_q).argmax(-1, keepdim=True)
    next_value = next_q.gather(-1, best).squeeze(-1).float()
    return (rewards + discounts * (1.0 - dones) * next_value).detach()


def td_loss(q_taken: torch.Tensor, target: torch.Tensor, kind: str) -> torch.Tensor:
    """Mean squared TD error (003), or Huber (quadratic within 1, linear outside: the Nature
    paper's clipping of the error term to [-1, 1])."""
    if kind == "huber":
        return F.smooth_l1_loss(q_taken, target)
    return F.mse_loss(q_taken, target)


# ---------------------------------------------------------------- the algorithm


class DQN:
    """DQN over transitions produced by any transitions runner (``inproc``, ``play-train``)."""

    def __init__(
        self,
        cfg: DQNConfig,
        network: QNetwork,
        *,
        seed: int,
        total_timesteps: int | None = None,
    ) -> None:
        """``total_timesteps`` (the run's step budget) sizes the exploration decay when
        ``cfg.exploration_steps`` is unset."""
        self.cfg = cfg
        self.policy = network
        # The target network keeps requires_grad like the online one: then only no_grad
        # (not a frozen copy) stops the target pass from recording a graph, which is the
        # cost the slow-grads rung measures. Its parameters are not in the optimizer.
        self.target = copy.deepcopy(network)
        if cfg.exploration_steps is not None:
            exploration = cfg.exploration_steps
        elif total_timesteps:
            exploration = int(cfg.exploration_fraction * total_timesteps)
        else:
            raise ValueError("dqn.exploration_steps is needed without stop.total_timesteps")
        self.behaviour = EpsilonGreedy(network, cfg, exploration, seed)
        self.data_spec = DataSpec(
            kind="transitions",
            horizon=cfg.steps_per_iteration,
            needs_logprob=False,
            needs_value=False,
            max_policy_lag=ANY_POLICY_LAG,  # off-policy: replayed data is old anyway
            buffer_size=cfg.buffer_size,
            batch_size=cfg.batch_size,
            train_frequency=cfg.train_frequency,
            learning_starts=cfg.learning_starts,
            n_step=cfg.n_step,
            gamma=cfg.gamma,
        )
        self.gradient_steps = 0
        self.target_syncs = 0
        self.synced_at = 0
        """Env steps at the last target sync."""
        self.last_loss: float | None = None
        self.avg_loss: float | None = None
        self.last_q: float | None = None
        self._target_placed = False

    def _place_target(self) -> None:
        """Put the target network where the runner put the online one (device, and the
        channels-last layout of conv weights), once, before the first target pass."""
        params = list(self.policy.parameters())
        self.target.to(params[0].device)
        conv = next((p for p in params if p.dim() == 4), None)
        if conv is not None and conv.is_contiguous(memory_format=torch.channels_last):
            self.target.to(memory_format=torch.channels_last)
        self._target_placed = True

    def optimizer_spec(self) -> OptimizerSpec:
        # Fused: a gradient step here is a batch of 32 through a small network, where Adam's
        # foreach form (a pass per operation and tensor) was a quarter of the step on a CPU;
        # fused, `dqn-fast` ran 1.12x the env steps per second (docs/benchmarks-algorithms.md).
        return OptimizerSpec("adam", self.cfg.learning_rate, self.cfg.adam_eps, fused=True)

    def update(
        self, batch: Transitions, step: GradientStep, progress: Progress
    ) -> dict[str, float]:
        """One gradient step per row of ``batch``'s G axis (none for G = 0), then the target
        sync when due; returns 003's metrics (loss, avg_loss, epsilon) as ``losses/...``."""
        cfg = self.cfg
        if not self._target_placed:
            self._place_target()
        grad_norm = float("nan")
        for g in range(batch.num_gradient_steps):
            obs, actions = batch.obs_GB[g], batch.actions_GB[g]
            # One autocast region for the three passes: autocast keeps the weights it cast
            # until the region ends, so the online network's are cast once per gradient step,
            # not once per pass (the kept casts still carry gradients to the float32 weights).
            with step.autocast():
                q_taken = self.policy(obs).gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
                with _maybe_no_grad(cfg.no_grad):
                    target = td_target(
                        self.policy,
                        self.target,
                        batch.rewards_GB[g],
                        batch.next_obs_GB[g],
                        batch.dones_GB[g],
                        batch.discounts_GB[g],
                        cfg.double_q,
                    )
            loss = td_loss(q_taken.float(), target, cfg.loss)
            grad_norm = step(loss, cfg.max_grad_norm)
            self.gradient_steps += 1
            self.last_loss = float(loss.detach())
            self.last_q = float(q_taken.detach().mean())
            self.avg_loss = (
                self.last_loss
                if self.avg_loss is None
                else LOSS_EMA_ALPHA * self.avg_loss + (1 - LOSS_EMA_ALPHA) * self.last_loss
            )
        if self.gradient_steps and batch.env_steps - self.synced_at >= cfg.target_network_frequency:
            self.target.load_state_dict(self.policy.state_dict())
            self.synced_at = batch.env_steps
            self.target_syncs += 1
        metrics = {
            "losses/epsilon": self.behaviour.epsilon(batch.env_steps),
            "losses/learning_rate": cfg.learning_rate,
            "losses/gradient_steps": float(self.gradient_steps),
            "losses/target_syncs": float(self.target_syncs),
        }
        if self.last_loss is not None:
            metrics["losses/loss"] = self.last_loss
            metrics["losses/avg_loss"] = self.avg_loss  # type: ignore[assignment]
            metrics["losses/q_values"] = self.last_q  # type: ignore[assignment]
        if batch.num_gradient_steps and cfg.max_grad_norm is not None:
            metrics["losses/grad_norm"] = grad_norm
        return metrics

    def state_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy.state_dict(),
            "target": self.target.state_dict(),
            "behaviour": self.behaviour.state_dict(),
            "gradient_steps": self.gradient_steps,
            "target_syncs": self.target_syncs,
            "synced_at": self.synced_at,
            "last_loss": self.last_loss,
            "avg_loss": self.avg_loss,
            "last_q": self.last_q,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.policy.load_state_dict(state["policy"])
        self.target.load_state_dict(state["target"])
        self.behaviour.load_state_dict(state["behaviour"])
        self.gradient_steps = int(state["gradient_steps"])
        self.target_syncs = int(state["target_syncs"])
        self.synced_at = int(state["synced_at"])
        self.last_loss, self.avg_loss, self.last_q = (
            state["last_loss"],
            state["avg_loss"],
            state["last_q"],
        )
