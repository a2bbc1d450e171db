"""The decoupled runner driven directly: data in use is never overwritten, lag is bounded,
and an env that raises in an actor is restarted or reported with the actor and the cause."""

import functools
import time

import pytest
import torch

from rlperf.config.schema import RunConfig
from rlperf.core.errors import ActorError
from rlperf.core.types import Progress
from rlperf.envs.make import make_env_slice
from rlperf.models.catalog import build_model
from rlperf.runners.decoupled import DecoupledRunner
from rlperf.telemetry.timers import PhaseTimer
from rlperf.training import registry
from tests.helpers.flaky_envs import cartpole_failing_once


def _runner(make_env_slice_fn=None, **runner_keys):
    cfg = RunConfig(algo="impala")
    cfg.env.id, cfg.env.num_envs, cfg.model.name = "CartPole-v1", 2, "mlp"
    cfg.runner.name = "decoupled"
    for key, value in runner_keys.items():
        setattr(cfg.runner, key, value)
    cfg.impala.max_policy_lag = 1
    spaces = registry.env_spaces(cfg, 84, None)
    make_policy = functools.partial(build_model, cfg.model, (4,), 2)
    algo = registry.make_algorithm(cfg, make_policy())
    runner = DecoupledRunner(
        cfg.runner,
        algo,
        num_envs=2,
        obs_space=spaces.observation,
        make_env_slice=make_env_slice_fn or functools.partial(make_env_slice, cfg.env, 84),
        make_policy=make_policy,
        seed=1,
    )
    return runner, algo, runner.make_gradient_step(algo)


def _iterate(runner, algo, step, n, pause_s=0.0):
    metrics = []
    for i in range(n):
        batch, _ = runner.collect(PhaseTimer())
        time.sleep(pause_s)
        algo.update(runner.load(batch), step, Progress(i, 0, 1.0))
        runner.sync_weights()
        metrics.append(runner.worker_metrics())
    return metrics


def test_the_batch_being_read_is_never_overwritten_by_the_actor():
    runner, algo, step = _runner()
    try:
        batch, _ = runner.collect(PhaseTimer())
        snapshot = {k: v.clone() for k, v in vars(batch).items()}
        other = runner.slots.data.obs_TN[1 - runner._held[0]]
        deadline = time.monotonic() + 10
        while not other.any() and time.monotonic() < deadline:  # the actor filled its other slot
            time.sleep(0.05)
        time.sleep(0.3)  # ... and would overwrite more if it could
        assert other.any()
        for name, value in snapshot.items():
            assert torch.equal(getattr(batch, name), value), name
    finally:
        runner.close()


def test_rollouts_older_than_max_policy_lag_are_dropped():
    runner, algo, step = _runner(slots_per_actor=4)
    try:
        # The learner pauses after each batch so the actor fills all its slots ahead.
        metrics = _iterate(runner, algo, step, 5, pause_s=0.3)
    finally:
        runner.close()
    assert all(m["perf/policy_lag_max"] <= 1 for m in metrics)
    assert sum(m["perf/rollouts_dropped"] for m in metrics) > 0
    assert max(m["perf/policy_lag_max"] for m in metrics) == 1


def test_an_env_error_in_an_actor_names_the_actor_and_the_cause():
    failing = functools.partial(cartpole_failing_once, raise_at=50, failing_seed=1)
    runner, algo, step = _runner(failing, restart_failed_workers=False)
    try:
        with pytest.raises(ActorError) as info:
            _iterate(runner, algo, step, 10)
    finally:
        runner.close()
    message = str(info.value)
    assert "actor 0 (envs 0..1" in message and "ValueError: injected failure at step 50" in message
    assert info.value.worker_index == 0
    assert "actor-side traceback" in "".join(info.value.__notes__)


def test_an_env_error_in_an_actor_restarts_it_and_training_goes_on():
    failing = functools.partial(cartpole_failing_once, raise_at=50, failing_seed=1)
    runner, algo, step = _runner(failing, max_worker_restarts=1)
    try:
        metrics = _iterate(runner, algo, step, 10)
    finally:
        runner.close()
    assert metrics[-1]["sys/worker_restarts"] == 1
    assert metrics[-1]["sys/live_workers"] == 1


class _RecordingDecoupledRunner:
    """A fake in place of DecoupledRunner: records what the registry builds it with."""

    def __init__(self, cfg, algo, **kwargs):
        self.kwargs = kwargs


@pytest.mark.parametrize(("num_threads", "expected"), [(None, "shared"), (3, 3)])
def test_actors_engine_pools_share_the_cores_unless_env_num_threads_is_set(
    monkeypatch, num_threads, expected
):
    cfg = RunConfig(algo="impala")
    cfg.env.id, cfg.env.num_envs, cfg.model.name = "CartPole-v1", 4, "mlp"
    cfg.env.num_threads = num_threads
    cfg.runner.name, cfg.runner.num_workers = "decoupled", 2
    cfg.runner.actor_cpu_affinity = [0, 1, 2, 3, 4]  # five cores for two actors: 2 each
    monkeypatch.setattr(registry, "DecoupledRunner", _RecordingDecoupledRunner)
    spaces = registry.env_spaces(cfg, 84, None)
    algo = registry.make_algorithm(cfg, build_model(cfg.model, (4,), 2))
    built = registry.make_runner(cfg, None, algo, 84, spaces)
    slice_env_cfg = built.kwargs["make_env_slice"].args[0]
    assert slice_env_cfg.num_threads == (2 if expected == "shared" else expected)
    assert cfg.env.num_threads == num_threads  # the run's config is read, never rewritten
