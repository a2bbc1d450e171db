"""What this machine offers and what a sweep point needs from it.

A point that needs hardware the machine lacks (GPUs, CPU ids outside this process's
affinity, an inference runtime that is not installed) is *skipped* with the reason, never
run and failed. A point that can run but asks for more worker processes than there are
cores runs and is *flagged*: its numbers measure time-sharing, not parallelism.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

_CUDA = re.compile(r"^cuda(?::(\d+))?$")


@dataclass(frozen=True)
class Machine:
    """The resources points are planned against."""

    cpus: frozenset[int]
    """CPU ids this process may run on (its affinity)."""
    gpus: int
    """CUDA devices torch can use."""
    bf16: bool = False
    """Fast bf16 math for the learner: AMX-BF16 or AVX512-BF16 on the CPU, or a bf16 GPU."""

    @property
    def cores(self) -> int:
        return len(self.cpus)

    @classmethod
    def detect(cls) -> Machine:
        """This machine: the affinity of this process and torch's CUDA device count."""
        import torch

        cpus = (
            os.sched_getaffinity(0)
            if hasattr(os, "sched_getaffinity")
            else set(range(os.cpu_count() or 1))
        )
        from rlperf.telemetry.system import cpu_has_bf16, cpu_info

        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        bf16 = torch.cuda.is_bf16_supported() if gpus else cpu_has_bf16(cpu_info())
        return cls(frozenset(cpus), gpus, bf16)

    def describe(self) -> str:
        return f"{self.cores} CPU(s) ({_cpu_list(self.cpus)}), {self.gpus} GPU(s)"


def _cpu_list(cpus: frozenset[int] | set[int]) -> str:
    ids = sorted(cpus)
    if not ids:
        return "none"
    parts, start, prev = [], ids[0], ids[0]
    for c in ids[1:] + [None]:  # type: ignore[list-item]
        if c is not None and c == prev + 1:
            prev = c
            continue
        parts.append(f"{start}-{prev}" if prev > start else str(start))
        if c is not None:
            start = prev = c
    return ",".join(parts)


def device_gpus(device: str) -> int:
    """How many visible CUDA devices ``device`` needs: ``cuda`` or ``cuda:0`` -> 1,
    ``cuda:1`` -> 2; anything else -> 0."""
    m = _CUDA.match(device)
    if m is None:
        return 0
    return int(m.group(1) or 0) + 1


def visible_gpus(gpus: str | None) -> int | None:
    """How many physical GPUs a thesis GPU visibility (none/gpu0/gpu1/both) needs, or None
    when the point does not set one."""
    return {None: None, "none": 0, "gpu0": 1, "gpu1": 2, "both": 2}[gpus]


def gpu_skip_reason(needed: int, machine: Machine) -> str | None:
    """``needs GPU ...`` when ``needed`` exceeds the machine's GPUs, else None."""
    if needed <= machine.gpus:
        return None
    have = "no GPU" if machine.gpus == 0 else f"{machine.gpus} GPU(s)"
    count = "a GPU" if needed == 1 else f"{needed} GPUs"
    return f"needs GPU: {count}, this machine has {have}"


def cpu_skip_reason(cpus: list[int] | None, machine: Machine) -> str | None:
    """``needs CPUs ...`` when an affinity names CPUs this process cannot use, else None."""
    if not cpus:
        return None
    missing = sorted(set(cpus) - machine.cpus)
    if not missing:
        return None
    return (
        f"needs CPUs {_cpu_list(frozenset(cpus))}, this process may use {_cpu_list(machine.cpus)}"
    )


def oversubscription_flag(workers: int, runner: str, machine: Machine) -> str | None:
    """A flag for points whose worker processes outnumber the cores."""
    if runner == "inproc" or workers <= machine.cores:
        return None
    return f"{workers} workers on {machine.cores} cores (oversubscribed)"
