"""Greedy episodes with a backend, the model call timed alone.

Each decision is timed from just before the backend call to just after it returns logits
(``time.perf_counter_ns``): the input copy and any (de)quantization are inside, the argmax
and the env step are not. A few warm-up calls come first, so one-off costs (memory
planning, XNNPACK packing, CUDA context) stay out of the steady figures; they are timed too
and kept apart (:attr:`InferenceResult.first_call_ms`,
:attr:`InferenceResult.first_episode_mean_ms`), since a freshly deployed agent pays them. With ``batch_size`` K, K envs (seeds
``seed .. seed+K-1``) step in lockstep and each call decides for all of them; a decision's
time is the call's time.

Every step is also recorded (:class:`StepTiming`: the call's model time, that env's step
time, the action and reward), as the thesis's ``rollout_with_time.py`` did;
``rlperf infer --step-output F.csv`` writes them.
"""

from __future__ import annotations

import csv
import os
import time
from dataclasses import astuple, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rlperf.core.errors import UserInputError
from rlperf.deploy.backends import Backend
from rlperf.deploy.policy import RunPolicy

if TYPE_CHECKING:
    from rlperf.telemetry.sysmon import SystemMonitor

WARMUP_CALLS = 20


@dataclass(frozen=True)
class EpisodeTiming:
    """One game: its length, return and the model time of its decisions (milliseconds)."""

    episode: int
    steps: int
    total_model_time_ms: float
    mean_step_ms: float
    p50: float
    p99: float
    reward: float


ENERGY_CSV_COLUMNS = ["energy_j_per_call", "energy_source"]
"""Run-level columns after the per-game ones of ``--time-output`` (the same on every row:
the energy window spans all games)."""
CSV_COLUMNS = [f.name for f in fields(EpisodeTiming)]


@dataclass(frozen=True)
class StepTiming:
    """One env's step: the model call that chose its action and the env step that followed."""

    step: int
    """Index of the model call (with a batch, the envs of one call share it)."""
    env: int
    episode: int
    """The env's game number: 0 for its first game, 1 for its next, ..."""
    model_time_ms: float
    env_time_ms: float
    action: int
    reward: float


STEP_CSV_COLUMNS = [f.name for f in fields(StepTiming)]


def _episode(index: int, times_ns: list[int], reward: float) -> EpisodeTiming:
    ms = np.asarray(times_ns, dtype=np.float64) / 1e6
    return EpisodeTiming(
        episode=index,
        steps=len(ms),
        total_model_time_ms=float(ms.sum()),
        mean_step_ms=float(ms.mean()) if len(ms) else 0.0,
        p50=float(np.percentile(ms, 50)) if len(ms) else 0.0,
        p99=float(np.percentile(ms, 99)) if len(ms) else 0.0,
        reward=float(reward),
    )


@dataclass
class InferenceResult:
    """Finished games (and the unfinished one when a step budget ran out) plus every call's time."""

    episodes: list[EpisodeTiming]
    call_times_ns: np.ndarray
    unfinished: int
    """How many rows at the end of ``episodes`` are games cut short by ``steps``."""
    steps: list[StepTiming]
    warmup_times_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    """The warm-up calls' times, first (cold) call first."""

    @property
    def first_call_ms(self) -> float | None:
        """The process's first model call (cold: one-off costs included)."""
        first = self.warmup_times_ns if len(self.warmup_times_ns) else self.call_times_ns
        return float(first[0]) / 1e6 if len(first) else None

    @property
    def first_episode_mean_ms(self) -> float | None:
        """Mean time per call of the first game with the warm-up calls counted as its first
        calls: what the thesis's first episode measured (it had no warm-up)."""
        if not self.episodes:
            return None
        first = self.episodes[0]
        total = first.total_model_time_ms + float(self.warmup_times_ns.sum()) / 1e6
        return total / (first.steps + len(self.warmup_times_ns))

    def record(self) -> dict[str, Any]:
        """The figures that inference results files keep (ms; returns of finished games)."""
        ms = self.call_times_ns / 1e6
        finished = self.episodes[: len(self.episodes) - self.unfinished]
        return {
            "calls": int(len(ms)),
            "p50_ms": float(np.percentile(ms, 50)),
            "p90_ms": float(np.percentile(ms, 90)),
            "p99_ms": float(np.percentile(ms, 99)),
            "mean_ms": float(ms.mean()),
            "warmup_calls": int(len(self.warmup_times_ns)),
            "first_call_ms": self.first_call_ms,
            "first_episode_mean_ms": self.first_episode_mean_ms,
            "episodes_finished": len(finished),
            "mean_return": float(np.mean([e.reward for e in finished])) if finished else None,
        }

    def summary(self, backend: str, batch_size: int, threads: int) -> str:
        ms = self.call_times_ns / 1e6
        finished = self.episodes[: len(self.episodes) - self.unfinished]
        rewards = [e.reward for e in finished]
        mean_reward = f"{np.mean(rewards):.2f}" if rewards else "n/a"
        return (
            f"{backend}: {len(finished)} episodes"
            + (f" (+{self.unfinished} unfinished)" if self.unfinished else "")
            + f", {len(ms)} calls of batch {batch_size}, {threads} thread(s): "
            f"model time p50 {np.percentile(ms, 50):.3f} ms, p99 {np.percentile(ms, 99):.3f} ms, "
            f"mean {ms.mean():.3f} ms; mean return {mean_reward}"
            + (f"; first call {self.first_call_ms:.3f} ms" if self.first_call_ms else "")
        )


