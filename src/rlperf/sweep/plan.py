"""Expanding a sweep spec into named points, each with its resolved, checked config.

Order: every combination of the grid (first key slowest) times every entry of ``points``.
A point's config is built like ``rlperf train`` builds one: defaults < the spec's presets <
the point's own ``preset`` < ``base`` < the grid's values < the point's own keys < the command line's overrides, then
``envs_per_worker`` last. Every point is checked before anything runs, so a typo in the
twentieth point stops the sweep at once with one line naming it.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
from dataclasses import dataclass, field
from typing import Any

from rlperf.config.load import apply_dict, coerce, dump_config, load_preset, set_key
from rlperf.config.schema import RunConfig
from rlperf.config.thesis_options import GPU_VISIBILITY, apply_workers
from rlperf.core.errors import ConfigError, UserInputError
from rlperf.sweep.machine import (
    Machine,
    cpu_skip_reason,
    device_gpus,
    gpu_skip_reason,
    oversubscription_flag,
    visible_gpus,
)
from rlperf.sweep.spec import POINT_META_KEYS, PSEUDO_KEYS, SweepSpec


@dataclass
class PlannedPoint:
    """One point of a sweep, ready to run (or to be skipped)."""

    name: str
    command: str
    """train or infer."""
    cfg: RunConfig
    """The resolved config (for infer points: the env, model and seed of the policy)."""
    infer: dict[str, Any] | None
    """Inference settings (infer points only; see infer_point.InferSettings)."""
    settings: dict[str, Any]
    """The keys this point sets beyond the base (grid values and its own), for labels."""
    gpus: str | None
    """The thesis's GPU visibility (none/gpu0/gpu1/both) or None: leave CUDA_VISIBLE_DEVICES."""
    timeout_s: float
    retries: int
    note: str = ""
    skip: str | None = None
    """Why this point cannot run on this machine (it is recorded as skipped), or None."""
    flags: list[str] = field(default_factory=list)
    """Warnings about how meaningful its numbers are (e.g. oversubscribed cores)."""

    @property
    def env(self) -> dict[str, str]:
        """Environment variables the point's process gets on top of the sweep's."""
        env: dict[str, str] = {}
        if self.gpus is not None:
            env["CUDA_VISIBLE_DEVICES"] = GPU_VISIBILITY[self.gpus]
        threads = self.cfg.runner.torch_threads
        if self.command == "infer" and self.infer is not None:
            threads = int(self.infer["threads"])
        if threads is not None:
            # Libraries that read these (OpenMP, MKL, onnxruntime's defaults) then agree with
            # torch instead of starting one thread per core each.
            env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
        return env

    @property
    def affinity(self) -> list[int] | None:
        """CPUs the point's process is pinned to from its first instruction."""
        return self.cfg.runner.cpu_affinity

    def config_text(self) -> str:
        """What is written to ``configs/<name>.yaml``: the file the point's process reads."""
        if self.command == "train":
            return dump_config(self.cfg)
        return json.dumps({"config": _plain(self.cfg), "infer": self.infer}, indent=2) + "\n"

    def fingerprint(self) -> str:
        """A hash of everything that decides the point's result: a completed point whose
        fingerprint changed belongs to another sweep and is never overwritten."""
        data = {
            "command": self.command,
            "config": self.config_text(),
            "gpus": self.gpus,
        }
        blob = json.dumps(data, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def _plain(cfg: RunConfig) -> dict[str, Any]:
    import dataclasses

    return dataclasses.asdict(cfg)


def _label_part(key: str, value: Any) -> str:
    if isinstance(value, dict):  # a bundle of keys, labelled by its name
        return f"{key}={value['name']}"
    parts = key.split(".")
    leaf = parts[-1]
    if leaf in ("name", "id") and len(parts) > 1:  # model.name=... reads better as model=...
        leaf = parts[-2]
    if isinstance(value, list):
        value = "-".join(str(v) for v in value)
    text = str(value).replace("/", "-").replace(" ", "")
    return f"{leaf}={text}"


def point_names(spec: SweepSpec) -> list[tuple[str, dict[str, Any]]]:
    """(name, keys) of every point in order: grid combinations x point entries."""
    combos: list[dict[str, Any]] = [{}]
    if spec.grid:
        keys = list(spec.grid)
        combos = [
            dict(zip(keys, values, strict=True))
            for values in itertools.product(*spec.grid.values())
        ]
    entries = spec.points or [{}]
    out: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    for combo in combos:
        for i, entry in enumerate(entries):
            parts = [_label_part(k, v) for k, v in combo.items()]
            own = entry.get("name")
            if own is None and (len(entries) > 1 or not parts):
                own = f"point{i + 1}"
            if own is not None:
                parts.append(str(own))
            name = "__".join(parts)
            if name in seen:
                raise ConfigError(
                    f"sweep {spec.source}: two points are named {name!r}; give the points distinct names"
                )
            seen.add(name)
            keys: dict[str, Any] = {}
            for axis, value in combo.items():
                if isinstance(value, dict):
                    keys.update({k: v for k, v in value.items() if k != "name"})
                else:
                    keys[axis] = value
            out.append((name, {**keys, **entry}))
    return out


def _base_config(spec: SweepSpec) -> RunConfig:
    cfg = RunConfig()
    for preset in spec.presets:
        apply_dict(cfg, load_preset(preset), f"sweep {spec.source}: preset {preset}")
    return cfg


def plan_points(
    spec: SweepSpec,
    overrides: list[tuple[str, Any]],
    machine: Machine,
) -> list[PlannedPoint]:
    """Every point of ``spec`` with its config, skip reason and flags; ConfigError (one
    line naming the point) for any invalid key or value."""
    from rlperf.sweep.infer_point import infer_defaults

    base_cfg = _base_config(spec)
    points = []
    for name, keys in point_names(spec):
        merged = {**spec.base, **keys}
        for key, value in overrides:
            merged[key.replace("-", "_")] = value
        where = f"sweep {spec.source}: point {name}"
        cfg = copy.deepcopy(base_cfg)
        _apply_point_presets(cfg, merged.get("preset"), where)
        infer = infer_defaults() if spec.command == "infer" else None
        meta: dict[str, Any] = {}
        pseudo: dict[str, Any] = {}
        for key, value in merged.items():
            if key in POINT_META_KEYS:
                meta[key] = value
            elif key in PSEUDO_KEYS:
                pseudo[key] = value
            elif key.startswith("infer."):
                if infer is None:
                    raise ConfigError(f"{where}: {key} needs command: infer")
                _set_infer(infer, key, value, where)
            else:
                try:
                    set_key(cfg, key, value)
                except ConfigError as exc:
                    raise ConfigError(f"{where}: {exc}") from None
        epw = None
        if "envs_per_worker" in pseudo:
            epw = coerce("envs_per_worker", pseudo["envs_per_worker"], int)
            if epw < 1:
                raise ConfigError(f"{where}: envs_per_worker must be positive, got {epw}")
        if "workers" in pseudo:  # rlperf train -w: one definition for both
            try:
                apply_workers(
                    cfg,
                    coerce("workers", pseudo["workers"], int),
                    given=_dotted_keys(merged),
                    envs_per_worker=epw,
                )
            except ConfigError as exc:
                raise ConfigError(f"{where}: {exc}") from None
        elif epw is not None:
            cfg.env.num_envs = cfg.runner.num_workers * epw
        gpus = meta.get("gpus")
        if gpus is not None and gpus not in GPU_VISIBILITY:
            raise ConfigError(
                f"{where}: gpus must be one of {', '.join(GPU_VISIBILITY)}, got {gpus!r}"
            )
        timeout = meta.get("timeout_s", spec.timeout_s)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ConfigError(f"{where}: timeout_s must be a positive number, got {timeout!r}")
        settings = {k: v for k, v in keys.items() if k not in ("name", "note")}
        point = PlannedPoint(
            name=name,
            command=spec.command,
            cfg=cfg,
            infer=infer,
            settings=settings,
            gpus=gpus,
            timeout_s=float(timeout),
            retries=spec.retries,
            note=str(meta.get("note") or ""),
        )
        _check(point, machine, where)
        points.append(point)
    return points


def _dotted_keys(keys: dict[str, Any]) -> set[str]:
    """The config keys a point sets, nested sections spelled out (``runner: {name: x}`` is
    ``runner.name``)."""
    out = set()
    for key, value in keys.items():
        if isinstance(value, dict):
            out |= {f"{key}.{sub}" for sub in _dotted_keys(value)}
        else:
            out.add(key.replace("-", "_"))
    return out


def _apply_point_presets(cfg: RunConfig, presets: Any, where: str) -> None:
    """A point's own ``preset`` (a name or a list), applied on top of the spec's presets."""
    if presets is None:
        return
    names = [presets] if isinstance(presets, str) else presets
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigError(
            f"{where}: preset must be a preset name or a list of them, got {presets!r}"
        )
    for name in names:
        try:
            data = load_preset(name)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        apply_dict(cfg, data, f"{where}: preset {name}")


def _set_infer(infer: dict[str, Any], key: str, value: Any, where: str) -> None:
    from rlperf.sweep.infer_point import INFER_FIELDS

    leaf = key[len("infer.") :]
    if leaf not in INFER_FIELDS:
        raise ConfigError(
            f"{where}: unknown key {key!r}; infer keys: {', '.join('infer.' + k for k in INFER_FIELDS)}"
        )
    try:
        infer[leaf] = coerce(key, value, INFER_FIELDS[leaf])
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if leaf == "run" and value:
        from rlperf.deploy.policy import SHIPPED_PREFIX, resolve_policy_source

        try:  # a shipped policy is checkable now; a run directory may be written meanwhile
            if str(value).startswith(SHIPPED_PREFIX):
                resolve_policy_source(str(value))
        except UserInputError as exc:
            raise ConfigError(f"{where}: {exc}") from None


def _needed_gpus(point: PlannedPoint, where: str) -> int:
    """Physical GPUs the point needs; ConfigError when its devices exceed its visibility."""
    if point.command == "infer":
        assert point.infer is not None
        devices = [str(point.infer["device"])]
    else:
        runner = point.cfg.runner
        devices = [runner.learner_device, runner.actor_device]
    by_device = max(device_gpus(d) for d in devices)
    if point.command == "train" and by_device and point.cfg.runner.num_learners > 1:
        by_device = max(by_device, point.cfg.runner.num_learners)  # one GPU per learner
    visible = visible_gpus(point.gpus)
    if visible is None:
        return by_device
    seen = len(GPU_VISIBILITY[point.gpus].split(",")) if visible else 0  # type: ignore[index]
    if by_device > seen:
        raise ConfigError(
            f"{where}: gpus {point.gpus} makes {seen} GPU(s) visible but its devices need {by_device}"
        )
    return visible if by_device else 0  # a CPU-only point hides the GPUs; it needs none


def _check(point: PlannedPoint, machine: Machine, where: str) -> None:
    """Set ``skip`` and ``flags``, and validate everything that does not depend on the
    hardware (a skipped point is still checked, with its devices on the CPU)."""
    from rlperf.training import resolve

    point.skip = gpu_skip_reason(_needed_gpus(point, where), machine)
    if point.command == "train":
        point.skip = point.skip or cpu_skip_reason(point.cfg.runner.cpu_affinity, machine)
        flag = oversubscription_flag(point.cfg.runner.num_workers, point.cfg.runner.name, machine)
        if flag:
            point.flags.append(flag)
    else:
        assert point.infer is not None
        point.skip = point.skip or _backend_skip_reason(point.infer, where)
    # Devices and CPUs were judged against the machine above (skip reasons); everything else
    # is checked as if that hardware were here, so a skipped point's typo still stops the sweep.
    try:
        resolve.check(point.cfg, on_this_machine=False)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _backend_skip_reason(infer: dict[str, Any], where: str) -> str | None:
    from rlperf.deploy.backends import BACKENDS, EdgeTPUBackend

    name = infer["backend"]
    if name not in BACKENDS:
        raise ConfigError(f"{where}: unknown backend {name!r}; valid: {', '.join(BACKENDS)}")
    if infer["device"] != "cpu" and name != "torch":
        raise ConfigError(f"{where}: infer.device applies to the torch backend only")
    if name == "edgetpu":
        reason = EdgeTPUBackend.missing()
        return f"needs an Edge TPU: {reason}" if reason else None
    reason = BACKENDS[name].missing()
    return f"needs {reason.removeprefix('needs ')}" if reason else None
