"""``rlperf doctor``: the machine's facts and plain-language advice on device placement."""

from __future__ import annotations

import os
import platform
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlperf.core.openmp_spin import SPIN_VAR
from rlperf.telemetry.system import (
    _THREAD_COUNT_VARS,
    ISA_FLAGS,
    THREAD_ENV_VARS,
    cpu_info,
    git_sha,
    gpu_info,
    package_versions,
    thread_env,
    torch_backends,
)

_NO_GPU_TEXT = "none (no CUDA device / NVML unavailable)"


# ---------------------------------------------------------------------------------- advice
def _gpu_capability(gpu: Mapping[str, Any]) -> tuple[int, int] | None:
    """Compute capability as a (major, minor) tuple, None when unknown."""
    try:
        major, minor = str(gpu["capability"]).split(".", 1)
        return int(major), int(minor)
    except (KeyError, ValueError):
        return None


def _precision_advice(precision: Mapping[str, Any]) -> str:
    """The measured learner precision as advice, with every figure behind it."""
    figures = ", ".join(f"{k} {v:,.0f}" for k, v in precision["samples_per_s"].items())
    layout = "" if precision["channels_last"] else " runner.channels_last=false"
    source = precision["source"]
    if source == "cache":
        # A shared VM runs at different speeds on different days: say which day these are.
        source = (
            f"cached, measured {str(precision.get('measured_utc', '?'))[:10]}; "
            "rlperf doctor --remeasure times it again"
        )
    return (
        f"runner.precision={precision['precision']}{layout} for the learner: measured here "
        f"({precision.get('model', 'the default model')}, minibatch {precision['batch_size']}, "
        f"learner samples/s: {figures}; {source}). runner.precision=auto makes "
        "this measurement for each run's own network."
    )


def recommend_placement(
    cpu: Mapping[str, Any],
    gpus: list[dict[str, Any]],
    threads: Mapping[str, Any] | None = None,
    precision: Mapping[str, Any] | None = None,
) -> list[str]:
    """Plain-language advice on where to put the learner and the actors on this machine.

    ``cpu`` is :func:`cpu_info`'s dict, ``gpus`` :func:`gpu_info`'s list, ``threads`` the
    thread settings to check for oversubscription (:func:`thread_env`'s dict, or any mapping
    of the :data:`THREAD_ENV_VARS`; default the process environment). ``precision`` is a
    measured learner precision (:class:`rlperf.core.autoprecision.PrecisionChoice` as a dict
    plus ``model``): the precision advice then comes from it rather than from CPU flags,
    which do not say whether bf16 pays.
    """
    recs: list[str] = []
    cores = int(cpu.get("available_cores") or cpu.get("logical_cores") or 1)
    logical = cpu.get("logical_cores")
    usable = [g for g in gpus if g.get("cuda_usable", True)]
    idle = [g for g in gpus if not g.get("cuda_usable", True)]

    if usable:
        gpu = usable[0]
        recs.append(
            f"Learner and acting on the GPU ({gpu.get('name', 'GPU 0')}): --preset "
            "atari-fast-gpu for Atari, or runner.learner_device=cuda runner.actor_device=cuda. "
            "Measured on an H100 with 16 cores: acting batched on the GPU beat acting on the "
            "CPU (the thesis's placements, 839 against 656 SPS), and actor processes acting on "
            "the GPU while the learner learns ran 13,435 SPS (docs/benchmarks.md)."
        )
        if len(usable) > 1:
            recs.append(
                f"{len(usable)} GPUs found; a single learner uses cuda:0, the others stay idle."
            )
        capability = _gpu_capability(gpu)
        if precision is not None:
            recs.append(_precision_advice(precision))
        elif capability is not None and capability >= (8, 0):
            recs.append(
                f"runner.precision=auto for the learner: compute capability "
                f"{gpu['capability']} has bf16 tensor cores, but a small network does not "
                "keep them busy (on an H100 fp32 learned 1.18x faster than bf16 for the Atari "
                "CNN); auto times both on the run's network and picks."
            )
    else:
        recs.append(
            "Everything on the CPU: runner.learner_device=cpu runner.actor_device=cpu "
            "(no usable CUDA device)."
        )
        isa = cpu.get("isa") or {}
        if precision is not None:
            recs.append(_precision_advice(precision))
        elif isa.get("amx_bf16") or isa.get("avx512_bf16"):
            flag = "AMX-BF16" if isa.get("amx_bf16") else "AVX512-BF16 (no AMX)"
            recs.append(
                f"runner.precision=auto for the learner: this CPU has {flag}, but whether bf16 "
                "beats fp32 differs between CPUs with the same flags (2.1x on one AVX512-BF16 "
                "CPU, 0.75x on another); auto times both on the run's network and picks."
            )
    if idle:
        recs.append(
            f"NVML sees {len(idle)} GPU(s) ({idle[0].get('name', 'GPU')}) that torch cannot "
            "use: this torch build has no CUDA. Install a CUDA build of torch to train on it."
        )

    if logical and cores < int(logical):
        recs.append(
            f"runner.torch_threads={cores}: this process may use {cores} of the "
            f"{logical} logical cores (CPU affinity / container limit)."
        )
    else:
        recs.append(f"runner.torch_threads={cores}: the cores available to this process.")

    env: Mapping[str, Any] = threads if threads is not None else os.environ
    for name in _THREAD_COUNT_VARS:
        value = env.get(name)
        try:
            count = int(value) if value is not None else None
        except (TypeError, ValueError):
            recs.append(f"Warning: {name}={value!r} is not a thread count.")
            continue
        if count is not None and count > cores:
            recs.append(
                f"Warning: {name}={count} oversubscribes the {cores} available cores; "
                f"threads will time-share cores and slow each other down. Set it to {cores} "
                "or less."
            )
    torch_threads = env.get("torch_num_threads")
    if isinstance(torch_threads, int) and torch_threads > cores:
        recs.append(
            f"Warning: torch uses {torch_threads} intra-op threads on {cores} available cores; "
            f"set runner.torch_threads={cores}."
        )
    return recs


