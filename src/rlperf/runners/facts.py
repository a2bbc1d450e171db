"""What rlperf knows about each runner, in one table.

Every rule of the form "runner X cannot do Y" is a field of :class:`RunnerFacts`: the
config checks (:mod:`rlperf.training.checks`), the registry (which envs to build, whether RND
corrects for lag) and the tests' algorithm x runner matrix all read ``RUNNER_FACTS``
instead of lists of names. Adding a runner means a row here and its factory in
``registry.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlperf.envs.facts import ENGINES as ALL_ENGINES


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


RUNNER_FACTS: dict[str, RunnerFacts] = {
    # rollouts, or (DQN) transitions interleaved with gradient steps in one process
    "inproc": RunnerFacts(
        frozenset({"rollout", "transitions"}),
        0,
        ALL_ENGINES,
        builds_own_envs=False,
        data_parallel=True,
        compile=True,
        rnd=True,
        # DQN's transitions are played by the network being trained, between its steps
        acts_on_learner_device=frozenset({"transitions"}),
    ),
    # the C++ engines run their own thread pools: behind worker processes they would only
    # add copies
    "subprocess": RunnerFacts(
        frozenset({"rollout"}),
        0,
        frozenset({"gymnasium"}),
        builds_own_envs=False,
        data_parallel=True,
        compile=True,
        rnd=True,
    ),
    # at least one update behind; the runner drops rollouts above the algorithm's bound
    "decoupled": RunnerFacts(frozenset({"rollout"}), 1, ALL_ENGINES, True, rnd=True),
    # a worker's local copy trails the shared model by the updates other workers applied
    # during its segment (A3C's Hogwild lag)
    # Its workers pickle the whole algorithm once at spawn; APPO's and IMPALA's shared
    # tensors do not survive that (their workers die at start), so only A3C runs here.
    # Its model lives in CPU shared memory: CUDA tensors would need CUDA IPC and one device
    # for every process, which it does not do. Its workers act step by step, so they can
    # carry an LSTM's state.
    "hogwild": RunnerFacts(
        frozenset({"rollout"}),
        1,
        ALL_ENGINES,
        True,
        algorithms=frozenset({"a3c"}),
        cuda=False,
        recurrent=True,
    ),
    # the play process acts with the weights of its last pull, updates behind the trainer
    "play-train": RunnerFacts(frozenset({"transitions"}), 1, ALL_ENGINES, True, max_workers=1),
    # synchronous (every actor acts with the current weights) when the algorithm needs lag
    # 0, asynchronous with the algorithm's lag bound otherwise
    "ray": RunnerFacts(frozenset({"rollout"}), 0, ALL_ENGINES, True, on_ray=True),
    # RLlib 1.1's rollout workers (the thesis's -w N): always synchronous, weights pushed to
    # every worker after each update
    "rllib": RunnerFacts(frozenset({"rollout"}), 0, ALL_ENGINES, True, on_ray=True),
}


def runners_with(fact: str) -> str:
    """The runners with ``fact``, as prose: ``inproc, subprocess and decoupled``."""
    names = [n for n, f in RUNNER_FACTS.items() if getattr(f, fact)]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
