"""``rlperf tune``: a short search for the fastest way to train a given algorithm and game here.

Five stages, each a small sweep (isolated processes, ``sweep.jsonl``, resumable), each
starting from the best point of the previous one:

1. architecture: runner x engine (in-process gymnasium, the C++ engines for Atari games,
   env worker processes; decoupled actors for APPO/IMPALA);
2. placement, where GPUs exist: the learner on a GPU, and for runners with actor processes
   the actors on the CPU, the same GPU or a second one;
3. parallelism: worker processes (or, in process, the number of envs) around the winner;
4. threads: the learner's torch threads;
5. precision: the learner in bf16 where the machine computes it natively (AMX-BF16 or
   AVX512-BF16 CPUs, bf16 GPUs), if the base is fp32.

Every point trains for ``--point-s`` seconds and is scored by its median SPS over the
iterations after warm-up. The batch per update (envs x steps per env) is kept constant when
the number of envs changes, so every point trains the same algorithm and only the speed
differs. The result is the fastest configuration, its command line and the runners-up.

Over 400 lines: the SPS search's five stages plus the command line of both objectives (the
time-to-target study itself is tune_target.py and tune_trial.py).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlperf.arguments import (
    ArgumentParser,
    config_overrides,
    duration_flag,
    int_flag,
)
from rlperf.config.load import apply_dict, load_preset, set_key
from rlperf.config.schema import RunConfig
from rlperf.core.checkpoint import atomic_write_text
from rlperf.core.errors import UserInputError
from rlperf.sweep.machine import Machine
from rlperf.sweep.plan import plan_points
from rlperf.sweep.run import run_sweep
from rlperf.sweep.spec import SweepSpec

DEFAULT_POINT_S = 30.0
DEFAULT_MAX_POINTS = 10
RESULT_FILE = "tune.json"


@dataclass(frozen=True)
class Candidate:
    """A point of the search: a name and the config keys it sets over the base."""

    name: str
    keys: dict[str, Any]


def _steps_key(algo: str) -> str:
    return f"{algo}.num_steps"


def _divisors(n: int, wanted: list[int]) -> list[int]:
    return sorted({w for w in wanted if w >= 1 and n % w == 0})


def architecture_candidates(cfg: RunConfig, machine: Machine, atari: bool) -> list[Candidate]:
    """Stage 1: runner x engine at the base's envs."""
    n = cfg.env.num_envs
    workers = max(_divisors(n, list(range(1, machine.cores + 1))) or [1])
    out = [Candidate("s1-inproc-gymnasium", {"runner.name": "inproc", "env.engine": "gymnasium"})]
    if atari:
        if importlib.util.find_spec("envpool") is not None:
            out.append(
                Candidate("s1-inproc-envpool", {"runner.name": "inproc", "env.engine": "envpool"})
            )
        out.append(
            Candidate("s1-inproc-ale-vector", {"runner.name": "inproc", "env.engine": "ale-vector"})
        )
    if cfg.algo == "ppo":
        out.append(
            Candidate(
                f"s1-subprocess-w{workers}",
                {
                    "runner.name": "subprocess",
                    "env.engine": "gymnasium",
                    "runner.num_workers": workers,
                },
            )
        )
    else:  # APPO and IMPALA correct for policy lag: actors may run beside the learner
        out.append(
            Candidate(
                f"s1-decoupled-w{workers}",
                {
                    "runner.name": "decoupled",
                    "env.engine": "gymnasium",
                    "runner.num_workers": workers,
                },
            )
        )
    return out


ACTOR_PROCESS_RUNNERS = ("decoupled", "ray")
"""Runners whose acting network lives in other processes, on runner.actor_device."""


def placement_candidates(best: Candidate, machine: Machine) -> list[Candidate]:
    """Stage 2, with GPUs only: the learner on the first GPU; where actors are processes of
    their own, them on the CPU, the same GPU or (two GPUs) the second one."""
    runner = best.keys.get("runner.name", "inproc")
    if machine.gpus == 0 or runner == "hogwild":  # hogwild shares its model in CPU memory
        return []
    if runner in ACTOR_PROCESS_RUNNERS:
        actors = ["cpu", "cuda:0"] + (["cuda:1"] if machine.gpus >= 2 else [])
    else:
        actors = ["cuda:0"]  # acting is the learner's network, where the learner is
    stem = best.name.split("-", 1)[1]
    return [
        Candidate(
            f"s2-{stem}-gpu-actors-{actor.replace(':', '')}",
            {**best.keys, "runner.learner_device": "cuda:0", "runner.actor_device": actor},
        )
        for actor in actors
    ]


