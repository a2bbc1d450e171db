"""The sweep file: a base config plus a grid and/or an explicit list of points.

A sweep file is YAML (read with ``yaml.safe_load``)::

    name: workers                  # names the output directory (default: the file's stem)
    description: SPS against env worker processes
    command: train                 # train (rlperf train) or infer (timed inference)
    presets: [cleanrl-atari]       # rlperf train presets applied first, in order
    base:                          # config keys for every point (nested or dotted)
      env.id: ALE/Pong-v5
      stop: {iterations: 6, total_timesteps: null}
    grid:                          # every combination of these values ...
      runner.num_workers: [1, 2, 4, 8]
      policy:                      # an axis whose values set several keys (each named)
        - {name: fresh, model.name: thesis-1}
        - {name: trained, infer.run: "shipped:pong"}
    points:                        # ... times each of these points (default: one empty point)
      - {name: gymnasium, env.engine: gymnasium}
      - {name: envpool, env.engine: envpool}
    timeout_s: 1800                # per attempt; a point may set its own
    retries: 1                     # further attempts after a failure
    baseline: gymnasium            # the point speed-ups are measured against (default: first)

Besides config keys a point (or ``base``) may set ``preset`` (rlperf train presets of its own,
applied after the spec's presets and before ``base``), ``envs_per_worker`` (env.num_envs
becomes num_workers x this, applied last, like ``--envs-per-worker``), ``gpus`` (the thesis's
GPU visibility: none, gpu0, gpu1 or both; sets CUDA_VISIBLE_DEVICES of the point),
``timeout_s`` and ``note``. Inference sweeps (``command: infer``) take ``infer.*`` keys
(:class:`~rlperf.sweep.infer_point.InferSettings`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from rlperf.core.errors import ConfigError

PRESET_PACKAGE = "rlperf.sweep.presets"
COMMANDS = ("train", "infer")
TOP_KEYS = (
    "name",
    "description",
    "command",
    "presets",
    "base",
    "grid",
    "points",
    "timeout_s",
    "retries",
    "baseline",
)
POINT_META_KEYS = ("name", "gpus", "timeout_s", "note", "preset")
"""Keys of a point that are about how it runs, not config keys."""
PSEUDO_KEYS = ("envs_per_worker", "workers")
"""Keys that are applied to the config by the sweep rather than set directly: ``workers`` is
``rlperf train -w`` (RLlib's rollout workers and their batch rounding), ``envs_per_worker``
its ``--envs-per-worker``."""
DEFAULT_TIMEOUT_S = 1800.0


@dataclass
class SweepSpec:
    """A parsed, checked sweep file (values of config keys are checked later, per point)."""

    name: str
    source: str
    """The file path or preset name it came from."""
    description: str = ""
    command: str = "train"
    presets: list[str] = field(default_factory=list)
    base: dict[str, Any] = field(default_factory=dict)
    """Dotted keys -> values applied to every point."""
    grid: dict[str, list[Any]] = field(default_factory=dict)
    """Dotted key -> the values it takes; every combination is a point (with each entry of
    ``points``)."""
    points: list[dict[str, Any]] = field(default_factory=list)
    """Each entry: dotted keys -> values, plus the :data:`POINT_META_KEYS`."""
    timeout_s: float = DEFAULT_TIMEOUT_S
    retries: int = 1
    baseline: str | None = None
    """The point the report measures speed-ups against (default: the first point)."""

    def to_dict(self) -> dict[str, Any]:
        """The spec as plain data (what ``sweep.yaml`` in the output directory records)."""
        return {
            "name": self.name,
            "source": self.source,
            "description": self.description,
            "command": self.command,
            "presets": list(self.presets),
            "base": dict(self.base),
            "grid": {k: list(v) for k, v in self.grid.items()},
            "points": [dict(p) for p in self.points],
            "timeout_s": self.timeout_s,
            "retries": self.retries,
            "baseline": self.baseline,
        }


def flatten(data: Any, where: str, prefix: str = "") -> dict[str, Any]:
    """Nested mappings -> dotted keys (``{stop: {iterations: 3}}`` -> ``stop.iterations``)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must be a mapping of config keys, got {data!r}")
    out: dict[str, Any] = {}
    for key, value in data.items():
        if not isinstance(key, str) or not key:
            raise ConfigError(f"{where}: keys must be non-empty strings, got {key!r}")
        dotted = f"{prefix}{key}".replace("-", "_")
        if isinstance(value, dict):
            out.update(flatten(value, where, dotted + "."))
        else:
            out[dotted] = value
    return out


def available_sweeps() -> list[str]:
    """Names of the shipped sweep presets."""
    files = resources.files(PRESET_PACKAGE).iterdir()
    return sorted(p.name[:-5] for p in files if p.name.endswith(".yaml"))


def _read(source: str) -> tuple[str, str]:
    """(YAML text, default name) of a sweep file path or a shipped preset name."""
    path = Path(source)
    if path.suffix in (".yaml", ".yml"):
        if not path.is_file():
            raise ConfigError(
                f"sweep file {path} not found; give a .yaml file or a shipped sweep: "
                f"{', '.join(available_sweeps())}"
            )
        try:
            return path.read_text(encoding="utf-8"), path.stem
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read {path} as UTF-8 text: {exc}") from None
    if source not in available_sweeps():
        raise ConfigError(
            f"unknown sweep {source!r}; valid: {', '.join(available_sweeps())} or a path to a .yaml file"
        )
    return resources.files(PRESET_PACKAGE).joinpath(f"{source}.yaml").read_text(), source


def load_spec(source: str) -> SweepSpec:
    """Parse and check a sweep file (path) or shipped sweep (name)."""
    text, default_name = _read(source)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"sweep {source} is not valid YAML: {str(exc).splitlines()[0]}") from None
    return parse_spec(data, source, default_name)


