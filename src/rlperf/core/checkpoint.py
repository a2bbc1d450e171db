"""Atomic checkpoints without pickle.

A checkpoint is a directory ``ckpt_<updates>_<env_steps>/`` holding

- ``state.safetensors``: every tensor and array of the nested state, under its dotted path;
- ``state.json``: the rest of the tree (numbers, strings, lists), with a placeholder where a
  tensor was, plus the SHA-256 and size of the safetensors file so truncation or corruption
  is detected before anything is loaded.

Writes go to a temporary directory that is fsynced and then renamed into place; only then
is the ``latest`` pointer replaced (also by rename). A crash at any moment leaves either the
old or the new checkpoint complete, never a torn one that ``latest`` points to.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from rlperf.core.errors import CheckpointError
from rlperf.core.faults import crash_point

FORMAT_VERSION = 1
TENSORS_FILE = "state.safetensors"
TREE_FILE = "state.json"
LATEST = "latest"
_TENSOR = "__tensor__"
_NDARRAY = "__ndarray__"


def _flatten(obj: Any, path: str, tensors: dict[str, torch.Tensor]) -> Any:
    """The JSON tree of ``obj`` with tensors and arrays moved into ``tensors``."""
    if isinstance(obj, torch.Tensor):
        tensors[path] = obj.detach().to("cpu").contiguous().clone()
        return {_TENSOR: path}
    if isinstance(obj, np.ndarray):
        tensors[path] = torch.from_numpy(np.ascontiguousarray(obj).copy())
        return {_NDARRAY: path}
    if isinstance(obj, dict):
        return {
            str(k): _flatten(v, f"{path}.{k}" if path else str(k), tensors) for k, v in obj.items()
        }
    if isinstance(obj, list | tuple):
        return [_flatten(v, f"{path}.{i}", tensors) for i, v in enumerate(obj)]
    if isinstance(obj, np.generic):
        return obj.item()
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    raise TypeError(f"cannot checkpoint {type(obj).__name__} at {path!r}")


def _unflatten(tree: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(tree, dict):
        if set(tree) == {_TENSOR}:
            return tensors[tree[_TENSOR]]
        if set(tree) == {_NDARRAY}:
            return tensors[tree[_NDARRAY]].numpy()
        return {k: _unflatten(v, tensors) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_unflatten(v, tensors) for v in tree]
    return tree


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_file(path: Path, data: bytes) -> None:
    with path.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def atomic_write_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so readers see the old or the new content, never half."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    _write_file(tmp, text.encode())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def checkpoint_name(updates: int, env_steps: int) -> str:
    return f"ckpt_{updates:08d}_{env_steps:012d}"


def save_checkpoint(root: Path, name: str, state: dict[str, Any], keep: int) -> Path:
    """Write ``state`` atomically as ``root/name``, point ``latest`` at it, keep the newest ``keep``."""
    root.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, torch.Tensor] = {}
    tree = _flatten(state, "", tensors)
    tmp = root / f".tmp-{name}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    save_file(tensors, str(tmp / TENSORS_FILE))
    with (tmp / TENSORS_FILE).open("rb+") as f:
        os.fsync(f.fileno())
    crash_point("checkpoint.tensors")
    meta = {
        "format_version": FORMAT_VERSION,
        "tensors_sha256": _sha256(tmp / TENSORS_FILE),
        "tensors_bytes": (tmp / TENSORS_FILE).stat().st_size,
        "state": tree,
    }
    _write_file(tmp / TREE_FILE, json.dumps(meta).encode())
    _fsync_dir(tmp)
    final = root / name
    old = root / f".old-{name}-{os.getpid()}"
    if final.exists():  # re-saving the same step: move the old copy aside first, so a
        os.replace(final, old)  # crash in between leaves a complete checkpoint under a name
    os.replace(tmp, final)
    _fsync_dir(root)
    if old.exists():
        shutil.rmtree(old)
    crash_point("checkpoint.renamed")
    atomic_write_text(root / LATEST, name + "\n")
    _prune(root, keep)
    return final


def list_checkpoints(root: Path) -> list[Path]:
    """Complete-looking checkpoint directories under ``root``, oldest first."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("ckpt_"))


def _prune(root: Path, keep: int) -> None:
    for old in list_checkpoints(root)[: -max(keep, 1)]:
        shutil.rmtree(old, ignore_errors=True)
    for tmp in [*root.glob(".tmp-*"), *root.glob(".old-*")]:  # leftovers of killed writes
        if tmp.is_dir() and not tmp.name.endswith(f"-{os.getpid()}"):
            shutil.rmtree(tmp, ignore_errors=True)


