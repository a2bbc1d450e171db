"""Which (algorithm, runner) pairs are valid, and why the others are not."""

from __future__ import annotations

from rlperf.core.errors import ConfigError
from rlperf.core.types import DataSpec

# runner -> (data kinds it produces, the policy lag it introduces)
RUNNER_CAPABILITIES: dict[str, tuple[frozenset[str], int]] = {
    "inproc": (frozenset({"rollout"}), 0),
}


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
