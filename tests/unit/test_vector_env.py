"""SyncVectorEnv: batching, same-step autoreset, episode reports, seeding, snapshots."""

from __future__ import annotations

import numpy as np
import pytest

from rlperf.config.schema import EnvConfig
from rlperf.envs.base import EpisodeEnd, SingleEnv
from rlperf.envs.classic import GymEnv
from rlperf.envs.make import make_env, make_vector_env
from rlperf.envs.vector import SyncVectorEnv


def _cartpole_vector(n: int, seed: int = 0) -> SyncVectorEnv:
    return SyncVectorEnv([GymEnv(EnvConfig(id="CartPole-v1"), seed + i) for i in range(n)])


def test_reset_seeds_env_i_with_seed_plus_i():
    vec = _cartpole_vector(3)
    obs = vec.reset(seed=10)
    assert obs.shape == (3, 4) and obs.dtype == np.float32
    for i in range(3):
        single = GymEnv(EnvConfig(id="CartPole-v1"), seed=0)
        assert np.array_equal(obs[i], single.reset(seed=10 + i))


def test_same_step_autoreset_matches_single_envs():
    n = 3
    vec = _cartpole_vector(n)
    singles = [GymEnv(EnvConfig(id="CartPole-v1"), seed=0) for _ in range(n)]
    vec.reset(seed=5)
    for i, env in enumerate(singles):
        env.reset(seed=5 + i)
    rng = np.random.default_rng(0)
    seen_ends = 0
    for _ in range(120):
        actions = rng.integers(0, 2, size=n)
        step = vec.step(actions)
        assert step.rewards.dtype == np.float32 and step.rewards.shape == (n,)
        assert step.terminations.dtype == bool and step.truncations.dtype == bool
        expected_ends = []
        for i, env in enumerate(singles):
            obs, reward, terminated, truncated, game_end = env.step(int(actions[i]))
            assert step.rewards[i] == reward
            assert step.terminations[i] == terminated and step.truncations[i] == truncated
            if game_end is not None:
                expected_ends.append(EpisodeEnd(i, *game_end))
            if terminated or truncated:
                # Same-step autoreset: the vector already holds the next episode's first obs,
                # not the final observation.
                assert not np.array_equal(step.obs[i], obs)
                obs = env.reset()
                assert np.abs(step.obs[i]).max() <= 0.05  # CartPole's reset distribution
            assert np.array_equal(step.obs[i], obs)
        assert step.episodes == expected_ends
        for end in step.episodes:
            assert end.episode_return == float(end.length)  # CartPole pays 1 per step
        seen_ends += len(step.episodes)
    assert seen_ends >= n  # random CartPole episodes last ~20 steps


def test_observation_buffer_is_reused():
    vec = _cartpole_vector(2)
    first = vec.reset(seed=0)
    step = vec.step(np.zeros(2, dtype=np.int64))
    assert step.obs is first  # one preallocated buffer: valid until the next call


def test_vector_get_state_set_state_is_exact():
    vec = _cartpole_vector(2)
    vec.reset(seed=1)
    rng = np.random.default_rng(3)
    for _ in range(15):
        vec.step(rng.integers(0, 2, size=2))
    states = vec.get_state()
    obs_at_snapshot = vec.step(np.zeros(2, dtype=np.int64)).obs.copy()
    actions = rng.integers(0, 2, size=(60, 2))

    def play(v: SyncVectorEnv) -> list:
        out = []
        for a in actions:
            s = v.step(a)
            out.append((s.obs.tobytes(), s.rewards.tobytes(), s.terminations.tobytes(), s.episodes))
        return out

    expected = play(vec)
    fresh = _cartpole_vector(2, seed=50)
    restored_obs = fresh.set_state(states)
    assert restored_obs.shape == (2, 4)
    assert np.array_equal(fresh.step(np.zeros(2, dtype=np.int64)).obs, obs_at_snapshot)
    assert play(fresh) == expected
    with pytest.raises(ValueError):
        fresh.set_state(states[:1])


def test_atari_vector_uint8_batch_and_game_ends_under_episodic_life():
    pytest.importorskip("ale_py")
    cfg = EnvConfig(id="ALE/Breakout-v5", num_envs=2, repeat_action_probability=0.25)
    vec = make_vector_env(cfg, dim=84, seed=0)
    assert vec.num_envs == 2 and vec.single_action_space.n == 4
    obs = vec.reset(seed=0)
    assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
    rng = np.random.default_rng(0)
    life_losses = [0, 0]
    ended: list[EpisodeEnd] = []
    for _ in range(400):
        step = vec.step(rng.integers(0, 4, size=2))
        for i in np.flatnonzero(step.terminations):
            life_losses[i] += 1
        ended.extend(step.episodes)
        if {e.env_index for e in ended} == {0, 1}:
            break
    assert {e.env_index for e in ended} == {0, 1}
    for end in ended:
        # A Breakout game ends after its 5th lost life; earlier losses report no EpisodeEnd.
        assert life_losses[end.env_index] >= 5
        assert end.length > 0 and end.episode_return >= 0
    vec.close()


def test_make_env_dispatch():
    pytest.importorskip("ale_py")
    atari = make_env(EnvConfig(id="ALE/Pong-v5"), 84, seed=0)
    classic = make_env(EnvConfig(id="CartPole-v1"), 84, seed=0)
    assert isinstance(atari, SingleEnv) and isinstance(classic, SingleEnv)
    assert atari.observation_space.shape == (4, 84, 84)
    assert classic.observation_space.shape == (4,)
    atari.close()
    classic.close()


def test_truncated_episode_returns_its_final_observation():
    from rlperf.config.schema import EnvConfig
    from rlperf.envs.make import make_vector_env

    envs = make_vector_env(
        EnvConfig(id="CartPole-v1", num_envs=2, max_episode_steps=3), dim=84, seed=0
    )
    first = envs.reset(seed=0).copy()
    result = None
    for _ in range(3):
        result = envs.step(np.zeros(2, dtype=np.int64))
    assert result.truncations.all() and not result.terminations.any()
    assert sorted(result.final_obs) == [0, 1]
    for i in (0, 1):
        assert not np.array_equal(result.final_obs[i], result.obs[i])  # obs is already the reset
        assert not np.array_equal(result.final_obs[i], first[i])
    envs.close()
