"""GymEnv (non-Atari gymnasium envs) and the factory rules of rlperf.envs.make."""

from __future__ import annotations

import importlib.util
import json

import gymnasium
import numpy as np
import pytest

from rlperf.config.schema import EnvConfig
from rlperf.core.errors import ConfigError
from rlperf.envs.classic import GymEnv, resolve_max_episode_steps
from rlperf.envs.make import is_atari, make_env, make_vector_env, validate_env_id


class _ScaledRewardEnv(gymnasium.Env):
    """Reward 5 per step, 10 steps per episode, no `state` attribute (snapshots unsupported)."""

    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float64)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return np.zeros(2), {}

    def step(self, action):
        self._t += 1
        return np.full(2, 0.5), 5.0, self._t >= 10, False, {}


gymnasium.register("RlperfTest/ScaledReward-v0", entry_point=_ScaledRewardEnv)

needs_ale = pytest.mark.skipif(
    importlib.util.find_spec("ale_py") is None, reason="needs the atari extra (ale-py)"
)


def _run(env: GymEnv, actions) -> list[tuple]:
    record = []
    for action in actions:
        obs, reward, terminated, truncated, game_end = env.step(int(action))
        record.append((obs.tobytes(), reward, terminated, truncated, game_end))
        if terminated or truncated:
            record.append(("reset", env.reset().tobytes()))
    return record


def test_cartpole_observations_and_registered_limit():
    env = GymEnv(EnvConfig(id="CartPole-v1"), seed=0)
    assert env.observation_space.dtype == np.float32 and env.observation_space.shape == (4,)
    assert env.action_space.n == 2
    obs = env.reset()
    assert obs.dtype == np.float32 and obs.shape == (4,)
    # The EnvConfig default (27000) is an Atari notion: CartPole keeps its registered 500.
    assert resolve_max_episode_steps(EnvConfig(), 500) == 500
    assert resolve_max_episode_steps(EnvConfig(), None) == 27000
    assert resolve_max_episode_steps(EnvConfig(max_episode_steps=20), 500) == 20
    assert resolve_max_episode_steps(EnvConfig(max_episode_steps=None), 500) is None
    env.close()


def test_max_episode_steps_truncation():
    env = GymEnv(EnvConfig(id="CartPole-v1", max_episode_steps=5), seed=0)
    env.reset()
    # Alternating pushes keep the pole up far longer than 5 steps.
    results = [env.step(i % 2) for i in range(5)]
    assert not any(r[2] or r[3] for r in results[:-1])
    _, _, terminated, truncated, game_end = results[-1]
    assert truncated and not terminated and game_end == (5.0, 5)
    env.close()


def test_same_seed_same_trajectory():
    actions = np.random.default_rng(0).integers(0, 2, size=200)
    runs = []
    for seed in (4, 4, 5):
        env = GymEnv(EnvConfig(id="CartPole-v1"), seed=seed)
        runs.append([env.reset().tobytes(), *_run(env, actions)])
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Acrobot-v1", "MountainCar-v0"])
def test_get_state_set_state_is_exact(env_id):
    rng = np.random.default_rng(1)
    env = GymEnv(EnvConfig(id=env_id, max_episode_steps=40), seed=2)
    n = int(env.action_space.n)
    env.reset()
    _run(env, rng.integers(0, n, size=25))
    state = env.get_state()
    actions = rng.integers(0, n, size=150)  # crosses several episode ends
    expected = _run(env, actions)
    assert any(r[0] == "reset" for r in expected)
    env.set_state(state)
    assert _run(env, actions) == expected

    arrays = {k: v for k, v in state.items() if isinstance(v, np.ndarray)}
    rest = json.loads(json.dumps({k: v for k, v in state.items() if k not in arrays}))
    fresh = GymEnv(EnvConfig(id=env_id, max_episode_steps=40), seed=77)
    fresh.set_state({**rest, **arrays})
    assert _run(fresh, actions) == expected


def test_state_before_first_reset_round_trips():
    env = GymEnv(EnvConfig(id="CartPole-v1"), seed=3)
    state = env.get_state()
    expected = [env.reset().tobytes(), *_run(env, [0, 1, 1])]
    fresh = GymEnv(EnvConfig(id="CartPole-v1"), seed=99)
    fresh.set_state(state)
    assert [fresh.reset().tobytes(), *_run(fresh, [0, 1, 1])] == expected


def test_unsupported_snapshot_and_spaces():
    env = GymEnv(EnvConfig(id="RlperfTest/ScaledReward-v0"), seed=0)
    env.reset()
    with pytest.raises(NotImplementedError, match="unwrapped.state"):
        env.get_state()
    with pytest.raises(ConfigError, match="Discrete"):
        GymEnv(EnvConfig(id="Pendulum-v1"), seed=0)


def test_reward_clipping_rule():
    # GymEnv honours clip_rewards (training rewards only) ...
    env = GymEnv(EnvConfig(id="RlperfTest/ScaledReward-v0", clip_rewards=True), seed=0)
    env.reset()
    steps = [env.step(0) for _ in range(10)]
    assert [s[1] for s in steps] == [1.0] * 10
    assert steps[-1][4] == (50.0, 10)
    # ... but the factory applies clipping to Atari only, even with the default config.
    factory_env = make_env(EnvConfig(id="RlperfTest/ScaledReward-v0"), 84, seed=0)
    factory_env.reset()
    assert factory_env.step(0)[1] == 5.0


def test_step_before_reset_raises_and_state_kind_checked():
    env = GymEnv(EnvConfig(id="CartPole-v1"), seed=0)
    with pytest.raises(RuntimeError):
        env.step(0)
    other = GymEnv(EnvConfig(id="Acrobot-v1"), seed=0)
    with pytest.raises(ValueError, match="CartPole"):
        other.set_state(env.get_state())


@needs_ale
def test_validate_env_id_accepts_registered_ids():
    validate_env_id("CartPole-v1")
    validate_env_id("ALE/Pong-v5")
    assert is_atari("ALE/Pong-v5") and is_atari("BreakoutNoFrameskip-v4")
    assert not is_atari("CartPole-v1")


@needs_ale
@pytest.mark.parametrize(
    ("bad_id", "suggestion"),
    [
        ("Pong-v5", "ALE/Pong-v5"),
        ("pong", "ALE/Pong-v5"),
        ("ALE/SpaceInvader-v5", "ALE/SpaceInvaders-v5"),
        ("CartPol-v1", "CartPole-v1"),
        ("cartpole", "CartPole-v1"),
    ],
)
def test_validate_env_id_suggests_close_matches(bad_id, suggestion):
    with pytest.raises(ConfigError) as info:
        validate_env_id(bad_id)
    message = str(info.value)
    assert "\n" not in message
    assert repr(bad_id) in message
    assert f"did you mean {suggestion!r}" in message  # the best match comes first


def test_validate_env_id_without_match_and_bad_module():
    with pytest.raises(ConfigError, match="unknown environment id 'zzzqqq'$"):
        validate_env_id("zzzqqq")
    with pytest.raises(ConfigError, match="cannot import module 'no_such_module_xyz'"):
        validate_env_id("no_such_module_xyz:Foo-v0")
    with pytest.raises(ConfigError):
        validate_env_id("")
    with pytest.raises(ConfigError, match="Nope-v0"):
        make_vector_env(EnvConfig(id="Nope-v0"), 84, seed=0)
