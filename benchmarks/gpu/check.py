"""The GPU check: every figure rlperf needs from one GPU machine, in two commands.

A GPU machine may be lent for minutes at a time, with no internet, so this script is built
and tested beforehand (``--dry-run`` runs every step on a CPU with tiny budgets; of the
variants it trains one and checks the others' configs) and
returns everything in one go. Each step is a child process under its own time limit: a step
that fails or runs out of time is recorded as such and the next one still runs.

``check.sh OUT`` (about 9 minutes; 5 with ``--skip compiled,placements``):
  1. ``setup``: install the carried wheels (``scripts/gpu_wheels.sh``); versions, GPU,
     driver, CPU, and the cost of one device synchronisation;
  2. ``cuda_tests``: ``tests/cuda`` (skips without CUDA, passes with it);
  3. ``env_ceiling``: env-only steps/s of ``atari-fast-gpu``'s engine on Pong;
  4. ``train``: ``atari-fast-gpu`` (APPO, decoupled actors) for ``--train-seconds``: SPS
     (and its share of the ceiling), the phase split, NVML utilisation, memory, power and
     energy; then its variants (:data:`VARIANTS`), 30 s each, each one's SPS as a ratio to
     step 4's: ``eager`` (no ``runner.cuda_graph``), ``ppo`` (PPO in one process),
     ``workers4`` (4 actor processes), ``all_cores`` (the split the preset replaced:
     each actor's engine on every core, the learner on 14 torch threads), ``compiled``
     (PPO with ``runner.compile`` instead of the graph);
  6. ``placements``: the thesis's single-GPU placements (sweep ``thesis-placements``) for
     ``--placement-seconds`` each; ``workers_gpu``: its workers on the GPU, 2 to 16 of them
     (``thesis-workers``: RAM and GPU memory against the workers, Fig 4.3); and
     ``inference_gpu``: Table 3.4 as one GPU allows (``thesis-inference``: R1 and R5 on
     the GPU, R8 on the CPU; the first game apart from the steady steps). The last two need
     the thesis's workers (Ray); ``rlperf report`` on all of them after each.
``check.sh --pong OUT`` (at most ``--pong-seeds`` x ``--pong-cap`` seconds):
  5. ``pong``: Pong to a mean of 17 over 100 games and EMA 17 with seeds 1, 2 and 3
     (``--pong-seeds``; ``--pong-first-seed 4`` for seeds 4, 5 and 6), one after the
     other, each stopped at the cap (a cap reached is recorded, not hidden).
Both end with 7: ``summary.json``, ``summary.md`` (the table and every command),
``check.log`` (every step's output) and the report's figures in OUT, at most 8 files. The
summary is rewritten after every step, so a command cut short still returns what it did.
With ``RLPERF_RAY_PARTS=DIR`` (Ray's wheel carried in parts, ``scripts/gpu_ray_parts.sh``)
setup installs Ray too, and step 6 runs the thesis's own workers (runner ``rllib``).
``--skip STEP,...`` leaves steps out (those measured before, to fit the lent minutes);
``--set KEY=VALUE`` adds an override to every training command.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
WHEELS = ROOT / ".gpu-wheels"
RAY_DEPS = ROOT / ".gpu-ray" / "deps"
RAY_PARTS_ENV = "RLPERF_RAY_PARTS"
"""A folder on the GPU machine holding Ray's wheel in parts (scripts/gpu_ray_parts.sh):
setup joins, checks and installs it, and the placements then use the thesis's workers."""
RLPERF = [sys.executable, "-m", "rlperf"]
GAME = ["--env", "ALE/Pong-v5"]
PRESET = "atari-fast-gpu"
"""The preset every training command starts from (``--preset`` names another)."""
CPU_ONLY = ["runner.learner_device=cpu", "runner.actor_device=cpu"]
PPO_INPROC = ["algo=ppo", "runner.name=inproc"]
VARIANTS: dict[str, tuple[list[str], float]] = {
    # name: (the keys it changes in step 4's command, seconds allowed for its start); keys,
    # so that a variant that wins can be handed to the Pong seeds: check.sh --pong --set ...
    "eager": (["runner.cuda_graph=false"], 90),  # the learner's step launched from Python
    "ppo": (PPO_INPROC, 90),  # rollout, then learn, in one process (the recipe before APPO)
    "workers4": (["runner.num_workers=4"], 90),  # 4 actor processes of 16 envs
    # the cores oversubscribed, as before the H200 run: every actor's engine on all cores,
    # the GPU learner's process on the cores the actors' torch threads leave (there 0.86x
    # the preset's shared cores); kept so that each machine measures the split again
    "all_cores": (["env.num_threads={cores}", "runner.torch_threads={cores_less_2}"], 90),
    # torch.compile instead of the graph (PPO: the decoupled runner compiles nothing);
    # the first iterations pay the compilation and are left out as warm-up
    "compiled": ([*PPO_INPROC, "runner.compile=true", "runner.cuda_graph=false"], 120),
}
DRY_TRAINED = ("ppo",)
"""The variants a dry run trains (the one whose algorithm and runner differ from the
preset's); a CPU cannot tell the others apart, so a dry run checks their configs only."""
PIP_OFFLINE = ["-q", "--no-index", "--no-deps", "--no-compile", "--no-cache-dir", "--upgrade"]
PYTEST = ["-q", "-rfE", "-p", "no:cacheprovider", "--durations=5"]
MAIN_STEPS = (
    "cuda_tests", "env_ceiling", "train", *VARIANTS, "placements", "workers_gpu", "inference_gpu",
)  # fmt: skip
THESIS_SWEEPS = {
    # step: (the shipped sweep, its overrides): the thesis's GPU half beside the placements
    # (the thesis's workers when Ray is installed: RLPERF_RAY_PARTS)
    "workers_gpu": (  # Fig 4.3: RAM and GPU memory against 2, 4, 8, 16 workers on the GPU
        "thesis-workers",
        ["runner.learner_device=cuda:0", "runner.actor_device=cuda:0", "stop.iterations=3",
         "telemetry.warmup_iterations=1"],
    ),
    "inference_gpu": (  # Table 3.4: R1-R8 as one GPU allows (R5 = gpu0 alone, R8 the CPU)
        "thesis-inference",
        ["infer.episodes=2"],
    ),
}  # fmt: skip
FIGURE_ORDER = ("memory", "inference_latency", "phase_times", "utilisation", "phase_breakdown")
"""The report's figures OUT keeps first (the thesis's Figs 4.3, 4.12, 4.9)."""
MAX_FIGURES = 5  # with summary.json, summary.md and check.log: at most 8 files in OUT
GRACE_S = 20.0  # after SIGINT at a step's limit, time to write the manifest before SIGKILL


