"""The ``rlperf`` command line: train, models, doctor; export, dataset, quantize, infer;
sweep, tune, report, study, bench.

Bad input never shows a traceback: it is one line, ``rlperf: error: ...``, and exit code 2.

Over 400 lines: the train command's flags, thesis aliases and resume rules; every other
subcommand parses in its own module.
"""

from __future__ import annotations

import argparse
import functools
import os
import signal
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from rlperf.arguments import ArgumentParser, config_overrides, int_flag
from rlperf.config.load import (
    apply_dict,
    available_presets,
    dump_run_config,
    get_key,
    iter_fields,
    load_config_file,
    load_preset,
    set_key,
    type_name,
)
from rlperf.config.schema import ModelConfig, RunConfig
from rlperf.config.section import declared_ranges
from rlperf.config.thesis_options import (
    THESIS_PRESET,
    apply_workers,
    gpu_placement,
    share_gpus,
)
from rlperf.core.errors import ConfigError, UserInputError

EXIT_USAGE = 2


@functools.cache
def _config_keys_help() -> str:
    """The keys' part of ``rlperf train --help``; built once per process (every parse of a
    train command line builds the parser, and a sweep or a fuzz test parses many)."""
    lines = ["config keys (set with --KEY VALUE, --KEY=VALUE or KEY=VALUE; dashes or underscores):"]
    section, ranges, defaults = "", declared_ranges(RunConfig), RunConfig()
    for key, hint, doc in iter_fields():
        top = key.split(".")[0] if "." in key else ""
        if top != section:
            section = top
            lines.append(f"\n  [{section}]")
        kind = type_name(hint) + (f", {ranges[key].text}" if key in ranges else "")
        lines.append(f"  {key} ({kind}, default {get_key(defaults, key)!r})\n      {doc}")
    return "\n".join(lines)


THESIS_ALIASES = """thesis aliases (train_ppo.py options, accepted verbatim; -w, -g, -d or -m 1..6
without --preset train with the thesis's PPO, preset rllib-2021):
  -m/--model 1..6      model.name=thesis-N (names such as nature, mlp work too)
  -g/--gpu             none|gpu0|gpu1|both: the visible GPUs (CUDA_VISIBLE_DEVICES); the learner
                       goes on a GPU when any is visible, workers take what the learner leaves
  -d/--driver-gpus X   GPUs for the learner (RLlib's driver); the rest is divided equally among
                       the workers (each reserves its share of a GPU, Ray picks which: with
                       -g both -d 0.001 both GPUs); with X = 0 the learner stays on the CPU
  -w/--workers N       RLlib 1.1's num_workers: N rollout worker processes (runner rllib), each
                       acting with its own policy copy, the new weights sent to every worker
                       after each update (the update phase); one env per worker
                       (--envs-per-worker K: K), the train batch rounded up to whole rounds of
                       fragments as RLlib did; -w 0: the learner's process samples alone
  -s/--save-name NAME  the run directory becomes RUNS_ROOT/NAME (not with -r: a resumed run keeps
                       its directory)
  -i/--iters N         train N iterations; with -r, N more after the checkpoint it resumes from (the
                       thesis trained in stages of 1000); stop.iterations=N is always a total
  -c/--cpus N          RLlib's num_cpus: CPUs declared, not a pin (the thesis, 3.3.1): the ray
                       runner's local Ray gets num_cpus=N, the inproc learner N torch threads;
                       pin with -a
  -a/--set-affinity L  runner.cpu_affinity, a CPU list such as 0,1 or 0-3
  -r/--restore-dir DIR same as --resume DIR (--restore_dir too)"""


def _presets_help() -> str:
    """The built-in presets for ``--help``, wrapped between names only: argparse's own
    wrapping splits a name such as atari-fast-gpu at its hyphens, and it can no longer be
    copied."""
    lines = textwrap.wrap(
        ", ".join(available_presets()), width=94, break_on_hyphens=False, break_long_words=False
    )
    return "presets (--preset NAME):\n" + "\n".join(f"  {line}" for line in lines)


