"""DQN's pieces: the epsilon schedule and behaviour, the TD target, target-network syncs,
the slow-grads switch, state round trips, and the config/compat errors around it."""

import pickle

import gymnasium
import pytest
import torch

from rlperf.algos.dqn import DQN, EpsilonGreedy, QNetwork, linear_epsilon, td_target
from rlperf.cli import main
from rlperf.config.load import load_preset
from rlperf.config.schema import DQNConfig, ModelConfig, RunnerConfig
from rlperf.core.checkpoint import load_checkpoint, save_checkpoint
from rlperf.core.optim import LocalGradientStep
from rlperf.core.types import Progress, Transitions
from rlperf.models.catalog import build_model
from rlperf.runners.transitions import TransitionsRunner

LADDER = [
    "00-slow-grads",
    "01-baseline",
    "02-n-envs",
    "03-play-train-processes",
    "04-tweaked-wrappers",
    "05-native-engine",
]


def _dqn(**keys) -> DQN:
    cfg = DQNConfig(exploration_steps=100, **keys)
    network = QNetwork.from_actor_critic(build_model(ModelConfig(name="mlp"), (4,), 2))
    return DQN(cfg, network, seed=3)


def _batch(G: int, env_steps: int, B: int = 8) -> Transitions:
    g = torch.Generator().manual_seed(env_steps)
    obs = torch.randn(G, B, 4, generator=g)
    return Transitions(
        obs,
        torch.randint(2, (G, B), generator=g),
        torch.randn(G, B, generator=g),
        torch.randn(G, B, 4, generator=g),
        torch.zeros(G, B),
        torch.full((G, B), 0.99),
        env_steps,
    )


def test_epsilon_decays_linearly_then_holds():
    assert linear_epsilon(0, 1.0, 0.02, 100_000) == 1.0
    assert linear_epsilon(50_000, 1.0, 0.02, 100_000) == pytest.approx(0.51)
    assert linear_epsilon(100_000, 1.0, 0.02, 100_000) == pytest.approx(0.02)
    assert linear_epsilon(10**7, 1.0, 0.02, 100_000) == pytest.approx(0.02)
    assert linear_epsilon(5, 1.0, 0.1, 0) == 0.1


def test_behaviour_is_greedy_at_epsilon_0_and_uniform_at_1():
    algo = _dqn(start_e=1.0, end_e=0.0)
    obs = torch.randn(4000, 4)
    greedy = algo.policy(obs).argmax(-1)
    assert torch.equal(algo.behaviour.act(obs, env_steps=100), greedy)
    random = algo.behaviour.act(obs, env_steps=0)
    share = random.bincount(minlength=2).float() / 4000
    assert torch.allclose(share, torch.full((2,), 0.5), atol=0.05)


def test_exploration_fraction_sizes_the_decay_from_the_step_budget():
    network = QNetwork.from_actor_critic(build_model(ModelConfig(name="mlp"), (4,), 2))
    algo = DQN(DQNConfig(exploration_fraction=0.5), network, seed=1, total_timesteps=1000)
    assert algo.behaviour.exploration_steps == 500


def test_target_network_syncs_every_target_network_frequency_env_steps():
    algo = _dqn(target_network_frequency=100)
    step = LocalGradientStep.for_algorithm(algo, torch.device("cpu"), "fp32")
    syncs = []
    for env_steps in range(30, 1000, 30):  # 3 envs x 10 vector steps per gradient step
        before = [p.clone() for p in algo.target.parameters()]
        metrics = algo.update(_batch(1, env_steps), step, Progress(0, env_steps, 1.0))
        changed = any(
            not torch.equal(a, b) for a, b in zip(before, algo.target.parameters(), strict=True)
        )
        if changed:
            syncs.append(env_steps)
            online = dict(algo.policy.named_parameters())
            assert all(torch.equal(p, online[n]) for n, p in algo.target.named_parameters())
    assert syncs == list(range(120, 1000, 120))  # the first 100+ env steps after the copy at 0
    assert metrics["losses/target_syncs"] == len(syncs)
    assert metrics["losses/gradient_steps"] == 33


