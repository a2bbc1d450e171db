"""Every available backend loads the exports; int8 files are smaller; missing ones are reported."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from rlperf.core.errors import UserInputError
from rlperf.deploy import backends as backends_module
from rlperf.deploy.backends import (
    BACKENDS,
    Backend,
    backend_status,
    compile_for_edgetpu,
    make_backend,
)
from rlperf.deploy.policy import load_run_policy
from tests.conftest import needs_export_extra

pytestmark = needs_export_extra


@pytest.mark.parametrize("name", ["torch", "onnx", "onnx-int8", "tflite", "tflite-int8"])
def test_backend_round_trip(deployed_run: Path, pong_obs, name: str) -> None:
    policy = load_run_policy(deployed_run)
    backend = make_backend(name, policy, threads=1)
    logits = backend(pong_obs["eval"][:1])
    assert logits.shape == (1, policy.num_actions) and logits.dtype == np.float32


def test_onnx_backend_runs_a_batch(deployed_run: Path, pong_obs) -> None:
    policy = load_run_policy(deployed_run)
    assert make_backend("onnx-int8", policy, batch_size=8)(pong_obs["eval"][:8]).shape == (8, 6)


def test_int8_files_are_smaller_and_take_raw_frames(deployed_run: Path) -> None:
    from ai_edge_litert.interpreter import Interpreter

    export = deployed_run / "export"
    for fp32, int8 in (
        ("policy.onnx", "policy_int8.onnx"),
        ("policy.tflite", "policy_int8.tflite"),
    ):
        assert (export / int8).stat().st_size < 0.4 * (export / fp32).stat().st_size
    it = Interpreter(model_path=str(export / "policy_int8.tflite"))
    (inp,), outs = it.get_input_details(), it.get_output_details()
    assert inp["dtype"] == np.uint8 and inp["quantization"] == (1.0, 0)  # the raw frame
    assert len(outs) == 2  # logits and value
    assert all(out["dtype"] == np.uint8 for out in outs)  # full integer, as the Edge TPU needs


class _FakeRuntimeBackend(Backend):
    """A fake backend whose runtime package is not installed."""

    name = "fake-runtime"
    modules = ("rlperf_no_such_runtime",)

    def outputs(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise AssertionError("never built")


def test_unavailable_backend_is_listed_not_a_crash(
    deployed_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(BACKENDS, "fake-runtime", _FakeRuntimeBackend)
    status = dict(backend_status())
    assert "rlperf_no_such_runtime" in status["fake-runtime"]
    with pytest.raises(UserInputError, match="backend fake-runtime is not available here"):
        make_backend("fake-runtime", load_run_policy(deployed_run))


FAKE_COMPILER = """#!/bin/sh
# A fake edgetpu_compiler: records its arguments and writes what the real one writes
# (OUT_DIR/<stem>_edgetpu.tflite) plus its operation counts.
printf '%s\\n' "$@" > "$FAKE_COMPILER_ARGS"
out=$2
model=$4
stem=$(basename "$model" .tflite)
cp "$model" "$out/${stem}_edgetpu.tflite"
echo "Number of operations that will run on Edge TPU: ${FAKE_ON_TPU:-9}"
echo "Number of operations that will run on CPU: 0"
"""


@pytest.fixture
def fake_compiler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake ``edgetpu_compiler`` first on PATH; returns the file it writes its arguments to."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "edgetpu_compiler"
    script.write_text(FAKE_COMPILER)
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    args = tmp_path / "compiler_args.txt"
    monkeypatch.setenv("FAKE_COMPILER_ARGS", str(args))
    return args


def test_edgetpu_without_compiler_is_unavailable(deployed_run: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent-for-test")
    reason = dict(backend_status(load_run_policy(deployed_run)))["edgetpu"]
    assert reason is not None and "edgetpu_compiler" in reason
    with pytest.raises(UserInputError, match="edgetpu_compiler is not on PATH"):
        make_backend("edgetpu", load_run_policy(deployed_run))


def test_edgetpu_without_device_says_so(deployed_run: Path, monkeypatch, fake_compiler) -> None:
    monkeypatch.setattr(backends_module, "EDGETPU_LIBRARY", "libedgetpu-absent-for-test.so.1")
    with pytest.raises(UserInputError, match="no Edge TPU found"):
        make_backend("edgetpu", load_run_policy(deployed_run))


def test_edgetpu_compiles_the_int8_model(run_copy: Path, fake_compiler: Path) -> None:
    int8 = run_copy / "export" / "policy_int8.tflite"
    compiled = compile_for_edgetpu(int8)
    assert fake_compiler.read_text().splitlines() == [
        "--out_dir",
        str(int8.parent),
        "--show_operations",
        str(int8),
    ]
    assert compiled.path == run_copy / "export" / "policy_int8_edgetpu.tflite"
    assert compiled.path.read_bytes() == int8.read_bytes()
    assert (compiled.on_tpu, compiled.on_cpu) == (9, 0)


def test_edgetpu_refuses_a_model_run_on_the_cpu(
    run_copy: Path, fake_compiler: Path, monkeypatch
) -> None:
    monkeypatch.setenv("FAKE_ON_TPU", "0")
    with pytest.raises(UserInputError, match="mapped no operation .* to the Edge TPU"):
        compile_for_edgetpu(run_copy / "export" / "policy_int8.tflite")
    # nothing is left that could later be loaded as an Edge TPU model
    assert not (run_copy / "export" / "policy_int8_edgetpu.tflite").exists()


def test_unknown_backend_and_missing_file(run_copy: Path) -> None:
    policy = load_run_policy(run_copy)
    with pytest.raises(UserInputError, match="unknown backend 'onnx8'; valid: torch, onnx"):
        make_backend("onnx8", policy)
    (run_copy / "export" / "policy_int8.onnx").unlink()
    with pytest.raises(UserInputError, match="rlperf quantize"):
        make_backend("onnx-int8", policy)
    assert "no policy_int8.onnx yet" in dict(backend_status(policy))["onnx-int8"]