def run_greedy(
    backend: Backend,
    policy: RunPolicy,
    *,
    episodes: int | None = None,
    steps: int | None = None,
    seed: int = 0,
    batch_size: int = 1,
    warmup: int = WARMUP_CALLS,
    video_dir: Path | None = None,
) -> InferenceResult:
    """Play greedy (argmax) actions of ``backend`` until ``episodes`` games have ended or
    ``steps`` calls were made (whichever is set; both: the first reached). With
    ``video_dir``, the first env's games are recorded there, one file each (outside the
    timed calls)."""
    from rlperf.envs.make import make_env
    from rlperf.envs.video import ATARI_FPS, GameVideos

    if episodes is None and steps is None:
        raise UserInputError("give --episodes N or --steps N")
    if (episodes is not None and episodes < 1) or (steps is not None and steps < 1):
        raise UserInputError("--episodes and --steps must be positive integers")
    envs = [
        make_env(policy.cfg.env, policy.dim, seed + i, training=False) for i in range(batch_size)
    ]
    obs = np.stack([env.reset(seed=seed + i) for i, env in enumerate(envs)])
    videos = None
    if video_dir is not None:
        videos = GameVideos(video_dir, ATARI_FPS / policy.cfg.env.mean_frameskip)
        videos.add(envs[0].screen_rgb())
    clock = time.perf_counter_ns
    warmup_ns = []
    for _ in range(warmup):
        start = clock()
        backend(obs)
        warmup_ns.append(clock() - start)
    open_times: list[list[int]] = [[] for _ in envs]
    open_reward = [0.0] * batch_size
    games = [0] * batch_size  # finished games per env
    done: list[EpisodeTiming] = []
    calls: list[int] = []
    rows: list[StepTiming] = []
    while (episodes is None or len(done) < episodes) and (steps is None or len(calls) < steps):
        start = clock()
        logits = backend(obs)
        elapsed = clock() - start
        calls.append(elapsed)
        actions = np.asarray(logits).argmax(-1)
        for i, env in enumerate(envs):
            env_start = clock()
            o, reward, terminated, truncated, game_end = env.step(int(actions[i]))
            env_ns = clock() - env_start
            rows.append(
                StepTiming(
                    len(calls) - 1, i, games[i], elapsed / 1e6, env_ns / 1e6,
                    int(actions[i]), float(reward),
                )
            )  # fmt: skip
            open_times[i].append(elapsed)
            open_reward[i] += reward  # the evaluation env does not clip rewards
            if videos is not None and i == 0:
                videos.add(env.screen_rgb())
            if terminated or truncated:  # no episodic life here: this is the game's end
                total = game_end[0] if game_end is not None else open_reward[i]
                done.append(_episode(len(done), open_times[i], total))
                open_times[i], open_reward[i] = [], 0.0
                games[i] += 1
                o = env.reset()
                if videos is not None and i == 0:
                    videos.end_game()
                    if episodes is None or len(done) < episodes:
                        videos.add(env.screen_rgb())
            obs[i] = o
    if episodes is not None:
        done = done[:episodes]  # with K envs several games can end on the last call
    unfinished = 0
    if episodes is None or len(done) < episodes:  # a step budget ended the run mid-game
        for i in range(batch_size):
            if open_times[i]:
                done.append(_episode(len(done), open_times[i], open_reward[i]))
                unfinished += 1
    if videos is not None:
        videos.close()
    for env in envs:
        close = getattr(env, "close", None)
        if close is not None:
            close()
    return InferenceResult(done, np.asarray(calls), unfinished, rows, np.asarray(warmup_ns))


