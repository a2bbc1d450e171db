"""CPU package energy from the Linux powercap (Intel RAPL) interface.

The kernel exposes one directory per RAPL domain under ``/sys/class/powercap``. Top-level
domains ``intel-rapl:N`` are CPU packages (sockets); their sub-domains ``intel-rapl:N:M``
(core, uncore, dram) are already included in the package figure, so only the top level is
summed. Recent AMD CPUs use the same interface and names.

Each ``energy_uj`` file is a monotonically increasing counter in microjoules that wraps to
zero after ``max_energy_range_uj``. A wrap is detected as a decrease between two reads, so
the reader must be read more often than the counter can wrap; at a few hundred watts that is
still many minutes, far longer than the sampling interval of
:class:`rlperf.telemetry.sysmon.SystemMonitor`.

Since Linux 5.10 ``energy_uj`` is readable by root only (a side-channel fix), so on most
machines an ordinary user sees the directories but cannot read the counters: the reader then
reports itself unavailable rather than reporting zero energy.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

DEFAULT_POWERCAP_ROOT = "/sys/class/powercap"
"""Where the kernel mounts the powercap class."""

# Package domains only: "intel-rapl:0" but not "intel-rapl:0:1" (a sub-domain of package 0)
# nor "intel-rapl-mmio:0" (a second view of package 0 on some Intel CPUs, which would count
# the same energy twice).
_PACKAGE_DIR = re.compile(r"^intel-rapl:(\d+)$")


def _read_int(path: Path) -> int:
    """Read one integer sysfs attribute; raises OSError or ValueError when it cannot."""
    with open(path, encoding="ascii") as f:
        return int(f.read().strip())


@dataclass
class _Package:
    """Book-keeping for one package domain: the last raw counter and the sum since start."""

    path: Path
    max_range_uj: int | None
    last_uj: int
    total_uj: int = 0


class RaplReader:
    """Cumulative CPU package energy in joules, summed over all packages.

    Construction discovers the package domains under ``root`` and takes the baseline reading;
    :meth:`read_joules` then returns the energy used since construction. ``available`` is
    False when there is no powercap tree, no package domain, or a counter cannot be read
    (typically permission denied for non-root users).

    Thread-safe: the sampler thread and the training loop may both read.
    """

    def __init__(self, root: str | os.PathLike[str] = DEFAULT_POWERCAP_ROOT) -> None:
        """Discover the package domains under ``root`` and take the baseline reading."""
        self.root = Path(root)
        self._lock = threading.Lock()
        self._packages: list[_Package] = []
        self.available: bool = False
        """True when at least one package counter exists and could be read."""
        try:
            entries = sorted(self.root.iterdir(), key=lambda p: p.name)
        except OSError:
            return  # no powercap tree at all (VMs, containers, non-x86): stays unavailable
        packages: list[_Package] = []
        for entry in entries:
            if not _PACKAGE_DIR.match(entry.name):
                continue
            try:
                baseline = _read_int(entry / "energy_uj")
            except (OSError, ValueError):
                # One unreadable package makes the sum meaningless, so the whole reader is
                # unavailable rather than silently reporting part of the machine.
                return
            try:
                max_range: int | None = _read_int(entry / "max_energy_range_uj")
            except (OSError, ValueError):
                max_range = None
            packages.append(_Package(path=entry, max_range_uj=max_range, last_uj=baseline))
        self._packages = packages
        self.available = bool(packages)

    @property
    def num_packages(self) -> int:
        """Number of package domains found (0 when unavailable)."""
        return len(self._packages) if self.available else 0

    def read_joules(self) -> float | None:
        """Energy in joules used by all packages since construction.

        Returns None when the reader is unavailable or any counter cannot be read now, never
        0 for an absent measurement. A failed read leaves the running totals untouched, so a
        later successful read still covers the whole period.
        """
        if not self.available:
            return None
        with self._lock:
            raws: list[int] = []
            for pkg in self._packages:
                try:
                    raws.append(_read_int(pkg.path / "energy_uj"))
                except (OSError, ValueError):
                    return None
            total_uj = 0
            for pkg, raw in zip(self._packages, raws, strict=True):
                pkg.total_uj += self._delta_uj(pkg, raw)
                pkg.last_uj = raw
                total_uj += pkg.total_uj
        return total_uj / 1e6

    @staticmethod
    def _delta_uj(pkg: _Package, raw: int) -> int:
        """Energy between the previous and this raw reading, accounting for one wrap."""
        if raw >= pkg.last_uj:
            return raw - pkg.last_uj
        if pkg.max_range_uj is not None and pkg.max_range_uj >= pkg.last_uj:
            # The counter ran up to max_energy_range_uj and restarted from zero.
            return pkg.max_range_uj - pkg.last_uj + raw
        # Without a known range the best estimate is that it restarted from zero.
        return raw
