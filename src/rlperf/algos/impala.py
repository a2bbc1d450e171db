"""IMPALA's learner (Espeholt et al. 2018): a V-trace actor-critic that tolerates policy lag.

Reads top to bottom: the data it needs, the loss of the paper's sec. 4.2, then the update:
for each minibatch of whole env trajectories, the current policy's log-probabilities and
values, the V-trace targets computed from them without gradients, and one gradient step.

The actors act with a behaviour policy mu that may trail the learner by up to
``max_policy_lag`` updates (an asynchronous runner); the truncated importance weights of
V-trace correct for the lag. With no lag and rho_bar = c_bar = 1 every weight is 1 and the
update is A2C's (Mnih et al. 2016) with n-step returns bootstrapped at the rollout's end.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import torch

from rlperf.algos.metrics import value_fit
from rlperf.algos.returns import vtrace
from rlperf.config.schema import IMPALAConfig
from rlperf.core.protocols import GradientStep, OptimizerSpec
from rlperf.core.types import DataSpec, Progress, Rollout
from rlperf.models.policy import ActorCritic


def impala_loss(
    cfg: IMPALAConfig,
    logprob: torch.Tensor,
    entropy: torch.Tensor,
    value: torch.Tensor,
    vs: torch.Tensor,
    pg_advantages: torch.Tensor,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The V-trace actor-critic loss (sec. 4.2) on 1-D tensors of equal length, and its parts.

    Its gradient is the paper's update, averaged over the samples:

    - policy: rho_s (r_s + gamma v_{s+1} - V(x_s)) grad log pi(a_s|x_s), i.e. the loss
      -A_s log pi(a_s|x_s) with the V-trace advantage A_s held fixed;
    - baseline: (v_s - V(x_s)) grad V(x_s), i.e. the loss 0.5 (v_s - V(x_s))^2 with the
      target v_s held fixed, weighted by ``vf_coef``;
    - entropy bonus: -grad sum_a pi(a|x_s) log pi(a|x_s), weighted by ``ent_coef``.

    The paper sums over the batch; a mean keeps the scale of the learning rate and gradient
    clipping independent of num_envs x num_steps (as PPO's loss here).
    """
    pg_loss = -(pg_advantages * logprob).mean()
    v_loss = 0.5 * ((vs - value) ** 2).mean()
    entropy_mean = entropy.mean()
    loss = pg_loss + cfg.vf_coef * v_loss - cfg.ent_coef * entropy_mean
    parts = {
        "policy_loss": pg_loss.detach(),
        "value_loss": v_loss.detach(),
        "entropy": entropy_mean.detach(),
    }
    return loss, parts


def importance_stats(
    behaviour_logprob: torch.Tensor, target_logprob: torch.Tensor, rho_bar: float
) -> dict[str, torch.Tensor]:
    """How far the behaviour policy is from the target: rho = pi/mu before truncation.

    ``mean_rho`` (1 on-policy), ``rho_clipfrac`` (share of samples whose weight V-trace
    truncates at rho_bar) and ``behaviour_kl``, the k3 estimate (Schulman 2020) of
    KL(mu || pi) from mu's own samples: 0 on-policy, growing with the policy lag.
    """
    with torch.no_grad():
        log_ratio = target_logprob.detach().float() - behaviour_logprob.float()
        ratio = log_ratio.exp()
        return {
            "mean_rho": ratio.mean(),
            "rho_clipfrac": (ratio > rho_bar).float().mean(),
            "behaviour_kl": ((ratio - 1) - log_ratio).mean(),
        }


