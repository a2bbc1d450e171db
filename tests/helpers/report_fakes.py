"""Fake runs for the report tests: records made up by the test (named fake), in memory or
written out as run directories."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from rlperf.report.load import RunData

FAKE_CPU = {
    "model": "Fake CPU",
    "available_cores": 4,
    "logical_cores": 4,
    "isa": {"amx_bf16": True},
}


def fake_run(
    label: str,
    *,
    sps: list[float],
    phases: dict[str, float],
    runner: str = "subprocess",
    workers: int = 1,
    energy: float | None = None,
    rewards: list[float | None] | None = None,
    env_id: str = "ALE/Pong-v5",
    learner_sps: float | None = None,
    actor_sps: float | None = None,
    proc_cpu: float | None = None,
    model: str = "nature",
    devices: tuple[str, str] = ("cpu", "cpu"),
    gpu_mem_mb: dict[int, float] | None = None,
) -> RunData:
    """A run of ``len(sps)`` iterations (the first a warm-up) with these phase times;
    ``devices`` is (learner, actors); ``gpu_mem_mb`` the NVML memory of each GPU."""
    wall = sum(phases.values()) / 1000
    records = []
    for i, v in enumerate(sps):
        r = {
            "iteration": i + 1,
            "warmup": i == 0,
            "SPS": v,
            "time_this_iter_s": wall,
            "time_total_s": wall * (i + 1),
            "timesteps_total": int(v * wall * (i + 1)),
            "episode_reward_mean": rewards[i] if rewards else None,
            "energy/joules": energy,
            "sys/cpu_percent": 90.0,
            "sys/proc_cpu_percent": proc_cpu,
            "sys/proc_rss_mb": 1500.0,
            "perf/learner_samples_per_s": learner_sps,
            "perf/actor_steps_per_s": actor_sps,
            **{f"{p}_time_ms": ms for p, ms in phases.items()},
            **{f"sys/gpu{g}_mem_mb": mb for g, mb in (gpu_mem_mb or {}).items()},
        }
        records.append(r)
    config = {
        "algo": "ppo",
        "env": {"id": env_id, "engine": "gymnasium", "num_envs": 8, "frameskip": 4},
        "model": {"name": model},
        "runner": {
            "name": runner,
            "num_workers": workers,
            "learner_device": devices[0],
            "actor_device": devices[1],
            "precision": "fp32",
        },
        "stop": {"target_reward": None},
    }
    manifest = {
        "status": "completed",
        "cpu": FAKE_CPU,
        "rlperf_command": ["rlperf", "train", "-s", label],
    }
    return RunData(Path(label), label, config, manifest, records)


def write_run(run: RunData, root: Path) -> Path:
    """``run`` as a run directory under ``root`` (named by its label), as rlperf train
    writes one: config.yaml, manifest.json, metrics.jsonl."""
    path = root / run.label
    path.mkdir(parents=True)
    (path / "config.yaml").write_text(yaml.safe_dump(run.config))
    (path / "manifest.json").write_text(json.dumps(run.manifest))
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in run.records))
    return path


def fake_bench_run(
    label: str,
    *,
    env_id: str,
    env_steps: int,
    seconds: float,
    rewards: list[float],
    target: float,
    target_reached: dict | None,
    started_utc: str | None = None,
    ended_utc: str | None = None,
) -> RunData:
    """A completed run of a fake ``rlperf bench --target``: its records climb to
    ``env_steps`` and ``seconds`` (the last record's ``episode_reward_mean`` is
    ``rewards[-1]``), its manifest holds ``target_reached`` as a training session writes it
    (None: it stopped at its cap)."""
    run = fake_run(
        label,
        sps=[1000.0] * len(rewards),
        phases={"sample": 60.0, "learn": 30.0},
        rewards=list(rewards),
        env_id=env_id,
    )
    n = len(run.records)
    for i, r in enumerate(run.records, 1):
        r["timesteps_total"] = env_steps * i // n
        r["time_total_s"] = seconds * i / n
        r["episodes_total"] = 60 * i
        r["episode_reward_ema"] = r["episode_reward_mean"]
    run.config["stop"] = {"target_reward": target, "target_reward_metric": "mean100+ema"}
    run.manifest.update(
        stop_reason="target_reward" if target_reached else "wall_time_s",
        target_reached=target_reached,
        started_utc=started_utc,
        ended_utc=ended_utc,
        env_steps=env_steps,
        time_total_s=seconds,
    )
    return run


def write_fake_bench(
    path: Path, spec: dict, points: dict[str, tuple[str, RunData | None, dict]]
) -> Path:
    """A fake bench directory as ``rlperf bench`` leaves one: ``bench.json`` (``spec``, plus
    the points), ``sweep.jsonl`` and ``runs/<point>/``. ``points``: point name -> (its
    final ledger status, its run or None, extra fields of that ledger record)."""
    path.mkdir(parents=True)
    lines = []
    for name, (status, run, extra) in points.items():
        lines.append({"time": "2026-01-01T00:00:00+00:00", "point": name, "status": "running"})
        record = {"run_dir": f"runs/{name}", **extra}
        lines.append(
            {"time": "2026-01-01T00:10:00+00:00", "point": name, "status": status, **record}
        )
        if run is not None:
            run.label = name
            write_run(run, path / "runs")
    (path / "sweep.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    (path / "bench.json").write_text(json.dumps(spec))
    return path
