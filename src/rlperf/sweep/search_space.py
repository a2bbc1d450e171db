"""What ``rlperf tune --objective time-to-target`` searches: config keys and the values to try.

A space maps dotted config keys to a range or a list::

    ppo.learning_rate: {low: 1.0e-4, high: 1.0e-3, log: true}   # a float, log-uniform
    ppo.update_epochs: {low: 1, high: 4}                         # an integer (both ends ints)
    ppo.num_minibatches: [4, 8, 16]                              # one of these values

The default space of each algorithm is built around the base config (its learning rate,
envs and rollout length), so it fits any game without naming one; for Atari games it adds
the network, the frame size, the engine and the learner's precision, which decide how much
compute each learned env step costs. Every value is checked against the config schema
before the first trial runs, so a typo fails at once with one line.
"""

from __future__ import annotations

import copy
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rlperf.config.load import get_key, set_key
from rlperf.config.schema import ALGORITHM_SECTIONS, RunConfig
from rlperf.config.section import declared_ranges
from rlperf.core.errors import ConfigError

Scalar = bool | int | float | str | None
ATARI_MODELS = ("nature", "nips")
"""Networks whose input size follows ``env.dim`` (64 or 84), the Atari part of the space."""


@dataclass(frozen=True)
class Param:
    """One searched key: a numeric range (``low``/``high``, ``log``) or a list of choices."""

    key: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple[Scalar, ...] | None = None

    @property
    def is_int(self) -> bool:
        return isinstance(self.low, int) and isinstance(self.high, int)

    def suggest(self, trial: Any) -> Any:
        """The value of this key for an Optuna ``trial``."""
        if self.choices is not None:
            return trial.suggest_categorical(self.key, list(self.choices))
        if self.is_int:
            return trial.suggest_int(self.key, int(self.low), int(self.high), log=self.log)  # type: ignore[arg-type]
        return trial.suggest_float(self.key, float(self.low), float(self.high), log=self.log)  # type: ignore[arg-type]

    def contains(self, value: Any) -> bool:
        """Whether ``value`` is one this parameter can take."""
        if self.choices is not None:
            return value in self.choices
        if not isinstance(value, int | float) or isinstance(value, bool):
            return False
        if self.is_int and not float(value).is_integer():
            return False
        return float(self.low) <= value <= float(self.high)  # type: ignore[arg-type]

    def to_yaml(self) -> Any:
        if self.choices is not None:
            return list(self.choices)
        out: dict[str, Any] = {"low": self.low, "high": self.high}
        if self.log:
            out["log"] = True
        return out


@dataclass(frozen=True)
class SearchSpace:
    """The searched keys, in the order they are suggested."""

    params: tuple[Param, ...]
    source: str
    """Where it came from: ``default for ppo`` or the file's path."""

    def suggest(self, trial: Any) -> dict[str, Any]:
        return {p.key: p.suggest(trial) for p in self.params}

    def values_of(self, cfg: RunConfig) -> dict[str, Any]:
        """``cfg``'s value of every searched key that lies in the space (to enqueue the base
        config as a trial: the search then starts from, and is measured against, it)."""
        out = {}
        for p in self.params:
            value = get_key(cfg, p.key)
            if p.contains(value):
                out[p.key] = value
        return out

    def to_yaml(self) -> str:
        return yaml.safe_dump({p.key: p.to_yaml() for p in self.params}, sort_keys=False)


def _choices(*values: Any) -> tuple[Any, ...]:
    """Distinct values in order, Nones dropped."""
    return tuple(dict.fromkeys(v for v in values if v is not None))


def _scaled(value: int, factors: tuple[float, ...] = (0.5, 1, 2)) -> tuple[int, ...]:
    return _choices(*(max(1, int(value * f)) for f in factors))


def _tunable(section: object) -> bool:
    """An algorithm's section has a default space when it has a learning rate and a rollout
    length or a replay ratio to scale (read from its fields, so a new algorithm needs no
    line here)."""
    return hasattr(section, "learning_rate") and (
        hasattr(section, "num_steps") or hasattr(section, "train_frequency")
    )


