"""PPO (Schulman et al. 2017): its settings, with CleanRL's names and Atari defaults, its facts and its checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rlperf.config.choices import AdvantageScope
from rlperf.config.section import (
    AlgorithmFacts,
    AlgorithmSection,
    FiniteFloat,
    Fraction,
    FractionAboveZero,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    RolloutMinibatches,
)
from rlperf.core.errors import ConfigError

if TYPE_CHECKING:
    from rlperf.config.schema import RunConfig

PARITY_BALANCE_WEIGHT = 0.25
"""``ppo.parity_balance_weight``'s default: a set weight without a gap is refused."""


@dataclass
class PPOConfig(RolloutMinibatches, AlgorithmSection):
    """Proximal Policy Optimization hyperparameters."""

    num_steps: PositiveInt = 128
    """Steps collected per env per iteration (rollout length T); a batch is num_envs x num_steps."""
    num_minibatches: PositiveInt | None = 4
    """Minibatches per epoch (CleanRL); or set this to null and minibatch_size instead (RLlib)."""
    minibatch_size: PositiveInt | None = None
    """Samples per minibatch (RLlib's sgd_minibatch_size); set exactly one of the two."""
    update_epochs: PositiveInt = 4
    """Passes over the batch per iteration (RLlib's num_sgd_iter)."""
    learning_rate: PositiveFloat = 2.5e-4
    """Adam learning rate."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 over the run's budget (stop.anneal_over: env steps or training seconds)."""
    lr_kl_target: PositiveFloat | None = None
    """Adapt the learning rate to the policy's change (rl_games' adaptive schedule): after each iteration, divided by 1.5 when the mean approx KL exceeds 2x this target and multiplied by 1.5 below half of it, within [lr_min, lr_max]; learning_rate is where it starts. Unset = off."""
    lr_min: PositiveFloat = 1e-6
    """Lower bound of the adaptive learning rate (lr_kl_target)."""
    lr_max: PositiveFloat = 1e-2
    """Upper bound of the adaptive learning rate (lr_kl_target)."""
    adam_eps: PositiveFloat = 1e-5
    """Adam epsilon."""
    gamma: Fraction = 0.99
    """Discount factor."""
    gae_lambda: Fraction = 0.95
    """GAE lambda (1.0 = Monte-Carlo advantages)."""
    clip_coef: PositiveFloat = 0.1
    """Surrogate clipping coefficient epsilon."""
    vf_clip_coef: PositiveFloat | None = 0.1
    """Clip the new value prediction to old value +- this (CleanRL's clip_vloss); unset = off."""
    vf_loss_clip: PositiveFloat | None = None
    """Clamp the squared value error at this value (RLlib's vf_clip_param); unset = off."""
    ent_coef: NonNegativeFloat = 0.01
    """Entropy bonus coefficient."""
    anneal_ent_coef: bool = False
    """Anneal the entropy coefficient linearly to ent_coef_end (0 by default) over the run's budget (stop.anneal_over), like anneal_lr: exploration early, a sharper policy at the end."""
    ent_coef_anneal_fraction: FractionAboveZero = 1.0
    """With anneal_ent_coef, the fraction of the budget over which the bonus falls to ent_coef_end (then holds it; exploration_fraction's idea): below 1, the policy sharpens while the learning rate is still high."""
    ent_coef_end: NonNegativeFloat = 0.0
    """With anneal_ent_coef, the bonus the annealing ends at (at most ent_coef): a floor that keeps some exploration after a short broad start."""
    late_phase_return: FiniteFloat | None = None
    """Start a late phase once the mean return of the last 100 games first reaches this (it then lasts to the run's end, checkpointed): the policy wins, and the broad, bold updates that found the winning play now shake it. Unset = no late phase."""
    late_phase_target_share: FractionAboveZero | None = None
    """Instead of late_phase_return, a return in the game's own scale: start the late phase once the mean of 100 games has covered this share of the way from the run's first 100 games to stop.target_reward; a run without a target has no late phase, so a preset can carry the key to every game. On Pong (first games at -20.6 to -18, target 17) 0.8 is a return of 9.5 to 10."""
    late_phase_ent_coef: NonNegativeFloat | None = None
    """In the late phase, the entropy bonus's start value instead of ent_coef (with anneal_ent_coef still annealed to ent_coef_end, which it must not be below); unset = ent_coef throughout."""
    late_phase_lr_scale: FractionAboveZero = 1.0
    """In the late phase, the learning rate times this (after annealing): a smaller step once the game is nearly won."""
    parity_balance_gap: PositiveFloat | None = None
    """Atari at an even frame skip: once the mean returns of the last 10 games on even and on odd emulator frames differ by more than this, every loss term of the leading parity's samples weighs parity_balance_weight (a weighted mean over the minibatch). On Pong the two parities play as two games, and a stall is one of them learned late. Needs an engine that tells each game's parity (gymnasium, ale-vector) and runner inproc. Unset = off."""
    parity_balance_weight: Fraction = PARITY_BALANCE_WEIGHT
    """With parity_balance_gap, the weight of the leading parity's samples (0 leaves them out)."""
    vf_coef: NonNegativeFloat = 0.5
    """Value loss coefficient."""
    max_grad_norm: PositiveFloat | None = 0.5
    """Clip the global gradient norm to this value; unset = no clipping."""
    norm_adv: bool = True
    """Normalise advantages to zero mean and unit spread (over norm_adv_over)."""
    norm_adv_over: AdvantageScope = "minibatch"
    """Where norm_adv takes the mean and spread: each minibatch (CleanRL, SB3) or the whole batch once before the epochs (rl_games), so that a small minibatch with little signal is not scaled up to a full-size update."""
    kl_coeff: NonNegativeFloat = 0.0
    """Initial coefficient of the adaptive KL penalty (RLlib's kl_coeff; 0 = off)."""
    kl_penalty_target: PositiveFloat = 0.01
    """KL target of the adaptive penalty (RLlib's kl_target; that spelling is accepted): the coefficient x1.5 above 2x target, x0.5 below target/2."""
    target_kl: PositiveFloat | None = None
    """Stop the epochs of an iteration early once approx KL exceeds this; unset = never."""

    facts: ClassVar[AlgorithmFacts] = AlgorithmFacts("rollout", 0, cuda_graph=True)
    """On-policy: every rollout acts with the newest weights; its minibatch step can be graphed."""

    def check(self, cfg: RunConfig) -> None:
        if self.lr_min > self.lr_max:
            raise ConfigError(
                f"ppo.lr_min ({self.lr_min}) must not exceed ppo.lr_max ({self.lr_max})"
            )
        if self.ent_coef_end > self.ent_coef:
            raise ConfigError(
                f"ppo.ent_coef_end ({self.ent_coef_end}) must not exceed ppo.ent_coef "
                f"({self.ent_coef}): the bonus anneals down to it"
            )
        starts = [self.late_phase_return, self.late_phase_target_share]
        if None not in starts:
            raise ConfigError(
                "set at most one of ppo.late_phase_return and ppo.late_phase_target_share "
                "(both say when the late phase starts)"
            )
        late_knobs = self.late_phase_ent_coef is not None or self.late_phase_lr_scale != 1.0
        if late_knobs and starts == [None, None]:
            raise ConfigError(
                "ppo.late_phase_ent_coef / ppo.late_phase_lr_scale need ppo.late_phase_return "
                "or ppo.late_phase_target_share (when the late phase starts)"
            )
        if self.late_phase_ent_coef is not None and self.late_phase_ent_coef < self.ent_coef_end:
            raise ConfigError(
                f"ppo.late_phase_ent_coef ({self.late_phase_ent_coef}) must not be below "
                f"ppo.ent_coef_end ({self.ent_coef_end}): the bonus anneals down to it"
            )
        if self.parity_balance_weight != PARITY_BALANCE_WEIGHT and self.parity_balance_gap is None:
            raise ConfigError(
                "ppo.parity_balance_weight needs ppo.parity_balance_gap (when the weight applies)"
            )
        self.check_one_minibatch_setting("ppo")
        batch = cfg.env.num_envs * self.num_steps
        # The size as written, not minibatch()'s clamp to the batch: a minibatch_size larger
        # than the rollout is a mistake to name, not to shrink silently.
        minibatch = self.minibatch_size or self.minibatch(batch)
        if not 2 <= minibatch <= batch:
            # One sample has no spread: per-minibatch advantage normalisation would divide by 0.
            raise ConfigError(
                f"a minibatch must hold 2 to {batch} samples (num_envs x num_steps), got "
                f"{minibatch} from ppo.num_minibatches / ppo.minibatch_size"
            )
