"""What rlperf knows about each algorithm before building it, in one table.

The counterpart of ``runners/compat.py``'s RUNNER_FACTS: the config checks read both tables
to decide whether an algorithm can run on a runner (data kind, policy lag, learners) before
anything is built; each algorithm's ``data_spec`` states the same facts for the runners at
run time, and a contract test holds the two together.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rlperf.config.load import get_key
from rlperf.config.schema import RunConfig
from rlperf.core.types import ANY_POLICY_LAG


@dataclass(frozen=True)
class AlgorithmFacts:
    """One algorithm's needs."""

    data_kind: Literal["rollout", "transitions"]
    """rollout: T steps of N envs from the acting policy; transitions: replay data."""
    max_policy_lag: int | str
    """Updates by which the acting policy may trail the learner: a number, or the config key
    that holds it."""
    one_learner: str | None = None
    """Why it cannot learn on ``runner.num_learners > 1`` data-parallel learners (None: it can)."""
    cuda_graph: bool = False
    """Its minibatch step can be recorded as one CUDA graph (``runner.cuda_graph``)."""

    def policy_lag_bound(self, cfg: RunConfig) -> int:
        """``max_policy_lag`` in ``cfg``."""
        lag = self.max_policy_lag
        return int(get_key(cfg, lag)) if isinstance(lag, str) else lag


ALGORITHM_FACTS: dict[str, AlgorithmFacts] = {
    "ppo": AlgorithmFacts("rollout", 0, cuda_graph=True),
    "appo": AlgorithmFacts("rollout", "appo.max_policy_lag", cuda_graph=True),
    "impala": AlgorithmFacts("rollout", "impala.max_policy_lag"),
    # a worker's gradient is computed on its local copy, then applied to the shared model
    "a3c": AlgorithmFacts("rollout", 1, one_learner="its workers share one optimizer"),
    "rnd": AlgorithmFacts(
        "rollout", "rnd.max_policy_lag", one_learner="it keeps its normalisers in one learner"
    ),
    # Q(lambda) learns off-policy: a lagged acting network only biases its traces
    "pqn": AlgorithmFacts("rollout", "pqn.max_policy_lag"),
    "dqn": AlgorithmFacts(
        "transitions", ANY_POLICY_LAG, one_learner="its replay buffer lives in one learner"
    ),
}
