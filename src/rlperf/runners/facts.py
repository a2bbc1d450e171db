"""What a runner declares about itself: its capabilities, and the checks that concern it alone.

Every rule of the form "runner X cannot do Y" is a field of :class:`RunnerFacts`. Each runner
class declares its own (``facts``, beside its ``name``); the registry collects them into
``RUNNER_FACTS``, which the config checks (:mod:`rlperf.training.checks`), the registry
itself (which envs to build, whether RND corrects for lag) and the tests' algorithm x runner
matrix read instead of lists of names. Adding a runner means its class, with its name and
facts, and a line in ``registry.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rlperf.config.schema import RunConfig


@dataclass(frozen=True)
class RunnerFacts:
    """One runner's capabilities."""

    data_kinds: frozenset[str]
    """What it produces: ``rollout`` (T steps of N envs) and/or ``transitions`` (DQN's)."""
    policy_lag: int
    """Updates by which the acting policy may trail the learner's (0: always current)."""
    engines: frozenset[str]
    """Env engines it can drive."""
    builds_own_envs: bool
    """Its worker processes build the envs (the learner's process builds none)."""
    data_parallel: bool = False
    """Accepts ``runner.num_learners > 1`` (each learner runs it with its own envs)."""
    compile: bool = False
    """Accepts ``runner.compile`` (torch.compile where it acts and learns)."""
    rnd: bool = False
    """Its actors can act with RND's policy (the extra intrinsic-value head)."""
    algorithms: frozenset[str] | None = None
    """The only algorithms it runs; None: every algorithm whose data and lag it serves."""
    cuda: bool = True
    """Its learner and actors may use a GPU (False: every process works on the CPU)."""
    max_workers: int | None = None
    """The most ``runner.num_workers`` it starts (None: as many as asked)."""
    recurrent: bool = False
    """Its actors act step by step with a recurrent state (the LSTM models)."""
    acts_on_learner_device: frozenset[str] = frozenset()
    """Data kinds for which it acts with the learner's own network (so on its device)."""
    on_ray: bool = False
    """Its actors are Ray actors (the ``runner.ray_*`` keys apply; needs ``rlperf[ray]``)."""
    check: Callable[[RunConfig], None] | None = None
    """Its own refusals (one-line ConfigError) of a config it is asked to run, beyond what
    the fields above tell the checker; called before anything is built."""
