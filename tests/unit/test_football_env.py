"""The in-repo football game: simple115 layout, determinism, goals, episode ends, snapshots."""

import gymnasium
import numpy as np
import pytest

from rlperf.config.schema import EnvConfig
from rlperf.envs import football
from rlperf.envs.football import ACTIONS, ENV_ID, FootballEmptyGoalClose
from rlperf.envs.football_pitch import OBS_SLICES
from rlperf.envs.make import make_env, validate_env_id

SHOT, RIGHT, LEFT, TOP, SHORT_PASS, RELEASE = 12, 5, 1, 3, 11, 14


def play(env, actions):
    """Step ``actions`` until the episode ends; (rewards, terminated, truncated, obs list)."""
    rewards, observations = [], []
    term = trunc = False
    for a in actions:
        obs, r, term, trunc, _ = env.step(a)
        rewards.append(r)
        observations.append(obs)
        if term or trunc:
            break
    return rewards, term, trunc, observations


def test_simple115_layout_at_the_start():
    env = FootballEmptyGoalClose()
    obs, _ = env.reset(seed=3)
    assert obs.shape == (115,) and obs.dtype == np.float32
    covered = sorted(i for s in OBS_SLICES.values() for i in range(115)[s])
    assert covered == list(range(115))  # the blocks tile the vector exactly once
    left = obs[OBS_SLICES["left_team"]].reshape(11, 2)
    assert left[0].tolist() == pytest.approx([-1.011, 0.0])  # the keeper
    assert left[1][0] == pytest.approx(0.758) and abs(left[1][1]) <= 0.02  # the attacker
    assert (left[2:] == -1).all()  # absent players are backfilled with -1
    assert (obs[OBS_SLICES["left_team_direction"]][:4] == 0).all()
    right = obs[OBS_SLICES["right_team"]].reshape(11, 2)
    assert right[0].tolist() == pytest.approx([-1.011, 0.0])  # their keeper, far away
    assert (right[1:] == -1).all() and (obs[OBS_SLICES["right_team_direction"]][2:] == -1).all()
    ball = obs[OBS_SLICES["ball"]]
    assert ball.tolist() == pytest.approx([0.77, left[1][1], 0.11])
    assert obs[OBS_SLICES["ball_owned_team"]].tolist() == [1, 0, 0]  # nobody yet
    active = obs[OBS_SLICES["active"]]
    assert active.sum() == 1 and active[1] == 1
    mode = obs[OBS_SLICES["game_mode"]]
    assert mode.sum() == 1 and mode[0] == 1
    assert len(ACTIONS) == 19 and ACTIONS[12] == "shot" and ACTIONS[14] == "release_direction"


def test_moving_updates_positions_and_directions():
    env = FootballEmptyGoalClose()
    obs0, _ = env.reset(seed=0)
    obs, *_ = env.step(TOP)  # "top" is negative y in gfootball
    dx, dy = obs[OBS_SLICES["left_team_direction"]][2:4]
    assert dx == 0 and dy == pytest.approx(-0.008)
    assert obs[3] == pytest.approx(obs0[3] - 0.008)
    assert obs[OBS_SLICES["ball_owned_team"]].tolist() == [0, 1, 0]  # taken with the first step
    obs, *_ = env.step(0)  # idle keeps the sticky direction
    assert obs[3] == pytest.approx(obs0[3] - 0.016)
    obs, *_ = env.step(RELEASE)
    assert obs[3] == pytest.approx(obs0[3] - 0.016)
    assert obs[OBS_SLICES["ball_owned_team"]].tolist() == [0, 1, 0]


def test_a_shot_at_goal_scores_and_ends_the_episode():
    env = FootballEmptyGoalClose()
    env.reset(seed=1)
    rewards, term, trunc, observations = play(env, [SHOT] * 30)
    assert rewards[-1] == 1.0 and sum(rewards) == 1.0 and term and not trunc
    # The first shot comes before the attacker has the ball; while the second flies nobody owns it.
    assert observations[0][OBS_SLICES["ball_owned_team"]].tolist() == [0, 1, 0]
    assert observations[1][OBS_SLICES["ball_owned_team"]].tolist() == [1, 0, 0]


def test_dribbling_into_the_goal_scores():
    env = FootballEmptyGoalClose()
    env.reset(seed=2)
    rewards, term, _, _ = play(env, [RIGHT] * 60)
    assert rewards[-1] == 1.0 and term and len(rewards) == pytest.approx(31, abs=2)


def test_ball_out_of_play_ends_the_episode_without_reward():
    env = FootballEmptyGoalClose()
    env.reset(seed=4)
    rewards, term, trunc, _ = play(env, [TOP] + [0] * 100)  # run off the top line
    assert term and not trunc and sum(rewards) == 0.0
    env.reset(seed=4)
    rewards, term, _, observations = play(env, [TOP, SHOT] + [0] * 100)  # shot out
    assert term and sum(rewards) == 0.0


def test_time_limit_truncates_at_400_steps():
    validate_env_id(ENV_ID)  # registers the id
    env = gymnasium.make(ENV_ID, disable_env_checker=True)
    env.reset(seed=0)
    # Pass back towards the keeper, then stand still: the ball stops mid-pitch, nothing
    # else can happen, and the scenario's step limit ends the episode.
    rewards, term, trunc, observations = play(env, [0, SHORT_PASS] + [RELEASE] * 500)
    assert trunc and not term and len(rewards) == 400 and sum(rewards) == 0.0
    last = observations[-1]
    assert last[OBS_SLICES["ball_owned_team"]].tolist() == [1, 0, 0]
    assert (
        last[OBS_SLICES["ball"]][0] < 0 and np.abs(last[OBS_SLICES["ball_direction"]]).max() < 1e-3
    )


def test_same_seed_same_episode_and_different_seeds_differ():
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 19, size=400).tolist()

    def run(seed):
        env = FootballEmptyGoalClose()
        obs, _ = env.reset(seed=seed)
        return np.stack([obs, *play(env, actions)[3]])

    assert np.array_equal(run(7), run(7))
    assert not np.array_equal(run(7)[0], run(8)[0])


def test_rlperf_snapshot_restores_the_same_future():
    cfg = EnvConfig(id=ENV_ID)
    env = make_env(cfg, 84, seed=5)
    env.reset()
    for a in [RIGHT, 0, TOP, 0]:
        env.step(a)
    state = env.get_state()
    actions = [RIGHT, SHOT] + [0] * 30  # the shot's error is a random draw

    def rest(e):
        out = []
        for a in actions:
            obs, r, term, trunc, _ = e.step(a)
            out.append((obs.copy(), r, term))
            if term or trunc:
                return out
        return out

    first = rest(env)
    other = make_env(cfg, 84, seed=99)
    other.set_state(state)
    second = rest(other)
    assert len(first) == len(second) and first[-1][2]
    for (o1, r1, t1), (o2, r2, t2) in zip(first, second, strict=True):
        assert np.array_equal(o1, o2) and r1 == r2 and t1 == t2


def test_registered_id_has_the_scenario_limit_and_a_renderer():
    validate_env_id(ENV_ID)
    assert gymnasium.spec(ENV_ID).max_episode_steps == football.GAME_DURATION
    env = FootballEmptyGoalClose(render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3
    # The attacker (red) is drawn in the right half of the picture.
    red = np.argwhere((frame == (230, 60, 60)).all(-1))
    assert len(red) and red[:, 1].max() > frame.shape[1] * 0.8
