"""Greedy episodes with a backend, the model call timed alone.

Each decision is timed from just before the backend call to just after it returns logits
(``time.perf_counter_ns``): the input copy and any (de)quantization are inside, the argmax
and the env step are not. A few untimed warm-up calls come first, so one-off costs (memory
planning, XNNPACK packing, CUDA context) do not count. With ``batch_size`` K, K envs (seeds
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
from dataclasses import astuple, dataclass, fields
from pathlib import Path

import numpy as np

from rlperf.core.errors import UserInputError
from rlperf.deploy.backends import Backend
from rlperf.deploy.policy import RunPolicy

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
) -> InferenceResult:
    """Play greedy (argmax) actions of ``backend`` until ``episodes`` games have ended or
    ``steps`` calls were made (whichever is set; both: the first reached)."""
    from rlperf.envs.make import make_env

    if episodes is None and steps is None:
        raise UserInputError("give --episodes N or --steps N")
    if (episodes is not None and episodes < 1) or (steps is not None and steps < 1):
        raise UserInputError("--episodes and --steps must be positive integers")
    envs = [
        make_env(policy.cfg.env, policy.dim, seed + i, training=False) for i in range(batch_size)
    ]
    obs = np.stack([env.reset(seed=seed + i) for i, env in enumerate(envs)])
    for _ in range(warmup):
        backend(obs)
    open_times: list[list[int]] = [[] for _ in envs]
    open_reward = [0.0] * batch_size
    games = [0] * batch_size  # finished games per env
    done: list[EpisodeTiming] = []
    calls: list[int] = []
    rows: list[StepTiming] = []
    clock = time.perf_counter_ns
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
            if terminated or truncated:  # no episodic life here: this is the game's end
                total = game_end[0] if game_end is not None else open_reward[i]
                done.append(_episode(len(done), open_times[i], total))
                open_times[i], open_reward[i] = [], 0.0
                games[i] += 1
                o = env.reset()
            obs[i] = o
    if episodes is not None:
        done = done[:episodes]  # with K envs several games can end on the last call
    unfinished = 0
    if episodes is None or len(done) < episodes:  # a step budget ended the run mid-game
        for i in range(batch_size):
            if open_times[i]:
                done.append(_episode(len(done), open_times[i], open_reward[i]))
                unfinished += 1
    for env in envs:
        close = getattr(env, "close", None)
        if close is not None:
            close()
    return InferenceResult(done, np.asarray(calls), unfinished, rows)


def energy_per_call(usage: dict[str, float | None], calls: int) -> str:
    """A line with the energy per model call from a :class:`SystemMonitor` window over the
    games: the CPU package (RAPL: the whole package, env steps and other processes
    included) and each GPU (NVML); says so where neither can be read."""
    parts = []
    if usage.get("energy/joules") is not None and calls:
        parts.append(f"CPU package {1000 * usage['energy/joules'] / calls:.3f} mJ")
    for key, joules in sorted(usage.items()):
        if key.startswith("energy/gpu") and joules is not None and calls:
            gpu = key.removeprefix("energy/").removesuffix("_joules")
            parts.append(f"{gpu} {1000 * joules / calls:.3f} mJ")
    if not parts:
        return "energy per call: not measured (neither RAPL nor NVML can be read here)"
    return "energy per call: " + ", ".join(parts)


def write_csv(
    path: Path, rows: list[EpisodeTiming] | list[StepTiming], force: bool = False
) -> None:
    """Per-episode (or per-step) timings as CSV; an existing file is replaced only with
    ``force``."""
    path = Path(path)
    if path.exists() and not force:
        raise UserInputError(f"{path} already exists; pass --force to overwrite it")
    if not path.parent.exists():
        raise UserInputError(f"directory {path.parent} does not exist")
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with tmp.open("w", newline="") as f:
        writer = csv.writer(f)
        per_step = bool(rows) and isinstance(rows[0], StepTiming)
        writer.writerow(STEP_CSV_COLUMNS if per_step else CSV_COLUMNS)
        for row in rows:
            writer.writerow([f"{v:.6g}" if isinstance(v, float) else v for v in astuple(row)])
    os.replace(tmp, path)
