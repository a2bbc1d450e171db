"""Every check a run's config passes before anything is built, in one place.

:func:`check` is the one entry (:mod:`rlperf.training.resolve` calls it for every run; the sweep
planner calls it for every point). What concerns one part alone is that part's own check,
called from here: the ranges of single keys (:mod:`rlperf.config.validate`, which needs
nothing but the config), the env settings (``envs.facts.check_env``), the model against the
env (``models.catalog.check_model``), a runner's own (its facts' ``check``). Everything that
relates one part of a run to another is decided here from declared facts:

- ``RUNNER_FACTS`` (each runner class's ``facts``, collected by the registry): data kinds,
  policy lag, engines, options, devices, and the runner's own checks;
- ``ALGORITHM_FACTS`` (config/schema.py, from each algorithm's section in
  config/algorithms/): data kind, lag bound, one learner or many;
- ``ENV_FACTS`` (envs/facts.py): observations, engines, default model;
- ``ENGINE_FACTS`` (envs/facts.py): the frame settings each engine implements, its package;
- ``MODELS`` (models/catalog.py): what each model reads and its input size.

Each refusal is one line (:class:`~rlperf.core.errors.ConfigError`, exit code 2) that names
the setting and what would be valid. Nothing here builds an env, a network or a process.
"""

from __future__ import annotations

import difflib
import importlib.util
import os

import torch

from rlperf.config.schema import ALGORITHM_FACTS, RunConfig, RunnerConfig
from rlperf.config.validate import validate
from rlperf.core.errors import ConfigError
from rlperf.envs.facts import ENGINE_FACTS, check_env
from rlperf.envs.make import is_atari
from rlperf.models.catalog import MODELS, check_model
from rlperf.training.registry import RUNNER_FACTS


def check(cfg: RunConfig, *, on_this_machine: bool = True) -> None:
    """Raise ConfigError on the first value, name or combination in ``cfg`` that cannot run.

    ``on_this_machine=False`` leaves out what depends on this machine (devices, CPUs, the
    engines installed): a sweep plans points for other machines and judges them itself."""
    validate(cfg)
    _check_name("algorithm", cfg.algo, list(ALGORITHM_FACTS))
    _check_name("runner", cfg.runner.name, list(RUNNER_FACTS))
    model = check_model(cfg.model, cfg.env, check_env(cfg.env))
    if on_this_machine:
        check_devices(cfg.runner)
        check_cpus(cfg.runner)
        check_engine_installed(cfg.env.engine)
    _check_runner(cfg, model)
    _check_value_head(cfg)
    _check_parity_levers(cfg)
    _check_cuda_graph(cfg)
    check_pairing(cfg)
    _check_ray(cfg)
    own_check = RUNNER_FACTS[cfg.runner.name].check
    if own_check is not None:
        own_check(cfg)


