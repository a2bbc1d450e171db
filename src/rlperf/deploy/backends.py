"""Inference backends: one small class per runtime behind one interface.

A backend is built for a run (:class:`~rlperf.deploy.policy.RunPolicy`) and called with a
batch of raw observations; it returns float32 logits ``(B, num_actions)``, and
:meth:`Backend.outputs` returns the logits and the value ``(B,)`` that the same call
computed (every backend runs the whole exported graph, as the thesis's did). Everything a
runtime needs per call (copying the input in, quantizing it, dequantizing the outputs) is
inside the call, because that is what a deployed agent pays per decision and what
:mod:`~rlperf.deploy.infer` times.

Backends whose package is missing are reported by :func:`backend_status` with the reason,
never by an ImportError at start-up: each runtime is imported when its backend is built.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from rlperf.core.errors import UserInputError
from rlperf.deploy.export import FILES, export_dir
from rlperf.deploy.policy import RunPolicy

OUTPUTS = ("logits", "value")
"""The named outputs every exported graph has (rlperf export writes both)."""


class Backend(ABC):
    """Runs a run's policy: ``backend(obs (B, ...)) -> logits (B, A) float32``."""

    name: ClassVar[str]
    precision: ClassVar[str] = "fp32"
    """fp32 or int8: which fidelity threshold applies."""
    modules: ClassVar[tuple[str, ...]] = ()
    """Python modules the backend needs (checked without importing them)."""
    file_key: ClassVar[str | None] = None
    """Key in export.FILES of the exported file it loads (None: the checkpoint itself)."""
    make_with: ClassVar[str] = ""
    """The command that writes that file."""

    def __init__(self, policy: RunPolicy, threads: int = 1, batch_size: int = 1) -> None:
        self.policy = policy
        self.threads = threads
        self.batch_size = batch_size
        self.detail = ""
        """What actually runs (execution provider, delegate), for reports."""

    @classmethod
    def missing(cls) -> str | None:
        """Why this backend cannot run here (a missing package), or None."""
        absent = [m for m in cls.modules if importlib.util.find_spec(m) is None]
        if absent:
            return f"needs {', '.join(absent)} (pip install 'rlperf[export]')"
        return None

    def model_path(self) -> Path:
        """The exported file this backend loads; a one-line error when it is not there."""
        assert self.file_key is not None
        path = export_dir(self.policy.run_dir) / FILES[self.file_key]
        if not path.is_file():
            raise UserInputError(
                f"backend {self.name} needs {path}; write it with `{self.make_with} {self.policy.run_dir}`"
            )
        return path

    @abstractmethod
    def outputs(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(logits (B, A), value (B,)) float32 of the observation batch ``obs`` (raw, as the
        env gives it)."""

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Logits (B, A) float32 of ``obs``: one run of the whole graph."""
        return self.outputs(obs)[0]


def _missing_outputs(path: Path, names: Iterable[str]) -> UserInputError:
    return UserInputError(
        f"{path} has outputs {sorted(names)}; expected {', '.join(OUTPUTS)} "
        "(an export from before the value output: re-export it with --force)"
    )


class TorchBackend(Backend):
    """The trained network in PyTorch (eager), on CUDA when ``device='cuda'``."""

    name = "torch"
    modules = ("torch",)

    def __init__(
        self, policy: RunPolicy, threads: int = 1, batch_size: int = 1, device: str = "cpu"
    ) -> None:
        import torch

        from rlperf.deploy.policy import PolicyGraph

        super().__init__(policy, threads, batch_size)
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise UserInputError(f"--device {device} but torch sees no CUDA device; use cpu")
        torch.set_num_threads(threads)
        self._torch = torch
        self.device = torch.device(device)
        self.model = policy.model.to(self.device).eval()
        # The graph the exporters convert, so torch runs what the other backends run.
        self.graph = PolicyGraph(self.model, with_value=True).eval()
        self.detail = f"torch {torch.__version__} on {self.device}"

    def outputs(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        torch = self._torch
        with torch.inference_mode():
            x = torch.from_numpy(obs).to(self.device, non_blocking=True)
            logits, value = self.graph(x)
            # .cpu() waits for a GPU to finish
            return logits.float().cpu().numpy(), value.float().cpu().numpy()


class OnnxBackend(Backend):
    """ONNX Runtime: TensorRT and CUDA execution providers when present, else the CPU one."""

    name = "onnx"
    modules = ("onnxruntime",)
    file_key = "onnx"
    make_with = "rlperf export --format onnx"

    def __init__(self, policy: RunPolicy, threads: int = 1, batch_size: int = 1) -> None:
        import onnxruntime as ort

        super().__init__(policy, threads, batch_size)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # warnings about unused initializers are noise here
        wanted = ["TensorrtExecutionProvider", "CUDAExecutionProvider"]
        providers = [p for p in wanted if p in ort.get_available_providers()]
        self.session = ort.InferenceSession(
            str(self.model_path()), options, providers=[*providers, "CPUExecutionProvider"]
        )
        names = [o.name for o in self.session.get_outputs()]
        if not set(OUTPUTS) <= set(names):
            raise _missing_outputs(self.model_path(), names)
        self.detail = f"onnxruntime {ort.__version__} {','.join(self.session.get_providers())}"

    def outputs(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        logits, value = self.session.run(list(OUTPUTS), {"obs": obs})
        return logits, value


class OnnxInt8Backend(OnnxBackend):
    name = "onnx-int8"
    precision = "int8"
    file_key = "onnx-int8"
    make_with = "rlperf quantize --dataset OBS.npy"


class TFLiteBackend(Backend):
    """LiteRT's interpreter (ai-edge-litert) with its default XNNPACK CPU delegate.

    The TFLite graph has the batch size it was exported with. Quantized inputs and outputs
    are converted with the tensors' own scale and zero point (for frames the input scale is
    1 and the zero point 0, so frames go in unchanged).
    """

    name = "tflite"
    modules = ("ai_edge_litert",)
    file_key = "tflite"
    make_with = "rlperf export --format tflite"

    def __init__(self, policy: RunPolicy, threads: int = 1, batch_size: int = 1) -> None:
        super().__init__(policy, threads, batch_size)
        self.interpreter = self._interpreter(self.model_path(), threads)
        self.interpreter.allocate_tensors()
        runner = self.interpreter.get_signature_runner()
        inputs, outputs = runner.get_input_details(), runner.get_output_details()
        if "obs" not in inputs:
            raise UserInputError(
                f"{self.model_path()} has inputs {sorted(inputs)}; expected obs "
                "(re-export it with rlperf export)"
            )
        if not set(OUTPUTS) <= set(outputs):
            raise _missing_outputs(self.model_path(), outputs)
        self._in = inputs["obs"]
        self._outs = [(outputs[name], _quant(outputs[name])) for name in OUTPUTS]
        exported_batch = int(self._in["shape"][0])
        if exported_batch != batch_size:
            raise UserInputError(
                f"{self.model_path().name} was exported for batch {exported_batch}; "
                f"re-export with `rlperf export {policy.run_dir} --format tflite --batch-size {batch_size}`"
            )
        self._in_q = _quant(self._in)
        self._in_raw = self._in_q is None or (
            self._in_q == (1.0, 0) and self._in["dtype"] == policy.obs_dtype
        )
        self.detail = "ai-edge-litert " + _version("ai-edge-litert") + " XNNPACK"

    def _interpreter(self, path: Path, threads: int):  # noqa: ANN202 - an Interpreter
        from ai_edge_litert.interpreter import Interpreter

        return Interpreter(model_path=str(path), num_threads=threads)

    def outputs(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        it = self.interpreter
        x = obs if self._in_raw else _quantize(obs, self._in_q, self._in["dtype"])
        it.set_tensor(self._in["index"], x)
        it.invoke()
        logits, value = (_dequantize(it.get_tensor(d["index"]), q) for d, q in self._outs)
        return logits, value


def _dequantize(y: np.ndarray, q: tuple[float, int] | None) -> np.ndarray:
    if q is None:
        return y
    scale, zero = q
    return (y.astype(np.float32) - zero) * scale


def _quant(details: dict) -> tuple[float, int] | None:
    """(scale, zero point) of a quantized tensor, None for a float one."""
    scale, zero = details.get("quantization", (0.0, 0))
    return None if scale == 0.0 else (float(scale), int(zero))


def _quantize(x: np.ndarray, q: tuple[float, int] | None, dtype: np.dtype) -> np.ndarray:
    if q is None:
        return x.astype(dtype, copy=False)
    info = np.iinfo(dtype)
    return np.clip(np.round(x / q[0]) + q[1], info.min, info.max).astype(dtype)


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


class TFLiteInt8Backend(TFLiteBackend):
    name = "tflite-int8"
    precision = "int8"
    file_key = "tflite-int8"
    make_with = "rlperf quantize --dataset OBS.npy"


EDGETPU_LIBRARY = "libedgetpu.so.1"
EDGETPU_COMPILER = "edgetpu_compiler"
COMPILE_TIMEOUT_S = 600


class EdgeTPUBackend(TFLiteBackend):
    """The full-integer TFLite model compiled for a Coral Edge TPU, run through the
    libedgetpu delegate.

    ``policy_int8.tflite`` is compiled with Google's ``edgetpu_compiler`` into
    ``policy_int8_edgetpu.tflite`` each time the backend is built (so it always matches the
    int8 model). Nothing falls back to the CPU under this name: without the compiler, the
    delegate or a device the backend is unavailable, and a model of which the compiler maps
    no operation to the Edge TPU is refused.
    """

    name = "edgetpu"
    precision = "int8"
    file_key = "tflite-int8"
    make_with = "rlperf quantize --dataset OBS.npy"

    def __init__(self, policy: RunPolicy, threads: int = 1, batch_size: int = 1) -> None:
        self._compiled: EdgeTPUCompiled | None = None
        super().__init__(policy, threads, batch_size)
        assert self._compiled is not None  # model_path() compiled it
        self.detail = (
            f"ai-edge-litert {_version('ai-edge-litert')} {EDGETPU_LIBRARY} delegate; "
            f"{self._compiled.summary}"
        )

    @classmethod
    def missing(cls) -> str | None:
        reason = super().missing()
        if reason is not None:
            return reason
        if shutil.which(EDGETPU_COMPILER) is None:
            return (
                f"{EDGETPU_COMPILER} is not on PATH (install Google's Edge TPU compiler; "
                "it compiles policy_int8.tflite for the Edge TPU)"
            )
        try:
            _load_edgetpu_delegate()
        except UserInputError as exc:
            return str(exc)
        return None

    def model_path(self) -> Path:
        if self._compiled is None:
            self._compiled = compile_for_edgetpu(super().model_path())
        return self._compiled.path

    def _interpreter(self, path: Path, threads: int):  # noqa: ANN202
        from ai_edge_litert.interpreter import Interpreter

        delegate = _load_edgetpu_delegate()
        return Interpreter(
            model_path=str(path), num_threads=threads, experimental_delegates=[delegate]
        )


@dataclass(frozen=True)
class EdgeTPUCompiled:
    """What ``edgetpu_compiler`` wrote and how many operations it mapped to the Edge TPU."""

    path: Path
    on_tpu: int | None
    on_cpu: int | None

    @property
    def summary(self) -> str:
        if self.on_tpu is None:
            return f"{self.path.name} (the compiler did not say how many ops it mapped)"
        return f"{self.path.name}: {self.on_tpu} ops on the Edge TPU, {self.on_cpu} on the CPU"


def compile_for_edgetpu(model: Path) -> EdgeTPUCompiled:
    """Compile the full-integer ``model`` with ``edgetpu_compiler`` into
    ``<stem>_edgetpu.tflite`` beside it; a one-line UserInputError when the compiler is
    missing, fails, or maps no operation to the Edge TPU."""
    compiler = shutil.which(EDGETPU_COMPILER)
    if compiler is None:
        raise UserInputError(f"backend edgetpu needs {EDGETPU_COMPILER} on PATH")
    compiled = model.with_name(f"{model.stem}_edgetpu.tflite")
    compiled.unlink(missing_ok=True)  # a stale file must not pass for this model's
    cmd = [compiler, "--out_dir", str(model.parent), "--show_operations", str(model)]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserInputError(f"{EDGETPU_COMPILER} could not run: {exc}") from None
    output = proc.stdout + proc.stderr
    if proc.returncode != 0 or not compiled.is_file():
        last = next((ln for ln in reversed(output.splitlines()) if ln.strip()), "no output")
        raise UserInputError(
            f"{EDGETPU_COMPILER} failed on {model.name} (exit {proc.returncode}): {last.strip()}"
        )
    result = EdgeTPUCompiled(
        compiled,
        _op_count(output, "will run on Edge TPU"),
        _op_count(output, "will run on CPU"),
    )
    if result.on_tpu == 0:
        compiled.unlink()  # so that nothing loads it later as an Edge TPU model
        raise UserInputError(
            f"{EDGETPU_COMPILER} mapped no operation of {model.name} to the Edge TPU "
            "(it would all run on the CPU); refusing to call that edgetpu"
        )
    return result


def _op_count(output: str, phrase: str) -> int | None:
    """N of the compiler's line "Number of operations that <phrase>: N", None if absent."""
    match = re.search(rf"operations that {re.escape(phrase)}:\s*(\d+)", output)
    return int(match.group(1)) if match else None


def _load_edgetpu_delegate():  # noqa: ANN202 - a Delegate
    import ctypes

    from ai_edge_litert.interpreter import load_delegate

    try:
        # Probe the library first: load_delegate on a missing library leaves a half-built
        # Delegate whose destructor prints a traceback.
        ctypes.CDLL(EDGETPU_LIBRARY)
        return load_delegate(EDGETPU_LIBRARY)
    except (OSError, ValueError, RuntimeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserInputError(
            f"no Edge TPU found: the {EDGETPU_LIBRARY} delegate could not be loaded ({first}); "
            "install libedgetpu and plug in a Coral device"
        ) from None


BACKENDS: dict[str, type[Backend]] = {
    b.name: b
    for b in (
        TorchBackend,
        OnnxBackend,
        OnnxInt8Backend,
        TFLiteBackend,
        TFLiteInt8Backend,
        EdgeTPUBackend,
    )
}


def backend_status(policy: RunPolicy | None = None) -> list[tuple[str, str | None]]:
    """(name, None when usable else why not) for every backend; with a run, a missing
    exported file counts as a reason too."""
    rows = []
    for name, cls in BACKENDS.items():
        reason = cls.missing()
        if reason is None and policy is not None and cls.file_key is not None:
            path = export_dir(policy.run_dir) / FILES[cls.file_key]
            if not path.is_file():
                reason = f"no {path.name} yet: `{cls.make_with} {policy.run_dir}`"
        rows.append((name, reason))
    return rows


def make_backend(
    name: str, policy: RunPolicy, threads: int = 1, batch_size: int = 1, device: str = "cpu"
) -> Backend:
    """Build backend ``name``; a one-line UserInputError for an unknown or unavailable one."""
    if name not in BACKENDS:
        raise UserInputError(f"unknown backend {name!r}; valid: {', '.join(BACKENDS)}")
    cls = BACKENDS[name]
    reason = cls.missing()
    if reason is not None:
        raise UserInputError(f"backend {name} is not available here: {reason}")
    if threads < 1:
        raise UserInputError(f"--threads must be a positive integer, got {threads}")
    if cls is TorchBackend:
        return TorchBackend(policy, threads, batch_size, device=device)
    return cls(policy, threads, batch_size)
