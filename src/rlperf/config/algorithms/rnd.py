"""RND (Burda et al. 2018, source 004): its settings, with the paper's names and defaults, its facts and its checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rlperf.config.section import (
    AlgorithmFacts,
    AlgorithmSection,
    Fraction,
    FractionAboveZero,
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
class RNDConfig(RolloutMinibatches, AlgorithmSection):
    """Random Network Distillation (Burda et al. 2018) on PPO with two value heads; defaults after the paper and source 004."""

    num_steps: PositiveInt = 128
    """Steps collected per env per iteration (rollout length T; 004's RolloutSteps)."""
    num_minibatches: PositiveInt | None = 4
    """Minibatches per epoch; or set this to null and minibatch_size instead (004's BatchSize)."""
    minibatch_size: PositiveInt | None = None
    """Samples per minibatch (004's BatchSize); set exactly one of the two."""
    update_epochs: PositiveInt = 4
    """Passes over the batch per iteration (004's EpochSteps)."""
    learning_rate: PositiveFloat = 1e-4
    """Adam learning rate of policy, value heads and predictor together."""
    anneal_lr: bool = False
    """Anneal the learning rate linearly to 0 over the run's step budget (the paper keeps it constant)."""
    adam_eps: PositiveFloat = 1e-8
    """Adam epsilon."""
    gamma: Fraction = 0.999
    """Discount of extrinsic rewards (004's ExtRewardDiscount)."""
    int_gamma: Fraction = 0.99
    """Discount of intrinsic rewards (004's IntRewardDiscount); the intrinsic stream ignores episode ends."""
    gae_lambda: Fraction = 0.95
    """GAE lambda of both streams (004's PPOAdvLambda); also the trace lambda of V-trace."""
    ext_coef: NonNegativeFloat = 2.0
    """Weight of the extrinsic advantage (004's ExtCoeff; 0 = intrinsic-only agent)."""
    int_coef: NonNegativeFloat = 1.0
    """Weight of the intrinsic advantage (004's IntCoeff)."""
    clip_coef: PositiveFloat = 0.1
    """Surrogate clipping coefficient epsilon (004's PPORewardEps)."""
    ent_coef: NonNegativeFloat = 0.001
    """Entropy bonus coefficient (004's PPOEntropyCoeff)."""
    vf_coef: NonNegativeFloat = 0.5
    """Value loss coefficient (both heads)."""
    max_grad_norm: PositiveFloat | None = 0.5
    """Clip the global gradient norm to this value (004's ClipGradNorm); unset = no clipping."""
    norm_adv: bool = True
    """Normalise the combined advantages per minibatch."""
    vf_clip_coef: PositiveFloat | None = None
    """Clip both heads' new values to old +/- this before the squared error, as PPO's vf_clip_coef; unset = off (004)."""
    target_kl: PositiveFloat | None = None
    """Stop the epochs of an iteration early once approx KL exceeds this, as PPO's target_kl; unset = never (004)."""
    update_proportion: FractionAboveZero = 0.25
    """Share of each minibatch the predictor trains on (004's RNDUpdateProportion), so it does not learn faster than the policy explores."""
    num_init_steps: NonNegativeInt = 128
    """Env steps per env that only initialise the observation normaliser before learning starts (004's NumInitSteps); the untrained policy acts almost uniformly at random meanwhile."""
    obs_clip: PositiveFloat = 5.0
    """Clip normalised observations of the RND networks to +- this."""
    vtrace: bool | None = None
    """Correct for policy lag with V-trace on both advantage streams; unset = on exactly when the runner acts with a lagged policy (decoupled)."""
    rho_bar: PositiveFloat = 1.0
    """V-trace truncation of the importance weights rho."""
    c_bar: PositiveFloat = 1.0
    """V-trace truncation of the trace coefficients c (at most rho_bar)."""
    max_policy_lag: NonNegativeInt = 2
    """Learner updates by which the behaviour policy may trail the learner (decoupled runner)."""

    facts: ClassVar[AlgorithmFacts] = AlgorithmFacts(
        "rollout", one_learner="it keeps its normalisers in one learner"
    )
    """Acting may trail by rnd.max_policy_lag updates (V-trace on the decoupled runner)."""

    def check(self, cfg: RunConfig) -> None:
        self.check_one_minibatch_setting("rnd")
        if self.ext_coef == self.int_coef == 0:
            raise ConfigError(
                "rnd.ext_coef and rnd.int_coef must be zero or positive and not both 0, got "
                f"{self.ext_coef} and {self.int_coef}"
            )
