"""Joining or starting Ray for the ray runner, and leaving it again.

``runner.ray_address`` picks the cluster:

- unset: a private local Ray instance for this run (``address="local"``: never a cluster some
  other program started), shut down when the run ends;
- ``auto``: the cluster started on this machine with ``ray start`` (or ``RAY_ADDRESS``);
- ``HOST:PORT``: the head node's GCS address printed by ``ray start --head``;
- ``ray://HOST:PORT``: a Ray Client server (the head's port 10001), for a driver outside the
  cluster's network.

The dashboard is off unless ``runner.ray_dashboard`` asks for it, and then it listens on
127.0.0.1 only (reach it through an SSH tunnel or ``kubectl port-forward``). Ray itself is
imported only when a run uses the ray runner: it is an optional dependency (``pip install
rlperf[ray]``).
"""

from __future__ import annotations

import logging
import math
import os
import re
import socket
from dataclasses import dataclass
from typing import Any

from rlperf.config.schema import RunConfig, RunnerConfig
from rlperf.core.errors import ConfigError

CONNECT_TIMEOUT_S = 10.0
"""How long the head of a cluster to join may take to accept a connection."""
ADDRESS_FORMS = "auto, HOST:PORT (the head's GCS address) or ray://HOST:PORT (Ray Client)"
_HOST = r"(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])"
_ADDRESS = re.compile(rf"^(?P<client>ray://)?(?P<host>{_HOST}):(?P<port>\d{{1,5}})$")


def check_ray_address(address: str | None) -> None:
    """Raise ConfigError when ``address`` is neither unset nor one of ADDRESS_FORMS.

    Only the syntax is checked here: nothing is contacted before the run starts.
    """
    if address is None or address == "auto":
        return
    match = _ADDRESS.match(address)
    if match is None or not 1 <= int(match["port"]) <= 65535:
        raise ConfigError(
            f"runner.ray_address {address!r} is not a Ray address; use {ADDRESS_FORMS}, "
            "or leave it unset for a local Ray"
        )


def check_ray_config(cfg: RunConfig) -> None:
    """The Ray runners' own check: a valid address, and GPUs reserved only for GPU actors."""
    runner = cfg.runner
    check_ray_address(runner.ray_address)
    if runner.ray_num_gpus_per_actor > 0 and not runner.actor_device.startswith("cuda"):
        raise ConfigError(
            "runner.ray_num_gpus_per_actor > 0 reserves GPUs for the actors but "
            f"runner.actor_device is {runner.actor_device}; set runner.actor_device=cuda"
        )


def import_ray() -> Any:
    """The ray module, or a one-line error saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(
            'runner ray needs Ray: pip install "rlperf[ray]" (Ray core, ray[default]==2.60.0)'
        ) from None
    return ray


@dataclass
class RayConnection:
    """This process's connection to Ray; ``owned`` when this run started (and so must stop) it."""

    address: str
    owned: bool
    connected_here: bool
    """False when Ray was already initialised in this process (tests, notebooks): then the
    connection is left as it was found."""

    def shutdown(self) -> None:
        """Disconnect; a Ray instance this run started is stopped with all its processes."""
        if not self.connected_here:
            return
        ray = import_ray()
        if ray.is_initialized():
            ray.shutdown()


def connect(cfg: RunnerConfig, min_local_cpus: float = 0.0) -> RayConnection:
    """Join the cluster at ``cfg.ray_address``, or start a private local Ray declaring
    ``runner.ray_num_cpus`` CPUs (default: the machine's count, at least ``min_local_cpus``)."""
    ray = import_ray()
    if ray.is_initialized():
        return RayConnection(_current_address(ray), owned=False, connected_here=False)
    quiet = {"logging_level": logging.WARNING, "log_to_driver": True}
    try:
        if cfg.ray_address is None:
            ray.init(
                address="local",
                num_cpus=cfg.ray_num_cpus or max(os.cpu_count() or 1, math.ceil(min_local_cpus)),
                include_dashboard=cfg.ray_dashboard,
                dashboard_host="127.0.0.1",
                **quiet,
            )
            owned = True
        else:
            # ray.init keeps retrying an address where nothing listens, for minutes.
            _check_reachable(cfg.ray_address)
            ray.init(address=cfg.ray_address, **quiet)
            owned = False
    except (OSError, TimeoutError, ValueError, RuntimeError) as exc:
        # Leave nothing half started behind (a local instance whose start failed).
        if ray.is_initialized():
            ray.shutdown()
        where = cfg.ray_address or "a local Ray instance"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(
            f"could not {'join the Ray cluster at ' if cfg.ray_address else 'start '}{where}: "
            f"{first[:300]} (runner.ray_address takes {ADDRESS_FORMS})"
        ) from None
    return RayConnection(_current_address(ray), owned=owned, connected_here=True)


def _check_reachable(address: str) -> None:
    """Raise ConnectionError unless something accepts a TCP connection at ``address``'s
    head (the GCS, or the Ray Client server for ray://)."""
    if address.startswith("ray://"):
        target = address.removeprefix("ray://")
    else:
        try:
            from ray._private.services import canonicalize_bootstrap_address_or_die
        except ImportError:  # another Ray version: let ray.init find out
            return
        # What ray.init will contact: "auto" resolved, a loopback host replaced by this
        # machine's address (Ray binds there).
        target = canonicalize_bootstrap_address_or_die(address)
    host, _, port = target.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        raise ConnectionError(f"nothing answers at {target} ({exc.strerror or exc})") from None


def _current_address(ray: Any) -> str:
    try:
        return str(ray.get_runtime_context().gcs_address)
    except Exception:  # noqa: BLE001 - only for reporting
        return "unknown"


def check_capacity(ray: Any, num_actors: int, cpus: float, gpus: float) -> None:
    """Fail at once, naming the shortfall, when the cluster can never place the actors
    (Ray would otherwise leave them pending forever)."""
    total = ray.cluster_resources()
    need = {"CPU": num_actors * cpus, "GPU": num_actors * gpus}
    for resource, amount in need.items():
        have = float(total.get(resource, 0.0))
        if amount > have + 1e-9:
            per = cpus if resource == "CPU" else gpus
            raise ConfigError(
                f"{num_actors} ray actors x {per:g} {resource} need {amount:g} {resource} but the "
                f"Ray cluster has {have:g}; lower runner.num_workers or "
                f"runner.ray_num_{resource.lower()}s_per_actor (fractions such as 0.5 are fine), "
                "or add nodes"
            )


def node_of_this_process(ray: Any) -> dict[str, str]:
    """Node id and IP of the calling process (an actor reports where it runs)."""
    context = ray.get_runtime_context()
    return {"node_id": context.get_node_id(), "node_ip": ray.util.get_node_ip_address()}
