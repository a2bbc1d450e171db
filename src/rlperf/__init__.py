"""rlperf: reinforcement learning on games as fast as the hardware allows, every second measured."""

from rlperf.core.openmp_spin import shorten_openmp_spin

__version__ = "0.1.0"

# Before any module of the package imports torch: libgomp reads its spin count once, when
# torch loads it (see rlperf.core.openmp_spin).
shorten_openmp_spin()
