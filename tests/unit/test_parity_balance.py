"""Pong's two games (frame parities): samples tagged with their game's parity, the last games
of each parity kept, the leading parity's samples down-weighted in PPO's loss
(``ppo.parity_balance_gap``), and new games steered to the lagging parity
(``env.start_parity=lagging``)."""

import numpy as np
import torch

from rlperf.algos.ppo import PPO
from rlperf.algos.surrogate import weighted_mean
from rlperf.cli import main
from rlperf.config.schema import EnvConfig, ModelConfig, PPOConfig
from rlperf.core.optim import LocalGradientStep
from rlperf.core.types import Progress, Rollout
from rlperf.envs.atari import AtariEnv
from rlperf.envs.base import EpisodeEnd
from rlperf.envs.vector import SyncVectorEnv
from rlperf.models.catalog import build_model
from rlperf.runners.collector import RolloutCollector
from rlperf.telemetry.episodes import PARITY_WINDOW, EpisodeStats
from rlperf.telemetry.timers import PhaseTimer
from tests.conftest import read_metrics


def test_a_weighted_mean_leaves_out_what_weighs_nothing() -> None:
    values = torch.tensor([1.0, 2.0, 6.0])
    assert weighted_mean(values) == 3.0
    assert weighted_mean(values, torch.ones(3)) == 3.0
    assert weighted_mean(values, torch.tensor([1.0, 1.0, 0.0])) == 1.5
    assert weighted_mean(values, torch.zeros(3)) == 0.0


def test_each_parity_keeps_its_last_games_and_they_survive_a_checkpoint() -> None:
    stats = EpisodeStats()
    stats.add([EpisodeEnd(0, -21.0, 800, frame_parity=0)])
    stats.add([EpisodeEnd(1, 5.0, 900, frame_parity=1) for _ in range(PARITY_WINDOW)])
    assert stats.parity_means() == (None, 5.0)  # one even game is not yet a mean
    stats.add([EpisodeEnd(0, 3.0, 900, frame_parity=0) for _ in range(PARITY_WINDOW - 1)])
    stats.add([EpisodeEnd(2, 99.0, 10)])  # a game of an engine that does not tell: neither
    even = (-21.0 + 3.0 * (PARITY_WINDOW - 1)) / PARITY_WINDOW
    assert stats.parity_means() == (even, 5.0)
    stats.add([EpisodeEnd(1, 15.0, 900, frame_parity=1)])  # the oldest odd game drops out
    odd = (5.0 * (PARITY_WINDOW - 1) + 15.0) / PARITY_WINDOW
    assert stats.parity_means() == (even, odd)
    assert stats.summary()["parity/odd_reward_mean"] == odd
    restored = EpisodeStats()
    restored.load_state_dict(stats.state_dict())
    assert restored.parity_means() == (even, odd)
    old = stats.state_dict()
    del old["parity_returns"]  # a checkpoint from before parities were kept
    restored = EpisodeStats()
    restored.load_state_dict(old)
    assert restored.parity_means() == (None, None)
    assert "parity/even_reward_mean" not in restored.summary()


def _rollout_of_two_games(odd_rewards: float) -> Rollout:
    """8 steps of 4 envs: envs 0-1 on even frames (reward 1 at action 1), envs 2-3 on odd
    frames (reward ``odd_rewards`` for every step)."""
    g = torch.Generator().manual_seed(0)
    T, N = 8, 4
    actions = torch.randint(0, 2, (T, N), generator=g)
    rewards = actions.float()
    rewards[:, 2:] = odd_rewards
    return Rollout(
        obs_TN=torch.randn(T, N, 4, generator=g),
        actions_TN=actions,
        logprobs_TN=torch.full((T, N), -0.69),
        values_TN=torch.zeros(T, N),
        rewards_TN=rewards,
        dones_TN=torch.ones(T, N),
        next_obs_N=torch.randn(N, 4, generator=g),
        truncation_values_TN=torch.zeros(T, N),
        frame_parity_TN=torch.tensor([0, 0, 1, 1], dtype=torch.int8).repeat(T, 1),
    )


def _weights_after_update(odd_rewards: float, means: tuple[float, float], weight: float):
    torch.manual_seed(0)
    policy = build_model(ModelConfig(name="mlp"), (4,), 2)
    cfg = PPOConfig(
        num_steps=8, num_minibatches=2, norm_adv=False, parity_balance_gap=5.0,
        parity_balance_weight=weight, learning_rate=1e-2,
    )  # fmt: skip
    algo = PPO(cfg, policy, seed=0)
    step = LocalGradientStep(policy, algo.optimizer_spec(), device=torch.device("cpu"))
    metrics = algo.update(
        _rollout_of_two_games(odd_rewards), step, Progress(0, 0, 1.0, parity_means=means)
    )
    return [p.detach().clone() for p in policy.parameters()], metrics