def set_aside_newer(ckpt: Path, aside: Path) -> list[Path]:
    """Move checkpoints newer than ``ckpt`` (same directory) into the new directory ``aside``.

    Resuming from an older checkpoint starts a new line of history; the abandoned later
    checkpoints are kept (never deleted) but moved out of the way so pruning and the
    ``latest`` pointer only see the new line.
    """
    newer = [p for p in list_checkpoints(ckpt.parent) if p.name > ckpt.name]
    if newer:
        aside.mkdir(parents=True, exist_ok=False)
        for p in newer:
            os.replace(p, aside / p.name)
        atomic_write_text(ckpt.parent / LATEST, ckpt.name + "\n")
    return newer


def resolve_checkpoint(path: Path) -> Path:
    """The checkpoint directory meant by ``path``: a checkpoint, a checkpoints dir or a run dir."""
    if (path / TREE_FILE).exists() or (path / TENSORS_FILE).exists():
        return path
    root = path / "checkpoints" if (path / "checkpoints").is_dir() else path
    latest = root / LATEST
    if latest.is_file():
        name = latest.read_text().strip()
        if name:
            return root / name
    found = list_checkpoints(root)
    if not found:
        raise CheckpointError(
            f"no checkpoint found in {path} (expected a run directory or a ckpt_* directory)"
        )
    return found[-1]


def checkpoint_counters(path: Path) -> dict[str, Any]:
    """The counters (iteration, env steps...) of the checkpoint ``path`` names (anything
    :func:`resolve_checkpoint` accepts), read from its JSON tree alone: no tensor is loaded,
    so a resume can plan its budget before the run is built."""
    ckpt = resolve_checkpoint(path)
    try:
        return dict(json.loads((ckpt / TREE_FILE).read_text())["state"]["counters"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(
            f"checkpoint {ckpt} has no readable counters ({type(exc).__name__}: {exc})"
            + _previous_hint(ckpt)
        ) from None


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Load and verify a checkpoint (anything :func:`resolve_checkpoint` accepts)."""
    ckpt = resolve_checkpoint(path)
    tree_file, tensors_file = ckpt / TREE_FILE, ckpt / TENSORS_FILE
    if not tree_file.is_file() or not tensors_file.is_file():
        raise CheckpointError(
            f"checkpoint {ckpt} is incomplete: it needs {TREE_FILE} and {TENSORS_FILE}"
            + _previous_hint(ckpt)
        )
    try:
        meta = json.loads(tree_file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(
            f"checkpoint {ckpt} is corrupted: {TREE_FILE} is not valid JSON ({exc})"
            + _previous_hint(ckpt)
        ) from None
    if not isinstance(meta, dict) or meta.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(
            f"checkpoint {ckpt} has an unsupported format (expected format_version {FORMAT_VERSION})"
        )
    size = tensors_file.stat().st_size
    if size != meta.get("tensors_bytes") or _sha256(tensors_file) != meta.get("tensors_sha256"):
        raise CheckpointError(
            f"checkpoint {ckpt} is corrupted: {TENSORS_FILE} does not match its recorded size/checksum"
            + _previous_hint(ckpt)
        )
    try:
        tensors = load_file(str(tensors_file))
    except Exception as exc:  # noqa: BLE001 - safetensors raises its own error types
        raise CheckpointError(
            f"checkpoint {ckpt} is corrupted: {TENSORS_FILE} is not a safetensors file "
            f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
            + _previous_hint(ckpt)
        ) from None
    try:
        state = _unflatten(meta["state"], tensors)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CheckpointError(
            f"checkpoint {ckpt} is corrupted: {TREE_FILE} does not match its tensors ({exc!r})"
            + _previous_hint(ckpt)
        ) from None
    state["_checkpoint_path"] = str(ckpt)
    return state


def _previous_hint(ckpt: Path) -> str:
    previous = [p for p in list_checkpoints(ckpt.parent) if p.name < ckpt.name]
    if previous:
        return f"; the previous checkpoint {previous[-1]} can be used with --checkpoint"
    return ""


def load_policy(
    module: torch.nn.Module, run_dir: Path, checkpoint: Path | None, network: str
) -> dict[str, Any]:
    """Load the policy weights (``algorithm.policy``) of ``checkpoint`` (default: the latest
    of ``run_dir``) into ``module`` and return the whole checkpoint state. ``network`` names
    the module in the one-line error raised when the weights do not fit it."""
    source = Path(checkpoint) if checkpoint is not None else run_dir
    if checkpoint is not None and not source.exists():
        raise CheckpointError(f"checkpoint {source} does not exist; see {run_dir / 'checkpoints'}")
    state = load_checkpoint(source)
    weights = (state.get("algorithm") or {}).get("policy")
    if not isinstance(weights, dict):
        raise CheckpointError(
            f"checkpoint {state['_checkpoint_path']} holds no policy weights (algorithm.policy)"
        )
    try:
        module.load_state_dict(weights)
    except RuntimeError as exc:
        raise CheckpointError(
            f"checkpoint {state['_checkpoint_path']} does not match {network}: "
            f"{str(exc).splitlines()[0]}"
        ) from None
    return state
