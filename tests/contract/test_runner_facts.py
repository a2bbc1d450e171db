"""The algorithm x runner matrix, generated from ``RUNNER_FACTS`` and ``ALGORITHM_FACTS``: the
whole path from the command line to a built algorithm accepts exactly the pairs the tables
allow, and refuses every other pair in one line before anything is built; each built
algorithm declares the data its facts say. (Which pairs train is covered by
test_runner_matrix.py and each runner's own tests.)"""

import copy
import functools
import importlib
import math
import pkgutil
import re

import pytest
import torch

from rlperf.cli import build_train_config
from rlperf.config.load import iter_fields, set_key
from rlperf.config.schema import ALGORITHM_FACTS, ALGORITHM_SECTIONS, RunConfig, RunnerConfig
from rlperf.config.section import declared_ranges
from rlperf.config.validate import validate
from rlperf.core.errors import ConfigError
from rlperf.models.catalog import build_model, frame_dim
from rlperf.runners.facts import RunnerFacts
from rlperf.training import checks, registry
from rlperf.training.registry import RUNNER_FACTS
from rlperf.training.resolve import resolve

ENV = {"rnd": "ALE/MontezumaRevenge-v5", "dqn": "CartPole-v1"}
ALGO_PRESET = {"dqn": ["--preset", "dqn-cartpole"], "rnd": ["--preset", "rnd-montezuma-small"]}


DATA = {
    "ppo": ("rollout", 0),
    "appo": ("rollout", 2),
    "impala": ("rollout", 4),
    "a3c": ("rollout", 1),
    "rnd": ("rollout", 2),
    "pqn": ("rollout", 2),  # Q(lambda) learns off-policy
    "dqn": ("transitions", 2**31 - 1),  # replay data: any lag
}
"""The data kind and lag bound of each algorithm under its default config, written out by
hand: both the facts table and the built algorithm are checked against it."""


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
    cfg = resolve(cfg).cfg  # the model for the env
    spaces = registry.env_spaces(cfg, frame_dim(cfg.env, cfg.model), None)
    return build_model(cfg.model, tuple(spaces.observation.shape), int(spaces.action.n))


def _build(algo: str, runner: str):  # noqa: ANN202 - the built algorithm
    argv = [*ALGO_PRESET.get(algo, []), "--algo", algo, "--runner", runner]
    workers = "1" if runner == "play-train" else "2"  # one play process
    argv += [
        "--env",
        ENV.get(algo, "CartPole-v1"),
        "--num-workers",
        workers,
        "--envs-per-worker",
        "2",
    ]
    cfg = resolve(build_train_config(argv)[0]).cfg  # refuses a pair the tables do not allow
    built = registry.make_algorithm(cfg, copy.deepcopy(_policy(algo)))
    facts = ALGORITHM_FACTS[algo]  # what the checks read agrees with what was built
    assert (facts.data_kind, facts.policy_lag_bound(getattr(cfg, algo))) == (
        built.data_spec.kind,
        built.data_spec.max_policy_lag,
    )
    return built


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


def test_every_registered_algorithm_is_declared_and_every_declared_one_registered() -> None:
    # declared: a settings section in config/algorithms/ (a RunConfig field named after it,
    # with its facts); registered: a line in training/registry.py
    assert set(ALGORITHM_SECTIONS) == set(ALGORITHM_FACTS) == set(registry.ALGORITHMS)


@pytest.mark.parametrize("algo", sorted(ALGORITHM_SECTIONS))
def test_every_algorithm_section_declares_its_learner_batch(algo: str) -> None:
    # precision=auto times one gradient step of this many samples; a section that does not
    # declare it raises NotImplementedError here
    assert getattr(RunConfig(), algo).learner_batch_size(16) >= 1


def test_every_runner_class_is_declared_and_registered() -> None:
    # declared: a runner class with its name and facts; registered: a line of RUNNER_PARTS.
    # A runner class that declares facts but is not registered, or a registered one that
    # declares none, fails here.
    import rlperf.runners as package

    modules = [
        importlib.import_module(f"rlperf.runners.{info.name}")
        for info in pkgutil.iter_modules(package.__path__)
    ]
    declared = {
        obj
        for module in modules
        for obj in vars(module).values()
        if isinstance(obj, type) and obj.__module__ == module.__name__ and "facts" in vars(obj)
    }
    registered = {cls for cls, _ in registry.RUNNER_PARTS}
    assert declared == registered
    assert set(RUNNER_FACTS) == set(registry.RUNNERS) == {cls.name for cls in registered}
    assert all(isinstance(cls.facts, RunnerFacts) for cls in registered)


@pytest.mark.parametrize("algo", ALGORITHM_SECTIONS)
def test_every_numeric_setting_of_an_algorithm_declares_its_range(algo: str) -> None:
    ranges = declared_ranges(RunConfig)
    undeclared = [
        key
        for key, hint, _doc in iter_fields()
        if key.startswith(f"{algo}.")
        and hint in (int, float, int | None, float | None)
        and key not in ranges
    ]
    assert not undeclared, f"declare a range (config/section.py) for {undeclared}"
    # the declarations are what the validator reads: a value outside one is refused
    for key in (k for k in ranges if k.startswith(f"{algo}.")):
        cfg = RunConfig()
        set_key(cfg, key, math.inf if ranges[key].holds(-1) else -1)
        with pytest.raises(ConfigError, match=re.escape(key)):
            validate(cfg)


@pytest.mark.parametrize("algo", [a for a, f in ALGORITHM_FACTS.items() if f.one_learner])
def test_one_learner_algorithms_refuse_data_parallel_learners(algo: str) -> None:
    """One check, one message for every algorithm that learns in one process."""
    runner = "hogwild" if algo == "a3c" else "inproc"
    cfg = RunConfig(algo=algo, runner=RunnerConfig(name=runner, num_learners=2))
    with pytest.raises(ConfigError, match=f"algorithm {algo} learns in one process"):
        checks.check_pairing(cfg)
