"""Asynchronous PPO (RLlib's APPO): PPO's clipped surrogate on V-trace advantages.

Reads top to bottom: the data it needs, the V-trace targets computed once per iteration,
then PPO's epochs of minibatch updates with PPO's loss (:func:`rlperf.algos.surrogate.ppo_loss`).

The data come from a behaviour policy mu that may trail the learner by up to
``max_policy_lag`` updates. At the start of an iteration the current policy, pi_old, is the
V-trace target (Espeholt et al. 2018, eq. (1) and sec. 4.2):

    v_s = V(x_s) + sum_{t>=s} gamma^{t-s} (prod_{i<t} c_i) rho_t (r_t + gamma V(x_{t+1}) - V(x_t))
    A_s = rho_s (r_s + gamma v_{s+1} - V(x_s)),   rho = min(rho_bar, pi_old/mu), c = min(c_bar, pi_old/mu)

and the epochs then maximise PPO's clipped surrogate (Schulman et al. 2017, eq. 7) around
pi_old, with v_s as the value target:

    L = E_mu[ min(r_theta A_s, clip(r_theta, 1 - eps, 1 + eps) A_s) ],  r_theta = pi_theta / pi_old.

The trust region is around pi_old, not mu, and the importance weight pi_old/mu sits
(truncated) inside A_s; being non-negative it factors out of the min, which makes L the
"decoupled" PPO objective of Hilton et al. 2021 (proximal policy pi_old, behaviour policy
mu). RLlib's APPO computes the same thing, its pi_old being a target
network refreshed every few updates (its ratio is clamp(mu/pi_old) * pi_theta/mu); here pi_old
is refreshed every iteration. Without lag (pi_old == mu) and rho_bar = c_bar = 1, APPO is
PPO with GAE lambda = 1 and no value clipping.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from rlperf.algos.impala import importance_stats
from rlperf.algos.metrics import value_fit
from rlperf.algos.returns import vtrace
from rlperf.algos.surrogate import SurrogateBatch, SurrogateSettings, surrogate_epochs
from rlperf.config.schema import APPOConfig
from rlperf.core.protocols import GradientStep, OptimizerSpec
from rlperf.core.types import DataSpec, Progress, Rollout
from rlperf.models.policy import ActorCritic


class APPO:
    """APPO over rollouts from any runner with a policy lag it tolerates."""

    def __init__(self, cfg: APPOConfig, policy: ActorCritic, *, seed: int) -> None:
        self.cfg = cfg
        self.policy = policy
        # Values and log-probs of pi_old are recomputed at the start of each iteration; from
        # the behaviour only its log-probabilities (mu) are needed.
        self.data_spec = DataSpec(
            kind="rollout",
            horizon=cfg.num_steps,
            needs_logprob=True,
            needs_value=False,
            max_policy_lag=cfg.max_policy_lag,
        )
        # PPO's loss without value clipping (as in RLlib's APPO: v_s is already a corrected
        # target, not the old prediction); APPOConfig has no such knob.
        self.settings = SurrogateSettings.of(cfg)
        # A private generator for minibatch shuffling, checkpointed as in PPO so a resumed
        # run draws the same permutations as an uninterrupted one.
        self.generator = torch.Generator().manual_seed(seed)

    def optimizer_spec(self) -> OptimizerSpec:
        return OptimizerSpec("adam", self.cfg.learning_rate, self.cfg.adam_eps)

    def update(self, batch: Rollout, step: GradientStep, progress: Progress) -> dict[str, float]:
        cfg = self.cfg
        lr = progress.annealed(cfg.learning_rate, cfg.anneal_lr)
        step.set_learning_rate(lr)

        T, N = batch.num_steps, batch.num_envs
        B = T * N
        obs_B = batch.obs_TN.reshape(B, *batch.obs_TN.shape[2:])
        actions_B = batch.actions_TN.reshape(B)

        # ---- pi_old: the policy as it is now, on the behaviour's actions (no gradient) ----
        with torch.no_grad(), step.autocast():
            old_logprob_B, _, old_value_B = self.policy.evaluate(obs_B, actions_B)
            next_value = self.policy.value(batch.next_obs_N).float()

        # ---- V-trace once per iteration: advantages and value targets stay fixed ----
        vs_TN, advantages_TN = vtrace(
            batch.logprobs_TN,
            old_logprob_B.reshape(T, N),
            batch.rewards_TN,
            old_value_B.reshape(T, N),
            batch.dones_TN,
            next_value,
            cfg.gamma,
            cfg.rho_bar,
            cfg.c_bar,
            batch.truncation_values_TN,
        )
        advantages_B = advantages_TN.reshape(B)
        vs_B = vs_TN.reshape(B)
        lag_stats = importance_stats(batch.logprobs_TN.reshape(B), old_logprob_B, cfg.rho_bar)

        # ---- PPO's epochs of shuffled minibatches, on V-trace advantages and targets ----
        data = SurrogateBatch(obs_B, actions_B, old_logprob_B, old_value_B, advantages_B, vs_B)
        metrics = surrogate_epochs(
            self.settings, self.policy, step, self.generator, data, cfg.minibatch(B)
        )
        metrics.update({f"losses/{k}": float(v) for k, v in lag_stats.items()})
        metrics.update(
            {
                **value_fit(old_value_B.float(), vs_B),
                "losses/learning_rate": lr,
            }
        )
        return metrics

    def state_dict(self) -> dict[str, Any]:
        return {"policy": self.policy.state_dict(), "generator": self.generator.get_state()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.policy.load_state_dict(state["policy"])
        self.generator.set_state(state["generator"])