NOT_MEASURED = "neither RAPL nor NVML can be read here"


@dataclass(frozen=True)
class EnergyPerCall:
    """Energy per model call over a window of games: the CPU package (RAPL: the whole
    package, env steps and other processes included) and each GPU (NVML)."""

    parts: dict[str, float]
    """Joules per call by source: ``cpu_package``, ``gpu0``, ..."""
    reason: str | None = None
    """Why nothing was measured (None when something was)."""

    @classmethod
    def from_usage(cls, usage: dict[str, float | None], calls: int) -> EnergyPerCall:
        """From a :class:`SystemMonitor` window (``energy/joules``, ``energy/gpuN_joules``)."""
        if calls < 1:
            return cls({}, "no model call was made")
        parts = {}
        if (cpu := usage.get("energy/joules")) is not None:
            parts["cpu_package"] = cpu / calls
        for key, joules in sorted(usage.items()):
            if key.startswith("energy/gpu") and joules is not None:
                parts[key.removeprefix("energy/").removesuffix("_joules")] = joules / calls
        return cls(parts, None if parts else NOT_MEASURED)

    @property
    def joules(self) -> float | None:
        """All sources together per call; None when none was read."""
        return sum(self.parts.values()) if self.parts else None

    @property
    def source(self) -> str | None:
        """Where the figure comes from, e.g. ``RAPL cpu_package + NVML gpu0``."""
        if not self.parts:
            return None
        return " + ".join(
            ("RAPL " if name == "cpu_package" else "NVML ") + name for name in self.parts
        )

    def record(self) -> dict[str, Any]:
        """What results files keep."""
        return {
            "joules_per_call": self.joules,
            "source": self.source,
            "parts_j_per_call": dict(self.parts),
            "reason": self.reason,
        }

    def line(self) -> str:
        """The line ``rlperf infer`` prints."""
        if not self.parts:
            return f"energy per call: not measured ({self.reason})"
        names = {"cpu_package": "CPU package"}
        return "energy per call: " + ", ".join(
            f"{names.get(k, k)} {1000 * j:.3f} mJ" for k, j in self.parts.items()
        )


def energy_monitor() -> SystemMonitor:
    """The monitor whose window measures a run's energy (tests replace this function)."""
    from rlperf.telemetry.sysmon import SystemMonitor

    return SystemMonitor()


def run_measured(
    backend: Backend, policy: RunPolicy, **play: Any
) -> tuple[InferenceResult, EnergyPerCall]:
    """:func:`run_greedy` (same keywords) inside an energy window; the energy is divided by
    every call the window saw, warm-up calls included."""
    with energy_monitor() as monitor:
        monitor.collect()  # the window starts with the games
        result = run_greedy(backend, policy, **play)
        usage = monitor.collect()
    calls = len(result.call_times_ns) + len(result.warmup_times_ns)
    return result, EnergyPerCall.from_usage(usage, calls)


def write_csv(
    path: Path,
    rows: list[EpisodeTiming] | list[StepTiming],
    force: bool = False,
    energy: EnergyPerCall | None = None,
) -> None:
    """Per-episode (or per-step) timings as CSV; an existing file is replaced only with
    ``force``. With ``energy``, per-episode rows end with :data:`ENERGY_CSV_COLUMNS`."""
    path = Path(path)
    if path.exists() and not force:
        raise UserInputError(f"{path} already exists; pass --force to overwrite it")
    if not path.parent.exists():
        raise UserInputError(f"directory {path.parent} does not exist")
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with tmp.open("w", newline="") as f:
        writer = csv.writer(f)
        per_step = bool(rows) and isinstance(rows[0], StepTiming)
        with_energy = energy is not None and not per_step
        header = STEP_CSV_COLUMNS if per_step else CSV_COLUMNS
        writer.writerow(header + ENERGY_CSV_COLUMNS if with_energy else header)
        tail = []
        if with_energy:
            assert energy is not None
            tail = [
                "" if energy.joules is None else f"{energy.joules:.6g}",
                energy.source or f"not measured: {energy.reason}",
            ]
        for row in rows:
            values = [f"{v:.6g}" if isinstance(v, float) else v for v in astuple(row)]
            writer.writerow(values + tail)
    os.replace(tmp, path)
