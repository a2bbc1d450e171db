"""The enumerations of the run configuration, each declared once: parsing
(:func:`rlperf.config.load.coerce`), validation, ``rlperf train --help`` and the error
messages all read their values from these."""

from __future__ import annotations

import typing
from typing import Literal

Engine = Literal["gymnasium", "envpool", "ale-vector"]
ResizeInterpolation = Literal["area", "linear", "nearest"]
FaultSite = Literal["step", "reset", "both"]
Precision = Literal["fp32", "bf16", "auto"]
Optimizer = Literal["rmsprop", "adam"]
QOptimizer = Literal["radam", "adam"]
DqnLoss = Literal["mse", "huber"]
RewardMetric = Literal["mean100", "ema", "mean100+ema"]
ScheduleBudget = Literal["total_timesteps", "wall_time_s", "wall_time_steps"]
Activation = Literal["relu", "elu", "leaky_relu"]
NanPolicy = Literal["raise", "skip_update", "warn", "none"]
AdvantageScope = Literal["minibatch", "batch"]
FrameParity = Literal["any", "even", "odd", "lagging"]

FAULT_SITES: tuple[str, ...] = typing.get_args(FaultSite)
"""Where ``env.fault_at`` injects crashes: in ``step``, in ``reset`` or in both."""
