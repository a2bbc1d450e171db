"""AtariEnv: preprocessing, determinism, exact snapshots, episodic life, clipping, limits."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("ale_py")
pytest.importorskip("cv2")

from rlperf.config.schema import EnvConfig  # noqa: E402
from rlperf.core.errors import ConfigError  # noqa: E402
from rlperf.envs.atari import AtariEnv  # noqa: E402
from rlperf.envs.base import PARITY_MARK  # noqa: E402


def _run(env: AtariEnv, actions: np.ndarray) -> list[tuple]:
    """Step through ``actions`` (resetting on episode ends) and record everything observable."""
    record = []
    for action in actions:
        obs, reward, terminated, truncated, game_end = env.step(int(action))
        record.append((obs.tobytes(), reward, terminated, truncated, game_end))
        if terminated or truncated:
            record.append(("reset", env.reset().tobytes()))
    return record


@pytest.mark.parametrize(
    ("dim", "grayscale", "frame_stack", "shape"),
    [
        (84, True, 4, (4, 84, 84)),
        (168, True, 4, (4, 168, 168)),
        (252, True, 4, (4, 252, 252)),
        (84, False, 4, (12, 84, 84)),
        (96, True, 1, (1, 96, 96)),
    ],
)
def test_observation_shape_and_dtype(dim, grayscale, frame_stack, shape):
    cfg = EnvConfig(id="ALE/Pong-v5", grayscale=grayscale, frame_stack=frame_stack)
    env = AtariEnv(cfg, dim, seed=0)
    assert env.observation_space.shape == shape
    assert env.observation_space.dtype == np.uint8
    obs = env.reset()
    assert obs.shape == shape and obs.dtype == np.uint8
    # After a reset every slot of the stack holds the same frame.
    frames = obs.reshape(frame_stack, -1, dim, dim)
    assert all(np.array_equal(frames[0], f) for f in frames)
    for _ in range(3):
        obs, *_ = env.step(0)
    assert obs.shape == shape and obs.dtype == np.uint8
    assert env.observation_space.contains(obs)
    assert obs.max() > 0  # a real picture, not an empty buffer
    env.close()


def test_frame_stack_shifts_oldest_first():
    env = AtariEnv(EnvConfig(id="ALE/Breakout-v5"), 84, seed=0)
    before = env.reset().copy()
    after = env.step(2)[0]
    assert np.array_equal(after[:-1], before[1:])
    env.close()


def test_same_seed_same_trajectory_and_different_seed_differs():
    cfg = EnvConfig(id="ALE/Breakout-v5", repeat_action_probability=0.25)
    actions = np.random.default_rng(0).integers(0, 4, size=150)
    runs = []
    for seed in (7, 7, 8):
        env = AtariEnv(cfg, 84, seed=seed)
        runs.append([("reset", env.reset().tobytes()), *_run(env, actions)])
        env.close()
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


def test_frame_number_counts_frames_and_no_op_starts_vary_its_parity():
    # An even frameskip keeps a game on the parity its random no-op start gave it; Pong's
    # policies can learn the two parities at different times (docs/benchmarks-pong-cpu.md).
    env = AtariEnv(EnvConfig(id="ALE/Pong-v5", frameskip=4, noop_max=30), 84, seed=0)
    parities = set()
    for _ in range(8):
        env.reset()
        start = env.frame_number()
        parities.add(start % 2)
        for _ in range(3):
            env.step(0)
        assert env.frame_number() == start + 3 * 4
    assert parities == {0, 1}
    env.close()


@pytest.mark.parametrize("wanted", [0, 1])
def test_start_parity_starts_every_game_on_the_parity_asked(wanted):
    # Against the same seed without it: the same no-op draws, and a game that would have
    # started on the other parity starts one frame later and stays on the parity asked.
    keys = {"id": "ALE/Pong-v5", "frameskip": 4, "noop_max": 30}
    chosen = AtariEnv(EnvConfig(start_parity=("even", "odd")[wanted], **keys), 64, seed=0)
    free = AtariEnv(EnvConfig(**keys), 64, seed=0)
    moved = []
    for _ in range(8):
        chosen.reset()
        free.reset()
        moved.append(chosen.frame_number() - free.frame_number())
        for action in [2, 3, 0]:
            assert chosen.frame_number() % 2 == wanted
            chosen.step(action)
            free.step(action)
    assert set(moved) == {0, 1}  # some games needed the extra frame, some did not
    chosen.close()
    free.close()


def test_mark_frame_parity_paints_the_corner_by_the_games_parity_and_nothing_else():
    # The same seeds with and without the mark play the same games (the mark is drawn after
    # the frame is made), so the observations differ in the corner block alone.
    keys = {"id": "ALE/Pong-v5", "frameskip": 4, "noop_max": 30}
    marked = AtariEnv(EnvConfig(mark_frame_parity=True, **keys), 64, seed=3)
    plain = AtariEnv(EnvConfig(**keys), 64, seed=3)
    block = (slice(None), slice(0, PARITY_MARK), slice(0, PARITY_MARK))
    rest = np.ones(marked.observation_space.shape, dtype=bool)
    rest[block] = False
    corners = set()
    for _ in range(6):
        obs, reference = marked.reset(), plain.reset()
        for action in [0, 2, 3, 2, 0]:
            parity = marked.frame_number() % 2
            assert (obs[block] == 255 * parity).all()  # every frame of the stack
            assert np.array_equal(obs[rest], reference[rest])
            corners.add(parity)
            obs, reference = marked.step(action)[0], plain.step(action)[0]
    assert corners == {0, 1}  # games on both parities were seen
    marked.close()
    plain.close()


@pytest.mark.parametrize("pooled", [2, 3, 4])
def test_max_pool_frames_takes_the_max_of_a_skips_last_frames(pooled):
    # Against the same game stepped one frame at a time (no no-op start, no FIRE: the two
    # emulators stay frame for frame alike). The max of 3 is what shows every paddle move of
    # Pong on both frame parities (docs/benchmarks-pong-cpu.md).
    keys = {"id": "ALE/Pong-v5", "noop_max": 0, "fire_reset": False}
    skipped = AtariEnv(EnvConfig(frameskip=4, max_pool_frames=pooled, **keys), 84, seed=0)
    single = AtariEnv(EnvConfig(frameskip=1, **keys), 84, seed=0)
    skipped.reset()
    single.reset()
    rng = np.random.default_rng(1)
    moved = 0
    for action in rng.integers(0, skipped.action_space.n, 60):
        skipped.step(int(action))
        frames = []  # the raw screens (the observation is resized after the max)
        for _ in range(4):
            single.step(int(action))
            frames.append(single._raw_last.copy())
        expected = np.max(frames[-pooled:], axis=0)
        assert np.array_equal(skipped._raw_last, expected)
        moved += not np.array_equal(expected, frames[-1])
    assert moved > 10  # the pool shows more than the last frame in many steps
    skipped.close()
    single.close()


def test_reset_with_seed_restarts_the_random_streams():
    cfg = EnvConfig(id="ALE/Breakout-v5", repeat_action_probability=0.25)
    actions = np.random.default_rng(1).integers(0, 4, size=60)
    env = AtariEnv(cfg, 84, seed=123)
    first = [env.reset(seed=5).tobytes(), *_run(env, actions)]
    second = [env.reset(seed=5).tobytes(), *_run(env, actions)]
    assert first == second
    env.close()


@pytest.mark.parametrize(
    ("game", "sticky"),
    # 0.9: the previously executed action then persists for many frames, so a snapshot that
    # lost it would visibly diverge (at 0.25 a one-frame difference is often invisible).
    [("ALE/Breakout-v5", 0.25), ("ALE/Pong-v5", 0.25), ("ALE/Pong-v5", 0.9)],
)
def test_get_state_set_state_is_exact_with_sticky_actions(game, sticky):
    cfg = EnvConfig(id=game, repeat_action_probability=sticky)
    rng = np.random.default_rng(2)
    env = AtariEnv(cfg, 84, seed=11)
    n_actions = int(env.action_space.n)
    env.reset()
    # Several snapshots at different points (mid-life, right after resets...): a state that
    # misses e.g. the previously executed (sticky) action only shows up at some of them.
    for _ in range(5):
        _run(env, rng.integers(0, n_actions, size=30))
        state = env.get_state()
        actions = rng.integers(0, n_actions, size=60)
        expected = _run(env, actions)
        env.set_state(state)
        assert _run(env, actions) == expected

    # A fresh env (other seed) after a JSON round trip of the non-array part.
    arrays = {k: v for k, v in state.items() if isinstance(v, np.ndarray)}
    rest = json.loads(json.dumps({k: v for k, v in state.items() if k not in arrays}))
    assert all(v.dtype == np.uint8 for v in arrays.values())
    other = AtariEnv(cfg, 84, seed=999)
    other.set_state({**rest, **arrays})
    assert _run(other, actions) == expected
    env.close()
    other.close()


def test_a_frameskip_range_draws_2_to_4_frames_per_step_reproducibly():
    # Pong-v0: sticky actions 0.25 and a random frameskip of 2 to 4.
    cfg = EnvConfig(id="ALE/Pong-v5", repeat_action_probability=0.25, frameskip=2, frameskip_max=4)

    def skips(seed: int) -> list[int]:
        env = AtariEnv(cfg, 84, seed=seed)
        env.reset()
        ale = env._ale
        out = []
        for i in range(300):
            before = ale.getEpisodeFrameNumber()
            env.step(i % 3)
            out.append(ale.getEpisodeFrameNumber() - before)
        env.close()
        return out

    first = skips(5)
    assert sorted(set(first)) == [2, 3, 4]
    assert all(60 < first.count(k) < 140 for k in (2, 3, 4))  # uniform: about 100 each
    assert skips(5) == first and skips(6) != first
    # The draws come from the env's snapshotted generator: a resumed env continues them.
    env = AtariEnv(cfg, 84, seed=7)
    env.reset()
    _run(env, np.zeros(20, dtype=int))
    state = env.get_state()
    expected = _run(env, np.arange(60) % 3)
    env.set_state(state)
    assert _run(env, np.arange(60) % 3) == expected
    env.close()


def test_sticky_actions_repeat_previous_action():
    # With probability 1 the agent's action never takes effect: the game sees NOOP forever.
    def make(p: float) -> AtariEnv:
        cfg = EnvConfig(id="ALE/Breakout-v5", repeat_action_probability=p, fire_reset=False)
        env = AtariEnv(cfg, 84, seed=0)
        env.reset()
        return env

    right, noop = np.full(30, 2), np.zeros(30, dtype=int)
    assert _run(make(1.0), right) == _run(make(0.0), noop)
    assert _run(make(0.0), right) != _run(make(0.0), noop)


def test_episodic_life_and_true_return():
    cfg = EnvConfig(id="ALE/Breakout-v5", clip_rewards=False)
    env = AtariEnv(cfg, 84, seed=3)
    env.reset()
    lives = env.get_state()["lives"]
    rng = np.random.default_rng(3)
    life_losses = 0
    rewards = 0.0
    steps = 0
    game_end = None
    while game_end is None:
        _, reward, terminated, truncated, game_end = env.step(int(rng.integers(0, 4)))
        rewards += reward
        steps += 1
        assert not truncated
        if terminated and game_end is None:
            life_losses += 1
            env.reset()  # soft reset: the game goes on with one life less
            assert env.get_state()["lives"] == lives - life_losses
        assert steps < 5000
    assert terminated
    assert life_losses == lives - 1
    assert game_end == (rewards, steps)
    # The next reset starts a new game with all lives.
    env.reset()
    assert env.get_state()["lives"] == lives
    env.close()


def test_evaluation_env_has_no_episodic_life():
    env = AtariEnv(EnvConfig(id="ALE/Breakout-v5"), 84, seed=3, training=False)
    env.reset()
    rng = np.random.default_rng(3)
    steps, terminated = 0, False
    while not terminated and steps < 5000:
        _, _, terminated, _, game_end = env.step(int(rng.integers(0, 4)))
        steps += 1
    assert game_end is not None and game_end[1] == steps
    assert env.get_state()["lives"] == 0
    env.close()


def test_reward_clipping_only_changes_training_rewards():
    # Space Invaders pays 5..30 points per alien, so clipping is visible within a few steps.
    actions = np.random.default_rng(4).integers(0, 6, size=200)
    results = {}
    for clip in (True, False):
        cfg = EnvConfig(id="ALE/SpaceInvaders-v5", clip_rewards=clip, max_episode_steps=200)
        env = AtariEnv(cfg, 84, seed=5)
        env.reset()
        results[clip] = _run(env, actions)
        env.close()
    clipped = [r[1] for r in results[True] if r[0] != "reset"]
    raw = [r[1] for r in results[False] if r[0] != "reset"]
    assert max(raw) > 1.0
    assert clipped == [float(np.sign(r)) for r in raw]
    ends_clipped = [r[4] for r in results[True] if r[0] != "reset" and r[4] is not None]
    ends_raw = [r[4] for r in results[False] if r[0] != "reset" and r[4] is not None]
    assert ends_clipped == ends_raw and ends_raw
    # Evaluation envs never clip.
    eval_env = AtariEnv(EnvConfig(id="ALE/SpaceInvaders-v5"), 84, seed=5, training=False)
    eval_env.reset()
    eval_rewards = [r[1] for r in _run(eval_env, actions[:100]) if r[0] != "reset"]
    assert eval_rewards == raw[: len(eval_rewards)]
    eval_env.close()


def test_max_episode_steps_truncates_the_game():
    env = AtariEnv(EnvConfig(id="ALE/Pong-v5", max_episode_steps=30), 84, seed=0)
    env.reset()
    for step in range(1, 31):
        _, _, terminated, truncated, game_end = env.step(0)
        if step < 30:
            assert not (terminated or truncated) and game_end is None
    assert truncated and not terminated
    assert game_end is not None and game_end[1] == 30
    env.reset()
    assert env.get_state()["game_length"] == 0  # a new game, counted from zero
    env.close()


def test_step_requires_reset_and_state_kind_is_checked():
    env = AtariEnv(EnvConfig(id="ALE/Pong-v5"), 84, seed=0)
    with pytest.raises(RuntimeError):
        env.step(0)
    env.reset()
    state = env.get_state()
    other = AtariEnv(EnvConfig(id="ALE/Breakout-v5"), 84, seed=0)
    with pytest.raises(ValueError, match="Pong"):
        other.set_state(state)
    bigger = AtariEnv(EnvConfig(id="ALE/Pong-v5"), 168, seed=0)
    with pytest.raises(ValueError, match="dim"):
        bigger.set_state(state)
    for e in (env, other, bigger):
        e.close()


def test_action_sets_and_fire_reset():
    minimal = AtariEnv(EnvConfig(id="ALE/Breakout-v5"), 84, seed=0)
    full = AtariEnv(EnvConfig(id="ALE/Breakout-v5", full_action_space=True), 84, seed=0)
    assert minimal.action_space.n == 4 and full.action_space.n == 18
    assert minimal.action_meanings[:2] == ["NOOP", "FIRE"]
    # With fire reset the ball is in play right away, so NOOPs lose a life; without it
    # Breakout waits for FIRE forever.
    for fire, expect_loss in ((True, True), (False, False)):
        env = AtariEnv(EnvConfig(id="ALE/Breakout-v5", fire_reset=fire), 84, seed=0)
        env.reset()
        lost = any(env.step(0)[2] for _ in range(300))
        assert lost == expect_loss
        env.close()
    minimal.close()
    full.close()


def test_invalid_knobs_are_refused_before_an_env_is_built():
    # AtariEnv trusts a checked config: the validator refuses what ALE or OpenCV would
    # crash on, in one line naming the key
    from rlperf.config.schema import RunConfig
    from rlperf.config.validate import validate

    for key, value in (("frameskip", 0), ("frame_stack", 0), ("dim", 0), ("noop_max", -1)):
        cfg = RunConfig(env=EnvConfig(id="ALE/Pong-v5", **{key: value}))
        with pytest.raises(ConfigError, match=f"env.{key} must be"):
            validate(cfg)
    cfg = RunConfig(env=EnvConfig(id="ALE/Pong-v5", frameskip=4, frameskip_max=2))
    with pytest.raises(ConfigError, match="env.frameskip_max .2. must be at least env.frameskip"):
        validate(cfg)
