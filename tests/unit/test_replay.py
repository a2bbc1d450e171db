"""The frame-once replay buffer: stacks gathered back exactly, never across episodes, within
a memory bound, with the ring's seam and restarts handled."""

import numpy as np
import pytest

from rlperf.buffers.replay import ReplayBuffer

K = 4  # frames per observation


class StackedEpisodes:
    """Fake Atari observations of N envs: frame values encode (env, episode, step), and the
    first observation of an episode repeats its first frame K times, as AtariEnv does."""

    def __init__(self, num_envs: int, lengths: list[int], truncate: bool = False) -> None:
        self.n, self.lengths, self.truncate = num_envs, lengths, truncate
        self.episode = [0] * num_envs
        self.t = [0] * num_envs
        self.stacks = [self._first(i) for i in range(num_envs)]

    def frame(self, i: int, episode: int, t: int) -> np.ndarray:
        return np.full((1, 2, 2), (i * 50 + episode) * 100 + t, dtype=np.int32)

    def _first(self, i: int) -> np.ndarray:
        return np.concatenate([self.frame(i, self.episode[i], 0)] * K)

    def obs(self) -> np.ndarray:
        return np.stack(self.stacks)

    def step(self) -> tuple[np.ndarray, np.ndarray, dict[int, np.ndarray]]:
        """Advance every env; returns (terminated, truncated, final_obs)."""
        terminated = np.zeros(self.n, dtype=bool)
        truncated = np.zeros(self.n, dtype=bool)
        final = {}
        for i in range(self.n):
            self.t[i] += 1
            nxt = np.concatenate([self.stacks[i][1:], self.frame(i, self.episode[i], self.t[i])])
            if self.t[i] >= self.lengths[self.episode[i] % len(self.lengths)]:
                if self.truncate:
                    truncated[i] = True
                    final[i] = nxt
                else:
                    terminated[i] = True
                self.episode[i] += 1
                self.t[i] = 0
                self.stacks[i] = self._first(i)
            else:
                self.stacks[i] = nxt
        return terminated, truncated, final


def fill(buffer: ReplayBuffer, game: StackedEpisodes, steps: int) -> None:
    for _ in range(steps):
        obs = game.obs()
        terminated, truncated, final = game.step()
        actions = obs[:, -1, 0, 0] % 7  # recoverable from the frame
        rewards = obs[:, -1, 0, 0].astype(np.float32)
        buffer.add(obs, actions, rewards, terminated, truncated, final)


