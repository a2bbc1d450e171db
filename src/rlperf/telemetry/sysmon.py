"""Background sampling of CPU, RAM, GPU and energy use while a run trains.

:class:`SystemMonitor` runs a daemon thread that takes one sample every ``interval_s``
seconds; the training loop calls :meth:`SystemMonitor.collect` once per iteration and gets
the mean of the samples taken since its previous call. Metric keys (fixed project-wide):

=========================  =============================================================
``sys/cpu_percent``        whole-machine CPU use, 0-100 % of all logical cores
``sys/proc_cpu_percent``   the process and all its descendants, in % of ONE core
                           (170 = 1.7 cores busy)
``sys/ram_percent``        whole-machine RAM in use, 0-100 %
``sys/proc_rss_mb``        resident memory of the process tree in MiB (RSS summed over the
                           processes, so pages shared between forked workers count twice)
``sys/gpu{i}_util_percent`` NVML utilisation of GPU i (only for GPUs that exist)
``sys/gpu{i}_mem_percent``  NVML memory used / total of GPU i
``sys/gpu{i}_mem_mb``      NVML memory used on GPU i in MiB (every process's, as nvidia-smi)
``sys/gpu{i}_power_w``     NVML power draw of GPU i, mean of the window's samples
``energy/joules``          CPU package energy over the window (None without RAPL, never 0)
``energy/watts``           mean CPU package power over the window (None without RAPL)
``energy/gpu{i}_joules``   GPU i's energy over the window: NVML's energy counter (Volta
                           and later), else the window's mean power times its length
=========================  =============================================================

Overhead is kept small on purpose: the sampler makes only psutil, NVML and sysfs calls
(all short, and the ctypes NVML calls release the GIL), so it steals next to no time from
the training thread even on a 2-core machine.

Long for the metric table above and one sampler per source (psutil, NVML, RAPL).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from types import TracebackType
from typing import Any

import psutil

from rlperf.telemetry.energy import DEFAULT_POWERCAP_ROOT, RaplReader
from rlperf.telemetry.nvml import NvmlLike, load_pynvml

logger = logging.getLogger(__name__)

_MIB = 1024 * 1024

# psutil exceptions that mean "this process is gone or not ours to read": a child may exit
# between listing the tree and reading its counters.
_PROC_GONE = (psutil.NoSuchProcess, psutil.AccessDenied)


def _cpu_busy_total(times: Any) -> tuple[float, float]:
    """Busy and total CPU seconds from a ``psutil.cpu_times()`` tuple.

    Computed here rather than with ``psutil.cpu_percent()`` because that function keeps
    module-global state that any other caller in the process would disturb.
    """
    total = float(sum(times))
    # Linux already counts guest time inside user/nice; counting it again would inflate total.
    total -= getattr(times, "guest", 0.0) + getattr(times, "guest_nice", 0.0)
    idle = times.idle + getattr(times, "iowait", 0.0)
    return total - idle, total


class SystemMonitor:
    """Samples system and process-tree resource use in a daemon thread.

    Use as a context manager or call :meth:`start` / :meth:`stop`; call :meth:`collect` once
    per training iteration. Absent sources are reported as absent: without RAPL the energy
    keys are None, without NVML or a GPU there are no GPU keys; :meth:`sources` says which
    sources exist.

    Args:
        interval_s: seconds between two samples.
        pid: root of the process tree measured; default this process.
        rapl_root: powercap sysfs directory (tests point it at a fake tree).
        nvml: query GPUs through NVML when pynvml imports and initialises.
        nvml_lib: an object with the pynvml API used instead of importing pynvml (a seam for
            tests, which pass a ``FakeNvml``); ignored when ``nvml`` is False.
    """

    def __init__(
        self,
        interval_s: float = 0.5,
        pid: int | None = None,
        rapl_root: str = DEFAULT_POWERCAP_ROOT,
        nvml: bool = True,
        *,
        nvml_lib: NvmlLike | None = None,
    ) -> None:
        """Open the sources and take the baseline for the first window (no thread yet)."""
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        self.interval_s = float(interval_s)
        self.pid = os.getpid() if pid is None else int(pid)
        try:
            self._root = psutil.Process(self.pid)
        except psutil.NoSuchProcess as exc:
            raise ValueError(f"no process with pid {self.pid}") from exc

        # One lock guards the delta baselines and the window; a sample holds it for a few
        # milliseconds at most, so collect() never waits long.
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._overhead_s = 0.0
        self._logged_error = False

        self._rapl = RaplReader(rapl_root)
        self._nvml, self._gpu_handles = self._open_nvml(nvml, nvml_lib)

        # Baselines: the first window is measured from construction.
        self._prev_cpu = _cpu_busy_total(psutil.cpu_times())
        self._prev_wall = time.monotonic()
        self._prev_epoch = time.time()
        self._procs: dict[psutil.Process, tuple[psutil.Process, float]] = {}
        self._sample_tree(baseline=True)
        self._energy_prev = self._rapl.read_joules()
        self._energy_prev_t = time.monotonic()
        self._gpu_energy_prev = [self._gpu_millijoules(h) for h in self._gpu_handles]

        self._sums: dict[str, float] = {}
        self._counts: dict[str, int] = {}
        self._window_samples = 0
        self._last_sample: dict[str, float | None] | None = None

    # ------------------------------------------------------------------ sources
    @staticmethod
    def _open_nvml(enabled: bool, lib: NvmlLike | None) -> tuple[NvmlLike | None, list[Any]]:
        """Initialise NVML and get one handle per GPU; (None, []) when any of it fails."""
        if not enabled:
            return None, []
        if lib is None:
            lib = load_pynvml()
            if lib is None:
                return None, []
        try:
            lib.nvmlInit()
        except Exception:  # NVMLError_LibraryNotFound, driver not loaded, ...: no NVML here
            return None, []
        try:
            handles = [lib.nvmlDeviceGetHandleByIndex(i) for i in range(lib.nvmlDeviceGetCount())]
        except Exception:
            handles = []
        if not handles:
            # No GPU behind the library: release it now, nothing will be sampled.
            with contextlib.suppress(Exception):
                lib.nvmlShutdown()
            return None, []
        return lib, handles

    def sources(self) -> dict[str, bool]:
        """Which sources exist: ``cpu``, ``ram``, ``nvml`` (with at least one GPU), ``rapl``."""
        return {
            "cpu": True,
            "ram": True,
            "nvml": self._nvml is not None,
            "rapl": self._rapl.available,
        }

    @property
    def num_gpus(self) -> int:
        """Number of GPUs sampled through NVML (0 without NVML)."""
        return len(self._gpu_handles)

    @property
    def overhead_s(self) -> float:
        """Total seconds spent taking samples so far (the monitor's own cost)."""
        return self._overhead_s

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> SystemMonitor:
        """Start the sampler thread (no-op when already running); returns self."""
        if self._stopped:
            raise RuntimeError("a stopped SystemMonitor cannot be restarted; create a new one")
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="rlperf-sysmon", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop and join the sampler thread, then shut NVML down. Idempotent."""
        self._stop_event.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            if self._nvml is not None and not self._stopped:
                with contextlib.suppress(Exception):
                    self._nvml.nvmlShutdown()
            self._stopped = True

    def __enter__(self) -> SystemMonitor:
        """Start sampling."""
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop sampling."""
        self.stop()

    def _run(self) -> None:
        """Sampler loop: one sample per interval on a fixed schedule until stopped."""
        next_t = time.monotonic() + self.interval_s
        while not self._stop_event.wait(max(0.0, next_t - time.monotonic())):
            self._sample_into_window()
            now = time.monotonic()
            next_t += self.interval_s
            if next_t < now:
                # A stall (suspended VM, heavy swap): resume the schedule instead of bursting.
                next_t = now + self.interval_s

    # ------------------------------------------------------------------ sampling
    def _sample_into_window(self) -> None:
        """Take one sample and add it to the window; never lets an exception kill the thread."""
        try:
            with self._lock:
                if self._stopped:
                    return
                self._add(self._take_sample())
        except Exception:
            if not self._logged_error:
                self._logged_error = True
                logger.warning("system monitor sample failed", exc_info=True)

    def _take_sample(self) -> dict[str, float | None]:
        """One sample of every source, as deltas since the previous sample (lock held)."""
        t0 = time.perf_counter()
        now = time.monotonic()
        sample: dict[str, float | None] = {}

        busy, total = _cpu_busy_total(psutil.cpu_times())
        prev_busy, prev_total = self._prev_cpu
        if total > prev_total:
            cpu = 100.0 * (busy - prev_busy) / (total - prev_total)
        else:
            # Same clock tick as the previous sample: fall back to the average since boot.
            cpu = 100.0 * busy / total if total > 0 else 0.0
        self._prev_cpu = (busy, total)
        sample["sys/cpu_percent"] = min(100.0, max(0.0, cpu))

        cpu_seconds, rss_bytes = self._sample_tree(baseline=False)
        dt = now - self._prev_wall
        self._prev_wall = now
        self._prev_epoch = time.time()
        if cpu_seconds is None or dt <= 0:
            sample["sys/proc_cpu_percent"] = None
        else:
            sample["sys/proc_cpu_percent"] = 100.0 * cpu_seconds / dt
        sample["sys/ram_percent"] = float(psutil.virtual_memory().percent)
        sample["sys/proc_rss_mb"] = None if rss_bytes is None else rss_bytes / _MIB

        if self._nvml is not None:
            for i, handle in enumerate(self._gpu_handles):
                sample.update(self._sample_gpu(i, handle))

        if self._rapl.available:
            # The value itself is read again in collect(); reading every interval keeps the
            # reader's wrap-around detection working however rarely collect() is called.
            self._rapl.read_joules()

        self._overhead_s += time.perf_counter() - t0
        return sample

    def _sample_gpu(self, index: int, handle: Any) -> dict[str, float | None]:
        """Utilisation and memory use of one GPU; None values when NVML fails for it."""
        util_key = f"sys/gpu{index}_util_percent"
        mem_key = f"sys/gpu{index}_mem_percent"
        mb_key = f"sys/gpu{index}_mem_mb"
        assert self._nvml is not None
        out: dict[str, float | None] = {util_key: None, mem_key: None, mb_key: None}
        # A GPU that fails a query (lost, unsupported) keeps its keys with None values.
        with contextlib.suppress(Exception):
            out[util_key] = float(self._nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
        try:
            mem = self._nvml.nvmlDeviceGetMemoryInfo(handle)
            out[mb_key] = float(mem.used) / _MIB
            if mem.total:
                out[mem_key] = 100.0 * float(mem.used) / float(mem.total)
        except Exception:
            pass
        power_key = f"sys/gpu{index}_power_w"
        out[power_key] = None
        with contextlib.suppress(Exception):
            out[power_key] = self._nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0
        return out

    def _gpu_millijoules(self, handle: Any) -> float | None:
        """NVML's energy counter of one GPU; None where the GPU has none."""
        if self._nvml is None:
            return None
        try:
            return float(self._nvml.nvmlDeviceGetTotalEnergyConsumption(handle))
        except Exception:  # pre-Volta GPUs, or a lost one
            return None

    def _sample_tree(self, baseline: bool) -> tuple[float | None, int | None]:
        """CPU seconds used by the process tree since the previous sample, and its RSS bytes.

        The child list is refreshed every sample; psutil.Process objects are cached (keyed by
        pid + creation time, so a reused pid is a new process) to keep the per-process CPU
        baselines. Returns (None, None) when the root process is gone.
        """
        try:
            listed = [self._root, *self._root.children(recursive=True)]
        except psutil.NoSuchProcess:
            self._procs = {}
            return None, None
        except psutil.AccessDenied:
            listed = [self._root]

        cpu_seconds = 0.0
        rss = 0
        seen: dict[psutil.Process, tuple[psutil.Process, float]] = {}
        for fresh in listed:
            cached = self._procs.get(fresh)
            # Reuse the cached object (it compares equal to `fresh`: same pid and creation
            # time); it already knows its creation time and CPU baseline.
            proc, prev_cpu = cached if cached is not None else (fresh, None)
            try:
                with proc.oneshot():
                    times = proc.cpu_times()
                    mem = proc.memory_info()
            except _PROC_GONE:
                continue  # exited (or became unreadable) after being listed
            used = times.user + times.system
            if prev_cpu is not None:
                cpu_seconds += max(0.0, used - prev_cpu)
            elif not baseline:
                # Every descendant alive at the previous sample was listed then, so one seen
                # for the first time was born during this window: all its CPU time is ours.
                # The 1 s slack covers psutil's create_time, whose boot time is truncated.
                try:
                    born_in_window = proc.create_time() >= self._prev_epoch - 1.0
                except _PROC_GONE:
                    born_in_window = False
                if born_in_window:
                    cpu_seconds += used
            seen[proc] = (proc, used)
            rss += mem.rss
        self._procs = seen
        return cpu_seconds, rss

    def _add(self, sample: dict[str, float | None]) -> None:
        """Accumulate one sample into the window sums (lock held)."""
        for key, value in sample.items():
            self._sums.setdefault(key, 0.0)
            self._counts.setdefault(key, 0)
            if value is not None:
                self._sums[key] += value
                self._counts[key] += 1
        self._window_samples += 1
        self._last_sample = sample

    # ------------------------------------------------------------------ reporting
    def collect(self) -> dict[str, float | None]:
        """Means over the samples since the previous call, then start a new window.

        When no sample was taken yet, one is taken now so CPU/RAM values are never missing;
        when the window is empty because collect() is called faster than ``interval_s``, the
        latest sample is repeated rather than paying for a sample in the training thread.
        Energy is read at the call itself, so ``energy/joules`` covers exactly the time since
        the previous collect() (or construction).
        """
        with self._lock:
            if self._window_samples == 0:
                if self._last_sample is None:
                    self._add(self._take_sample())
                    means = self._window_means()
                else:
                    means = dict(self._last_sample)
            else:
                means = self._window_means()
            self._sums = {}
            self._counts = {}
            self._window_samples = 0
            dt = time.monotonic() - self._energy_prev_t
            means.update(self._gpu_energy_window(means, dt))
            means.update(self._energy_window())
        return means

    def _window_means(self) -> dict[str, float | None]:
        """Per-key means of the current window; None for keys with no valid value (lock held)."""
        return {
            key: (self._sums[key] / self._counts[key]) if self._counts[key] else None
            for key in self._sums
        }

    def _gpu_energy_window(
        self, means: dict[str, float | None], dt: float
    ) -> dict[str, float | None]:
        """Each GPU's joules since the previous call (lock held): the counter's difference,
        or the window's mean power times ``dt`` where the GPU has no counter."""
        out: dict[str, float | None] = {}
        for i, handle in enumerate(self._gpu_handles):
            now = self._gpu_millijoules(handle)
            prev = self._gpu_energy_prev[i]
            watts = means.get(f"sys/gpu{i}_power_w")
            if now is not None and prev is not None:
                out[f"energy/gpu{i}_joules"] = max(0.0, now - prev) / 1000.0
            else:
                out[f"energy/gpu{i}_joules"] = None if watts is None else watts * dt
            self._gpu_energy_prev[i] = now
        return out

    def _energy_window(self) -> dict[str, float | None]:
        """Joules and mean watts since the previous call; None values without RAPL (lock held)."""
        now = time.monotonic()
        joules_now = self._rapl.read_joules()
        out: dict[str, float | None] = {"energy/joules": None, "energy/watts": None}
        if joules_now is None:
            # Unreadable this time: keep the old baseline so the next window includes this one.
            return out
        if self._energy_prev is not None:
            joules = max(0.0, joules_now - self._energy_prev)
            dt = now - self._energy_prev_t
            out["energy/joules"] = joules
            out["energy/watts"] = joules / dt if dt > 0 else None
        self._energy_prev = joules_now
        self._energy_prev_t = now
        return out
