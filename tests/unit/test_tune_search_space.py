"""The search spaces of ``rlperf tune --objective time-to-target``: defaults and files."""

from pathlib import Path

import optuna
import pytest

from rlperf.config.load import apply_dict, load_preset, set_key
from rlperf.config.schema import RunConfig
from rlperf.core.errors import ConfigError
from rlperf.sweep.search_space import default_space, load_space


def _cfg(*presets: str, **keys: object) -> RunConfig:
    cfg = RunConfig()
    for preset in presets:
        apply_dict(cfg, load_preset(preset), preset)
    for key, value in keys.items():
        set_key(cfg, key, value)
    return cfg


def test_ppo_default_space_is_built_around_the_base_and_samples_valid_keys() -> None:
    cfg = _cfg("cartpole", algo="ppo", **{"env.id": "CartPole-v1"})
    space = default_space(cfg, atari=False, cores=2)
    params = {p.key: p for p in space.params}
    lr = params["ppo.learning_rate"]
    assert (lr.low, lr.high, lr.log) == pytest.approx((1e-3 / 4, 1e-3 * 4, True))
    assert params["env.num_envs"].choices == (4, 8, 16)
    assert params["ppo.num_steps"].choices == (32, 64, 128)
    assert (params["ppo.update_epochs"].low, params["ppo.update_epochs"].high) == (1, 10)
    assert params["runner.torch_threads"].choices == (1, 2)
    assert "model.name" not in params  # an MLP game: no Atari network or frame size
    trial = optuna.create_study().ask()
    keys = space.suggest(trial)
    assert set(keys) == set(params) and keys == trial.params


def test_atari_default_space_adds_network_frame_size_engine_and_precision() -> None:
    cfg = _cfg("atari-fast", **{"env.id": "ALE/Pong-v5"})
    params = {p.key: p for p in default_space(cfg, atari=True, cores=1).params}
    assert params["model.name"].choices == ("nature", "nips")
    assert params["env.dim"].choices == (64, 84)
    assert params["env.engine"].choices[0] == "ale-vector"  # the base's engine first
    assert params["runner.precision"].choices == ("fp32", "bf16")
    assert "runner.torch_threads" not in params  # one core per trial: nothing to choose


def test_dqn_has_a_default_space_and_a3c_is_refused_in_one_line() -> None:
    keys = {p.key for p in default_space(_cfg("dqn-cartpole"), False, 1).params}
    assert {"dqn.learning_rate", "dqn.batch_size", "dqn.train_frequency"} <= keys
    with pytest.raises(ConfigError, match="no default search space for algo 'a3c'.*--space"):
        default_space(_cfg(algo="a3c"), False, 1)
    # the space is read from the section's fields: every algorithm with a learning rate and a
    # rollout length (or a replay ratio) has one, named in the refusal
    with pytest.raises(ConfigError, match="valid: ppo, impala, appo, dqn, pqn, rnd "):
        default_space(_cfg(algo="a3c"), False, 1)
    rnd = {p.key for p in default_space(_cfg(algo="rnd"), False, 1).params}
    assert {"rnd.learning_rate", "rnd.num_steps", "rnd.update_epochs"} <= rnd


def test_a_space_file_is_read_and_every_value_checked(tmp_path: Path) -> None:
    good = tmp_path / "space.yaml"
    good.write_text(
        "ppo.learning_rate: {low: 1.0e-4, high: 1.0e-2, log: true}\n"
        "ppo.update-epochs: {low: 1, high: 4}\n"
        "ppo.num_minibatches: [2, 4]\n"
    )
    space = load_space(good, _cfg("cartpole"))
    assert [p.key for p in space.params] == [
        "ppo.learning_rate",
        "ppo.update_epochs",
        "ppo.num_minibatches",
    ]
    assert space.params[1].is_int and not space.params[0].is_int


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ppo.learnin_rate: [0.1]\n", "unknown config key 'ppo.learnin_rate'"),
        ("ppo.update_epochs: [two]\n", "ppo.update_epochs"),
        ("ppo.update_epochs: {low: 1.5, high: 4.5}\n", "must be an integer, got 1.5"),
        ("ppo.update_epochs: {low: 1.0, high: 4.0}\n", "integer key; give integer low and high"),
        ("ppo.learning_rate: {low: 0.1, high: 0.01}\n", "low < high"),
        ("ppo.learning_rate: {low: 0, high: 0.1, log: true}\n", "needs low > 0"),
        ("ppo.gamma: [0.99, 1.5]\n", "ppo.gamma must be between 0 and 1, got 1.5"),
        ("ppo.learning_rate: {low: -0.1, high: 0.1}\n", "must be positive and finite, got -0.1"),
        ("ppo.learning_rate: []\n", "lists no values"),
        ("ppo.learning_rate: {low: 0.1}\n", "must be a list of values or"),
        ("ppo.learning_rate: 0.1\n", "must be a list of values or"),
        ("- ppo.learning_rate\n", "must map config keys"),
        ("a: [1\n", "not valid YAML"),
    ],
)
def test_bad_space_files_fail_in_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "space.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as info:
        load_space(path, _cfg("cartpole"))
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_the_base_values_inside_the_space_become_the_first_trial() -> None:
    cfg = _cfg("cartpole", **{"env.id": "CartPole-v1"})
    space = default_space(cfg, atari=False, cores=2)
    base = space.values_of(cfg)
    # torch_threads is unset in the preset: not a value of the space, left to the sampler
    assert base == {
        "ppo.learning_rate": 1e-3,
        "env.num_envs": 8,
        "ppo.num_steps": 64,
        "ppo.update_epochs": 10,
        "ppo.num_minibatches": 4,
    }
    lr = space.params[0]
    assert not lr.contains(1.0) and not lr.contains("fast") and lr.contains(2e-3)
