"""One trial of ``rlperf tune --objective time-to-target`` and the settings of its study.

A trial is an ``rlperf train`` run of its own, trained in segments that end at wall-clock
rungs: the first segment starts the run from the trial's config file, each later one resumes
it from its last checkpoint with a longer ``stop.wall_time_s``. After each segment the trial
reads its run's records, reports how far its reward metric is short of the target to Optuna,
and stops where the pruner says so (see ``tune_target.py`` for the study around it).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlperf.config.load import apply_dict, dump_config, load_preset, set_key
from rlperf.config.schema import RunConfig
from rlperf.core.checkpoint import atomic_write_text, list_checkpoints
from rlperf.core.errors import ConfigError
from rlperf.report.analysis import reward_metric
from rlperf.report.load import read_records
from rlperf.sweep.execute import CpuShares, SweepSignals, error_line, run_process
from rlperf.sweep.search_space import SearchSpace
from rlperf.training import resolve

DB_FILE = "study.db"
OBJECTIVE = "time-to-target"
TRIALS_DIR = "trials"
CONFIGS_DIR = "configs"
LOGS_DIR = "logs"
START_ALLOWANCE_S = 300.0
"""Seconds a segment may take beyond its training time (start-up, precision timing, the last
iteration and the checkpoint) before it counts as hung."""


class TrialInvalid(Exception):
    """The trial's parameters make an invalid config (the reason is its message)."""


class TrialCrashed(Exception):
    """A segment of the trial failed (its log's telling line is the message)."""


class TuneInterrupted(Exception):
    """SIGINT/SIGTERM reached ``rlperf tune`` while a trial was training."""


@dataclass
class TargetTune:
    """Everything a time-to-target study needs; ``definition`` must match a study resumed."""

    out_dir: Path
    presets: list[str]
    base_keys: dict[str, Any]
    space: SearchSpace
    target: float
    rungs_s: list[float]
    n_trials: int
    budget_s: float | None = None
    parallel: int = 1
    cores: list[int] = field(default_factory=list)
    """The CPUs trials may use; with ``parallel`` > 1 each running trial gets its own share."""
    seed: int = 1
    machine: str = ""

    def base_config(self) -> RunConfig:
        return trial_base_config(self.presets, self.base_keys, self.target, self.seed)

    @property
    def definition(self) -> dict[str, Any]:
        """What decides the study's results: a directory holding another is never reused."""
        return {
            "objective": OBJECTIVE,
            "presets": self.presets,
            "base_keys": {k: self.base_keys[k] for k in sorted(self.base_keys)},
            "space": self.space.to_yaml(),
            "target": self.target,
            "rungs_s": self.rungs_s,
            "seed": self.seed,
        }

    @property
    def storage_url(self) -> str:
        return f"sqlite:///{(self.out_dir / DB_FILE).resolve()}"


def trial_base_config(
    presets: list[str], base_keys: dict[str, Any], target: float, seed: int
) -> RunConfig:
    """The config every trial starts from: presets, then keys, then the study's own settings."""
    cfg = RunConfig()
    for preset in presets:
        apply_dict(cfg, load_preset(preset), f"preset {preset}")
    for key, value in base_keys.items():
        set_key(cfg, key, value)
    if cfg.stop.anneal_over == "wall_time_s" or (
        cfg.stop.anneal_over == "wall_time_steps" and cfg.stop.anneal_steps is None
    ):
        # Each segment resumes with its rung as stop.wall_time_s: a schedule over it would
        # end at every rung and jump back up at the next (or be measured against the first).
        raise ConfigError(
            "rlperf tune trains a trial in segments of growing stop.wall_time_s, which "
            f"stop.anneal_over={cfg.stop.anneal_over} would tie to the first; add "
            "stop.anneal_over=total_timesteps (or stop.anneal_steps=N)"
        )
    set_key(cfg, "stop.target_reward", target)
    set_key(cfg, "stop.wall_time_s", None)  # each segment sets its rung
    set_key(cfg, "seed", seed)  # every trial learns from the same seed
    set_key(cfg, "telemetry.tensorboard", False)
    return cfg


def rungs(first_s: float, max_s: float) -> list[float]:
    """Wall-clock rungs: ``first_s`` doubling while below ``max_s``, then ``max_s``."""
    out = [first_s]
    while out[-1] * 2 < max_s:
        out.append(out[-1] * 2)
    if out[-1] < max_s:
        out.append(max_s)
    return out


@dataclass
class Progress:
    """A trial's run directory as the tune reads it."""

    trained_s: float
    """The run's training clock at its last record (it continues across resumes)."""
    hit_s: float | None
    """Training seconds when the metric first reached the target (None: not yet)."""
    metric: float | None
    """The metric's latest value (None: no game finished yet)."""
    ended: bool
    """The run stopped for good (its step or iteration budget) without reaching the target."""


def read_progress(run_dir: Path, target: float, metric: str) -> Progress:
    """Where ``run_dir`` stands against ``target`` on ``metric`` (see Progress)."""
    trained = 0.0
    hit = value = None
    for record in read_records(run_dir / "metrics.jsonl"):
        trained = float(record.get("time_total_s", trained))
        now = reward_metric(record, metric)
        if now is not None:
            value = now
            if hit is None and value >= target:
                hit = trained
    ended = False
    with contextlib.suppress(OSError, json.JSONDecodeError):
        manifest = json.loads((run_dir / "manifest.json").read_text())
        ended = manifest.get("status") == "completed" and manifest.get("stop_reason") in (
            "total_timesteps",
            "iterations",
        )
    return Progress(trained, hit, value, ended)