def runners_with(fact: str) -> str:
    """The runners with ``fact``, as prose: ``inproc, subprocess and decoupled``."""
    names = [n for n, f in RUNNER_FACTS.items() if getattr(f, fact)]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _check_name(kind: str, name: str, valid: list[str]) -> None:
    if name not in valid:
        close = difflib.get_close_matches(name, valid, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(f"unknown {kind} {name!r}{hint}; valid: {', '.join(valid)}")


def check_devices(cfg: RunnerConfig) -> None:
    """The learner and actor devices exist on this machine."""
    for key, name in (
        ("runner.learner_device", cfg.learner_device),
        ("runner.actor_device", cfg.actor_device),
    ):
        device = torch.device(name)
        if device.type == "cuda":
            count = torch.cuda.device_count() if torch.cuda.is_available() else 0
            if count == 0:
                raise ConfigError(
                    f"{key}={name} but torch sees no CUDA device (torch {torch.__version__}); use cpu"
                )
            if device.index is not None and device.index >= count:
                raise ConfigError(
                    f"{key}={name} but only {count} CUDA device(s) are visible (cuda:0..cuda:{count - 1})"
                )
        elif device.type == "mps" and not torch.backends.mps.is_available():
            raise ConfigError(f"{key}={name} but MPS is not available here; use cpu")
    on_cuda = any(torch.device(d).type == "cuda" for d in (cfg.learner_device, cfg.actor_device))
    if on_cuda and cfg.num_learners > 1:
        # each learner rank takes cuda:RANK (data_parallel.rank_config)
        count = torch.cuda.device_count()
        if count < cfg.num_learners:
            raise ConfigError(
                f"runner.num_learners={cfg.num_learners} puts one learner on each of "
                f"cuda:0..cuda:{cfg.num_learners - 1}, but {count} CUDA device(s) are visible; "
                f"valid: runner.num_learners <= {count}, or cpu devices"
            )


def check_cpus(cfg: RunnerConfig) -> None:
    """The CPUs the run is pinned to are CPUs this process may use."""
    usable = (
        os.sched_getaffinity(0)
        if hasattr(os, "sched_getaffinity")
        else set(range(os.cpu_count() or 1))
    )
    for key, cpus in (
        ("runner.cpu_affinity", cfg.cpu_affinity),
        ("runner.actor_cpu_affinity", cfg.actor_cpu_affinity),
    ):
        if cpus is None:
            continue
        bad = sorted(set(cpus) - usable)
        if bad or not cpus:
            raise ConfigError(
                f"{key} names CPUs {bad} that this process cannot use; available: {sorted(usable)}"
            )


def check_engine_installed(engine: str) -> None:
    """The package that ``engine`` needs is installed here (the C++ engines are optional)."""
    facts = ENGINE_FACTS[engine]
    if importlib.util.find_spec(facts.package) is None:
        raise ConfigError(
            f"engine {engine} needs the {facts.package} package, which is not installed here: "
            f"pip install '{facts.extra}', or use engine gymnasium"
        )


def _check_runner(cfg: RunConfig, model: str) -> None:
    """The runner can drive the engine, on the devices, with the options and ``model`` asked."""
    runner = cfg.runner
    facts = RUNNER_FACTS[runner.name]
    if cfg.env.engine not in facts.engines:
        raise ConfigError(
            f"runner {runner.name} cannot drive engine {cfg.env.engine}: {cfg.env.engine} steps "
            f"its envs in its own threads; use --runner inproc (engines for {runner.name}: "
            f"{', '.join(sorted(facts.engines))})"
        )
    if not facts.cuda and (runner.learner_device != "cpu" or runner.actor_device != "cpu"):
        raise ConfigError(
            f"the {runner.name} runner keeps its model in CPU shared memory: set "
            "runner.learner_device and runner.actor_device to cpu"
        )
    if runner.num_learners > 1 and not facts.data_parallel:
        raise ConfigError(
            f"runner.num_learners > 1 works with the {runners_with('data_parallel')} runners, "
            f"not {runner.name}"
        )
    if runner.compile and not facts.compile:
        raise ConfigError(
            f"runner.compile works with the {runners_with('compile')} runners, not {runner.name}"
        )
    if facts.max_workers is not None and runner.num_workers > facts.max_workers:
        raise ConfigError(
            f"the {runner.name} runner has {facts.max_workers} worker process: "
            f"runner.num_workers must be {facts.max_workers} (use env.num_envs for more games)"
        )
    if facts.algorithms is not None and cfg.algo not in facts.algorithms:
        raise ConfigError(
            f"runner {runner.name} runs algorithm {', '.join(sorted(facts.algorithms))}, "
            f"not {cfg.algo}"
        )
    if cfg.algo == "rnd" and not facts.rnd:
        raise ConfigError(f"algorithm rnd runs on runners {runners_with('rnd')}, not {runner.name}")
    if MODELS[model].lstm_size and not facts.recurrent:
        raise ConfigError(
            f"model {model} acts step by step with an LSTM state, which only the "
            f"{runners_with('recurrent')} runner does; use --runner {runners_with('recurrent')}"
        )
    data_kind = ALGORITHM_FACTS[cfg.algo].data_kind
    if data_kind in facts.acts_on_learner_device and runner.actor_device != runner.learner_device:
        raise ConfigError(
            f"with {cfg.algo} the {runner.name} runner acts with the learner's network: set "
            "runner.actor_device equal to runner.learner_device (or use --runner play-train)"
        )


def _check_value_head(cfg: RunConfig) -> None:
    """A setting of the value head needs an algorithm that learns one."""
    if cfg.model.vf_torso_grad_scale != 1.0 and ALGORITHM_FACTS[cfg.algo].q_values:
        actor_critics = ", ".join(a for a, f in ALGORITHM_FACTS.items() if not f.q_values)
        raise ConfigError(
            f"model.vf_torso_grad_scale weighs a value head, which {cfg.algo} does not have "
            f"(it learns action values); valid with {actor_critics}, or leave it at 1"
        )


def _check_parity_levers(cfg: RunConfig) -> None:
    """``ppo.parity_balance_gap`` tags every sample with its game's frame parity: that needs
    an engine that knows it, a skip that keeps a game on one parity, and the runner whose
    rollouts carry the tags to the learner. ``env.start_parity=lagging`` steers the envs of
    the training process (its engine and skip are ``check_env``'s)."""
    if cfg.env.start_parity == "lagging" and cfg.runner.name != "inproc":
        raise ConfigError(
            f"env.start_parity=lagging needs runner inproc (its envs in the training "
            f"process), not {cfg.runner.name}"
        )
    if cfg.algo != "ppo" or cfg.ppo.parity_balance_gap is None:
        return
    env = cfg.env
    tellers = ", ".join(name for name, f in ENGINE_FACTS.items() if f.parity_marks)
    refusal = None
    if not is_atari(env.id):
        refusal = f"an Atari game, not {env.id}"
    elif not ENGINE_FACTS[env.engine].parity_marks:
        refusal = f"an engine that tells each game's frame parity ({tellers}), not {env.engine}"
    elif env.frameskip % 2 or env.frameskip_max:
        refusal = (
            f"an even env.frameskip without env.frameskip_max (got {env.frameskip}, "
            f"{env.frameskip_max}): only then does a game stay on one parity"
        )
    elif cfg.runner.name != "inproc":
        refusal = f"runner inproc, not {cfg.runner.name}"
    if refusal is not None:
        raise ConfigError(f"ppo.parity_balance_gap needs {refusal}")


def _check_cuda_graph(cfg: RunConfig) -> None:
    """A recorded learner step needs an algorithm that records it, one learner, no
    compiler, and no check that reads the device between two steps. (On a CPU learner the
    same step runs unrecorded, so a GPU run resumes on a CPU as it is.)"""
    runner = cfg.runner
    if not runner.cuda_graph:
        return
    recorded = ", ".join(a for a, f in ALGORITHM_FACTS.items() if f.cuda_graph)
    refusal = None
    if not ALGORITHM_FACTS[cfg.algo].cuda_graph:
        refusal = f"algorithm {recorded}, not {cfg.algo}"
    elif runner.num_learners > 1:
        refusal = "one learner: set runner.num_learners=1"
    elif runner.compile:
        refusal = "an eager network: set runner.compile=false"
    elif cfg.nan_policy == "skip_update":
        refusal = (
            "a NaN policy that needs no step undone (it checks once per update, after the "
            "steps applied): nan_policy raise, warn or none"
        )
    elif getattr(getattr(cfg, cfg.algo), "target_kl", None) is not None:
        refusal = f"all epochs (no KL read after each minibatch): unset {cfg.algo}.target_kl"
    if refusal:
        raise ConfigError(f"runner.cuda_graph needs {refusal}")


def check_pairing(cfg: RunConfig) -> None:
    """Raise ConfigError when ``cfg.runner`` cannot feed ``cfg.algo`` (read from both facts
    tables)."""
    algo, runner = ALGORITHM_FACTS[cfg.algo], RUNNER_FACTS[cfg.runner.name]
    if algo.data_kind not in runner.data_kinds:
        raise ConfigError(
            f"runner {cfg.runner.name} produces {', '.join(sorted(runner.data_kinds))} data but "
            f"algorithm {cfg.algo} needs {algo.data_kind}"
        )
    bound = algo.policy_lag_bound(getattr(cfg, cfg.algo))
    if runner.policy_lag > bound:
        raise ConfigError(
            f"runner {cfg.runner.name} acts with a policy up to {runner.policy_lag} updates old; "
            f"algorithm {cfg.algo} tolerates {bound} (use an algorithm that corrects for lag, "
            "e.g. with V-trace)"
        )
    if cfg.runner.num_learners > 1 and algo.one_learner:
        raise ConfigError(
            f"algorithm {cfg.algo} learns in one process ({algo.one_learner}): "
            "use runner.num_learners=1"
        )


def _check_ray(cfg: RunConfig) -> None:
    """The Ray runners' keys are set only when a Ray runner is used (the Ray runners check
    their values themselves: their facts' ``check``)."""
    runner = cfg.runner
    if not RUNNER_FACTS[runner.name].on_ray and runner.ray_address is not None:
        raise ConfigError(
            f"runner.ray_address is set but the runner is {runner.name}; add --runner "
            f"{runners_with('on_ray').replace(' and ', ' or ')}"
        )