def test_an_update_makes_one_gradient_step_per_row_and_none_for_an_empty_batch():
    algo = _dqn()
    step = LocalGradientStep.for_algorithm(algo, torch.device("cpu"), "fp32")
    empty = algo.update(_batch(0, 10), step, Progress(0, 10, 1.0))
    assert "losses/loss" not in empty and empty["losses/gradient_steps"] == 0
    assert empty["losses/epsilon"] == pytest.approx(linear_epsilon(10, 1.0, 0.02, 100))
    metrics = algo.update(_batch(3, 20), step, Progress(0, 20, 1.0))
    assert metrics["losses/gradient_steps"] == 3
    assert {"losses/loss", "losses/avg_loss", "losses/q_values"} <= set(metrics)


@pytest.mark.parametrize("double_q", [True, False])
def test_a_bf16_gradient_step_trains_every_online_weight_and_no_target_weight(double_q):
    # The update's passes share one autocast region (the online weights cast once per step):
    # the casts the passes share must still carry gradients to every float32 weight.
    cfg = DQNConfig(exploration_steps=100, double_q=double_q, target_network_frequency=10**6)
    network = QNetwork.from_actor_critic(build_model(ModelConfig(name="nips"), (4, 64, 64), 6))
    algo = DQN(cfg, network, seed=3)
    step = LocalGradientStep.for_algorithm(algo, torch.device("cpu"), "bf16")
    g = torch.Generator().manual_seed(0)
    frames = torch.randint(0, 255, (2, 2, 8, 4, 64, 64), dtype=torch.uint8, generator=g)
    batch = Transitions(
        frames[0],
        torch.randint(6, (2, 8), generator=g),
        torch.randn(2, 8, generator=g),
        frames[1],
        torch.zeros(2, 8),
        torch.full((2, 8), 0.99),
        10,
    )
    online = [p.detach().clone() for p in algo.policy.parameters()]
    target = [p.detach().clone() for p in algo.target.parameters()]
    algo.update(batch, step, Progress(0, 10, 1.0))
    assert all(not torch.equal(a, b) for a, b in zip(online, algo.policy.parameters(), strict=True))
    assert all(torch.equal(a, b) for a, b in zip(target, algo.target.parameters(), strict=True))


def test_td_target_stops_bootstrapping_at_terminations_and_double_q_uses_the_online_argmax():
    online = torch.nn.Linear(1, 2, bias=False)
    target = torch.nn.Linear(1, 2, bias=False)
    with torch.no_grad():
        online.weight[:] = torch.tensor([[1.0], [0.0]])  # online prefers action 0
        target.weight[:] = torch.tensor([[1.0], [3.0]])  # target values action 1 higher
    rewards, next_obs = torch.tensor([1.0, 1.0]), torch.ones(2, 1)
    dones = torch.tensor([0.0, 1.0])
    dqn = td_target(online, target, rewards, next_obs, dones, 0.5, double_q=False)
    double = td_target(online, target, rewards, next_obs, dones, 0.5, double_q=True)
    assert dqn.tolist() == [1.0 + 0.5 * 3.0, 1.0]
    assert double.tolist() == [1.0 + 0.5 * 1.0, 1.0]
    assert not dqn.requires_grad


def test_td_target_discounts_each_sample_by_its_own_steps():
    # an n-step return of m steps bootstraps with gamma^m (the replay gives the discounts)
    online = target = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        target.weight[:] = 2.0
    rewards, next_obs, dones = torch.tensor([1.0, 1.0, 1.0]), torch.ones(3, 1), torch.zeros(3)
    discounts = torch.tensor([0.5, 0.25, 0.125])  # gamma 0.5 over 1, 2 and 3 steps
    got = td_target(online, target, rewards, next_obs, dones, discounts, double_q=False)
    assert got.tolist() == [2.0, 1.5, 1.25]


@pytest.mark.parametrize("no_grad", [True, False])
def test_slow_grads_builds_the_graphs_no_grad_avoids(no_grad):
    algo = _dqn(no_grad=no_grad)
    recorded = []

    def hook(module, inputs, output):
        recorded.append(output.grad_fn is not None)

    algo.policy.register_forward_hook(hook)
    algo.target.register_forward_hook(hook)
    algo.behaviour.act(torch.randn(3, 4), 0)
    step = LocalGradientStep.for_algorithm(algo, torch.device("cpu"), "fp32")
    algo.update(_batch(1, 5), step, Progress(0, 5, 1.0))
    # act, online pass with the loss, target pass: only the online pass needs a graph
    assert recorded == [not no_grad, True, not no_grad]


