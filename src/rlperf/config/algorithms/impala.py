"""IMPALA (Espeholt et al. 2018): its settings, facts and checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rlperf.config.choices import Optimizer
from rlperf.config.section import (
    AlgorithmFacts,
    AlgorithmSection,
    Fraction,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    RolloutMinibatches,
)
from rlperf.core.errors import ConfigError

if TYPE_CHECKING:
    from rlperf.config.schema import RunConfig


@dataclass
class IMPALAConfig(RolloutMinibatches, AlgorithmSection):
    """IMPALA hyperparameters: V-trace actor-critic (Espeholt et al. 2018); defaults after the paper's Atari runs."""

    num_steps: PositiveInt = 20
    """Steps per env per unroll (the paper's Atari unroll length); a batch is num_envs x num_steps."""
    num_minibatches: PositiveInt = 1
    """Gradient steps per batch, each on a slice of whole env trajectories (1 = the paper's one step per batch)."""
    learning_rate: PositiveFloat = 6e-4
    """Learning rate (the paper's Atari value)."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 over the run's step budget (as the paper does)."""
    optimizer: Optimizer = "rmsprop"
    """Optimizer: rmsprop (the paper's) or adam (RLlib's default for IMPALA)."""
    rmsprop_alpha: Fraction = 0.99
    """RMSprop smoothing constant of the squared-gradient average (the paper's decay 0.99)."""
    optimizer_eps: PositiveFloat = 1e-5
    """Optimizer epsilon (impala.eps is accepted); torch adds it outside the square root, to a mean (not summed) loss's gradients."""
    gamma: Fraction = 0.99
    """Discount factor."""
    rho_bar: PositiveFloat = 1.0
    """V-trace truncation of the importance weights rho (rho_bar); sets the policy whose value is learned."""
    c_bar: PositiveFloat = 1.0
    """V-trace truncation of the trace coefficients c (c_bar, at most rho_bar); trades contraction speed for variance."""
    vf_coef: NonNegativeFloat = 0.5
    """Value loss coefficient (the paper's baseline loss scaling)."""
    ent_coef: NonNegativeFloat = 0.01
    """Entropy bonus coefficient (the paper's Atari entropy cost)."""
    max_grad_norm: PositiveFloat | None = 0.5
    """Clip the global gradient norm to this value; unset = no clipping (the paper's 40 is on a summed loss)."""
    max_policy_lag: NonNegativeInt = 4
    """Learner updates by which the behaviour policy may trail the learner (V-trace corrects the lag)."""

    facts: ClassVar[AlgorithmFacts] = AlgorithmFacts("rollout")
    """V-trace corrects for lagged acting policies, up to impala.max_policy_lag updates."""

    def check(self, cfg: RunConfig) -> None:
        if cfg.algo == "impala" and self.num_minibatches > cfg.env.num_envs:
            raise ConfigError(
                f"impala.num_minibatches ({self.num_minibatches}) exceeds env.num_envs "
                f"({cfg.env.num_envs}): IMPALA minibatches are slices of whole env trajectories"
            )
