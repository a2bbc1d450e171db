"""PQN (Gallici et al. 2024): its settings, with the paper's Atari defaults, its facts and its checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rlperf.config.choices import QOptimizer
from rlperf.config.section import (
    AlgorithmFacts,
    AlgorithmSection,
    Fraction,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    RolloutMinibatches,
)
from rlperf.core.errors import ConfigError

if TYPE_CHECKING:
    from rlperf.config.schema import RunConfig


@dataclass
class PQNConfig(RolloutMinibatches, AlgorithmSection):
    """Parallelised Q-Network (Gallici et al. 2024): Q(lambda) regression on rollouts of many envs, no replay buffer, no target network; defaults are the paper's Atari settings."""

    num_steps: PositiveInt = 32
    """Steps collected per env per iteration (rollout length T; the paper's NUM_STEPS)."""
    num_minibatches: PositiveInt = 32
    """Minibatches per epoch."""
    update_epochs: PositiveInt = 2
    """Passes over the batch per iteration (the paper's NUM_EPOCHS)."""
    learning_rate: PositiveFloat = 2.5e-4
    """Learning rate."""
    anneal_lr: bool = False
    """Anneal the learning rate linearly to 0 over the run's budget (stop.anneal_over); the paper keeps it constant on Atari."""
    optimizer: QOptimizer = "radam"
    """radam (the paper's RAdam) or adam."""
    optimizer_eps: PositiveFloat = 1e-8
    """Optimizer epsilon."""
    gamma: Fraction = 0.99
    """Discount factor."""
    q_lambda: Fraction = 0.65
    """Lambda of the Q(lambda) returns (0 = one-step Q-learning targets, 1 = Monte Carlo within the rollout)."""
    start_e: Fraction = 1.0
    """Exploration: epsilon at the start."""
    end_e: Fraction = 0.001
    """Exploration: epsilon after the decay."""
    exploration_fraction: Fraction = 0.1
    """Exploration: share of the run's budget (stop.anneal_over) over which epsilon decays linearly."""
    max_grad_norm: PositiveFloat | None = 10.0
    """Clip the global gradient norm to this value; unset = no clipping."""
    reward_scale: PositiveFloat = 1.0
    """Multiply rewards by this before the returns (the paper uses 0.1 on CartPole)."""
    max_policy_lag: NonNegativeInt = 2
    """Learner updates by which the acting network may trail the learner on the decoupled runner (Q(lambda) learns off-policy; the lag only biases its traces)."""

    facts: ClassVar[AlgorithmFacts] = AlgorithmFacts("rollout", cuda_graph=True, q_values=True)
    """Q(lambda) learns off-policy: a lagged acting network only biases its traces; its
    minibatch step records as a CUDA graph (algos.pqn.RecordedQStep)."""

    def check(self, cfg: RunConfig) -> None:
        if cfg.algo == "pqn" and cfg.env.num_envs * self.num_steps < self.num_minibatches:
            raise ConfigError(
                f"pqn.num_minibatches ({self.num_minibatches}) exceeds the batch "
                f"(env.num_envs x pqn.num_steps = {cfg.env.num_envs * self.num_steps})"
            )
