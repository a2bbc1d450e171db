"""Export: named outputs, raw uint8 input, dynamic batch, determinism, no silent overwrite."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
import yaml

from rlperf.core.errors import UserInputError
from rlperf.deploy.export import export_run
from rlperf.deploy.fidelity import compare_logits
from rlperf.deploy.policy import load_run_policy, torch_logits
from tests.conftest import needs_export_extra

pytestmark = needs_export_extra
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def test_onnx_graph_takes_raw_frames_with_dynamic_batch(deployed_run: Path, pong_obs) -> None:
    model = onnx.load(str(deployed_run / "export" / "policy.onnx"))
    onnx.checker.check_model(model, full_check=True)
    assert max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) >= 17
    (inp,) = model.graph.input
    assert inp.name == "obs" and inp.type.tensor_type.elem_type == onnx.TensorProto.UINT8
    assert inp.type.tensor_type.shape.dim[0].dim_param  # a symbolic batch axis
    assert [o.name for o in model.graph.output] == ["logits", "value"]
    session = ort.InferenceSession(str(deployed_run / "export" / "policy.onnx"))
    policy = load_run_policy(deployed_run)
    for batch in (1, 7):
        obs = pong_obs["eval"][:batch]
        logits, _ = session.run(None, {"obs": obs})
        assert logits.shape == (batch, policy.num_actions)
        agreement, _, rel = compare_logits(torch_logits(policy.model, obs), logits)
        assert agreement == 1.0 and rel <= 1e-4


def test_the_value_is_a_named_output(deployed_run: Path, pong_obs) -> None:
    session = ort.InferenceSession(str(deployed_run / "export" / "policy.onnx"))
    assert [o.name for o in session.get_outputs()] == ["logits", "value"]
    logits, value = session.run(None, {"obs": pong_obs["eval"][:3]})
    import torch

    policy = load_run_policy(deployed_run)
    with torch.no_grad():
        ref_logits, ref_value = policy.model(torch.from_numpy(pong_obs["eval"][:3]))
    np.testing.assert_allclose(logits, ref_logits.numpy(), atol=1e-4)
    np.testing.assert_allclose(value, ref_value.numpy(), atol=1e-4)


def test_zero_sum_first_layer_exports_the_logits_it_trains_with(run_copy: Path, pong_obs) -> None:
    # A run with model.zero_sum_first_layer computes its first-layer filters from the weights
    # in the forward pass; the ONNX graph must compute the same logits as torch does.
    config = run_copy / "config.yaml"
    cfg = yaml.safe_load(config.read_text())
    obs = pong_obs["eval"][:5]
    plain = torch_logits(load_run_policy(run_copy).model, obs)
    cfg["model"]["zero_sum_first_layer"] = True
    config.write_text(yaml.safe_dump(cfg))
    policy = load_run_policy(run_copy)
    reference = torch_logits(policy.model, obs)
    assert np.abs(reference - plain).max() > 1e-3  # the shipped filters do not sum to zero
    export_run(run_copy, "onnx", force=True)
    logits, _ = ort.InferenceSession(str(run_copy / "export" / "policy.onnx")).run(
        None, {"obs": obs}
    )
    agreement, _, rel = compare_logits(reference, logits)
    assert agreement == 1.0 and rel <= 1e-4


def test_onnx_export_is_deterministic(run_copy: Path) -> None:
    path = run_copy / "export" / "policy.onnx"
    first = hashlib.sha256(path.read_bytes()).hexdigest()
    export_run(run_copy, "onnx", force=True)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == first


def test_tflite_signature_and_fixed_batch(deployed_run: Path, run_copy: Path) -> None:
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(deployed_run / "export" / "policy.tflite"))
    assert it.get_signature_list() == {
        "serving_default": {"inputs": ["obs"], "outputs": ["logits", "value"]}
    }
    (inp,) = it.get_input_details()
    shape = list(load_run_policy(deployed_run).obs_shape)
    assert inp["dtype"] == np.uint8 and list(inp["shape"]) == [1, *shape]
    export_run(run_copy, "tflite", batch_size=4, force=True)
    it = Interpreter(model_path=str(run_copy / "export" / "policy.tflite"))
    assert list(it.get_input_details()[0]["shape"]) == [4, *shape]


def test_existing_export_needs_force(deployed_run: Path) -> None:
    with pytest.raises(UserInputError, match="already exists; pass --force"):
        export_run(deployed_run, "onnx")
