"""Facts about the machine: CPU, ISA flags, GPUs, thread settings, versions.

Used by ``rlperf doctor`` (see :mod:`rlperf.telemetry.doctor`) and by
every run's ``manifest.json``, so a number measured later can always be traced back to the
hardware and software it was measured on. Everything here must work on any machine: a
missing source (no /proc/cpuinfo, no CUDA, no NVML, no git) gives None or an empty list,
never an exception.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psutil

from rlperf.core import openmp_spin

ISA_FLAGS: tuple[str, ...] = (
    "avx2",
    "avx512f",
    "avx512_vnni",
    "avx512_bf16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
)
"""CPU flags that decide which oneDNN kernels torch can use (vector width, int8, bf16, AMX)."""

THREAD_ENV_VARS: tuple[str, ...] = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "OPENBLAS_CORETYPE",
    "TORCH_NUM_THREADS",
    "GOMP_SPINCOUNT",
    "OMP_WAIT_POLICY",
)
"""Environment variables that change how many threads the math libraries start and how
their idle threads wait (rlperf sets ``GOMP_SPINCOUNT``: :mod:`rlperf.core.openmp_spin`)."""

# Variables above whose value is a thread count (OPENBLAS_CORETYPE names a CPU type).
_THREAD_COUNT_VARS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "TORCH_NUM_THREADS",
)

# Distribution names per reported package; the first one installed wins (onnxruntime ships
# under several names depending on the execution provider).
_PACKAGES: dict[str, tuple[str, ...]] = {
    "rlperf": ("rlperf",),
    "torch": ("torch",),
    "numpy": ("numpy",),
    "gymnasium": ("gymnasium",),
    "ale_py": ("ale-py",),
    "envpool": ("envpool",),
    "onnxruntime": ("onnxruntime", "onnxruntime-gpu", "onnxruntime-openvino"),
    "ray": ("ray",),
    "safetensors": ("safetensors",),
    "tensorboard": ("tensorboard",),
}


# ---------------------------------------------------------------------------------- CPU
def parse_cpuinfo(text: str) -> dict[str, Any]:
    """Model name and ISA flags from the text of ``/proc/cpuinfo`` (a pure function).

    Returns ``{"model": str | None, "isa": {flag: bool for flag in ISA_FLAGS}}``. Only the
    first processor block is read: Linux lists the same flags for every core. On Arm the
    model line is absent and the flags line is called ``Features``.
    """
    model: str | None = None
    flags: set[str] | None = None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip().lower()
        if model is None and key in ("model name", "hardware", "cpu model"):
            model = value.strip() or None
        elif flags is None and key in ("flags", "features"):
            flags = set(value.split())
        if model is not None and flags is not None:
            break
    present = flags or set()
    return {"model": model, "isa": {flag: flag in present for flag in ISA_FLAGS}}


def parse_cpu_flags(text: str) -> dict[str, bool]:
    """The ISA flags of interest (:data:`ISA_FLAGS`) as booleans, from cpuinfo text."""
    isa: dict[str, bool] = parse_cpuinfo(text)["isa"]
    return isa


def available_cores() -> int:
    """Logical cores this process may run on (CPU affinity), or all cores where unknown."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS/Windows have no sched_getaffinity
        return os.cpu_count() or 1


