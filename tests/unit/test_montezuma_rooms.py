"""Room tracking on Montezuma's Revenge from the console RAM (byte 3)."""

import numpy as np
import pytest

from rlperf.config.schema import EnvConfig
from rlperf.envs.montezuma import MontezumaEnv, is_montezuma, room_from_ram

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny networks

CFG = EnvConfig(
    id="ALE/MontezumaRevenge-v5",
    repeat_action_probability=0.25,
    max_episode_steps=4500,
    full_action_space=True,
    episodic_life=False,
    noop_max=0,
    fire_reset=False,
)


def test_room_is_ram_byte_3():
    ram = np.zeros(128, np.uint8)
    ram[3] = 11
    ram[2] = ram[4] = 99  # neighbours must not leak in
    assert room_from_ram(ram) == 11


@pytest.mark.parametrize(
    ("env_id", "expected"),
    [
        ("ALE/MontezumaRevenge-v5", True),
        ("MontezumaRevengeNoFrameskip-v4", True),
        ("ALE/Pong-v5", False),
    ],
)
def test_is_montezuma(env_id, expected):
    assert is_montezuma(env_id) is expected


def test_visited_rooms_follow_the_ram_and_survive_snapshots():
    env = MontezumaEnv(CFG, 84, seed=0)
    try:
        env.reset()
        assert env.room == 1 and env.visited_rooms == {1}  # every game starts in room 1
        env._ale.setRAM(3, 7)  # a known RAM state: the player is now in room 7
        env.step(0)
        assert env.room == 7 and env.visited_rooms == {1, 7}
        snapshot = env.get_state()
        other = MontezumaEnv(CFG, 84, seed=5)
        try:
            other.set_state(snapshot)
            assert other.visited_rooms == {1, 7} and other.room == 7
        finally:
            other.close()
        env.reset(seed=3)  # a new game starts a new set
        assert env.visited_rooms == {1}
    finally:
        env.close()
