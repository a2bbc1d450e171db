"""Machine facts: cpuinfo parsing, placement advice, the doctor report."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from rlperf.telemetry import system
from rlperf.telemetry.doctor import doctor_report, format_doctor, recommend_placement
from rlperf.telemetry.system import (
    ISA_FLAGS,
    cpu_info,
    git_sha,
    gpu_info,
    package_versions,
    parse_cpu_flags,
    parse_cpuinfo,
    parse_parallel_info,
    thread_env,
    torch_backends,
)

# Trimmed /proc/cpuinfo of a Sapphire Rapids server (AMX) and of an older Skylake desktop.
SAPPHIRE_RAPIDS = """\
processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu vme sse sse2 avx avx2 fma avx512f avx512dq avx512bw avx512vl avx512_vnni \
avx512_bf16 amx_bf16 amx_tile amx_int8 avx_vnni
bugs\t\t: spectre_v1

processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu
"""

SKYLAKE = """\
processor\t: 0
model name\t: Intel(R) Core(TM) i7-6700K CPU @ 4.00GHz
flags\t\t: fpu vme sse sse2 avx avx2 fma bmi2
"""

ARM = """\
processor\t: 0
BogoMIPS\t: 50.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics
CPU implementer\t: 0x41
"""


def make_cpu(**isa: bool) -> dict[str, Any]:
    """A cpu_info()-shaped dict with 8 available cores and the given flags set."""
    return {
        "model": "test cpu",
        "arch": "x86_64",
        "logical_cores": 8,
        "physical_cores": 4,
        "available_cores": 8,
        "isa": {flag: isa.get(flag, False) for flag in ISA_FLAGS},
    }


H100 = {
    "index": 0,
    "name": "NVIDIA H100 80GB HBM3",
    "memory_gb": 85.0,
    "capability": "9.0",
    "cuda_usable": True,
}


def test_parse_flags_with_amx() -> None:
    parsed = parse_cpuinfo(SAPPHIRE_RAPIDS)
    assert parsed["model"] == "Intel(R) Xeon(R) Platinum 8480+"
    assert parsed["isa"] == {flag: True for flag in ISA_FLAGS}


def test_parse_flags_without_amx() -> None:
    flags = parse_cpu_flags(SKYLAKE)
    assert flags["avx2"] is True
    for flag in ISA_FLAGS[1:]:
        assert flags[flag] is False, flag


def test_parse_arm_and_empty_text() -> None:
    assert parse_cpuinfo(ARM)["isa"] == {flag: False for flag in ISA_FLAGS}
    assert parse_cpuinfo("") == {"model": None, "isa": {flag: False for flag in ISA_FLAGS}}


def test_parse_parallel_info() -> None:
    text = (
        "ATen/Parallel:\n\tat::get_num_threads() : 2\nOpenMP 201511 (a.k.a. OpenMP 4.5)\n"
        "\tomp_get_max_threads() : 2\nIntel(R) MKL-DNN v3.12.0 (Git Hash 80afa710)\n"
        "std::thread::hardware_concurrency() : 2\nEnvironment variables:\n"
        "\tOMP_NUM_THREADS : [not set]\nATen parallel backend: OpenMP\n"
    )
    info = parse_parallel_info(text)
    assert info["backend"] == "OpenMP"
    assert info["libraries"] == ["OpenMP 201511 (a.k.a. OpenMP 4.5)", "Intel(R) MKL-DNN v3.12.0"]


def test_recommend_without_gpu() -> None:
    recs = recommend_placement(make_cpu(avx2=True), [], threads={})
    text = "\n".join(recs)
    assert "runner.learner_device=cpu" in text and "runner.actor_device=cpu" in text
    assert "bf16" not in text
    assert "runner.torch_threads=8" in text


@pytest.mark.parametrize("flag", ["amx_bf16", "avx512_bf16"])
def test_bf16_flags_lead_to_a_measurement_not_to_bf16(flag: str) -> None:
    recs = recommend_placement(make_cpu(**{flag: True}), [], threads={})
    assert any("runner.precision=auto" in rec for rec in recs)
    assert not any("runner.precision=bf16" in rec for rec in recs)


def test_a_measured_precision_is_the_advice_with_its_figures() -> None:
    measured = {
        "precision": "fp32",
        "channels_last": True,
        "samples_per_s": {"fp32": 2000.0, "fp32-cl": 3457.6, "bf16": 1800.0, "bf16-cl": 2396.6},
        "batch_size": 256,
        "source": "measured",
        "model": "Nature-CNN on CPU",
    }
    recs = recommend_placement(make_cpu(avx512_bf16=True), [], threads={}, precision=measured)
    (advice,) = [r for r in recs if "runner.precision" in r]
    assert advice.startswith("runner.precision=fp32 for the learner: measured here")
    assert "fp32-cl 3,458" in advice and "bf16-cl 2,397" in advice and "minibatch 256" in advice
    assert "; measured)" in advice


def test_cached_figures_are_dated_and_point_to_remeasure() -> None:
    cached = {
        "precision": "bf16",
        "channels_last": True,
        "samples_per_s": {"fp32": 2133.0, "bf16-cl": 5060.0},
        "batch_size": 256,
        "source": "cache",
        "measured_utc": "2026-11-25T08:01:02+00:00",
    }
    (advice,) = [
        r
        for r in recommend_placement(make_cpu(), [], threads={}, precision=cached)
        if "runner.precision" in r
    ]
    assert "cached, measured 2026-11-25; rlperf doctor --remeasure times it again" in advice


def test_recommend_with_gpu() -> None:
    recs = recommend_placement(make_cpu(amx_bf16=True), [H100], threads={})
    text = "\n".join(recs)
    assert "runner.learner_device=cuda runner.actor_device=cuda" in text
    assert "atari-fast-gpu" in text
    # Learner on an sm 9.0 GPU: the precision advice comes from the GPU (timed, as measured
    # there: bf16 tensor cores did not pay for the Atari CNN), not from the CPU's AMX.
    assert "runner.precision=auto" in text and "AMX" not in text


def test_recommend_gpu_torch_cannot_use() -> None:
    idle_gpu = {**H100, "cuda_usable": False}
    text = "\n".join(recommend_placement(make_cpu(), [idle_gpu], threads={}))
    assert "runner.learner_device=cpu" in text
    assert "CUDA build of torch" in text


def test_recommend_warns_on_oversubscription() -> None:
    cpu = make_cpu()
    cpu["available_cores"] = 2
    threads = {"OMP_NUM_THREADS": "16", "MKL_NUM_THREADS": "2", "torch_num_threads": 8}
    recs = recommend_placement(cpu, [], threads=threads)
    warnings = [rec for rec in recs if rec.startswith("Warning")]
    assert any("OMP_NUM_THREADS=16" in w for w in warnings)
    assert not any("MKL_NUM_THREADS" in w for w in warnings)
    assert any("8 intra-op threads" in w for w in warnings)
    assert any("runner.torch_threads=2" in rec and "of the 8" in rec for rec in recs)


class FakeNvml:
    """A pynvml stand-in with one GPU, for gpu_info on this CPU-only machine."""

    def __init__(self) -> None:
        self.shutdown_calls = 0

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        pass

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.shutdown_calls += 1

    def nvmlSystemGetDriverVersion(self) -> bytes:  # noqa: N802
        return b"550.54.15"

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:  # noqa: N802
        return index

    def nvmlDeviceGetName(self, handle: int) -> str:  # noqa: N802
        return "NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:  # noqa: N802
        return type("Mem", (), {"total": 85_000_000_000, "used": 0})()

    def nvmlDeviceGetCudaComputeCapability(self, handle: int) -> tuple[int, int]:  # noqa: N802
        return (9, 0)


def test_gpu_info_reports_nvml_gpu_that_torch_cannot_use() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("torch has CUDA here: devices come from torch, not the fake")
    nvml = FakeNvml()
    (gpu,) = gpu_info(nvml_lib=nvml)
    assert gpu["name"] == "NVIDIA H100 80GB HBM3"
    assert gpu["capability"] == "9.0" and gpu["memory_gb"] == 85.0
    assert gpu["driver_version"] == "550.54.15"
    assert gpu["cuda_usable"] is False
    assert nvml.shutdown_calls == 1


def test_machine_facts_on_this_machine(tmp_path: Path) -> None:
    cpu = cpu_info()
    assert cpu["logical_cores"] >= 1 and 1 <= cpu["available_cores"] <= cpu["logical_cores"]
    assert set(cpu["isa"]) == set(ISA_FLAGS)
    assert isinstance(gpu_info(), list)  # [] here, no crash without CUDA
    versions = package_versions()
    assert versions["torch"] and versions["python"]
    assert "envpool" in versions and "ray" in versions
    threads = thread_env()
    assert threads["torch_num_threads"] >= 1
    assert "OMP_NUM_THREADS" in threads
    assert torch_backends(cpu)["bf16_cpu"] == system.cpu_has_bf16(cpu)
    assert git_sha(tmp_path) is None  # not a repository


def test_doctor_report_and_format() -> None:
    report = doctor_report()
    json.dumps(report)  # goes into manifest.json as is
    text = format_doctor(report)
    for section in ("Versions", "CPU", "ISA flags", "GPUs", "Threads", "Recommended placement"):
        assert f"\n{section}\n" in f"\n{text}", section
    if not report["gpus"]:
        assert "none (no CUDA device / NVML unavailable)" in text


def test_format_doctor_with_gpu_and_partial_report() -> None:
    report = {
        "versions": {"python": "3.11.7", "torch": "2.13.0", "ray": None},
        "cpu": make_cpu(amx_bf16=True),
        "gpus": [H100],
        "recommendations": ["Learner on the GPU."],
    }
    text = format_doctor(report)
    assert re.search(r"^  ray +not installed$", text, re.MULTILINE)
    assert "NVIDIA H100 80GB HBM3, 85.0 GB, sm 9.0" in text
    assert re.search(r"^  amx_bf16 +yes$", text, re.MULTILINE)
    assert re.search(r"^  amx_int8 +no$", text, re.MULTILINE)
    assert "  - Learner on the GPU." in text
