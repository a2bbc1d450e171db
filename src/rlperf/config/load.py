"""Building a RunConfig from presets, dictionaries and dotted overrides, with checked types.

Every problem raises :class:`ConfigError` with one line naming the key or value and what is
valid; the CLI turns it into exit code 2.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import functools
import inspect
import textwrap
import types
import typing
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from rlperf.config.rnd_keys import translate_rnd_keys
from rlperf.config.schema import ALGORITHM_SECTIONS, RunConfig
from rlperf.core.errors import ConfigError

PRESET_PACKAGE = "rlperf.config.presets"


# ---------------------------------------------------------------- field docs (for --help)


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """The docstring written under each field of dataclass ``cls``."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, nxt in zip(body, body[1:], strict=False):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def iter_fields(cls: type = RunConfig, prefix: str = "") -> list[tuple[str, Any, str]]:
    """(dotted key, type, doc) of every leaf field, for help text and validation."""
    out: list[tuple[str, Any, str]] = []
    docs = field_docs(cls)
    for f in dataclasses.fields(cls):
        hint = _hints(cls)[f.name]
        if dataclasses.is_dataclass(hint):
            out += iter_fields(hint, f"{prefix}{f.name}.")
        else:
            out.append((f"{prefix}{f.name}", hint, docs.get(f.name, "")))
    return out


def type_name(hint: Any) -> str:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        inner = [type_name(a) for a in args if a is not type(None)]
        return " | ".join(inner) + (" | null" if type(None) in args else "")
    if typing.get_origin(hint) is list:
        return f"list[{type_name(args[0])}]"
    if typing.get_origin(hint) is typing.Literal:
        return "|".join(str(a) for a in args)
    return getattr(hint, "__name__", str(hint))


# ---------------------------------------------------------------- values


def parse_cpu_list(text: str) -> list[int]:
    """CPU ids from a list such as ``0,1`` or ``0-3`` or ``0-1,4`` (the thesis's -a option)."""
    cpus: list[int] = []
    for part in str(text).replace(" ", "").strip("[]{}").split(","):
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ConfigError(f"invalid CPU list {text!r}; expected ids such as 0,1 or 0-3")
        start, end = int(lo), int(hi) if sep else int(lo)
        if end < start:
            raise ConfigError(f"invalid CPU range {part!r} in {text!r}; the range must go up (0-3)")
        cpus += range(start, end + 1)
    if not cpus:
        raise ConfigError(f"empty CPU list {text!r}; expected ids such as 0,1 or 0-3")
    return sorted(set(cpus))


def coerce(key: str, value: Any, hint: Any) -> Any:
    """``value`` converted to the field type ``hint``, or a ConfigError naming ``key``."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        if value is None or (isinstance(value, str) and value.lower() in ("null", "none", "")):
            if type(None) in args:
                return None
            raise ConfigError(f"{key} cannot be null; expected {type_name(hint)}")
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return coerce(key, value, arg)
            except ConfigError as exc:
                errors.append(exc)
        raise errors[0]
    if typing.get_origin(hint) is typing.Literal:
        if isinstance(value, str) and value in args:
            return value
        choices = [str(a) for a in args]
        close = difflib.get_close_matches(str(value), choices, n=1)
        hint_text = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(f"{key} must be one of {', '.join(choices)}, got {value!r}{hint_text}")
    if typing.get_origin(hint) is list:
        if key in ("runner.cpu_affinity", "runner.actor_cpu_affinity") and isinstance(
            value, str | int
        ):
            return parse_cpu_list(str(value))
        if isinstance(value, str):
            value = [v for v in value.strip("[]").split(",") if v.strip()]
        elif isinstance(value, int | float) and not isinstance(value, bool):
            value = [value]  # KEY=3 is the one-element list [3]
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{key} must be a list of {type_name(args[0])}, got {value!r}")
        return [coerce(key, v, args[0]) for v in value]
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in (
            "true",
            "false",
            "yes",
            "no",
            "1",
            "0",
            "on",
            "off",
        ):
            return value.lower() in ("true", "yes", "1", "on")
        raise ConfigError(f"{key} must be true or false, got {value!r}")
    if hint is int:
        if isinstance(value, bool):
            raise ConfigError(f"{key} must be an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                number = float(value.replace("_", ""))
            except ValueError:
                pass
            else:
                if number.is_integer():
                    return int(number)
        raise ConfigError(f"{key} must be an integer, got {value!r}")
    if hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigError(f"{key} must be a number, got {value!r}")
    if hint is str:
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            return str(value)
        raise ConfigError(f"{key} must be a string, got {value!r}")
    raise TypeError(f"unsupported config type {hint} for {key}")


# ---------------------------------------------------------------- applying sources


@functools.cache
def _known_keys() -> types.MappingProxyType[str, Any]:
    """Every dotted key and its type; built once (a config sets many keys, each checked)."""
    return types.MappingProxyType({key: hint for key, hint, _ in iter_fields()})


KEY_ALIASES = {
    "ppo.kl_target": "ppo.kl_penalty_target",
    "a3c.tau": "a3c.gae_lambda",
    "a3c.eps": "a3c.optimizer_eps",
    "impala.eps": "impala.optimizer_eps",
}
"""Earlier (and other projects') spellings of keys renamed so that no two knobs are confusable
(``kl_target`` beside ``target_kl``, ``tau`` for what everyone else calls ``gae_lambda``):
accepted everywhere a key is read, so old presets and run directories still load."""


def get_key(cfg: RunConfig, key: str) -> Any:
    """The value of dotted ``key`` in ``cfg`` (old spellings in ``KEY_ALIASES`` accepted)."""
    node: Any = cfg
    for part in KEY_ALIASES.get(key, key).split("."):
        node = getattr(node, part)
    return node


def changed_keys(before: RunConfig, after: RunConfig) -> dict[str, list[Any]]:
    """Each dotted key whose value differs from ``before`` to ``after``: [old, new]."""
    changes: dict[str, list[Any]] = {}
    for key, _, _ in iter_fields():
        old, new = get_key(before, key), get_key(after, key)
        if old != new:
            changes[key] = [old, new]
    return changes


def set_key(cfg: RunConfig, key: str, value: Any) -> None:
    """Set dotted ``key`` (e.g. ``ppo.learning_rate``) on ``cfg``; dashes count as underscores,
    and the old spellings in ``KEY_ALIASES`` mean their new keys."""
    key = key.replace("-", "_")
    key = KEY_ALIASES.get(key, key)
    known = _known_keys()
    if key not in known:
        close = difflib.get_close_matches(key, known, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(
            f"unknown config key {key!r}{hint}; see `rlperf train --help` for valid keys"
        )
    *parents, leaf = key.split(".")
    target: Any = cfg
    for p in parents:
        target = getattr(target, p)
    setattr(target, leaf, coerce(key, value, known[key]))


def apply_dict(cfg: RunConfig, data: dict[str, Any], source: str) -> None:
    """Apply a nested mapping (a preset or a saved config.yaml) onto ``cfg``."""

    def walk(node: Any, prefix: str) -> None:
        if not isinstance(node, dict):
            raise ConfigError(
                f"{source}: expected a mapping at {prefix or 'top level'}, got {node!r}"
            )
        for k, v in node.items():
            key = f"{prefix}{k}"
            if isinstance(v, dict):
                walk(v, key + ".")
            else:
                try:
                    set_key(cfg, key, v)
                except ConfigError as exc:
                    raise ConfigError(f"{source}: {exc}") from None

    walk(data, "")


def parse_override(text: str) -> tuple[str, Any]:
    """``key=value`` → (key, value) with the value read as YAML (numbers, lists, null)."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise ConfigError(
            f"invalid override {text!r}; expected KEY=VALUE such as ppo.learning_rate=1e-4"
        )
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError:
        value = raw
    return key.lstrip("-"), value


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"file {path} not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path} as UTF-8 text: {exc}") from None