def parallelism_candidates(best: Candidate, cfg: RunConfig, machine: Machine) -> list[Candidate]:
    """Stage 2: workers (worker runners) or the number of envs (in process) around ``best``,
    with the batch per update kept at num_envs x num_steps."""
    keys = dict(best.keys)
    runner = keys.get("runner.name", "inproc")
    n = int(keys.get("env.num_envs", cfg.env.num_envs))
    steps = int(keys.get(_steps_key(cfg.algo), getattr(cfg, cfg.algo).num_steps))
    out = []
    if runner in ("subprocess", "decoupled"):
        current = int(keys.get("runner.num_workers", 1))
        for w in _divisors(n, [machine.cores // 2, machine.cores, 2 * machine.cores]):
            if w != current:
                out.append(Candidate(f"s3-{runner}-w{w}", {**keys, "runner.num_workers": w}))
        return out
    batch = n * steps
    for envs in (n // 2, n * 2):
        if envs >= 1 and batch % envs == 0 and batch // envs >= 8:
            engine = keys.get("env.engine", "gymnasium")
            out.append(
                Candidate(
                    f"s3-inproc-{engine}-e{envs}",
                    {**keys, "env.num_envs": envs, _steps_key(cfg.algo): batch // envs},
                )
            )
    return out


def thread_candidates(best: Candidate, machine: Machine) -> list[Candidate]:
    """Stage 3: the learner's torch threads (1, half the cores, all cores)."""
    current = best.keys.get("runner.torch_threads")
    options = sorted({1, max(1, machine.cores // 2), machine.cores})
    stem = best.name.split("-", 1)[1]
    return [
        Candidate(f"s4-{stem}-t{t}", {**best.keys, "runner.torch_threads": t})
        for t in options
        if t != current and not (current is None and t == machine.cores)
    ]


def precision_candidates(best: Candidate, cfg: RunConfig, machine: Machine) -> list[Candidate]:
    """Stage 4: the winner with a bf16 learner, where the machine has native bf16 math."""
    precision = best.keys.get("runner.precision", cfg.runner.precision)
    if not machine.bf16 or precision != "fp32":
        return []
    stem = best.name.split("-", 1)[1]
    return [Candidate(f"s5-{stem}-bf16", {**best.keys, "runner.precision": "bf16"})]


def _sps(record: dict[str, Any] | None) -> float | None:
    if not record or record.get("status") != "completed":
        return None
    value = (record.get("summary") or {}).get("sps_median")
    return float(value) if value is not None else None


def command_line(cfg_keys: dict[str, Any], base_args: list[str]) -> str:
    """``rlperf train`` with the winner's keys."""
    parts = ["rlperf", "train", *base_args]
    for key, value in cfg_keys.items():
        parts.append(f"{key}={value}")
    return " ".join(parts)


def run_tune(
    base_presets: list[str],
    base_keys: dict[str, Any],
    out_dir: Path,
    *,
    machine: Machine,
    point_s: float,
    max_points: int,
    base_args: list[str],
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run the five stages in ``out_dir`` and return the ranking (also in ``tune.json``)."""
    from rlperf.envs.make import is_atari

    cfg = RunConfig()
    for preset in base_presets:
        apply_dict(cfg, load_preset(preset), f"preset {preset}")
    for key, value in base_keys.items():
        set_key(cfg, key, value)
    budget = {
        "stop.wall_time_s": point_s,
        "stop.total_timesteps": None,
        "stop.iterations": None,
        "stop.target_reward": None,
        "checkpoint.every": 0,
        "checkpoint.every_s": 0,
        "telemetry.tensorboard": False,
    }
    results: dict[str, tuple[Candidate, float | None]] = {}
    best: Candidate | None = None
    used = 0
    stages = [
        lambda _b: architecture_candidates(cfg, machine, is_atari(cfg.env.id)),
        lambda b: placement_candidates(b, machine),
        lambda b: parallelism_candidates(b, cfg, machine),
        lambda b: thread_candidates(b, machine),
        lambda b: precision_candidates(b, cfg, machine),
    ]
    for number, make in enumerate(stages, 1):
        candidates = [c for c in make(best) if c.name not in results][: max(0, max_points - used)]
        if not candidates:
            continue
        used += len(candidates)
        say(f"stage {number}: {len(candidates)} point(s) of {point_s:g} s each")
        spec = SweepSpec(
            name="tune",
            source="rlperf tune",
            command="train",
            presets=list(base_presets),
            base={**base_keys, **budget},
            points=[{"name": c.name, **c.keys} for c in candidates],
            timeout_s=point_s * 4 + 180,  # start-up and the last iteration come on top
            retries=1,
        )
        points = plan_points(spec, [], machine)
        swept = run_sweep(spec, points, out_dir, say=say)
        for c in candidates:
            results[c.name] = (c, _sps(swept.statuses.get(c.name)))
        if swept.interrupted:
            break
        scored = [(s, c) for c, s in results.values() if s is not None]
        if scored:
            best = max(scored, key=lambda sc: sc[0])[1]
        elif number == 1:
            break  # nothing ran: nothing to refine
    ranking = sorted(
        ({"point": c.name, "keys": c.keys, "sps_median": s} for c, s in results.values()),
        key=lambda r: -(r["sps_median"] or -1.0),
    )
    summary = {
        "machine": machine.describe(),
        "point_s": point_s,
        "base_presets": base_presets,
        "base_keys": base_keys,
        "ranking": ranking,
        "best": ranking[0] if ranking and ranking[0]["sps_median"] is not None else None,
    }
    if summary["best"] is not None:
        summary["command"] = command_line(summary["best"]["keys"], base_args)
    atomic_write_text(out_dir / RESULT_FILE, json.dumps(summary, indent=2) + "\n")
    return summary


def format_ranking(summary: dict[str, Any], show: int = 5) -> str:
    """The fastest point, its command, and the runners-up."""
    rows = summary["ranking"]
    best = summary["best"]
    if best is None:
        return "tune: no point completed; see the logs in the output directory"
    lines = [
        f"fastest: {best['point']}: {best['sps_median']:.0f} SPS (median after warm-up)",
        f"  {summary['command']}",
        "runners-up:",
    ]
    for r in rows[1 : 1 + show]:
        sps = (
            f"{r['sps_median']:.0f} SPS ({r['sps_median'] / best['sps_median']:.0%})"
            if r["sps_median"]
            else "no measurement (failed, or no iteration after warm-up: raise --point-s)"
        )
        lines.append(f"  {r['point']}: {sps}")
    return "\n".join(lines)


def tune_parser() -> ArgumentParser:
    return ArgumentParser(
        prog="rlperf tune",
        description="Search this machine's fastest way to train an algorithm on a game. "
        "--objective sps (default): runner, engine, envs/workers, threads and precision for the "
        "most env steps per second (a few short runs). --objective time-to-target: an Optuna "
        "study of system knobs and compute-relevant hyperparameters for the least wall clock "
        "to --target, pruned at wall-clock rungs, resumable (DIR/study.db).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="KEY=VALUE overrides set the base config (e.g. model.name=thesis-1).\n"
        "Output (sps): DIR/tune.json (ranking, best command), DIR/sweep.jsonl, DIR/runs/<point>/\n"
        "Output (time-to-target): DIR/tune.json, DIR/best.yaml (a preset), DIR/study.db,\n"
        "  DIR/trials/trial-N/; live view: optuna-dashboard sqlite:///DIR/study.db;\n"
        "  figures: rlperf report DIR -o reports/tune",
        allow_abbrev=False,
    )


def cmd_tune(argv: Sequence[str]) -> int:
    p = tune_parser()
    p.add_argument("--objective", default="sps", help="sps (default) or time-to-target")
    p.add_argument(
        "--algo", default="ppo", help="algorithm: ppo, appo, impala; time-to-target also dqn"
    )
    p.add_argument("--env", default="ALE/Pong-v5", help="game id (default ALE/Pong-v5)")
    p.add_argument(
        "--preset",
        action="append",
        help="presets for the base config (default cleanrl-atari for Atari games, else cartpole)",
    )
    p.add_argument(
        "--point-s", default=str(DEFAULT_POINT_S), help="sps: seconds of training per point"
    )
    p.add_argument(
        "--max-points", default=str(DEFAULT_MAX_POINTS), help="sps: at most this many points"
    )
    p.add_argument("--target", help="time-to-target: the reward to reach (required)")
    p.add_argument("--trials", default="20", help="time-to-target: trials to finish (default 20)")
    p.add_argument("--budget", help="time-to-target: machine time for all trials, e.g. 2h")
    p.add_argument("--rung", default="60s", help="time-to-target: first rung (default 60s)")
    p.add_argument("--max-trial", default="30m", help="time-to-target: longest trial (default 30m)")
    p.add_argument("--space", metavar="FILE", help="time-to-target: search space YAML")
    p.add_argument("--parallel", default="1", help="time-to-target: trials at once (default 1)")
    p.add_argument(
        "--seed", default="1", help="time-to-target: the seed of every trial and the sampler"
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="DIR",
        help="output directory (default runs/tune/ENV__ALGO[__ttt])",
    )
    args, rest = p.parse_known_args(list(argv))
    if args.objective not in ("sps", "time-to-target"):
        raise UserInputError(f"--objective must be sps or time-to-target, got {args.objective!r}")
    from rlperf.envs.make import is_atari, validate_env_id

    validate_env_id(args.env)
    # cleanrl-atari's recipe for Atari games, the cartpole preset's (MLP) for feature games
    presets = args.preset or (["cleanrl-atari"] if is_atari(args.env) else ["cartpole"])
    keys: dict[str, Any] = {"algo": args.algo, "env.id": args.env}
    for key, value in config_overrides(rest):
        keys[key.replace("-", "_")] = value
    base_args = [f"--preset {p}" for p in presets] + [f"--algo {args.algo}", f"--env {args.env}"]
    base_args += [f"{k}={v}" for k, v in keys.items() if k not in ("algo", "env.id")]
    stem = f"{args.env.replace('/', '-')}__{args.algo}"
    machine = Machine.detect()
    if args.objective == "time-to-target":
        out = Path(args.output) if args.output else Path("runs") / "tune" / f"{stem}__ttt"
        return _cmd_time_to_target(args, presets, keys, out, machine)
    try:
        point_s = float(args.point_s)
        max_points = int(args.max_points)
    except ValueError:
        raise UserInputError("--point-s must be a number and --max-points an integer") from None
    if point_s <= 0 or max_points < 1:
        raise UserInputError("--point-s and --max-points must be positive")
    out = Path(args.output) if args.output else Path("runs") / "tune" / stem
    print(f"tune: {args.algo} on {args.env}, {machine.describe()} -> {out}", flush=True)
    summary = run_tune(
        presets,
        keys,
        out,
        machine=machine,
        point_s=point_s,
        max_points=max_points,
        base_args=base_args,
        say=lambda text: print(text, flush=True),
    )
    print(format_ranking(summary))
    print(f"tune_dir: {out}")
    return 0 if summary["best"] is not None else 1


def _cmd_time_to_target(
    args: argparse.Namespace,
    presets: list[str],
    keys: dict[str, Any],
    out: Path,
    machine: Machine,
) -> int:
    import os

    from rlperf.envs.make import is_atari
    from rlperf.sweep.search_space import default_space, load_space
    from rlperf.sweep.tune_target import format_summary, run_target_tune
    from rlperf.sweep.tune_trial import TargetTune, TuneInterrupted, rungs, trial_base_config

    if args.target is None:
        raise UserInputError("--objective time-to-target needs --target R (the reward to reach)")
    try:
        target = float(args.target)
    except ValueError:
        raise UserInputError(f"--target must be a number, got {args.target!r}") from None
    first = duration_flag("--rung", args.rung)
    longest = duration_flag("--max-trial", args.max_trial)
    if longest < first:
        raise UserInputError(
            f"--max-trial ({args.max_trial}) must be at least --rung ({args.rung})"
        )
    budget = duration_flag("--budget", args.budget) if args.budget else None
    trials = int(int_flag("--trials", args.trials, 1))  # type: ignore[arg-type]
    parallel = int(int_flag("--parallel", args.parallel, 1))  # type: ignore[arg-type]
    seed = int(int_flag("--seed", args.seed, 0))  # type: ignore[arg-type]
    cores = sorted(os.sched_getaffinity(0))
    if parallel > len(cores):
        raise UserInputError(
            f"--parallel {parallel} needs a CPU per trial; this process may use {len(cores)}"
        )
    base = trial_base_config(presets, keys, target, seed)
    space = (
        load_space(Path(args.space), base)
        if args.space
        else default_space(base, is_atari(args.env), len(cores) // parallel)
    )
    tune = TargetTune(
        out_dir=out,
        presets=presets,
        base_keys=keys,
        space=space,
        target=target,
        rungs_s=rungs(first, longest),
        n_trials=trials,
        budget_s=budget,
        parallel=parallel,
        cores=cores,
        seed=seed,
        machine=machine.describe(),
    )
    print(
        f"tune: time to {target:g} for {args.algo} on {args.env}, {machine.describe()} -> {out}\n"
        f"  {trials} trial(s), rungs {', '.join(f'{r:g}' for r in tune.rungs_s)} s, "
        f"space {space.source}: {', '.join(p.key for p in space.params)}",
        flush=True,
    )
    try:
        summary = run_target_tune(tune, say=lambda text: print(text, flush=True))
    except TuneInterrupted as exc:
        print(f"tune: stopped by {exc}; run the same command again to continue")
        return 130
    print(format_summary(summary))
    print(f"tune_dir: {out}")
    return 0 if summary["best"] is not None else 1
