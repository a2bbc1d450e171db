"""``runner.precision=auto``: the learner's precision and memory layout, chosen by timing them.

Whether bf16 pays depends on the machine, not on its CPU flags: the same 2-vCPU VM type has
been an AMD EPYC where a bf16 learner ran 2.1x fp32 and an Intel Xeon with AVX512-BF16 but
no AMX where it ran 0.75x. So before training, a few seconds of the real learner step
(forward, backward, gradient clipping and Adam on a minibatch of the run's shape) are timed
on the run's own network in every variant: fp32 and bf16, each with and without
channels-last for conv networks. The fastest wins, except that bf16 must beat the fastest
fp32 variant by :data:`BF16_MARGIN`: its rounding is a cost of its own, worth paying only
for a clear gain. The figures and the choice are cached per machine and network, so later
runs on the same machine start at once, and recorded in the run's manifest.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rlperf.core.optim import LocalGradientStep
from rlperf.core.protocols import OptimizerSpec

AUTO = "auto"
BF16_MARGIN = 1.05
"""bf16 is chosen only when it is at least this many times as fast as the fastest fp32 variant."""
CACHE_ENV = "RLPERF_CACHE_DIR"
"""Environment variable naming the cache directory (default ``~/.cache/rlperf``)."""


@dataclass(frozen=True)
class Variant:
    """One way to run the learner: a precision and a memory layout."""

    precision: str
    channels_last: bool

    @property
    def label(self) -> str:
        return self.precision + ("-cl" if self.channels_last else "")

    @classmethod
    def from_label(cls, label: str) -> Variant:
        precision, _, layout = label.partition("-")
        return cls(precision, layout == "cl")


@dataclass
class PrecisionChoice:
    """What ``precision=auto`` chose and the measurement behind it."""

    precision: str
    channels_last: bool
    samples_per_s: dict[str, float]
    """Learner samples/s per variant label (fp32, fp32-cl, bf16, bf16-cl), median of rounds."""
    batch_size: int
    source: str
    """measured (timed by this run) or cache (timed earlier on this machine and network)."""
    measured_utc: str
    key: str
    """The cache key: a hash of the machine's and the network's fingerprint."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


StepTimer = Callable[[nn.Module, torch.Tensor, torch.device, Variant, float], float]
"""(network, minibatch of observations, device, variant, seconds) -> samples/s."""


def variants_for(module: nn.Module) -> list[Variant]:
    """The variants worth timing: channels-last only changes networks with convolutions."""
    has_conv = any(isinstance(m, nn.Conv2d) for m in module.modules())
    layouts = (False, True) if has_conv else (False,)
    return [Variant(p, cl) for p in ("fp32", "bf16") for cl in layouts]


def _output_loss(outputs: Any) -> torch.Tensor:
    """A scalar that depends on every output tensor, so backward runs through all heads."""
    tensors = [outputs] if isinstance(outputs, torch.Tensor) else list(outputs)
    return sum((t.float().mean() for t in tensors), torch.zeros(()))


def time_learner_step(
    module: nn.Module,
    obs: torch.Tensor,
    device: torch.device,
    variant: Variant,
    seconds: float,
) -> float:
    """Samples/s of forward + backward + clipping + Adam on ``obs`` under ``variant``.

    A private copy of ``module`` learns, so the run's own weights and random streams are
    untouched. One untimed step first: oneDNN picks its kernels on the first call.
    """
    net = copy.deepcopy(module).to(device)
    if variant.channels_last:
        net.to(memory_format=torch.channels_last)
    step = LocalGradientStep(
        net, OptimizerSpec("adam", 1e-5, 1e-5), device=device, precision=variant.precision
    )
    obs = obs.to(device)

    def one_step() -> None:
        with step.autocast():
            loss = _output_loss(net(obs))
        step(loss, max_grad_norm=0.5)

    one_step()
    steps, start = 0, time.perf_counter()
    while steps < 2 or time.perf_counter() - start < seconds:
        one_step()
        steps += 1
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return steps * obs.shape[0] / (time.perf_counter() - start)