def test_state_round_trips_through_a_checkpoint(tmp_path):
    algo = _dqn(target_network_frequency=1)
    step = LocalGradientStep.for_algorithm(algo, torch.device("cpu"), "fp32")
    for env_steps in (1, 2, 3):
        algo.update(_batch(1, env_steps), step, Progress(0, env_steps, 1.0))
    algo.behaviour.act(torch.randn(2, 4), 3)
    path = save_checkpoint(tmp_path, "ckpt", {"algorithm": algo.state_dict()}, keep=1)
    other = _dqn(target_network_frequency=1)
    other.load_state_dict(load_checkpoint(path)["algorithm"])
    obs = torch.randn(16, 4)
    assert torch.equal(other.policy(obs), algo.policy(obs))
    assert torch.equal(other.target(obs), algo.target(obs))
    assert torch.equal(other.behaviour.act(obs, 50), algo.behaviour.act(obs, 50))
    assert (other.gradient_steps, other.avg_loss) == (algo.gradient_steps, algo.avg_loss)


def test_runner_compile_compiles_the_q_network_the_runner_learns_with():
    # runner.compile is accepted with inproc for every algorithm, so the transitions runner
    # must honour it too (compiled in place: the module, its names and its weights stay)
    for switch in (False, True):
        algo = _dqn()
        runner = TransitionsRunner(
            RunnerConfig(compile=switch), None, algo, num_envs=1,
            obs_space=gymnasium.spaces.Box(-1.0, 1.0, (4,)), frame_stack=1,
            frames_per_step=1, seed=0,
        )  # fmt: skip
        assert runner.learner is algo.policy
        assert (runner.learner._compiled_call_impl is not None) is switch


def test_the_behaviour_pickles_with_its_random_stream():
    behaviour = _dqn().behaviour
    copy = pickle.loads(pickle.dumps(behaviour))
    assert isinstance(copy, EpsilonGreedy)
    obs = torch.randn(32, 4)
    assert torch.equal(copy.act(obs, 10), behaviour.act(obs, 10))


@pytest.mark.parametrize("rung", LADDER)
def test_every_ladder_rung_loads_by_its_slash_name(rung):
    cfg_data = load_preset(f"dqn-ladder/{rung}")
    assert cfg_data["algo"] == "dqn"
    assert load_preset(f"dqn-ladder-{rung}") == cfg_data


def test_the_ladder_changes_one_thing_per_rung():
    rungs = {r: load_preset(f"dqn-ladder/{r}") for r in LADDER}
    assert rungs["00-slow-grads"]["dqn"]["no_grad"] is False
    assert rungs["02-n-envs"]["env"]["num_envs"] == 3
    assert rungs["02-n-envs"]["dqn"]["batch_size"] == 96
    assert rungs["03-play-train-processes"]["runner"]["name"] == "play-train"
    assert rungs["03-play-train-processes"]["dqn"]["batch_size"] == 128
    tweaked = rungs["04-tweaked-wrappers"]["env"]
    assert (tweaked["noop_max"], tweaked["max_pool"], tweaked["frame_stack"]) == (0, False, 2)
    assert rungs["05-native-engine"]["env"]["engine"] == "ale-vector"
    base = rungs["01-baseline"]
    assert base["stop"]["target_reward"] == 17 and base["stop"]["target_reward_metric"] == "ema"
    assert base["dqn"]["buffer_size"] == 100_000 and base["dqn"]["learning_starts"] == 10_000


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--runner", "decoupled"], "runner decoupled produces rollout data but algorithm dqn"),
        (["--runner", "subprocess"], "runner subprocess produces rollout data but algorithm dqn"),
        (["--algo", "ppo", "--runner", "play-train"], "runner play-train produces transitions"),
        (["dqn.learning_starts=50000"], "dqn.learning_starts (50000) exceeds dqn.buffer_size"),
        (["dqn.loss=l1"], "dqn.loss must be one of mse, huber"),
        (["env.resize_interpolation=cubic"], "env.resize_interpolation must be one of"),
        (["dqn.exploration_steps=null", "stop.total_timesteps=null"], "exploration_fraction"),
    ],
)
def test_bad_dqn_configs_are_one_line_errors(runs_root, capsys, args, message):
    code = main(
        [
            "train",
            "--preset",
            "dqn-cartpole",
            "--runs-root",
            str(runs_root),
            "--no-progress",
            *args,
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("rlperf: error: ") and message in err and err.count("\n") == 1