@dataclass
class Budgets:
    """Seconds per step; ``--dry-run`` shrinks them to what a CPU test can afford."""

    setup: float = 120
    cuda_tests: float = 150
    env_seconds: float = 3.0
    train_s: float = 60
    variant_s: float = 30
    placement_s: float = 30
    pong_cap: float = 130
    pong_seeds: int = 3
    pong_first_seed: int = 1

    @classmethod
    def dry(cls) -> Budgets:
        return cls(env_seconds=0.3, train_s=3, variant_s=3, placement_s=2, pong_cap=12)


@dataclass
class Step:
    """One step's outcome: what ran, how it ended and the figures read from it."""

    name: str
    status: str = "not run"
    seconds: float = 0.0
    commands: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)


class Check:
    """Runs the steps, keeps the log and rewrites the summary after each step."""

    def __init__(
        self,
        out: Path,
        mode: str,
        dry: bool,
        budgets: Budgets,
        overrides: list[str] | None = None,
        preset: str = PRESET,
    ) -> None:
        self.out, self.mode, self.dry, self.budgets = out, mode, dry, budgets
        self.overrides = overrides or []
        self.preset = ["--preset", preset]
        out.mkdir(parents=True, exist_ok=True)
        self.work = Path(tempfile.mkdtemp(prefix="rlperf-gpu-check-"))
        self.log = (out / "check.log").open("a", encoding="utf-8")
        self.steps: list[Step] = []
        self.sweeps: list[Path] = []  # the thesis's sweeps so far, for the report
        self.machine: dict[str, Any] = {}
        self.env = dict(os.environ, PYTHONUNBUFFERED="1", CI="1")
        # precision=auto's timings: shared by every step of the machine (a warm cache for
        # the Pong seeds when the first command ran on the same machine).
        self.env.setdefault("RLPERF_CACHE_DIR", str(Path(tempfile.gettempdir()) / "rlperf-cache"))
        self._python_path(ROOT / "src")

    def _python_path(self, path: Path) -> None:
        old = self.env.get("PYTHONPATH")
        self.env["PYTHONPATH"] = str(path) + (os.pathsep + old if old else "")

    # ------------------------------------------------------------------ running

    def run(self, step: Step, argv: list[str], limit: float) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` (output to the log); SIGINT at ``limit`` seconds, SIGKILL after."""
        command = shlex.join(argv).replace(sys.executable, "python3").replace(f"{ROOT}/", "")
        step.commands.append(command)
        self.log.write(f"\n=== {step.name}: {command}\n")
        self.log.flush()
        start = time.monotonic()
        proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=self.env,
            text=True,
            start_new_session=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        try:
            output, _ = proc.communicate(timeout=limit)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGINT)
            try:
                output, _ = proc.communicate(timeout=GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                output, _ = proc.communicate()
        seconds = time.monotonic() - start
        self.log.write(
            output
            + f"=== exit {proc.returncode} after {seconds:.1f} s"
            + (" (time limit)" if timed_out else "")
            + "\n"
        )
        self.log.flush()
        step.seconds += seconds
        if timed_out:
            step.status = "time limit"
        elif proc.returncode != 0:
            step.status = f"failed (exit {proc.returncode})"
        elif step.status == "not run":
            step.status = "ok"
        return subprocess.CompletedProcess(argv, proc.returncode, output, "")

    def step(self, name: str) -> Step:
        step = Step(name)
        self.steps.append(step)
        return step

    def guarded(self, fn: Any, name: str) -> None:
        """Run one step; an exception in this script's own parsing fails only that step."""
        try:
            fn()
        except Exception as exc:  # the check goes on: one broken step loses nothing else
            found = [s for s in self.steps if s.name == name] or [self.step(name)]
            found[-1].status = f"error: {type(exc).__name__}: {exc}"
            self.log.write(f"=== {name}: check error {exc!r}\n")
        self.write_summary()

    def train_args(self) -> list[str]:
        """Overrides every training command gets: ``--set``'s; CPU and few envs dry."""
        dry = [*CPU_ONLY, "env.num_envs=8", "runner.precision=fp32"] if self.dry else []
        return [*dry, *self.overrides]

    # ------------------------------------------------------------------ the steps

    def setup(self) -> None:
        step = self.step("setup")
        wheels = sorted(WHEELS.glob("*.whl"))
        parts = os.environ.get(RAY_PARTS_ENV)
        if parts and not self.dry:
            try:
                ray_wheel = join_parts(Path(parts), self.work)
            except (OSError, ValueError) as exc:  # the check goes on without Ray, and says so
                step.figures["ray_wheel"] = f"not installed: {exc}"
            else:
                wheels += [ray_wheel, *sorted(RAY_DEPS.glob("*.whl"))]
                step.figures["ray_wheel"] = ray_wheel.name
        if wheels and not self.dry:
            site = self.work / "site"
            pip = [sys.executable, "-m", "pip", "install", *PIP_OFFLINE, "--target"]
            self.run(step, [*pip, str(site), *map(str, wheels)], self.budgets.setup)
            self._python_path(site)
            step.figures["wheels"] = [w.name for w in wheels]
        done = self.run(step, [sys.executable, "benchmarks/gpu/machine_info.py"], 60)
        self.machine = _last_json(done.stdout)
        step.figures.update(self.machine)

    def cuda_tests(self) -> None:
        step = self.step("cuda_tests")
        pytest = [sys.executable, "-m", "pytest", *PYTEST, "tests/cuda"]
        if self.dry:  # the CPU case of the workers' test: the suite runs it already (8 s)
            pytest += ["-k", "not cpu-dry-run"]
        done = self.run(step, pytest, self.budgets.cuda_tests)
        step.figures.update(_pytest_counts(done.stdout))

    def env_ceiling(self) -> None:
        step = self.step("env_ceiling")
        script = [sys.executable, "benchmarks/gpu/env_ceiling.py"]
        timing = ["--seconds", str(self.budgets.env_seconds), "--repeats", "3", "--"]
        done = self.run(
            step,
            [*script, *timing, *self.preset, *GAME, *self.train_args()],
            60 + 3 * self.budgets.env_seconds,
        )
        step.figures.update(_last_json(done.stdout))

    def train_command(self, name: str, *keys: str, seed: int = 1) -> list[str]:
        """``rlperf train`` with the preset on Pong and ``keys``, its run directory
        ``name`` under this check's runs."""
        return [*RLPERF, "train", *self.preset, *GAME, "--seed", str(seed), "--no-progress", *keys,
                *self.train_args(), "--runs-root", str(self.work / "runs"), "-s", name]  # fmt: skip

    def train(self) -> None:
        step = self.step("train")
        seconds = self.budgets.train_s
        self.run(step, self.train_command("train", f"stop.wall_time_s={seconds:g}"), seconds + 90)
        step.figures.update(run_figures(self.work / "runs" / "train"))
        self.sps_ratio(step, "share_of_env_ceiling", "env_ceiling", "steps_per_s")

    def variant(self, name: str) -> None:
        """Steps 4b-4f: step 4's preset changed as :data:`VARIANTS` says, trained for
        ``budgets.variant_s`` seconds: its figures, and its SPS as a ratio to step 4's."""
        step = self.step(name)
        keys, grace = VARIANTS[name]
        cores = os.cpu_count() or 2
        keys = [k.format(cores=cores, cores_less_2=max(1, cores - 2)) for k in keys]
        if self.dry and name not in DRY_TRAINED:
            self.run(step, self.train_command(name, *keys, "--print-config"), grace)
            step.figures["status"] = "config checked" if step.status == "ok" else "refused"
            return
        seconds = self.budgets.variant_s
        argv = self.train_command(name, *keys, f"stop.wall_time_s={seconds:g}")
        self.run(step, argv, seconds + grace)
        step.figures.update(run_figures(self.work / "runs" / name))
        self.sps_ratio(step, "sps_vs_preset", "train", "sps_median")

    def sps_ratio(self, step: Step, key: str, other_step: str, other_key: str) -> None:
        """``step``'s median SPS divided by another step's figure, when both exist."""
        other = self.figure(other_step, other_key)
        if other and step.figures.get("sps_median"):
            step.figures[key] = step.figures["sps_median"] / other

    def placements(self) -> None:
        step = self.step("placements")
        sweep = self.work / "placements"
        self.run(
            step,
            [
                *RLPERF,
                "sweep",
                self.placements_sweep(step),
                "-o",
                str(sweep),
                f"stop.wall_time_s={self.budgets.placement_s:g}",
            ],
            3 * (self.budgets.placement_s + 60),
        )
        step.figures["points"] = sweep_points(sweep)
        self.report(step, sweep)

    def thesis_sweep(self, name: str) -> None:
        """Steps 6b-6c (:data:`THESIS_SWEEPS`): a shipped sweep of the thesis's with the
        thesis's own workers, which need Ray; dry, the sweep's plan only (its points, what
        this machine would skip, every config checked)."""
        step = self.step(name)
        sweep, overrides = THESIS_SWEEPS[name]
        out = self.work / name
        if self.dry:
            self.run(step, [*RLPERF, "sweep", sweep, "--list", *overrides], 120)
            step.figures["status"] = "planned" if step.status == "ok" else "refused"
            return
        if not self.ray_installed():
            step.status = "skipped: needs Ray for the thesis's workers (RLPERF_RAY_PARTS)"
            return
        self.run(step, [*RLPERF, "sweep", sweep, "-o", str(out), *overrides], 420)
        step.figures["points"] = sweep_points(out)
        self.report(step, out)

    def ray_installed(self) -> bool:
        """Ray importable by the steps' processes (installed by setup, or already there)."""
        import importlib.util

        return (self.work / "site" / "ray").is_dir() or importlib.util.find_spec("ray") is not None

    def report(self, step: Step, sweep: Path) -> None:
        """One report over every sweep so far and step 4's run, rebuilt after each sweep
        (a later step cut short keeps the earlier figures); its figures to OUT."""
        self.sweeps.append(sweep)
        report = self.work / "report"
        runs = [*map(str, self.sweeps), *map(str, (self.work / "runs").glob("train"))]
        self.run(step, [*RLPERF, "report", *runs, "-o", str(report)], 120)
        self.keep_figures(report)

    def placements_sweep(self, step: Step) -> str:
        """The shipped sweep where Ray is installed. Without Ray (the GPU machine carries no
        Ray wheel: it is over the carry limit) a copy whose workers are env worker
        processes (runner subprocess) acting in the learner, and the summary says so. Dry,
        the same copy as on the GPU machine with 2 workers a point, 64 steps each and 1
        epoch (points set their own worker counts, which command-line overrides do not
        change)."""

        if not self.dry and self.ray_installed():
            return "thesis-placements"
        import yaml

        spec = yaml.safe_load(
            (ROOT / "src/rlperf/sweep/presets/thesis-placements.yaml").read_text()
        )
        spec["base"]["runner.name"] = "subprocess"
        step.figures["runner"] = "subprocess (no Ray on the GPU machine)"
        if self.dry:
            spec["base"].update({"ppo.update_epochs": 1, "ppo.num_steps": 64})
            for point in spec["points"]:
                point["workers"] = 2
        path = self.work / "thesis-placements-copy.yaml"
        path.write_text(yaml.safe_dump(spec))
        return str(path)

    def pong(self) -> None:
        step = self.step("pong")
        runs = self.work / "runs"
        seeds: dict[str, Any] = {}
        step.figures["seeds"] = seeds
        target = "-20" if self.dry else "17"
        first = self.budgets.pong_first_seed
        for seed in range(first, first + self.budgets.pong_seeds):
            name = f"seed{seed}"
            argv = self.train_command(name, f"stop.target_reward={target}", seed=seed)
            before, status, began = step.seconds, step.status, time.time()
            self.run(step, argv, self.budgets.pong_cap)
            figures = run_figures(runs / name)
            figures["command_to_exit_s"] = step.seconds - before
            figures.update(_start_and_exit(runs / name, began, began + step.seconds - before))
            figures["solved"] = figures.get("stop_reason") == "target_reward"
            figures["cap_reached"] = step.status == "time limit"
            if figures["cap_reached"]:  # a seed stopped at the cap is a figure, not a failure
                step.status = "ok" if status == "not run" else status
            seeds[name] = figures
            self.write_summary()
        walls = [s["command_to_exit_s"] for s in seeds.values()]
        step.figures["median_command_to_exit_s"] = statistics.median(walls)
        step.figures["solved"] = sum(bool(s["solved"]) for s in seeds.values())
        # a seed stopped at its cap before its run directory existed (imports on a loaded
        # machine) has nothing to report; the report is drawn from the seeds that saved one
        saved = [str(runs / name) for name in seeds if (runs / name / "manifest.json").is_file()]
        if not saved:
            step.figures["report"] = "none: no seed saved a run before its cap"
            return
        report = self.work / "pong-report"
        self.run(step, [*RLPERF, "report", *saved, "-o", str(report)], 120)
        self.keep_figures(report)

    # ------------------------------------------------------------------ output

    def figure(self, step_name: str, key: str) -> Any:
        for step in self.steps:
            if step.name == step_name:
                return step.figures.get(key)
        return None

    def keep_figures(self, report: Path) -> None:
        """Copy the report's figures to OUT, :data:`FIGURE_ORDER` first (at most
        MAX_FIGURES; a newer report's figure replaces the older one of the same name)."""
        rank = {name: i for i, name in enumerate(FIGURE_ORDER)}
        figures = sorted(report.rglob("*.png"), key=lambda p: (rank.get(p.stem, 99), p.name))
        for png in figures:
            target = self.out / f"{report.name}-{png.name}"
            if not target.exists() and len(list(self.out.glob("*.png"))) >= MAX_FIGURES:
                break
            shutil.copyfile(png, target)

    def write_summary(self) -> None:
        data = {
            "mode": self.mode,
            "dry_run": self.dry,
            "preset": self.preset[1],
            "machine": self.machine,
            "steps": [vars(s) for s in self.steps],
        }
        (self.out / "summary.json").write_text(json.dumps(data, indent=1, default=str) + "\n")
        (self.out / "summary.md").write_text(markdown(data))


# ---------------------------------------------------------------------- reading results


def sweep_points(sweep: Path) -> dict[str, dict[str, Any]]:
    """Each point of a finished sweep: its outcome (the last ledger line) and run figures."""
    points: dict[str, dict[str, Any]] = {}
    for line in _lines(sweep / "sweep.jsonl"):
        points[line["point"]] = {"status": line.get("status"), "note": line.get("reason")}
    for run in sorted((sweep / "runs").glob("*")):
        points.setdefault(run.name, {}).update(run_figures(run))
        points[run.name].update(inference_figures(run / "inference.json"))
    return points


INFERENCE_KEYS = ("device", "p50_ms", "p90_ms", "first_call_ms", "first_episode_mean_ms",
                  "mean_return")  # fmt: skip
"""What an inference point's ``inference.json`` holds that Table 3.4 reads (the first call
and first game apart from the steady calls: finding 22)."""


def inference_figures(path: Path) -> dict[str, Any]:
    """An inference point's timings (none for a training run)."""
    if not path.is_file():
        return {}
    record = json.loads(path.read_text())
    return {key: record.get(key) for key in INFERENCE_KEYS}


def join_parts(parts_dir: Path, work: Path) -> Path:
    """The wheel that ``parts_dir``'s ``ray.whl.part-*`` were split from, joined in ``work``
    and checked against ``ray.whl.sha256`` (a part lost or cut short in transit fails)."""
    import hashlib

    expected, name = (parts_dir / "ray.whl.sha256").read_text().split()
    wheel = work / name
    with wheel.open("wb") as out:
        for part in sorted(parts_dir.glob("ray.whl.part-*")):
            out.write(part.read_bytes())
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != expected:
        raise ValueError(f"{name}: the joined parts do not match ray.whl.sha256 (a part missing?)")
    return wheel


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _last_json(text: str) -> dict[str, Any]:
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            try:
                return dict(json.loads(line))
            except ValueError:
                continue
    return {}


def _pytest_counts(text: str) -> dict[str, int]:
    """``3 passed, 1 skipped in 2.0s`` -> {"passed": 3, "skipped": 1}."""
    found = re.findall(r"(\d+) (passed|failed|skipped|error|errors)\b", text)
    return {word.rstrip("s") if word == "errors" else word: int(n) for n, word in found}


def _start_and_exit(run: Path, began: float, ended: float) -> dict[str, float]:
    """Where a command's seconds outside training went: from its start to the run's start
    (imports, CUDA, actors, precision) and from the run's end to its exit."""
    manifest = run / "manifest.json"
    if not manifest.is_file():
        return {}
    times = json.loads(manifest.read_text())
    out = {}
    if times.get("started_utc"):
        out["start_s"] = datetime.fromisoformat(times["started_utc"]).timestamp() - began
    if times.get("ended_utc"):
        out["exit_s"] = ended - datetime.fromisoformat(times["ended_utc"]).timestamp()
    return out


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def run_figures(run: Path) -> dict[str, Any]:
    """What one run directory says: throughput, phase split, GPU use, outcome."""
    rows = _lines(run / "metrics.jsonl")
    manifest = (
        json.loads((run / "manifest.json").read_text()) if (run / "manifest.json").is_file() else {}
    )
    out: dict[str, Any] = {
        "status": manifest.get("status"),
        "stop_reason": manifest.get("stop_reason"),
        "iterations": len(rows),
        "env_steps": manifest.get("env_steps"),
        "time_total_s": manifest.get("time_total_s"),
    }
    resources = manifest.get("resources") or {}
    if resources.get("precision"):
        layout = "-cl" if resources.get("channels_last") else ""
        out["precision"] = f"{resources['precision']}{layout}"
        out["precision_source"] = (resources.get("precision_auto") or {}).get("source", "config")
    steady = [r for r in rows if not r.get("warmup")] or rows
    if not steady:
        return out
    last = rows[-1]
    out["episode_reward_mean"] = last.get("episode_reward_mean")
    out["learner_graphed"] = last.get("perf/learner_graphed")
    out["episode_reward_ema"] = last.get("episode_reward_ema")
    out["sps_median"] = statistics.median(r["SPS"] for r in steady)
    wall_ms = sum(r["time_this_iter_s"] for r in steady) * 1e3
    shares = {
        p: sum(r[f"{p}_time_ms"] for r in steady) / wall_ms
        for p in ("sample", "load", "learn", "update", "other")
    }
    for sub in ("policy_forward", "env_step"):
        key = f"perf/{sub}_time_ms"
        if all(key in r for r in steady):
            shares[sub] = sum(r[key] for r in steady) / wall_ms
    out["phase_share"] = shares
    out["phase_ms"] = {
        p: statistics.median(r[f"{p}_time_ms"] for r in steady)
        for p in ("sample", "load", "learn", "update")
    }
    if all("perf/actor_steps_per_s" in r for r in steady):
        # decoupled actors: the rate their env steps, forwards and weight pulls alone allow
        # (the rest of their time goes to copies between the GPU and the rollout slots)
        out["actor_busy_steps_per_s"] = statistics.median(
            r["perf/actor_steps_per_s"] for r in steady
        )
    gpu = {
        "util_percent": _mean(
            [
                r["sys/gpu0_util_percent"]
                for r in steady
                if r.get("sys/gpu0_util_percent") is not None
            ]
        ),
        "mem_mb_max": max(
            (r["sys/gpu0_mem_mb"] for r in steady if r.get("sys/gpu0_mem_mb") is not None),
            default=None,
        ),
        "power_w": _mean(
            [r["sys/gpu0_power_w"] for r in steady if r.get("sys/gpu0_power_w") is not None]
        ),
        "joules_per_iteration": _mean(
            [r["energy/gpu0_joules"] for r in steady if r.get("energy/gpu0_joules") is not None]
        ),
    }
    if any(v is not None for v in gpu.values()):
        steps_per_iter = (
            statistics.median(
                b["timesteps_total"] - a["timesteps_total"]
                for a, b in zip(rows, rows[1:], strict=False)
            )
            if len(rows) > 1
            else None
        )
        if gpu["joules_per_iteration"] and steps_per_iter:
            gpu["env_steps_per_joule"] = steps_per_iter / gpu["joules_per_iteration"]
        out["gpu"] = gpu
    return out


# ---------------------------------------------------------------------- the table


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 1 else f"{value:,.1f}"
    return str(value)


def _headline(step: dict[str, Any]) -> str:
    f = step["figures"]
    name = step["name"]
    if name == "setup":
        return ", ".join(
            f"{k} {_fmt(f.get(k))}"
            for k in ("gpu", "driver", "cpu", "cores", "torch", "cuda", "ale-py", "sync_us")
        )
    if name == "cuda_tests":
        return ", ".join(f"{v} {k}" for k, v in f.items()) or "no pytest summary"
    if name == "env_ceiling":
        return (
            f"{_fmt(f.get('steps_per_s'))} steps/s ({_fmt(f.get('min'))}–{_fmt(f.get('max'))}), "
            f"{f.get('num_envs')} envs, {f.get('threads')} threads, engine {f.get('engine')}"
        )
    if name == "train":
        gpu = f.get("gpu") or {}
        share = f.get("phase_share") or {}
        return (
            f"SPS {_fmt(f.get('sps_median'))} ({_fmt(f.get('share_of_env_ceiling'))} of the ceiling), "
            + ", ".join(f"{p} {_fmt(v)}" for p, v in share.items())
            + f"; GPU {_fmt(gpu.get('util_percent'))} % busy, {_fmt(gpu.get('mem_mb_max'))} MiB, "
            f"{_fmt(gpu.get('power_w'))} W, {_fmt(gpu.get('joules_per_iteration'))} J/iteration; "
            f"precision {f.get('precision')}; learner graphed {_fmt(f.get('learner_graphed'))}; "
            f"actors' busy rate {_fmt(f.get('actor_busy_steps_per_s'))} steps/s"
        )
    if name in VARIANTS:
        return (
            f"SPS {_fmt(f.get('sps_median'))} ({_fmt(f.get('sps_vs_preset'))} x step 4's), "
            f"learner graphed {_fmt(f.get('learner_graphed'))}, "
            + ", ".join(f"{p} {_fmt(v)}" for p, v in (f.get("phase_share") or {}).items())
        )
    if name == "placements":
        return "; ".join(
            f"{n} {p.get('status')} SPS {_fmt(p.get('sps_median'))}"
            for n, p in (f.get("points") or {}).items()
        )
    if name == "pong":
        return (
            f"solved {f.get('solved', '–')}/{len(f.get('seeds', {})) or '–'}, median {_fmt(f.get('median_command_to_exit_s'))} s "
            "command to exit"
        )
    return ""


def markdown(data: dict[str, Any]) -> str:
    """The summary as Markdown: one table row per step, detail tables, every command."""
    lines = [
        f"# GPU check ({data['mode']}{', dry run' if data['dry_run'] else ''})",
        "",
        "| step | status | seconds | figures |",
        "| --- | --- | --- | --- |",
    ]
    for s in data["steps"]:
        lines.append(f"| {s['name']} | {s['status']} | {s['seconds']:.0f} | {_headline(s)} |")
    for s in data["steps"]:
        rows = s["figures"].get("points") or s["figures"].get("seeds")
        if not rows:
            continue
        lines += [
            "",
            f"## {s['name']}",
            "",
            "| run | status | stop | steps | SPS | sample / load / learn / update ms "
            "| GPU % | GPU MiB | reward mean / EMA | command to exit s (start, exit) |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for name, r in rows.items():
            ms = r.get("phase_ms") or {}
            gpu = r.get("gpu") or {}
            lines.append(
                f"| {name} | {r.get('status')} | {r.get('stop_reason')} | {_fmt(r.get('env_steps'))} "
                f"| {_fmt(r.get('sps_median'))} | {' / '.join(_fmt(ms.get(p)) for p in ('sample', 'load', 'learn', 'update'))} "
                f"| {_fmt(gpu.get('util_percent'))} | {_fmt(gpu.get('mem_mb_max'))} "
                f"| {_fmt(r.get('episode_reward_mean'))} / {_fmt(r.get('episode_reward_ema'))} "
                f"| {_fmt(r.get('command_to_exit_s'))} "
                f"({_fmt(r.get('start_s'))}, {_fmt(r.get('exit_s'))}) |"
            )
    lines += ["", "## Commands", ""]
    for s in data["steps"]:
        lines += [f"- {s['name']}: `{c}`" for c in s["commands"]]
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path, help="output folder (summary, log, figures)")
    p.add_argument("--pong", action="store_true", help="step 5: Pong with seeds 1-3 (--pong-seeds)")
    p.add_argument("--dry-run", action="store_true", help="every step on the CPU, tiny budgets")
    p.add_argument("--train-seconds", type=float, help="step 4's training seconds (60)")
    p.add_argument("--placement-seconds", type=float, help="step 6's seconds per point (30)")
    p.add_argument("--pong-cap", type=float, help="step 5's cap per seed in seconds (130)")
    p.add_argument("--pong-seeds", type=int, help="step 5's number of seeds (3)")
    p.add_argument("--pong-first-seed", type=int, help="step 5's first seed (1)")
    p.add_argument("--preset", default=PRESET, help=f"the preset trained ({PRESET})")
    p.add_argument("--skip", default="", help=f"steps to leave out: {', '.join(MAIN_STEPS)}")
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="an override for every training command (repeatable)",
    )  # fmt: skip
    args = p.parse_args()
    skip = {s for s in args.skip.split(",") if s}
    if skip - set(MAIN_STEPS):
        p.error(
            f"--skip: unknown steps {sorted(skip - set(MAIN_STEPS))}; valid: {', '.join(MAIN_STEPS)}"
        )
    budgets = Budgets.dry() if args.dry_run else Budgets()
    for attr, value in (
        ("train_s", args.train_seconds),
        ("placement_s", args.placement_seconds),
        ("pong_cap", args.pong_cap),
        ("pong_seeds", args.pong_seeds),
        ("pong_first_seed", args.pong_first_seed),
    ):
        if value is not None:
            setattr(budgets, attr, value)
    mode = "pong" if args.pong else "main"
    check = Check(args.out, mode, args.dry_run, budgets, args.set, args.preset)
    check.guarded(check.setup, "setup")
    if args.pong:
        check.guarded(check.pong, "pong")
    else:
        for name in MAIN_STEPS:
            if name in skip:
                continue
            if name in VARIANTS:
                run = partial(check.variant, name)
            elif name in THESIS_SWEEPS:
                run = partial(check.thesis_sweep, name)
            else:
                run = getattr(check, name)
            check.guarded(run, name)
    print((args.out / "summary.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
