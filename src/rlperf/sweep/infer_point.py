"""One inference point of a sweep, run as ``python -m rlperf.sweep.infer_point CONFIG OUT_DIR``.

It does in one fresh process what ``rlperf export``, ``rlperf quantize`` and ``rlperf infer
--check-fidelity`` do by hand, through the same :mod:`rlperf.deploy` functions:

1. the policy: a trained run (``infer.run``: a run directory, or ``shipped:pong`` copied
   under ``OUT_DIR/policy``), or a fresh network of ``model.name`` for
   ``env.id`` (random weights: the thesis restored "any checkpoint" for its inference
   experiments, since the time per step depends on the structure, not the values), saved as
   a run directory under ``OUT_DIR/policy``;
2. the backend's file, exported or quantized when it is missing (int8 calibration on
   observations of the game: the trained policy's own play, or random play for a fresh
   network);
3. ``infer.steps`` greedy model calls (or ``infer.episodes`` games) in the evaluation env,
   each call timed alone, the first (cold) call and the first game kept apart, and the
   energy per call over the games (:func:`rlperf.deploy.infer.run_measured`);
4. fidelity against torch fp32 (logits and value) on ``infer.fidelity_observations``
   recorded observations.

Results go to ``OUT_DIR/inference.json``, with a ``manifest.json`` (command, machine,
status) like a training run's, so reports treat both alike.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys
import typing
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

INFERENCE_FILE = "inference.json"


@dataclass
class InferSettings:
    """The ``infer.*`` keys of an inference sweep."""

    run: str | None = None
    """A trained run directory whose latest policy is timed, or ``shipped:NAME`` for a policy shipped with rlperf (shipped:pong); unset = a fresh network of model.name (random weights)."""
    backend: str = "torch"
    """Inference backend: torch, onnx, onnx-int8, tflite, tflite-int8 or edgetpu."""
    device: str = "cpu"
    """torch backend only: cpu, cuda or cuda:N."""
    threads: int = 1
    """CPU threads of the runtime."""
    batch_size: int = 1
    """Envs stepped together, one model call for all of them."""
    steps: int | None = 1000
    """Timed model calls (a cap when episodes is set too)."""
    episodes: int | None = None
    """Games to play (the thesis played 10); unset = until steps calls."""
    seed: int = 0
    """Env seed of the first game."""
    fidelity_observations: int = 300
    """Recorded observations on which the backend is compared with torch fp32 (0 = no check)."""
    calibration_observations: int = 300
    """Observations that calibrate an int8 quantization made by this point."""


INFER_FIELDS: dict[str, Any] = typing.get_type_hints(InferSettings)


def infer_defaults() -> dict[str, Any]:
    """The default ``infer.*`` settings as a plain dict."""
    return dataclasses.asdict(InferSettings())


def _scratch_run(out_dir: Path, cfg: Any) -> Path:
    """A run directory holding a fresh (seeded, untrained) network of ``cfg.model``."""
    import torch

    from rlperf.config.load import dump_config
    from rlperf.core.checkpoint import atomic_write_text, checkpoint_name, save_checkpoint
    from rlperf.deploy.policy import env_spec
    from rlperf.models.catalog import build_model, run_model_name

    # the run's config.yaml names the model actually built
    cfg.model.name = run_model_name(cfg.model, cfg.env.id)
    run = out_dir / "policy"
    run.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run / "config.yaml", dump_config(cfg))
    _, shape, _, actions = env_spec(cfg)
    torch.manual_seed(cfg.seed)
    net = build_model(cfg.model, shape, actions)
    save_checkpoint(
        run / "checkpoints", checkpoint_name(0, 0), {"algorithm": {"policy": net.state_dict()}}, 1
    )
    return run


def _policy_run(source: str, out_dir: Path) -> Path:
    """The run directory of ``infer.run``; a shipped policy is copied under ``out_dir`` first,
    since exports are written next to the policy and the package must stay as installed."""
    import shutil

    from rlperf.deploy.policy import SHIPPED_PREFIX, resolve_policy_source

    run = resolve_policy_source(source)
    if not source.startswith(SHIPPED_PREFIX):
        return run
    copy = out_dir / "policy"
    if not copy.exists():
        shutil.copytree(run, copy)
    return copy


def _ensure_file(
    policy: Any, backend: str, calibration: int, seed: int, player: Any = None
) -> None:
    """Write the exported or quantized file ``backend`` loads, when it is not there yet."""
    from rlperf.deploy.backends import BACKENDS
    from rlperf.deploy.export import FILES, export_dir, export_run

    key = BACKENDS[backend].file_key
    if key is None or key not in FILES or (export_dir(policy.run_dir) / FILES[key]).is_file():
        return
    if key in ("onnx", "tflite"):
        export_run(policy.run_dir, key, policy=policy)
        return
    from rlperf.deploy.dataset import record_observations
    from rlperf.deploy.quantize import quantize_run

    obs, _ = record_observations(policy.cfg, policy.dim, calibration, seed=seed, policy=player)
    quantize_run(policy, obs, (key.removesuffix("-int8"),))


def _manifest(command: list[str], status: str, started: str, error: str | None) -> dict[str, Any]:
    from rlperf.telemetry import system

    return {
        "rlperf_command": command,
        "status": status,
        "stop_reason": error,
        "started_utc": started,
        "ended_utc": None if status == "running" else datetime.now(UTC).isoformat(),
        "git_sha": system.git_sha(Path(__file__).resolve().parent),
        "versions": system.package_versions(),
        "cpu": system.cpu_info(),
        "gpus": system.gpu_info(),
        "threads": system.thread_env(),
    }


def run_point(config: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """Do the point's work and return what goes into ``inference.json``."""
    from rlperf.config.load import apply_dict
    from rlperf.config.schema import RunConfig
    from rlperf.deploy.backends import BACKENDS, make_backend
    from rlperf.deploy.dataset import record_observations
    from rlperf.deploy.fidelity import check_backend
    from rlperf.deploy.infer import run_measured
    from rlperf.deploy.policy import load_run_policy, torch_outputs

    cfg = RunConfig()
    apply_dict(cfg, config["config"], "inference point config")
    s = InferSettings(**config["infer"])
    run = _policy_run(s.run, out_dir) if s.run else _scratch_run(out_dir, cfg)
    policy = load_run_policy(run)
    # A trained policy is calibrated and checked on frames of its own play (what it will
    # see deployed); a fresh network's play is random anyway.
    player = policy.model if s.run else None
    _ensure_file(policy, s.backend, s.calibration_observations, s.seed + 7, player)
    reference = obs = None
    if s.fidelity_observations > 0:  # torch's logits first: a torch backend may move the net
        obs, _ = record_observations(
            policy.cfg, policy.dim, s.fidelity_observations, seed=s.seed + 1, policy=player
        )
        reference = torch_outputs(policy.model.cpu(), obs)
    backend = make_backend(s.backend, policy, s.threads, s.batch_size, device=s.device)
    result, energy = run_measured(
        backend, policy, episodes=s.episodes, steps=s.steps, seed=s.seed, batch_size=s.batch_size
    )
    out: dict[str, Any] = {
        "model": policy.cfg.model.name,
        "env": policy.cfg.env.id,
        "backend": s.backend,
        "precision": BACKENDS[s.backend].precision,
        "device": s.device,
        "threads": s.threads,
        "batch_size": s.batch_size,
        "detail": backend.detail,
        "policy": s.run or "fresh network (random weights)",
        "checkpoint": str(policy.checkpoint),
        **result.record(),
        "energy": energy.record(),
        "fidelity": None,
    }
    if obs is not None and reference is not None:
        f = check_backend(backend, obs, reference)
        out["fidelity"] = {
            "observations": f.observations,
            "agreement": f.agreement,
            "max_abs_dlogits": f.max_abs_dlogits,
            "rel_dlogits": f.rel_dlogits,
            "max_abs_dvalue": f.max_abs_dvalue,
            "mean_abs_dvalue": f.mean_abs_dvalue,
            "rel_dvalue": f.rel_dvalue,
            "passed": f.passed,
            "problem": f.problem,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point of the point's process; exit 2 with one line on bad input."""
    from rlperf.core.checkpoint import atomic_write_text
    from rlperf.core.errors import UserInputError

    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 2:
        print("usage: python -m rlperf.sweep.infer_point CONFIG.json OUT_DIR", file=sys.stderr)
        return 2
    config_path, out_dir = Path(argv[0]), Path(argv[1])
    command = ["python", "-m", "rlperf.sweep.infer_point", *argv]
    started = datetime.now(UTC).isoformat()
    out_dir.mkdir(parents=True, exist_ok=True)

    def manifest(status: str, error: str | None = None) -> None:
        text = json.dumps(_manifest(command, status, started, error), indent=2, default=str)
        atomic_write_text(out_dir / "manifest.json", text + "\n")

    manifest("running")
    try:
        config = json.loads(config_path.read_text())
        result = run_point(config, out_dir)
    except UserInputError as exc:
        manifest("failed", str(exc))
        print(f"rlperf: error: {exc}", file=sys.stderr)
        return 2
    except BaseException as exc:
        manifest("failed", f"{type(exc).__name__}: {exc}")
        raise
    result["command"] = shlex.join(command)
    atomic_write_text(out_dir / INFERENCE_FILE, json.dumps(result, indent=2) + "\n")
    manifest("completed")
    print(
        f"{result['backend']} ({result['detail']}): {result['calls']} calls, "
        f"p50 {result['p50_ms']:.3f} ms, p99 {result['p99_ms']:.3f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
