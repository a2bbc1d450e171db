"""Random Network Distillation (Burda et al. 2018) on PPO with two value heads.

Reads top to bottom: the data it needs, the intrinsic rewards computed in the learner from
the rollout's observations, the two advantage streams, then PPO's epochs of minibatch steps
whose loss also trains the predictor.

The exploration bonus of a transition t is the predictor's error on the observation it
leads to, x_{t+1}: ||f_hat(x_{t+1}) - f(x_{t+1})||^2 with f a fixed random network (both
see one frame, normalised by running statistics and clipped to +-obs_clip). It is divided
by a running standard deviation of the non-episodic discounted intrinsic return (sec. 2.4).

The two reward streams are kept apart (sec. 2.3): extrinsic rewards (clipped by the env) are
episodic with discount ``gamma``; intrinsic rewards are non-episodic (a game over is just
another transition for curiosity) with discount ``int_gamma``. Each has its own value head
and advantages; the policy ascends ext_coef A_E + int_coef A_I.

Without lag (synchronous runners) both streams use GAE. With a lagged behaviour policy mu
(the decoupled runner) both use V-trace (Espeholt et al. 2018, eq. 1 and sec. 4.2) against
the policy at the start of the iteration, pi_old, with lambda folded into the traces, and
PPO's clipped surrogate is taken around pi_old (the "decoupled" objective of Hilton et al.
2021, as in :mod:`rlperf.algos.appo`). Source 004 instead multiplied advantages by a clipped
ratio; this is the real correction.

Nothing here needs a runner change: intrinsic rewards come from ``obs_TN[1:]`` and
``next_obs_N``. Where an episode ended at step t, ``obs_TN[t + 1]`` is the first frame of
the next game rather than the last of the old one, so that one transition's bonus is the
novelty of the reset frame (which is low: every game starts there).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from rlperf.algos.impala import importance_stats
from rlperf.algos.metrics import value_fit
from rlperf.algos.returns import gae, vtrace
from rlperf.algos.running_stats import DiscountedReturnFilter, RunningMeanStd
from rlperf.algos.surrogate import (
    SurrogateSettings,
    clipped_surrogate,
    minibatch_epochs,
    value_error,
)
from rlperf.config.schema import RNDConfig
from rlperf.core.protocols import GradientStep, OptimizerSpec
from rlperf.core.types import DataSpec, Progress, Rollout
from rlperf.models.rnd import RNDPolicy


def rnd_frames(obs: torch.Tensor, input_shape: tuple[int, ...]) -> torch.Tensor:
    """The part of observations (..., *obs_shape) the RND networks see: the newest frame's
    channels of an image stack (oldest frame first), or the whole feature vector."""
    if len(input_shape) == 3:
        return obs[..., -input_shape[0] :, :, :]
    return obs


class RND:
    """RND-PPO over rollouts from any runner whose policy lag it tolerates."""

    def __init__(
        self, cfg: RNDConfig, policy: RNDPolicy, *, seed: int, num_envs: int, use_vtrace: bool
    ) -> None:
        self.cfg = cfg
        self.policy = policy
        self.use_vtrace = use_vtrace
        # pi_old's log-probs and both values are recomputed at the start of each iteration
        # (the runner's behaviour values hold only the extrinsic head).
        self.data_spec = DataSpec(
            kind="rollout",
            horizon=cfg.num_steps,
            needs_logprob=True,
            needs_value=True,
            max_policy_lag=cfg.max_policy_lag,
        )
        self.input_shape = policy.rnd.input_shape
        self.obs_rms = RunningMeanStd(self.input_shape)
        self.int_return_rms = RunningMeanStd(())
        self.int_returns = DiscountedReturnFilter(num_envs, cfg.int_gamma)
        self.init_steps_done = 0
        """Env steps per env seen while only initialising the observation normaliser."""
        # Minibatch shuffling and the predictor's sample mask: checkpointed, so a resumed run
        # draws the same numbers as an uninterrupted one.
        self.generator = torch.Generator().manual_seed(seed)
        self.settings = SurrogateSettings.of(cfg)

    def optimizer_spec(self) -> OptimizerSpec:
        return OptimizerSpec("adam", self.cfg.learning_rate, self.cfg.adam_eps)

    def normalise(self, frames: torch.Tensor) -> torch.Tensor:
        """Frames (B, *input_shape) as the RND networks take them: standardised, clipped."""
        mean = self.obs_rms.mean.to(frames.device, torch.float32)
        std = self.obs_rms.std.to(frames.device, torch.float32)
        clip = self.cfg.obs_clip
        return ((frames.float() - mean) / (std + 1e-8)).clamp(-clip, clip)

    @torch.no_grad()
    def intrinsic_rewards(self, frames: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
        """Unnormalised prediction errors of frames (B, *input_shape), in chunks (B,)."""
        out = [
            self.policy.rnd.intrinsic_reward(self.normalise(frames[i : i + chunk]))
            for i in range(0, frames.shape[0], chunk)
        ]
        return torch.cat(out) if out else torch.zeros(0)

    def update(self, batch: Rollout, step: GradientStep, progress: Progress) -> dict[str, float]:
        cfg = self.cfg
        T, N = batch.num_steps, batch.num_envs
        B = T * N
        # x_{t+1} of every transition: the rollout's later observations, then next_obs.
        next_frames_TN = torch.cat(
            [
                rnd_frames(batch.obs_TN[1:], self.input_shape),
                rnd_frames(batch.next_obs_N, self.input_shape).unsqueeze(0),
            ]
        )
        next_frames_B = next_frames_TN.reshape(B, *self.input_shape)

        # ---- the first num_init_steps per env only initialise the observation normaliser ----
        if self.init_steps_done < cfg.num_init_steps:
            self.obs_rms.update(next_frames_B)
            self.init_steps_done += T
            return {"charts/rnd_init_steps": float(self.init_steps_done)}

        lr = progress.annealed(cfg.learning_rate, cfg.anneal_lr)
        step.set_learning_rate(lr)
        mb_size = cfg.minibatch(B)
        obs_B = batch.obs_TN.reshape(B, *batch.obs_TN.shape[2:])
        actions_B = batch.actions_TN.reshape(B)

        # ---- pi_old: log-probs and both values as the policy is now (no gradient) ----
        with torch.no_grad(), step.autocast():
            parts = [
                self.policy.evaluate_both(obs_B[i : i + mb_size], actions_B[i : i + mb_size])
                for i in range(0, B, mb_size)
            ]
            next_ext_N, next_int_N = self.policy.values(batch.next_obs_N)
        old_logprob_B = torch.cat([p[0] for p in parts]).float()
        old_ext_B = torch.cat([p[2] for p in parts]).float()
        old_int_B = torch.cat([p[3] for p in parts]).float()

        # ---- intrinsic rewards: prediction error / std of the non-episodic return ----
        raw_int_B = self.intrinsic_rewards(next_frames_B)
        raw_int_TN = raw_int_B.reshape(T, N)
        discounted = self.int_returns.update(raw_int_TN)
        self.int_return_rms.update(discounted.reshape(-1))
        int_rewards_TN = (raw_int_TN / float(self.int_return_rms.std + 1e-8)).to(
            batch.rewards_TN.dtype
        )
        # Updated after the rewards are computed, before the predictor trains on them.
        self.obs_rms.update(next_frames_B)

        # ---- two advantage streams: extrinsic episodic, intrinsic non-episodic ----
        ext_adv_TN, ext_ret_TN, int_adv_TN, int_ret_TN = self._advantages(
            batch, old_logprob_B.reshape(T, N), old_ext_B.reshape(T, N),
            old_int_B.reshape(T, N), next_ext_N.float(), next_int_N.float(), int_rewards_TN,
        )  # fmt: skip
        advantages_B = (cfg.ext_coef * ext_adv_TN + cfg.int_coef * int_adv_TN).reshape(B)
        ext_ret_B, int_ret_B = ext_ret_TN.reshape(B), int_ret_TN.reshape(B)

        # ---- PPO epochs; the predictor learns in the same steps ----
        metrics = self._epochs(
            obs_B, actions_B, old_logprob_B, advantages_B, (old_ext_B, old_int_B),
            (ext_ret_B, int_ret_B), next_frames_B, step, mb_size,
        )  # fmt: skip
        if self.use_vtrace:
            stats = importance_stats(batch.logprobs_TN.reshape(B), old_logprob_B, cfg.rho_bar)
            metrics.update({f"losses/{k}": float(v) for k, v in stats.items()})
        metrics.update(
            {
                **value_fit(old_ext_B, ext_ret_B.float()),
                **value_fit(old_int_B, int_ret_B.float(), "losses/explained_variance_int"),
                "losses/learning_rate": lr,
                # 004's TensorBoard: rewards per rollout (summed over its T steps, mean over
                # envs) and the intrinsic reward per step.
                "charts/ext_reward_per_rollout": float(batch.rewards_TN.sum(0).mean()),
                "charts/int_reward_per_rollout": float(int_rewards_TN.sum(0).mean()),
                "charts/int_reward_mean": float(int_rewards_TN.mean()),
                "charts/int_reward_max": float(int_rewards_TN.max()),
                "charts/int_reward_raw_mean": float(raw_int_B.mean()),
            }
        )
        return metrics

    def _advantages(
        self,
        batch: Rollout,
        old_logprob_TN: torch.Tensor,
        old_ext_TN: torch.Tensor,
        old_int_TN: torch.Tensor,
        next_ext_N: torch.Tensor,
        next_int_N: torch.Tensor,
        int_rewards_TN: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(A_E, R_E, A_I, R_I), each (T, N): GAE without lag, V-trace with it."""
        cfg = self.cfg
        rewards = batch.rewards_TN.float()
        # Curiosity does not stop at a game over: the intrinsic stream never sees a done.
        no_dones = torch.zeros_like(batch.dones_TN)
        truncation = batch.truncation_values_TN.float()
        if self.use_vtrace:
            mu = batch.logprobs_TN
            ext_ret, ext_adv = vtrace(
                mu, old_logprob_TN, rewards, old_ext_TN, batch.dones_TN, next_ext_N,
                cfg.gamma, cfg.rho_bar, cfg.c_bar, truncation, lambda_=cfg.gae_lambda,
            )  # fmt: skip
            int_ret, int_adv = vtrace(
                mu, old_logprob_TN, int_rewards_TN.float(), old_int_TN, no_dones, next_int_N,
                cfg.int_gamma, cfg.rho_bar, cfg.c_bar, None, lambda_=cfg.gae_lambda,
            )  # fmt: skip
            return ext_adv, ext_ret, int_adv, int_ret
        ext_adv, ext_ret = gae(
            rewards, old_ext_TN, batch.dones_TN, next_ext_N, cfg.gamma, cfg.gae_lambda, truncation
        )
        int_adv, int_ret = gae(
            int_rewards_TN.float(), old_int_TN, no_dones, next_int_N, cfg.int_gamma,
            cfg.gae_lambda,
        )  # fmt: skip
        return ext_adv, ext_ret, int_adv, int_ret

    def _epochs(
        self,
        obs_B: torch.Tensor,
        actions_B: torch.Tensor,
        old_logprob_B: torch.Tensor,
        advantages_B: torch.Tensor,
        old_values: tuple[torch.Tensor, torch.Tensor],
        returns: tuple[torch.Tensor, torch.Tensor],
        next_frames_B: torch.Tensor,
        step: GradientStep,
        mb_size: int,
    ) -> dict[str, float]:
        """PPO's minibatch epochs (the family's helper) on RND's loss: the clipped surrogate
        on the combined advantage, both value heads, and the predictor's distillation."""
        cfg, settings = self.cfg, self.settings
        (old_ext_B, old_int_B), (ext_ret_B, int_ret_B) = old_values, returns
        device = obs_B.device

        def minibatch_loss(idx: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
            # Only a share of samples trains the predictor, so with many envs it does not
            # learn faster than the policy finds new states (the paper's 0.25 at 128 envs).
            mask = (torch.rand(idx.shape[0], generator=self.generator) < cfg.update_proportion).to(
                device, torch.float32
            )
            with step.autocast():
                logprob, entropy, v_ext, v_int = self.policy.evaluate_both(
                    obs_B[idx], actions_B[idx]
                )
                prediction, target = self.policy.rnd(self.normalise(next_frames_B[idx]))
            pg_loss, parts = clipped_surrogate(
                logprob, old_logprob_B[idx], advantages_B[idx], settings
            )
            ext_v_loss = value_error(v_ext, old_ext_B[idx], ext_ret_B[idx], settings)
            int_v_loss = value_error(v_int, old_int_B[idx], int_ret_B[idx], settings)
            entropy_mean = entropy.mean()
            error = (prediction.float() - target.float()).square().mean(-1)
            rnd_loss = (error * mask).sum() / mask.sum().clamp(min=1.0)
            loss = (
                pg_loss
                - cfg.ent_coef * entropy_mean
                + cfg.vf_coef * (ext_v_loss + int_v_loss)
                + rnd_loss
            )
            parts.update(
                value_loss=ext_v_loss.detach(),
                value_loss_int=int_v_loss.detach(),
                rnd_loss=rnd_loss.detach(),
                entropy=entropy_mean.detach(),
            )
            return loss, parts

        return minibatch_epochs(
            settings, actions_B.shape[0], mb_size, self.generator, device, step, minibatch_loss
        )

    def state_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy.state_dict(),
            "generator": self.generator.get_state(),
            "obs_rms": self.obs_rms.state_dict(),
            "int_return_rms": self.int_return_rms.state_dict(),
            "int_returns": self.int_returns.state_dict(),
            "init_steps_done": self.init_steps_done,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.policy.load_state_dict(state["policy"])
        self.generator.set_state(state["generator"])
        self.obs_rms.load_state_dict(state["obs_rms"])
        self.int_return_rms.load_state_dict(state["int_return_rms"])
        self.int_returns.load_state_dict(state["int_returns"])
        self.init_steps_done = int(state["init_steps_done"])
