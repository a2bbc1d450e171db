"""Proximal Policy Optimization (Schulman et al. 2017), clipped surrogate objective.

Reads top to bottom: the data it needs, the advantage computation, then the epochs of
minibatch updates with the loss. Knobs cover both CleanRL's Atari recipe (value clipping
around the old prediction, advantage normalisation, learning-rate annealing) and RLlib's
(adaptive KL penalty, clamped value error), so the thesis's RLlib runs can be reproduced.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

from rlperf.algos.metrics import value_fit
from rlperf.algos.returns import gae
from rlperf.algos.surrogate import (
    SurrogateBatch,
    SurrogateSettings,
    surrogate_epochs,
)
from rlperf.config.schema import PPOConfig
from rlperf.core.protocols import GradientStep, OptimizerSpec
from rlperf.core.types import DataSpec, Progress, Rollout
from rlperf.models.policy import ActorCritic


def adapt_learning_rate(lr: float, mean_kl: float, cfg: PPOConfig) -> float:
    """rl_games' adaptive schedule: keep the policy's change per iteration near
    ``cfg.lr_kl_target`` by scaling the learning rate by 1.5 either way.

    A fixed learning rate is tuned for one stage of one game; the KL a step causes is what
    it is meant to control, and it says directly when the rate is too timid or too bold."""
    assert cfg.lr_kl_target is not None
    if mean_kl > 2.0 * cfg.lr_kl_target:
        lr /= 1.5
    elif mean_kl < 0.5 * cfg.lr_kl_target:
        lr *= 1.5
    return min(max(lr, cfg.lr_min), cfg.lr_max)


class PPO:
    """PPO over rollouts produced by any on-policy runner."""

    def __init__(self, cfg: PPOConfig, policy: ActorCritic, *, seed: int) -> None:
        self.cfg = cfg
        self.policy = policy
        self.kl_coeff = cfg.kl_coeff
        self.base_lr = cfg.learning_rate
        """The learning rate before annealing: fixed, or adapted to the KL (lr_kl_target)."""
        self.late_phase_since: int | None = None
        """Env steps at which the mean return of 100 games first reached the late phase's
        start (``late_phase_return`` or ``late_phase_target_share``; None before, or without
        a late phase)."""
        self.data_spec = DataSpec(kind="rollout", horizon=cfg.num_steps)
        self.settings = SurrogateSettings.of(cfg)
        # A private generator for minibatch shuffling: its state is checkpointed, so a
        # resumed run draws the same permutations as an uninterrupted one.
        self.generator = torch.Generator().manual_seed(seed)

    def optimizer_spec(self) -> OptimizerSpec:
        return OptimizerSpec("adam", self.cfg.learning_rate, self.cfg.adam_eps)

    def update(self, batch: Rollout, step: GradientStep, progress: Progress) -> dict[str, float]:
        cfg = self.cfg
        late = self._in_late_phase(progress)
        lr = progress.annealed(self.base_lr, cfg.anneal_lr)
        if late:
            lr *= cfg.late_phase_lr_scale
        step.set_learning_rate(lr)

        # ---- advantages: one value forward on the bootstrap observation, then GAE ----
        with torch.no_grad(), step.autocast():
            next_value = self.policy.value(batch.next_obs_N).float()
        advantages_TN, returns_TN = gae(
            batch.rewards_TN,
            batch.values_TN,
            batch.dones_TN,
            next_value,
            cfg.gamma,
            cfg.gae_lambda,
            batch.truncation_values_TN,
        )

        # ---- flatten time and envs into one batch axis ----
        B = batch.num_steps * batch.num_envs
        obs_B = batch.obs_TN.reshape(B, *batch.obs_TN.shape[2:])
        actions_B = batch.actions_TN.reshape(B)
        logprobs_B = batch.logprobs_TN.reshape(B)
        values_B = batch.values_TN.reshape(B)
        advantages_B = advantages_TN.reshape(B)
        leading = self._leading_parity(batch, progress)
        data = SurrogateBatch(
            obs_B, actions_B, logprobs_B, values_B, advantages_B, returns_TN.reshape(B),
            None if leading is None else self._parity_weights(batch, leading),
        )  # fmt: skip
        ent_start = (
            cfg.late_phase_ent_coef
            if late and cfg.late_phase_ent_coef is not None
            else cfg.ent_coef
        )
        ent_coef = (
            cfg.ent_coef_end
            + progress.annealed_over(ent_start - cfg.ent_coef_end, cfg.ent_coef_anneal_fraction)
            if cfg.anneal_ent_coef
            else ent_start
        )
        settings = dataclasses.replace(self.settings, ent_coef=ent_coef)
        metrics = surrogate_epochs(
            settings, self.policy, step, self.generator, data, cfg.minibatch(B),
            self.kl_coeff,
        )  # fmt: skip
        mean_kl = metrics.get("losses/approx_kl", 0.0)
        if self.kl_coeff > 0:
            # RLlib's adaptive KL coefficient, adjusted once per iteration.
            if mean_kl > 2.0 * cfg.kl_penalty_target:
                self.kl_coeff *= 1.5
            elif mean_kl < 0.5 * cfg.kl_penalty_target:
                self.kl_coeff *= 0.5
        if cfg.lr_kl_target is not None:
            self.base_lr = adapt_learning_rate(self.base_lr, mean_kl, cfg)
        metrics.update(
            {
                **value_fit(values_B.float(), data.returns.float()),
                # Before any normalisation: how much signal the batch carries, and what the
                # entropy bonus weighs against when norm_adv is off.
                "losses/advantage_std": float(advantages_B.float().std()),
                "losses/learning_rate": lr,
                "losses/ent_coef": ent_coef,
                "losses/kl_coeff": self.kl_coeff,
                "losses/late_phase": float(late),
            }
        )
        if cfg.parity_balance_gap is not None:
            metrics["losses/leading_parity"] = -1.0 if leading is None else float(leading)
        return metrics

    def _leading_parity(self, batch: Rollout, progress: Progress) -> int | None:
        """With ``parity_balance_gap``: the frame parity (0 even, 1 odd) whose last games
        lead the other's by more than the gap; None while they are within it or not known."""
        gap = self.cfg.parity_balance_gap
        if gap is None or batch.frame_parity_TN is None:
            return None
        return progress.leading_parity(gap)

    def _parity_weights(self, batch: Rollout, leading: int) -> torch.Tensor:
        """(B,) loss weights: ``parity_balance_weight`` for the leading parity's samples, 1
        for the rest (the lagging game's, and samples whose parity is not known)."""
        assert batch.frame_parity_TN is not None
        parity_B = batch.frame_parity_TN.reshape(-1)
        weight = torch.tensor(self.cfg.parity_balance_weight, device=parity_B.device)
        return torch.where(parity_B == leading, weight, torch.ones_like(weight))

    def _in_late_phase(self, progress: Progress) -> bool:
        """Whether the late phase has begun, starting it when the mean return of the last
        100 games first reaches ``late_phase_return`` (or covers ``late_phase_target_share``
        of the way to the target). It then holds to the end: a mean that dips back on a bad
        stretch must not restore the early phase's bold updates."""
        cfg = self.cfg
        if cfg.late_phase_return is not None:
            reached, start = progress.mean_return_100, cfg.late_phase_return
        elif cfg.late_phase_target_share is not None:
            reached, start = progress.target_share, cfg.late_phase_target_share
        else:
            return False
        if self.late_phase_since is None and reached is not None and reached >= start:
            self.late_phase_since = progress.env_steps
        return self.late_phase_since is not None

    def state_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy.state_dict(),
            "kl_coeff": self.kl_coeff,
            "base_lr": self.base_lr,
            # What the config said when saved: a resume that gives other values means them.
            "configured": {"kl_coeff": self.cfg.kl_coeff, "learning_rate": self.cfg.learning_rate},
            "generator": self.generator.get_state(),
            "late_phase_since": self.late_phase_since,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.policy.load_state_dict(state["policy"])
        # The KL coefficient and (with lr_kl_target) the learning rate adapt as the run goes,
        # so a resume carries them on, unless the resumed config changes the value they
        # started from (`--resume DIR ppo.learning_rate=...`): then that value is meant. A
        # fixed rate is never state: it is always the config's.
        configured = state.get("configured", {})
        changed = {
            key
            for key in ("kl_coeff", "learning_rate")
            if key in configured and configured[key] != getattr(self.cfg, key)
        }
        self.kl_coeff = self.cfg.kl_coeff if "kl_coeff" in changed else float(state["kl_coeff"])
        adapted = self.cfg.lr_kl_target is not None and "learning_rate" not in changed
        # Checkpoints from before the adaptive learning rate hold none: the configured one.
        saved_lr = state.get("base_lr", self.cfg.learning_rate)
        self.base_lr = float(saved_lr) if adapted else self.cfg.learning_rate
        self.generator.set_state(state["generator"])
        since = state.get("late_phase_since")  # absent from checkpoints before the late phase
        self.late_phase_since = None if since is None else int(since)
