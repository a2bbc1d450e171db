"""ONNX and TFLite files of a run's policy, under ``RUN_DIR/export/``.

* ONNX: ``torch.onnx.export`` (the dynamo exporter), opset 18, a dynamic batch axis, input
  ``obs``, outputs ``logits`` and ``value``, checked with ``onnx.checker``.
* TFLite: ``litert_torch.convert`` (LiteRT Torch, no TensorFlow needed) with the batch size
  fixed at export time (TFLite graphs and the Edge TPU want static shapes), signature
  ``serving_default`` with input ``obs`` and outputs ``logits`` and ``value``.

Both outputs are always exported, as the thesis's graphs had them (``output[0]``,
``output[1]``): fidelity compares the value head too, and every backend then times the same
graph.

Both graphs take the raw observation: uint8 frames for Atari, scaled by 1/255 inside. Files
are written to a temporary name and renamed, and an existing file is replaced only with
``force=True``. ``export.json`` beside them says which checkpoint they came from.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from rlperf.core.errors import UserInputError
from rlperf.deploy.policy import PolicyGraph, RunPolicy, load_run_policy

FORMATS = ("onnx", "tflite")
EXPORT_DIR = "export"
ONNX_OPSET = 18  # the lowest opset torch's dynamo exporter implements (the issue asks >= 17)
FILES = {
    "onnx": "policy.onnx",
    "tflite": "policy.tflite",
    "onnx-int8": "policy_int8.onnx",
    "tflite-int8": "policy_int8.tflite",
}
META_FILE = "export.json"


@dataclass(frozen=True)
class ExportResult:
    """One written file."""

    path: Path
    bytes: int
    outputs: tuple[str, ...]


def export_dir(run_dir: Path) -> Path:
    return Path(run_dir) / EXPORT_DIR


def check_writable(path: Path, force: bool) -> None:
    """Refuse to replace an existing output unless ``force``."""
    if path.exists() and not force:
        raise UserInputError(f"{path} already exists; pass --force to overwrite it")


def replace_file(tmp: Path, final: Path) -> None:
    """Move a finished temporary file into place (readers never see half a file)."""
    os.replace(tmp, final)


@contextlib.contextmanager
def quiet():
    """Silence the converters' progress chatter: Python prints and torch's exporter warnings
    (native libraries may still log a line or two)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # LiteRT's C++ info lines
    loggers = [logging.getLogger(name) for name in ("torch.onnx", "torch.utils._pytree", "torch")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def export_onnx(policy: RunPolicy, path: Path) -> ExportResult:
    """Write the ONNX graph of ``policy`` to ``path`` and validate it with ``onnx.checker``."""
    import onnx

    graph = PolicyGraph(policy.model, with_value=True).eval()
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    batch = torch.export.Dim("batch")
    with quiet():
        torch.onnx.export(
            graph,
            (policy.example(2),),  # batch 2, so the exporter cannot specialise the batch to 1
            str(tmp),
            input_names=["obs"],
            output_names=graph.output_names,
            opset_version=ONNX_OPSET,
            dynamo=True,
            external_data=False,  # one self-contained file
            dynamic_shapes=({0: batch},),
            verbose=False,
        )
    model = onnx.load(str(tmp))
    onnx.checker.check_model(model, full_check=True)
    replace_file(tmp, path)
    return ExportResult(path, path.stat().st_size, tuple(graph.output_names))


def convert_tflite(graph: PolicyGraph, example: torch.Tensor, path: Path) -> None:
    """Write the TFLite flatbuffer of ``graph`` traced with ``example`` (whose batch size is
    baked in) to ``path``."""
    # Keyword input and dict outputs: LiteRT names the signature's tensors after them.
    named = PolicyGraph(graph.model, graph.with_value, named=True).eval()
    with quiet():
        import litert_torch  # noqa: PLC0415 - inside quiet(): its import logs too

        litert_torch.convert(named, (), sample_kwargs={"obs": example}).export(str(path))


def export_tflite(policy: RunPolicy, path: Path, batch_size: int = 1) -> ExportResult:
    """Write the TFLite graph of ``policy`` (batch ``batch_size``) to ``path``."""
    graph = PolicyGraph(policy.model, with_value=True).eval()
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    convert_tflite(graph, policy.example(batch_size), tmp)
    replace_file(tmp, path)
    return ExportResult(path, path.stat().st_size, tuple(graph.output_names))


def write_meta(policy: RunPolicy, key: str, result: ExportResult, **extra: object) -> None:
    """Record in ``export.json`` where ``key``'s file came from (checkpoint, shapes, outputs)."""
    meta_path = export_dir(policy.run_dir) / META_FILE
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    meta[key] = {
        "file": result.path.name,
        "checkpoint": str(policy.checkpoint.relative_to(policy.run_dir)),
        "env": policy.cfg.env.id,
        "model": policy.cfg.model.name,
        "obs_shape": list(policy.obs_shape),
        "obs_dtype": str(policy.obs_dtype),
        "num_actions": policy.num_actions,
        "outputs": list(result.outputs),
        "bytes": result.bytes,
        **extra,
    }
    tmp = meta_path.with_name(f".{META_FILE}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(meta, indent=2) + "\n")
    replace_file(tmp, meta_path)


def export_run(
    run_dir: Path,
    fmt: str,
    *,
    checkpoint: Path | None = None,
    batch_size: int = 1,
    force: bool = False,
    policy: RunPolicy | None = None,
) -> ExportResult:
    """Export the run's policy as ``fmt`` (onnx or tflite) to ``RUN_DIR/export/``."""
    if fmt not in FORMATS:
        raise UserInputError(f"unknown export format {fmt!r}; valid: {', '.join(FORMATS)}")
    if batch_size < 1:
        raise UserInputError(f"--batch-size must be a positive integer, got {batch_size}")
    policy = policy or load_run_policy(Path(run_dir), checkpoint)
    out = export_dir(policy.run_dir)
    path = out / FILES[fmt]
    check_writable(path, force)
    out.mkdir(exist_ok=True)
    if fmt == "onnx":
        result = export_onnx(policy, path)
        write_meta(policy, fmt, result, opset=ONNX_OPSET, batch="dynamic")
    else:
        result = export_tflite(policy, path, batch_size)
        write_meta(policy, fmt, result, batch=batch_size, converter="litert-torch")
    return result
