"""The ray runner's settings: checked before anything starts, one-line errors."""

from __future__ import annotations

import pytest

from rlperf.config.schema import RunConfig, RunnerConfig
from rlperf.core.errors import ConfigError
from rlperf.runners.ray_cluster import check_capacity, check_ray_address
from rlperf.training.resolve import check


@pytest.mark.parametrize(
    "address",
    [
        None,
        "auto",
        "10.0.0.5:6379",
        "head-0.ray.svc.cluster.local:6379",
        "ray://head:10001",
        "[::1]:6379",
    ],
)
def test_valid_addresses(address) -> None:
    check_ray_address(address)


@pytest.mark.parametrize(
    "address",
    ["head", "head:", ":6379", "head:99999", "ray:/head:1", "http://head:6379", "local", "a b:1"],
)
def test_invalid_addresses_name_the_valid_forms(address) -> None:
    with pytest.raises(ConfigError, match="is not a Ray address; use auto, HOST:PORT"):
        check_ray_address(address)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"name": "inproc", "ray_address": "auto"}, "set but the runner is inproc"),
        ({"ray_num_cpus_per_actor": 0.0}, "must be positive"),
        ({"ray_num_gpus_per_actor": -1.0}, "must be 0 or more"),
        ({"ray_num_gpus_per_actor": 1.0}, "set runner.actor_device=cuda"),
    ],
)
def test_bad_ray_settings(changes, message) -> None:
    cfg = RunnerConfig(name="ray")
    for key, value in changes.items():
        setattr(cfg, key, value)
    with pytest.raises(ConfigError, match=message):
        check(RunConfig(algo="impala", runner=cfg))


def test_other_runners_ignore_the_defaults() -> None:
    check(RunConfig(algo="impala", runner=RunnerConfig(name="decoupled")))
    check(RunConfig(algo="impala", runner=RunnerConfig(name="ray", ray_num_cpus_per_actor=0.25)))


class FakeRay:
    """Only cluster_resources(), as Ray reports them."""

    def __init__(self, resources: dict[str, float]) -> None:
        self.resources = resources

    def cluster_resources(self) -> dict[str, float]:
        return self.resources


def test_capacity_shortfall_is_named_before_actors_would_hang() -> None:
    check_capacity(FakeRay({"CPU": 2.0}), 4, 0.5, 0.0)
    with pytest.raises(
        ConfigError, match=r"4 ray actors x 1 CPU need 4 CPU but the Ray cluster has 2"
    ):
        check_capacity(FakeRay({"CPU": 2.0}), 4, 1.0, 0.0)
    with pytest.raises(ConfigError, match=r"need 2 GPU but the Ray cluster has 0"):
        check_capacity(FakeRay({"CPU": 8.0}), 2, 1.0, 1.0)
