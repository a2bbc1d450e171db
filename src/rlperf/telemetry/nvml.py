"""NVML, the NVIDIA driver's management library, as the system monitor reads it: the calls
it makes (a protocol, so that tests pass a fake) and the module that provides them."""

from __future__ import annotations

from typing import Any, Protocol


class NvmlLike(Protocol):
    """The subset of the ``pynvml`` module that :class:`SystemMonitor` uses.

    Tests pass a fake with these functions through ``SystemMonitor(nvml_lib=...)``.
    """

    def nvmlInit(self) -> None:
        """Initialise the library (raises when there is no driver)."""

    def nvmlShutdown(self) -> None:
        """Release the library."""

    def nvmlDeviceGetCount(self) -> int:
        """Number of GPUs."""

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        """Opaque handle of GPU ``index``."""

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        """Object with ``.gpu`` (percent busy over the driver's last sample period)."""

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        """Power draw in milliwatts."""

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int:
        """Energy in millijoules since the driver was loaded (Volta and later)."""

    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Any:
        """Object with ``.used`` and ``.total`` bytes."""


def load_pynvml() -> NvmlLike | None:
    """Import pynvml (package ``nvidia-ml-py``); None when it is not installed."""
    try:
        import pynvml  # type: ignore[import-untyped]
    except ImportError:
        return None
    return pynvml  # type: ignore[no-any-return]
