"""A two-node Ray cluster on this machine for the ray runner's tests.

``ray.cluster_utils.Cluster`` starts a head node and a second node (each its own raylet,
with 1 CPU), in a temporary directory of their own: a stale cluster file in Ray's default
directory must never be joined. Nodes bind to this machine's own address only.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

ray = pytest.importorskip("ray")


@dataclass
class TwoNodes:
    cluster: object  # ray.cluster_utils.Cluster
    address: str
    temp_dir: Path
    pids: set[int] = field(default_factory=set)
    """Every process the cluster started (raylets, GCS, workers), gathered while it ran."""
    before: set[int] = field(default_factory=set)
    """This process's children before the cluster started (e.g. multiprocessing's resource
    tracker, which lives on by design): not the cluster's."""

    def note_processes(self) -> None:
        children = psutil.Process().children(recursive=True)
        self.pids |= {p.pid for p in children if p.pid not in self.before}

    def shutdown(self) -> None:
        self.note_processes()
        self.cluster.shutdown()  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[TwoNodes]:
    from ray.cluster_utils import Cluster

    # Short: Ray's socket paths live under it and Unix sockets allow about 100 characters.
    temp_dir = Path(tempfile.mkdtemp(prefix="rlray", dir="/tmp"))
    # Ray's user directory too (its ray_current_cluster file), here and in the CLI processes.
    previous = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = str(temp_dir)
    (temp_dir / "ray").mkdir()
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    node_args = {"num_cpus": 1, "object_store_memory": 150 * 1024 * 1024}
    cluster = Cluster(
        initialize_head=True,
        head_node_args={**node_args, "include_dashboard": False, "temp_dir": str(temp_dir / "ray")},
    )
    cluster.add_node(**node_args)
    cluster.wait_for_nodes()
    nodes = TwoNodes(cluster, cluster.address, temp_dir, before=before)
    nodes.note_processes()
    try:
        yield nodes
    finally:
        nodes.shutdown()
        if previous is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = previous
        shutil.rmtree(temp_dir, ignore_errors=True)