def parse_spec(data: Any, source: str, default_name: str = "sweep") -> SweepSpec:
    """A :class:`SweepSpec` from already-loaded YAML data; ConfigError names the problem."""
    if not isinstance(data, dict):
        raise ConfigError(f"sweep {source} must be a mapping with {', '.join(TOP_KEYS)}")
    unknown = [k for k in data if k not in TOP_KEYS]
    if unknown:
        raise ConfigError(
            f"sweep {source}: unknown key {unknown[0]!r}; valid: {', '.join(TOP_KEYS)}"
        )
    name = str(data.get("name") or default_name)
    if not _safe_name(name):
        raise ConfigError(
            f"sweep {source}: name {name!r} may hold only letters, digits and - _ . = + ,"
        )
    command = data.get("command", "train")
    if command not in COMMANDS:
        raise ConfigError(
            f"sweep {source}: command must be one of {', '.join(COMMANDS)}, got {command!r}"
        )
    presets = data.get("presets") or []
    if isinstance(presets, str):
        presets = [presets]
    if not isinstance(presets, list) or not all(isinstance(p, str) for p in presets):
        raise ConfigError(f"sweep {source}: presets must be a list of preset names or files")
    base = flatten(data.get("base") or {}, f"sweep {source}: base")
    grid_raw = flatten(data.get("grid") or {}, f"sweep {source}: grid")
    grid: dict[str, list[Any]] = {}
    for key, values in grid_raw.items():
        if not isinstance(values, list) or not values:
            raise ConfigError(
                f"sweep {source}: grid key {key} must have a non-empty list of values, got {values!r}"
            )
        grid[key] = [_grid_value(v, key, source) for v in values]
    points_raw = data.get("points")
    if points_raw is None:
        points_raw = []
    if not isinstance(points_raw, list):
        raise ConfigError(f"sweep {source}: points must be a list of mappings")
    points = []
    for i, entry in enumerate(points_raw):
        point = flatten(entry, f"sweep {source}: point {i + 1}")
        if "name" in point and not _safe_name(str(point["name"])):
            raise ConfigError(
                f"sweep {source}: point name {point['name']!r} may hold only letters, digits and - _ . = + ,"
            )
        points.append(point)
    if not grid and not points:
        raise ConfigError(f"sweep {source}: give a grid, a list of points, or both")
    return SweepSpec(
        name=name,
        source=source,
        description=str(data.get("description") or "").strip(),
        command=command,
        presets=list(presets),
        base=base,
        grid=grid,
        points=points,
        timeout_s=_positive_number(data.get("timeout_s", DEFAULT_TIMEOUT_S), "timeout_s", source),
        retries=_retries(data.get("retries", 1), source),
        baseline=_baseline(data.get("baseline"), points, grid, source),
    )


def _grid_value(value: Any, key: str, source: str) -> Any:
    """A grid value as written, or a named bundle of keys (flattened) for a bundle axis."""
    if not isinstance(value, dict):
        return value
    bundle = flatten(value, f"sweep {source}: grid key {key}")
    if not _safe_name(str(bundle.get("name", ""))):
        raise ConfigError(
            f"sweep {source}: each mapping under grid key {key} needs a name of letters, digits "
            f"and - _ . = + , (it labels the points), got {value!r}"
        )
    return bundle


def _baseline(
    value: Any, points: list[dict[str, Any]], grid: dict[str, list[Any]], source: str
) -> str | None:
    if value is None:
        return None
    names = [str(p["name"]) for p in points if "name" in p]
    # With a grid the point names combine grid values with these names, so only a
    # grid-less sweep can be checked here; the report checks the rest.
    if not grid and str(value) not in names:
        raise ConfigError(
            f"sweep {source}: baseline {value!r} is not a point name; valid: {', '.join(names) or 'none'}"
        )
    return str(value)


def _positive_number(value: Any, key: str, source: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"sweep {source}: {key} must be a positive number, got {value!r}")
    return float(value)


def _retries(value: Any, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"sweep {source}: retries must be 0 or a positive integer, got {value!r}")
    return value


def _safe_name(name: str) -> bool:
    """Names become directory names: no path separators, nothing a shell would trip on."""
    allowed = set("-_.=+,")
    return bool(name) and name not in (".", "..") and all(c.isalnum() or c in allowed for c in name)