def cpu_info(cpuinfo_path: str = "/proc/cpuinfo") -> dict[str, Any]:
    """CPU model, core counts and ISA flags of this machine.

    Keys: ``model``, ``arch``, ``logical_cores``, ``physical_cores`` (None when psutil
    cannot tell), ``available_cores`` (after CPU affinity; what torch should use) and
    ``isa`` (:data:`ISA_FLAGS` -> bool).
    """
    try:
        text = Path(cpuinfo_path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""  # not Linux: no model/flags, but the core counts below still work
    parsed = parse_cpuinfo(text)
    return {
        "model": parsed["model"] or platform.processor() or None,
        "arch": platform.machine(),
        "logical_cores": os.cpu_count(),
        "physical_cores": psutil.cpu_count(logical=False),
        "available_cores": available_cores(),
        "isa": parsed["isa"],
    }


def cpu_fingerprint() -> dict[str, Any]:
    """What identifies this CPU for cached measurements: model, ISA flags, usable cores."""
    cpu = cpu_info()
    return {"cpu": cpu["model"], "isa": cpu["isa"], "cores": cpu["available_cores"]}


def cpu_has_bf16(cpu: Mapping[str, Any]) -> bool:
    """Whether the CPU has native bf16 math (AMX-BF16 tiles or AVX512-BF16 dot products)."""
    isa = cpu.get("isa") or {}
    return bool(isa.get("amx_bf16") or isa.get("avx512_bf16"))


# ---------------------------------------------------------------------------------- GPU
def _nvml_query(nvml_lib: Any | None = None) -> tuple[str | None, list[dict[str, Any]]]:
    """NVML driver version and devices; (None, []) when NVML is missing or has no driver."""
    lib = nvml_lib
    if lib is None:
        try:
            import pynvml  # type: ignore[import-untyped]
        except ImportError:
            return None, []
        lib = pynvml
    try:
        lib.nvmlInit()
    except Exception:  # library or driver not found: no NVML on this machine
        return None, []
    driver: str | None = None
    devices: list[dict[str, Any]] = []
    try:
        with contextlib.suppress(Exception):
            driver = _as_str(lib.nvmlSystemGetDriverVersion())
        for i in range(lib.nvmlDeviceGetCount()):
            handle = lib.nvmlDeviceGetHandleByIndex(i)
            device: dict[str, Any] = {"index": i, "name": _as_str(lib.nvmlDeviceGetName(handle))}
            with contextlib.suppress(Exception):
                device["memory_gb"] = round(lib.nvmlDeviceGetMemoryInfo(handle).total / 1e9, 1)
            with contextlib.suppress(Exception):
                major, minor = lib.nvmlDeviceGetCudaComputeCapability(handle)
                device["capability"] = f"{major}.{minor}"
            devices.append(device)
    except Exception:
        pass  # a device query failed half-way: report what was read
    finally:
        with contextlib.suppress(Exception):
            lib.nvmlShutdown()
    return driver, devices


def _as_str(value: Any) -> str:
    """NVML strings are bytes in older pynvml releases and str in newer ones."""
    return value.decode() if isinstance(value, bytes) else str(value)


def gpu_info(nvml_lib: Any | None = None) -> list[dict[str, Any]]:
    """The GPUs of this machine, as dicts; an empty list when there are none.

    CUDA devices that torch can use are listed from ``torch.cuda`` with ``cuda_usable=True``
    (keys: ``index``, ``name``, ``memory_gb``, ``capability`` like ``"9.0"``,
    ``multiprocessors``, ``driver_version``, ``cuda_usable``, ``source``). When torch sees no
    device but NVML does (a CPU-only torch build on a GPU machine), the NVML devices are
    listed with ``cuda_usable=False`` so the doctor can say why the GPU sits idle.
    ``nvml_lib`` replaces the pynvml module (for tests).
    """
    driver, nvml_devices = _nvml_query(nvml_lib)
    gpus: list[dict[str, Any]] = []
    try:
        import torch

        if torch.cuda.is_available():
            for i in range(torch.cuda.device_count()):
                props = torch.cuda.get_device_properties(i)
                gpus.append(
                    {
                        "index": i,
                        "name": props.name,
                        "memory_gb": round(props.total_memory / 1e9, 1),
                        "capability": f"{props.major}.{props.minor}",
                        "multiprocessors": props.multi_processor_count,
                        "driver_version": driver,
                        "cuda_usable": True,
                        "source": "torch",
                    }
                )
    except Exception:
        gpus = []  # broken CUDA install: fall back to what NVML says
    if not gpus:
        for device in nvml_devices:
            gpus.append(
                {**device, "driver_version": driver, "cuda_usable": False, "source": "nvml"}
            )
    return gpus


# ---------------------------------------------------------------------------------- threads
def parse_parallel_info(text: str) -> dict[str, Any]:
    """Summarise ``torch.__config__.parallel_info()``: backend name and library versions."""
    backend: str | None = None
    libraries: list[str] = []
    for line in text.splitlines():
        if line.startswith("ATen parallel backend:"):
            backend = line.split(":", 1)[1].strip()
        elif line and not line[0].isspace() and not line.endswith(":") and ":" not in line:
            # Unindented lines without a key are the threading/math libraries torch uses.
            # Build ids and hashes only make the line long; the version is what matters.
            line = re.sub(r"\s*\(Git Hash [0-9a-f]+\)", "", line)
            line = re.sub(r"-Product Build \d+ for .*$", "", line)
            libraries.append(line.strip())
    return {"backend": backend, "libraries": libraries}


def thread_env() -> dict[str, Any]:
    """Thread-related environment variables and torch's thread settings.

    Keys: each of :data:`THREAD_ENV_VARS` (None when unset), ``openmp_spin_set_by``
    (:data:`rlperf.core.openmp_spin.spin_set_by`), ``torch_num_threads``,
    ``torch_num_interop_threads``, ``parallel_backend`` and ``parallel_libraries``.
    """
    info: dict[str, Any] = {name: os.environ.get(name) for name in THREAD_ENV_VARS}
    info["openmp_spin_set_by"] = openmp_spin.spin_set_by
    try:
        import torch

        info["torch_num_threads"] = torch.get_num_threads()
        info["torch_num_interop_threads"] = torch.get_num_interop_threads()
        parallel = parse_parallel_info(torch.__config__.parallel_info())
    except Exception:
        info["torch_num_threads"] = None
        info["torch_num_interop_threads"] = None
        parallel = {"backend": None, "libraries": []}
    info["parallel_backend"] = parallel["backend"]
    info["parallel_libraries"] = parallel["libraries"]
    return info


# ---------------------------------------------------------------------------------- versions
def package_versions() -> dict[str, str | None]:
    """Python and the versions of the packages rlperf can use; None when not installed.

    Read from package metadata, so nothing heavy (torch, ray) is imported for it.
    """
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name, distributions in _PACKAGES.items():
        versions[name] = None
        for dist in distributions:
            try:
                versions[name] = importlib.metadata.version(dist)
                break
            except importlib.metadata.PackageNotFoundError:
                continue
    return versions


def git_sha(path: str | os.PathLike[str] = ".") -> str | None:
    """Commit of the git work tree containing ``path``, with ``-dirty`` when tracked files
    have uncommitted changes; None when it is not a git repository (or git is missing)."""

    def run(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", os.fspath(path), *args],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    sha = run("rev-parse", "HEAD")
    if not sha:
        return None  # not a repository, or one without commits yet
    # Untracked files do not change what runs, so only tracked changes count as dirty.
    status = run("status", "--porcelain", "--untracked-files=no")
    return f"{sha}-dirty" if status else sha


# ---------------------------------------------------------------------------------- backends
def torch_backends(cpu: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What torch was built with and can use here.

    Keys: ``mkldnn`` (oneDNN available), ``onednn_version``, ``mkl``, ``openmp``,
    ``cpu_capability`` (the SIMD level torch dispatches to), ``cuda`` (a device is usable),
    ``cuda_version`` (the CUDA torch was built against, None for CPU builds) and
    ``bf16_cpu`` (AMX-BF16 or AVX512-BF16 present; from ``cpu`` or :func:`cpu_info`).
    """
    cpu = cpu if cpu is not None else cpu_info()
    out: dict[str, Any] = {
        "mkldnn": None,
        "onednn_version": None,
        "mkl": None,
        "openmp": None,
        "cpu_capability": None,
        "cuda": False,
        "cuda_version": None,
        "bf16_cpu": cpu_has_bf16(cpu),
    }
    try:
        import torch
    except ImportError:
        return out
    with contextlib.suppress(Exception):
        out["mkldnn"] = bool(torch.backends.mkldnn.is_available())
        out["mkl"] = bool(torch.backends.mkl.is_available())
        out["openmp"] = bool(torch.backends.openmp.is_available())
    with contextlib.suppress(Exception):
        match = re.search(r"(?:MKL-DNN|oneDNN) v(\S+)", torch.__config__.show())
        out["onednn_version"] = match.group(1) if match else None
    with contextlib.suppress(Exception):
        out["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    with contextlib.suppress(Exception):
        out["cuda"] = bool(torch.cuda.is_available())
        out["cuda_version"] = torch.version.cuda
    return out