def check_sample(buffer: ReplayBuffer, size: int = 512) -> tuple[np.ndarray, ...]:
    obs, actions, rewards, next_obs, dones, discounts = buffer.sample(size)
    assert (discounts == np.float32(buffer.gamma)).all()  # one-step transitions
    codes, next_codes = obs[:, :, 0, 0], next_obs[:, :, 0, 0]
    newest = codes[:, -1]
    episode = newest // 100
    # every frame of a stack belongs to the transition's episode, oldest first
    assert (codes // 100 == episode[:, None]).all()
    assert (np.diff(codes, axis=1) >= 0).all() and (np.diff(codes, axis=1) <= 1).all()
    assert (actions == newest % 7).all() and (rewards == newest).all()
    # the next observation is the same stack shifted by one frame, unless terminated
    live = dones == 0
    assert (next_codes[live, :-1] == codes[live, 1:]).all()
    assert (next_codes[live, -1] == newest[live] + 1).all()
    return obs, actions, rewards, next_obs, dones


def test_stacks_are_exact_and_never_cross_an_episode_boundary():
    buffer = ReplayBuffer(4000, 3, (K, 2, 2), np.int32, K, seed=0)
    game = StackedEpisodes(3, lengths=[7, 2, 30, 1, 5])
    fill(buffer, game, 500)
    obs, _, _, next_obs, dones = check_sample(buffer, 4000)
    codes = obs[:, :, 0, 0]
    # starts of episodes were sampled: their stacks repeat the first frame
    assert (codes[:, 0] == codes[:, -1]).any()
    assert dones.sum() > 0  # terminal transitions are sampled too
    # one-step episodes: obs is the first frame x K and the transition terminates
    one_step = codes[:, -1] % 100 == 0
    assert one_step.any()


def test_truncated_episodes_keep_their_final_observation():
    buffer = ReplayBuffer(2000, 2, (K, 2, 2), np.int32, K, seed=0)
    game = StackedEpisodes(2, lengths=[6, 3], truncate=True)
    fill(buffer, game, 300)
    _, _, _, next_obs, dones = check_sample(buffer, 2000)
    assert dones.sum() == 0  # a step limit is not a termination
    last_steps = next_obs[:, -1, 0, 0] % 100
    assert set(np.unique(last_steps)) >= {3, 6}  # the final frames of both lengths


def test_a_wrapped_ring_never_serves_overwritten_frames():
    buffer = ReplayBuffer(64, 2, (K, 2, 2), np.int32, K, seed=0)
    game = StackedEpisodes(2, lengths=[9, 13, 4])
    for _ in range(40):
        fill(buffer, game, 7)
        check_sample(buffer, 256)
    # after wrapping, only the newest frames are there
    assert buffer.filled.tolist() == [32, 32]


def test_observations_that_are_not_stacks_round_trip():
    buffer = ReplayBuffer(100, 2, (4,), np.float32, 1, seed=0)
    obs = np.arange(8, dtype=np.float32).reshape(2, 4)
    for step in range(10):
        terminated = np.array([step == 4, False])
        buffer.add(obs + step, np.array([1, 2]), np.ones(2), terminated, np.zeros(2, bool))
    o, a, r, nxt, d, _ = buffer.sample(200)
    assert o.shape == (200, 4) and nxt.shape == (200, 4)
    live = d == 0
    assert np.allclose(nxt[live] - o[live], 1.0)
    assert (o[d == 1][:, 0] == 4).all()  # env 0's terminal transition at step 4


def test_end_episodes_drops_the_transitions_waiting_for_their_next_frame():
    buffer = ReplayBuffer(400, 1, (K, 2, 2), np.int32, K, seed=0)
    game = StackedEpisodes(1, lengths=[50])
    fill(buffer, game, 10)
    before = len(buffer)
    buffer.end_episodes()
    restarted = StackedEpisodes(1, lengths=[50])
    restarted.episode = [7]  # another process, other episodes
    restarted.stacks = [restarted._first(0)]
    fill(buffer, restarted, 10)
    check_sample(buffer, 500)  # no stack mixes the two processes' episodes
    assert len(buffer) == before + 9


def test_100k_atari_transitions_fit_in_well_under_a_gigabyte():
    buffer = ReplayBuffer(100_000, 1, (4, 84, 84), np.uint8, 4, seed=0)
    frame = 84 * 84
    # frames once (+ bookkeeping), instead of obs and next_obs with 4 frames each
    assert buffer.nbytes <= 100_000 * (frame + 16)
    assert buffer.nbytes < 100_000 * 2 * 4 * frame / 7
    assert buffer.frames.dtype == np.uint8


def test_sampling_an_empty_buffer_is_an_error_and_tiny_capacities_are_refused():
    buffer = ReplayBuffer(100, 1, (K, 2, 2), np.int32, K, seed=0)
    with pytest.raises(ValueError, match="without transitions"):
        buffer.sample(1)
    with pytest.raises(ValueError, match="too small"):
        ReplayBuffer(10, 2, (K, 2, 2), np.int32, K, seed=0)


def check_n_step(buffer: ReplayBuffer, lengths: list[int], truncate: bool) -> np.ndarray:
    """Every sampled n-step transition against the fake game's known episodes; returns the
    steps m of each."""
    n, gamma = buffer.n_step, buffer.gamma
    obs, actions, returns, next_obs, dones, discounts = buffer.sample(2000)
    newest, next_newest = obs[:, -1, 0, 0], next_obs[:, -1, 0, 0]
    t, episode = newest % 100, (newest // 100) % 50
    left = np.array([lengths[e % len(lengths)] for e in episode]) - t  # steps to the end
    m = np.rint(np.log(discounts) / np.log(gamma)).astype(int)
    assert (m >= 1).all() and (m <= np.minimum(n, left)).all()
    expected = sum(np.where(m > i, gamma**i * (newest + i), 0.0) for i in range(n))
    assert np.allclose(returns, expected)
    assert (actions == newest % 7).all()
    if truncate:
        assert dones.sum() == 0
    else:
        assert ((dones == 1) == (m == left)).all()  # terminated within its steps, or not
    # what it bootstraps from: the stack m steps on, of the same episode
    live = dones == 0
    assert (next_newest[live] == newest[live] + m[live]).all()
    assert (next_obs[live, :, 0, 0] // 100 == (newest[live] // 100)[:, None]).all()
    # a chain is cut short only where the env's newest frame is
    cut = m < np.minimum(n, left)
    latest = buffer.frames[np.arange(buffer.num_envs), buffer.head - 1][:, 0, 0, 0]
    assert np.isin(next_newest[cut], latest).all()
    return m


@pytest.mark.parametrize("truncate", [False, True])
def test_n_step_returns_sum_within_one_episode(truncate):
    lengths = [7, 2, 30, 1, 5]
    buffer = ReplayBuffer(4000, 3, (K, 2, 2), np.int32, K, seed=0, n_step=3, gamma=0.5)
    fill(buffer, StackedEpisodes(3, lengths, truncate=truncate), 500)
    m = check_n_step(buffer, lengths, truncate)
    assert set(np.unique(m)) == {1, 2, 3}


def test_n_step_chains_stop_at_the_newest_data_of_a_wrapped_ring():
    lengths = [9, 13, 40]
    buffer = ReplayBuffer(64, 2, (K, 2, 2), np.int32, K, seed=0, n_step=5, gamma=0.9)
    game = StackedEpisodes(2, lengths)
    for _ in range(30):
        fill(buffer, game, 7)
        check_n_step(buffer, lengths, truncate=False)


def test_n_step_draws_the_same_transitions_as_one_step():
    # the same data and seed: the same draws, obs and actions; only returns and next differ
    game_a, game_b = (StackedEpisodes(2, lengths=[6, 3]) for _ in range(2))
    one = ReplayBuffer(800, 2, (K, 2, 2), np.int32, K, seed=1)
    three = ReplayBuffer(800, 2, (K, 2, 2), np.int32, K, seed=1, n_step=3)
    fill(one, game_a, 100)
    fill(three, game_b, 100)
    a, b = one.sample(300), three.sample(300)
    assert (a.obs == b.obs).all() and (a.actions == b.actions).all()
    assert (b.discounts <= a.discounts).all() and (b.discounts < a.discounts).any()
