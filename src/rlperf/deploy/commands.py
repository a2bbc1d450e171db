"""The deploy subcommands of ``rlperf``: export, dataset, quantize, infer.

Each parses its own arguments with the CLI's one-line-error parser; bad input raises
:class:`UserInputError` (exit code 2). Heavy runtimes are imported after parsing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from rlperf.arguments import ArgumentParser, int_flag
from rlperf.core.errors import UserInputError
from rlperf.deploy.rollout_flags import add_rollout_flags, apply_rollout_flags, split_checkpoint


def _sizes(before: int, after: int) -> str:
    return f"{before / 1024:,.0f} KiB -> {after / 1024:,.0f} KiB ({after / before:.0%})"


def cmd_export(argv: Sequence[str]) -> int:
    from rlperf.deploy.export import FORMATS

    p = ArgumentParser(
        prog="rlperf export",
        description="Export a run's policy to RUN_DIR/export/policy.onnx or policy.tflite: raw "
        "observation in (scaling inside), logits and value out.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory written by rlperf train")
    p.add_argument("--format", required=True, choices=FORMATS, help="onnx or tflite")
    p.add_argument("--checkpoint", metavar="PATH", help="a checkpoint of the run (default: latest)")
    p.add_argument(
        "--batch-size", default="1", help="tflite only: the fixed batch size (onnx: dynamic)"
    )
    p.add_argument("--force", action="store_true", help="overwrite an existing export")
    args = p.parse_args(list(argv))
    batch = int_flag("--batch-size", args.batch_size) or 1
    if args.format == "onnx" and batch != 1:
        raise UserInputError("--batch-size is for tflite; the ONNX graph has a dynamic batch axis")
    from rlperf.deploy.export import export_run

    result = export_run(
        Path(args.run_dir),
        args.format,
        checkpoint=Path(args.checkpoint) if args.checkpoint else None,
        batch_size=batch,
        force=args.force,
    )
    print(
        f"wrote {result.path} ({result.bytes / 1024:,.0f} KiB, outputs: {', '.join(result.outputs)})"
    )
    return 0


def cmd_dataset(argv: Sequence[str]) -> int:
    from rlperf.deploy.dataset import PLAY_MODES

    p = ArgumentParser(
        prog="rlperf dataset",
        description="Record observations of a game with a run's preprocessing (for calibration "
        "and fidelity checks), as a .npy array.",
    )
    p.add_argument(
        "run_dir", metavar="RUN_DIR", nargs="?", help="take env and preprocessing from this run"
    )
    p.add_argument("--env", help="a game id instead of a run (default preprocessing, 84x84)")
    p.add_argument("--dim", help="with --env: frame size (default 84)")
    p.add_argument("--n", default="500", help="number of observations (default 500)")
    p.add_argument("-o", "--output", required=True, help="output file, .npy")
    p.add_argument(
        "--play", default="random", choices=PLAY_MODES, help="random actions or the run's policy"
    )
    p.add_argument("--seed", default="0", help="env and action seed (default 0)")
    p.add_argument("--force", action="store_true", help="overwrite an existing output file")
    args = p.parse_args(list(argv))
    n = int_flag("--n", args.n)
    try:
        seed = int(args.seed)
    except ValueError:
        raise UserInputError(f"--seed must be an integer, got {args.seed!r}") from None
    if (args.run_dir is None) == (args.env is None):
        raise UserInputError("give either RUN_DIR or --env ENV")
    if args.play == "policy" and args.run_dir is None:
        raise UserInputError("--play policy needs RUN_DIR (the policy to play)")
    if args.dim is not None and args.run_dir is not None:
        raise UserInputError("--dim is for --env; a run's frame size comes from the run")
    out = Path(args.output)
    if out.suffix != ".npy":
        raise UserInputError(f"output {out} must end in .npy (a NumPy array file)")
    if out.exists() and not args.force:
        raise UserInputError(f"{out} already exists; pass --force to overwrite it")
    from rlperf.deploy.dataset import record_observations, save_observations

    if args.run_dir is not None:
        from rlperf.deploy.policy import load_run_policy, resolve_policy_source

        policy = load_run_policy(resolve_policy_source(args.run_dir))
        cfg, dim = policy.cfg, policy.dim
        player = policy.model if args.play == "policy" else None
    else:
        from rlperf.config.schema import RunConfig
        from rlperf.envs.make import is_atari, validate_env_id

        cfg = RunConfig()
        cfg.env.id = args.env
        validate_env_id(args.env)
        dim = int_flag("--dim", args.dim) or 84
        if not is_atari(args.env):
            dim = 0
        player = None
    obs, resets = record_observations(cfg, dim, n, seed=seed, policy=player)
    save_observations(out, obs, force=args.force)
    print(
        f"wrote {out}: {obs.shape[0]} observations of shape {tuple(obs.shape[1:])} {obs.dtype} "
        f"from {cfg.env.id} ({args.play} play, {resets} episode resets)"
    )
    return 0


def cmd_quantize(argv: Sequence[str]) -> int:
    from rlperf.deploy.quantize import QUANT_FORMATS

    p = ArgumentParser(
        prog="rlperf quantize",
        description="int8 post-training static quantization calibrated on recorded observations: "
        "RUN_DIR/export/policy_int8.onnx (ONNX Runtime QDQ, per-channel) and policy_int8.tflite "
        "(full integer, uint8 input and output).",
    )
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument(
        "--dataset", required=True, help="observations recorded by rlperf dataset (.npy)"
    )
    p.add_argument(
        "--format", action="append", choices=QUANT_FORMATS, help="onnx, tflite (default both)"
    )
    p.add_argument("--checkpoint", metavar="PATH", help="a checkpoint of the run (default: latest)")
    p.add_argument("--force", action="store_true", help="overwrite existing int8 files")
    args = p.parse_args(list(argv))
    from rlperf.deploy.dataset import load_observations
    from rlperf.deploy.policy import check_run_dir, load_run_policy
    from rlperf.deploy.quantize import quantize_run

    check_run_dir(Path(args.run_dir))
    policy = load_run_policy(Path(args.run_dir), Path(args.checkpoint) if args.checkpoint else None)
    obs = load_observations(Path(args.dataset), policy.obs_shape, policy.obs_dtype)
    formats = tuple(dict.fromkeys(args.format or QUANT_FORMATS))
    for r in quantize_run(policy, obs, formats, force=args.force):
        print(f"{r.fmt}: {r.path} {_sizes(r.fp32_bytes, r.int8_bytes)}")
    return 0


def _list_backends(run_dir: str | None) -> int:
    from rlperf.deploy.backends import backend_status

    policy = None
    if run_dir is not None:
        from rlperf.deploy.policy import load_run_policy, resolve_policy_source

        policy = load_run_policy(resolve_policy_source(run_dir))
    for name, reason in backend_status(policy):
        print(f"{name:<12} {'available' if reason is None else 'unavailable: ' + reason}")
    return 0


def cmd_infer(argv: Sequence[str]) -> int:
    p = ArgumentParser(
        prog="rlperf infer",
        description="Play greedy episodes with an inference backend and time each model call; "
        "or compare backends with torch fp32 (--check-fidelity).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="backends: torch, onnx, onnx-int8, tflite, tflite-int8, edgetpu "
        "(--list-backends says which run here)",
    )
    p.add_argument(
        "run_dir",
        metavar="RUN_DIR",
        nargs="?",
        help="a run directory written by rlperf train, or shipped:pong (the trained Pong policy "
        "shipped with rlperf)",
    )
    p.add_argument(
        "--backend", action="append", help="inference backend (repeatable with --check-fidelity)"
    )
    p.add_argument("--episodes", help="number of games to play")
    p.add_argument("--steps", help="number of model calls (a cap per game with --check-fidelity)")
    p.add_argument("--time-output", metavar="F.csv", help="per-episode timings as CSV")
    p.add_argument(
        "--step-output",
        metavar="F.csv",
        help="per-step timings as CSV: step, env, episode, model and env time (ms), action, reward",
    )
    p.add_argument("--threads", default="1", help="CPU threads of the runtime (default 1)")
    p.add_argument(
        "-a",
        "--set-affinity",
        metavar="LIST",
        help="pin this process to these CPUs, e.g. 0 or 0-1 (the thesis's -a); default: no pinning",
    )
    p.add_argument("--batch-size", default="1", help="envs stepped together per call (default 1)")
    p.add_argument("--seed", default="0", help="env seed of the first game (default 0)")
    p.add_argument("--device", help="torch backend: cpu or cuda (default cpu)")
    p.add_argument("--checkpoint", metavar="PATH", help="a checkpoint of the run (default: latest)")
    p.add_argument("--list-backends", action="store_true", help="which backends can run here")
    p.add_argument(
        "--check-fidelity",
        action="store_true",
        help="compare backends with torch fp32: action agreement, max |dlogits|, greedy returns",
    )
    p.add_argument("--dataset", help="with --check-fidelity: observations to compare on (.npy)")
    p.add_argument(
        "--force", action="store_true", help="overwrite existing --time-output/--step-output files"
    )
    add_rollout_flags(p)
    args = p.parse_args(list(argv))
    if args.list_backends:
        return _list_backends(args.run_dir)
    if args.run_dir is None:
        raise UserInputError("RUN_DIR is required (or --list-backends)")
    threads = int_flag("--threads", args.threads) or 1
    batch = int_flag("--batch-size", args.batch_size) or 1
    episodes = int_flag("--episodes", args.episodes)
    steps = int_flag("--steps", args.steps)
    try:
        seed = int(args.seed)
    except ValueError:
        raise UserInputError(f"--seed must be an integer, got {args.seed!r}") from None
    from rlperf.deploy.backends import BACKENDS

    names = args.backend or (["torch"] if not args.check_fidelity else None)
    for name in names or []:
        if name not in BACKENDS:
            raise UserInputError(f"unknown backend {name!r}; valid: {', '.join(BACKENDS)}")
    args.run_dir, checkpoint = split_checkpoint(args.run_dir)  # the thesis names a checkpoint
    if checkpoint is not None and args.checkpoint:
        raise UserInputError(f"{checkpoint} is a checkpoint already; drop --checkpoint")
    args.checkpoint = args.checkpoint or checkpoint
    for output in (args.time_output, args.step_output):
        if output and Path(output).exists() and not args.force:
            raise UserInputError(f"{output} already exists; pass --force to overwrite it")
    with _pinned(args.set_affinity):
        return _infer(args, names, threads, batch, episodes, steps, seed)


@contextlib.contextmanager
def _pinned(cpu_list: str | None) -> Iterator[None]:
    """This process on the CPUs of ``cpu_list`` inside the block (the thesis's -a), its
    own affinity again after it (``main`` may run inside a longer-lived process)."""
    if cpu_list is None:
        yield
        return
    from rlperf.config.load import parse_cpu_list

    cpus = parse_cpu_list(cpu_list)
    available = sorted(os.sched_getaffinity(0))
    if not set(cpus) <= set(available):
        raise UserInputError(
            f"--set-affinity {cpu_list}: CPUs {sorted(set(cpus) - set(available))} "
            f"are not available; this process may use {available}"
        )
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, available)


def _infer(args, names, threads, batch, episodes, steps, seed) -> int:  # noqa: ANN001
    from rlperf.deploy.policy import load_run_policy, resolve_policy_source

    run_dir = resolve_policy_source(args.run_dir)  # read only: a shipped policy works too
    policy = load_run_policy(run_dir, Path(args.checkpoint) if args.checkpoint else None)
    setup = apply_rollout_flags(args, policy)
    if args.check_fidelity:
        return _fidelity(args, policy, names, threads, batch, episodes, steps, seed, setup.device)
    if not names or len(names) != 1:
        raise UserInputError("give one --backend (several only with --check-fidelity)")
    if episodes is None and steps is None:
        raise UserInputError("give --episodes N or --steps N")
    if setup.step_output and setup.step_output.exists() and not args.force:
        raise UserInputError(f"{setup.step_output} already exists; pass --force to overwrite it")
    from rlperf.deploy.backends import make_backend
    from rlperf.deploy.infer import run_measured, write_csv

    for note in setup.notes:
        print(note)
    backend = make_backend(names[0], policy, threads, batch, device=setup.device)
    result, energy = run_measured(
        backend, policy, episodes=episodes, steps=steps, seed=seed, batch_size=batch,
        video_dir=setup.video_dir,
    )  # fmt: skip
    if args.time_output:
        write_csv(Path(args.time_output), result.episodes, force=args.force, energy=energy)
    if setup.step_output:
        write_csv(setup.step_output, result.steps, force=args.force)
    print(f"backend: {backend.detail}")
    print(result.summary(names[0], batch, threads))
    print(energy.line())
    if setup.video_dir is not None:
        print(f"videos: {len(list(setup.video_dir.glob('game-*.mp4')))} in {setup.video_dir}")
    return 0


def _fidelity(args, policy, names, threads, batch, episodes, steps, seed, device) -> int:  # noqa: ANN001
    from rlperf.deploy.backends import backend_status, make_backend
    from rlperf.deploy.dataset import load_observations, record_observations
    from rlperf.deploy.fidelity import check_fidelity, format_report

    if names is None:  # every backend that can run here and has its file
        names = [name for name, reason in backend_status(policy) if reason is None]
        skipped = [f"{n} ({r})" for n, r in backend_status(policy) if r is not None]
        if skipped:
            print("skipped: " + "; ".join(skipped))
    backends = [make_backend(n, policy, threads, batch, device=device) for n in names]
    if args.dataset:
        obs = load_observations(Path(args.dataset), policy.obs_shape, policy.obs_dtype)
    else:
        obs, _ = record_observations(policy.cfg, policy.dim, 500, seed=seed)
    results, torch_returns = check_fidelity(
        policy, backends, obs, episodes=episodes or 0, seed=seed, max_steps=steps
    )
    print(format_report(results, torch_returns))
    return 0 if all(r.passed for r in results) else 1
