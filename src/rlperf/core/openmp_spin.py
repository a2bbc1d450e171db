"""How long torch's idle OpenMP threads spin before they sleep, set before torch loads.

torch's CPU kernels run on GNU OpenMP (libgomp). After each parallel region its worker
threads keep spinning for ``GOMP_SPINCOUNT`` iterations (300,000 unless ``OMP_WAIT_POLICY``
is set): on a 2-vCPU Zen 4 EPYC, through most of the C++ vector env's step that follows.
rlperf starts as many torch threads as usable cores and as many env worker threads again,
so in a rollout the spin that follows each policy forward takes the cores the env's threads
need. libgomp shortens its spin by itself only when its own threads outnumber the
cores; it cannot see the env's. 10,000 iterations keep the learner's back-to-back kernels
within one spin and let the env's threads have the cores between forwards
(docs/benchmarks-throughput.md, "Acting threads and OpenMP's spin").

libgomp reads the variable once, when it is loaded: this module must not import torch and
:func:`shorten_openmp_spin` must run before anything else does (``rlperf/__init__.py``).
"""

from __future__ import annotations

import os
import sys

SPIN_VAR = "GOMP_SPINCOUNT"
WAIT_POLICY_VAR = "OMP_WAIT_POLICY"
MARK_VAR = "RLPERF_SET_GOMP_SPINCOUNT"
"""The value rlperf set, so that the processes a run starts (which inherit the variable) tell
rlperf's spin from the user's."""
SPIN_COUNT = 10_000
"""rlperf's spin count: the iterations an idle libgomp thread spins before it sleeps."""

spin_set_by: str | None = None
"""Who chose ``GOMP_SPINCOUNT`` for this process: ``"rlperf"``, ``"environment"`` (it or
``OMP_WAIT_POLICY`` was set already, by the user), or None (torch was loaded before rlperf, so
libgomp's default holds). Recorded in each run's manifest."""


def shorten_openmp_spin() -> str | None:
    """Set ``GOMP_SPINCOUNT`` to :data:`SPIN_COUNT` unless a spin or a wait policy is set
    already, or torch (and with it libgomp) is already loaded. Returns :data:`spin_set_by`.

    Child processes inherit the variable, so a run's env and actor workers spin alike, and
    a run that ``rlperf bench`` or a sweep starts still reads ``"rlperf"``."""
    global spin_set_by
    inherited = os.environ.get(SPIN_VAR)
    if inherited is not None and inherited == os.environ.get(MARK_VAR):
        spin_set_by = "rlperf"  # by the rlperf process that started this one
    elif inherited is not None or WAIT_POLICY_VAR in os.environ:
        spin_set_by = "environment"
    elif "torch" in sys.modules:
        spin_set_by = None
    else:
        os.environ[SPIN_VAR] = os.environ[MARK_VAR] = str(SPIN_COUNT)
        spin_set_by = "rlperf"
    return spin_set_by
