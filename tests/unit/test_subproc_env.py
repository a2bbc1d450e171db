"""SubprocVectorEnv: same results as SyncVectorEnv, snapshots across both, worker failures,
and no process or shared-memory leak after close()."""

from __future__ import annotations

import dataclasses
import functools
import gc
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from multiprocessing import resource_tracker

import gymnasium
import numpy as np
import psutil
import pytest

from rlperf.config.schema import EnvConfig
from rlperf.envs.base import EnvState, GameEnd
from rlperf.envs.make import make_env
from rlperf.envs.subproc import EnvWorkerError, SubprocVectorEnv, make_subproc_vector_env
from rlperf.envs.vector import SyncVectorEnv, VecStep

DIM = 84
SHM_DIR = "/dev/shm"


class FakeCrashingEnv:
    """A tiny SingleEnv that misbehaves on request (module level: workers unpickle it by name).

    ``crash_at``: ``step`` number (1-based since the last reset) that raises ValueError, or
    hangs when ``hang`` is set; ``fail_init``: the constructor raises; ``snapshots=False``:
    ``get_state`` raises NotImplementedError like envs without exact snapshots.
    """

    def __init__(
        self,
        crash_at: int | None = None,
        *,
        hang: bool = False,
        fail_init: bool = False,
        snapshots: bool = True,
    ) -> None:
        if fail_init:
            raise OSError("no emulator here")
        self.observation_space = gymnasium.spaces.Box(0, 255, (3,), np.uint8)
        self.action_space = gymnasium.spaces.Discrete(2)
        self._crash_at = crash_at
        self._hang = hang
        self._snapshots = snapshots
        self._t = 0
        self._obs = np.zeros(3, dtype=np.uint8)

    def reset(self, seed: int | None = None) -> np.ndarray:
        self._t = 0
        self._obs[:] = 0 if seed is None else seed % 256
        return self._obs

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, GameEnd | None]:
        self._t += 1
        if self._t == self._crash_at:
            if self._hang:
                time.sleep(3600)
            raise ValueError(f"boom at step {self._t}")
        self._obs[:] = self._t % 256
        return self._obs, float(action), False, False, None

    def get_state(self) -> EnvState:
        if not self._snapshots:
            raise NotImplementedError("FakeCrashingEnv has no snapshots")
        return {"obs": self._obs.copy(), "t": self._t}

    def set_state(self, state: EnvState) -> None:
        self._obs[:] = state["obs"]
        self._t = int(state["t"])

    def close(self) -> None:
        pass


# ---------------------------------------------------------------------------- helpers


def _our_segments() -> set[str]:
    """Shared-memory segments made by this process (SubprocVectorEnv names them so)."""
    prefix = f"rlperf_{os.getpid()}_"
    return {name for name in os.listdir(SHM_DIR) if name.startswith(prefix)}


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


@pytest.fixture
def leak_check() -> Iterator[None]:
    """After the test: no child process and no /dev/shm entry more than before it.

    Checked right away, with no grace period: close() must have joined and unlinked already.
    """
    # multiprocessing's resource tracker is a long-lived helper child (one per parent
    # process), started with the first shared-memory segment: start it now so it is in
    # the "before" picture instead of looking like a leaked worker.
    resource_tracker.ensure_running()
    children_before = _children()
    shm_before = set(os.listdir(SHM_DIR))
    yield
    assert _children() - children_before == set()
    assert _our_segments() == set()
    # Other processes on the machine (a test beside this one) may create entries meanwhile:
    # a new segment of a live process outside this one's tree is theirs, not a leak.
    new = {s for s in set(os.listdir(SHM_DIR)) - shm_before if s.startswith("rlperf_")}
    assert {s for s in new if not _made_by_another_live_process(s)} == set()


def _made_by_another_live_process(segment: str) -> bool:
    """Whether ``segment`` (``rlperf_<pid>_...``) was made by a live process that is neither
    this one nor one of its descendants."""
    pid = int(segment.split("_")[1])
    return pid != os.getpid() and psutil.pid_exists(pid) and pid not in _children()


def _fns(cfg: EnvConfig, n: int) -> list[Callable[[], object]]:
    return [functools.partial(make_env, cfg, DIM, i) for i in range(n)]


def _assert_same_step(got: VecStep, want: VecStep) -> None:
    np.testing.assert_array_equal(got.obs, want.obs)
    assert got.obs.dtype == want.obs.dtype and got.obs.shape == want.obs.shape
    np.testing.assert_array_equal(got.rewards, want.rewards)
    assert got.rewards.dtype == np.float32
    np.testing.assert_array_equal(got.terminations, want.terminations)
    np.testing.assert_array_equal(got.truncations, want.truncations)
    assert got.terminations.dtype == bool and got.truncations.dtype == bool
    # The workers' fixed-size game records carry no frame parity (runner inproc reads it).
    assert got.episodes == [dataclasses.replace(e, frame_parity=None) for e in want.episodes]
    assert got.frame_parity is None
    assert got.final_obs.keys() == want.final_obs.keys()
    for i, final in want.final_obs.items():
        np.testing.assert_array_equal(got.final_obs[i], final)