def default_space(cfg: RunConfig, atari: bool, cores: int) -> SearchSpace:
    """The default space of ``cfg.algo`` around ``cfg`` (see the module docstring); ``cores``
    is what one trial may use (torch threads are searched up to it)."""
    algo = cfg.algo
    section = getattr(cfg, algo, None)
    if not _tunable(section):
        valid = ", ".join(a for a in ALGORITHM_SECTIONS if _tunable(getattr(cfg, a)))
        raise ConfigError(
            f"no default search space for algo {algo!r}; valid: {valid} (or give --space FILE)"
        )
    lr = float(section.learning_rate)
    params: list[Param] = [Param(f"{algo}.learning_rate", lr / 4, lr * 4, log=True)]
    params.append(Param("env.num_envs", choices=_scaled(cfg.env.num_envs)))
    if hasattr(section, "train_frequency"):  # replay: samples learned per env step
        params.append(Param(f"{algo}.batch_size", choices=_scaled(section.batch_size)))
        params.append(
            Param(f"{algo}.train_frequency", choices=_choices(1, 2, 4, section.train_frequency))
        )
    else:
        params.append(Param(f"{algo}.num_steps", choices=_scaled(section.num_steps)))
    if hasattr(section, "update_epochs"):
        # Compute per learned env step: gradient passes over each sample, and their size.
        epochs = int(section.update_epochs)
        params.append(Param(f"{algo}.update_epochs", 1, max(4, epochs)))
        if section.num_minibatches is not None:
            params.append(
                Param(
                    f"{algo}.num_minibatches",
                    choices=_choices(*sorted({4, 8, 16, 32, section.num_minibatches})),
                )
            )
    if atari and cfg.model.name in ("auto", *ATARI_MODELS):
        params.append(Param("model.name", choices=ATARI_MODELS))
        params.append(Param("env.dim", choices=(64, 84)))
        if cfg.runner.name == "inproc":
            engines = ["gymnasium", "ale-vector"]
            if importlib.util.find_spec("envpool") is not None:
                engines.append("envpool")
            params.append(Param("env.engine", choices=_choices(cfg.env.engine, *engines)))
        params.append(Param("runner.precision", choices=("fp32", "bf16")))
    if cores > 1:
        params.append(Param("runner.torch_threads", choices=_choices(1, cores // 2, cores)))
    space = SearchSpace(tuple(params), f"default for {algo}")
    check_space(space, cfg)
    return space


def _param(key: str, spec: Any, where: str) -> Param:
    if isinstance(spec, list):
        if not spec:
            raise ConfigError(f"{where}: {key} lists no values; give at least one")
        for value in spec:
            if not isinstance(value, bool | int | float | str) and value is not None:
                raise ConfigError(
                    f"{where}: {key}: {value!r} is not a plain value (number, string, bool or null)"
                )
        return Param(key, choices=tuple(spec))
    if isinstance(spec, dict):
        unknown = set(spec) - {"low", "high", "log"}
        if unknown or not {"low", "high"} <= set(spec):
            raise ConfigError(
                f"{where}: {key} must be a list of values or {{low: A, high: B[, log: true]}}, "
                f"got keys {sorted(spec)}"
            )
        low, high, log = spec["low"], spec["high"], spec.get("log", False)
        numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (low, high))
        if not numbers or not low < high:
            raise ConfigError(f"{where}: {key} needs numbers low < high, got {low!r} and {high!r}")
        if not isinstance(log, bool) or (log and low <= 0):
            raise ConfigError(f"{where}: {key}: log must be true or false, and needs low > 0")
        return Param(key, low, high, log)
    raise ConfigError(
        f"{where}: {key} must be a list of values or {{low: A, high: B[, log: true]}}, got {spec!r}"
    )


def load_space(path: Path, cfg: RunConfig) -> SearchSpace:
    """A space from a YAML file, checked against ``cfg``'s schema; ConfigError (one line)."""
    where = f"search space {path}"
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read it ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"{where}: must map config keys to a list or a {{low, high}} range")
    space = SearchSpace(
        tuple(_param(str(k).replace("-", "_"), v, where) for k, v in data.items()), str(path)
    )
    check_space(space, cfg, where)
    return space


def check_space(space: SearchSpace, cfg: RunConfig, where: str | None = None) -> None:
    """Every key known and every value (each choice, both ends of a range) of its type and
    in the key's declared range."""
    where = where or f"search space ({space.source})"
    for p in space.params:
        probe = copy.deepcopy(cfg)
        values = p.choices if p.choices is not None else (p.low, p.high)
        declared = declared_ranges(RunConfig).get(p.key)
        for value in values:
            try:
                set_key(probe, p.key, value)
                if declared is not None and get_key(probe, p.key) is not None:
                    declared.check(p.key, get_key(probe, p.key))
            except ConfigError as exc:
                raise ConfigError(f"{where}: {exc}") from None
        if p.choices is None and isinstance(get_key(probe, p.key), int) and not p.is_int:
            raise ConfigError(f"{where}: {p.key} is an integer key; give integer low and high")
