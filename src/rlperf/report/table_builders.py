"""The report's tables, built from what ``load.py`` found and ``summary.py`` computed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlperf.report import plots
from rlperf.report.load import Collection, InferenceData, TuneData
from rlperf.report.summary import PHASES, RunSummary
from rlperf.report.tables import Table, fmt


def summary_table(summaries: list[RunSummary]) -> Table:
    t = Table(
        "summary",
        "Configurations (steady iterations: warm-up left out)",
        [
            "configuration",
            "status",
            "algo",
            "runner",
            "engine",
            "workers",
            "envs",
            "model",
            "learner",
            "actors",
            "steady iters",
            "SPS median",
            "SPS q1",
            "SPS q3",
            "FPS median",
            "iteration s",
            "env steps",
            "final return",
        ],
    )
    for s in summaries:
        q1, med, q3 = s.sps if s.sps else (None, None, None)
        t.rows.append(
            [
                s.label,
                s.status + (" (warm-up only)" if s.warmup_only else ""),
                s.algo,
                s.runner,
                s.engine,
                s.workers,
                s.num_envs,
                s.model,
                s.learner_device,
                s.actor_device,
                s.steady,
                med,
                q1,
                q3,
                med * s.frameskip if med is not None else None,
                s.iteration_s,
                s.timesteps,
                s.final_reward,
            ]
        )
    return t


def sweep_table(col: Collection) -> Table:
    t = Table("sweep_status", "Sweep points", ["sweep", "point", "status", "attempts", "detail"])
    for sweep in col.sweeps:
        for point, r in sweep.points.items():
            status = r["status"]
            if status == "skipped":
                detail = r.get("reason", "")
            elif status in ("failed", "interrupted", "running"):
                detail = r.get("error") or (
                    "interrupted while running" if status == "running" else ""
                )
            else:
                detail = ""
            flags = r.get("flags") or []
            if flags:
                detail = (detail + " " if detail else "") + f"[{'; '.join(flags)}]"
            t.rows.append([sweep.name, point, status, r.get("attempt"), detail])
    return t


def phase_table(summaries: list[RunSummary]) -> Table:
    t = Table(
        "phases",
        "Mean time per iteration by phase (ms) and share (%)",
        [
            "configuration",
            *[f"{p} ms" for p in PHASES],
            "iteration ms",
            *[f"{p} %" for p in PHASES],
        ],
    )
    for s in summaries:
        total = sum(s.phase_ms.values()) if s.phase_ms else None
        t.rows.append(
            [
                s.label,
                *[s.phase_ms.get(p) for p in PHASES],
                total,
                *[s.phase_pct.get(p) for p in PHASES],
            ]
        )
    return t


def resource_table(summaries: list[RunSummary]) -> Table:
    gpus = sorted({i for s in summaries for d in (s.gpu_util, s.gpu_mem, s.gpu_mem_mb) for i in d})
    t = Table(
        "resources",
        "Resource use (mean over steady iterations)",
        [
            "configuration",
            "CPU % (machine)",
            "RAM % (machine)",
            "RSS MiB (run)",
            *[f"GPU{i} util %" for i in gpus],
            *[f"GPU{i} mem %" for i in gpus],
            *[f"GPU{i} MiB" for i in gpus],
            *[f"GPU{i} W" for i in gpus],
        ],
    )
    for s in summaries:
        t.rows.append(
            [
                s.label,
                s.cpu_percent,
                s.ram_percent,
                s.rss_mb,
                *[s.gpu_util.get(i) for i in gpus],
                *[s.gpu_mem.get(i) for i in gpus],
                *[s.gpu_mem_mb.get(i) for i in gpus],
                *[s.gpu_power_w.get(i) for i in gpus],
            ]
        )
    return t


def _policy_label(result: dict[str, Any]) -> str:
    """The model's name, and the trained policy's source when it is not a fresh network."""
    model, policy = str(result.get("model")), result.get("policy")
    if not policy or str(policy).startswith("fresh"):
        return model
    return f"{model} ({Path(str(policy)).name})"


def _energy_mj(result: dict[str, Any]) -> float | None:
    """Energy per call in millijoules, None where it was not measured."""
    joules = (result.get("energy") or {}).get("joules_per_call")
    return None if joules is None else 1000 * float(joules)


def _energy_source(result: dict[str, Any]) -> str | None:
    energy = result.get("energy")
    if not energy:
        return None  # a result from before energy was saved
    return energy.get("source") or f"not measured: {energy.get('reason')}"


def _latency_cell(result: dict[str, Any]) -> str:
    cell = f"{result['p50_ms']:.3f} / {result.get('p99_ms', float('nan')):.3f}"
    mj = _energy_mj(result)
    return cell + (f"; {mj:.3f} mJ" if mj is not None else "; energy n/a")


def inference_tables(items: list[InferenceData]) -> tuple[Table, Table]:
    """Table 4.1's shape (models x backends: latency and energy per call) and one row per
    inference point (latency, first call and first game, energy, fidelity)."""
    models = list(dict.fromkeys(_policy_label(i.result) for i in items))
    backends = list(dict.fromkeys(plots._backend_name(i) for i in items))
    latency = Table(
        "inference_latency",
        "Model time per call, p50 / p99 (ms), and energy per call (mJ; its source in the "
        "next table), batch as noted (the shape of the thesis's Table 4.1)",
        ["model", *backends],
    )
    for model in models:
        row: list[Any] = [model]
        for b in backends:
            hit = next(
                (
                    i
                    for i in items
                    if _policy_label(i.result) == model and plots._backend_name(i) == b
                ),
                None,
            )
            if hit is None or hit.result.get("p50_ms") is None:
                row.append(None)
            else:
                row.append(_latency_cell(hit.result))
        latency.rows.append(row)
    fidelity = Table(
        "inference_fidelity",
        "Every inference point: steady latency, the first (cold) call and the first game "
        "(warm-up calls counted in it), energy per call, and fidelity against torch fp32 "
        "(action agreement, logits and value on recorded observations)",
        [
            "point",
            "model",
            "backend",
            "precision",
            "calls",
            "p50 ms",
            "p99 ms",
            "mean ms",
            "first call ms",
            "first game ms",
            "energy mJ/call",
            "energy source",
            "agreement",
            "max |dlogits|",
            "relative",
            "max |dvalue|",
            "mean |dvalue|",
            "fidelity",
            "runtime",
        ],
    )
    for i in items:
        r = i.result
        f = r.get("fidelity") or {}
        verdict = "-" if not f else ("pass" if f.get("passed") else f"FAIL: {f.get('problem')}")
        fidelity.rows.append(
            [
                i.label,
                _policy_label(r),
                plots._backend_name(i),
                r.get("precision"),
                r.get("calls"),
                r.get("p50_ms"),
                r.get("p99_ms"),
                r.get("mean_ms"),
                r.get("first_call_ms"),
                r.get("first_episode_mean_ms"),
                _energy_mj(r),
                _energy_source(r),
                f"{f['agreement']:.2%}" if f.get("agreement") is not None else None,
                f.get("max_abs_dlogits"),
                f.get("rel_dlogits"),
                f.get("max_abs_dvalue"),
                f.get("mean_abs_dvalue"),
                verdict,
                r.get("detail") or r.get("source"),
            ]
        )
    return latency, fidelity


def tune_trials_table(tune: TuneData) -> Table:
    """Every trial of a time-to-target study: state, time, why it ended, parameters."""
    t = Table(
        "tune_trials",
        "Trials",
        ["trial", "state", "time to target s", "trial s", "why it ended", "parameters"],
    )
    for trial in tune.trials:
        params = ", ".join(f"{k}={fmt(v)}" for k, v in trial["params"].items())
        t.rows.append(
            [
                f"{trial['number']} (base)" if trial.get("base") else trial["number"],
                trial["state"],
                trial.get("time_to_target_s"),
                trial.get("seconds"),
                trial.get("reason") or "",
                params,
            ]
        )
    return t
