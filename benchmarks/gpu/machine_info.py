"""Facts of the machine the GPU check runs on, as one JSON line: versions, CPU, GPU, driver,
and the cost of one ``torch.cuda.synchronize`` with nothing queued (the phase timers call it
at every phase boundary, so this is their floor per boundary)."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from importlib import metadata
from typing import Any

import torch

PACKAGES = ("ale-py", "gymnasium", "numpy", "nvidia-ml-py", "onnxruntime")


def cpu_model() -> str | None:
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return None


def sync_microseconds(calls: int = 1000, rounds: int = 5) -> float:
    """Median cost of one ``torch.cuda.synchronize()`` with an empty queue, in microseconds."""
    torch.cuda.synchronize()
    laps = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            torch.cuda.synchronize()
        laps.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(laps)


def facts() -> dict[str, Any]:
    out: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cpu": cpu_model(),
        "cores": len(os.sched_getaffinity(0)),
    }
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    out["gpu"] = None
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        out["gpu"] = props.name
        out["gpu_memory_gib"] = round(props.total_memory / 2**30, 1)
        out["multiprocessors"] = props.multi_processor_count
        import pynvml

        pynvml.nvmlInit()
        out["driver"] = pynvml.nvmlSystemGetDriverVersion()
        pynvml.nvmlShutdown()
        out["sync_us"] = round(sync_microseconds(), 2)
    return out


if __name__ == "__main__":
    print(json.dumps(facts()))
