"""Inference backends: one small class per runtime behind one interface.

A backend is built for a run (:class:`~rlperf.deploy.policy.RunPolicy`) and called with a
batch of raw observations; it returns float32 logits ``(B, num_actions)``. Everything a
runtime needs per call (copying the input in, quantizing it, dequantizing the output) is
inside ``__call__``, because that is what a deployed agent pays per decision and what
:mod:`~rlperf.deploy.infer` times.

Backends whose package is missing are reported by :func:`backend_status` with the reason,
never by an ImportError at start-up: each runtime is imported when its backend is built.
"""

from __future__ import annotations

import importlib.util
from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar

import numpy as np

from rlperf.core.errors import UserInputError
from rlperf.deploy.export import FILES, export_dir
from rlperf.deploy.policy import RunPolicy


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
    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Logits (B, A) float32 of the observation batch ``obs`` (raw, as the env gives it)."""


class TorchBackend(Backend):
    """The trained network in PyTorch (eager), on CUDA when ``device='cuda'``."""

    name = "torch"
    modules = ("torch",)

    def __init__(
        self, policy: RunPolicy, threads: int = 1, batch_size: int = 1, device: str = "cpu"
    ) -> None:
        import torch

        super().__init__(policy, threads, batch_size)
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise UserInputError(f"--device {device} but torch sees no CUDA device; use cpu")
        torch.set_num_threads(threads)
        self._torch = torch
        self.device = torch.device(device)
        self.model = policy.model.to(self.device).eval()
        self.detail = f"torch {torch.__version__} on {self.device}"

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        from rlperf.models.policy import network_input

        torch = self._torch
        with torch.inference_mode():
            x = torch.from_numpy(obs).to(self.device, non_blocking=True)
            m = self.model
            logits = m.logits_head(m.policy_torso(network_input(x)))  # acting needs no value
            return logits.float().cpu().numpy()  # .cpu() waits for a GPU to finish


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
        self.detail = f"onnxruntime {ort.__version__} {','.join(self.session.get_providers())}"

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return self.session.run(["logits"], {"obs": obs})[0]


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
        if "obs" not in inputs or "logits" not in outputs:
            raise UserInputError(
                f"{self.model_path()} has inputs {sorted(inputs)} and outputs {sorted(outputs)}; "
                "expected obs -> logits (re-export it with rlperf export)"
            )
        self._in, self._out = inputs["obs"], outputs["logits"]
        exported_batch = int(self._in["shape"][0])
        if exported_batch != batch_size:
            raise UserInputError(
                f"{self.model_path().name} was exported for batch {exported_batch}; "
                f"re-export with `rlperf export {policy.run_dir} --format tflite --batch-size {batch_size}`"
            )
        self._in_q = _quant(self._in)
        self._out_q = _quant(self._out)
        self._in_raw = self._in_q is None or (
            self._in_q == (1.0, 0) and self._in["dtype"] == policy.obs_dtype
        )
        self.detail = "ai-edge-litert " + _version("ai-edge-litert") + " XNNPACK"

    def _interpreter(self, path: Path, threads: int):  # noqa: ANN202 - an Interpreter
        from ai_edge_litert.interpreter import Interpreter

        return Interpreter(model_path=str(path), num_threads=threads)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        it = self.interpreter
        x = obs if self._in_raw else _quantize(obs, self._in_q, self._in["dtype"])
        it.set_tensor(self._in["index"], x)
        it.invoke()
        y = it.get_tensor(self._out["index"])
        if self._out_q is not None:
            scale, zero = self._out_q
            return (y.astype(np.float32) - zero) * scale
        return y


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


class EdgeTPUBackend(TFLiteBackend):
    """The full-integer TFLite model on a Coral Edge TPU through the libedgetpu delegate.

    Runs ``policy_int8_edgetpu.tflite`` (the output of Google's ``edgetpu_compiler``) when it
    exists, else ``policy_int8.tflite`` (whose ops then run on the CPU).
    """

    name = "edgetpu"
    precision = "int8"
    file_key = "tflite-int8"
    make_with = "rlperf quantize --dataset OBS.npy"

    @classmethod
    def missing(cls) -> str | None:
        reason = super().missing()
        if reason is not None:
            return reason
        try:
            _load_edgetpu_delegate()
        except UserInputError as exc:
            return str(exc)
        return None

    def model_path(self) -> Path:
        compiled = export_dir(self.policy.run_dir) / "policy_int8_edgetpu.tflite"
        return compiled if compiled.is_file() else super().model_path()

    def _interpreter(self, path: Path, threads: int):  # noqa: ANN202
        from ai_edge_litert.interpreter import Interpreter

        delegate = _load_edgetpu_delegate()
        return Interpreter(
            model_path=str(path), num_threads=threads, experimental_delegates=[delegate]
        )


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
