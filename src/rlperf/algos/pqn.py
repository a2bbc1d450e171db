"""Parallelised Q-Network (PQN; Gallici et al. 2024, "Simplifying Deep Temporal Difference
Learning", arXiv 2407.04811): Q-learning without a replay buffer or a target network.

Many vectorised envs collect a short rollout with an epsilon-greedy policy, Q(lambda) returns
are computed over it, and a few epochs of minibatch steps regress Q(s, a) onto them. LayerNorm
in the network (``model.layer_norm``) is what keeps this stable without a target network
(the paper's section 4). Its data is a rollout, like PPO's, so every runner that serves PPO
serves it: the acting network is :class:`QPolicy`, which answers the runners' ``act`` and
``value`` calls, and its exploration rate travels with its weights.

Reads top to bottom: the acting network, then the update.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch import nn

from rlperf.algos.dqn import linear_epsilon
from rlperf.algos.metrics import value_fit
from rlperf.algos.returns import q_lambda_returns
from rlperf.algos.surrogate import shuffled_minibatches
from rlperf.config.schema import PQNConfig
from rlperf.core.cuda_graph import GraphedCall
from rlperf.core.protocols import GradientStep, OptimizerSpec, RecordableStep
from rlperf.core.types import DataSpec, Progress, Rollout
from rlperf.models.policy import ActorCritic, network_input, orthogonal_init

# ---------------------------------------------------------------- the acting network


class QPolicy(nn.Module):
    """Q(s, .) on a torso of the model catalog, acting epsilon-greedily.

    It implements the runners' policy calls: :meth:`act` returns (actions, log-probabilities
    of the actions under the epsilon-greedy distribution, max_a Q(s, a)) and :meth:`value`
    returns max_a Q(s, a), which is what Q(lambda) bootstraps from (the rollout's
    ``values_TN``, the bootstrap observation and truncated episodes' final observations).

    ``epsilon`` is a buffer, not an attribute: runners that act with a copy of the network
    (decoupled actors, an acting device other than the learner's) receive it with the
    weights, and a recorded CUDA graph of :meth:`act` reads its current value.
    """

    def __init__(self, torso: nn.Module, features: int, num_actions: int) -> None:
        super().__init__()
        self.torso = torso
        self.q_head = nn.Linear(features, num_actions)
        orthogonal_init(self.q_head, 1.0)
        self.register_buffer("epsilon", torch.ones(()))

    @classmethod
    def from_actor_critic(cls, policy: ActorCritic) -> QPolicy:
        """The policy torso of a built model (``models.catalog.build_model``) with a Q head in
        place of its logits and value heads."""
        head = policy.logits_head
        return cls(policy.policy_torso, head.in_features, head.out_features)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Action values (B, A), float32."""
        return self.q_head(self.torso(network_input(obs))).float()

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """max_a Q(s, a), (B,)."""
        return self(obs).max(-1).values

    @torch.no_grad()
    def act(
        self, obs: torch.Tensor, deterministic: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Epsilon-greedy actions (greedy when ``deterministic``), their log-probabilities
        under that rule, and max_a Q(s, a)."""
        q = self(obs)
        best, greedy = q.max(-1)
        if deterministic:
            return greedy, torch.zeros_like(best), best
        # Tensor ops only (no Python branch on epsilon), so a CUDA graph can record the call.
        explore = torch.rand(greedy.shape, device=q.device) < self.epsilon
        random = torch.randint(0, q.shape[-1], greedy.shape, device=q.device)
        actions = torch.where(explore, random, greedy)
        return actions, self._log_prob(actions, greedy, q.shape[-1]), best

    def evaluate(
        self, obs: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(log-probabilities of ``actions`` under the epsilon-greedy rule, its entropy,
        Q(s, a)) with gradients through Q(s, a): the policy protocol's view of the network."""
        q = self(obs)
        actions = actions.long()
        log_p = self._log_prob(actions, q.argmax(-1), q.shape[-1])
        all_actions = torch.arange(q.shape[-1], device=q.device).expand_as(q)
        log_p_all = self._log_prob(all_actions, q.argmax(-1, keepdim=True), q.shape[-1])
        entropy = torch.special.entr(log_p_all.exp()).sum(-1)  # 0 log 0 = 0 at epsilon 0
        return log_p, entropy, q.gather(-1, actions.unsqueeze(-1)).squeeze(-1)

    def _log_prob(
        self, actions: torch.Tensor, greedy: torch.Tensor, num_actions: int
    ) -> torch.Tensor:
        """log P(action) under epsilon-greedy: epsilon / A for any action, plus 1 - epsilon
        for the greedy one."""
        uniform = self.epsilon / num_actions
        return torch.where(actions == greedy, 1.0 - self.epsilon + uniform, uniform).log()


# ---------------------------------------------------------------- the update


def q_lambda_loss(q_taken: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """0.5 x the mean squared error between Q(s_t, a_t) and its Q(lambda) return (the
    paper's Algorithm 1); the targets carry no gradient (no target network: the network that
    acted computed them)."""
    return 0.5 * ((q_taken - targets) ** 2).mean()


class RecordedQStep:
    """PQN's minibatch step (forward, :func:`q_lambda_loss`, backward, clipping, optimizer)
    over fixed buffers, so that it can run as one CUDA graph (:class:`GraphedCall`;
    ``runner.cuda_graph``).

    Each minibatch is copied into the buffers first; the loss, the mean Q(s, a), the gradient
    norms and a count of non-finite steps add up on the device and are read once per update.
    The learning rate is the optimizer's own tensor, filled in place."""

    def __init__(
        self,
        policy: QPolicy,
        step: RecordableStep,
        obs_B: torch.Tensor,
        mb_size: int,
        max_grad_norm: float | None,
    ) -> None:
        device = obs_B.device
        self.policy, self.step, self.max_grad_norm = policy, step, max_grad_norm
        self.obs = obs_B.new_empty((mb_size, *obs_B.shape[1:]))
        self.actions = torch.zeros((mb_size, 1), dtype=torch.long, device=device)
        self.targets = torch.zeros(mb_size, device=device)
        # td_loss, q_values, grad_norm, non-finite steps
        self.sums = torch.zeros(4, device=device)
        self.steps = 0
        self.call = GraphedCall(self._step, device)

    def _step(self) -> None:
        with self.step.autocast():
            q = self.policy(self.obs)
        q_taken = q.gather(-1, self.actions).squeeze(-1)
        loss = q_lambda_loss(q_taken, self.targets)
        grad_norm = self.step.apply(loss, self.max_grad_norm)
        nonfinite = ~(loss.isfinite() & grad_norm.isfinite())
        parts = (loss.detach(), q_taken.detach().mean(), grad_norm, nonfinite)
        self.sums.add_(torch.stack([p.float() for p in parts]))

    def __call__(
        self,
        obs_B: torch.Tensor,
        actions_B: torch.Tensor,
        targets_B: torch.Tensor,
        idx: torch.Tensor,
    ) -> None:
        """One minibatch step on rows ``idx``."""
        torch.index_select(obs_B, 0, idx, out=self.obs)
        torch.index_select(actions_B, 0, idx, out=self.actions)
        torch.index_select(targets_B.float(), 0, idx, out=self.targets)
        self.call()
        self.steps += 1

    def read(self) -> tuple[dict[str, float], int]:
        """The update's mean metrics (as the eager epochs report them) and its count of
        non-finite steps, in one read from the device; the sums start again."""
        loss, q_values, grad_norm, nonfinite = self.sums.tolist()
        self.sums.zero_()
        n, self.steps = max(self.steps, 1), 0
        metrics = {
            "losses/td_loss": loss / n,
            "losses/q_values": q_values / n,
            "losses/grad_norm": grad_norm / n,
            "losses/minibatches": float(n),
            "perf/learner_graphed": float(self.call.graphed),
        }
        return metrics, int(nonfinite)


class PQN:
    """PQN over rollouts produced by any on-policy runner."""

    def __init__(self, cfg: PQNConfig, policy: QPolicy, *, seed: int) -> None:
        self.cfg = cfg
        self.policy = policy
        self.data_spec = DataSpec(
            kind="rollout",
            horizon=cfg.num_steps,
            needs_logprob=False,  # Q(lambda) uses no importance weights
            max_policy_lag=cfg.max_policy_lag,
        )
        # Minibatch shuffling has its own generator, checkpointed for exact resumes.
        self.generator = torch.Generator().manual_seed(seed)
        self.policy.epsilon.fill_(cfg.start_e)

    def optimizer_spec(self) -> OptimizerSpec:
        return OptimizerSpec(self.cfg.optimizer, self.cfg.learning_rate, self.cfg.optimizer_eps)

    def epsilon(self, progress: Progress) -> float:
        """The exploration rate for the rollout that follows an update at ``progress``."""
        cfg = self.cfg
        return linear_epsilon(
            1.0 - progress.fraction_left, cfg.start_e, cfg.end_e, cfg.exploration_fraction
        )

    def update(self, batch: Rollout, step: GradientStep, progress: Progress) -> dict[str, float]:
        cfg = self.cfg
        lr = progress.annealed(cfg.learning_rate, cfg.anneal_lr)
        step.set_learning_rate(lr)
        acted_epsilon = float(self.policy.epsilon)

        # ---- Q(lambda) returns from the Q-values the acting network computed ----
        with torch.no_grad(), step.autocast():
            next_value = self.policy.value(batch.next_obs_N)
        targets_TN = q_lambda_returns(
            batch.rewards_TN * cfg.reward_scale,
            batch.values_TN,
            batch.dones_TN,
            next_value,
            cfg.gamma,
            cfg.q_lambda,
            batch.truncation_values_TN,
        )

        # ---- flatten time and envs, then epochs of shuffled minibatches ----
        B = batch.num_steps * batch.num_envs
        obs_B = batch.obs_TN.reshape(B, *batch.obs_TN.shape[2:])
        actions_B = batch.actions_TN.reshape(B, 1).long()
        targets_B = targets_TN.reshape(B)
        minibatches = shuffled_minibatches(
            cfg.update_epochs, B, cfg.minibatch(B), self.generator, obs_B.device
        )
        if isinstance(step, RecordableStep) and step.graphs:
            regression = self._recorded_epochs(step, minibatches, obs_B, actions_B, targets_B)
        else:
            regression = self._epochs(step, minibatches, obs_B, actions_B, targets_B)

        # The next rollout explores at the schedule's current rate.
        self.policy.epsilon.fill_(self.epsilon(progress))
        return {
            **regression,
            **value_fit(batch.values_TN.reshape(B).float(), targets_B.float()),
            "losses/epsilon": acted_epsilon,
            "losses/learning_rate": lr,
        }

    def _epochs(
        self,
        step: GradientStep,
        minibatches: Iterator[torch.Tensor],
        obs_B: torch.Tensor,
        actions_B: torch.Tensor,
        targets_B: torch.Tensor,
    ) -> dict[str, float]:
        """The minibatch steps one by one, each checked as it goes."""
        losses: list[torch.Tensor] = []
        q_means: list[torch.Tensor] = []
        grad_norms: list[float] = []
        for idx in minibatches:
            with step.autocast():
                q = self.policy(obs_B[idx])
            q_taken = q.gather(-1, actions_B[idx]).squeeze(-1)
            loss = q_lambda_loss(q_taken, targets_B[idx])
            grad_norms.append(step(loss, self.cfg.max_grad_norm))
            losses.append(loss.detach())
            q_means.append(q_taken.detach().mean())
        n = max(len(grad_norms), 1)
        return {
            "losses/td_loss": float(torch.stack(losses).mean()) if losses else 0.0,
            "losses/q_values": float(torch.stack(q_means).mean()) if q_means else 0.0,
            "losses/grad_norm": sum(grad_norms) / n,
            "losses/minibatches": float(len(grad_norms)),
        }

    def _recorded_epochs(
        self,
        step: RecordableStep,
        minibatches: Iterator[torch.Tensor],
        obs_B: torch.Tensor,
        actions_B: torch.Tensor,
        targets_B: torch.Tensor,
    ) -> dict[str, float]:
        """``runner.cuda_graph``: the same minibatches through one :class:`RecordedQStep`
        kept on ``step`` (one per minibatch shape), read from the device once."""
        mb_size = self.cfg.minibatch(obs_B.shape[0])
        key = ("pqn", id(self.policy), mb_size, obs_B.shape[1:], obs_B.dtype)
        program = step.programs.get(key)
        if program is None:
            program = step.programs[key] = RecordedQStep(
                self.policy, step, obs_B, mb_size, self.cfg.max_grad_norm
            )
        for idx in minibatches:
            program(obs_B, actions_B, targets_B, idx)
        metrics, nonfinite = program.read()
        step.found_nonfinite(nonfinite)
        return metrics

    def state_dict(self) -> dict[str, Any]:
        return {"policy": self.policy.state_dict(), "generator": self.generator.get_state()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.policy.load_state_dict(state["policy"])
        self.generator.set_state(state["generator"])
