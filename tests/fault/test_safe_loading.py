"""Checkpoints, configs and files given to rlperf never execute code: a malicious pickle
planted where a checkpoint or a config is expected is refused with one line, exit code 2,
and its payload never runs."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
from pathlib import Path

import pytest
import torch

from rlperf.core.checkpoint import TENSORS_FILE, TREE_FILE
from tests.conftest import rlperf_subprocess


class _Payload:
    """Unpickling this runs ``touch MARKER`` (what an attacker's checkpoint would do)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # noqa: ANN204
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    done = rlperf_subprocess(
        "train", "--preset", "cartpole", "--runs-root", str(root), "-s", "victim",
        "--no-progress", "-i", "2", "checkpoint.every=1", "telemetry.tensorboard=false",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return root / "victim"


def _assert_refused(done, marker: Path, *needles: str) -> None:  # noqa: ANN001
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert not marker.exists(), "the pickle's payload ran"


def test_a_pickle_planted_as_the_checkpoint_tensors_is_refused(run_dir: Path, tmp_path: Path):
    marker = tmp_path / "pwned"
    victim = tmp_path / "victim"
    shutil.copytree(run_dir, victim)
    latest = victim / "checkpoints" / (victim / "checkpoints" / "latest").read_text().strip()
    evil = pickle.dumps(_Payload(marker))
    (latest / TENSORS_FILE).write_bytes(evil)
    # The attacker also fixes the recorded size and checksum, so only the format protects.
    tree = json.loads((latest / TREE_FILE).read_text())
    tree["tensors_bytes"] = len(evil)
    tree["tensors_sha256"] = hashlib.sha256(evil).hexdigest()
    (latest / TREE_FILE).write_text(json.dumps(tree))
    done = rlperf_subprocess("train", "--resume", str(victim), "--no-progress", "-i", "3")
    _assert_refused(done, marker, str(latest))


def test_a_torch_pickle_given_as_checkpoint_is_refused(run_dir: Path, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.pt"
    torch.save({"model": _Payload(marker)}, evil)
    done = rlperf_subprocess(
        "train", "--resume", str(run_dir), "--checkpoint", str(evil), "--no-progress", "-i", "3"
    )
    _assert_refused(done, marker, "evil.pt")
    assert (run_dir / "checkpoints" / "latest").is_file()  # nothing of the run was touched


def test_a_yaml_preset_with_python_tags_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    preset = tmp_path / "evil.yaml"
    preset.write_text(f'seed: !!python/object/apply:os.system ["touch {marker}"]\n')
    done = rlperf_subprocess("train", "--preset", str(preset), "--runs-root", str(tmp_path))
    _assert_refused(done, marker, "evil")
