"""One training run from start (or resume) to stop: the iteration loop and its bookkeeping.

The loop is the same for every runner: collect (``sample``), ``load``, the algorithm's
update (``learn``) and the weight sync (``update``), then telemetry, stop criteria and
checkpoints. It owns the run directory; the runner owns execution; the algorithm owns
the maths.

Longer than most modules on purpose: the loop and everything that must stay consistent
with it across a kill and a resume (checkpoint contents, the order of records and
checkpoints, stop criteria) are read together; the manifest (telemetry/manifest.py),
the sinks and the precision timing live elsewhere.
"""

from __future__ import annotations

import fcntl
import json
import signal
import sys
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from rlperf.config.load import changed_keys, dump_run_config, load_config_file
from rlperf.config.schema import RunConfig
from rlperf.core import distributed
from rlperf.core.autoprecision import PrecisionChoice
from rlperf.core.checkpoint import (
    atomic_write_text,
    checkpoint_name,
    list_checkpoints,
    load_checkpoint,
    save_checkpoint,
    set_aside_newer,
)
from rlperf.core.distributed import DataParallelGradientStep
from rlperf.core.errors import (
    CheckpointError,
    ConfigError,
    StorageError,
    WorkerError,
    is_storage_failure,
    make_output_dir,
)
from rlperf.core.faults import crash_point
from rlperf.core.learner import Learner
from rlperf.core.nan_guard import NonFiniteError, NonFiniteGuard, batch_tensors
from rlperf.core.resources import apply_cpu_resources, retain_freed_memory
from rlperf.core.schedule_clock import ScheduleClock
from rlperf.core.seeding import rng_state, seed_everything, set_rng_state
from rlperf.core.signals import SignalScope
from rlperf.core.types import Progress
from rlperf.models.catalog import build_model, frame_dim
from rlperf.telemetry.console import ConsoleView
from rlperf.telemetry.episodes import EpisodeStats
from rlperf.telemetry.manifest import run_manifest
from rlperf.telemetry.sinks import CsvSink, JsonlSink, TensorBoardSink, truncate_records
from rlperf.telemetry.sysmon import SystemMonitor
from rlperf.telemetry.timers import PhaseTimer
from rlperf.training import data_parallel, registry, resolve
from rlperf.training.stop_criteria import (
    Counters,
    eta_s,
    reach_of_this_target,
    reward_metric,
    stop_reason,
    target_share,
)


class _StopSignal(SignalScope):
    """SIGINT/SIGTERM: the first asks for a clean stop after the current iteration (with a
    checkpoint); a second SIGINT aborts at once."""

    def on_signal(self, signum: int) -> None:
        if self.received is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.received = signal.Signals(signum).name
        print(
            f"\n{self.received} received: stopping after this iteration (checkpoint first); Ctrl-C again aborts",
            file=sys.stderr,
            flush=True,
        )


def default_run_name(cfg: RunConfig) -> str:
    utc = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    env = cfg.env.id.replace("/", "-")
    return f"{env}__{cfg.algo}__{cfg.runner.name}__s{cfg.seed}__{utc}"


def _write_json(path: Path, data: dict[str, Any]) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, default=str) + "\n")


