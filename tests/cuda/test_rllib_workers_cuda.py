"""The thesis's workers (runner ``rllib``, ``rlperf train -w N``) acting on a GPU: each
worker a Ray actor with its own copy of the policy on its share of the GPU, the learner on
the GPU, the weights pushed to every worker after each update and timed as ``update``, and
the GPU's memory in the run's records (the thesis's Fig 4.3). The same test runs with the
workers and the learner on the CPU in every suite (its dry run), so the GPU run cannot rot;
the CUDA case runs on a GPU machine with Ray (benchmarks/gpu/check.sh, RLPERF_RAY_PARTS)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from rlperf.cli import main
from tests.conftest import read_metrics

pytest.importorskip("ray")

DEVICES = [
    pytest.param("cpu", id="cpu-dry-run"),
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    ),
]


@pytest.mark.parametrize("device", DEVICES)
def test_rllib_workers_act_with_their_own_policy_copies_and_the_broadcast_is_update(
    device: str, tmp_path: Path
) -> None:
    argv = ["train", "--preset", "cartpole", "-w", "2", "-i", "3", "--no-progress"]
    argv += ["--runs-root", str(tmp_path), "-s", "run", "ppo.update_epochs=1"]
    argv += ["runner.ray_num_cpus_per_actor=0.5", "runner.torch_threads=1"]
    argv += [f"runner.learner_device={device}", f"runner.actor_device={device}"]
    argv += ["telemetry.tensorboard=false"]
    assert main(argv) == 0
    run = tmp_path / "run"
    manifest = json.loads((run / "manifest.json").read_text())
    actors = [p for p in manifest["resources"]["processes"] if p["role"] == "actor"]
    assert len({a["pid"] for a in actors}) == 2  # two worker processes of their own
    assert len({a["policy_parameters"] for a in actors}) == 1  # each holds the whole policy
    # on the GPU each worker's copy sits on its share of it (Ray shows it the one GPU)
    expected = "cuda:0" if device == "cuda" else "cpu"
    assert {a["device"] for a in actors} == {expected}
    rows = read_metrics(run)
    assert len(rows) == 3 and all(r["sys/live_workers"] == 2 for r in rows)
    assert all(r["update_time_ms"] > 0 for r in rows)  # the push to every worker, timed
    assert all(r["perf/policy_lag_max"] == 0 for r in rows)  # each acted with the newest
    if device == "cuda":
        assert all(r["sys/gpu0_mem_mb"] > 0 for r in rows)  # Fig 4.3's GPU memory