def _train_parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="rlperf train",
        description="Train an agent; every run writes a run directory with metrics, checkpoints and a manifest.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_presets_help() + "\n\n" + THESIS_ALIASES + "\n\n" + _config_keys_help(),
        allow_abbrev=False,
    )
    p.add_argument(
        "--algo", help="algorithm, e.g. ppo, appo, impala, dqn, pqn (a wrong name lists them all)"
    )
    p.add_argument("--env", help="environment id, e.g. ALE/Pong-v5 or CartPole-v1")
    p.add_argument(
        "--preset",
        action="append",
        default=[],
        help="YAML preset (repeatable, applied in order): a built-in one (listed below) or a file",
    )
    p.add_argument(
        "-m", "--model", help="model name or thesis model number 1..6 (see `rlperf models`)"
    )
    p.add_argument(
        "--runner",
        help="execution architecture, e.g. inproc, subprocess, decoupled, play-train "
        "(a wrong name lists them all)",
    )
    p.add_argument("--engine", help="what steps the games: gymnasium, envpool or ale-vector")
    p.add_argument(
        "--ray-address",
        help="runner ray: join this cluster (auto, HOST:PORT or ray://HOST:PORT); "
        "unset = a local Ray",
    )
    p.add_argument("--num-workers", help="env worker processes of the subprocess runner")
    p.add_argument(
        "--envs-per-worker",
        help="envs per worker: sets env.num_envs to num_workers x this (applied last)",
    )
    p.add_argument(
        "--seed",
        help="random seed; with --resume, another seed forks the run at the checkpoint "
        "(its draws from there on come from this seed; copy the run directory first to keep "
        "the original's line)",
    )
    p.add_argument("--runs-root", help="directory for run directories (default runs)")
    p.add_argument(
        "--resume",
        "-r",
        "--restore-dir",
        "--restore_dir",  # the spelling in the thesis's appendix
        dest="resume",
        metavar="RUN_DIR",
        help="continue a run from its latest checkpoint",
    )
    p.add_argument(
        "--checkpoint",
        metavar="PATH",
        help="with --resume: resume from this checkpoint instead of the latest",
    )
    p.add_argument("--no-progress", action="store_true", help="no live console display")
    p.add_argument(
        "--print-config",
        action="store_true",
        help="check the config and print it as config.yaml would hold it, then exit: nothing "
        "is trained or written (values left auto are decided when a run starts)",
    )
    p.add_argument(
        "--nan-policy",
        help="a NaN/inf in a batch, loss or gradient: raise (default; stop and save the "
        "batch), skip_update, warn or none",
    )
    p.add_argument("-g", "--gpu", choices=["none", "gpu0", "gpu1", "both"], help=argparse.SUPPRESS)
    p.add_argument("-d", "--driver-gpus", help=argparse.SUPPRESS)
    p.add_argument("-w", "--workers", help=argparse.SUPPRESS)
    p.add_argument("-s", "--save-name", help=argparse.SUPPRESS)
    p.add_argument("-i", "--iters", help=argparse.SUPPRESS)
    p.add_argument("-c", "--cpus", help=argparse.SUPPRESS)
    p.add_argument("-a", "--set-affinity", help=argparse.SUPPRESS)
    return p


FROZEN_ON_RESUME = ("algo", "env.id", "env.engine", "model.")