def test_the_leading_parity_weighs_what_it_is_set_to_and_only_past_the_gap() -> None:
    # The odd game leads by 10 > 5: at weight 0 its samples do not move the weights, so its
    # rewards cannot change the update; at weight 0.25 they still do.
    leading = (0.0, 10.0)
    left_out, metrics = _weights_after_update(-1.0, leading, 0.0)
    assert metrics["losses/leading_parity"] == 1.0
    same, _ = _weights_after_update(+1.0, leading, 0.0)
    assert all(torch.equal(a, b) for a, b in zip(left_out, same, strict=True))
    low, _ = _weights_after_update(-1.0, leading, 0.25)
    high, _ = _weights_after_update(+1.0, leading, 0.25)
    assert any(not torch.equal(a, b) for a, b in zip(low, high, strict=True))
    # Within the gap every sample counts in full, whatever the weight.
    within, metrics = _weights_after_update(-1.0, (8.0, 10.0), 0.0)
    assert metrics["losses/leading_parity"] == -1.0
    other, _ = _weights_after_update(+1.0, (8.0, 10.0), 0.0)
    assert any(not torch.equal(a, b) for a, b in zip(within, other, strict=True))


def test_the_collector_tags_each_step_with_its_games_frame_parity() -> None:
    cfg = EnvConfig(id="ALE/Pong-v5", num_envs=4)
    envs = SyncVectorEnv([AtariEnv(cfg, 64, seed=i) for i in range(4)])
    first = envs.reset(seed=3)
    policy = build_model(ModelConfig(name="nips"), envs.single_observation_space.shape, 6)
    collector = RolloutCollector(envs, policy, torch.device("cpu"), "fp32", first)
    buf = Rollout.allocate(6, 4, envs.single_observation_space.shape, torch.uint8)
    with torch.no_grad():
        collector.collect(buf, PhaseTimer())
    parity = [env.frame_number() % 2 for env in envs.envs]  # no game ends in 6 steps
    assert set(parity) == {0, 1}  # the seeds' no-ops put these games on both parities
    assert buf.frame_parity_TN[0].tolist() == [-1] * 4  # a reset does not tell
    assert buf.frame_parity_TN[1:].tolist() == [parity] * 5
    # The share counts the known steps only: the first step's -1s are left out.
    assert buf.odd_parity_share() == sum(parity) / 4
    buf.frame_parity_TN.fill_(-1)
    assert buf.odd_parity_share() is None
    envs.close()


def test_the_leading_parity_is_the_one_ahead_by_more_than_the_gap() -> None:
    def progress(means: tuple[float | None, float | None]) -> Progress:
        return Progress(0, 0, 1.0, parity_means=means)

    assert progress((3.0, 9.0)).leading_parity(5.0) == 1
    assert progress((9.0, -3.0)).leading_parity(5.0) == 0
    assert progress((3.0, 8.0)).leading_parity(5.0) is None  # a lead of the gap is not more
    assert progress((None, 9.0)).leading_parity(5.0) is None


def test_steered_envs_start_their_next_games_on_the_parity_asked() -> None:
    cfg = EnvConfig(id="ALE/Pong-v5", num_envs=4, start_parity="lagging")
    envs = SyncVectorEnv([AtariEnv(cfg, 64, seed=i) for i in range(4)])
    envs.reset(seed=3)
    assert {env.frame_number() % 2 for env in envs.envs} == {0, 1}  # lagging starts as any
    for parity in (1, 0):
        envs.start_games_on(parity)
        for env in envs.envs:
            env.reset()
        assert {env.frame_number() % 2 for env in envs.envs} == {parity}
    envs.close()


def test_a_run_with_the_curriculum_and_the_balance_records_both(runs_root) -> None:
    # Too short for ten games of each parity: neither acts yet, and both say so.
    code = main(
        [
            "train", "--preset", "cleanrl-atari", "--env", "ALE/Pong-v5", "--runs-root",
            str(runs_root), "-s", "parity", "-i", "2", "--no-progress", "env.num_envs=2",
            "ppo.num_steps=16", "ppo.num_minibatches=2", "ppo.update_epochs=1",
            "env.start_parity=lagging", "ppo.parity_balance_gap=5",
        ]
    )  # fmt: skip
    assert code == 0
    records = read_metrics(runs_root / "parity")
    assert [r["parity/start_on"] for r in records] == [-1.0, -1.0]
    assert [r["losses/leading_parity"] for r in records] == [-1.0, -1.0]
    # Two envs: each iteration's data is half, none or all on odd frames, never unknown
    # after the first step of the first iteration.
    assert all(r["parity/odd_share"] in (0.0, 0.5, 1.0) for r in records[1:])


def test_a_share_of_the_steered_games_starts_on_the_parity_asked() -> None:
    env = AtariEnv(EnvConfig(id="ALE/Pong-v5", start_parity="lagging"), 64, seed=5)
    env.start_on(1, share=0.75)
    odd = 0
    for _ in range(40):
        env.reset()
        odd += env.frame_number() % 2
    assert 24 <= odd <= 38  # 0.75 of 40 is 30; at 1.0 all 40, left alone about 20
    env.close()


def test_a_restored_vector_env_reports_its_games_parities() -> None:
    cfg = EnvConfig(id="ALE/Pong-v5", num_envs=4)
    envs = SyncVectorEnv([AtariEnv(cfg, 64, seed=i) for i in range(4)])
    envs.reset(seed=3)
    step = envs.step(np.zeros(4, dtype=np.int64))
    saved, parity = envs.get_state(), step.frame_parity.copy()
    fresh = SyncVectorEnv([AtariEnv(cfg, 64, seed=i) for i in range(4)])
    fresh.reset(seed=11)  # other no-ops: other parities until the games are restored
    fresh.set_state(saved)
    assert np.array_equal(fresh.step(np.zeros(4, dtype=np.int64)).frame_parity, parity)
    envs.close()
    fresh.close()