class TrialRunner:
    """Runs one trial's segments and reports to Optuna (the study's objective)."""

    def __init__(self, tune: TargetTune, signals: SweepSignals, say: Callable[[str], None]):
        self.tune = tune
        self.signals = signals
        self.say = say
        self.base = tune.base_config()
        self.slots = CpuShares(tune.cores, tune.parallel)

    def config_for(self, keys: dict[str, Any]) -> RunConfig:
        """The base with a trial's keys, validated (TrialInvalid: why not)."""
        cfg = copy.deepcopy(self.base)
        try:
            for key, value in keys.items():
                set_key(cfg, key, value)
            resolve.check(cfg)
        except ConfigError as exc:
            raise TrialInvalid(str(exc)) from None
        return cfg

    def __call__(self, trial: Any) -> float:
        import optuna

        keys = self.tune.space.suggest(trial)
        try:
            cfg = self.config_for(keys)
        except TrialInvalid as exc:
            trial.set_user_attr("reason", f"invalid config: {exc}")
            raise
        out = self.tune.out_dir
        name = f"trial-{trial.number:04d}"
        run_dir = out / str(trial.user_attrs.get("run_dir", Path(TRIALS_DIR) / name))
        trial.set_user_attr("run_dir", str(run_dir.relative_to(out)))
        config_path = out / CONFIGS_DIR / f"{run_dir.name}.yaml"
        if not config_path.exists():
            config_path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(config_path, dump_config(cfg))
        overhead = trial.user_attrs.get("overhead_s")
        metric = cfg.stop.target_reward_metric
        with self.slots.take() as cpus:
            for rung in self.tune.rungs_s:
                progress = read_progress(run_dir, self.tune.target, metric)
                if progress.hit_s is None and not progress.ended and progress.trained_s < rung:
                    wall = self._segment(run_dir, config_path, rung, progress, cpus, cfg, trial)
                    after = read_progress(run_dir, self.tune.target, metric)
                    if overhead is None:  # the first process: what it cost beyond training
                        overhead = max(0.0, wall - after.trained_s)
                        trial.set_user_attr("overhead_s", overhead)
                    progress = after
                if progress.hit_s is not None:
                    seconds = progress.hit_s + float(overhead or 0.0)
                    self.say(f"  {name}: reached {self.tune.target:g} in {seconds:.0f} s")
                    return seconds
                if progress.ended:
                    trial.set_user_attr("reason", "its step budget ended before the target")
                    raise optuna.TrialPruned()
                if progress.metric is None:
                    continue  # no value yet (too few games): nothing to compare at this rung
                shortfall = self.tune.target - progress.metric
                trial.report(shortfall, int(rung))
                if trial.should_prune():
                    trial.set_user_attr("reason", f"trailed the others at {rung:g} s")
                    self.say(f"  {name}: pruned at {rung:g} s (short by {shortfall:.3g})")
                    raise optuna.TrialPruned()
        trial.set_user_attr("reason", f"target not reached in {self.tune.rungs_s[-1]:g} s")
        self.say(f"  {name}: target not reached in {self.tune.rungs_s[-1]:g} s")
        raise optuna.TrialPruned()

    def _segment(
        self,
        run_dir: Path,
        config_path: Path,
        rung: float,
        progress: Progress,
        cpus: list[int] | None,
        cfg: RunConfig,
        trial: Any,
    ) -> float:
        """Train the trial's run until ``rung`` training seconds; the process's wall time."""
        common = ["--no-progress", f"stop.wall_time_s={rung:g}"]
        if list_checkpoints(run_dir / "checkpoints"):
            argv = [sys.executable, "-m", "rlperf", "train", "--resume", str(run_dir), *common]
        else:
            if run_dir.exists():  # cut off before its first checkpoint: start it afresh
                aside = run_dir.with_name(f"{run_dir.name}.aside-{os.getpid()}")
                shutil.move(run_dir, aside)
            argv = [
                sys.executable,
                "-m",
                "rlperf",
                "train",
                "--preset",
                str(config_path),
                "--runs-root",
                str(run_dir.parent),
                "-s",
                run_dir.name,
                *common,
            ]
        env = {"CI": os.environ.get("CI", "1")}
        if cfg.runner.torch_threads is not None:
            env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(cfg.runner.torch_threads)
        log = self.tune.out_dir / LOGS_DIR / f"{run_dir.name}.to-{rung:g}s.log"
        timeout = (rung - progress.trained_s) * 1.5 + START_ALLOWANCE_S
        code, wall, timed_out = run_process(argv, env, log, timeout, cpus, self.signals)
        if self.signals.received is not None:
            trial.set_user_attr("interrupted", True)
            raise TuneInterrupted(self.signals.received)
        if timed_out or code != 0:
            why = f"timed out after {timeout:.0f} s" if timed_out else error_line(log) or ""
            trial.set_user_attr("reason", f"{why} (log: {log.relative_to(self.tune.out_dir)})")
            raise TrialCrashed(why)
        return wall