def build_train_config(argv: Sequence[str]) -> tuple[RunConfig, argparse.Namespace]:
    """The resolved RunConfig: defaults < (saved config on resume) < presets < flags, in order."""
    args, rest = _train_parser().parse_known_args(list(argv))
    explicit: list[tuple[str, object]] = []
    for flag, key in [
        ("algo", "algo"),
        ("env", "env.id"),
        ("model", "model.name"),
        ("runner", "runner.name"),
        ("engine", "env.engine"),
        ("ray_address", "runner.ray_address"),
        ("num_workers", "runner.num_workers"),
        ("seed", "seed"),
        ("nan_policy", "nan_policy"),
        ("runs_root", "runs_root"),
        ("save_name", "run_name"),
        ("set_affinity", "runner.cpu_affinity"),
    ]:
        value = getattr(args, flag)
        if value is not None:
            explicit.append((key, value))
    if args.iters is not None:
        explicit.append(("stop.iterations", _iterations_to_run(args)))
    placement = None
    if args.gpu is not None:
        placement = gpu_placement(args.gpu, args.driver_gpus)
        os.environ["CUDA_VISIBLE_DEVICES"] = placement.visible  # before anything starts CUDA
        explicit += [
            ("runner.learner_device", placement.learner_device),
            ("runner.actor_device", placement.actor_device),
        ]
    elif args.driver_gpus is not None:
        raise ConfigError("--driver-gpus needs --gpu (gpu0, gpu1 or both)")
    explicit += config_overrides(rest)
    explicit_keys = {key for key, _ in explicit}

    if args.resume:
        run_dir = _run_dir_of(Path(args.resume))
        if args.save_name is not None and args.save_name != run_dir.name:
            raise ConfigError(
                f"-s/--save-name {args.save_name} with --resume: a resumed run keeps its "
                f"directory {run_dir}; drop -s, or start a new run without --resume"
            )
        cfg = load_config_file(run_dir / "config.yaml")
        saved = {k: get_key(cfg, k) for k, _, _ in iter_fields()}
    else:
        cfg, saved = RunConfig(), None
    if args.checkpoint and not args.resume:
        raise ConfigError("--checkpoint needs --resume RUN_DIR")
    presets = list(args.preset)
    if not presets and saved is None and _thesis_command(args):
        # train_ppo.py's own commands train with the thesis's PPO, not CleanRL's
        presets = [THESIS_PRESET]
    for preset in presets:
        apply_dict(cfg, load_preset(preset), f"preset {preset}")
    for key, value in explicit:
        set_key(cfg, key, value)
    if args.workers is not None:
        workers = int_flag("-w/--workers", args.workers, minimum=0)
        assert workers is not None
        epw = int_flag("--envs-per-worker", args.envs_per_worker)
        note = apply_workers(cfg, workers, given=explicit_keys, envs_per_worker=epw)
        if note:
            print(f"rlperf: -w {workers}: {note}", file=sys.stderr)
        if placement is not None:
            from rlperf.training.registry import RUNNER_FACTS  # heavy: the runners

            on_ray = RUNNER_FACTS[cfg.runner.name].on_ray
            share_gpus(cfg, placement, workers, on_ray=on_ray, given=explicit_keys)
    elif args.envs_per_worker is not None:
        set_key(
            cfg,
            "env.num_envs",
            get_key(cfg, "runner.num_workers")
            * int(int_flag("--envs-per-worker", args.envs_per_worker)),  # type: ignore[arg-type],
        )
    if args.cpus is not None:
        _thesis_cpus(cfg, args.cpus)
    if saved is not None:
        for key, _, _ in iter_fields():
            if (
                key.startswith(FROZEN_ON_RESUME)
                and get_key(cfg, key) != saved[key]
                and not (key == "model.name" and _same_model(saved[key], get_key(cfg, key)))
            ):
                raise ConfigError(
                    f"{key} cannot change on resume (run has {saved[key]!r}, got {get_key(cfg, key)!r})"
                )
    return cfg, args


def _iterations_to_run(args: argparse.Namespace) -> int:
    """``stop.iterations`` for ``-i N``: N, or on resume N more than the checkpoint holds
    (``train_ppo.py`` continued from a checkpoint for another ``--iters``)."""
    n = int_flag("-i/--iters", args.iters)
    assert n is not None
    if not args.resume or _starts_over(args):
        return n
    from rlperf.core.checkpoint import checkpoint_counters  # torch: only when resuming

    return int(checkpoint_counters(Path(args.checkpoint or args.resume))["iteration"]) + n


def _starts_over(args: argparse.Namespace) -> bool:
    """Whether ``--resume`` names a run that was killed before its first checkpoint: it
    then trains again from its config.yaml, in its own directory."""
    from rlperf.core.checkpoint import list_checkpoints

    if args.checkpoint:
        return False
    run_dir = _run_dir_of(Path(args.resume))
    return Path(args.resume).resolve() == run_dir.resolve() and not list_checkpoints(
        run_dir / "checkpoints"
    )


def _thesis_command(args: argparse.Namespace) -> bool:
    """Whether the command uses train_ppo.py's own options: -w, -g, -d, or -m with a thesis
    model number (the names of rlperf's models are not the thesis's)."""
    thesis_model = args.model is not None and str(args.model).isdigit()
    return thesis_model or any(v is not None for v in (args.workers, args.gpu, args.driver_gpus))


def _thesis_cpus(cfg: RunConfig, cpus: str) -> None:
    """-c N: RLlib's ``ray.init(num_cpus=N)`` (see THESIS_ALIASES). A number told to the
    scheduler, not a restriction: the thesis's Exp14 (num_cpus=9) and Exp17 (the same plus
    sched_setaffinity to 9 CPUs) differ exactly there, so only -a pins."""
    n = int_flag("-c/--cpus", cpus)
    assert n is not None
    cfg.runner.ray_num_cpus = n
    if cfg.runner.name == "inproc" and cfg.runner.torch_threads is None:
        cfg.runner.torch_threads = n


