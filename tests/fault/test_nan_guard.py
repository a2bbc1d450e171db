"""The NaN guard (``--nan-policy``): a non-finite batch, loss or gradient stops the run with
the batch saved and the last good checkpoint named (raise), is dropped and counted
(skip_update), or is reported once and let through (warn)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from torch import nn

from rlperf.core.nan_guard import NonFiniteError, NonFiniteGuard
from rlperf.core.optim import LocalGradientStep
from rlperf.core.protocols import OptimizerSpec
from tests.conftest import read_metrics, rlperf_subprocess


def _step(policy: str) -> tuple[nn.Linear, LocalGradientStep]:
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    step = LocalGradientStep(model, OptimizerSpec("adam", 0.1), device=torch.device("cpu"))
    step.guard = NonFiniteGuard(policy)
    return model, step


def _loss(model: nn.Linear, poison: float) -> torch.Tensor:
    return (model(torch.ones(2, 3)) * poison).sum()


@pytest.mark.parametrize("poison", [float("nan"), float("inf")])
def test_raise_stops_before_the_weights_change(poison: float) -> None:
    model, step = _step("raise")
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(NonFiniteError, match="non-finite value in the loss"):
        step(_loss(model, poison))
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_skip_update_drops_only_the_bad_step() -> None:
    model, step = _step("skip_update")
    before = [p.detach().clone() for p in model.parameters()]
    step(_loss(model, float("nan")), max_grad_norm=0.5)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert step.guard.skipped == 1
    step(_loss(model, 1.0))  # a finite step goes through
    assert not torch.equal(before[0], model.weight)
    assert step.guard.metrics() == {"guard/nonfinite_found": 1, "guard/skipped_updates": 1}


def test_warn_lets_it_through_and_says_so_once(capsys: pytest.CaptureFixture) -> None:
    model, step = _step("warn")
    for _ in range(3):
        step(_loss(model, float("nan")))
    assert torch.isnan(model.weight).all()  # the user asked for it
    assert capsys.readouterr().err.count("non-finite value in the loss") == 1
    assert step.guard.found_total == 3


NAN_ENV = "tests.helpers.nan_env:FakeNaNRewardCartPole-v0"  # reward NaN at its 150th step
TRAIN = ("train", "--preset", "cartpole", "--env", NAN_ENV, "--no-progress", "-i", "5",
         "checkpoint.every=1", "telemetry.tensorboard=false", "env.num_envs=2")  # fmt: skip


def test_a_nan_reward_stops_the_run_with_the_batch_saved(tmp_path: Path) -> None:
    done = rlperf_subprocess(*TRAIN, "--runs-root", str(tmp_path), "-s", "run")
    run_dir = tmp_path / "run"
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.strip().splitlines()
    # 2 envs x 64 steps per iteration: the 150th step of each env falls in iteration 3
    assert "non-finite value in the batch's rewards_TN" in line and "iteration 3" in line
    assert "the last good checkpoint is" in line and "ckpt_00000002" in line
    dump = next((run_dir / "nonfinite").glob("*.safetensors"))
    assert torch.isnan(load_file(str(dump))["rewards_TN"]).any()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed"


def test_skip_update_finishes_and_counts(tmp_path: Path) -> None:
    done = rlperf_subprocess(
        *TRAIN, "--nan-policy", "skip_update", "--runs-root", str(tmp_path), "-s", "run"
    )
    assert done.returncode == 0, done.stderr
    records = read_metrics(tmp_path / "run")
    assert [r["guard/skipped_updates"] for r in records] == [0, 0, 1, 1, 1]
    assert all(
        r["losses/policy_loss"] == r["losses/policy_loss"] for r in records if r["iteration"] != 3
    )


def test_none_checks_nothing() -> None:
    guard = NonFiniteGuard("none")

    @dataclasses.dataclass
    class FakeBatch:
        rewards: torch.Tensor

    assert not guard.check_batch(FakeBatch(torch.tensor([float("nan")])))
    guard.check_metrics({"losses/loss": float("nan")})
    assert guard.found_total == 0
    with pytest.raises(ValueError, match="valid: raise, skip_update, warn, none"):
        NonFiniteGuard("sometimes")
