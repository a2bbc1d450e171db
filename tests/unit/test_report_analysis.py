"""The report's arithmetic on fake runs (records made up by the test, named fake): knees,
speed-ups, energy per million frames, time to target and the diagnosis text."""

from __future__ import annotations

import pytest

from rlperf.report.analysis import scaling_curves, speedups, time_to_target
from rlperf.report.diagnose import diagnose
from rlperf.report.summary import summarise
from tests.helpers.report_fakes import fake_run

PHASES = {"sample": 100.0, "load": 5.0, "learn": 800.0, "update": 0.0, "other": 55.0}


def test_warmup_is_left_out_and_energy_is_per_million_frames() -> None:
    run = fake_run("a", sps=[10.0, 100.0, 200.0, 300.0], phases=PHASES, energy=48.0)
    s = summarise(run)
    assert s.sps == (150.0, 200.0, 250.0)  # quartiles of the three steady iterations
    steps = sum(v * 0.96 for v in (100.0, 200.0, 300.0))
    assert s.energy_j_per_mframes == pytest.approx(3 * 48.0 / (steps * 4) * 1e6)
    assert s.phase_pct["learn"] == pytest.approx(100 * 800 / 960)


def test_gpu_memory_power_and_energy_from_nvml_records() -> None:
    run = fake_run("a", sps=[10.0, 100.0, 200.0], phases=PHASES)
    for r, joules in zip(run.records, (1.0, 30.0, 50.0), strict=True):
        r.update(
            {"sys/gpu0_mem_mb": 2048.0, "sys/gpu0_power_w": 150.0, "energy/gpu0_joules": joules}
        )
    s = summarise(run)
    assert s.gpu_mem_mb == {0: 2048.0} and s.gpu_power_w == {0: 150.0}
    steps = sum(v * 0.96 for v in (100.0, 200.0))  # the warm-up iteration is left out
    assert s.gpu_energy_j_per_mframes == pytest.approx(80.0 / (steps * 4) * 1e6)
    assert s.energy_j_per_mframes is None  # no RAPL here: the CPU's stays unknown


def test_no_energy_measured_stays_none() -> None:
    assert summarise(fake_run("a", sps=[1, 2, 3], phases=PHASES)).energy_j_per_mframes is None


def test_knee_is_the_smallest_count_near_the_best() -> None:
    runs = [
        fake_run(f"w{w}", sps=[1.0, v, v], phases=PHASES, workers=w)
        for w, v in [(1, 100.0), (2, 180.0), (4, 250.0), (8, 260.0), (16, 240.0)]
    ]
    curves = scaling_curves([summarise(r) for r in runs])
    assert len(curves) == 1 and curves[0].axis == "workers"
    assert curves[0].knee[0] == 4  # 250 >= 0.9 x 260; 180 is not


def test_speedups_against_a_baseline() -> None:
    slow = summarise(fake_run("slow", sps=[1, 100, 100], phases=PHASES))
    fast = summarise(fake_run("fast", sps=[1, 250, 250], phases={**PHASES, "learn": 400.0}))
    ups = {u.label: u for u in speedups([slow, fast], "slow")}
    assert ups["slow"].sps == 1.0
    assert ups["fast"].sps == 2.5
    assert ups["fast"].phases["learn"] == 2.0
    assert ups["fast"].phases["update"] is None  # 0 ms: no ratio


def test_time_to_target() -> None:
    run = fake_run("r", sps=[1, 1, 1, 1], phases=PHASES, rewards=[None, -20.0, -5.0, 3.0])
    (hit,) = time_to_target([run], -10.0)
    assert hit.env_steps == run.records[2]["timesteps_total"]
    assert hit.wall_s == pytest.approx(run.records[2]["time_total_s"])
    (miss,) = time_to_target([run], 10.0)
    assert miss.env_steps is None and miss.best == 3.0
    assert time_to_target([run], None) == []  # no target anywhere
    assert hit.metric == "mean100" and hit.frames == hit.env_steps * 4  # Pong: frameskip 4


def test_time_to_target_uses_the_runs_own_metric() -> None:
    """A run that stops on 003's EMA is timed on the EMA, not on the mean of 100 games."""
    run = fake_run("ema", sps=[1, 1, 1], phases=PHASES, rewards=[-21.0, -21.0, -21.0])
    for record, ema in zip(run.records, [-5.0, 17.5, 18.0], strict=True):
        record["episode_reward_ema"] = ema
    run.config["stop"] = {"target_reward": 17.0, "target_reward_metric": "ema"}
    (hit,) = time_to_target([run], None)
    assert hit.metric == "ema" and hit.best == 18.0
    assert hit.env_steps == run.records[1]["timesteps_total"]


def test_time_to_target_with_both_criteria_waits_for_the_lower() -> None:
    run = fake_run("both", sps=[1, 1, 1], phases=PHASES, rewards=[18.0, 18.0, 18.0])
    for record, ema in zip(run.records, [5.0, 16.0, 17.5], strict=True):
        record["episode_reward_ema"] = ema
    run.config["stop"] = {"target_reward": 17.0, "target_reward_metric": "mean100+ema"}
    (hit,) = time_to_target([run], None)
    assert hit.env_steps == run.records[2]["timesteps_total"] and hit.best == 17.5


def test_diagnosis_names_the_bound_and_the_remedy() -> None:
    learner = summarise(
        fake_run("l", sps=[1, 2, 3], phases=PHASES, learner_sps=1280.0, actor_sps=10240.0)
    )
    text = diagnose(learner)
    assert text.startswith("learner-bound: learn is 83% of the iteration")
    assert "1,280 samples/s" in text and "10,240 steps/s" in text
    assert "a GPU learner (runner.learner_device=cuda)" in text
    assert "bf16 where it measures faster (runner.precision=auto)" in text  # fake AMX-BF16
    actor = summarise(
        fake_run(
            "a", sps=[1, 2, 3], phases={**PHASES, "sample": 900.0, "learn": 100.0}, runner="inproc"
        )
    )
    text = diagnose(actor)
    assert text.startswith("actor-bound: sample is")
    assert "env.engine=envpool or ale-vector" in text and "runner.name=subprocess" in text
    crowded = summarise(fake_run("c", sps=[1, 2, 3], phases=PHASES, workers=16))
    assert "16 workers share 4 cores" in diagnose(crowded)
    # 90% of 4 cores busy, the run's processes 100% of one core: others took 65%
    shared = summarise(fake_run("s", sps=[1, 2, 3], phases=PHASES, proc_cpu=100.0))
    assert shared.others_cpu_percent == pytest.approx(65.0)
    assert "Other processes used about 65% of the machine's CPU meanwhile" in diagnose(shared)
    alone = summarise(fake_run("s", sps=[1, 2, 3], phases=PHASES, proc_cpu=350.0))
    assert "Other processes" not in diagnose(alone)


def test_blank_screenshot_detection() -> None:
    import io

    from PIL import Image, ImageDraw

    from rlperf.report.browser import is_blank

    def png(draw: bool) -> bytes:
        img = Image.new("RGB", (200, 100), "white")
        if draw:
            ImageDraw.Draw(img).rectangle((10, 10, 120, 60), fill="navy")
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        return buf.getvalue()

    assert is_blank(png(False))
    assert not is_blank(png(True))
