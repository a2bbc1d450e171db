"""Fixtures for the deploy tests: a Pong policy that plays.

``shipped:pong`` (``src/rlperf/deploy/policies/pong``) is a policy trained by rlperf itself
and shipped with it: its ``provenance.json`` holds the commands, machine, env steps and the
greedy returns of the shipped weights (``scripts/ship_policy.py`` made it from the run). It wins games, so "every backend keeps
its decisions" and "int8 plays as well as fp32" are tested on decisions that matter: the
thesis's int8 policy lost every game, and nothing noticed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("ai_edge_litert")

from rlperf.deploy.policy import resolve_policy_source  # noqa: E402

POLICY = resolve_policy_source("shipped:pong")


@pytest.fixture(scope="session")
def pong_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the shipped policy's run directory (exports are written into it)."""
    return Path(shutil.copytree(POLICY, tmp_path_factory.mktemp("deploy") / "pong"))


@pytest.fixture(scope="session")
def pong_obs(pong_run: Path) -> dict[str, np.ndarray]:
    """Frames of the policy playing (actions sampled from it): a calibration set and a
    separate evaluation set (another seed)."""
    from rlperf.deploy.dataset import record_observations
    from rlperf.deploy.policy import load_run_policy

    policy = load_run_policy(pong_run)
    model = policy.model
    calib, _ = record_observations(policy.cfg, policy.dim, 300, seed=11, policy=model)
    evaluation, _ = record_observations(policy.cfg, policy.dim, 1000, seed=22, policy=model)
    return {"calib": calib, "eval": evaluation}


@pytest.fixture(scope="session")
def deployed_run(pong_run: Path, pong_obs: dict[str, np.ndarray]) -> Path:
    """``pong_run`` with every export: policy.onnx, policy.tflite and both int8 files."""
    from rlperf.deploy.export import export_run
    from rlperf.deploy.policy import load_run_policy
    from rlperf.deploy.quantize import quantize_run

    policy = load_run_policy(pong_run)
    export_run(pong_run, "onnx", policy=policy)
    export_run(pong_run, "tflite", policy=policy)
    quantize_run(policy, pong_obs["calib"])
    return pong_run


@pytest.fixture
def run_copy(deployed_run: Path, tmp_path: Path) -> Path:
    """A private copy of the deployed run, for tests that write into it."""
    return Path(shutil.copytree(deployed_run, tmp_path / "run"))