def _play_both(
    sub: SubprocVectorEnv, sync: SyncVectorEnv, rng: np.random.Generator, steps: int
) -> dict[str, int]:
    """Step both with the same random actions, asserting identical results; count events."""
    counts = {"terminations": 0, "truncations": 0, "episodes": 0}
    n_actions = int(sync.single_action_space.n)
    for _ in range(steps):
        actions = rng.integers(0, n_actions, size=sync.num_envs)
        want = sync.step(actions)
        got = sub.step(actions)
        _assert_same_step(got, want)
        counts["terminations"] += int(want.terminations.sum())
        counts["truncations"] += int(want.truncations.sum())
        counts["episodes"] += len(want.episodes)
    return counts


# ---------------------------------------------------------------------------- equivalence


def test_cartpole_identical_to_sync_including_truncation(leak_check: None) -> None:
    cfg = EnvConfig(id="CartPole-v1", max_episode_steps=15)
    fns = _fns(cfg, 4)
    sync = SyncVectorEnv([fn() for fn in fns])
    with SubprocVectorEnv(fns, num_workers=2) as sub:
        assert sub.num_envs == 4 and sub.num_workers == 2
        assert sub.single_observation_space == sync.single_observation_space
        assert sub.single_action_space == sync.single_action_space
        first = sub.reset(seed=7)
        np.testing.assert_array_equal(first, sync.reset(seed=7))
        counts = _play_both(sub, sync, np.random.default_rng(0), 200)
        # The buffer is reused (zero copy): valid until the next call, like SyncVectorEnv's.
        assert sub.step(np.zeros(4, dtype=np.int64)).obs is first
    sync.close()
    # Both kinds of episode end occurred, so final_obs was really compared.
    assert counts["terminations"] > 0 and counts["truncations"] > 0 and counts["episodes"] > 0


def test_pong_sticky_actions_identical_to_sync(leak_check: None) -> None:
    cfg = EnvConfig(id="ALE/Pong-v5", repeat_action_probability=0.25, max_episode_steps=80)
    fns = _fns(cfg, 2)
    sync = SyncVectorEnv([fn() for fn in fns])
    with SubprocVectorEnv(fns, num_workers=2) as sub:
        assert sub.single_observation_space.shape == (4, DIM, DIM)
        first = sub.reset(seed=3)
        assert first.dtype == np.uint8
        np.testing.assert_array_equal(first, sync.reset(seed=3))
        counts = _play_both(sub, sync, np.random.default_rng(1), 200)
    sync.close()
    assert counts["truncations"] == 4  # each env cut at steps 80 and 160
    assert counts["episodes"] == 4


# ---------------------------------------------------------------------------- snapshots


def test_snapshots_move_between_subproc_and_sync(leak_check: None) -> None:
    cfg = EnvConfig(id="ALE/Pong-v5", repeat_action_probability=0.25)
    fns = _fns(cfg, 4)
    rng = np.random.default_rng(2)
    with SubprocVectorEnv(fns, num_workers=2) as sub:
        sub.reset(seed=11)
        for _ in range(30):
            current = sub.step(rng.integers(0, 6, size=4)).obs
        # Subproc -> Sync: the restored SyncVectorEnv continues exactly like the original.
        sync = SyncVectorEnv([fn() for fn in fns])
        np.testing.assert_array_equal(sync.set_state(sub.get_state()), current)
        _play_both(sub, sync, rng, 40)
        # Sync -> Subproc: move the subproc env elsewhere first, then restore it.
        states = sync.get_state()
        for _ in range(10):
            sub.step(rng.integers(0, 6, size=4))
        restored = sub.set_state(states)
        assert restored is current  # the same shared buffer as ever
        np.testing.assert_array_equal(restored, np.stack([state["obs"] for state in states]))
        _play_both(sub, sync, rng, 40)
        sync.close()


def test_get_state_errors_keep_their_type_and_the_vector_usable(leak_check: None) -> None:
    fns = [functools.partial(FakeCrashingEnv, snapshots=False) for _ in range(2)]
    with SubprocVectorEnv(fns, num_workers=2) as sub:
        sub.reset(seed=0)
        # Runners rely on NotImplementedError to skip env snapshots.
        with pytest.raises(NotImplementedError, match="no snapshots"):
            sub.get_state()
        assert sub.step(np.array([1, 0])).rewards.tolist() == [1.0, 0.0]


# ---------------------------------------------------------------------------- failures


def test_env_exception_names_env_worker_and_original_error(leak_check: None) -> None:
    fns = [functools.partial(FakeCrashingEnv, crash_at=5 if i == 3 else None) for i in range(4)]
    sub = SubprocVectorEnv(fns, num_workers=2)
    try:
        sub.reset(seed=0)
        for _ in range(4):
            sub.step(np.zeros(4, dtype=np.int64))
        with pytest.raises(EnvWorkerError) as info:
            sub.step(np.zeros(4, dtype=np.int64))
        error = info.value
        assert isinstance(error, RuntimeError)
        assert error.env_index == 3 and error.worker_index == 1
        message = str(error)
        assert "env 3" in message and "worker 1" in message
        assert "ValueError" in message and "boom at step 5" in message
        assert error.exc_type == "builtins.ValueError"
        assert "FakeCrashingEnv" in error.worker_traceback or "step" in error.worker_traceback
        assert "boom at step 5" in error.worker_traceback
        # The vector is unusable afterwards, and says why.
        with pytest.raises(EnvWorkerError, match="unusable"):
            sub.step(np.zeros(4, dtype=np.int64))
    finally:
        sub.close()
    sub.close()  # idempotent