# ---------------------------------------------------------------------------------- doctor
def doctor_report(precision: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Everything above about this machine, as one JSON-serialisable dict (``precision``: a
    measured learner precision, see :func:`recommend_placement`)."""
    cpu = cpu_info()
    gpus = gpu_info()
    threads = thread_env()
    return {
        "versions": package_versions(),
        "rlperf_git": git_sha(Path(__file__).resolve().parent),
        "platform": {
            "system": platform.system(),
            "release": platform.release(),
            "hostname": platform.node(),
        },
        "cpu": cpu,
        "gpus": gpus,
        "threads": threads,
        "backends": torch_backends(cpu),
        "precision": dict(precision) if precision is not None else None,
        "recommendations": recommend_placement(cpu, gpus, threads, precision),
    }


def _yes_no(value: Any) -> str:
    """Render a boolean for the report; None means the fact is unknown."""
    if value is None:
        return "unknown"
    return "yes" if value else "no"


def _section(title: str, rows: list[tuple[str, Any]]) -> list[str]:
    """A titled block of ``label  value`` rows with the values aligned."""
    width = max((len(label) for label, _ in rows), default=0)
    lines = [title]
    for label, value in rows:
        shown = "-" if value is None else str(value)
        lines.append(f"  {label.ljust(width)}  {shown}")
    return lines


def format_doctor(report: Mapping[str, Any]) -> str:
    """Render :func:`doctor_report`'s dict as a readable plain-text report.

    Sections: Versions, Platform, CPU, ISA flags, Torch backends, GPUs, Threads,
    Recommended placement. Missing entries (a report from an older rlperf) show as ``-``.
    """
    blocks: list[list[str]] = []

    versions = dict(report.get("versions") or {})
    rows = [(name, "not installed" if v is None else v) for name, v in versions.items()]
    if report.get("rlperf_git"):
        rows.append(("rlperf git", report["rlperf_git"]))
    blocks.append(_section("Versions", rows))

    plat = report.get("platform") or {}
    if plat:
        blocks.append(
            _section(
                "Platform",
                [("system", f"{plat.get('system', '')} {plat.get('release', '')}".strip())],
            )
        )

    cpu = report.get("cpu") or {}
    blocks.append(
        _section(
            "CPU",
            [
                ("model", cpu.get("model")),
                ("architecture", cpu.get("arch")),
                ("logical cores", cpu.get("logical_cores")),
                ("physical cores", cpu.get("physical_cores")),
                ("available cores", cpu.get("available_cores")),
            ],
        )
    )
    isa = cpu.get("isa") or {}
    blocks.append(_section("ISA flags", [(f, _yes_no(isa.get(f))) for f in ISA_FLAGS]))

    backends = report.get("backends") or {}
    if backends:
        blocks.append(
            _section(
                "Torch backends",
                [
                    ("oneDNN (mkldnn)", _yes_no(backends.get("mkldnn"))),
                    ("oneDNN version", backends.get("onednn_version")),
                    ("MKL", _yes_no(backends.get("mkl"))),
                    ("OpenMP", _yes_no(backends.get("openmp"))),
                    ("CPU capability", backends.get("cpu_capability")),
                    ("bf16 on CPU", _yes_no(backends.get("bf16_cpu"))),
                    ("CUDA available", _yes_no(backends.get("cuda"))),
                    ("CUDA version", backends.get("cuda_version")),
                ],
            )
        )

    gpus = report.get("gpus") or []
    if not gpus:
        blocks.append(["GPUs", f"  {_NO_GPU_TEXT}"])
    else:
        gpu_rows: list[tuple[str, Any]] = []
        for gpu in gpus:
            details = [str(gpu.get("name", "?"))]
            if gpu.get("memory_gb") is not None:
                details.append(f"{gpu['memory_gb']} GB")
            if gpu.get("capability"):
                details.append(f"sm {gpu['capability']}")
            if gpu.get("driver_version"):
                details.append(f"driver {gpu['driver_version']}")
            if not gpu.get("cuda_usable", True):
                details.append("NOT usable by this torch build")
            gpu_rows.append((f"cuda:{gpu.get('index', '?')}", ", ".join(details)))
        blocks.append(_section("GPUs", gpu_rows))

    threads = report.get("threads") or {}
    by_rlperf = threads.get("openmp_spin_set_by") == "rlperf"
    thread_rows: list[tuple[str, Any]] = [
        (name, f"{threads.get(name)} (set by rlperf)")
        if by_rlperf and name == SPIN_VAR
        else (name, threads.get(name) or "not set")
        for name in THREAD_ENV_VARS
    ]
    thread_rows += [
        ("torch intra-op threads", threads.get("torch_num_threads")),
        ("torch inter-op threads", threads.get("torch_num_interop_threads")),
        ("parallel backend", threads.get("parallel_backend")),
    ]
    for i, lib in enumerate(threads.get("parallel_libraries") or []):
        thread_rows.append(("libraries" if i == 0 else "", lib))
    blocks.append(_section("Threads", thread_rows))

    recs = report.get("recommendations") or []
    rec_lines = ["Recommended placement"]
    for rec in recs:
        rec_lines.append(
            textwrap.fill(rec, width=100, initial_indent="  - ", subsequent_indent="    ")
        )
    if not recs:
        rec_lines.append("  (none)")
    blocks.append(rec_lines)

    return "\n\n".join("\n".join(block) for block in blocks) + "\n"
