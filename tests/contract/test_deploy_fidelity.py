"""Every backend keeps the policy's decisions; broken exports are caught."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from rlperf.deploy.backends import Backend, backend_status, make_backend
from rlperf.deploy.fidelity import (
    check_backend,
    check_fidelity,
    compare_logits,
    compare_values,
    format_report,
)
from rlperf.deploy.policy import PolicyGraph, load_run_policy, torch_logits, torch_outputs
from rlperf.models.conv import InputScaledConv2d
from tests.conftest import needs_export_extra

pytestmark = needs_export_extra

GAMES = 3
"""Greedy games per backend in the game test (a game of this policy is a few thousand steps)."""


def test_the_shipped_policy_acts_non_uniformly(deployed_run: Path, pong_obs) -> None:
    policy = load_run_policy(deployed_run)
    actions = torch_logits(policy.model, pong_obs["eval"]).argmax(1)
    counts = np.bincount(actions, minlength=policy.num_actions)
    assert (counts >= 0.1 * len(actions)).sum() >= 2, counts  # it moves its paddle both ways


def test_every_backend_keeps_the_actions(deployed_run: Path, pong_obs) -> None:
    policy = load_run_policy(deployed_run)
    names = [n for n, reason in backend_status(policy) if reason is None]
    assert {"torch", "onnx", "onnx-int8", "tflite", "tflite-int8"} <= set(names)
    backends = [make_backend(n, policy, threads=1) for n in names]
    results, _ = check_fidelity(policy, backends, pong_obs["eval"])
    by_name = {r.backend: r for r in results}
    for name in ("torch", "onnx", "tflite"):
        assert by_name[name].agreement >= 0.999, by_name[name]
        assert by_name[name].rel_dlogits <= 1e-4, by_name[name]
        assert by_name[name].rel_dvalue <= 1e-4, by_name[name]  # the value head survives too
    for name in ("onnx-int8", "tflite-int8"):  # measured, not judged: finite and non-zero
        assert 0 < by_name[name].mean_abs_dvalue <= by_name[name].max_abs_dvalue < np.inf
    assert "max|dvalue|" in format_report(results, [])
    # int8 with its calibration (frames of the policy playing): the 97 % (measured
    # 98.2-98.5 % over three calibration/evaluation seed pairs, docs/deploy.md).
    for name in ("onnx-int8", "tflite-int8"):
        assert by_name[name].agreement >= 0.97, by_name[name]
    assert all(by_name[n].passed for n in ("torch", "onnx", "tflite"))


def test_int8_wins_games_like_fp32(deployed_run: Path, pong_obs) -> None:
    # The thesis's int8 policy scored -21 in every game against fp32's -2..-5, unnoticed.
    policy = load_run_policy(deployed_run)
    backends = [make_backend(n, policy, threads=1) for n in ("onnx-int8", "tflite-int8")]
    results, fp32 = check_fidelity(
        policy, backends, pong_obs["eval"][:100], episodes=GAMES, seed=500
    )
    assert np.mean(fp32) >= 15, fp32  # the policy wins its games: a fair comparison
    for result in results:
        # Within noise: the spread of fp32's own games (at least 3 points) around its mean.
        noise = max(3.0, 2 * float(np.std(fp32 + result.returns)))
        worst = np.mean(fp32) - noise
        assert np.mean(result.returns) >= worst, (result.backend, result.returns, fp32)


def _export_broken(run_dir: Path, graph: torch.nn.Module, names: list[str]) -> None:
    """Overwrite policy.onnx with ``graph`` (what a broken pipeline would have written)."""
    policy = load_run_policy(run_dir)
    torch.onnx.export(
        graph.eval(), (policy.example(2),), str(run_dir / "export" / "policy.onnx"),
        input_names=["obs"], output_names=names, opset_version=18, dynamo=True,
        external_data=False, dynamic_shapes=({0: torch.export.Dim("batch")},),
    )  # fmt: skip


def test_missing_input_scaling_fails_the_check(run_copy: Path, pong_obs) -> None:
    policy = load_run_policy(run_copy)
    for layer in policy.model.modules():
        if isinstance(layer, InputScaledConv2d):
            layer.input_scale = None  # the /255 forgotten
    _export_broken(run_copy, PolicyGraph(policy.model, with_value=True), ["logits", "value"])
    good = load_run_policy(run_copy)
    result = check_backend(
        make_backend("onnx", good), pong_obs["eval"], torch_outputs(good.model, pong_obs["eval"])
    )
    assert not result.passed and "agreement" in result.problem


class _Swapped(torch.nn.Module):
    """Outputs in the wrong order: the tensor named logits is the value."""

    def __init__(self, inner: PolicyGraph) -> None:
        super().__init__()
        self.inner = inner  # not "graph": torch.export's own attribute name

    def forward(self, obs: torch.Tensor):  # noqa: ANN201
        logits, value = self.inner(obs)
        return value, logits


def test_swapped_outputs_fail_the_check(run_copy: Path, pong_obs) -> None:
    policy = load_run_policy(run_copy)
    _export_broken(
        run_copy, _Swapped(PolicyGraph(policy.model, with_value=True)), ["logits", "value"]
    )
    result = check_backend(
        make_backend("onnx", policy),
        pong_obs["eval"],
        torch_outputs(policy.model, pong_obs["eval"]),
    )
    assert not result.passed and "shape" in result.problem


class _ShiftedValue(Backend):
    """A fake backend: the onnx backend's logits with its value off by ``shift`` (a graph
    whose value head was broken while the policy head survived)."""

    name = "shifted-value"

    def __init__(self, inner: Backend, shift: float) -> None:
        super().__init__(inner.policy, batch_size=inner.batch_size)
        self.inner, self.shift = inner, shift

    def outputs(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        logits, value = self.inner.outputs(obs)
        return logits, value + self.shift


def test_a_broken_value_head_fails_the_check(deployed_run: Path, pong_obs) -> None:
    policy = load_run_policy(deployed_run)
    obs = pong_obs["eval"][:200]
    reference = torch_outputs(policy.model, obs)
    backend = _ShiftedValue(make_backend("onnx", policy), shift=0.5)
    result = check_backend(backend, obs, reference)
    assert result.agreement == 1.0  # the actions are untouched ...
    assert result.max_abs_dvalue == pytest.approx(0.5, abs=1e-3)  # ... the value is not
    assert result.mean_abs_dvalue == pytest.approx(0.5, abs=1e-3)
    assert not result.passed and "relative |Δvalue|" in result.problem
    assert check_backend(_ShiftedValue(backend.inner, 0.0), obs, reference).passed


def test_compare_values_errors() -> None:
    ref = np.array([2.0, -4.0, 1.0])
    max_abs, mean_abs, rel = compare_values(ref, ref + np.array([0.0, 0.3, -0.6]))
    assert max_abs == pytest.approx(0.6) and mean_abs == pytest.approx(0.3)
    assert rel == pytest.approx(0.15)
    with pytest.raises(ValueError, match="value of shape"):
        compare_values(ref, np.zeros((3, 6)))


def test_compare_logits_relative_error() -> None:
    ref = np.array([[1.0, 2.0], [4.0, -1.0]])
    agreement, diff, rel = compare_logits(ref, ref + np.array([[0.0, 0.0], [0.0, 0.4]]))
    assert agreement == 1.0 and diff == pytest.approx(0.4) and rel == pytest.approx(0.1)
