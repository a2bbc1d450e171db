"""rlperf: reinforcement learning on games as fast as the hardware allows, every second measured."""

__version__ = "0.1.0"
