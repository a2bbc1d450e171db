"""``rlperf bench``: presets against each other on a suite of games, at a wall-clock budget.

Every (preset, game, seed) is one ``rlperf train`` run of ``--minutes`` of training
(``stop.wall_time_s``), in its own process: a sweep (``rlperf.sweep``), so the bench is
resumable (a completed run is never rerun or touched; an interrupted one starts afresh)
and one failed run never stops the rest. Runs go one at a time by default, so that each
has the whole machine and its budget buys what it would alone; ``--parallel N`` runs N at
once, each pinned to its own ``cores // N`` CPUs. The bench ends in a report whose bench
section scores every run the same way and aggregates the scores with rliable
(``report/bench_section.py``).

``--target R`` also gives every run ``stop.target_reward=R``: a run stops when its preset's
own criterion (``stop.target_reward_metric``) reaches R, or at its budget, which stays the
cap. The report then adds the time to the target per preset and game.

The output directory is a sweep directory plus ``bench.json`` (presets, games, seeds,
budget, target, the commands, and which point is which run), which is how a report
recognises it. Another command given the same directory adds its runs to the bench (more
seeds of one preset, another preset, another game): ``bench.json`` then holds every run the
directory was given, and a budget, target or ``--parallel`` other than the bench's is
refused, so that every run of a bench stays comparable with every other.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlperf.arguments import (
    ArgumentParser,
    config_overrides,
    finite_float_flag,
    int_flag,
    positive_float_flag,
)
from rlperf.core.errors import UserInputError
from rlperf.sweep.execute import CpuShares
from rlperf.sweep.ledger import LEDGER_FILE

SUITES: dict[str, tuple[str, ...]] = {
    # Aitchison, Sweetser and Hutter, "Atari-5: Distilling the Arcade Learning Environment
    # down to Five Games", ICML 2023: five games whose scores predict the 57-game median.
    "atari5": (
        "ALE/BattleZone-v5",
        "ALE/DoubleDunk-v5",
        "ALE/NameThisGame-v5",
        "ALE/Phoenix-v5",
        "ALE/Qbert-v5",
    ),
}
RESERVED_KEYS = (
    "env.id",
    "seed",
    "stop.wall_time_s",
    "stop.target_reward",
    "run_name",
    "runs_root",
)
"""Config keys the bench sets per run: an override of one would make the runs the same, or
(``stop.target_reward``, which only ``--target`` sets) stop them early without bench.json,
and so the report, knowing it."""
START_ALLOWANCE_S = 300.0
"""Seconds a run may take beyond its budget (start-up, precision timing, last checkpoint)
before it is stopped as timed out."""
DEFAULT_RUNS = Path("runs") / "bench"
DEFAULT_REPORTS = Path("reports") / "bench"
BENCH_FILE = "bench.json"


@dataclass(frozen=True)
class BenchPlan:
    """What a bench runs: every preset on every game with every seed."""

    name: str
    presets: list[str]
    suite: str
    games: list[str]
    seeds: list[int]
    budget_s: float
    parallel: int = 1
    target: float | None = None
    """``--target``: every run's ``stop.target_reward`` (None: runs train to the budget)."""

    def points(self) -> dict[str, dict[str, Any]]:
        """Point name -> {preset, game, seed}, seeds outermost: after each round of seeds
        every preset has run on every game, and machine drift hits the presets alike."""
        out = {}
        for seed in self.seeds:
            for game in self.games:
                for preset in self.presets:
                    name = f"{_label(preset)}__{_label(game)}__s{seed}"
                    out[name] = {"preset": preset, "game": game, "seed": seed}
        return out

    def spec(self) -> Any:
        """The sweep that runs it (a :class:`~rlperf.sweep.spec.SweepSpec`)."""
        from rlperf.sweep.spec import SweepSpec

        return SweepSpec(
            name=self.name,
            source="rlperf bench",
            description=f"bench {self.name}: {', '.join(self.presets)} on {self.suite}, "
            f"{len(self.seeds)} seed(s), {self.budget_s / 60:g} min each",
            command="train",
            base=self.base(),
            points=[
                {"name": name, "preset": p["preset"], "env.id": p["game"], "seed": p["seed"]}
                for name, p in self.points().items()
            ],
            timeout_s=self.budget_s * 1.25 + START_ALLOWANCE_S,
            retries=1,
        )

    def base(self) -> dict[str, Any]:
        """The keys every run gets: the budget, and the target when there is one (the
        preset's ``stop.target_reward_metric`` is left alone: it is part of the recipe)."""
        base: dict[str, Any] = {"stop.wall_time_s": self.budget_s}
        if self.target is not None:
            base["stop.target_reward"] = self.target
        return base

    def describe(self) -> str:
        """The budget (and target) of every run, for the console."""
        text = f"{self.budget_s / 60:g} min"
        if self.target is not None:
            text += f" or to target {self.target:g} (each preset's stop.target_reward_metric)"
        return text

    def record(self, command: str) -> dict[str, Any]:
        """``bench.json``'s contents."""
        return {
            "name": self.name,
            "command": command,
            "commands": [command],
            "presets": self.presets,
            "suite": self.suite,
            "games": self.games,
            "seeds": self.seeds,
            "budget_s": self.budget_s,
            "target": self.target,
            "parallel": self.parallel,
            "points": self.points(),
        }


