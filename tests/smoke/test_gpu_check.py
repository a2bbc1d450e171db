"""The prepared GPU check (benchmarks/gpu/check.sh) in its dry run: every step on this CPU
with tiny budgets, so the check that runs on a lent GPU machine cannot rot unnoticed."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CHECK = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu" / "check.sh"


def _dry_run(out: Path, *flags: str) -> dict:
    env = dict(os.environ, PYTHON=sys.executable)
    done = subprocess.run(
        [str(CHECK), "--dry-run", *flags, str(out)],
        capture_output=True,
        text=True,
        timeout=400,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| step | status | seconds | figures |" in done.stdout  # the table is printed
    files = sorted(p.name for p in out.iterdir())
    assert {"summary.json", "summary.md", "check.log"} <= set(files)
    assert len(files) <= 8  # what one lent machine's output folder may return
    assert any(name.endswith(".png") for name in files)  # the report's figures
    return json.loads((out / "summary.json").read_text())


def test_main_steps_run_and_report_their_figures(tmp_path):
    summary = _dry_run(tmp_path / "out")
    steps = {s["name"]: s for s in summary["steps"]}
    assert list(steps) == [
        "setup", "cuda_tests", "env_ceiling", "train", "eager", "ppo", "workers4", "all_cores",
        "compiled", "placements", "workers_gpu", "inference_gpu",
    ]  # fmt: skip
    assert all(s["status"] == "ok" for s in steps.values()), steps
    assert summary["machine"]["cores"] >= 1 and summary["machine"]["torch"]
    assert steps["cuda_tests"]["figures"].get("skipped", 0) > 0  # no CUDA here: skipped
    assert steps["env_ceiling"]["figures"]["steps_per_s"] > 0
    train = steps["train"]["figures"]
    assert train["sps_median"] > 0 and train["share_of_env_ceiling"] > 0
    phases = [train["phase_share"][p] for p in ("sample", "load", "learn", "update", "other")]
    assert sum(phases) == pytest.approx(1.0, abs=0.01)  # the phases add up to the wall time
    assert train["learner_graphed"] == 0.0  # the preset's recorded step, unrecorded on a CPU
    assert train["actor_busy_steps_per_s"] > 0  # the preset's decoupled actors report it
    ppo = steps["ppo"]["figures"]  # the variant a dry run trains: another algorithm and runner
    assert ppo["status"] == "completed" and ppo["sps_vs_preset"] > 0
    commands = {name: steps[name]["commands"][0] for name in steps}
    for name in ("eager", "workers4", "all_cores", "compiled"):
        # a CPU cannot tell these apart: their configs pass every check a run would make
        assert steps[name]["figures"] == {"status": "config checked"}, name
        assert "--print-config" in commands[name]
    assert (
        "runner.num_workers=4" in commands["workers4"]
        and "env.num_threads=" in commands["all_cores"]
    )
    assert "algo=ppo runner.name=inproc" in commands["ppo"]
    for name in ("workers_gpu", "inference_gpu"):  # the thesis's GPU half: planned, checked
        assert steps[name]["figures"] == {"status": "planned"}, name
        assert "--list" in commands[name]
    points = steps["placements"]["figures"]["points"]
    assert points["Exp1-cpu_only"]["status"] == "completed"
    assert points["Exp1-cpu_only"]["iterations"] >= 1
    # without a GPU the GPU placements are skipped, and say why
    assert points["Exp2-gpu_learner_gpu_actors"]["status"] == "skipped"
    assert "GPU" in points["Exp3-gpu_learner_cpu_actors"]["note"]
    table = (tmp_path / "out" / "summary.md").read_text()
    assert "rlperf sweep" in table and "rlperf train --preset atari-fast-gpu" in table


def test_pong_seeds_are_capped_and_the_cap_is_recorded(tmp_path):
    # a cap that leaves a loaded machine time to import and start each seed, so each saves
    # a run the report can draw
    # one seed: the others run the same code (the real check runs 1-3; here seed 4, as
    # when an arm gets more seeds); the seeds of another preset than the check's own (PQN
    # on the decoupled runner, its step recordable)
    summary = _dry_run(
        tmp_path / "out",
        *("--pong", "--pong-cap", "15", "--pong-seeds", "1", "--pong-first-seed", "4"),
        *("--preset", "pqn-fast-gpu"),
        *("--set", "pqn.update_epochs=1"),
    )
    (setup, pong) = summary["steps"]
    trained = [c for c in pong["commands"] if " train " in c]
    assert len(trained) == 1 and summary["preset"] == "pqn-fast-gpu"
    assert "--preset pqn-fast-gpu" in trained[0] and "pqn.update_epochs=1" in trained[0]
    assert "--seed 4" in trained[0]
    assert pong["name"] == "pong" and pong["status"] == "ok"
    seeds = pong["figures"]["seeds"]
    assert list(seeds) == ["seed4"]
    for seed in seeds.values():
        # stopped at the cap (SIGINT, then the run saves its manifest), or solved before it
        assert seed["cap_reached"] or seed["solved"]
        assert seed["command_to_exit_s"] < 15 + 20
        if seed["cap_reached"]:
            assert seed["status"] == "interrupted"
        # the seconds outside training: before the run started and after it ended
        assert 0 < seed["start_s"] < seed["command_to_exit_s"] and seed["exit_s"] >= 0
    assert pong["figures"]["median_command_to_exit_s"] > 0


def test_an_unknown_step_to_skip_is_refused_with_the_valid_ones(tmp_path):
    done = subprocess.run(
        [str(CHECK), "--skip", "placement", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHON=sys.executable),
    )  # fmt: skip
    assert done.returncode == 2
    assert "unknown steps ['placement']" in done.stderr and "placements" in done.stderr


def test_rays_wheel_carried_in_parts_is_joined_and_checked(tmp_path):
    """Ray's wheel is over one call's carry limit: it travels in parts
    (scripts/gpu_ray_parts.sh) and setup joins them; a part lost in transit is caught."""
    import hashlib
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check", CHECK.with_suffix(".py"))
    check = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = check  # its dataclasses look their module up there
    spec.loader.exec_module(check)
    wheel = os.urandom(10_000)
    parts = tmp_path / "parts"
    parts.mkdir()
    for i, start in enumerate(range(0, len(wheel), 4_000)):
        (parts / f"ray.whl.part-a{'abc'[i]}").write_bytes(wheel[start : start + 4_000])
    digest = hashlib.sha256(wheel).hexdigest()
    (parts / "ray.whl.sha256").write_text(f"{digest}  ray-2.60.0-cp312-cp312-x.whl\n")
    joined = check.join_parts(parts, tmp_path)
    assert joined.name == "ray-2.60.0-cp312-cp312-x.whl" and joined.read_bytes() == wheel
    (parts / "ray.whl.part-ab").unlink()
    with pytest.raises(ValueError, match="do not match"):
        check.join_parts(parts, tmp_path)


def test_an_inference_points_timings_reach_the_summary(tmp_path):
    # Table 3.4's first call and first game (finding 22) must come back from the machine
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check", CHECK.with_suffix(".py"))
    check = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = check  # its dataclasses look their module up
    spec.loader.exec_module(check)
    run = tmp_path / "runs" / "policy=thesis-1__R5-0_workers_gpu0"
    run.mkdir(parents=True)
    record = {"device": "cuda", "p50_ms": 0.6, "p90_ms": 0.7, "first_call_ms": 900.0,
              "first_episode_mean_ms": 1.9, "mean_return": -21.0, "calls": 1500}  # fmt: skip
    (run / "inference.json").write_text(json.dumps(record))
    (run / "manifest.json").write_text(json.dumps({"status": "completed"}))
    (tmp_path / "sweep.jsonl").write_text(json.dumps({"point": run.name, "status": "completed"}))
    point = check.sweep_points(tmp_path)[run.name]
    assert point["status"] == "completed"
    assert point["first_call_ms"] == 900.0 and point["p50_ms"] == 0.6
    assert "calls" not in point  # only what Table 3.4 reads
