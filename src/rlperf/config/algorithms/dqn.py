"""DQN (Mnih et al. 2015) as source 003 trains it: its settings, facts and checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rlperf.config.choices import DqnLoss
from rlperf.config.section import (
    ANY_POLICY_LAG,
    AlgorithmFacts,
    AlgorithmSection,
    Fraction,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
)
from rlperf.core.errors import ConfigError

if TYPE_CHECKING:
    from rlperf.config.schema import RunConfig


@dataclass
class DQNConfig(AlgorithmSection):
    """DQN hyperparameters (Mnih et al. 2015); defaults are source 003's Pong baseline (Deep RL Hands-On, ch. 8-9)."""

    buffer_size: PositiveInt = 100_000
    """Replay capacity in transitions (frames stored once, uint8: 100k Atari transitions take about 0.7 GB)."""
    learning_starts: NonNegativeInt = 10_000
    """Transitions in the replay before the first gradient step (003: 10k initial transitions)."""
    batch_size: PositiveInt = 32
    """Transitions sampled from the replay per gradient step."""
    train_frequency: PositiveInt = 1
    """Env steps (all envs together) per gradient step; batch_size / train_frequency samples are replayed per new transition."""
    steps_per_iteration: PositiveInt = 1000
    """Env steps (all envs together) per iteration, i.e. per metrics record; rounded up to whole vector steps or play chunks."""
    learning_rate: PositiveFloat = 1e-4
    """Adam learning rate."""
    adam_eps: PositiveFloat = 1e-8
    """Adam epsilon."""
    gamma: Fraction = 0.99
    """Discount factor."""
    n_step: PositiveInt = 1
    """Env steps summed per replayed transition: n-step returns (Sutton 1988; Rainbow uses 3), bootstrapped from the observation n steps on, or fewer where the episode ends first; 1 = 003's one-step target."""
    target_network_frequency: PositiveInt = 1000
    """Env steps between two copies of the online network into the target network."""
    start_e: Fraction = 1.0
    """Exploration: epsilon at the start of the run."""
    end_e: Fraction = 0.02
    """Exploration: epsilon after the linear decay."""
    exploration_fraction: Fraction = 0.1
    """Exploration: share of stop.total_timesteps over which epsilon decays linearly (ignored when exploration_steps is set)."""
    exploration_steps: NonNegativeInt | None = None
    """Exploration: env steps over which epsilon decays linearly (003: 100000); unset = exploration_fraction x stop.total_timesteps."""
    loss: DqnLoss = "mse"
    """TD loss: mse (003's) or huber (smooth L1, the Nature paper's error clipping)."""
    double_q: bool = False
    """Double DQN (van Hasselt et al. 2016): the online network picks the next action, the target network values it."""
    max_grad_norm: PositiveFloat | None = None
    """Clip the global gradient norm to this value; unset = no clipping (003)."""
    no_grad: bool = True
    """Act and compute targets under torch.no_grad(); false reproduces 003's 00_slow_grads rung (autograd graphs built and thrown away)."""

    facts: ClassVar[AlgorithmFacts] = AlgorithmFacts(
        "transitions",
        ANY_POLICY_LAG,
        one_learner="its replay buffer lives in one learner",
        q_values=True,
    )
    """Off-policy from a replay buffer: data from any earlier policy will do."""

    def learner_batch_size(self, num_envs: int) -> int:
        """One replayed batch."""
        return self.batch_size

    def check(self, cfg: RunConfig) -> None:
        if cfg.algo != "dqn":
            return
        if self.exploration_steps is None and not cfg.stop.total_timesteps:
            raise ConfigError(
                "dqn.exploration_fraction needs stop.total_timesteps; set dqn.exploration_steps "
                "instead"
            )
        if self.learning_starts > self.buffer_size:
            raise ConfigError(
                f"dqn.learning_starts ({self.learning_starts}) exceeds dqn.buffer_size "
                f"({self.buffer_size}): training would never start"
            )
        if self.buffer_size < 4 * cfg.env.frame_stack * cfg.env.num_envs:
            raise ConfigError(
                f"dqn.buffer_size ({self.buffer_size}) is too small: at least 4 x "
                "env.frame_stack x env.num_envs"
            )
