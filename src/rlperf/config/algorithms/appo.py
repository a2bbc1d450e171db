"""APPO (PPO's clipped surrogate on V-trace targets, as in Sample Factory): its settings, facts and checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

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
class APPOConfig(RolloutMinibatches, AlgorithmSection):
    """Asynchronous PPO (RLlib's APPO): PPO's clipped surrogate on V-trace advantages and value targets."""

    num_steps: PositiveInt = 128
    """Steps collected per env per iteration (rollout length T); a batch is num_envs x num_steps."""
    num_minibatches: PositiveInt = 4
    """Minibatches per epoch."""
    update_epochs: PositiveInt = 4
    """Passes over the batch per iteration (RLlib's num_sgd_iter)."""
    learning_rate: PositiveFloat = 2.5e-4
    """Adam learning rate."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 over the run's budget (stop.anneal_over: env steps or training seconds)."""
    adam_eps: PositiveFloat = 1e-5
    """Adam epsilon."""
    gamma: Fraction = 0.99
    """Discount factor."""
    clip_coef: PositiveFloat = 0.1
    """Surrogate clipping coefficient epsilon (RLlib's clip_param), around the policy at the start of the iteration."""
    rho_bar: PositiveFloat = 1.0
    """V-trace truncation of the importance weights rho (RLlib's vtrace_clip_rho_threshold)."""
    c_bar: PositiveFloat = 1.0
    """V-trace truncation of the trace coefficients c (at most rho_bar)."""
    vf_coef: NonNegativeFloat = 0.5
    """Value loss coefficient."""
    ent_coef: NonNegativeFloat = 0.01
    """Entropy bonus coefficient."""
    max_grad_norm: PositiveFloat | None = 0.5
    """Clip the global gradient norm to this value; unset = no clipping."""
    norm_adv: bool = True
    """Normalise advantages per minibatch."""
    max_policy_lag: NonNegativeInt = 2
    """Learner updates by which the behaviour policy may trail the learner (V-trace corrects the lag)."""

    facts: ClassVar[AlgorithmFacts] = AlgorithmFacts("rollout", cuda_graph=True)
    """Acting may trail by appo.max_policy_lag updates; its minibatch step can be graphed."""

    def check(self, cfg: RunConfig) -> None:
        if cfg.algo == "appo" and cfg.env.num_envs * self.num_steps // self.num_minibatches < 2:
            raise ConfigError(
                "an APPO minibatch must hold at least 2 samples "
                "(num_envs x num_steps / num_minibatches)"
            )
