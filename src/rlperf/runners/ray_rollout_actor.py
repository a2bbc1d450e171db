"""The rollout actor of the ray runner: one Ray actor stepping a slice of the envs.

The class is plain Python; :mod:`rlperf.runners.ray_actors` wraps it with ``ray.remote``
(CPUs, GPUs, restarts). Each call of :meth:`RolloutActor.sample` fills one rollout with the
same :class:`RolloutCollector` the other runners use and returns it as numpy arrays, which
Ray stores in its object store (zero-copy for the driver on the same node).

Weights arrive as an object reference wrapped in a list (Ray resolves only top-level
arguments), with their version: the actor fetches them only when the version differs from
the one it holds. A new actor starts with version -1, so its first rollout always acts with
the weights of the call, i.e. the learner's current ones; a replacement of a failed actor
(``incarnation`` > 0) plays new games with new, still deterministic, env seeds.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from rlperf.core.types import Rollout
from rlperf.envs.base import EpisodeEnd
from rlperf.models.policy import ActorCritic
from rlperf.runners.child import ProcessStart, process_resources
from rlperf.runners.collector import RolloutCollector
from rlperf.runners.env_slice import EnvSliceFactory
from rlperf.telemetry.timers import PhaseTimer

ACTOR_SECONDS = ("env_step", "policy_forward", "weight_sync")
# Env seeds of an actor's n-th replacement start n strides away from its first seeds.
_REPLACEMENT_SEED_STRIDE = 1_000_003


@dataclass
class RayActorSetup:
    """Everything a rollout actor needs; Ray keeps it to rebuild the actor after a crash."""

    index: int
    first_env: int
    """Index of the actor's first env in the learner's batch (for episode reports)."""
    num_envs: int
    make_envs: EnvSliceFactory
    """``make_envs(count, seed, first_env)``: the actor's envs, env i seeded ``seed + i``."""
    env_seed: int
    incarnation: int
    """0 for the first actor of this index, n for its n-th replacement."""
    make_policy: Callable[[], ActorCritic]
    start: ProcessStart
    """Ray places the actor on its CPUs: only the threads and the seed are set."""
    num_steps: int
    device: str
    precision: str
    channels_last: bool


@dataclass
class RayRollout:
    """What one ``sample`` call returns."""

    arrays: dict[str, np.ndarray]
    """The Rollout's fields (T x k envs) as numpy arrays."""
    policy_version: int
    """Version of the weights that acted for the whole rollout."""
    episodes: list[EpisodeEnd]
    """True games that ended, with env indices in the learner's batch."""
    seconds: dict[str, float] = field(default_factory=dict)
    """Actor-side time: env_step, policy_forward, weight_sync."""
    info: dict[str, Any] = field(default_factory=dict)
    """Where the actor runs: pid, node, incarnation."""
    weights_pulled: bool = False
    """Whether the actor had to load new weights when asked to sample (the ray runner's
    actors pull them so; the rllib runner's were pushed them in the update phase)."""


def weights_to_numpy(module: torch.nn.Module) -> np.ndarray:
    """All of ``module``'s parameters and buffers in one flat fp32 array (one object to put)."""
    with torch.no_grad():
        flat = torch.cat([t.detach().reshape(-1).float() for t in module.state_dict().values()])
    return flat.cpu().numpy()


def load_flat_weights(module: torch.nn.Module, flat: np.ndarray) -> None:
    """Copy a :func:`weights_to_numpy` array into ``module``."""
    targets = list(module.state_dict().values())
    with warnings.catch_warnings():
        # Arrays from Ray's object store are read-only; they are only read here.
        warnings.simplefilter("ignore", UserWarning)
        source = torch.from_numpy(flat)
    with torch.no_grad():
        offset = 0
        for t in targets:
            n = t.numel()
            t.copy_(source[offset : offset + n].view(t.shape))
            offset += n
    if offset != source.numel():
        raise ValueError(f"weights hold {source.numel()} values, the policy {offset}")


def rollout_from_arrays(arrays: dict[str, np.ndarray]) -> Rollout:
    """A Rollout of tensors viewing ``arrays`` (no copy)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # read-only object-store arrays
        return Rollout(**{name: torch.from_numpy(a) for name, a in arrays.items()})


class RolloutActor:
    """Steps ``setup.num_envs`` envs with a versioned copy of the policy (a Ray actor)."""

    def __init__(self, setup: RayActorSetup) -> None:
        import ray

        from rlperf.runners.ray_cluster import node_of_this_process

        setup.start.enter()
        self.setup = setup
        self.device = torch.device(setup.device)
        # A replacement plays new games: the same seeds would repeat the failed actor's
        # episodes (and, with fault injection, its faults).
        self.env_seed = setup.env_seed + _REPLACEMENT_SEED_STRIDE * setup.incarnation
        self.envs = setup.make_envs(setup.num_envs, self.env_seed, setup.first_env)
        self.policy = setup.make_policy().to(self.device)
        if setup.channels_last:
            self.policy.to(memory_format=torch.channels_last)
        self.policy.eval()
        first_obs = self.envs.reset(self.env_seed)
        self.buf = Rollout.allocate(
            setup.num_steps,
            setup.num_envs,
            tuple(first_obs.shape[1:]),
            torch.from_numpy(first_obs[:0]).dtype,
        )
        self.collector = RolloutCollector(
            self.envs, self.policy, self.device, setup.precision, first_obs
        )
        self.version = -1
        self.timer = PhaseTimer()
        self._info = process_resources(
            "actor",
            setup.index,
            setup.device,
            incarnation=setup.incarnation,
            # the policy copy this worker acts with (each actor holds its own)
            policy_parameters=sum(p.numel() for p in self.policy.parameters()),
            **node_of_this_process(ray),
        )

    def info(self) -> dict[str, Any]:
        """Where this actor runs; also the driver's way to wait until it is built."""
        return dict(self._info)

    def set_weights(self, version: int, weights: list[Any]) -> int:
        """Hold weights ``version`` from now on (``weights[0]``: their object ref); returns the
        version held. Pushing weights ahead of ``sample`` is RLlib's ``set_weights``."""
        import ray

        if version != self.version:
            load_flat_weights(self.policy, ray.get(weights[0]))
            self.version = version
        return self.version

    def sample(self, version: int, weights: list[Any]) -> RayRollout:
        """One rollout acted with weights ``version`` (``weights[0]``: their object ref)."""
        pulled = version != self.version
        with self.timer.phase("weight_sync"):
            self.set_weights(version, weights)
        episodes = [
            dataclasses.replace(e, env_index=e.env_index + self.setup.first_env)
            for e in self.collector.collect(self.buf, self.timer)
        ]
        seconds = self.timer.lap()
        return RayRollout(
            arrays={f.name: getattr(self.buf, f.name).numpy() for f in dataclasses.fields(Rollout)},
            policy_version=self.version,
            episodes=episodes,
            seconds={k: seconds.get(k, 0.0) for k in ACTOR_SECONDS},
            info=dict(self._info),
            weights_pulled=pulled,
        )

    def close(self) -> None:
        """Close the envs (the driver calls it before killing the actor)."""
        self.envs.close()
