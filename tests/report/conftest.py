"""Fixture runs for the report tests, written by real ``rlperf sweep`` processes.

One training sweep on CartPole (tiny budgets: the in-process runner and the subprocess
runner with 1 and 2 workers, so there is a scaling curve; plus a point that needs a GPU)
and one inference sweep timing the in-process run's policy on torch and ONNX Runtime.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import rlperf_subprocess

REPO = Path(__file__).resolve().parents[2]

TRAIN = """\
presets: [cartpole]
description: CartPole fixture for the report tests
baseline: subprocess-1
base:
  stop: {iterations: 4, total_timesteps: null}
  telemetry.tensorboard: false
  runner.torch_threads: 1
  env.num_envs: 4
  ppo.num_steps: 32
points:
  - {name: inproc}
  - {name: subprocess-1, runner.name: subprocess, runner.num_workers: 1}
  - {name: subprocess-2, runner.name: subprocess, runner.num_workers: 2}
  - {name: gpu-learner, runner.learner_device: 'cuda:63'}
"""

INFER = """\
command: infer
description: inference fixture for the report tests
base:
  infer: {{run: '{run}', steps: 200, fidelity_observations: 100}}
points:
  - {{name: torch, infer.backend: torch}}
  - {{name: onnx, infer.backend: onnx}}
"""


@pytest.fixture(scope="session")
def fixture_sweeps(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(training sweep directory, inference sweep directory)."""
    root = tmp_path_factory.mktemp("report-fixture")
    (root / "train.yaml").write_text(TRAIN)
    train = root / "train"
    proc = rlperf_subprocess(
        "sweep", str(root / "train.yaml"), "-o", str(train), timeout=300, cwd=REPO
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (root / "infer.yaml").write_text(INFER.format(run=train / "runs" / "inproc"))
    infer = root / "infer"
    proc = rlperf_subprocess(
        "sweep", str(root / "infer.yaml"), "-o", str(infer), timeout=300, cwd=REPO
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return train, infer
