"""SystemMonitor: real psutil sampling, a busy process tree, fake NVML and fake RAPL."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from rlperf.telemetry.sysmon import SystemMonitor

CPU_KEYS = ("sys/cpu_percent", "sys/proc_cpu_percent", "sys/ram_percent", "sys/proc_rss_mb")
ENERGY_KEYS = ("energy/joules", "energy/watts")
NO_RAPL = "/nonexistent/powercap"

# A grandchild that spins one core for at most 5 s, under an idle child that waits for it:
# only counting the whole tree sees the load.
BUSY = "import time\nend = time.monotonic() + 5\nwhile time.monotonic() < end:\n    pass\n"
PARENT_OF_BUSY = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {BUSY!r}])\n"


@dataclass
class _Util:
    gpu: float


@dataclass
class _Mem:
    used: float
    total: float


class FakeNvml:
    """A stand-in for the pynvml module: a configurable number of GPUs with set readings."""

    def __init__(self, utils: list[float], mem_used: list[float], fail_init: bool = False):
        self.utils = utils
        self.mem_used = mem_used
        self.fail_init = fail_init
        self.fail_index: int | None = None
        self.init_calls = 0
        self.shutdown_calls = 0
        self.milliwatts = [150_000] * len(utils)
        self.millijoules: list[float] | None = [0.0] * len(utils)  # None: a pre-Volta GPU

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        self.init_calls += 1
        if self.fail_init:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.shutdown_calls += 1

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return len(self.utils)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:  # noqa: N802
        return index

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> _Util:  # noqa: N802
        if handle == self.fail_index:
            raise RuntimeError("GPU is lost")
        return _Util(gpu=self.utils[handle])

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:  # noqa: N802
        if handle == self.fail_index:
            raise RuntimeError("GPU is lost")
        return self.milliwatts[handle]

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> float:  # noqa: N802
        if self.millijoules is None or handle == self.fail_index:
            raise RuntimeError("Not Supported")
        return self.millijoules[handle]

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> _Mem:  # noqa: N802
        if handle == self.fail_index:
            raise RuntimeError("GPU is lost")
        return _Mem(used=self.mem_used[handle], total=1000.0)


@pytest.fixture
def busy_tree() -> Iterator[subprocess.Popen[bytes]]:
    """An idle child whose own child keeps one core busy; killed at the end."""
    parent = subprocess.Popen([sys.executable, "-c", PARENT_OF_BUSY])
    try:
        deadline = time.monotonic() + 10
        while not psutil.Process(parent.pid).children() and time.monotonic() < deadline:
            time.sleep(0.01)
        yield parent
    finally:
        _kill_tree(parent)


def _kill_tree(parent: subprocess.Popen[bytes]) -> None:
    """Kill the busy grandchild and its parent (both started by the test), if still alive."""
    if parent.poll() is None:
        try:
            for child in psutil.Process(parent.pid).children(recursive=True):
                child.kill()
        except psutil.NoSuchProcess:
            pass
        parent.kill()
    parent.wait()


def test_real_sampler_reports_sane_cpu_and_ram() -> None:
    with SystemMonitor(interval_s=0.05, rapl_root=NO_RAPL, nvml=False) as mon:
        time.sleep(0.3)
        values = mon.collect()
    for key in CPU_KEYS:
        assert isinstance(values[key], float), key
    assert 0.0 <= values["sys/cpu_percent"] <= 100.0  # type: ignore[operator]
    assert 0.0 <= values["sys/ram_percent"] <= 100.0  # type: ignore[operator]
    assert values["sys/proc_cpu_percent"] >= 0.0  # type: ignore[operator]
    # A Python interpreter with pytest loaded is well over 5 MiB resident.
    assert 5.0 < values["sys/proc_rss_mb"] < 100_000  # type: ignore[operator]
    assert not any(key.startswith("sys/gpu") for key in values)
    assert mon.overhead_s > 0.0


def test_energy_none_without_rapl() -> None:
    mon = SystemMonitor(interval_s=0.05, rapl_root=NO_RAPL, nvml=False)
    values = mon.collect()
    assert values["energy/joules"] is None and values["energy/watts"] is None
    assert mon.sources() == {"cpu": True, "ram": True, "nvml": False, "rapl": False}
    mon.stop()


def test_energy_from_fake_rapl(tmp_path: Path) -> None:
    pkg = tmp_path / "intel-rapl:0"
    pkg.mkdir()
    (pkg / "energy_uj").write_text("1000000\n")
    (pkg / "max_energy_range_uj").write_text("262143328850\n")
    mon = SystemMonitor(interval_s=0.05, rapl_root=str(tmp_path), nvml=False)
    assert mon.sources()["rapl"]
    time.sleep(0.05)
    (pkg / "energy_uj").write_text("3000000\n")  # +2 J
    values = mon.collect()
    assert values["energy/joules"] == pytest.approx(2.0)
    assert values["energy/watts"] is not None and values["energy/watts"] > 0
    assert mon.collect()["energy/joules"] == pytest.approx(0.0)  # a new window
    mon.stop()


def _cpu_seconds(proc: psutil.Process) -> float:
    """User + system CPU seconds of one process."""
    times = proc.cpu_times()
    return times.user + times.system


def test_busy_grandchild_counts_and_collect_resets(busy_tree: subprocess.Popen[bytes]) -> None:
    (grandchild,) = psutil.Process(busy_tree.pid).children()
    with SystemMonitor(interval_s=0.05, rapl_root=NO_RAPL, nvml=False) as mon:
        mon.collect()  # drop the window that covers the child's start-up
        t0, cpu0 = time.monotonic(), _cpu_seconds(grandchild)
        time.sleep(0.4)
        busy = mon.collect()["sys/proc_cpu_percent"]
        # The grandchild's own share of a core over the same window, measured directly: it
        # is ~100 % on an idle machine, less when other jobs compete for the 2 cores.
        alone = 100.0 * (_cpu_seconds(grandchild) - cpu0) / (time.monotonic() - t0)
        assert alone > 10.0, "the busy grandchild never ran; cannot test anything"
        # The test process itself sleeps, so the tree total is the grandchild's load.
        assert busy is not None and busy > 0.7 * alone
        _kill_tree(busy_tree)  # dies between samples: the monitor must not care
        time.sleep(0.3)
        idle = mon.collect()["sys/proc_cpu_percent"]
    # A fresh window, not a running mean that still includes the busy one.
    assert idle is not None and idle < 0.5 * busy
    assert not mon._logged_error


def test_monitoring_another_pid_that_exits() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        mon = SystemMonitor(interval_s=0.05, pid=child.pid, rapl_root=NO_RAPL, nvml=False)
    except ValueError:
        pytest.skip("child exited before the monitor could attach")
    child.wait()
    values = mon.collect()  # the root is gone: tree metrics absent, system metrics present
    assert values["sys/proc_cpu_percent"] is None
    assert values["sys/proc_rss_mb"] is None
    assert isinstance(values["sys/cpu_percent"], float)
    mon.stop()


def test_collect_before_any_sample_and_faster_than_interval() -> None:
    mon = SystemMonitor(interval_s=60.0, rapl_root=NO_RAPL, nvml=False).start()
    first = mon.collect()  # no sample yet: one is taken synchronously
    second = mon.collect()  # empty window: the latest sample is repeated
    mon.stop()
    for values in (first, second):
        for key in CPU_KEYS:
            assert isinstance(values[key], float), key
        for key in ENERGY_KEYS:
            assert key in values


def test_fake_nvml_gives_gpu_keys_and_windows_reset() -> None:
    nvml = FakeNvml(utils=[80.0, 10.0], mem_used=[500.0, 250.0])
    mon = SystemMonitor(interval_s=0.02, rapl_root=NO_RAPL, nvml_lib=nvml)
    assert mon.sources()["nvml"] and mon.num_gpus == 2
    with mon:
        time.sleep(0.15)
        first = mon.collect()
        nvml.utils[0] = 20.0
        time.sleep(0.15)
        second = mon.collect()
    assert first["sys/gpu0_util_percent"] == pytest.approx(80.0)
    assert first["sys/gpu1_util_percent"] == pytest.approx(10.0)
    assert first["sys/gpu0_mem_percent"] == pytest.approx(50.0)
    assert first["sys/gpu1_mem_percent"] == pytest.approx(25.0)
    assert first["sys/gpu0_mem_mb"] == pytest.approx(500.0 / 1024**2)
    # A mean over both windows would be near 50.
    assert second["sys/gpu0_util_percent"] < 40.0  # type: ignore[operator]
    assert nvml.shutdown_calls == 1
    mon.stop()  # idempotent: NVML is not shut down twice
    assert nvml.shutdown_calls == 1
    with pytest.raises(RuntimeError):
        mon.start()


def test_gpu_power_and_energy_per_window() -> None:
    nvml = FakeNvml(utils=[50.0, 50.0], mem_used=[1.0, 1.0])
    nvml.milliwatts = [200_000, 50_000]
    with SystemMonitor(interval_s=0.02, rapl_root=NO_RAPL, nvml_lib=nvml) as mon:
        time.sleep(0.1)
        nvml.millijoules = [30_000.0, 4_000.0]  # 30 J and 4 J used in this window
        first = mon.collect()
        time.sleep(0.1)
        second = mon.collect()  # the counters stood still
    assert first["sys/gpu0_power_w"] == pytest.approx(200.0)
    assert first["sys/gpu1_power_w"] == pytest.approx(50.0)
    assert first["energy/gpu0_joules"] == pytest.approx(30.0)
    assert first["energy/gpu1_joules"] == pytest.approx(4.0)
    assert second["energy/gpu0_joules"] == 0.0


def test_gpu_energy_without_a_counter_is_power_times_time() -> None:
    nvml = FakeNvml(utils=[50.0], mem_used=[1.0])
    nvml.millijoules = None  # a GPU older than Volta
    with SystemMonitor(interval_s=0.02, rapl_root=NO_RAPL, nvml_lib=nvml) as mon:
        mon.collect()
        start = time.monotonic()
        time.sleep(0.2)
        values = mon.collect()
        window = time.monotonic() - start
    assert values["energy/gpu0_joules"] == pytest.approx(150.0 * window, rel=0.3)


def test_fake_nvml_failing_gpu_keeps_keys_with_none() -> None:
    nvml = FakeNvml(utils=[30.0, 40.0], mem_used=[100.0, 100.0])
    nvml.fail_index = 1
    mon = SystemMonitor(interval_s=0.05, rapl_root=NO_RAPL, nvml_lib=nvml)
    values = mon.collect()
    mon.stop()
    assert values["sys/gpu0_util_percent"] == pytest.approx(30.0)
    assert values["sys/gpu1_util_percent"] is None
    assert values["sys/gpu1_mem_percent"] is None and values["sys/gpu1_mem_mb"] is None
    assert values["sys/gpu1_power_w"] is None and values["energy/gpu1_joules"] is None


@pytest.mark.parametrize(
    ("nvml", "enabled"),
    [
        (FakeNvml(utils=[], mem_used=[]), True),  # library present, no GPU
        (FakeNvml(utils=[50.0], mem_used=[1.0], fail_init=True), True),  # no driver
        (FakeNvml(utils=[50.0], mem_used=[1.0]), False),  # switched off
    ],
)
def test_nvml_absent_means_no_gpu_keys(nvml: FakeNvml, enabled: bool) -> None:
    mon = SystemMonitor(interval_s=0.05, rapl_root=NO_RAPL, nvml=enabled, nvml_lib=nvml)
    values = mon.collect()
    mon.stop()
    assert not any(key.startswith("sys/gpu") for key in values)
    assert mon.sources()["nvml"] is False
    assert nvml.shutdown_calls == (1 if enabled and not nvml.fail_init else 0)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        SystemMonitor(interval_s=0)
    with pytest.raises(ValueError):
        SystemMonitor(pid=2**22 + 12345, nvml=False)
