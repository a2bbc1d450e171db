"""The actor process of the decoupled runner: acts and steps its envs while the learner learns.

Protocol over the actor's own pipe (small messages only; rollouts travel in shared memory):

- learner -> actor: ``("start",)`` once the first weights are published, ``("free", slot)``
  when the learner has finished reading a slot, ``("stop",)``.
- actor -> learner: ``("hello", resources)`` after start-up, ``("full", RolloutReport)`` for
  each filled slot, ``("error", message, traceback)`` before exiting on an exception.

One pipe per actor, not a shared queue: an actor killed mid-message can only break its own
pipe, which its restart replaces.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection

import torch

from rlperf.envs.vector import VectorEnv
from rlperf.models.policy import ActorCritic
from rlperf.runners.child import (
    ProcessStart,
    RolloutReport,
    run_child,
    say_hello,
    wait_for_free_slot,
)
from rlperf.runners.collector import RolloutCollector
from rlperf.runners.shared_memory import RolloutSlots, SharedPolicyWeights
from rlperf.telemetry.timers import PhaseTimer


@dataclass
class ActorSetup:
    """Everything an actor process needs, pickled once when it is spawned."""

    index: int
    first_env: int
    """Index of the actor's first env in the learner's batch (for episode reports)."""
    make_envs: Callable[[], VectorEnv]
    env_seed: int
    make_policy: Callable[[], ActorCritic]
    start: ProcessStart
    device: str
    precision: str
    channels_last: bool
    cuda_graph: bool
    """Record the acting forward as a CUDA graph (``runner.cuda_graph``)."""
    slots: RolloutSlots
    slot_ids: list[int]
    """The slots this actor may fill at start (the learner returns them one by one)."""
    weights: SharedPolicyWeights


def actor_main(setup: ActorSetup, conn: Connection) -> None:
    """Entry point of an actor process."""
    run_child(_run, setup, conn)


def _run(setup: ActorSetup, conn: Connection) -> None:
    device = torch.device(setup.device)
    envs = setup.make_envs()
    try:
        policy = setup.make_policy().to(device)
        if setup.channels_last:
            policy.to(memory_format=torch.channels_last)
        policy.eval()
        say_hello(conn, "actor", setup.index, setup.device)
        free = deque(setup.slot_ids)
        while conn.recv()[0] != "start":
            pass
        collector = RolloutCollector(
            envs, policy, device, setup.precision, envs.reset(setup.env_seed),
            graphed=setup.cuda_graph,
        )  # fmt: skip
        version = -1
        timer = PhaseTimer()
        while True:
            with timer.phase("slot_wait"):
                if not wait_for_free_slot(conn, free):
                    return
            slot = free.popleft()
            with timer.phase("weight_sync"):
                version = setup.weights.pull(policy, version)
            episodes = [
                dataclasses.replace(e, env_index=e.env_index + setup.first_env)
                for e in collector.collect(setup.slots[slot], timer)
            ]
            seconds = timer.lap()
            report = RolloutReport(
                slot=slot,
                policy_version=version,
                episodes=episodes,
                seconds={
                    k: seconds.get(k, 0.0)
                    for k in ("env_step", "policy_forward", "weight_sync", "slot_wait")
                },
            )
            conn.send(("full", report))
    finally:
        envs.close()