def pick(samples_per_s: Mapping[str, float]) -> Variant:
    """The fastest variant; bf16 only with a lead of :data:`BF16_MARGIN` over fp32."""
    fastest = max(samples_per_s, key=lambda label: samples_per_s[label])
    fp32 = {k: v for k, v in samples_per_s.items() if Variant.from_label(k).precision == "fp32"}
    if not fp32 or Variant.from_label(fastest).precision == "fp32":
        return Variant.from_label(fastest)
    best_fp32 = max(fp32, key=lambda label: fp32[label])
    if samples_per_s[fastest] >= BF16_MARGIN * fp32[best_fp32]:
        return Variant.from_label(fastest)
    return Variant.from_label(best_fp32)


def cache_path() -> Path:
    """Where measured choices are kept: ``$RLPERF_CACHE_DIR`` or ``~/.cache/rlperf``."""
    root = os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "rlperf"
    return Path(root) / "precision.json"


def fingerprint(
    machine: Mapping[str, Any], module: nn.Module, obs: torch.Tensor, device: torch.device
) -> dict[str, Any]:
    """What the timing depends on: the CPU (or GPU), threads, torch, the network, the batch."""
    return {
        "machine": dict(machine),
        "device": str(device),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "network": hashlib.sha256(repr(module).encode()).hexdigest()[:16],
        "obs": [list(obs.shape), str(obs.dtype)],
    }


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # missing or damaged: a cache is only a shortcut, the timing is redone
    return data if isinstance(data, dict) else {}


def _write_cache(path: Path, key: str, entry: dict[str, Any]) -> None:
    try:
        data = _read_cache(path)
        data[key] = entry
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass  # a read-only home must not stop training; the next run measures again


def choose_precision(
    module: nn.Module,
    obs: torch.Tensor,
    device: torch.device,
    machine: Mapping[str, Any],
    *,
    seconds: float = 3.0,
    rounds: int = 3,
    timer: StepTimer = time_learner_step,
    cache: Path | None = None,
    remeasure: bool = False,
) -> PrecisionChoice:
    """Time every variant of ``module``'s learner step on ``obs`` (one minibatch) and pick.

    ``seconds`` is the total timing per variant, split into ``rounds`` interleaved rounds
    (alternating order) so that drift on a shared machine hits every variant alike.
    ``machine`` describes the host (CPU model and flags) for the cache key; ``cache`` is the
    cache file (default :func:`cache_path`). ``remeasure`` times again even when the cache
    holds this machine and network, and replaces the cached figures: a shared VM's speed
    drifts between days, and the cache keeps the day it was first measured. ``timer`` is the
    timing function (tests pass a fake one).
    """
    path = cache if cache is not None else cache_path()
    facts = fingerprint(machine, module, obs, device)
    key = hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()[:24]
    hit = None if remeasure else _read_cache(path).get(key)
    if isinstance(hit, dict) and isinstance(hit.get("samples_per_s"), dict):
        medians, source, measured = (
            dict(hit["samples_per_s"]),
            "cache",
            str(hit.get("measured_utc")),
        )
    else:
        variants = variants_for(module)
        timings: dict[str, list[float]] = {v.label: [] for v in variants}
        for r in range(rounds):
            for v in variants if r % 2 == 0 else variants[::-1]:
                timings[v.label].append(timer(module, obs, device, v, seconds / rounds))
        medians = {label: round(statistics.median(t), 1) for label, t in timings.items()}
        source, measured = "measured", datetime.now(UTC).isoformat(timespec="seconds")
        entry = {"fingerprint": facts, "samples_per_s": medians, "measured_utc": measured}
        _write_cache(path, key, entry)
    chosen = pick(medians)
    return PrecisionChoice(
        chosen.precision,
        chosen.channels_last,
        medians,
        int(obs.shape[0]),
        source,
        measured,
        key,
    )
