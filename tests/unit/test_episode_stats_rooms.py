"""Rooms of finished games (Montezuma's Revenge) in the episode statistics and in the
subprocess runner's fixed-size episode records."""

from rlperf.envs.base import EpisodeEnd
from rlperf.envs.subproc_worker import EPISODE, rooms_mask, rooms_of
from rlperf.telemetry.episodes import EpisodeStats


def test_rooms_are_summarised_and_survive_a_checkpoint() -> None:
    stats = EpisodeStats()
    stats.add([EpisodeEnd(0, 0.0, 10, (1,)), EpisodeEnd(1, 100.0, 30, (0, 1, 4))])
    stats.add([EpisodeEnd(0, 1.0, 5)])  # a game that tracks no rooms changes nothing
    summary = stats.summary()
    assert summary["rooms/per_game_mean"] == 2.0 and summary["rooms/per_game_max"] == 3
    assert summary["rooms/visited_count"] == 3 and summary["rooms_visited"] == "0 1 4"
    restored = EpisodeStats()
    restored.load_state_dict(stats.state_dict())
    assert restored.summary() == summary
    assert "rooms/visited_count" not in EpisodeStats().summary()


def test_rooms_travel_as_a_bit_mask() -> None:
    record = EPISODE.pack(3, 400.0, 120, rooms_mask((400.0, 120, (0, 1, 23))))
    index, ret, length, mask = EPISODE.unpack(record)
    assert (index, ret, length, rooms_of(mask)) == (3, 400.0, 120, (0, 1, 23))
    assert rooms_of(rooms_mask((1.0, 2))) is None  # not tracked
