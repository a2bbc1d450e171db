"""Table 3.3 scaled to the machine at hand: the restricted set is half the CPUs, the workers
and the driver just fit in it (as the thesis's 8 workers and driver in 9 CPUs), and every
point plans on the machine it was written for."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlperf.sweep.machine import Machine
from rlperf.sweep.plan import plan_points
from rlperf.sweep.spec import load_spec
from rlperf.sweep.thesis_cpu_scaled import write_scaled_cpu_spec


@pytest.mark.parametrize(
    ("cpus", "workers", "pinned"),
    [
        (range(2), 1, [0]),  # 2 vCPUs: one worker and the driver share CPU 0
        (range(16), 7, list(range(8))),  # 7 workers and the driver in 8 of 16
        ([4, 5, 6, 7, 9], 1, [4, 5]),  # the usable CPUs, not 0..n-1
    ],
)
def test_the_restricted_set_is_half_the_usable_cpus(tmp_path: Path, cpus, workers, pinned):
    machine = Machine(frozenset(cpus), gpus=0)
    spec = load_spec(str(write_scaled_cpu_spec(machine, tmp_path)))
    points = {p.name: p for p in plan_points(spec, [], machine)}
    r = len(pinned)
    free, declared, pin = (
        points[f"no_cpu_limit_{workers}_workers"],
        points[f"{r}_cpus_no_set_affinity_{workers}_workers"],
        points[f"{r}_cpus_set_affinity_{workers}_workers"],
    )
    assert all(p.skip is None for p in points.values())  # all of it runs on its machine
    for point in points.values():
        runner = point.cfg.runner
        assert (runner.name, runner.num_workers) == ("rllib", workers)
        assert (runner.learner_device, runner.actor_device) == ("cpu", "cpu")
        assert point.cfg.model.name == "thesis-1"
    assert free.cfg.runner.ray_num_cpus is None and free.affinity is None
    assert declared.cfg.runner.ray_num_cpus == r and declared.affinity is None
    assert pin.cfg.runner.ray_num_cpus == r and pin.affinity == pinned
