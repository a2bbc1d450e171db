"""A3C (Mnih et al. 2016) as source 002 trains it: its settings, facts and checks."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rlperf.config.choices import Optimizer
from rlperf.config.section import (
    AlgorithmFacts,
    AlgorithmSection,
    Fraction,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
)
from rlperf.core.errors import ConfigError

if TYPE_CHECKING:
    from rlperf.config.schema import RunConfig


@dataclass
class A3CConfig(AlgorithmSection):
    """A3C hyperparameters (Mnih et al. 2016); defaults are source 002's football run (n-step advantages with GAE parameter tau, losses summed over each segment)."""

    num_local_steps: PositiveInt = 50
    """Steps per env in one update segment: a worker syncs from the shared model, plays this many steps, then applies one gradient step."""
    learning_rate: PositiveFloat = 1e-4
    """Learning rate of the shared optimizer."""
    optimizer: Optimizer = "rmsprop"
    """Shared optimizer: rmsprop (002's GlobalRMSprop) or adam (002's GlobalAdam); statistics live in shared memory."""
    optimizer_eps: PositiveFloat = 1e-8
    """Optimizer epsilon (a3c.eps is accepted)."""
    gamma: Fraction = 0.99
    """Discount factor."""
    gae_lambda: Fraction = 1.0
    """GAE lambda of the actor's advantages (002's tau; a3c.tau is accepted; 1.0 = n-step advantages)."""
    ent_coef: NonNegativeFloat = 0.01
    """Entropy bonus coefficient (002's beta)."""
    vf_coef: NonNegativeFloat = 1.0
    """Critic loss coefficient (002: 1, the critic's squared error halved)."""
    max_grad_norm: PositiveFloat | None = None
    """Clip each segment's gradient norm to this value before it is applied; unset = no clipping (002)."""
    value_clip: PositiveFloat | None = None
    """Clamp the critic's error (n-step return - value) to +- this in the critic loss; unset = off (one of 002's experiments)."""
    standardize_rewards: bool = False
    """Standardise the rewards of each segment to zero mean and unit variance before the returns (one of 002's experiments; off)."""
    time_penalty: NonNegativeFloat = 0.0
    """Subtract this from every training reward (002 found a per-step penalty slows learning; 0 = off). Reported returns stay the game's."""
    lr_drop_steps: PositiveInt | None = None
    """Env steps after which the learning rate is multiplied by lr_drop_factor (002 dropped 1e-4 to 1e-5 by hand after about 500 episodes); unset = constant."""
    lr_drop_factor: Fraction = 0.1
    """Factor applied to the learning rate at lr_drop_steps."""
    init_weights: str | None = None
    """Start from these weights: a .safetensors file or a run's checkpoint directory; only tensors whose names and shapes match are loaded, and a report names the rest."""

    # a worker's gradient is computed on its local copy, then applied to the shared model
    facts: ClassVar[AlgorithmFacts] = AlgorithmFacts(
        "rollout", 1, one_learner="its workers share one optimizer"
    )
    """A worker's gradient comes from a copy one update behind the shared model."""

    def learner_batch_size(self, num_envs: int) -> int:
        """One worker's rollout of num_local_steps (one env per worker)."""
        return self.num_local_steps

    def check(self, cfg: RunConfig) -> None:
        # the weights' content is read (and refused in one line) when the model is built;
        # a path that names nothing is refused before anything is
        if cfg.algo == "a3c" and self.init_weights and not Path(self.init_weights).exists():
            raise ConfigError(
                f"a3c.init_weights: {self.init_weights} does not exist; valid: a .safetensors "
                "file, a checkpoint directory or a run directory"
            )
