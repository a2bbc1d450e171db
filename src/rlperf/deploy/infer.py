"""Greedy episodes with a backend, the model call timed alone.

Each decision is timed from just before the backend call to just after it returns logits
(``time.perf_counter_ns``): the input copy and any (de)quantization are inside, the argmax
and the env step are not. A few untimed warm-up calls come first, so one-off costs (memory
planning, XNNPACK packing, CUDA context) do not count. With ``batch_size`` K, K envs (seeds
``seed .. seed+K-1``) step in lockstep and each call decides for all of them; a decision's
time is the call's time.
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
    done: list[EpisodeTiming] = []
    calls: list[int] = []
    clock = time.perf_counter_ns
    while (episodes is None or len(done) < episodes) and (steps is None or len(calls) < steps):
        start = clock()
        logits = backend(obs)
        elapsed = clock() - start
        calls.append(elapsed)
        actions = np.asarray(logits).argmax(-1)
        for i, env in enumerate(envs):
            o, reward, terminated, truncated, game_end = env.step(int(actions[i]))
            open_times[i].append(elapsed)
            open_reward[i] += reward  # the evaluation env does not clip rewards
            if terminated or truncated:  # no episodic life here: this is the game's end
                total = game_end[0] if game_end is not None else open_reward[i]
                done.append(_episode(len(done), open_times[i], total))
                open_times[i], open_reward[i] = [], 0.0
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
    return InferenceResult(done, np.asarray(calls), unfinished)


def write_csv(path: Path, rows: list[EpisodeTiming], force: bool = False) -> None:
    """Per-episode timings as CSV; an existing file is replaced only with ``force``."""
    path = Path(path)
    if path.exists() and not force:
        raise UserInputError(f"{path} already exists; pass --force to overwrite it")
    if not path.parent.exists():
        raise UserInputError(f"directory {path.parent} does not exist")
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with tmp.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        for row in rows:
            writer.writerow([f"{v:.6g}" if isinstance(v, float) else v for v in astuple(row)])
    os.replace(tmp, path)
