"""PPO's clipped-surrogate maths and its epochs of minibatch steps, shared by the PPO family.

PPO (GAE advantages), APPO (V-trace advantages) and RND (a combined extrinsic and intrinsic
advantage, two value heads and the predictor) all learn with the same pieces: the clipped
policy loss (:func:`clipped_surrogate`), the value error with optional clipping around the
old prediction (:func:`value_error`), and shuffled minibatch epochs that stop early past a
KL target (:func:`minibatch_epochs`). Each algorithm reads its knobs into one
:class:`SurrogateSettings`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from rlperf.config.choices import AdvantageScope
from rlperf.core.cuda_graph import GraphedCall
from rlperf.core.protocols import GradientStep, RecordableStep
from rlperf.models.policy import ActorCritic

LossParts = dict[str, torch.Tensor]


@dataclass(frozen=True)
class SurrogateSettings:
    """The knobs of the clipped-surrogate update (CleanRL's names)."""

    update_epochs: int
    clip_coef: float
    ent_coef: float | torch.Tensor
    """A tensor in a recorded minibatch step (:class:`RecordedMinibatch`), filled in place."""
    vf_coef: float
    norm_adv: bool = True
    norm_adv_over: AdvantageScope = "minibatch"
    """Where ``norm_adv`` normalises: each ``"minibatch"`` or the whole ``"batch"`` once."""
    max_grad_norm: float | None = None
    vf_clip_coef: float | None = None
    """Clip the new value to old +/- this before the squared error (CleanRL's clip_vloss)."""
    vf_loss_clip: float | None = None
    """Clamp the squared value error at this (RLlib's vf_clip_param)."""
    target_kl: float | None = None
    """Stop an iteration's epochs once a minibatch's approx KL exceeds this."""

    @classmethod
    def of(cls, cfg: Any) -> SurrogateSettings:
        """The settings in an algorithm's config section; knobs it lacks stay off."""
        return cls(
            update_epochs=cfg.update_epochs,
            clip_coef=cfg.clip_coef,
            ent_coef=cfg.ent_coef,
            vf_coef=cfg.vf_coef,
            norm_adv=cfg.norm_adv,
            norm_adv_over=getattr(cfg, "norm_adv_over", "minibatch"),
            max_grad_norm=cfg.max_grad_norm,
            vf_clip_coef=getattr(cfg, "vf_clip_coef", None),
            vf_loss_clip=getattr(cfg, "vf_loss_clip", None),
            target_kl=getattr(cfg, "target_kl", None),
        )


def clipped_surrogate(
    logprob: torch.Tensor,
    old_logprob: torch.Tensor,
    advantages: torch.Tensor,
    settings: SurrogateSettings,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, LossParts]:
    """The clipped policy loss (a mean over the samples, weighted by ``weights`` where
    given) and its diagnostics (approx KL, clip fraction, detached, unweighted)."""
    logratio = logprob - old_logprob
    ratio = logratio.exp()
    if settings.norm_adv and settings.norm_adv_over == "minibatch":
        # Per minibatch, as in the PPO paper's Atari runs (and CleanRL / SB3).
        advantages = normalised(advantages)
    # The pessimistic bound of the two objectives (as a loss, the max).
    clip = settings.clip_coef
    pg_loss = weighted_mean(
        torch.max(-advantages * ratio, -advantages * ratio.clamp(1 - clip, 1 + clip)), weights
    )
    with torch.no_grad():
        parts = {
            "policy_loss": pg_loss.detach(),
            # k3 estimator of KL(old || new) (Schulman 2020): unbiased and non-negative.
            "approx_kl": ((ratio - 1) - logratio).mean(),
            "clipfrac": ((ratio - 1).abs() > clip).float().mean(),
        }
    return pg_loss, parts


def weighted_mean(values: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """The mean of ``values``, or their mean weighted by ``weights`` (0 where all are 0)."""
    if weights is None:
        return values.mean()
    return (values * weights).sum() / weights.sum().clamp_min(1e-8)


def normalised(advantages: torch.Tensor) -> torch.Tensor:
    """``advantages`` shifted and scaled to zero mean and unit spread."""
    return (advantages - advantages.mean()) / (advantages.std() + 1e-8)


def value_error(
    value: torch.Tensor,
    old_value: torch.Tensor,
    returns: torch.Tensor,
    settings: SurrogateSettings,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """0.5 x the mean squared value error (weighted by ``weights`` where given), clipped
    around the old prediction and clamped as the settings say."""
    error = (value - returns) ** 2
    if settings.vf_clip_coef is not None:
        c = settings.vf_clip_coef
        clipped = old_value + (value - old_value).clamp(-c, c)
        error = torch.max(error, (clipped - returns) ** 2)
    if settings.vf_loss_clip is not None:
        error = error.clamp(max=settings.vf_loss_clip)
    return 0.5 * weighted_mean(error, weights)


def ppo_loss(
    settings: SurrogateSettings,
    new_logprob: torch.Tensor,
    entropy: torch.Tensor,
    new_value: torch.Tensor,
    old_logprob: torch.Tensor,
    old_value: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    kl_coeff: float | torch.Tensor,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, LossParts]:
    """PPO's loss on one minibatch and its parts (detached), all 1-D tensors of equal length.
    With ``weights`` every term is a weighted mean: a sample's whole loss scales, so a
    down-weighted sample's entropy bonus does not outweigh its policy and value terms."""
    pg_loss, parts = clipped_surrogate(new_logprob, old_logprob, advantages, settings, weights)
    v_loss = value_error(new_value, old_value, returns, settings, weights)
    entropy_mean = weighted_mean(entropy, weights)
    loss = pg_loss - settings.ent_coef * entropy_mean + settings.vf_coef * v_loss
    if isinstance(kl_coeff, torch.Tensor) or kl_coeff > 0:
        # RLlib's adaptive KL penalty (differentiable: the same k3 estimator).
        logratio = new_logprob - old_logprob
        loss = loss + kl_coeff * weighted_mean((logratio.exp() - 1) - logratio, weights)
    parts.update(value_loss=v_loss.detach(), entropy=entropy_mean.detach())
    return loss, parts


def minibatch_epochs(
    settings: SurrogateSettings,
    batch_size: int,
    mb_size: int,
    generator: torch.Generator,
    device: torch.device,
    step: GradientStep,
    minibatch_loss: Callable[[torch.Tensor], tuple[torch.Tensor, LossParts]],
) -> dict[str, float]:
    """``settings.update_epochs`` passes of shuffled minibatches: ``minibatch_loss(indices)``
    gives each minibatch's loss and parts, one gradient step follows. Stops early once a
    minibatch's approx KL exceeds ``settings.target_kl``. Returns the mean parts, the mean
    gradient norm and the number of minibatches as ``losses/...`` metrics."""
    totals: dict[str, torch.Tensor] = {}
    grad_norms: list[float] = []
    for idx in shuffled_minibatches(settings.update_epochs, batch_size, mb_size, generator, device):
        loss, parts = minibatch_loss(idx)
        grad_norms.append(step(loss, settings.max_grad_norm))
        for k, v in parts.items():  # summed on the device: no sync per minibatch
            totals[k] = totals[k] + v if k in totals else v
        if settings.target_kl is not None and float(parts["approx_kl"]) > settings.target_kl:
            break
    return _epoch_metrics(totals, grad_norms)


def shuffled_minibatches(
    epochs: int, batch_size: int, mb_size: int, generator: torch.Generator, device: torch.device
) -> Iterator[torch.Tensor]:
    """The row indices of each minibatch, ``epochs`` times a fresh shuffle of the batch.
    Trailing samples that do not fill a minibatch are skipped that epoch; the shuffle
    changes every epoch, so each sample is used in expectation."""
    for _epoch in range(epochs):
        perm = torch.randperm(batch_size, generator=generator).to(device)
        for start in range(0, batch_size - mb_size + 1, mb_size):
            yield perm[start : start + mb_size]


def _epoch_metrics(totals: dict[str, torch.Tensor], grad_norms: list[float]) -> dict[str, float]:
    n = max(len(grad_norms), 1)
    metrics = {f"losses/{k}": float(v) / n for k, v in totals.items()}
    metrics["losses/grad_norm"] = sum(grad_norms) / n
    metrics["losses/minibatches"] = float(len(grad_norms))
    return metrics


@dataclass
class SurrogateBatch:
    """Flat (B,) tensors the clipped-surrogate epochs learn from (obs: (B, *obs_shape))."""

    obs: torch.Tensor
    actions: torch.Tensor
    old_logprob: torch.Tensor
    old_value: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    weights: torch.Tensor | None = None
    """Each sample's weight in the loss (:func:`ppo_loss`); None: all equal."""


def surrogate_epochs(
    settings: SurrogateSettings,
    policy: ActorCritic,
    step: GradientStep,
    generator: torch.Generator,
    data: SurrogateBatch,
    mb_size: int,
    kl_coeff: float = 0.0,
) -> dict[str, float]:
    """PPO's and APPO's epochs: :func:`minibatch_epochs` on :func:`ppo_loss`, or with
    ``runner.cuda_graph`` the same epochs through one recorded minibatch step
    (:class:`RecordedMinibatch`). With ``norm_adv_over="batch"`` the advantages are
    normalised here, once, over the whole batch."""
    if settings.norm_adv and settings.norm_adv_over == "batch":
        data = dataclasses.replace(data, advantages=normalised(data.advantages))
    if isinstance(step, RecordableStep) and step.graphs:
        return recorded_epochs(settings, policy, step, generator, data, mb_size, kl_coeff)

    def minibatch_loss(idx: torch.Tensor) -> tuple[torch.Tensor, LossParts]:
        with step.autocast():
            new_logprob, entropy, new_value = policy.evaluate(data.obs[idx], data.actions[idx])
        return ppo_loss(
            settings, new_logprob, entropy, new_value, data.old_logprob[idx],
            data.old_value[idx], data.advantages[idx], data.returns[idx], kl_coeff,
            None if data.weights is None else data.weights[idx],
        )  # fmt: skip

    return minibatch_epochs(
        settings, data.actions.shape[0], mb_size, generator, data.obs.device, step, minibatch_loss
    )


def _fields(batch: SurrogateBatch) -> list[torch.Tensor]:
    """The batch's tensors in field order; an absent (None) field is left out, and it is
    the last one, so a batch rebuilt from the list positionally is the same shape."""
    return [t for f in dataclasses.fields(batch) if (t := getattr(batch, f.name)) is not None]


class RecordedMinibatch:
    """PPO's minibatch step (forward, :func:`ppo_loss`, backward, clipping, optimizer) over
    fixed buffers, so that it can run as one CUDA graph (:class:`GraphedCall`).

    Each minibatch is copied into the buffers first; the losses' parts, the gradient norms
    and a count of non-finite steps add up on the device and are read once per update. The
    entropy and KL coefficients are tensors filled in place, the learning rate is the
    optimizer's own tensor (:meth:`LocalGradientStep.set_learning_rate`)."""

    def __init__(
        self,
        settings: SurrogateSettings,
        policy: ActorCritic,
        step: RecordableStep,
        data: SurrogateBatch,
        mb_size: int,
        kl_penalty: bool,
    ) -> None:
        device = data.obs.device
        self.policy, self.step = policy, step
        self.buffers = SurrogateBatch(
            *(t.new_empty((mb_size, *t.shape[1:])) for t in _fields(data))
        )
        self.ent_coef = torch.zeros((), device=device)
        self.kl_coeff: torch.Tensor | float = torch.zeros((), device=device) if kl_penalty else 0.0
        self.settings = dataclasses.replace(settings, ent_coef=self.ent_coef)
        self.totals: dict[str, torch.Tensor] = {}  # made by the first (eager) call
        self.grad_norm = torch.zeros((), device=device)
        self.nonfinite = torch.zeros((), device=device)
        self.steps = 0
        self.call = GraphedCall(self._step, device)

    def _step(self) -> None:
        b = self.buffers
        with self.step.autocast():
            new_logprob, entropy, new_value = self.policy.evaluate(b.obs, b.actions)
        loss, parts = ppo_loss(
            self.settings, new_logprob, entropy, new_value, b.old_logprob, b.old_value,
            b.advantages, b.returns, self.kl_coeff, b.weights,
        )  # fmt: skip
        grad_norm = self.step.apply(loss, self.settings.max_grad_norm)
        for name, value in parts.items():
            if name not in self.totals:
                self.totals[name] = torch.zeros_like(value, dtype=torch.float32)
            self.totals[name].add_(value)
        self.grad_norm.add_(grad_norm)
        self.nonfinite.add_((~(loss.isfinite() & grad_norm.isfinite())).float())

    def __call__(self, data: SurrogateBatch, idx: torch.Tensor) -> None:
        """One minibatch step on ``data``'s rows ``idx``."""
        for source, buffer in zip(_fields(data), _fields(self.buffers), strict=True):
            torch.index_select(source, 0, idx, out=buffer)
        self.call()
        self.steps += 1

    def read(self) -> tuple[dict[str, float], int]:
        """The update's mean metrics (as :func:`minibatch_epochs` reports them) and its
        count of non-finite steps, in one read from the device; the sums start again."""
        sums = [*self.totals.values(), self.grad_norm, self.nonfinite]
        values = torch.stack([v.float() for v in sums]).tolist()
        for v in sums:
            v.zero_()
        n, self.steps = max(self.steps, 1), 0
        metrics = {f"losses/{k}": v / n for k, v in zip(self.totals, values, strict=False)}
        metrics["losses/grad_norm"] = values[-2] / n
        metrics["losses/minibatches"] = float(n)
        metrics["perf/learner_graphed"] = float(self.call.graphed)
        return metrics, int(values[-1])


def recorded_epochs(
    settings: SurrogateSettings,
    policy: ActorCritic,
    step: RecordableStep,
    generator: torch.Generator,
    data: SurrogateBatch,
    mb_size: int,
    kl_coeff: float = 0.0,
) -> dict[str, float]:
    """:func:`surrogate_epochs` through a :class:`RecordedMinibatch` kept on ``step`` (one
    per minibatch shape): the same minibatches in the same order, no wait for the device
    until the update's metrics are read."""
    if settings.target_kl is not None:
        raise ValueError("target_kl reads the KL after every minibatch: not with runner.cuda_graph")
    key = (
        "surrogate", id(policy), mb_size, kl_coeff > 0,
        dataclasses.replace(settings, ent_coef=0.0),
        *((t.shape[1:], t.dtype) for t in _fields(data)),
    )  # fmt: skip
    program = step.programs.get(key)
    if program is None:
        program = step.programs[key] = RecordedMinibatch(
            settings, policy, step, data, mb_size, kl_coeff > 0
        )
    program.ent_coef.fill_(settings.ent_coef)
    if isinstance(program.kl_coeff, torch.Tensor):
        program.kl_coeff.fill_(kl_coeff)
    batch_size, device = data.actions.shape[0], data.obs.device
    for idx in shuffled_minibatches(settings.update_epochs, batch_size, mb_size, generator, device):
        program(data, idx)
    metrics, nonfinite = program.read()
    step.found_nonfinite(nonfinite)
    return metrics
