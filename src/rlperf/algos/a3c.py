"""A3C (Mnih et al. 2016) as source 002 trains it on football: the loss of one update segment.

Reads top to bottom: the data it needs (segments of ``num_local_steps`` steps), the loss,
then the update. Where the update runs is the runner's business:

- under the ``hogwild`` runner every worker process calls :meth:`A3C.update` on its own
  segment with a gradient step that applies the gradient to the shared model through the
  shared optimizer (``core/shared_optim.py``); in the driver process
  :meth:`A3C.follow_workers` only applies the learning-rate schedule to the shared optimizer
  and passes the workers' loss metrics on;
- under the synchronous runners (inproc, subprocess) the same update makes one gradient step
  per rollout of all envs: synchronous A3C, i.e. A2C.

The loss is 002's, summed over the segment's steps (and averaged over its envs):

    actor  = - sum_t A_t log pi(a_t|s_t),  A_t = GAE(gamma, gae_lambda) on the values, held fixed
    critic =   sum_t (R_t - V(s_t))^2 / 2,  R_t the n-step return bootstrapped at the end
    loss   = actor + vf_coef * critic - ent_coef * sum_t H(pi(.|s_t))
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rlperf.algos.metrics import value_fit
from rlperf.algos.returns import gae
from rlperf.config.schema import A3CConfig
from rlperf.core.checkpoint import load_checkpoint
from rlperf.core.errors import CheckpointError, ConfigError
from rlperf.core.protocols import GradientStep, Optimizer, OptimizerSpec
from rlperf.core.types import DataSpec, Progress, Rollout, WorkerUpdates
from rlperf.models.policy import ActorCritic
from rlperf.models.recurrent import RecurrentActorCritic, RecurrentRollout


def segment_rewards(cfg: A3CConfig, rewards_TN: torch.Tensor) -> torch.Tensor:
    """The training rewards of a segment: the optional time penalty, then the optional
    per-segment standardisation (both 002's experiments, both off by default)."""
    rewards = rewards_TN - cfg.time_penalty if cfg.time_penalty else rewards_TN
    if cfg.standardize_rewards and rewards.numel() > 1:
        rewards = (rewards - rewards.mean()) / (rewards.std() + 1e-8)
    return rewards


def a3c_loss(
    cfg: A3CConfig,
    logprob_TN: torch.Tensor,
    entropy_TN: torch.Tensor,
    value_TN: torch.Tensor,
    advantages_TN: torch.Tensor,
    returns_TN: torch.Tensor,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """002's loss on one segment (see the module docstring), and its parts."""
    n = logprob_TN.shape[1]
    actor = -(advantages_TN * logprob_TN).sum() / n
    error = returns_TN - value_TN
    if cfg.value_clip is not None:
        error = error.clamp(-cfg.value_clip, cfg.value_clip)
    critic = 0.5 * error.pow(2).sum() / n
    entropy = entropy_TN.sum() / n
    loss = actor + cfg.vf_coef * critic - cfg.ent_coef * entropy
    parts = {
        "policy_loss": actor.detach(),
        "value_loss": critic.detach(),
        "entropy": entropy.detach() / logprob_TN.shape[0],
        "loss": loss.detach(),
    }
    return loss, parts


def load_matching_weights(model: nn.Module, source: str) -> dict[str, list[str]]:
    """Load the tensors of ``source`` whose names and shapes match ``model``'s (002's
    ``load_previous_weights``, which kept only matching keys); returns what was loaded and
    what was skipped, and prints a one-line report.

    ``source``: a ``.safetensors`` file of a state dict, a checkpoint directory (its
    ``state.safetensors``; keys under ``algorithm.policy.``) or a run directory (its latest
    checkpoint). Nothing is unpickled.
    """
    from safetensors.torch import load_file

    path = Path(source)
    if path.is_dir():  # a checkpoint or run: read and verified (SHA-256) like any resume
        try:
            state = load_checkpoint(path)
        except CheckpointError as exc:
            raise ConfigError(f"a3c.init_weights: {exc}") from None
        policy = (state.get("algorithm") or {}).get("policy")
        if not isinstance(policy, dict):
            raise ConfigError(f"a3c.init_weights: {path} holds no policy weights")
        path = Path(state["_checkpoint_path"])
        tensors = {k: v for k, v in policy.items() if isinstance(v, torch.Tensor)}
    elif path.is_file():
        try:
            tensors = load_file(str(path))
        except Exception as exc:  # noqa: BLE001 - any unreadable file is the user's input
            raise ConfigError(
                f"a3c.init_weights: cannot read {path} ({type(exc).__name__}: {exc})"
            ) from None
        prefix = "algorithm.policy."  # a checkpoint's state.safetensors given as a file
        if any(k.startswith(prefix) for k in tensors):
            tensors = {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
    else:
        raise ConfigError(
            f"a3c.init_weights: {source} is not a .safetensors file, a checkpoint directory or a run directory"
        )
    own = model.state_dict()
    loaded = sorted(k for k, v in tensors.items() if k in own and own[k].shape == v.shape)
    report = {
        "loaded": loaded,
        "shape_mismatch": sorted(
            k for k, v in tensors.items() if k in own and own[k].shape != v.shape
        ),
        "not_in_model": sorted(k for k in tensors if k not in own),
        "not_in_file": sorted(k for k in own if k not in tensors),
    }
    with torch.no_grad():
        for k in loaded:
            own[k].copy_(tensors[k])
    print(
        f"rlperf: a3c.init_weights {path}: loaded {len(loaded)} of {len(own)} tensors; skipped "
        f"{len(report['shape_mismatch'])} with another shape {report['shape_mismatch'][:4]}, "
        f"{len(report['not_in_model'])} unknown to the model {report['not_in_model'][:4]}; "
        f"{len(report['not_in_file'])} keep their initial values {report['not_in_file'][:4]}",
        file=sys.stderr,
        flush=True,
    )
    return report


class A3C:
    """The A3C update of one segment, for the hogwild runner's workers or a synchronous runner."""

    def __init__(self, cfg: A3CConfig, policy: ActorCritic, *, seed: int) -> None:
        self.cfg = cfg
        self.policy = policy
        # The local copy a worker acts with may trail the shared model by the updates other
        # workers applied during its segment (Hogwild): A3C accepts that lag by design.
        self.data_spec = DataSpec(
            kind="rollout",
            horizon=cfg.num_local_steps,
            needs_logprob=False,
            needs_value=False,
            max_policy_lag=1,
        )
        self.init_report: dict[str, list[str]] | None = None
        if cfg.init_weights:
            self.init_report = load_matching_weights(policy, cfg.init_weights)
        del seed  # nothing random in the update

    def optimizer_spec(self) -> OptimizerSpec:
        return OptimizerSpec(self.cfg.optimizer, self.cfg.learning_rate, self.cfg.optimizer_eps)

    def learning_rate(self, env_steps: int) -> float:
        """The schedule: constant, multiplied by lr_drop_factor from lr_drop_steps on."""
        cfg = self.cfg
        if cfg.lr_drop_steps is not None and env_steps >= cfg.lr_drop_steps:
            return cfg.learning_rate * cfg.lr_drop_factor
        return cfg.learning_rate

    def follow_workers(
        self, updates: WorkerUpdates, optimizer: Optimizer, progress: Progress
    ) -> dict[str, float]:
        """In the Hogwild driver: the workers applied their gradients already; set the
        schedule's learning rate on the shared optimizer and pass their metrics on."""
        lr = self.learning_rate(progress.env_steps)
        optimizer.set_learning_rate(lr)
        return {
            **updates.metrics,
            "losses/learning_rate": lr,
            "losses/segments": float(updates.segments),
        }

    def update(self, batch: Rollout, step: GradientStep, progress: Progress) -> dict[str, float]:
        lr = self.learning_rate(progress.env_steps)
        step.set_learning_rate(lr)
        cfg = self.cfg
        T, N = batch.num_steps, batch.num_envs
        # ---- the segment replayed through the current weights, with gradients ----
        if getattr(self.policy, "is_recurrent", False):
            logprob, entropy, value, next_value = self._replay_recurrent(batch)
        else:
            with step.autocast():
                logprob, entropy, value = self.policy.evaluate(
                    batch.obs_TN.reshape(T * N, *batch.obs_TN.shape[2:]),
                    batch.actions_TN.reshape(-1),
                )
                with torch.no_grad():
                    next_value = self.policy.value(batch.next_obs_N).float()
        value_TN = value.reshape(T, N)

        # ---- advantages (GAE with gae_lambda, 002's tau) and n-step returns, held fixed ----
        rewards_TN = segment_rewards(cfg, batch.rewards_TN)
        with torch.no_grad():
            advantages_TN, _ = gae(
                rewards_TN,
                value_TN.detach(),
                batch.dones_TN,
                next_value,
                cfg.gamma,
                cfg.gae_lambda,
                batch.truncation_values_TN,
            )
            _, returns_TN = gae(
                rewards_TN,
                value_TN.detach(),
                batch.dones_TN,
                next_value,
                cfg.gamma,
                1.0,
                batch.truncation_values_TN,
            )

        loss, parts = a3c_loss(
            cfg, logprob.reshape(T, N), entropy.reshape(T, N), value_TN, advantages_TN, returns_TN
        )
        grad_norm = step(loss, cfg.max_grad_norm)
        metrics = {f"losses/{k}": float(v) for k, v in parts.items()}
        metrics.update(value_fit(value_TN.detach().reshape(-1), returns_TN.reshape(-1)))
        metrics["losses/grad_norm"] = grad_norm
        metrics["losses/learning_rate"] = lr
        return metrics

    def _replay_recurrent(
        self, batch: Rollout
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The LSTM variant: replay the segment step by step from the state it started with
        (gradients flow through time within the segment), bootstrap from the final state."""
        if not isinstance(batch, RecurrentRollout) or batch.initial_h_N is None:
            raise ValueError(
                "a recurrent policy learns from RecurrentRollout segments (hogwild runner)"
            )
        policy: RecurrentActorCritic = self.policy  # type: ignore[assignment]
        logprob_TN, entropy_TN, value_TN, _ = policy.evaluate_sequence(
            batch.obs_TN, batch.actions_TN, batch.dones_TN, (batch.initial_h_N, batch.initial_c_N)
        )
        with torch.no_grad():
            next_value = policy.value_from(batch.next_obs_N, (batch.final_h_N, batch.final_c_N))
        return logprob_TN.reshape(-1), entropy_TN.reshape(-1), value_TN.reshape(-1), next_value

    def state_dict(self) -> dict[str, Any]:
        return {"policy": self.policy.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.policy.load_state_dict(state["policy"])
