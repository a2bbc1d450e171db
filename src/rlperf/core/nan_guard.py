"""The NaN guard: what a non-finite value in a batch, a loss or a gradient does.

``nan_policy`` (``--nan-policy``): ``raise`` stops the run (the session saves the offending
batch into the run directory and names the last good checkpoint), ``skip_update`` drops
that gradient step (or the whole update when the batch itself is bad) and counts it,
``warn`` prints one line per kind of value and carries on as if nothing happened, ``none``
checks nothing.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import numpy as np
import torch

NAN_POLICIES = ("raise", "skip_update", "warn", "none")


class NonFiniteError(RuntimeError):
    """A NaN or infinity where training needs finite numbers (``nan_policy=raise``)."""


class NonFiniteGuard:
    """Applies the run's ``nan_policy`` to the non-finite values the checks find."""

    def __init__(self, policy: str) -> None:
        if policy not in NAN_POLICIES:
            raise ValueError(f"unknown nan_policy {policy!r}; valid: {', '.join(NAN_POLICIES)}")
        self.policy = policy
        self.skipped = 0
        """Gradient steps or updates dropped (``skip_update``)."""
        self.found_total = 0
        """Non-finite values met, whatever the policy did about them."""
        self._warned: set[str] = set()

    def found(self, where: str) -> bool:
        """A non-finite value at ``where``: raise, or return whether to skip the update."""
        self.found_total += 1
        if self.policy == "raise":
            raise NonFiniteError(f"non-finite value in {where} (nan_policy=raise)")
        if self.policy == "skip_update":
            self.skipped += 1
            return True
        if where not in self._warned:  # one line per kind of value, not one per step
            self._warned.add(where)
            print(f"rlperf: warning: non-finite value in {where}; going on (nan_policy=warn)",
                  file=sys.stderr, flush=True)  # fmt: skip
        return False

    def check_batch(self, batch: Any) -> bool:
        """Check every floating-point array of a batch; returns whether to skip its update."""
        if self.policy == "none":
            return False
        for name, value in _arrays(batch):
            if not _is_float(value):
                continue  # integers (uint8 frames, actions) cannot be NaN
            finite = (
                bool(torch.isfinite(value).all())
                if isinstance(value, torch.Tensor)
                else bool(np.isfinite(value).all())
            )
            if not finite:
                return self.found(f"the batch's {name} (env outputs or acting)")
        return False

    def check_metrics(self, metrics: dict[str, Any]) -> None:
        """Check the algorithm's logged losses (a NaN there means the model is broken)."""
        if self.policy == "none":
            return
        for key, value in metrics.items():
            if key.startswith("losses/") and isinstance(value, float) and not np.isfinite(value):
                self.found(f"the logged metric {key}")
                return

    def metrics(self) -> dict[str, float]:
        return {"guard/nonfinite_found": self.found_total, "guard/skipped_updates": self.skipped}


def _arrays(batch: Any) -> list[tuple[str, torch.Tensor | np.ndarray]]:
    """The batch's tensor and array fields by name (a batch is a dataclass of arrays)."""
    if not dataclasses.is_dataclass(batch):
        return []
    values = ((f.name, getattr(batch, f.name)) for f in dataclasses.fields(batch))
    return [(n, v) for n, v in values if isinstance(v, torch.Tensor | np.ndarray)]


def _is_float(value: torch.Tensor | np.ndarray) -> bool:
    if isinstance(value, torch.Tensor):
        return value.is_floating_point()
    return bool(np.issubdtype(value.dtype, np.floating))


def batch_tensors(batch: Any) -> dict[str, torch.Tensor]:
    """The batch's arrays as CPU tensors by field name (for a safetensors dump)."""
    return {
        name: torch.as_tensor(
            np.ascontiguousarray(value) if isinstance(value, np.ndarray) else value
        )
        .detach()
        .to("cpu")
        .contiguous()
        .clone()
        for name, value in _arrays(batch)
    }
