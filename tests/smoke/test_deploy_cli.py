"""CLI smoke: export, dataset, quantize, infer; bad input is one line and exit code 2."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np
import pytest

from rlperf.cli import main
from rlperf.deploy.policy import load_run_policy
from tests.conftest import needs_export_extra, rlperf_subprocess

pytestmark = needs_export_extra


def test_export_dataset_quantize_infer(run_copy: Path, tmp_path: Path, capsys) -> None:
    assert main(["export", str(run_copy), "--format", "onnx", "--force"]) == 0
    assert "policy.onnx" in capsys.readouterr().out
    obs_file = tmp_path / "obs.npy"
    assert (
        main(["dataset", str(run_copy), "--n", "120", "-o", str(obs_file), "--play", "policy"]) == 0
    )
    shape = load_run_policy(run_copy).obs_shape
    assert np.load(obs_file, allow_pickle=False).shape == (120, *shape)
    assert (
        main(["quantize", str(run_copy), "--dataset", str(obs_file), "--format", "onnx", "--force"])
        == 0
    )
    assert "KiB ->" in capsys.readouterr().out
    csv_file = tmp_path / "t.csv"
    args = [
        "infer",
        str(run_copy),
        "--backend",
        "onnx-int8",
        "--steps",
        "50",
        "--time-output",
        str(csv_file),
    ]
    assert main(args) == 0
    summary = capsys.readouterr().out
    assert "onnx-int8: 0 episodes (+1 unfinished), 50 calls of batch 1" in summary
    rows = list(csv.DictReader(csv_file.open()))
    assert list(rows[0]) == [
        "episode",
        "steps",
        "total_model_time_ms",
        "mean_step_ms",
        "p50",
        "p99",
        "reward",
        "energy_j_per_call",
        "energy_source",
    ]
    assert int(rows[0]["steps"]) == 50 and float(rows[0]["p50"]) > 0
    assert main(args) == 2  # the CSV exists: not overwritten without --force


def test_infer_batch_and_fidelity_cli(deployed_run: Path, tmp_path: Path, capsys) -> None:
    steps_file = tmp_path / "steps.csv"
    affinity = os.sched_getaffinity(0)
    args = ["infer", str(deployed_run), "--backend", "onnx", "--steps", "5", "--batch-size", "4"]
    assert main([*args, "--step-output", str(steps_file), "--set-affinity", "0"]) == 0
    out = capsys.readouterr().out
    assert "5 calls of batch 4" in out and "energy per call: " in out
    assert os.sched_getaffinity(0) == affinity  # pinned for the command only
    rows = list(csv.DictReader(steps_file.open()))
    assert list(rows[0]) == [
        "step", "env", "episode", "model_time_ms", "env_time_ms", "action", "reward"
    ]  # fmt: skip
    # one row per env and call; the envs of a call share its model time
    assert [(int(r["step"]), int(r["env"])) for r in rows] == [
        (s, e) for s in range(5) for e in range(4)
    ]
    assert len({r["model_time_ms"] for r in rows[:4]}) == 1
    assert all(float(r["model_time_ms"]) > 0 and float(r["env_time_ms"]) > 0 for r in rows)
    assert main([*args, "--step-output", str(steps_file)]) == 2  # kept without --force
    code = main(
        ["infer", str(deployed_run), "--check-fidelity", "--backend", "onnx", "--backend", "tflite"]
    )
    out = capsys.readouterr().out
    assert code == 0 and out.count(" ok") == 2, out


def test_cartpole_dataset_cli(tmp_path: Path, capsys) -> None:
    out = tmp_path / "cp.npy"
    assert main(["dataset", "--env", "CartPole-v1", "--n", "200", "-o", str(out)]) == 0
    assert "episode resets" in capsys.readouterr().out
    assert np.load(out).dtype == np.float32


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["export", "{missing}", "--format", "onnx"], "does not exist"),
        (["export", "{run}", "--format", "pb"], "invalid choice: 'pb'"),
        (
            ["infer", "{run}", "--backend", "onnx9", "--steps", "3"],
            "unknown backend 'onnx9'; valid:",
        ),
        (["quantize", "{run}", "--dataset", "{txt}"], "is not a .npy file"),
        (["dataset", "--env", "CartPole-v1", "-o", "{txt}"], "must end in .npy"),
        (["infer", "{run}", "--backend", "edgetpu", "--steps", "3"], "backend edgetpu is not"),
        (
            ["infer", "{run}", "--backend", "torch", "--steps", "3", "--set-affinity", "99"],
            "CPUs [99] are not available",
        ),
        (["infer", "shipped:chess", "--backend", "torch"], "no shipped policy 'shipped:chess'"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    deployed_run: Path, tmp_path: Path, capsys, args, message
) -> None:
    txt = tmp_path / "obs.txt"
    txt.write_text("1 2 3\n")
    fill = {"run": str(deployed_run), "missing": str(tmp_path / "nope"), "txt": str(txt)}
    assert main([a.format(**fill) for a in args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rlperf: error:") and message in err[0], err


def test_the_shipped_policy_plays_by_name_and_stays_as_installed(capsys) -> None:
    from rlperf.deploy.policy import resolve_policy_source

    shipped = resolve_policy_source("shipped:pong")
    files = sorted(p.relative_to(shipped) for p in shipped.rglob("*"))
    assert main(["infer", "shipped:pong", "--backend", "torch", "--steps", "40"]) == 0
    assert "40 calls of batch 1" in capsys.readouterr().out
    assert sorted(p.relative_to(shipped) for p in shipped.rglob("*")) == files


def test_list_backends_in_a_fresh_process() -> None:
    proc = rlperf_subprocess("infer", "--list-backends", timeout=120)
    assert proc.returncode == 0
    lines = dict(line.split(None, 1) for line in proc.stdout.splitlines())
    assert lines["onnx"] == "available" and lines["edgetpu"].startswith("unavailable: ")


def test_energy_per_call_names_what_was_measured() -> None:
    from rlperf.deploy.infer import EnergyPerCall

    energy = EnergyPerCall.from_usage({"energy/joules": 2.0, "energy/gpu0_joules": 0.5}, calls=1000)
    assert energy.line() == "energy per call: CPU package 2.000 mJ, gpu0 0.500 mJ"
    assert energy.joules == pytest.approx(0.0025)
    assert energy.source == "RAPL cpu_package + NVML gpu0"
    absent = EnergyPerCall.from_usage({"energy/joules": None}, calls=1000)
    assert absent.joules is None and absent.source is None
    assert "not measured" in absent.line() and absent.record()["reason"]