def available_presets() -> list[str]:
    files = resources.files(PRESET_PACKAGE).iterdir()
    return sorted(p.name[:-5] for p in files if p.name.endswith(".yaml"))


def shipped_preset_name(name: str) -> str:
    """The file stem of a shipped preset: a group of presets is written with a slash
    (``dqn-ladder/01-baseline``) and shipped as flat files (``dqn-ladder-01-baseline.yaml``),
    so the package data stays one directory."""
    return name.replace("/", "-")


def load_preset(name: str, _depth: int = 0) -> dict[str, Any]:
    """A preset by name (shipped) or path to a YAML file; ``extends: NAME`` builds on another."""
    path = Path(name)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        text = _read_text(path)
    else:
        name = shipped_preset_name(name)
        if name not in available_presets():
            raise ConfigError(
                f"unknown preset {name!r}; valid: {', '.join(available_presets())} or a path to a .yaml file"
            )
        text = resources.files(PRESET_PACKAGE).joinpath(f"{name}.yaml").read_text()
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(
            f"preset {name!r} is not valid YAML: {str(exc).splitlines()[0]}"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"preset {name!r} must be a mapping of config keys")
    # Source 004's CamelCase keys (NumWorkers, RolloutSteps, ...) become rlperf keys.
    data = translate_rnd_keys(data, f"preset {name!r}")
    base = data.pop("extends", None)
    if base is not None:
        if _depth >= 8:
            raise ConfigError(f"preset {name!r}: 'extends' chain is too deep (a cycle?)")
        data = _deep_merge(load_preset(str(base), _depth + 1), data)
    return data


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for k, v in over.items():
        merged[k] = (
            _deep_merge(merged[k], v)
            if isinstance(v, dict) and isinstance(merged.get(k), dict)
            else v
        )
    return merged


def to_dict(cfg: RunConfig) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def load_config_file(path: Path) -> RunConfig:
    """A RunConfig from a saved config.yaml (e.g. a run directory's), each key parsed to its
    type; :func:`rlperf.config.validate.load_valid_config` also judges the values."""
    try:
        data = yaml.safe_load(_read_text(path))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    cfg = RunConfig()
    apply_dict(cfg, data or {}, str(path))
    return cfg


def dump_config(cfg: RunConfig) -> str:
    """Every key of ``cfg`` as YAML (a preset that rebuilds it exactly)."""
    return yaml.safe_dump(to_dict(cfg), sort_keys=False)


def dump_run_config(cfg: RunConfig) -> str:
    """A run directory's ``config.yaml``: every section except the other algorithms' (they
    did not take part; a resume fills them with defaults, as it does for any missing key)."""
    data = {k: v for k, v in to_dict(cfg).items() if k not in ALGORITHM_SECTIONS or k == cfg.algo}
    return yaml.safe_dump(data, sort_keys=False)
