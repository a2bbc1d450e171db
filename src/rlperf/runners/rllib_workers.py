"""The rllib runner: RLlib 1.1's rollout workers, as the thesis measured them.

Each of ``runner.num_workers`` Ray actors is one rollout worker: its own process with its
own copy of the policy, acting on its own device, stepping ``num_envs / num_workers`` envs
for one fragment per iteration (RLlib's synchronous sampling for PPO). After every update
the learner sends the new weights to every worker and waits until each holds them: that is
the thesis's ``update_time`` (RLlib's ``ray.put`` of the weights and one ``set_weights``
per worker), so it grows with the number of workers, and the workers' memory (a process,
a torch and a policy each) grows with them too (the thesis's Figs 4.2, 4.3 and 4.8).

It differs from the ray runner (whose actors fetch new weights themselves at the start of
their next rollout, and which overlaps acting with learning for APPO/IMPALA) in three ways:

- always synchronous: every rollout acts with the current weights, whatever the algorithm;
- weights are pushed in the ``update`` phase, not pulled during ``sample``;
- GPUs are shared as RLlib shared them: an actor on a GPU reserves a fraction of one
  (``runner.ray_num_gpus_per_actor``; when unset, the local Ray's GPUs divided equally
  among the workers), and Ray picks which GPU, so ``-g both`` loads both. Inside an actor
  its GPU is ``cuda:0`` (Ray sets ``CUDA_VISIBLE_DEVICES`` to it).

On a private local Ray the runner declares at least one CPU per worker, so a thesis point
with more workers than cores runs, time-shared, as it would have with ``ray.init`` told
more CPUs (the sweeps flag such points); the workers wait while the learner learns, so the
learner takes every CPU (RLlib's driver likewise ran its SGD on 8 threads).
"""

from __future__ import annotations

from typing import ClassVar

from rlperf.runners.facts import RunnerFacts
from rlperf.runners.ray_actors import RayRunner


class RLlibWorkers(RayRunner):
    """Rollout workers with their own policy copies; weights pushed to each after an update."""

    name = "rllib"
    # RLlib 1.1's rollout workers (the thesis's -w N): the ray runner's facts (synchronous
    # with lag 0), weights pushed to every worker after each update
    facts: ClassVar[RunnerFacts] = RayRunner.facts

    weight_pushes = 0
    """Workers that answered the last update's ``set_weights`` before the timeout."""

    def _asynchronous(self) -> bool:
        return False  # RLlib 1.1's PPO sampled synchronously, whatever the algorithm

    def _min_local_cpus(self) -> float:
        return self.cfg.num_workers * self.cfg.ray_num_cpus_per_actor

    def _gpus_per_actor(self) -> float:
        if self.cfg.ray_num_gpus_per_actor > 0 or self.actor_device.type != "cuda":
            return self.cfg.ray_num_gpus_per_actor
        # RLlib's -d: the GPUs the driver does not take are divided equally among the
        # workers (the learner is not a Ray task, so every GPU of the cluster is theirs).
        gpus = float(self._ray.cluster_resources().get("GPU", 0.0))
        return min(1.0, gpus / self.cfg.num_workers)

    def _device_in_actor(self) -> str:
        if self.gpus_per_actor > 0:
            return "cuda:0"  # the GPU Ray assigned: the only one the actor's process sees
        return super()._device_in_actor()

    def sync_weights(self) -> None:
        self._publish()
        pushed = [
            actor.handle.set_weights.remote(self.version, [self._weights_ref])
            for actor in self._live()
        ]
        # A worker that died is found (and replaced) by the next sample call; here only the
        # time until every live worker holds the weights matters.
        held, _ = self._ray.wait(pushed, num_returns=len(pushed), timeout=self.timeout_s)
        self.weight_pushes = len(held)

    def worker_metrics(self) -> dict[str, float]:
        return {**super().worker_metrics(), "perf/actor_weight_pushes": float(self.weight_pushes)}
