"""What every part of the run configuration is made of: a section of fields, each field
declared with its default, its valid range and a one-line doc together.

A range is declared in the field's type (``learning_rate: PositiveFloat = 2.5e-4``):
``typing.Annotated`` carries it, so the type checker and the parser see a plain ``float``
while :func:`declared_ranges` finds the range for the validator, ``rlperf train --help``
and the tuning space's checks. An algorithm's section also declares its facts (what the
config checks must know before anything is built) and the checks that concern it alone.
"""

from __future__ import annotations

import functools
import math
import types
import typing
from dataclasses import FrozenInstanceError, dataclass, fields, is_dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from rlperf.core.errors import ConfigError

if TYPE_CHECKING:
    from rlperf.config.schema import RunConfig


@dataclass(frozen=True)
class Range:
    """The valid values of a numeric field: ``low`` to ``high``, each end open or closed."""

    low: float
    high: float = math.inf
    low_closed: bool = True
    high_closed: bool = False
    text: str = ""
    """How an error message and ``--help`` say it: "positive and finite"."""

    def holds(self, value: float) -> bool:
        """Whether ``value`` lies in the range (never for nan)."""
        above = value >= self.low if self.low_closed else value > self.low
        below = value <= self.high if self.high_closed else value < self.high
        return above and below

    def check(self, key: str, value: float) -> None:
        """ConfigError naming ``key`` unless ``value`` lies in the range."""
        if not self.holds(value):
            raise ConfigError(f"{key} must be {self.text}, got {value}")


POSITIVE = Range(0.0, low_closed=False, text="positive and finite")
NON_NEGATIVE = Range(0.0, text="zero or positive")
UNIT = Range(0.0, 1.0, high_closed=True, text="between 0 and 1")
UNIT_ABOVE_ZERO = Range(0.0, 1.0, low_closed=False, high_closed=True, text="in (0, 1]")
FINITE = Range(-math.inf, low_closed=False, text="a finite number")

PositiveInt = Annotated[int, POSITIVE]
PositiveFloat = Annotated[float, POSITIVE]
NonNegativeInt = Annotated[int, NON_NEGATIVE]
NonNegativeFloat = Annotated[float, NON_NEGATIVE]
Fraction = Annotated[float, UNIT]
"""A probability, a discount or a share: 0 to 1, both ends included."""
FractionAboveZero = Annotated[float, UNIT_ABOVE_ZERO]
FiniteFloat = Annotated[float, FINITE]
"""Any real number, signed (a return): only inf and nan are refused."""


class Section:
    """A part of the run configuration: assignable while a config is being put together
    (defaults, presets, files, flags), read-only once ``schema.freeze`` has marked it
    resolved.

    Not a frozen dataclass: presets, sweeps and the CLI build a config key by key, and only
    the resolved config that a run starts from must never change again."""

    _frozen: ClassVar[bool] = False

    def __setattr__(self, name: str, value: object) -> None:
        if self._frozen:
            raise FrozenInstanceError(
                f"cannot set {type(self).__name__}.{name}: a resolved config is read-only "
                "(build a new one with config.schema.thawed_copy)"
            )
        super().__setattr__(name, value)


ANY_POLICY_LAG = 2**31 - 1
"""``max_policy_lag`` of an off-policy algorithm: data from any earlier policy will do."""


@dataclass(frozen=True)
class AlgorithmFacts:
    """One algorithm's needs, read by the config checks before anything is built; each
    algorithm's ``data_spec`` states the same facts for the runners at run time, and a
    contract test holds the two together."""

    data_kind: Literal["rollout", "transitions"]
    """rollout: T steps of N envs from the acting policy; transitions: replay data."""
    max_policy_lag: int | None = None
    """Updates by which the acting policy may trail the learner; None: the section's own
    ``max_policy_lag`` setting."""
    one_learner: str | None = None
    """Why it cannot learn on ``runner.num_learners > 1`` data-parallel learners (None: it can)."""
    cuda_graph: bool = False
    """Its minibatch step can be recorded as one CUDA graph (``runner.cuda_graph``)."""
    q_values: bool = False
    """Its network outputs action values, not logits and a value: a trained agent plays
    greedily on them, and the deploy backends (which serve logits) refuse its runs."""

    def policy_lag_bound(self, section: AlgorithmSection) -> int:
        """The lag bound with ``section`` (the algorithm's settings) in force."""
        if self.max_policy_lag is not None:
            return self.max_policy_lag
        return int(section.max_policy_lag)  # type: ignore[attr-defined]


class AlgorithmSection(Section):
    """An algorithm's settings: its fields (with ranges and docs), its facts and its checks.

    A subclass declares ``facts`` and may override :meth:`check`; the run configuration has
    one field per algorithm section, named after the algorithm (``ppo``, ``pqn``, ...)."""

    facts: ClassVar[AlgorithmFacts]

    def check(self, cfg: RunConfig) -> None:
        """Refuse (ConfigError, one line) what the ranges alone cannot tell: values that
        must agree with each other or with the rest of ``cfg``."""

    def learner_batch_size(self, num_envs: int) -> int:
        """Samples in one gradient step of the algorithm's learner with ``num_envs`` envs
        (what ``runner.precision=auto`` times)."""
        raise NotImplementedError(f"{type(self).__name__} declares no learner batch size")


class RolloutMinibatches:
    """What an algorithm section that cuts each rollout of num_envs x num_steps into
    minibatches knows of them (PPO, RND, APPO, IMPALA, PQN): by their count
    (``num_minibatches``) or, in a section that has the field, their size (``minibatch_size``,
    RLlib's way; set exactly one of the two)."""

    num_steps: int
    num_minibatches: int | None

    def minibatch(self, batch_size: int) -> int:
        """Samples per minibatch of a batch of ``batch_size``: ``minibatch_size`` when set
        (at most the batch), else the batch split into ``num_minibatches``."""
        size = getattr(self, "minibatch_size", None)
        if size is not None:
            return min(size, batch_size)
        return max(batch_size // (self.num_minibatches or 1), 1)

    def learner_batch_size(self, num_envs: int) -> int:
        """One minibatch of a rollout of ``num_envs`` envs."""
        return self.minibatch(num_envs * self.num_steps)

    def check_one_minibatch_setting(self, section: str) -> None:
        """Refuse a section with both or neither of num_minibatches and minibatch_size."""
        if (self.num_minibatches is None) == (getattr(self, "minibatch_size", None) is None):
            raise ConfigError(
                f"set exactly one of {section}.num_minibatches and {section}.minibatch_size "
                "(the other to null)"
            )


def _range_of(hint: Any) -> Range | None:
    if typing.get_origin(hint) is Annotated:
        return next((a for a in hint.__metadata__ if isinstance(a, Range)), None)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return next((r for a in typing.get_args(hint) if (r := _range_of(a))), None)
    return None


@functools.cache
def declared_ranges(cls: type, prefix: str = "") -> dict[str, Range]:
    """Dotted key -> declared range of every field of dataclass ``cls`` (nested sections
    included) that declares one."""
    hints = typing.get_type_hints(cls, include_extras=True)
    out: dict[str, Range] = {}
    for f in fields(cls):
        hint = hints[f.name]
        if is_dataclass(hint):
            out.update(declared_ranges(hint, f"{prefix}{f.name}."))
        elif (found := _range_of(hint)) is not None:
            out[f"{prefix}{f.name}"] = found
    return out