COMPARABLE = (("budget_s", "--minutes"), ("target", "--target"), ("parallel", "--parallel"))
"""What every run of one bench shares (``bench.json``'s key, and the flag that sets it)."""


def read_record(path: Path) -> dict[str, Any]:
    """A bench directory's ``bench.json``; UserInputError when it is not one rlperf wrote."""
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UserInputError(
            f"{path} cannot be read as a bench record ({e}); give another -o DIR"
        ) from e
    missing = [k for k, _ in COMPARABLE if not isinstance(record, dict) or k not in record]
    if missing or not isinstance(record.get("points"), dict):
        raise UserInputError(
            f"{path} is not a bench record (no {', '.join(missing) or 'points'}); "
            "give another -o DIR"
        )
    return record


def extended_record(recorded: dict[str, Any], added: dict[str, Any], where: Path) -> dict[str, Any]:
    """``bench.json`` once a command's runs (``added``, its :meth:`BenchPlan.record`) join
    the bench already in ``where`` (``recorded``): every point of both, the presets, games
    and seeds of both, and each command once. The bench keeps its name and first command.

    UserInputError when ``added`` has another budget, target or ``--parallel``: a run of 10
    minutes beside runs of 15, or one sharing the CPUs beside runs that had them all, would
    make the bench's comparisons unfair without a word."""
    for key, flag in COMPARABLE:
        if recorded[key] != added[key]:
            raise UserInputError(
                f"{where} holds a bench with {_terms(recorded)}; this command gives "
                f"{_terms(added)}: the runs of one bench share {flag} (give the bench's, or "
                "another -o DIR)"
            )

    def union(key: str) -> list[Any]:
        return list(dict.fromkeys([*recorded.get(key, []), *added[key]]))

    games = union("games")
    return {
        **added,
        "name": recorded.get("name", added["name"]),
        "command": recorded.get("command", added["command"]),
        "commands": list(dict.fromkeys([*_commands(recorded), *added["commands"]])),
        "presets": union("presets"),
        "suite": recorded.get("suite") if games == recorded.get("games") else ",".join(games),
        "games": games,
        "seeds": sorted({*recorded.get("seeds", []), *added["seeds"]}),
        "points": {**recorded["points"], **added["points"]},
    }


def _commands(record: dict[str, Any]) -> list[str]:
    """The commands that gave runs to a bench (a bench.json from before ``commands``: its
    one ``command``)."""
    commands = record.get("commands") or [record.get("command")]
    return [str(c) for c in commands if c]


def _terms(record: dict[str, Any]) -> str:
    """A record's budget, target and --parallel, as the flags that set them."""
    target = record["target"]
    return (
        f"--minutes {record['budget_s'] / 60:g}, "
        f"{'no --target' if target is None else f'--target {target:g}'}, "
        f"--parallel {record['parallel']}"
    )


