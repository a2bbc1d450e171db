"""One function of device work, replayed as a CUDA graph (``runner.cuda_graph``).

A small network's learner step on a GPU is bound by the CPU: each minibatch launches a few
hundred kernels from Python, each taking longer to launch than to run (on an H100 the
atari-fast-gpu learner kept the GPU 13 % busy, docs/benchmarks.md); so, on a smaller
scale, is each acting forward. A CUDA graph records those launches once and replays them
with one call.

The recorded function must work on tensors that stay where they are (inputs copied into
fixed buffers before each call, results accumulated into fixed tensors) and must never wait
for the device (no ``float(tensor)``, no ``if tensor:``): a graph replays kernels, not
Python. On a CPU there is nothing to capture and the function simply runs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch

WARMUP_CALLS = 3
"""Eager calls before the capture: lazy state (optimizer moments, cuDNN's algorithm
choice, autograd's buffers) is created outside the graph, as torch's capture recipe asks."""


class GraphedCall:
    """``fn()`` on ``device``: eager for the first :data:`WARMUP_CALLS` calls (on a side
    stream, on CUDA), then captured once and replayed.

    Every call does ``fn``'s work, the capture included (it replays right after recording).
    If the capture fails, the reason goes to stderr and :attr:`failure`, and ``fn`` runs
    eagerly from then on: the same maths, only slower.
    """

    def __init__(self, fn: Callable[[], None], device: torch.device) -> None:
        self.fn = fn
        self.capture = device.type == "cuda"
        self.calls = 0
        self.graph: torch.cuda.CUDAGraph | None = None
        self.failure: str | None = None
        """Why the capture failed (None: captured, or not tried yet)."""

    @property
    def graphed(self) -> bool:
        """Whether calls replay a captured graph."""
        return self.graph is not None

    def __call__(self) -> None:
        self.calls += 1
        if self.graph is not None:
            self.graph.replay()
        elif not self.capture:
            self.fn()
        elif self.calls <= WARMUP_CALLS:
            self._on_side_stream()
        else:
            self._capture()

    def _on_side_stream(self) -> None:
        # Warm-up work on its own stream, as the capture will be, so that the memory it
        # caches belongs to a stream the capture does not use.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self.fn()
        torch.cuda.current_stream().wait_stream(side)

    def _capture(self) -> None:
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                self.fn()
        except Exception as exc:  # noqa: BLE001 - any capture failure falls back to eager
            self.capture = False
            self.failure = f"{type(exc).__name__}: {exc}".splitlines()[0]
            print(
                f"rlperf: warning: runner.cuda_graph: capture failed ({self.failure}); "
                "this step runs without a graph from now on",
                file=sys.stderr,
                flush=True,
            )
            torch.cuda.synchronize()
            self.fn()  # the call's work, eagerly
            return
        self.graph = graph
        graph.replay()  # recording ran nothing: this call's work