def _same_model(a: object, b: object) -> bool:
    from rlperf.models.catalog import resolve_model_name

    return resolve_model_name(str(a)) == resolve_model_name(str(b))


def _run_dir_of(path: Path) -> Path:
    """The run directory of ``path`` (a run directory, or a checkpoint inside one)."""
    for candidate in (path, *path.parents[:2]):
        if (candidate / "config.yaml").is_file():
            return candidate
    raise ConfigError(
        f"{path} is not a run directory (no config.yaml found); pass the directory a run printed as run_dir"
    )


def cmd_train(argv: Sequence[str]) -> int:
    cfg, args = build_train_config(argv)
    if args.print_config:
        # Every refusal a run would meet before it starts, then what config.yaml will hold.
        from rlperf.training.resolve import preview

        print(dump_run_config(preview(cfg)), end="")
        return 0
    from rlperf.training.session import (  # heavy imports after parsing
        default_run_name,
        start_session,
    )

    resume_from: Path | None = None
    restart = False
    if args.resume:
        run_dir = _run_dir_of(Path(args.resume))
        # --resume may itself name a checkpoint inside the run; --checkpoint picks one too.
        checkpoint = Path(args.checkpoint or args.resume)
        if (
            run_dir.resolve() not in checkpoint.resolve().parents
            and checkpoint.resolve() != run_dir.resolve()
        ):
            raise ConfigError(f"checkpoint {checkpoint} is not inside the run directory {run_dir}")
        restart = _starts_over(args)
        if restart:
            print(
                f"rlperf: {run_dir} has no checkpoint yet (stopped before its first): training "
                "it again from its config.yaml; what it recorded is kept in superseded/",
                file=sys.stderr,
                flush=True,
            )
        else:
            resume_from = checkpoint
    else:
        run_dir = Path(cfg.runs_root) / (cfg.run_name or default_run_name(cfg))
    session = start_session(
        cfg,
        run_dir,
        command=["rlperf", "train", *argv],
        resume_from=resume_from,
        progress=not args.no_progress,
        restart=restart,
    )
    session.run()
    print(f"run_dir: {run_dir}")
    return session.exit_code


def cmd_models(argv: Sequence[str]) -> int:
    p = ArgumentParser(
        prog="rlperf models",
        description="List the built-in models with input shape and trainable parameters.",
    )
    p.add_argument("--actions", default="6", help="number of actions for the heads (Pong: 6)")
    p.add_argument("--frames", default="4", help="stacked frames (input channels)")
    args = p.parse_args(list(argv))
    try:
        actions, frames = int(args.actions), int(args.frames)
    except ValueError:
        raise ConfigError("--actions and --frames must be integers") from None
    if actions < 1 or frames < 1:
        raise ConfigError("--actions and --frames must be positive")
    from rlperf.models.catalog import MODELS, build_model, count_parameters

    print(f"{'model':<10} {'input':<16} {'parameters':>12}  description")
    for name, spec in MODELS.items():
        if spec.kind == "mlp":
            shape: tuple[int, ...] = (4,)
            shape_text = "features (e.g. 4)"
        else:
            dim = spec.input_dim or 84
            shape = (frames, dim, dim)
            shape_text = f"{frames}x{dim}x{dim} uint8"
        params = count_parameters(build_model(ModelConfig(name=name), shape, actions))
        print(f"{name:<10} {shape_text:<16} {params:>12,}  {spec.description}")
    print(
        f"(trainable parameters with {actions} actions and {frames} stacked frames; see --actions, --frames)"
    )
    return 0


def _measure_default_precision(remeasure: bool = False) -> dict:
    """What runner.precision=auto picks for the default Atari learner (Nature-CNN, minibatch
    256) on this machine: a few seconds of timing, or the cached figures."""
    import torch

    from rlperf.core.autoprecision import choose_precision
    from rlperf.models.catalog import build_model
    from rlperf.telemetry.system import cpu_fingerprint

    net = build_model(ModelConfig(name="nature"), (4, 84, 84), 6)
    obs = torch.randint(0, 256, (256, 4, 84, 84), dtype=torch.uint8)
    choice = choose_precision(net, obs, torch.device("cpu"), cpu_fingerprint(), remeasure=remeasure)
    return {**choice.to_dict(), "model": "Nature-CNN on CPU"}


