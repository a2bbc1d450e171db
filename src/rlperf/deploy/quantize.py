"""int8 post-training static quantization, calibrated on recorded game observations.

* ONNX Runtime: ``quantize_static`` in QDQ form with per-channel int8 weights (7 of their 8
  bits used, so no CPU's kernels saturate) and int8 activations, calibrated (min/max) on the
  dataset -> ``policy_int8.onnx``. The uint8 input and the float ``logits`` and ``value``
  outputs stay as they are; the dynamic batch axis is kept.
* TFLite: full-integer quantization with uint8 input and uint8 outputs, the form the Edge TPU
  compiler accepts -> ``policy_int8.tflite``. LiteRT Torch converts a float-input copy of the
  graph, then the TFLite calibrator and quantizer shipped in ``ai-edge-litert`` (the same C++
  code TensorFlow's ``TFLiteConverter`` drives for ``representative_dataset``) calibrate it
  and rewrite it to int8. For image observations the input range is pinned to 0..255, so the
  quantized input has scale 1 and zero point 0: the raw frame *is* the int8 model's input and
  the 1/255 scaling is carried by the quantization parameters, as on a camera-fed Edge TPU.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlperf.core.errors import UserInputError
from rlperf.deploy.export import (
    FILES,
    ExportResult,
    convert_tflite,
    export_dir,
    export_onnx,
    quiet,
    replace_file,
    write_meta,
)
from rlperf.deploy.policy import PolicyGraph, RunPolicy

QUANT_FORMATS = ("onnx", "tflite")
MAX_CALIBRATION = 500
"""At most this many observations calibrate (evenly spaced over the dataset)."""


@dataclass(frozen=True)
class QuantizeResult:
    """A quantized file and the size of the fp32 file it came from."""

    fmt: str
    path: Path
    fp32_bytes: int
    int8_bytes: int


def calibration_subset(obs: np.ndarray, limit: int = MAX_CALIBRATION) -> np.ndarray:
    """Up to ``limit`` observations spread evenly over ``obs`` (a recording is correlated in
    time, so a spread covers more game situations than the first ``limit``)."""
    if len(obs) <= limit:
        return obs
    return obs[np.linspace(0, len(obs) - 1, limit).round().astype(int)]


def quantize_onnx(src: Path, dst: Path, calib: np.ndarray) -> None:
    """Write the int8 QDQ model of the fp32 ONNX file ``src`` to ``dst``."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class _Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self._rows = iter(calib)

        def get_next(self) -> dict[str, np.ndarray] | None:
            row = next(self._rows, None)
            return None if row is None else {"obs": row[None]}

    tmp = dst.with_name(f".{dst.name}.tmp")
    with quiet():
        quantize_static(
            str(src),
            str(tmp),
            _Reader(),
            quant_format=QuantFormat.QDQ,
            per_channel=True,
            activation_type=QuantType.QInt8,
            weight_type=QuantType.QInt8,
            # 7-bit weights: on x86 CPUs without VNNI, ONNX Runtime's int8 kernels add
            # products pairwise into int16 (vpmaddubsw), which saturates with 8-bit weights.
            # On an AVX2-only EPYC that cut the action agreement to 92.6 %; with 7 bits the
            # sums fit, every CPU computes the same, and agreement was 98.4 % there.
            reduce_range=True,
            calibrate_method=CalibrationMethod.MinMax,
        )
    replace_file(tmp, dst)


def _pin_input_range(calib: np.ndarray) -> list[np.ndarray]:
    """Calibration samples whose first one spans the full uint8 range (one real frame with
    one pixel at 0 and one at 255), so the calibrator gives the input scale 1, zero point 0."""
    first = calib[0].astype(np.float32).copy()
    first.flat[0], first.flat[1] = 0.0, 255.0
    return [first, *(row.astype(np.float32) for row in calib)]


def quantize_tflite(policy: RunPolicy, dst: Path, calib: np.ndarray) -> None:
    """Write the full-integer (uint8 in, uint8 out) TFLite model of ``policy`` to ``dst``."""
    try:
        from ai_edge_litert import _pywrap_tensorflow_lite_calibration_wrapper as calibration
    except ImportError as exc:  # the calibrator is an internal module of ai-edge-litert
        raise UserInputError(
            f"this ai-edge-litert has no TFLite calibrator ({exc}); install the 'export' extra"
        ) from None
    graph = PolicyGraph(policy.model, with_value=True).eval()
    example = policy.example(1).float()  # float input 0..255: what the calibrator quantizes
    with tempfile.TemporaryDirectory() as tmpdir:
        float_path = Path(tmpdir) / "float_input.tflite"
        convert_tflite(graph, example, float_path)
        model_bytes = float_path.read_bytes()
    # The wrapper keeps a pointer into model_bytes: the object must outlive it.
    calibrator = calibration.CalibrationWrapper(model_bytes, [], [])
    samples = (
        _pin_input_range(calib)
        if policy.obs_dtype == np.uint8
        else [row.astype(np.float32) for row in calib]
    )
    calibrator.Prepare([list(example.shape)])
    for row in samples:
        calibrator.FeedTensor([row[None]])
    uint8, int8, int32 = (np.dtype(t).num for t in (np.uint8, np.int8, np.int32))
    quantized = calibrator.QuantizeModel(
        uint8,  # input type
        uint8,  # output type
        False,  # allow_float: no float fallback, every op int8 (what the Edge TPU needs)
        int8,  # activations
        int32,  # bias
        False,  # disable_per_channel
        False,  # disable_per_channel_quantization_for_dense_layers
    )
    del calibrator
    tmp = dst.with_name(f".{dst.name}.tmp")
    tmp.write_bytes(bytes(quantized))
    replace_file(tmp, dst)


def quantize_run(
    policy: RunPolicy,
    obs: np.ndarray,
    formats: tuple[str, ...] = QUANT_FORMATS,
    force: bool = False,
) -> list[QuantizeResult]:
    """Quantize ``policy`` to int8 in each of ``formats``, calibrated on ``obs``.

    The fp32 export the size is compared with is written first when it is missing (ONNX
    quantization starts from it). Existing int8 files are replaced only with ``force``.
    """
    from rlperf.deploy.export import check_writable, export_tflite

    out = export_dir(policy.run_dir)
    for fmt in formats:
        if fmt not in QUANT_FORMATS:
            raise UserInputError(f"unknown format {fmt!r}; valid: {', '.join(QUANT_FORMATS)}")
        check_writable(out / FILES[f"{fmt}-int8"], force)
    out.mkdir(exist_ok=True)
    calib = calibration_subset(obs)
    results = []
    for fmt in formats:
        fp32, int8 = out / FILES[fmt], out / FILES[f"{fmt}-int8"]
        if not fp32.exists():
            made = export_onnx(policy, fp32) if fmt == "onnx" else export_tflite(policy, fp32)
            write_meta(policy, fmt, made, note="written by rlperf quantize")
        if fmt == "onnx":
            quantize_onnx(fp32, int8, calib)
        else:
            quantize_tflite(policy, int8, calib)
        result = ExportResult(int8, int8.stat().st_size, ("logits", "value"))
        write_meta(policy, f"{fmt}-int8", result, calibration_samples=len(calib))
        results.append(QuantizeResult(fmt, int8, fp32.stat().st_size, result.bytes))
    return results
