"""One pass from what the user gave to the config a run starts from: checked, resolved, frozen.

Everything that the user may leave open is decided here and written into the config, so the
session, the runners and the algorithms read settled values and config.yaml stores exactly
what ran (a resume starts from it and resolves nothing again):

- ``model.name``: ``auto`` becomes the env's default model, ``3`` becomes ``thesis-3``;
- ``runner.precision=auto`` (and the memory layout with it): timed on this machine;
- every refusal (values, names, devices, and runner x algorithm x env x model from their
  facts tables, :mod:`rlperf.training.checks`) is raised before anything is built, as one line.

The result is frozen (:func:`rlperf.config.schema.freeze`): assigning to it raises, so no
part of a run can change a setting after it was checked.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rlperf.config.schema import RunConfig, freeze, is_frozen, thawed_copy
from rlperf.core.autoprecision import AUTO as AUTO_PRECISION
from rlperf.core.autoprecision import PrecisionChoice, choose_precision
from rlperf.models.catalog import build_model, frame_dim, run_model_name
from rlperf.telemetry import system
from rlperf.training import checks, registry


@dataclass(frozen=True)
class ResolvedRun:
    """A run's frozen config and what resolving it measured."""

    cfg: RunConfig
    precision_choice: PrecisionChoice | None = None
    """What ``runner.precision=auto`` chose and the timings behind it (None: it was given)."""


def check(cfg: RunConfig, *, on_this_machine: bool = True) -> None:
    """Raise ConfigError on the first value, name or combination in ``cfg`` that cannot run
    (every check of :mod:`rlperf.training.checks`)."""
    checks.check(cfg, on_this_machine=on_this_machine)


def resolve(cfg: RunConfig, *, announce: bool = True) -> ResolvedRun:
    """Check ``cfg`` and return a frozen copy with nothing left open (see :func:`settle`)."""
    check(cfg)
    return settle(cfg, announce=announce)


def preview(cfg: RunConfig) -> RunConfig:
    """Check ``cfg`` and return what its run's ``config.yaml`` will hold, except what only a
    measurement decides (``runner.precision=auto`` stays ``auto``): ``--print-config``."""
    check(cfg)
    out = thawed_copy(cfg)
    out.model.name = run_model_name(cfg.model, cfg.env.id)
    return out


def settle(cfg: RunConfig, *, announce: bool = True) -> ResolvedRun:
    """A frozen copy of a checked ``cfg`` with nothing left open.

    Timing ``precision=auto`` uses the CPUs this process may use now: apply the run's CPU
    resources first. ``announce`` prints the precision choice (one line on stderr)."""
    if is_frozen(cfg):  # resolved before (a resume, a data-parallel rank): nothing is open
        return ResolvedRun(cfg)
    out = thawed_copy(cfg)
    out.model.name = run_model_name(cfg.model, cfg.env.id)
    choice = None
    if out.runner.precision == AUTO_PRECISION:
        choice = _time_precision(out)
        out.runner.precision = choice.precision
        if _layout_timed(choice):  # only a network with convolutions has a layout to choose
            out.runner.channels_last = choice.channels_last
        if announce:
            _announce(choice)
    return ResolvedRun(freeze(out), choice)


def _layout_timed(choice: PrecisionChoice) -> bool:
    return any(label.endswith("-cl") for label in choice.samples_per_s)


def _time_precision(cfg: RunConfig) -> PrecisionChoice:
    """Time the run's learner step in every precision and layout here (or read the cache),
    on a network of the run's model and a minibatch of the run's shape."""
    dim = frame_dim(cfg.env, cfg.model)
    spaces = registry.env_spaces(cfg, dim, None)
    space: Any = spaces.observation
    # Private generators: resolving must not move the run's seeded random streams.
    with torch.random.fork_rng(devices=[]):
        network = build_model(cfg.model, tuple(space.shape), int(spaces.action.n))
    section = getattr(cfg, cfg.algo)
    shape = (section.learner_batch_size(cfg.env.num_envs), *space.shape)
    gen = torch.Generator().manual_seed(0)
    if np.dtype(space.dtype) == np.uint8:
        obs = torch.randint(0, 256, shape, dtype=torch.uint8, generator=gen)
    else:
        obs = torch.randn(shape, generator=gen)
    device = torch.device(cfg.runner.learner_device)
    return choose_precision(network, obs, device, system.cpu_fingerprint())


def _announce(choice: PrecisionChoice) -> None:
    figures = ", ".join(f"{k} {v:,.0f}" for k, v in choice.samples_per_s.items())
    layout = ""
    if _layout_timed(choice):
        layout = " channels-last" if choice.channels_last else " NCHW"
    print(
        f"rlperf: precision=auto chose {choice.precision}{layout} "
        f"(learner samples/s {figures}; {choice.source})",
        file=sys.stderr,
        flush=True,
    )