def _label(text: str) -> str:
    """A preset or env id as part of a directory name (a preset file by its stem)."""
    if text.endswith((".yaml", ".yml")):
        text = Path(text).stem
    return "".join(c if c.isalnum() or c in "-_.+" else "-" for c in text)


def suite_games(suite: str) -> list[str]:
    """The env ids of a named suite or of a comma list of env ids."""
    if suite in SUITES:
        return list(SUITES[suite])
    games = [g.strip() for g in suite.split(",") if g.strip()]
    odd = [g for g in games if "-v" not in g]
    if not games or odd:
        raise UserInputError(
            f"--suite {suite!r}: unknown suite; give one of {', '.join(SUITES)} or a comma "
            "list of env ids such as ALE/Pong-v5,ALE/Breakout-v5"
        )
    if len(set(games)) != len(games):
        raise UserInputError(f"--suite {suite!r} names a game twice")
    return games


def _presets(text: str) -> list[str]:
    presets = [p.strip() for p in text.split(",") if p.strip()]
    if not presets:
        raise UserInputError("--presets needs at least one preset name or .yaml file")
    if len(set(presets)) != len(presets):
        raise UserInputError(f"--presets {text!r} names a preset twice")
    return presets


def _parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="rlperf bench",
        description="Presets against each other on a suite of games: every (preset, game, "
        "seed) trained for the same wall-clock budget in its own process, then a report "
        "with human-normalised scores aggregated by rliable (IQM, median, mean with 95% "
        "confidence intervals, probability of improvement, performance profiles). The same "
        "command again resumes: completed runs are kept.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"suites: {', '.join(f'{k} ({len(v)} games)' for k, v in SUITES.items())}, or a "
        "comma list of env ids\n"
        "KEY=VALUE overrides apply to every run (not env.id, seed, stop.wall_time_s, "
        "stop.target_reward).\n"
        "example: rlperf bench --presets atari-fast,cleanrl-atari --suite atari5 --seeds 3 "
        "--minutes 10\n"
        "time to target: rlperf bench --presets atari-fast --suite ALE/Pong-v5 --seeds 8 "
        "--minutes 15 --target 17\n"
        "eight more seeds of it: the same with --start-seed 9\n"
        "more runs into a bench (another preset, more seeds of one): its -o DIR, with the "
        "bench's --minutes, --target and --parallel",
        allow_abbrev=False,
    )
    p.add_argument("--presets", required=True, metavar="LIST", help="presets or .yaml files")
    p.add_argument("--suite", required=True, metavar="SUITE", help="a suite name or env ids")
    p.add_argument("--seeds", default="3", metavar="N", help="N seeds per game (default 3)")
    p.add_argument(
        "--start-seed",
        default="1",
        metavar="K",
        help="the first seed: seeds K..K+N-1 (default 1)",
    )
    p.add_argument("--minutes", required=True, metavar="M", help="training minutes per run")
    p.add_argument(
        "--target",
        metavar="R",
        help="also stop each run when its preset's stop.target_reward_metric reaches R "
        "(--minutes stays the cap); the report adds the time to target",
    )
    p.add_argument("--parallel", default="1", metavar="N", help="runs at once (default 1)")
    p.add_argument("-o", "--output", metavar="DIR", help="bench directory (runs/bench/NAME)")
    p.add_argument("--report", metavar="DIR", help="report directory (reports/bench/NAME)")
    p.add_argument("--list", action="store_true", help="print the runs and exit")
    return p


