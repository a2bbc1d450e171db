"""What inference results files keep: energy per call, the first call and the first game."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rlperf.cli import main
from rlperf.deploy import infer
from rlperf.report.load import collect
from rlperf.report.table_builders import inference_tables
from tests.conftest import needs_export_extra

pytestmark = needs_export_extra


class FakeEnergyMonitor:
    """A fake of SystemMonitor's energy window, for machines without RAPL or NVML: each
    collect() after the first reports ``joules`` for the CPU package and ``gpu_joules`` for
    gpu0 (SystemMonitor's keys)."""

    def __init__(self, joules: float | None, gpu_joules: float | None = None) -> None:
        self.joules, self.gpu_joules = joules, gpu_joules
        self.windows = 0

    def __enter__(self) -> FakeEnergyMonitor:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def collect(self) -> dict[str, float | None]:
        self.windows += 1
        if self.windows == 1:  # the baseline: nothing measured yet
            return {"energy/joules": None}
        return {"energy/joules": self.joules, "energy/gpu0_joules": self.gpu_joules}


def _fake_energy(monkeypatch: pytest.MonkeyPatch, **kwargs: Any) -> None:
    monkeypatch.setattr(infer, "energy_monitor", lambda: FakeEnergyMonitor(**kwargs))


def test_time_output_keeps_the_energy_and_the_report_shows_it(
    deployed_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    _fake_energy(monkeypatch, joules=0.7, gpu_joules=0.0)
    out = tmp_path / "thesis__onnx.csv"
    args = ["infer", str(deployed_run), "--backend", "onnx", "--steps", "50"]
    assert main([*args, "--time-output", str(out)]) == 0
    calls = 50 + infer.WARMUP_CALLS  # the window holds the warm-up calls too
    assert f"CPU package {700 / calls:.3f} mJ" in capsys.readouterr().out
    (item,) = collect([tmp_path]).inference
    assert item.result["energy"] == {
        "joules_per_call": pytest.approx(0.7 / calls, rel=1e-5),
        "source": "RAPL cpu_package + NVML gpu0",
        "reason": None,
    }
    latency, _ = inference_tables([item])
    assert latency.rows[0][1].endswith(f"; {700 / calls:.3f} mJ")


def test_an_infer_point_saves_energy_first_call_and_value_fidelity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rlperf.sweep.infer_point import main as point_main

    _fake_energy(monkeypatch, joules=1.2)
    config = tmp_path / "point.json"
    settings = {"run": "shipped:pong", "backend": "torch", "steps": 30}
    config.write_text(
        json.dumps({"config": {}, "infer": {**settings, "fidelity_observations": 20}})
    )
    assert point_main([str(config), str(tmp_path / "point")]) == 0
    saved = json.loads((tmp_path / "point" / "inference.json").read_text())
    calls = 30 + infer.WARMUP_CALLS
    assert saved["energy"]["joules_per_call"] == pytest.approx(1.2 / calls)
    assert saved["energy"]["source"] == "RAPL cpu_package"
    assert saved["warmup_calls"] == infer.WARMUP_CALLS
    assert saved["first_call_ms"] > 0 and saved["first_episode_mean_ms"] > 0
    assert saved["fidelity"]["max_abs_dvalue"] <= 1e-4 and saved["fidelity"]["passed"]
    _, points = inference_tables(collect([tmp_path / "point"]).inference)
    row = dict(zip(points.headers, points.rows[0], strict=True))
    assert row["first call ms"] == saved["first_call_ms"]
    assert row["energy mJ/call"] == pytest.approx(1200 / calls)


def test_without_counters_the_reason_is_saved(
    deployed_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(infer, "energy_monitor", lambda: FakeEnergyMonitor(joules=None))
    out = tmp_path / "onnx.csv"
    assert main(["infer", str(deployed_run), "--backend", "onnx", "--steps", "5",
                 "--time-output", str(out)]) == 0  # fmt: skip
    (item,) = collect([tmp_path]).inference
    assert item.result["energy"]["joules_per_call"] is None
    assert "neither RAPL nor NVML" in item.result["energy"]["reason"]
    latency, _ = inference_tables([item])
    assert latency.rows[0][1].endswith("; energy n/a")