def cmd_doctor(argv: Sequence[str]) -> int:
    parser = ArgumentParser(
        prog="rlperf doctor", description="Machine facts and the recommended placement."
    )
    measure = parser.add_mutually_exclusive_group()
    measure.add_argument(
        "--no-measure",
        action="store_true",
        help="skip timing the learner in fp32 and bf16 (about 12 s; cached per machine)",
    )
    measure.add_argument(
        "--remeasure",
        action="store_true",
        help="time the learner again and replace the cached figures (a shared machine's speed "
        "differs between days; the cache keeps the day it was measured)",
    )
    args = parser.parse_args(list(argv))
    from rlperf.telemetry.doctor import doctor_report, format_doctor

    precision = None if args.no_measure else _measure_default_precision(args.remeasure)
    print(format_doctor(doctor_report(precision)))
    return 0


def cmd_export(argv: Sequence[str]) -> int:
    from rlperf.deploy.commands import cmd_export as run

    return run(argv)


def cmd_dataset(argv: Sequence[str]) -> int:
    from rlperf.deploy.commands import cmd_dataset as run

    return run(argv)


def cmd_quantize(argv: Sequence[str]) -> int:
    from rlperf.deploy.commands import cmd_quantize as run

    return run(argv)


def cmd_infer(argv: Sequence[str]) -> int:
    from rlperf.deploy.commands import cmd_infer as run

    return run(argv)


def cmd_sweep(argv: Sequence[str]) -> int:
    from rlperf.sweep.commands import cmd_sweep as run

    return run(argv)


def cmd_tune(argv: Sequence[str]) -> int:
    from rlperf.sweep.commands import cmd_tune as run

    return run(argv)


def cmd_report(argv: Sequence[str]) -> int:
    from rlperf.report.command import cmd_report as run

    return run(argv)


def cmd_study(argv: Sequence[str]) -> int:
    from rlperf.studies.study import cmd_study as run

    return run(argv)


def cmd_bench(argv: Sequence[str]) -> int:
    from rlperf.studies.bench import cmd_bench as run

    return run(argv)


def cmd_enjoy(argv: Sequence[str]) -> int:
    from rlperf.enjoy import cmd_enjoy as run

    return run(argv)


COMMANDS = {
    "train": cmd_train,
    "models": cmd_models,
    "doctor": cmd_doctor,
    "enjoy": cmd_enjoy,
    # deploy (rlperf.deploy; the runtimes come with the 'export' extra)
    "export": cmd_export,
    "dataset": cmd_dataset,
    "quantize": cmd_quantize,
    "infer": cmd_infer,
    # experiments (rlperf.sweep, rlperf.report, rlperf.studies.study, rlperf.studies.bench)
    "sweep": cmd_sweep,
    "tune": cmd_tune,
    "report": cmd_report,
    "study": cmd_study,
    "bench": cmd_bench,
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(
            "usage: rlperf {train,models,doctor,enjoy,export,dataset,quantize,infer,sweep,tune,report,study,bench} ...\n\n"
            "  train     train an agent (rlperf train --help for every option)\n"
            "  models    list the built-in models\n"
            "  doctor    machine facts and the recommended device placement\n"
            "  enjoy     play a run's checkpoint: scores (Montezuma: rooms), --video out.mp4|.gif\n"
            "  export    export a run's policy to ONNX or TFLite\n"
            "  dataset   record game observations (for calibration and fidelity checks)\n"
            "  quantize  int8 quantization calibrated on recorded observations\n"
            "  infer     timed greedy episodes with an inference backend; --check-fidelity\n"
            "  sweep     run a grid or list of configs, each in its own process (resumable)\n"
            "  tune      search for the fastest runner, engine, workers, threads and precision here\n"
            "  report    HTML report (figures, tables, diagnosis) from run or sweep directories\n"
            "  study     a whole study in one command: rlperf study quick, rlperf study thesis\n"
            "  bench     presets against each other on a suite of games at a wall-clock budget,\n"
            "            seeds, human-normalised scores aggregated by rliable (resumable)"
        )
        return 0 if argv else EXIT_USAGE
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(
            f"rlperf: error: unknown command {command!r}; valid: {', '.join(COMMANDS)}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        return COMMANDS[command](rest)
    except UserInputError as exc:
        print(f"rlperf: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # the reader of our output went away (`rlperf bench --list | head`): stop quietly,
        # as a command killed by SIGPIPE would, and keep the exit's flush from writing again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