def plan_from_args(args: argparse.Namespace) -> BenchPlan:
    """The bench the parsed flags ask for; UserInputError (one line) for bad values."""
    presets = _presets(args.presets)
    games = suite_games(args.suite)
    minutes = positive_float_flag("--minutes", args.minutes)
    assert minutes is not None
    if not math.isfinite(minutes):
        raise UserInputError(f"--minutes must be a finite number, got {args.minutes!r}")
    seeds = int_flag("--seeds", args.seeds) or 1
    start_seed = int_flag("--start-seed", args.start_seed, minimum=0)
    assert start_seed is not None
    parallel = int_flag("--parallel", args.parallel) or 1
    target = finite_float_flag("--target", args.target)
    CpuShares.check(parallel)
    suite = args.suite if args.suite in SUITES else "games"
    name = _label(f"{suite}__{'+'.join(_label(p) for p in presets)}")
    if target is not None:
        # Runs that stop at a target are another experiment than runs to the budget: by
        # default they go to their own directory, not into (and refused by) the other one.
        name = _label(f"{name}__target{target:g}")
    if start_seed != 1:
        # Another set of seeds is another sample: its report should not drop seeds 1..N
        # of the same bench by sharing (and rewriting) its directory.
        name = _label(f"{name}__from-s{start_seed}")
    return BenchPlan(
        name,
        presets,
        args.suite,
        games,
        list(range(start_seed, start_seed + seeds)),
        minutes * 60,
        parallel,
        target,
    )


def cmd_bench(argv: Sequence[str], say: Callable[[str], None] | None = None) -> int:
    """``rlperf bench``; returns the exit code (0: every run completed and the report was
    written; 1: a run failed, the report says which; 130/143: interrupted, run it again)."""
    from rlperf.core.checkpoint import atomic_write_text
    from rlperf.report.build import build_report
    from rlperf.sweep.machine import Machine
    from rlperf.sweep.plan import plan_points
    from rlperf.sweep.run import check_resume, listed_states, run_sweep

    say = say or (lambda text: print(text, flush=True))
    args, rest = _parser().parse_known_args(list(argv))
    overrides = config_overrides(rest)
    for key, _ in overrides:
        if key.replace("-", "_") in RESERVED_KEYS:
            raise UserInputError(
                f"{key} is set by the bench for each run (--suite, --seeds, --minutes, "
                "--target); it cannot be overridden"
            )
    plan = plan_from_args(args)
    out = Path(args.output) if args.output else DEFAULT_RUNS / plan.name
    if (out / LEDGER_FILE).exists() and not (out / BENCH_FILE).exists():
        raise UserInputError(f"{out} holds a sweep that is not a bench; give another -o DIR")
    command = shlex.join(["rlperf", "bench", *argv])
    record = plan.record(command)
    joins = (out / BENCH_FILE).exists()
    if joins:  # refused here, before anything is written, when the runs would not compare
        record = extended_record(read_record(out / BENCH_FILE), record, out)
        # the runs join the bench's sweep under its name (and its report's directory)
        plan = dataclasses.replace(plan, name=record["name"])
    spec = plan.spec()
    machine = Machine.detect()
    points = plan_points(spec, overrides, machine)
    report = Path(args.report) if args.report else DEFAULT_REPORTS / plan.name
    if args.list:
        states = listed_states(points, out)  # refuses, as a run would, before any output
        say(f"bench {plan.name}: {len(points)} run(s) of {plan.describe()} -> {out}")
        for point, state in states.items():
            say(f"  {point}: {state}")
        return 0
    check_resume(points, out)  # before bench.json is written: a refused bench changes nothing
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / BENCH_FILE, json.dumps(record, indent=2) + "\n")
    say(
        f"bench {plan.name}: {len(points)} run(s) of {plan.describe()}, "
        f"{plan.parallel} at a time -> {out} ({machine.describe()})"
        + (f"; the bench there now holds {len(record['points'])} run(s)" if joins else "")
    )
    result = run_sweep(spec, points, out, overrides=overrides, say=say, parallel=plan.parallel)
    if result.interrupted:
        return result.exit_code
    built = build_report([out], report, title=f"rlperf bench {plan.name}", command=command)
    failed = result.count("failed")
    if failed:
        say(f"bench {plan.name}: {failed} run(s) failed; the report shows which and why")
    if plan.target is not None:
        for line in _target_lines(out):
            say(line)
    say(f"report: {built.index}")
    return result.exit_code


def _target_lines(out: Path) -> list[str]:
    """The time to target of each preset and game, one console line each, read back from the
    bench directory the way the report reads it (so the two always agree)."""
    from rlperf.report.bench_target_section import target_console_lines
    from rlperf.report.load import collect

    col = collect([out])
    return [line for bench in col.benches for line in target_console_lines(bench, col)]