class _RunLock:
    """An exclusive lock on a run directory: two processes must never write one run."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / ".lock"
        self._file: Any = None

    def __enter__(self) -> _RunLock:
        self._file = self.path.open("a+")
        try:
            fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._file.close()
            raise ConfigError(
                f"run directory {self.path.parent} is in use by another rlperf process"
            ) from None
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self._file, fcntl.LOCK_UN)
        self._file.close()


def start_session(
    cfg: RunConfig,
    run_dir: Path,
    *,
    command: list[str],
    resume_from: Path | None = None,
    progress: bool = True,
    restart: bool = False,
) -> TrainingSession:
    """Check ``cfg`` once, then resolve it and return the session that builds and trains it.

    Every refusal comes before anything is built or timed: the config's (one line, exit 2),
    then a new run's directory that already holds a run. The run's CPUs are applied before
    resolving, because ``precision=auto`` is timed on what the run uses."""
    resolve.check(cfg)
    if resume_from is None and not restart and (run_dir / "metrics.jsonl").exists():
        raise ConfigError(
            f"run directory {run_dir} already holds a run; resume it with --resume {run_dir} or choose another --save-name"
        )
    apply_cpu_resources(cfg.runner.cpu_affinity, cfg.runner.torch_threads)
    return TrainingSession(
        resolve.settle(cfg),
        run_dir,
        command=command,
        resume_from=resume_from,
        progress=progress,
        restart=restart,
    )


class TrainingSession:
    """Builds a resolved run (:func:`start_session`) and trains it until a stop criterion
    or a signal."""

    def __init__(
        self,
        run: resolve.ResolvedRun,
        run_dir: Path,
        *,
        command: list[str],
        resume_from: Path | None = None,
        progress: bool = True,
        rank: int | None = None,
        restart: bool = False,
    ) -> None:
        self.run_dir = run_dir
        self.command = command
        self.rank = rank
        """This learner's rank among runner.num_learners data-parallel learners; None in a
        single-learner run (and in the process that launches the learners)."""
        self.is_main = rank in (None, 0)
        """The process that writes the run directory (records, checkpoints, manifest)."""
        self.resume_state = load_checkpoint(resume_from) if resume_from is not None else None
        self.restart = restart
        """A resume of a run killed before its first checkpoint: it trains again from the
        start in its directory, and what it recorded is set aside first."""
        self.cfg = run.cfg
        """The resolved, read-only config: what runs, and what config.yaml stores."""
        self.precision_choice: PrecisionChoice | None = run.precision_choice
        """What runner.precision=auto chose and measured (None: precision was given)."""
        stop = self.cfg.stop
        self.clock = ScheduleClock(
            stop.anneal_over,
            total_timesteps=stop.total_timesteps,
            iterations=stop.iterations,
            wall_time_s=stop.wall_time_s,
            warmup_iterations=self.cfg.telemetry.warmup_iterations,
            anneal_steps=stop.anneal_steps,
            min_sps=stop.anneal_min_sps,
        )
        """What the schedules count down (a measured step budget lives here and in checkpoints)."""
        self.world_size = self.cfg.runner.num_learners if rank is not None else 1
        self.progress = progress and self.cfg.telemetry.progress and self.is_main
        self.exit_code = 0
        """0 when a stop criterion ended the run; 128 + signal number when a signal did."""

    # ------------------------------------------------------------------ building

    def _build(self) -> None:
        cfg = self.cfg
        self.retained_memory = cfg.runner.retain_freed_memory and retain_freed_memory()
        seed_everything(cfg.seed)
        dim = frame_dim(cfg.env, cfg.model)
        local = cfg if self.rank is None else data_parallel.rank_config(cfg, self.rank)
        self.draw_seed = local.seed
        """The seed of this process's draws (each data-parallel rank has its own)."""
        self.envs = registry.make_envs(local, dim)
        spaces = registry.env_spaces(local, dim, self.envs)
        obs_shape = tuple(spaces.observation.shape or ())
        policy = build_model(cfg.model, obs_shape, int(spaces.action.n))
        if self.rank:  # the same initial weights everywhere, then each rank its own samples
            seed_everything(local.seed)
        self.algo = registry.make_algorithm(local, policy)
        self.runner = registry.make_runner(local, self.envs, self.algo, dim, spaces)
        self.allreduce: DataParallelGradientStep | None = None
        """The data-parallel gradient step (None with one learner): its all-reduce is timed."""
        if self.rank is None:
            self.step = self.runner.make_gradient_step(self.algo)
        else:
            self.step = self.allreduce = data_parallel.make_gradient_step(
                self.algo, self.runner, local
            )
        self.guard = NonFiniteGuard(cfg.nan_policy)
        self.learner = Learner(self.algo, self.step, self.guard, self._progress_at)
        self.stats = EpisodeStats()
        self.worker_processes: list[dict[str, Any]] = []
        """What the runner's worker processes got (pids, threads, affinity), for the manifest."""
        self.iteration = 0
        self.env_steps = 0
        self.time_total_s = 0.0
        self.target_reached: dict[str, Any] | None = None
        self.branches: list[dict[str, Any]] = []
        """Where a resume with another seed forked this run's random draws (oldest first)."""
        self.fork: dict[str, Any] | None = None
        """This resume's entry in ``branches`` (None: not a fork)."""
        if self.resume_state is not None:
            self._restore(self.resume_state)

    def _restore(self, state: dict[str, Any]) -> None:
        try:
            self.algo.load_state_dict(state["algorithm"])
            self.step.load_state_dict(state["optimizer"])
            self.runner.load_state_dict(
                state["runner"]
                if self.is_main
                else data_parallel.without_env_state(state["runner"])
            )
            self.stats.load_state_dict(state["episodes"])
            counters = state["counters"]
            set_rng_state(state["rng"])
        except (KeyError, RuntimeError, ValueError, TypeError) as exc:
            raise CheckpointError(
                f"checkpoint {state.get('_checkpoint_path')} does not match this run's config ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})"
            ) from None
        self.iteration = int(counters["iteration"])
        self.env_steps = int(counters["env_steps"])
        self.time_total_s = float(counters["time_total_s"])
        self.target_reached = reach_of_this_target(counters.get("target_reached"), self.cfg.stop)
        self.clock.load_state_dict(counters.get("schedule", {}))
        self.branches = list(counters.get("branches", []))
        saved_seed = counters.get("seed", self.cfg.seed)  # checkpoints before the seed was kept
        if saved_seed != self.cfg.seed:
            self._branch(int(saved_seed))

    def _branch(self, saved_seed: int) -> None:
        """A resume with another seed forks the run: the weights, optimizer, games and
        counters are the checkpoint's, but the global generators (Python, NumPy, torch:
        the actions sampled, the minibatches' order) start afresh from the new seed. Runs
        forked from one checkpoint with several seeds tell whether what follows was decided
        by the state at the checkpoint or by the draws after it. The games' own random state
        (sticky actions, no-op starts) goes on from the checkpoint where the engine
        snapshots its games (otherwise they restart, as on any resume)."""
        seed_everything(self.draw_seed)
        self.fork = {
            "from_seed": saved_seed,
            "seed": self.cfg.seed,
            "iteration": self.iteration,
            "env_steps": self.env_steps,
        }
        self.branches.append(self.fork)

    def _checkpoint_state(self) -> dict[str, Any]:
        return {
            "counters": {
                "iteration": self.iteration,
                "env_steps": self.env_steps,
                "time_total_s": self.time_total_s,
                "target_reached": self.target_reached,
                "schedule": self.clock.state_dict(),
                "seed": self.cfg.seed,
                "branches": self.branches,
            },
            "episodes": self.stats.state_dict(),
            "algorithm": self.algo.state_dict(),
            "optimizer": self.step.state_dict(),
            "runner": self.runner.state_dict(),
            "rng": rng_state(cuda=self._phase_sync() is not None),
        }

    def save_checkpoint(self) -> Path:
        return save_checkpoint(
            self.run_dir / "checkpoints",
            checkpoint_name(self.iteration, self.env_steps),
            self._checkpoint_state(),
            keep=self.cfg.checkpoint.keep,
        )

    # ------------------------------------------------------------------ stop criteria

    def _progress_at(self, env_steps_ahead: int) -> Progress:
        """The run's progress with ``env_steps_ahead`` env steps of this iteration taken."""
        env_steps = self.env_steps + env_steps_ahead
        return Progress(
            self.iteration,
            env_steps,
            self._fraction_left(env_steps),
            reward_metric(self.stats, "mean100"),
            target_share(self.stats, self.cfg.stop.target_reward),
            self.stats.parity_means(),
        )

    def _steer_starts(self) -> float | None:
        """``env.start_parity=lagging``: this iteration's new training games start on the
        parity whose last games lag the other's by more than ``env.start_parity_gap``, or as
        the no-ops fall while within it. Decided from the checkpointed games, so a resumed
        run steers as the uninterrupted one. Returns it for the metrics (-1: none; None
        without the curriculum)."""
        if self.cfg.env.start_parity != "lagging":
            return None
        leading = self._progress_at(0).leading_parity(self.cfg.env.start_parity_gap)
        parity = None if leading is None else 1 - leading
        # Both runners named inproc (rollouts and DQN's transitions) step a SyncVectorEnv of
        # AtariEnv here: the checks allow the curriculum with that runner and engine only.
        self.runner.envs.start_games_on(parity, self.cfg.env.start_parity_share)  # type: ignore[attr-defined]
        return -1.0 if parity is None else float(parity)

    def _fraction_left(self, env_steps: int) -> float:
        """Share of the schedule's budget still ahead (``stop.anneal_over``; see
        :class:`~rlperf.core.schedule_clock.ScheduleClock`)."""
        return self.clock.fraction_left(env_steps, self.iteration, self.time_total_s)

    def _counters(self) -> Counters:
        return Counters(self.iteration, self.env_steps, self.time_total_s)

    def _stop_reason(self) -> str | None:
        stop = self.cfg.stop
        reward = reward_metric(self.stats, stop.target_reward_metric)
        reason = stop_reason(stop, self._counters(), reward)
        if reason == "target_reward" and self.target_reached is None:
            self.target_reached = {
                "metric": stop.target_reward_metric,
                "target": stop.target_reward,
                "value": reward,
                "iteration": self.iteration,
                "env_steps": self.env_steps,
                "wall_time_s": self.time_total_s,
            }
        return reason

    # ------------------------------------------------------------------ telemetry

    def _record(
        self,
        times: dict[str, float],
        steps: int,
        episodes: int,
        metrics: dict[str, float],
        iter_in_process: int,
    ) -> dict[str, Any]:
        wall = times["wall"]
        record: dict[str, Any] = {
            "iteration": self.iteration,
            **self.stats.summary(),
            "episodes_this_iter": episodes,
            "episodes_total": self.stats.total,
            "timesteps_total": self.env_steps,
            **{
                f"{k}_time_ms": 1000 * times[k]
                for k in ("sample", "load", "learn", "update", "other")
            },
            "time_this_iter_s": wall,
            "time_total_s": self.time_total_s,
            "SPS": steps / wall if wall > 0 else 0.0,
            "warmup": iter_in_process <= self.cfg.telemetry.warmup_iterations,
        }
        for k, v in times.items():
            if k not in ("wall", "sample", "load", "learn", "update", "other"):
                record[f"perf/{k}_time_ms"] = 1000 * v
        if times["learn"] > 0:
            record["perf/learner_samples_per_s"] = steps / times["learn"]
        if times["sample"] > 0:
            # Acting capacity; a runner whose actors overlap the learner reports its own.
            record["perf/actor_steps_per_s"] = steps / times["sample"]
        record.update(metrics)
        return record

    def _manifest(
        self, status: str, started: str, stop_reason: str | None = None
    ) -> dict[str, Any]:
        return run_manifest(
            self.cfg,
            command=self.command,
            status=status,
            started=started,
            stop_reason=stop_reason,
            target_reached=self.target_reached,
            iteration=self.iteration,
            env_steps=self.env_steps,
            time_total_s=self.time_total_s,
            worker_processes=self.worker_processes,
            precision_auto=self.precision_choice.to_dict() if self.precision_choice else None,
            retained_memory=self.retained_memory,
            gpu_phase_sync=self._phase_sync() is not None,
            schedule=self.clock.describe(),
            branches=self.branches,
        )

    # ------------------------------------------------------------------ the loop

    def run(self) -> Path:
        """Train until a stop criterion; returns the run directory."""
        try:
            if self.rank is not None:  # a data-parallel learner: its launcher holds the lock
                return self._run()
            make_output_dir(self.run_dir, "run directory")
            with _RunLock(self.run_dir):
                if self.cfg.runner.num_learners > 1:
                    self.exit_code = data_parallel.launch_learners(self)
                    return self.run_dir
                return self._run()
        except OSError as exc:
            if not is_storage_failure(exc):
                raise
            # A read-only or full disk is the machine's state, not a bug: one line. Checkpoints
            # are written to a temporary name and renamed, so the last one is intact.
            found = list_checkpoints(self.run_dir / "checkpoints") if self.run_dir.is_dir() else []
            kept = f"; the last complete checkpoint is {found[-1]}" if found else ""
            raise StorageError(
                f"cannot write the run directory {self.run_dir}: {exc.strerror}"
                f"{f' ({exc.filename})' if exc.filename else ''}{kept}"
            ) from None

    def _aside_dir(self) -> Path:
        return self.run_dir / "superseded" / datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")

    def _start_resumed(self) -> None:
        """Continue the records at the checkpoint; a later line of history is set aside."""
        aside = self._aside_dir()
        truncate_records(self.run_dir, self.iteration, removed_to=aside)
        set_aside_newer(Path(self.resume_state["_checkpoint_path"]), aside / "checkpoints")

    def _start_over(self) -> None:
        """Set aside everything a run killed before its first checkpoint recorded (never
        deleted), so its second start writes a run directory like a first one."""
        aside = self._aside_dir()
        recorded = [
            p
            for p in self.run_dir.iterdir()
            if p.name in ("metrics.jsonl", "progress.csv", "manifest.json")
            or p.name.startswith("events.out.tfevents.")
        ]
        if recorded:
            aside.mkdir(parents=True)
        for path in recorded:
            path.rename(aside / path.name)

    def _phase_sync(self) -> Callable[[], None] | None:
        """Synchronize every CUDA device in use at phase boundaries (None without CUDA)."""
        devices = {self.runner.learner_device, self.runner.actor_device}
        cuda = [d for d in devices if d.type == "cuda"]
        if not cuda:
            return None

        def sync() -> None:
            for device in cuda:
                torch.cuda.synchronize(device)

        return sync

    def _run(self) -> Path:
        started = datetime.now(UTC).isoformat()
        self._build()
        main = self.is_main
        if main and self.restart:
            self._start_over()
        if main:
            if self.fork is not None:
                # What else the fork changed, beside the seed: a branch that also sets a knob
                # is another experiment than one that only draws again.
                before = load_config_file(self.run_dir / "config.yaml")
                changed = changed_keys(before, self.cfg)
                changed.pop("seed", None)
                self.fork["changed"] = changed
            atomic_write_text(self.run_dir / "config.yaml", dump_run_config(self.cfg))
            _write_json(self.run_dir / "manifest.json", self._manifest("running", started))
            if self.resume_state is not None:
                self._start_resumed()

        timer = PhaseTimer(sync=self._phase_sync())
        sinks: list[Any] = []
        if main:
            sinks += [
                JsonlSink(self.run_dir / "metrics.jsonl"),
                CsvSink(self.run_dir / "progress.csv"),
            ]
        if main and self.cfg.telemetry.tensorboard:
            purge = self.env_steps + 1 if self.resume_state else None
            sinks.append(TensorBoardSink(self.run_dir, purge_step=purge))
        monitor = None
        if main and self.cfg.telemetry.sysmon:
            monitor = SystemMonitor(self.cfg.telemetry.sysmon_interval_s)
        view = ConsoleView(self.progress, title=f"rlperf {self.cfg.algo} on {self.cfg.env.id}")
        status, stop_reason = "running", None
        last_saved = self.iteration
        saved_at_s = self.time_total_s
        mid_iteration = False
        every, every_s = self.cfg.checkpoint.every, self.cfg.checkpoint.every_s
        try:
            with _StopSignal() as signals:
                if monitor is not None:
                    monitor.start()
                stop_reason = self._stop_reason()  # a resumed run may already be done
                timer.lap()
                iter_in_process = 0
                while stop_reason is None:
                    mid_iteration = True
                    start_parity = self._steer_starts()
                    self.learner.begin_iteration()
                    time_before = self.time_total_s
                    # The runner drives the iteration and times its phases (runners/base.py).
                    done = self.runner.run_iteration(self.learner, timer)
                    episodes, metrics = done.episodes, done.metrics
                    steps = done.env_steps * self.world_size
                    if self.allreduce is not None:
                        with timer.phase("gather"):  # every learner's games count
                            episodes = distributed.gather_objects(episodes)
                        timer.add("allreduce", self.allreduce.pop_comm_seconds())
                    self.iteration += 1
                    iter_in_process += 1
                    self.env_steps += steps
                    self.stats.add(episodes)
                    mid_iteration = False
                    self.time_total_s = time_before + timer.elapsed()
                    stop_reason = self._decide_stop(signals.received)
                    times = timer.lap()
                    self.time_total_s = time_before + times["wall"]
                    budget_fixed = self.clock.observe(
                        self.iteration, steps, times["wall"], self.env_steps, self.time_total_s
                    )
                    metrics = {**metrics, **self.runner.worker_metrics(), **self.guard.metrics()}
                    if start_parity is not None:
                        metrics["parity/start_on"] = start_parity
                    if monitor is not None:
                        metrics = {**metrics, **monitor.collect()}
                    record = self._record(times, steps, len(episodes), metrics, iter_in_process)
                    for sink in sinks:
                        sink.write(record)
                        crash_point("records.row")
                    view.update(record, self._eta(record))
                    if main and (iter_in_process == 1 or budget_fixed):
                        # Workers have reported what they got; or the schedule's step budget
                        # was just measured: a killed run must still say what it was.
                        self.worker_processes = self.runner.process_resources()
                        _write_json(
                            self.run_dir / "manifest.json", self._manifest("running", started)
                        )
                    # The record goes out before the checkpoint: a kill in between leaves a
                    # row that resume truncates; the other order could lose a row for good.
                    # The checkpoint's time is charged to the next iteration's "other".
                    # By count or by training seconds, whichever comes first: an iteration
                    # of minutes must not make a kill lose 50 of them.
                    due = (every and self.iteration % every == 0) or (
                        every_s and self.time_total_s - saved_at_s >= every_s
                    )
                    if main and (due or stop_reason):
                        with timer.phase("checkpoint"):
                            self.save_checkpoint()
                        last_saved, saved_at_s = self.iteration, self.time_total_s
            if signals.received:
                status = "interrupted"
                self.exit_code = 128 + signal.Signals[signals.received].value
            else:
                status = "completed"
        except KeyboardInterrupt:
            status, stop_reason = "aborted", "second SIGINT"
            self.exit_code = 128 + signal.SIGINT.value
        except NonFiniteError as exc:
            # Nothing non-finite was applied: the last checkpoint is good. The batch goes
            # into the run directory so the cause can be found.
            status, stop_reason = "failed", str(exc)
            self.exit_code = 1
            batch = self.learner.last_batch
            dumped = self._dump_batch(batch) if main and batch is not None else None
            found = list_checkpoints(self.run_dir / "checkpoints")
            print(
                f"rlperf: {exc} at iteration {self.iteration + 1}"
                + (f"; the batch is saved in {dumped}" if dumped else "")
                + (f"; the last good checkpoint is {found[-1]}" if found else "; no checkpoint yet")
                + f"; resume with --resume {self.run_dir}",
                file=sys.stderr,
                flush=True,
            )
        except WorkerError as exc:
            # A worker process failed: stop cleanly. Before the update the learner's state
            # matches the counters, so it is saved (envs that cannot be snapshotted any more
            # restart on resume); one line names the worker and the cause.
            status, stop_reason = "failed", f"worker failure: {exc}"
            self.exit_code = 1
            saved = ""
            if main and self.iteration > last_saved and not self.learner.touched:
                saved = f"; checkpoint {self.save_checkpoint().name} written"
            elif last_saved:
                saved = f"; last checkpoint at iteration {last_saved}"
            print(
                f"rlperf: {exc}{saved}; resume with --resume {self.run_dir}",
                file=sys.stderr,
                flush=True,
            )
        except BaseException as exc:
            status, stop_reason = "failed", f"{type(exc).__name__}: {exc}"
            # Between iterations the state is consistent: keep what was learned. Midway
            # (envs ahead of the counters, an update half applied) it is not, and the last
            # periodic checkpoint stays the one to resume from.
            if (
                main
                and self.iteration > last_saved
                and not mid_iteration
                and not is_storage_failure(exc)
            ):
                try:
                    self.save_checkpoint()
                except Exception:  # noqa: BLE001 - the original error matters more
                    traceback.print_exc()
            raise
        finally:
            view.close()
            if monitor is not None:
                monitor.stop()
            for sink in sinks:
                sink.close()
            self.worker_processes = self.runner.process_resources() or self.worker_processes
            self.runner.close()
            if main:
                try:
                    _write_json(
                        self.run_dir / "manifest.json", self._manifest(status, started, stop_reason)
                    )
                except OSError as exc:
                    if not is_storage_failure(exc) or status != "failed":
                        raise  # a failed run's own storage error is the one to report
        return self.run_dir

    def _dump_batch(self, batch: Any) -> Path | None:
        """Save the batch's arrays as safetensors in ``nonfinite/`` (None: nothing to save)."""
        tensors = batch_tensors(batch)
        if not tensors:
            return None
        path = self.run_dir / "nonfinite" / f"batch_iteration_{self.iteration + 1:08d}.safetensors"
        path.parent.mkdir(exist_ok=True)
        save_file(tensors, str(path))
        return path

    def _decide_stop(self, signal_name: str | None) -> str | None:
        """The stop reason after this iteration, agreed by all data-parallel learners."""

        def decide(signalled: bool) -> str | None:
            name = signal_name or "on another learner"
            return self._stop_reason() or (f"signal {name}" if signalled else None)

        if self.world_size == 1:
            return decide(signal_name is not None)
        return distributed.agree_on_stop(signal_name is not None, decide)

    def _eta(self, record: dict[str, Any]) -> float | None:
        return eta_s(self.cfg.stop, self._counters(), record["SPS"], record["time_this_iter_s"])
