"""Which (algorithm, runner) pairs are valid, and why the others are not."""

from __future__ import annotations

from rlperf.core.errors import ConfigError
from rlperf.core.types import DataSpec

# runner -> (data kinds it produces, the policy lag it introduces)
RUNNER_CAPABILITIES: dict[str, tuple[frozenset[str], int]] = {
    # rollouts (InProcRunner), or transitions interleaved with gradient steps (TransitionsRunner)
    "inproc": (frozenset({"rollout", "transitions"}), 0),
    "subprocess": (frozenset({"rollout"}), 0),
    # at least one update behind; the runner drops rollouts above the algorithm's bound
    "decoupled": (frozenset({"rollout"}), 1),
    # a worker's local copy trails the shared model by the updates other workers applied
    # during its segment (A3C's Hogwild lag)
    "hogwild": (frozenset({"rollout"}), 1),
    # the play process acts with the weights of its last pull, updates behind the trainer
    "play-train": (frozenset({"transitions"}), 1),
    # synchronous (every actor acts with the current weights) when the algorithm needs lag 0,
    # asynchronous with the algorithm's lag bound otherwise
    "ray": (frozenset({"rollout"}), 0),
}

# runner -> engines it can drive. The C++ engines run their own thread pools in the calling
# process; putting them behind worker processes would only add copies.
RUNNER_ENGINES: dict[str, frozenset[str]] = {
    "inproc": frozenset({"gymnasium", "envpool", "ale-vector"}),
    "subprocess": frozenset({"gymnasium"}),
    # each actor process steps its share of the envs with any engine
    "decoupled": frozenset({"gymnasium", "envpool", "ale-vector"}),
    # each hogwild worker steps its share of the envs with any engine
    "hogwild": frozenset({"gymnasium", "envpool", "ale-vector"}),
    # the play process steps the envs with any engine
    "play-train": frozenset({"gymnasium", "envpool", "ale-vector"}),
    # each Ray actor steps its share of the envs with any engine
    "ray": frozenset({"gymnasium", "envpool", "ale-vector"}),
}


def check_engine(runner: str, engine: str) -> None:
    """Raise ConfigError when ``runner`` cannot drive env ``engine``."""
    if engine not in RUNNER_ENGINES[runner]:
        raise ConfigError(
            f"runner {runner} cannot drive engine {engine}: {engine} steps its envs in its own "
            f"threads; use --runner inproc (engines for {runner}: {', '.join(sorted(RUNNER_ENGINES[runner]))})"
        )


def check_compatible(algo: str, runner: str, spec: DataSpec) -> None:
    """Raise ConfigError when ``runner`` cannot feed ``algo`` the data it declares."""
    kinds, lag = RUNNER_CAPABILITIES[runner]
    if spec.kind not in kinds:
        raise ConfigError(
            f"runner {runner} produces {', '.join(sorted(kinds))} data but algorithm {algo} needs {spec.kind}"
        )
    if lag > spec.max_policy_lag:
        raise ConfigError(
            f"runner {runner} acts with a policy up to {lag} updates old; algorithm {algo} tolerates "
            f"{spec.max_policy_lag} (use an algorithm that corrects for lag, e.g. with V-trace)"
        )
