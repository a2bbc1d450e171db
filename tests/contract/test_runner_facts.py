"""The algorithm x runner matrix, generated from ``RUNNER_FACTS``: the whole path from the
command line to a built algorithm accepts exactly the pairs the table allows, and refuses
every other pair in one line. (Which pairs train is covered by test_runner_matrix.py and
each runner's own tests.)"""

import copy
import functools

import pytest
import torch

from rlperf import registry
from rlperf.cli import build_train_config
from rlperf.core.errors import ConfigError
from rlperf.models.catalog import build_model
from rlperf.runners.compat import RUNNER_FACTS

ENV = {"rnd": "ALE/MontezumaRevenge-v5", "dqn": "CartPole-v1"}
ALGO_PRESET = {"dqn": ["--preset", "dqn-cartpole"], "rnd": ["--preset", "rnd-montezuma-small"]}


DATA = {
    "ppo": ("rollout", 0),
    "appo": ("rollout", 2),
    "impala": ("rollout", 4),
    "a3c": ("rollout", 1),
    "rnd": ("rollout", 2),
    "dqn": ("transitions", 2**31 - 1),  # replay data: any lag
}
"""The data kind and lag bound each algorithm declares (checked against the built algorithm
below), so the matrix is known when the tests are collected."""


def max_policy_lag(algo: str) -> int:
    return DATA[algo][1]


def allowed(algo: str, runner: str) -> bool:
    """Whether RUNNER_FACTS lets ``runner`` run ``algo``."""
    facts, (kind, max_lag) = RUNNER_FACTS[runner], DATA[algo]
    ok = kind in facts.data_kinds and facts.policy_lag <= max_lag
    ok = ok and (facts.algorithms is None or algo in facts.algorithms)
    return ok and (algo != "rnd" or facts.rnd)


@pytest.fixture(autouse=True)
def _no_orthogonal_init(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pairing does not depend on the weights: skip the QR decompositions of orthogonal
    initialisation (seconds for RND's networks)."""
    monkeypatch.setattr(torch.nn.init, "orthogonal_", lambda tensor, gain=1.0: tensor)


@functools.cache
def _policy(algo: str):  # noqa: ANN202 - the algorithm's network, built once
    cfg, _ = build_train_config([*ALGO_PRESET.get(algo, []), "--env", ENV.get(algo, "CartPole-v1")])
    registry.check_names(cfg)  # resolves the model for the env
    spaces = registry.env_spaces(cfg, registry.resolve_dim(cfg), None)
    return build_model(cfg.model, tuple(spaces.observation.shape), int(spaces.action.n))


def _build(algo: str, runner: str):  # noqa: ANN202 - the built algorithm
    argv = [*ALGO_PRESET.get(algo, []), "--algo", algo, "--runner", runner]
    argv += ["--env", ENV.get(algo, "CartPole-v1"), "--num-workers", "2", "--envs-per-worker", "2"]
    cfg, _ = build_train_config(argv)
    registry.check_names(cfg)
    return registry.make_algorithm(cfg, copy.deepcopy(_policy(algo)))


@pytest.mark.parametrize("runner", list(RUNNER_FACTS))
@pytest.mark.parametrize("algo", list(registry.ALGORITHMS))
def test_the_facts_decide_every_pair(algo: str, runner: str) -> None:
    # The algorithm's own declaration, from its valid runner (inproc serves every data kind).
    spec = _build(algo, "inproc").data_spec
    assert (spec.kind, spec.max_policy_lag) == DATA[algo]
    if allowed(algo, runner):
        assert _build(algo, runner).data_spec == spec
    else:
        with pytest.raises(ConfigError) as info:
            _build(algo, runner)
        message = str(info.value)
        assert "\n" not in message and runner in message