def test_failure_while_building_envs(leak_check: None) -> None:
    fns = [functools.partial(FakeCrashingEnv, fail_init=i == 1) for i in range(2)]
    with pytest.raises(EnvWorkerError, match=r"env 1 \(worker 1\) raised OSError.*no emulator"):
        SubprocVectorEnv(fns, num_workers=2)


def test_killed_worker_is_detected_mid_step(leak_check: None) -> None:
    # Worker 1's env hangs at its 2nd step; we SIGKILL it while the parent waits on it.
    # Detection must come from the process sentinel, long before the 30 s step timeout.
    fns = [
        functools.partial(FakeCrashingEnv, crash_at=2 if i == 1 else None, hang=True)
        for i in range(2)
    ]
    sub = SubprocVectorEnv(fns, num_workers=2, step_timeout_s=30.0)
    try:
        sub.reset(seed=0)
        sub.step(np.zeros(2, dtype=np.int64))
        victim = sub.worker_pids[1]
        assert victim is not None
        killer = threading.Timer(0.3, os.kill, (victim, signal.SIGKILL))
        killer.start()
        start = time.monotonic()
        with pytest.raises(EnvWorkerError) as info:
            sub.step(np.zeros(2, dtype=np.int64))
        killer.join()
        assert time.monotonic() - start < 5.0
    finally:
        sub.close()
    error = info.value
    assert error.worker_index == 1 and error.exitcode == -signal.SIGKILL
    assert "SIGKILL" in str(error) and "worker 1" in str(error)


def test_killed_worker_is_detected_between_steps(leak_check: None) -> None:
    cfg = EnvConfig(id="CartPole-v1", num_envs=2)
    sub = make_subproc_vector_env(cfg, DIM, seed=0, num_workers=2, training=True)
    try:
        sub.reset(seed=0)
        sub.step(np.zeros(2, dtype=np.int64))
        os.kill(sub.worker_pids[0], signal.SIGKILL)
        start = time.monotonic()
        with pytest.raises(EnvWorkerError, match="worker 0.*SIGKILL") as info:
            while time.monotonic() - start < 10.0:
                sub.step(np.zeros(2, dtype=np.int64))
        assert time.monotonic() - start < 5.0
        assert info.value.exitcode == -signal.SIGKILL
    finally:
        sub.close()


def test_unanswered_step_times_out(leak_check: None) -> None:
    fns = [functools.partial(FakeCrashingEnv, crash_at=2, hang=True) for _ in range(2)]
    sub = SubprocVectorEnv(fns, num_workers=1, step_timeout_s=0.5)
    try:
        sub.reset(seed=0)
        sub.step(np.zeros(2, dtype=np.int64))
        with pytest.raises(EnvWorkerError, match="did not answer within 0.5 s"):
            sub.step(np.zeros(2, dtype=np.int64))
    finally:
        start = time.monotonic()
        sub.close()  # terminates the hung worker at once instead of waiting for it
        assert time.monotonic() - start < 3.0


# ---------------------------------------------------------------------------- cleanup


def test_close_releases_everything_even_with_views_held(leak_check: None) -> None:
    fns = [functools.partial(FakeCrashingEnv) for _ in range(4)]
    sub = SubprocVectorEnv(fns, num_workers=2)
    obs = sub.reset(seed=5)
    assert len(_our_segments()) == 1  # the segment exists while the env is open
    assert len(_children() & set(sub.worker_pids)) == 2
    sub.close()
    assert sub.closed
    # A view kept by the caller stays readable (the name is unlinked, the mapping lives on).
    assert obs[:, 0].tolist() == [5, 6, 7, 8]
    with pytest.raises(RuntimeError, match="closed"):
        sub.step(np.zeros(4, dtype=np.int64))


def test_forgotten_env_is_cleaned_up_by_the_garbage_collector(leak_check: None) -> None:
    sub = SubprocVectorEnv([functools.partial(FakeCrashingEnv) for _ in range(2)], num_workers=2)
    sub.reset(seed=0)
    del sub
    gc.collect()


def test_bad_arguments_are_refused_before_any_process_starts(leak_check: None) -> None:
    fns = [functools.partial(FakeCrashingEnv) for _ in range(4)]
    with pytest.raises(ValueError, match="multiple of num_workers"):
        SubprocVectorEnv(fns, num_workers=3)
    with pytest.raises(ValueError, match="start_method"):
        SubprocVectorEnv(fns, num_workers=2, start_method="fork")
    with pytest.raises(TypeError, match="cannot be pickled"):
        SubprocVectorEnv([lambda: FakeCrashingEnv()], num_workers=1)