class IMPALA:
    """The IMPALA learner over rollouts from any runner with a policy lag it tolerates."""

    def __init__(self, cfg: IMPALAConfig, policy: ActorCritic, *, seed: int) -> None:
        self.cfg = cfg
        self.policy = policy
        # The learner recomputes V with its current parameters (V in eq. 1 is the learner's),
        # so the behaviour's value estimates are not needed; its log-probabilities are (mu).
        self.data_spec = DataSpec(
            kind="rollout",
            horizon=cfg.num_steps,
            needs_logprob=True,
            needs_value=False,
            max_policy_lag=cfg.max_policy_lag,
        )
        # Nothing here is random (minibatches are fixed slices of envs): ``seed`` is accepted
        # for the constructor shape every algorithm shares.
        del seed

    def optimizer_spec(self) -> OptimizerSpec:
        cfg = self.cfg
        alpha = cfg.rmsprop_alpha if cfg.optimizer == "rmsprop" else None
        return OptimizerSpec(cfg.optimizer, cfg.learning_rate, cfg.optimizer_eps, alpha)

    def update(self, batch: Rollout, step: GradientStep, progress: Progress) -> dict[str, float]:
        cfg = self.cfg
        lr = progress.annealed(cfg.learning_rate, cfg.anneal_lr)
        step.set_learning_rate(lr)

        T, N = batch.num_steps, batch.num_envs
        k = cfg.num_minibatches
        if not 1 <= k <= N:
            raise ValueError(
                f"impala.num_minibatches ({k}) must be between 1 and num_envs ({N}): "
                "a minibatch holds whole env trajectories, V-trace runs along time"
            )
        # Split along envs, never along time: the V-trace recursion needs each trajectory
        # whole, and each minibatch recomputes its targets with the policy as it is now.
        bounds = [N * i // k for i in range(k + 1)]

        totals: dict[str, torch.Tensor] = {}
        grad_norms: list[float] = []
        values_seen: list[torch.Tensor] = []
        targets_seen: list[torch.Tensor] = []
        for lo, hi in itertools.pairwise(bounds):
            envs = slice(lo, hi)
            n = hi - lo
            obs_TN = batch.obs_TN[:, envs]
            # ---- the target policy pi (current parameters) on the behaviour's actions ----
            with step.autocast():
                logprob, entropy, value = self.policy.evaluate(
                    obs_TN.reshape(T * n, *obs_TN.shape[2:]),
                    batch.actions_TN[:, envs].reshape(T * n),
                )
                with torch.no_grad():
                    next_value = self.policy.value(batch.next_obs_N[envs]).float()

            # ---- V-trace targets and advantages, fixed (no gradient) for this step ----
            behaviour_logprob_TN = batch.logprobs_TN[:, envs]
            vs_TN, pg_advantages_TN = vtrace(
                behaviour_logprob_TN,
                logprob.reshape(T, n),
                batch.rewards_TN[:, envs],
                value.reshape(T, n),
                batch.dones_TN[:, envs],
                next_value,
                cfg.gamma,
                cfg.rho_bar,
                cfg.c_bar,
                batch.truncation_values_TN[:, envs],
            )

            loss, parts = impala_loss(
                cfg, logprob, entropy, value, vs_TN.reshape(-1), pg_advantages_TN.reshape(-1)
            )
            grad_norms.append(step(loss, cfg.max_grad_norm))
            parts.update(importance_stats(behaviour_logprob_TN.reshape(-1), logprob, cfg.rho_bar))
            for name, v in parts.items():
                totals[name] = totals.get(name, 0.0) + v
            values_seen.append(value.detach().reshape(-1))
            targets_seen.append(vs_TN.reshape(-1))

        metrics = {f"losses/{name}": float(v) / k for name, v in totals.items()}
        metrics.update(
            {
                **value_fit(torch.cat(values_seen).float(), torch.cat(targets_seen).float()),
                "losses/learning_rate": lr,
                "losses/grad_norm": sum(grad_norms) / len(grad_norms),
                "losses/minibatches": float(k),
            }
        )
        return metrics

    def state_dict(self) -> dict[str, Any]:
        return {"policy": self.policy.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.policy.load_state_dict(state["policy"])
